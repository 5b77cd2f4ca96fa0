#!/usr/bin/env bash
# Configures and builds gpupool into build/ (Release with debug info, ccache when present): every
# target (the binary, tests and benchmarks), or only the ones named with --target; --dir builds
# into another folder (scripts/test.sh's sanitizer builds: build-asan/, build-tsan/).
# Usage: scripts/build.sh [--dir FOLDER] [--target NAME]... [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build
targets=()
cmake_args=()
while (($#)); do
  case "$1" in
    --dir)
      dir="${2:?--dir needs a folder}"
      shift 2
      ;;
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
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${cmake_args[@]}" >/dev/null
ninja -C "$dir" "${targets[@]}"
