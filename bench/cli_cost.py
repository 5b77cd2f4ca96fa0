"""CPU time of one CLI invocation (docs/benchmarks.md "CLI cost"): runs a command N times and
reports the children's user and system time per run (getrusage), and the wall time.
    python3 bench/cli_cost.py 200 build/src/cmd/gpupool --help
    python3 bench/cli_cost.py 200 build/src/cmd/gpupool submit -- true   # GPUPOOL_* set
"""
import os, resource, subprocess, sys, time
n = int(sys.argv[1]); cmd = sys.argv[2:]
before = resource.getrusage(resource.RUSAGE_CHILDREN)
t0 = time.monotonic()
for _ in range(n):
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
wall = time.monotonic() - t0
after = resource.getrusage(resource.RUSAGE_CHILDREN)
u = (after.ru_utime - before.ru_utime) / n * 1000
s = (after.ru_stime - before.ru_stime) / n * 1000
print(f"{' '.join(cmd[:3])}...: {u + s:.2f} ms CPU per run (user {u:.2f}, sys {s:.2f}), wall {wall / n * 1000:.2f} ms, n={n}")
