#!/usr/bin/env bash
# The product's main job: installs what it needs (Debian 12 packages), builds gpupool and runs a
# whole GPU pool on this machine (`gpupool up`: control plane + agent; real GPUs through NVML when
# the driver is there, simulated ones otherwise). Extra arguments go to `gpupool up`. Builds only
# the `gpupool` binary, not the tests and benchmarks (scripts/test.sh builds those).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --target gpupool
exec build/src/cmd/gpupool up "$@"
