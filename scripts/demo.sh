#!/usr/bin/env bash
# The simulator's demo: builds gpupool and replays the FGD paper's experiment on the shipped
# Alibaba trace slice, printing our policies beside the published results and writing the
# plot of unallocated GPU % against arrived workload to out/compare.svg.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --target gpupool
mkdir -p out
build/src/cmd/gpupool sim compare --trace-dir data/openb --variants default \
  --seeds 42,43,44,45,46 --plot out/compare.svg
