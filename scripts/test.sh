#!/usr/bin/env bash
# Builds gpupool with warnings as errors and runs the whole test suite once (ctest: the C++ tests
# under ASan + UBSan, the OpenAPI document's validator, the Python SDK, the console's browser
# tests), the concurrency tests again under TSan (scripts/sanitize.sh), then the fuzz harnesses'
# smoke run (scripts/fuzz.sh --smoke).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
# The OpenAPI document's validator (a ctest): its pinned package
# (tools/openapi-check/package-lock.json) from npm.
[ -d tools/openapi-check/node_modules ] ||
  npm ci --prefix tools/openapi-check --silent --no-audit --no-fund
scripts/build.sh -DGPUPOOL_WERROR=ON
# Every suite is a ctest: the C++ tests, the OpenAPI validator, the Python SDK's unittest suites
# (sdk/python/CMakeLists.txt: `python3 -m unittest tests.test_…` against the gpupool binary built
# there) and the console's browser tests (web/CMakeLists.txt). Each runs once: every test that
# runs our C++ does so under AddressSanitizer, UBSan and LeakSanitizer in build-asan/ — unit,
# integration, the SDK's live suites against the ASan binary, and docker (dockerd starts here) —
# and the normal build (held to -Werror above) runs the rest: the console's browser and unit
# tests (TypeScript and Chromium; building the console again for build-asan/ would buy nothing,
# and console_e2e.Budgets is a timing budget an instrumented server would fail; the routes they
# call run under ASan in the integration and SDK suites), the suites that run none of our C++
# (the OpenAPI validator, promtool, the SDK's pure and install suites) and what ASan cannot run
# (scripts/sanitizers/suites.sh says what and why). Then build-tsan/: the server's and agent's
# concurrency tests under ThreadSanitizer (scripts/sanitize.sh).
. scripts/sanitizers/suites.sh
(cd build && ctest --output-on-failure -j "$(nproc)" --timeout 600 \
  -R "^(console_e2e|console_unit)\.|$asan_exclude")
scripts/sanitize.sh asan tsan
# The fuzz harnesses (fuzz/: clang, ASan + UBSan), a few seconds each over their corpus.
scripts/fuzz.sh --smoke
