"""Task: a handle on one task of the pool. Its lifecycle fields (status, state, runtime, ...) are
read from the server on each access, so a loop such as `while task.status != "STOPPED"` sees the
task move; `task.info` is the record as last read, without a request. Its workspace's snapshots
(snapshot(), snapshots(), resume()) are snapshots.py's Snapshot records; the volumes it mounts
volumes.py's VolumeMount, the datasets datasets.py's DatasetMount."""

import base64
import datetime
import time
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Union

from .datasets import DatasetMount
from .snapshots import Snapshot, snapshot_id
from .volumes import VolumeMount

if TYPE_CHECKING:
    from .client import Client

# The coarse lifecycle a GPU-cloud user expects, from the exact state (docs/api.md "Tasks").
CREATED, QUEUED, STARTING, RUNNING, STOPPED = "CREATED", "QUEUED", "STARTING", "RUNNING", "STOPPED"
TERMINAL_STATES = frozenset({"succeeded", "failed", "stopped", "lost"})
_STATUS_OF_STATE = {"pending": QUEUED, "preempted": QUEUED, "scheduled": STARTING,
                    "starting": STARTING, "running": RUNNING, "succeeded": STOPPED,
                    "failed": STOPPED, "stopped": STOPPED, "lost": STOPPED}
# How long a snapshot waits for the task's checkpoint when the task does not say (its
# checkpoint_timeout_ms 0), and how much longer the server waits for the node to store it.
DEFAULT_CHECKPOINT_TIMEOUT_S = 30.0
SNAPSHOT_GRACE_S = 120.0


def status_of(info: Dict[str, Any]) -> str:
    """CREATED (held, not started), QUEUED, STARTING, RUNNING or STOPPED (ended, for any reason:
    `state`, `exit_code` and `reason` say how)."""
    if info["state"] == "pending" and info.get("held"):
        return CREATED
    return _STATUS_OF_STATE[info["state"]]


