"""Job: a handle on a distributed job (Client.create_task(nodes=N), docs/sdk.md "Distributed
jobs"): N member tasks placed together, each with torchrun's rendezvous (MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE, ...) in its environment, that share their fate. Like Task, its
lifecycle fields are read from the server on each access; `info` is the job as last read."""

import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from .task import STOPPED, TERMINAL_STATES, Task, status_of

if TYPE_CHECKING:
    from .client import Client

TOPOLOGIES = ("preferred", "required")
MAX_NODES = 4096


def job_fields(nodes: Any, members_per_node: Any, topology_label: Optional[str],
               topology: Optional[str], gpu_share: Any) -> Optional[Dict[str, Any]]:
    """The fields a JobSubmit adds to a TaskSubmit (None: not a job: nodes was not given),
    checked here so that a mistake is a ValueError naming the argument before any request."""
    if nodes is None:
        extra = [name for name, value in (("members_per_node", members_per_node),
                                          ("topology_label", topology_label),
                                          ("topology", topology)) if value is not None]
        if extra:
            raise ValueError(f"{', '.join(extra)} only apply to a distributed job: "
                             "give nodes=N (N >= 2 members) too")
        return None
    if isinstance(nodes, bool) or not isinstance(nodes, int):
        raise TypeError(f"nodes must be an int (how many members), got {type(nodes).__name__}")
    if not 2 <= nodes <= MAX_NODES:
        raise ValueError(f"nodes must be 2..{MAX_NODES} (how many members the job has), got "
                         f"{nodes}; for a single task leave nodes out")
    if gpu_share is not None:
        raise ValueError("gpu_share cannot be used with nodes: a distributed job's members use "
                         "whole GPUs (gpu_count) or a MIG instance (mig_profile)")
    body: Dict[str, Any] = {"nodes": nodes}
    if members_per_node is not None:
        if isinstance(members_per_node, bool) or not isinstance(members_per_node, int):
            raise TypeError(f"members_per_node must be an int, got "
                            f"{type(members_per_node).__name__}")
        if not 1 <= members_per_node <= MAX_NODES:
            raise ValueError(f"members_per_node must be 1..{MAX_NODES} (at most this many members "
                             f"on one node), got {members_per_node}")
        body["members_per_node"] = members_per_node
    if topology is not None:
        if topology not in TOPOLOGIES:
            raise ValueError(f"topology must be 'preferred' or 'required', got {topology!r}")
        if not topology_label:
            raise ValueError(f"topology={topology!r} needs topology_label (the node label whose "
                             "one value the members are kept under, e.g. 'rack')")
        body["topology"] = topology
    if topology_label is not None:
        if not isinstance(topology_label, str) or not topology_label:
            raise ValueError(f"topology_label must be a node label's name (e.g. 'rack'), got "
                             f"{topology_label!r}")
        body["topology_label"] = topology_label
    return body


