#!/usr/bin/env bash
# Builds gpupool with warnings as errors and runs the whole test suite (ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh -DGPUPOOL_WERROR=ON
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 600
