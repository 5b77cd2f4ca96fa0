#!/usr/bin/env bash
# Builds gpupool with warnings as errors and runs the whole test suite (ctest: C++, the OpenAPI
# document's validator, the Python SDK, the console's browser tests), then the fuzz harnesses'
# smoke run (scripts/fuzz.sh --smoke).
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
# The fuzz harnesses (fuzz/: clang, ASan + UBSan), a few seconds each over their corpus.
scripts/fuzz.sh --smoke
