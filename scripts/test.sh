#!/usr/bin/env bash
# Builds gpupool with warnings as errors and runs the whole test suite (ctest: C++, the OpenAPI
# document's validator, the Python SDK, the console's browser tests), then the C++ suite again
# under ASan + UBSan and the concurrency tests under TSan (scripts/sanitize.sh), then the fuzz
# harnesses' smoke run (scripts/fuzz.sh --smoke).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
# The OpenAPI document's validator (a ctest): its pinned package
# (tools/openapi-check/package-lock.json) from npm.
[ -d tools/openapi-check/node_modules ] ||
  npm ci --prefix tools/openapi-check --silent --no-audit --no-fund
scripts/build.sh -DGPUPOOL_WERROR=ON
cd build
# Every suite is a ctest: the C++ tests, the OpenAPI validator, the Python SDK's unittest suites
# (sdk/python/CMakeLists.txt: `python3 -m unittest tests.test_…` against the gpupool binary built
# here) and the console's browser tests (web/CMakeLists.txt).
ctest --output-on-failure -j "$(nproc)" --timeout 600
cd ..
# The sanitizer builds (scripts/sanitize.sh says what each runs and why): build-asan/, every
# ctest that runs our C++ under AddressSanitizer, UBSan and LeakSanitizer — unit, integration,
# the SDK's live suite against the ASan binary, and docker (dockerd starts here; its 13 tests
# take 70 s under ASan, docs/benchmarks.md §11); build-tsan/, the server's and agent's
# concurrency tests under ThreadSanitizer. Not under them: the console's browser and unit tests
# (TypeScript and Chromium; running them would mean building the console again in that folder,
# and console_e2e.Budgets is a timing budget that an instrumented server would fail; the server
# routes they call run under ASan in the integration and SDK suites) and the suites that run no
# code of ours (the OpenAPI validator, promtool, the SDK's pure and install suites).
scripts/sanitize.sh asan tsan
# The fuzz harnesses (fuzz/: clang, ASan + UBSan), a few seconds each over their corpus.
scripts/fuzz.sh --smoke