class Job:
    """A distributed job: `id` ("j-7"), `task_ids` (its members' tasks, in index order: the
    member at index i has RANK i) and `info`, the job as last read ({"id", "project", "name",
    "state", "reason", "exit_code", "first_failed", "nodes", "members_per_node",
    "topology_label", "topology", "master_addr", "master_port", "members"})."""

    def __init__(self, client: "Client", info: Dict[str, Any]):
        self._client = client
        self.id: str = info["id"]
        self.info: Dict[str, Any] = info
        self.task_ids: List[str] = [m["task"] for m in info["members"]]

    def __repr__(self) -> str:
        return (f"<gpupool.Job {self.id} {self.info.get('name', '')!r} "
                f"{len(self.task_ids)} members {self.info['state']}>")

    def __len__(self) -> int:
        return len(self.task_ids)

    # --- read from the server on each access ---
    def refresh(self) -> Dict[str, Any]:
        """Reads the job and its members again into `info`."""
        self.info = self._client._call("GET", f"/v1/jobs/{self.id}")
        return self.info

    @property
    def state(self) -> str:
        """The job's exact state: pending until every member is placed, running once all run,
        succeeded when all succeeded, else the state of the member that ended it."""
        return self.refresh()["state"]

    @property
    def status(self) -> str:
        """Task.status's coarse lifecycle: CREATED (held), QUEUED, STARTING, RUNNING, STOPPED."""
        return status_of(self.refresh())

    @property
    def reason(self) -> str:
        return self.refresh()["reason"]

    @property
    def exit_code(self) -> int:
        """The exit code of the member whose failure ended the job (0 when none failed)."""
        return self.refresh()["exit_code"]

    @property
    def first_failed(self) -> str:
        """The task id of the member whose end ended the job; "" when none did."""
        return self.refresh()["first_failed"]

    @property
    def master_addr(self) -> str:
        """Member 0's node address (MASTER_ADDR) while the job is placed, else ""."""
        return self.refresh()["master_addr"]

    @property
    def master_port(self) -> int:
        """MASTER_PORT of the current run; 0 while not placed."""
        return self.refresh()["master_port"]

    @property
    def members(self) -> List[Dict[str, Any]]:
        """The members' records, in index order: {"index" (its RANK), "task" (its task id),
        "state", "reason", "node", "address", "exit_code", "ended_by" (the task id of the member
        whose end ended this one's run; "" when its own)}."""
        return list(self.refresh()["members"])

    @property
    def name(self) -> str:
        return self.info.get("name", "")

    def member(self, index: int) -> Task:
        """The Task of member `index` (its RANK): its logs, files, metrics and events."""
        return self._client.get_task(self._task_id(index))

    def tasks(self) -> List[Task]:
        """Every member's Task, in index order (one request per member)."""
        return [self._client.get_task(t) for t in self.task_ids]

    def _task_id(self, index: int) -> str:
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"member must be a member's index (its RANK), got "
                            f"{type(index).__name__}")
        if not 0 <= index < len(self.task_ids):
            raise ValueError(f"member must be 0..{len(self.task_ids) - 1} (job {self.id} has "
                             f"{len(self.task_ids)} members), got {index}")
        return self.task_ids[index]

    # --- actions ---
    def start(self) -> "Job":
        """Queues a job created held (Client.create_task(nodes=N)): its members are placed
        together once all of them fit."""
        self.info = self._client._call("POST", f"/v1/jobs/{self.id}/release")
        return self

    def stop(self) -> "Job":
        """Stops every member that has not ended; a pending job never starts."""
        self.info = self._client._call("POST", f"/v1/jobs/{self.id}/stop")
        return self

    def wait(self, timeout: Optional[float] = None, poll_interval: float = 1.0) -> "Job":
        """Returns once the job has ended (status STOPPED) and every member with it;
        TimeoutError after `timeout` s. A restartable job whose node was lost is queued again
        as a whole, and waited for."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ended(self.refresh()):
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {self.id} is still {self.info['state']} after "
                                   f"{timeout} s")
            time.sleep(poll_interval if deadline is None
                       else max(0.0, min(poll_interval, deadline - time.monotonic())))
        return self

    @staticmethod
    def _ended(info: Dict[str, Any]) -> bool:
        return (status_of({"state": info["state"]}) == STOPPED
                and all(m["state"] in TERMINAL_STATES for m in info["members"]))

    def logs(self, member: Optional[int] = None, stream: str = "stdout",
             tail: Optional[int] = None, errors: str = "replace") -> str:
        """The output of member `member` (its index, RANK) as Task.logs gives it; with no member,
        every member's, in index order, each line prefixed with "[RANK] " (member 0's lines,
        then member 1's, …). stream: "stdout", "stderr" or "metrics"; tail=N: each member's last
        N lines. To follow one member's output as it arrives: job.member(i).logs(follow=True)."""
        if member is not None:
            return self._handle(self._task_id(member)).logs(stream=stream, tail=tail,
                                                            errors=errors)
        out: List[str] = []
        for index, task_id in enumerate(self.task_ids):
            text = self._handle(task_id).logs(stream=stream, tail=tail, errors=errors)
            lines = text.split("\n")  # only "\n": a progress bar's "\r" stays in its line
            if lines[-1] == "":
                lines.pop()
            out.extend(f"[{index}] {line}\n" for line in lines)
        return "".join(out)

    def _handle(self, task_id: str) -> Task:
        """A member's Task for its requests (logs) without reading it first: its `info` holds
        only the id."""
        return Task(self._client, {"id": task_id, "state": ""})
