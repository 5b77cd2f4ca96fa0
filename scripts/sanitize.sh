#!/usr/bin/env bash
# Builds gpupool with sanitizers and runs tests under them (scripts/test.sh, CI): "asan" is the
# C++ test suite under AddressSanitizer + UndefinedBehaviorSanitizer (and LeakSanitizer) in
# build-asan/; "tsan" is the server's and agent's concurrency tests under ThreadSanitizer in
# build-tsan/ (TSan and ASan cannot share a build). Any sanitizer report fails its test. The
# compile flags are the top-level CMakeLists.txt's (GPUPOOL_SANITIZE); the runtime options are
# below, and nowhere else. Each folder is built without benchmarks and without the web console
# (GPUPOOL_WEB=OFF: TypeScript, which the normal build already builds and tests).
# Usage: scripts/sanitize.sh [asan] [tsan]   (both when none is named)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
suites=("$@")
((${#suites[@]})) || suites=(asan tsan)

# A report aborts the process with a non-zero status (its test fails), and prints a stack.
# detect_leaks: LeakSanitizer works here (it needs ptrace of the process's own threads; it fails
# to run, saying so, where kernel.yama.ptrace_scope forbids that).
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:exitcode=1:detect_leaks=1:\
check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1:\
strict_string_checks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$root/scripts/sanitizers/lsan.supp:print_suppressions=0"
export TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:\
suppressions=$root/scripts/sanitizers/tsan.supp:print_suppressions=0"

# The suites: scripts/sanitizers/suites.sh (scripts/test.sh reads it too).
. scripts/sanitizers/suites.sh

# Warnings are not errors here: g++ 12's flow analysis on instrumented code warns falsely (e.g.
# -Wmaybe-uninitialized inside libstdc++'s std::function under -fsanitize=address); the normal
# build (scripts/test.sh) holds the code to -Werror.
cmake_common=(-DGPUPOOL_BENCH=OFF -DGPUPOOL_WEB=OFF -DGPUPOOL_WERROR=OFF)
for suite in "${suites[@]}"; do
  case "$suite" in
    asan)
      scripts/build.sh --dir build-asan -DGPUPOOL_SANITIZE=address,undefined "${cmake_common[@]}"
      (cd build-asan && ctest --output-on-failure -j "$(nproc)" --timeout 600 -E "$asan_exclude")
      ;;
    tsan)
      targets=()
      for t in "${tsan_tests[@]}"; do targets+=(--target "$t"); done
      scripts/build.sh --dir build-tsan -DGPUPOOL_SANITIZE=thread "${cmake_common[@]}" \
        "${targets[@]}"
      regex="^($(IFS='|'; echo "${tsan_tests[*]}"))\\."
      (cd build-tsan && ctest --output-on-failure -j "$(nproc)" --timeout 600 -R "$regex" \
        -E "$tsan_exclude")
      ;;
    *) echo "unknown suite $suite (asan, tsan)" >&2; exit 2 ;;
  esac
done
