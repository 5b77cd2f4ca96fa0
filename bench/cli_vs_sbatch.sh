#!/usr/bin/env bash
# The CLI against Slurm's sbatch on this machine (docs/benchmarks.md "CLI cost", issue 12 §3):
# one process per submission, as a user's shell loop runs them, from 1 shell and from 8 shells at
# once, and the CPU one invocation costs (user + system of the child, getrusage).
#   bench/cli_vs_sbatch.sh                     # build/src/cmd/gpupool, 5 rounds of 200 and 8×50
#   GPUPOOL=/path/gpupool ROUNDS=3 bench/cli_vs_sbatch.sh
# Both sides submit held jobs (`submit --hold`, `sbatch -H`): the submission path alone, which each
# acknowledges once its controller has it — gpupool after its durable SQLite commit (fsynced WAL),
# slurmctld after writing its state asynchronously. The rounds alternate between the two and each
# figure is the median of ROUNDS. The gpupool server runs with --key-rate 0: its default 100
# signed requests/s per key would throttle 8 shells of one user (which is what it is for).
# Slurm needs root, munge and Debian's slurm-wlm (slurmctld, sbatch); without them only gpupool
# is measured, and the script says so.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GPUPOOL="${GPUPOOL:-$ROOT/build/src/cmd/gpupool}"
ROUNDS="${ROUNDS:-5}"
SERIAL="${SERIAL:-200}"    # submissions from one shell, per round
PARALLEL="${PARALLEL:-50}" # submissions from each of 8 shells, per round
WORK="$(mktemp -d /tmp/gpupool-cli-vs-sbatch.XXXXXX)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# rate N SHELLS CMD...: submissions per second of SHELLS shells each running CMD N times.
rate() {
  local n=$1 shells=$2 t0 t1
  shift 2
  t0=$(date +%s.%N)
  for _ in $(seq "$shells"); do
    (for _ in $(seq "$n"); do "$@" >/dev/null 2>>"$WORK/errors" || echo x >>"$WORK/failed"; done) &
  done
  wait
  t1=$(date +%s.%N)
  python3 -c "print(f'{$n * $shells / ($t1 - $t0):.1f}')"
}

# cpu N CMD...: milliseconds of CPU (user + system) of one run of CMD, over N runs.
cpu() {
  python3 - "$@" <<'EOF'
import os, resource, subprocess, sys
n = int(sys.argv[1]); cmd = sys.argv[2:]
before = resource.getrusage(resource.RUSAGE_CHILDREN)
for _ in range(n):
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
after = resource.getrusage(resource.RUSAGE_CHILDREN)
used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
print(f"{used / n * 1000:.2f}")
EOF
}

median() { python3 -c "import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }

echo "== gpupool server ($GPUPOOL)"
"$GPUPOOL" server --data-dir "$WORK/gpupool" --listen 127.0.0.1:0 --key-rate 0 \
  >"$WORK/server.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do
  grep -q "listening on" "$WORK/server.log" && break
  sleep 0.1
done
grep -q "listening on" "$WORK/server.log" || { cat "$WORK/server.log"; exit 1; }
set -a
# shellcheck disable=SC1091
. "$WORK/gpupool/credentials.env"
set +a
GPUPOOL_SUBMIT=("$GPUPOOL" submit --hold -- true)

SLURM=""
if [[ $EUID -eq 0 ]] && command -v slurmctld >/dev/null && command -v sbatch >/dev/null &&
  command -v munged >/dev/null; then
  echo "== slurmctld $(slurmctld -V | awk '{print $2}') (munge, held jobs)"
  pgrep -x munged >/dev/null || { mkdir -p /run/munge && chown munge: /run/munge 2>/dev/null; su -s /bin/sh munge -c munged || munged --force; }
  mkdir -p "$WORK/slurm/state"
  host=$(hostname -s)
  cat >"$WORK/slurm/slurm.conf" <<EOF
ClusterName=bench
SlurmctldHost=$host
SlurmUser=root
SlurmctldPort=16917
SlurmdPort=16918
AuthType=auth/munge
StateSaveLocation=$WORK/slurm/state
SlurmctldPidFile=$WORK/slurm/slurmctld.pid
SlurmctldLogFile=$WORK/slurm/slurmctld.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MaxJobCount=1000000
NodeName=n[1-4] NodeHostname=$host CPUs=2 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=n[1-4] Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$WORK/slurm/slurm.conf"
  slurmctld -D -f "$SLURM_CONF" >/dev/null 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do
    scontrol ping 2>/dev/null | grep -q UP && break
    sleep 0.1
  done
  scontrol ping | grep -q UP || { cat "$WORK/slurm/slurmctld.log"; exit 1; }
  SLURM=1
else
  echo "== Slurm: not measured (needs root, munge and Debian's slurm-wlm)"
fi
SBATCH_SUBMIT=(sbatch -H -Q -o /dev/null --wrap true)

declare -A R
for round in $(seq "$ROUNDS"); do
  R[g1]+=" $(rate "$SERIAL" 1 "${GPUPOOL_SUBMIT[@]}")"
  R[g8]+=" $(rate "$PARALLEL" 8 "${GPUPOOL_SUBMIT[@]}")"
  R[gc]+=" $(cpu 100 "${GPUPOOL_SUBMIT[@]}")"
  if [[ -n $SLURM ]]; then
    R[s1]+=" $(rate "$SERIAL" 1 "${SBATCH_SUBMIT[@]}")"
    R[s8]+=" $(rate "$PARALLEL" 8 "${SBATCH_SUBMIT[@]}")"
    R[sc]+=" $(cpu 100 "${SBATCH_SUBMIT[@]}")"
  fi
  echo "   round $round of $ROUNDS done"
done
if [[ -s $WORK/failed ]]; then
  echo "$(wc -l <"$WORK/failed") submissions failed; the first errors:"
  head -5 "$WORK/errors"
  exit 1
fi

echo
echo "median of $ROUNDS rounds (1 shell: $SERIAL submissions; 8 shells: 8 × $PARALLEL)"
printf '%-34s %12s %12s %18s\n' "" "1 shell /s" "8 shells /s" "CPU per run (ms)"
printf '%-34s %12s %12s %18s\n' "gpupool submit --hold -- true" "$(median ${R[g1]})" \
  "$(median ${R[g8]})" "$(median ${R[gc]})"
if [[ -n $SLURM ]]; then
  printf '%-34s %12s %12s %18s\n' "sbatch -H --wrap true" "$(median ${R[s1]})" \
    "$(median ${R[s8]})" "$(median ${R[sc]})"
fi
printf '%-34s %12s %12s %18s\n' "/bin/true (the floor)" "" "" "$(cpu 100 /bin/true)"