class Task:
    def __init__(self, client: "Client", info: Dict[str, Any]):
        self._client = client
        self.id: str = info["id"]
        self.info: Dict[str, Any] = info
        # With Client.list_tasks(metrics=[...]): the latest value of each metric asked for.
        self.latest_metrics: Dict[str, float] = {}

    def __repr__(self) -> str:
        return f"<gpupool.Task {self.id} {self.info.get('name', '')!r} {self.info['state']}>"

    # --- read from the server on each access ---
    def refresh(self) -> Dict[str, Any]:
        """Reads the task again (with its pending reason and queue position) into `info`."""
        self.info = self._client._call("GET", f"/v1/tasks/{self.id}")
        return self.info

    @property
    def status(self) -> str:
        return status_of(self.refresh())

    @property
    def state(self) -> str:
        return self.refresh()["state"]

    @property
    def exit_code(self) -> int:
        return self.refresh()["exit_code"]

    @property
    def reason(self) -> str:
        return self.refresh()["reason"]

    @property
    def runtime(self) -> datetime.timedelta:
        # The server's count, as of its answer (GET /v1/tasks/{id}: runtime_ms).
        return datetime.timedelta(milliseconds=self.refresh()["runtime_ms"])

    @property
    def node(self) -> Optional[str]:
        placement = self.refresh().get("placement")
        return placement["node"] if placement else None

    @property
    def name(self) -> str:
        return self.info.get("name", "")

    @property
    def volumes(self) -> List[VolumeMount]:
        """The volumes it mounts (create_task(volumes=...)), as the server resolved them: each
        VolumeMount's `volume` is the volume's name, with its `volume_id`, `path`, `read_only`
        and `shared`. Fixed at submission: read from `info`, without a request."""
        return [VolumeMount.from_info(m) for m in self.info.get("volumes", [])]

    @property
    def datasets(self) -> List[DatasetMount]:
        """The datasets it mounts read-only (create_task(datasets=...)), as the server resolved
        them at submission: each DatasetMount's `version` is the number it sees (also where the
        latest was asked for), with the `dataset_id`, `project`, `path` and `manifest`. Read from
        `info`, without a request."""
        return [DatasetMount.from_info(m) for m in self.info.get("datasets", [])]

    @property
    def run(self) -> int:
        """Its runs so far: each placement starts the next (1 in its first; 2 once resumed,
        preempted and placed again, ...); 0 before it first runs."""
        return self.refresh()["run"]

    @property
    def resume_from(self) -> str:
        """The snapshot its next (or current) run starts from ("s-12"); "" for a fresh
        workspace."""
        return self.refresh()["resume_from"]

    @property
    def work_lost(self) -> datetime.timedelta:
        """The work of its last interruption (a stop, preemption, lost node) done after the
        snapshot it resumes from: what it does again."""
        return datetime.timedelta(milliseconds=self.refresh()["work_lost_ms"])

    # --- actions ---
    def start(self) -> "Task":
        """Queues a task created held (Client.create_task): the scheduler places it when it fits."""
        self.info = self._client._call("POST", f"/v1/tasks/{self.id}/release")
        return self

    def stop(self, discard: bool = False) -> "Task":
        """Stops it (SIGTERM, then SIGKILL after 10 s); a pending one never starts. A running
        task's workspace is snapshotted first (trigger "stop"), so that resume() continues from
        it, unless discard=True."""
        self.info = self._client._call("POST", f"/v1/tasks/{self.id}/stop",
                                       body={"discard": True} if discard else None)
        return self

    def snapshot(self, image: bool = False, timeout: Optional[float] = None) -> Snapshot:
        """Snapshots its workspace now (it must be running) and returns the Snapshot once it is
        stored. A task that handles the checkpoint signal (gpupool.checkpoint) is asked to
        checkpoint first, then it is frozen while its changed files are read. `image=True` (a
        task with an image) also saves its container as an image: the task resumed from this
        snapshot, or a task created from it, runs in it. The server answers within the task's
        checkpoint timeout plus 2 minutes; `timeout` (s) is by default a minute more than
        that."""
        if timeout is None:
            checkpoint_s = (self.info.get("checkpoint_timeout_ms") or 0) / 1000
            timeout = (checkpoint_s or DEFAULT_CHECKPOINT_TIMEOUT_S) + SNAPSHOT_GRACE_S + 60
        body = {"image": True} if image else None
        return Snapshot.from_info(self._client._call("POST", f"/v1/tasks/{self.id}/snapshots",
                                                     body=body, timeout=timeout))

    def snapshots(self) -> List[Snapshot]:
        """Its snapshots, oldest first."""
        return self._client.list_snapshots(task_id=self.id)

    def resume(self, snapshot: Union[None, str, Snapshot] = None) -> "Task":
        """Queues an ended (stopped, failed) task again: its next run starts from `snapshot`
        (one of its own: a Snapshot or "s-12"), by default its latest."""
        body = None if snapshot is None else {"snapshot": snapshot_id(snapshot, "snapshot")}
        self.info = self._client._call("POST", f"/v1/tasks/{self.id}/resume", body=body)
        return self

    def delete(self) -> None:
        """Deletes an ended task with its files and output."""
        self._client._call("DELETE", f"/v1/tasks/{self.id}")

    def wait(self, timeout: Optional[float] = None, poll_interval: float = 1.0) -> "Task":
        """Returns once the task has ended (status STOPPED); TimeoutError after `timeout` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while status_of(self.refresh()) != STOPPED:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"task {self.id} is still {self.info['state']} after "
                                   f"{timeout} s")
            time.sleep(poll_interval if deadline is None
                       else max(0.0, min(poll_interval, deadline - time.monotonic())))
        return self

    def logs(self, stream: str = "stdout", follow: bool = False, tail: Optional[int] = None,
             errors: str = "replace"):
        """The task's output: all of `stream` ("stdout", "stderr" or "metrics") as a str, or
        with follow=True an iterator of text chunks as they arrive until the task has ended
        and its last bytes are in. `tail=N` starts at its last N lines."""
        chunks = self._log_chunks(stream, follow, tail)
        if follow:
            return (c.decode("utf-8", errors) for c in chunks)
        return b"".join(chunks).decode("utf-8", errors)

    def _log_chunks(self, stream: str, follow: bool, tail: Optional[int]) -> Iterator[bytes]:
        offset: Optional[int] = None if tail is not None else 0
        while True:
            query = {"stream": stream, "max_bytes": 4 << 20}
            if offset is None:
                query["tail"] = tail
            else:
                query["offset"] = offset
            if follow:
                query["wait_ms"] = 20000
            page = self._client._call("GET", f"/v1/tasks/{self.id}/logs", query=query,
                                      timeout=self._client._transport.timeout + 25)
            data = base64.b64decode(page["data_b64"])
            if data:
                yield data
            offset = page["next_offset"]
            caught_up = offset >= page["size"]
            if caught_up and (not follow or page["complete"]):
                return

    def metrics(self, resolution: str = "raw", from_ms: Optional[int] = None,
                to_ms: Optional[int] = None) -> Dict[str, Any]:
        """Usage (1 Hz raw for 5 minutes, or "1m" for 24 hours) and the metrics it reported,
        with `latest` (docs/api.md "Logs and metrics")."""
        return self._client._call("GET", f"/v1/tasks/{self.id}/metrics",
                                  query={"resolution": resolution, "from_ms": from_ms,
                                         "to_ms": to_ms})

    def events(self) -> List[Dict[str, Any]]:
        return self._client._call("GET", f"/v1/tasks/{self.id}/events")["events"]

    def cost(self) -> Dict[str, Any]:
        return self._client._call("GET", f"/v1/tasks/{self.id}/cost")

    def upload(self, local_path, remote_path: str = "/root/") -> List[Dict[str, Any]]:
        return self._client.upload_files(self.id, local_path, remote_path)

    def download(self, remote_path: str, local_path: str) -> List[str]:
        return self._client.download_files(self.id, remote_path, local_path)

