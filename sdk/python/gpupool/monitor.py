"""Monitoring a task's resources from inside it (Monitor()) or from outside
(Monitor(task_id=..., client=...)), and reporting metrics that stop conditions and
`gpupool ls --metrics` read (report(step=..., val_acc=...)).

Inside a task the agent sets GPUPOOL_TASK_ID, GPUPOOL_METRICS_FILE, and the task's own token
GPUPOOL_TASK_TOKEN with the server's GPUPOOL_ENDPOINT (and GPUPOOL_CA_PEM, the text of the CA its
https certificate is verified against, when the agent was given one): Monitor() reads the task's usage with
that token, no user keys needed (it reads this task's usage and metrics, nothing else, while the
task runs). From outside, Monitor(task_id=...) uses the user's keys (arguments, environment,
profile).
"""

import json
import math
import os
import time
from typing import Any, Dict, Optional

from .client import Client

METRICS_FILE_ENV = "GPUPOOL_METRICS_FILE"
TASK_ID_ENV = "GPUPOOL_TASK_ID"
TASK_TOKEN_ENV = "GPUPOOL_TASK_TOKEN"
ENDPOINT_ENV = "GPUPOOL_ENDPOINT"


def report(**metrics: Any) -> None:
    """Appends one line of metrics (numbers or booleans) to the task's metrics file, e.g.
    report(step=1200, val_acc=0.953); the server picks it up within about a second."""
    path = os.environ.get(METRICS_FILE_ENV)
    if not path:
        raise RuntimeError(f"{METRICS_FILE_ENV} is not set: report() works inside a gpupool task")
    for name, value in metrics.items():
        ok = isinstance(value, (bool, int)) or (isinstance(value, float) and math.isfinite(value))
        if not ok:
            raise TypeError(f"metric {name} must be a finite number or a boolean, got {value!r}")
    line = json.dumps(metrics, separators=(",", ":")) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)


class Monitor:
    def __init__(self, task_id: Optional[str] = None, client: Optional[Client] = None):
        own = os.environ.get(TASK_ID_ENV)
        self.task_id = task_id or own
        if not self.task_id:
            raise ValueError(f"task_id is required outside a task ({TASK_ID_ENV} is not set)")
        token, endpoint = os.environ.get(TASK_TOKEN_ENV), os.environ.get(ENDPOINT_ENV)
        if client is None and self.task_id == own and token and endpoint:
            # inside the task: its own token, and the CA the agent passes (GPUPOOL_CA_PEM)
            client = Client.for_task(token, endpoint)
        self._client = client or Client()

    def _latest_usage(self) -> Dict[str, Any]:
        now = int(time.time() * 1000)
        m = self._client._call("GET", f"/v1/tasks/{self.task_id}/metrics",
                               query={"resolution": "raw", "from_ms": now - 60_000})
        return m["usage"][-1]["mean"] if m["usage"] else {}

    def get_gpu_utilization(self) -> Optional[float]:
        """% utilisation of this task's GPU(s), latest sample; None when not measured."""
        return self._latest_usage().get("gpu_util_pct")

    def get_memory_usage(self) -> Optional[int]:
        """MiB of GPU memory this task's processes hold, latest sample; None when not measured."""
        return self._latest_usage().get("gpu_mem_mib")

    def get_cpu_usage(self) -> Optional[int]:
        """CPU time per second of the task's cgroup, in thousandths of a core."""
        return self._latest_usage().get("cpu_milli")

    def get_metrics(self) -> Dict[str, Any]:
        """The latest reported metrics with the built-ins gpu_util, gpu_idle_s,
        interactive_idle_s, idle_s and runtime_s."""
        return self._client._call("GET", f"/v1/tasks/{self.task_id}/metrics")["latest"]
