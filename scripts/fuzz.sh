#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ (clang with ASan + UBSan, in build-fuzz/) and runs each
# for a while over a working copy of its checked-in corpus (fuzz/corpus/<harness>/, which it
# never changes unless --merge is given). Prints executions and crashes per harness; exits 1 when
# any harness crashed (the input is kept under build-fuzz/crashes/<harness>/).
# Usage: scripts/fuzz.sh [--seconds N] [--runs N] [--smoke] [--merge] [harness...]
#   --seconds N  time per harness (default 60; with --runs: no time limit unless given)
#   --runs N     executions per harness: each stops after N (the issue's goal: 1000000)
#   --smoke      5 seconds per harness (CI: scripts/test.sh)
#   --merge      add the inputs that found new coverage to fuzz/corpus/<harness>/
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=
runs_goal=0
merge=0
harnesses=()
while (($#)); do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
    --runs) runs_goal="${2:?--runs needs a number}"; shift 2 ;;
    --smoke) seconds=5; shift ;;
    --merge) merge=1; shift ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) harnesses+=("$1"); shift ;;
  esac
done
if [ -z "$seconds" ]; then
  if [ "$runs_goal" -gt 0 ]; then seconds=0; else seconds=60; fi  # libFuzzer: 0 is no limit
fi
if [ ${#harnesses[@]} -eq 0 ]; then
  for d in fuzz/corpus/*/; do harnesses+=("$(basename "$d")"); done
fi
command -v clang++ >/dev/null || { echo "clang++ is missing: scripts/install-deps.sh --test" >&2; exit 1; }
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGPUPOOL_FUZZ=ON -DGPUPOOL_BENCH=OFF -DGPUPOOL_WERROR=ON >/dev/null
ninja -C build-fuzz "${harnesses[@]}"
failed=0
printf '%-22s %12s %8s %8s %10s\n' harness executions seconds crashes corpus
for h in "${harnesses[@]}"; do
  work="build-fuzz/corpus/$h"
  crashes="build-fuzz/crashes/$h"
  mkdir -p "$work" "$crashes"
  log="build-fuzz/$h.log"
  rc=0
  "build-fuzz/fuzz/$h" -max_total_time="$seconds" -runs="$((runs_goal > 0 ? runs_goal : -1))" \
    -print_final_stats=1 \
    -artifact_prefix="$crashes/" "$work" "fuzz/corpus/$h" >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  found=$(find "$crashes" -type f | wc -l)
  printf '%-22s %12s %8s %8s %10s\n' "$h" "${runs:-?}" "${took:-$seconds}" "$found" \
    "$(find "$work" -type f | wc -l)"
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    failed=1
    echo "--- $h failed (exit $rc); the end of $log:" >&2
    tail -30 "$log" >&2
  fi
  if [ "$merge" -eq 1 ]; then
    "build-fuzz/fuzz/$h" -merge=1 "fuzz/corpus/$h" "$work" >>"$log" 2>&1
  fi
done
exit "$failed"
