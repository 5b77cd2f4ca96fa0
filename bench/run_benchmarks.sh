#!/usr/bin/env bash
# Builds gpupool with its benchmarks, runs them and the full FGD experiment, and prints the figures
# recorded in docs/benchmarks.md. Each figure is the best of REPS runs (the machine may be shared).
#   bench/run_benchmarks.sh                 # REPS=3, build dir ./build
#   REPS=5 BUILD_DIR=/tmp/b bench/run_benchmarks.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
REPS="${REPS:-3}"
SHARED_TRACES="$ROOT/../shared/traces"
cd "$ROOT"

echo "== build ($BUILD)"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DGPUPOOL_WERROR=ON -DGPUPOOL_BENCH=ON >/dev/null
ninja -C "$BUILD" gpupool schedule_bench memory_bench store_bench api_bench scale_bench \
  retention_bench agent_bench agent_cpu_bench >/dev/null
GPUPOOL="$BUILD/src/cmd/gpupool"

# best_fgd_ms DIR VARIANT SEED POLICY: best elapsed_ms of REPS runs of one FGD experiment.
best_fgd_ms() {
  local dir=$1 variant=$2 seed=$3 policy=$4 best="" ms
  for _ in $(seq "$REPS"); do
    ms=$("$GPUPOOL" sim fgd --nodes "$dir/openb_node_list_gpu_node.csv" \
      --pods "$dir/openb_pod_list_$variant.csv" --arrivals "$dir/arrivals/$variant/seed-$seed.txt" \
      --policy "$policy" --seed "$seed" --json |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["elapsed_ms"])')
    best=$(python3 -c "print(min(float('$ms'), float('${best:-inf}')))")
  done
  printf '%.0f' "$best"
}

echo
echo "== (a) full FGD experiment, default variant, seed 42 (10,866 arrivals on 1,213 nodes)"
echo "   $GPUPOOL sim fgd --nodes data/openb/openb_node_list_gpu_node.csv \\"
echo "     --pods data/openb/openb_pod_list_default.csv \\"
echo "     --arrivals data/openb/arrivals/default/seed-42.txt --policy POLICY --seed 42 --json"
for policy in fgd fgd-plan best-fit; do
  printf '   %-11s elapsed_ms (best of %s): %s\n' "$policy" "$REPS" \
    "$(best_fgd_ms data/openb default 42 "$policy")"
done

echo
echo "== (b) ScheduleOnce decisions/s, 5,000 nodes x 8 GPUs, empty -> 90 % GPU allocated"
echo "   $BUILD/bench/schedule_bench --benchmark_repetitions=$REPS"
json="$(mktemp)"
context="$(mktemp)"
trap 'rm -f "$json" "$context"' EXIT
"$BUILD/bench/schedule_bench" --benchmark_repetitions="$REPS" \
  --benchmark_out="$json" --benchmark_out_format=json >/dev/null 2>"$context"
# Google Benchmark's context: the machine and its load while the benchmark ran.
grep -E "^Run on|^Load Average|WARNING" "$context" | sed 's/^/   /' || true
python3 - "$json" <<'EOF'
import json, sys
runs = [b for b in json.load(open(sys.argv[1]))["benchmarks"] if b.get("run_type") == "iteration"]
best = {}
for b in runs:
    name = b["run_name"]
    if name not in best or b["items_per_second"] > best[name]["items_per_second"]:
        best[name] = b
for name, b in best.items():
    print(f"   {name:32s} {b['items_per_second']:>10,.0f} decisions/s (CPU time; best of "
          f"{sum(r['run_name'] == name for r in runs)}), wall {b['real_time']:,.0f} ms and CPU "
          f"{b['cpu_time']:,.0f} ms per fill of {b['decisions_per_fill']:,.0f} decisions, "
          f"final alloc {b['final_alloc_pct']:.1f} %")
EOF

echo
echo "== (c) resident memory per node, ClusterState + policy, 50 % of GPU capacity placed"
echo "   $BUILD/bench/memory_bench best-fit fgd fgd-plan"
"$BUILD/bench/memory_bench" best-fit fgd fgd-plan | sed 's/^/   /'

