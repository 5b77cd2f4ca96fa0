"""Snapshots of a task's workspace (docs/sdk.md "Snapshots and resuming"): the Snapshot record
the server answers with, and the checks of the arguments that name a snapshot or a checkpoint
signal (Task.resume, Client.create_task(from_snapshot=..., checkpoint_signal=...), ...)."""

import dataclasses
import datetime
import re
import signal
from typing import Any, Dict, Optional, Union

# The signals a task may be asked to checkpoint with (TaskSubmit.checkpoint_signal).
CHECKPOINT_SIGNALS = ("SIGUSR1", "SIGUSR2", "SIGHUP", "SIGINT", "SIGQUIT", "SIGALRM", "SIGTERM",
                      "SIGURG", "SIGWINCH")
_ID = re.compile(r"s-[0-9]+")


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """A task's workspace at a moment, stored content-addressed in its project's storage.

    id ("s-12"), task_id, project, run (the task's run it was taken in), trigger ("manual",
    "periodic", or "stop", "preempt", "drain", "move": taken before the task left its node),
    consistency ("application": the task checkpointed when asked, gpupool.checkpoint; "crash":
    only frozen while read), node, manifest (SHA-256 of its file list), files, bytes (the
    workspace's size), new_bytes (what it added to the project's storage), taken_ms (when the
    task was frozen: its work up to there is kept), frozen_ms, duration_ms (from the request to
    the stored record), image (a task with an image: its container saved as an image, a dict
    with id, base, bytes and saved — False when it is its run's image, saved by an earlier
    snapshot; None without one).
    """

    id: str
    task_id: str = ""
    project: str = ""
    run: int = 0
    trigger: str = ""
    consistency: str = ""
    node: str = ""
    manifest: str = ""
    files: int = 0
    bytes: int = 0
    new_bytes: int = 0
    taken_ms: int = 0
    frozen_ms: int = 0
    duration_ms: int = 0
    image: Optional[Dict[str, Any]] = None

    @classmethod
    def from_info(cls, info: Dict[str, Any]) -> "Snapshot":
        """The server's Snapshot object (fields it may add later are left out)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in info.items() if k in names})

    def __repr__(self) -> str:
        return (f"<gpupool.Snapshot {self.id} of {self.task_id} run {self.run} {self.trigger} "
                f"{self.consistency}-consistent {self.files} files>")

    @property
    def taken(self) -> datetime.datetime:
        """taken_ms as an aware datetime (UTC)."""
        return datetime.datetime.fromtimestamp(self.taken_ms / 1000, datetime.timezone.utc)

    @property
    def frozen(self) -> datetime.timedelta:
        return datetime.timedelta(milliseconds=self.frozen_ms)

    @property
    def duration(self) -> datetime.timedelta:
        return datetime.timedelta(milliseconds=self.duration_ms)


def snapshot_id(value: Union[str, Snapshot], argument: str) -> str:
    """The id of a snapshot given as a Snapshot, "s-12" or "12"; `argument` names it in the
    TypeError or ValueError."""
    if isinstance(value, Snapshot):
        return value.id
    if not isinstance(value, str):
        raise TypeError(f"{argument} must be a snapshot id ('s-12') or a Snapshot, got "
                        f"{type(value).__name__}")
    text = "s-" + value if value.isascii() and value.isdigit() else value
    if not _ID.fullmatch(text):
        raise ValueError(f"{argument} must be a snapshot id ('s-12') or a Snapshot, got {value!r}")
    return text


def signal_name(value: Union[None, str, signal.Signals]) -> Optional[str]:
    """checkpoint_signal as the server takes it: "SIGUSR2" for signal.SIGUSR2, "SIGUSR2" or
    "usr2"; one of CHECKPOINT_SIGNALS, else a ValueError naming the argument."""
    if value is None:
        return None
    if isinstance(value, signal.Signals):
        name = value.name
    elif isinstance(value, str):
        name = value.strip().upper()
        name = name if name.startswith("SIG") else "SIG" + name
    else:
        raise TypeError(f"checkpoint_signal must be a signal's name ('SIGUSR1') or a "
                        f"signal.Signals, got {type(value).__name__}")
    if name not in CHECKPOINT_SIGNALS:
        raise ValueError(f"checkpoint_signal must be one of {', '.join(CHECKPOINT_SIGNALS)}, "
                         f"got {value!r}")
    return name
