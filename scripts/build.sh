#!/usr/bin/env bash
# Configures and builds gpupool into build/ (Release with debug info, ccache when present): every
# target (the binary, tests and benchmarks), or only the ones named with --target.
# Usage: scripts/build.sh [--target NAME]... [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."
targets=()
cmake_args=()
while (($#)); do
  case "$1" in
    --target)
      targets+=("${2:?--target needs a target name}")
      shift 2
      ;;
    *)
      cmake_args+=("$1")
      shift
      ;;
  esac
done
"$(pwd)/scripts/install-deps.sh"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${cmake_args[@]}" >/dev/null
ninja -C build "${targets[@]}"