echo
echo "== (d) control plane: durable SqliteStore batches/s (1 and 64 writers)"
echo "   $BUILD/bench/store_bench"
"$BUILD/bench/store_bench" | sed 's/^/   /'

echo
echo "== (e) control plane: signed durable submissions/s (64 clients, real server process),"
echo "   listing 10,000 tasks, a scheduling pass over 10,000 pending tasks on 1,000 nodes"
echo "   $BUILD/bench/api_bench --clients 64 --seconds 5 --tasks 10000 --nodes 1000"
"$BUILD/bench/api_bench" --clients 64 --seconds 5 --tasks 10000 --nodes 1000 2>/dev/null |
  grep -v '^gpupool server' | sed 's/^/   /'

echo
echo "== (f) node agent: submit -> process running on an idle node (gpupool up, 200 tasks)"
echo "   $BUILD/bench/agent_bench --tasks 200"
"$BUILD/bench/agent_bench" --tasks 200 2>/dev/null | sed 's/^/   /'

echo
echo "== (g) node agent: its own CPU use, 8 simulated GPUs sampled at 1 Hz, idle and with 8 tasks"
echo "   writing a line of output and a metrics line per second (real server and agent processes)"
echo "   $BUILD/bench/agent_cpu_bench --seconds 30 --warmup 10"
"$BUILD/bench/agent_cpu_bench" --seconds 30 --warmup 10 2>/dev/null | sed 's/^/   /'

echo
echo "== (h) control plane at scale: 200,000 submissions placed as they come on 1,000 and 10,000"
echo "   nodes x 8 A100-80GB (64 clients, real server process; at most 120 s per size)"
echo "   $BUILD/bench/scale_bench --nodes 1000,10000 --tasks 200000 --clients 64 --seconds 120"
"$BUILD/bench/scale_bench" --nodes 1000,10000 --tasks 200000 --clients 64 --seconds 120 \
  2>/dev/null | grep -v '^gpupool server' | sed 's/^/   /'

echo
echo "== (i) control plane memory under a long history: 1,000,000 tasks submitted and finished"
echo "   (real server process, --retain-finished 10s): server RSS every 100,000"
echo "   $BUILD/bench/retention_bench --tasks 1000000 --retain-s 10"
"$BUILD/bench/retention_bench" --tasks 1000000 --retain-s 10 2>/dev/null |
  grep -v '^gpupool server' | sed 's/^/   /'

echo
echo "== (j) the GPU-memory interposer: allocation + free pairs, direct vs through the shim"
echo "   (fake driver; built only where cuda.h and Google Benchmark are found)"
echo "   $BUILD/bench/cudashim_bench --benchmark_repetitions=$REPS"
if ninja -C "$BUILD" cudashim_bench >/dev/null 2>&1; then
  "$BUILD/bench/cudashim_bench" --benchmark_repetitions="$REPS" \
    --benchmark_report_aggregates_only=true 2>/dev/null | grep median | sed 's/^/   /'
else
  echo "   ABSENT: cudashim_bench is not built here (no cuda.h or no Google Benchmark)"
fi

echo
echo "== shared traces ($SHARED_TRACES/openb): variants not in data/openb, fgd, seed 42"
if [[ -d "$SHARED_TRACES/openb" ]]; then
  found=0
  for pods in "$SHARED_TRACES"/openb/openb_pod_list_*.csv; do
    variant="$(basename "$pods" .csv)"
    variant="${variant#openb_pod_list_}"
    [[ -f "data/openb/openb_pod_list_$variant.csv" ]] && continue
    if [[ ! -f "$SHARED_TRACES/openb/arrivals/$variant/seed-42.txt" ]]; then
      echo "   $variant: no arrivals/$variant/seed-42.txt, skipped"
      continue
    fi
    found=1
    printf '   %-11s fgd elapsed_ms (best of %s): %s\n' "$variant" "$REPS" \
      "$(best_fgd_ms "$SHARED_TRACES/openb" "$variant" 42 fgd)"
  done
  [[ $found == 1 ]] || echo "   no variant beyond data/openb's there"
else
  echo "   ABSENT: $SHARED_TRACES/openb not found; only the data/openb figures above apply."
fi
