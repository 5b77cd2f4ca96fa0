#!/usr/bin/env bash
# Builds gpupool with warnings as errors and runs the whole test suite (ctest: C++, the OpenAPI
# document's validator, the Python SDK).
set -euo pipefail
cd "$(dirname "$0")/.."
# The OpenAPI document's validator (a ctest): node and npm from Debian unless the machine has
# them, then its pinned package (tools/openapi-check/package-lock.json) from npm.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
[ -d tools/openapi-check/node_modules ] ||
  npm ci --prefix tools/openapi-check --silent --no-audit --no-fund
scripts/build.sh -DGPUPOOL_WERROR=ON
cd build
# Every suite is a ctest: the C++ tests, the OpenAPI validator, and the Python SDK's unittest
# suites (sdk/python/CMakeLists.txt: `python3 -m unittest tests.test_…` against the gpupool
# binary built here).
ctest --output-on-failure -j "$(nproc)" --timeout 600
