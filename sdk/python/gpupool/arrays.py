"""TaskArray: a handle on a job array (Client.create_tasks, docs/api.md "Job arrays"): its
elements' ids, their states read from the server, and the array started, stopped or waited for as
a whole."""

import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from .task import TERMINAL_STATES, Task

if TYPE_CHECKING:
    from .client import Client


class TaskArray:
    """A job array (Client.create_tasks): `id` ("a-7"), `task_ids` in index order, and `info`,
    the array as last read ({"id", "project", "array", "limit", "tasks", "states"})."""

    def __init__(self, client: "Client", info: Dict[str, Any]):
        self._client = client
        self.id: str = info["id"]
        self.info: Dict[str, Any] = info
        self.task_ids: List[str] = list(info["tasks"])

    def __repr__(self) -> str:
        spec = self.info["array"]
        return f"<gpupool.TaskArray {self.id} {spec!r} {len(self.task_ids)} tasks>"

    def __len__(self) -> int:
        return len(self.task_ids)

    def refresh(self) -> Dict[str, Any]:
        self.info = self._client._call("GET", f"/v1/arrays/{self.id}")
        return self.info

    @property
    def states(self) -> Dict[str, int]:
        """How many elements are in each state, read from the server: {"running": 10, ...}."""
        return {c["state"]: c["count"] for c in self.refresh()["states"]}

    def tasks(self, metrics: Optional[List[str]] = None) -> List[Task]:
        """The elements (Task objects, in index order, each with its array_index in `info`); with
        metrics=[...], each with `latest_metrics`."""
        return self._client.list_tasks(array=self.id, metrics=metrics)

    def start(self) -> "TaskArray":
        """Queues every held element (create_tasks(start=False))."""
        self.info = self._client._call("POST", f"/v1/arrays/{self.id}/release")
        return self

    def stop(self) -> "TaskArray":
        """Stops every element that has not ended."""
        self.info = self._client._call("POST", f"/v1/arrays/{self.id}/stop")
        return self

    def wait(self, timeout: Optional[float] = None, poll_interval: float = 1.0) -> "TaskArray":
        """Returns once every element has ended; TimeoutError after `timeout` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while set(self.states) - TERMINAL_STATES:
            if deadline is not None and time.monotonic() >= deadline:
                states = self.info["states"]
                raise TimeoutError(f"array {self.id} has elements still running after "
                                   f"{timeout} s: {states}")
            time.sleep(poll_interval)
        return self
