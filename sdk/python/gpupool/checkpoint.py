"""The task side of the checkpoint protocol (docs/sdk.md "Checkpoints: the task's side"): a
program that saves its state when a snapshot asks for it makes the snapshot
application-consistent.

    from gpupool import checkpoint
    for step in range(start, steps):
        train_one_step()
        if checkpoint.requested():
            torch.save(state, "/root/ckpt.pt")
            checkpoint.done()

The protocol: the agent sets GPUPOOL_CHECKPOINT_DIR (a directory the task may write) and
GPUPOOL_CHECKPOINT_SIGNAL (a signal name, "SIGUSR1" by default) in the task's environment. The task
creates `ready` in that directory once it handles the signal; until then the signal is never sent
and snapshots are only crash-consistent. Before a snapshot the agent writes a request number into
`request` and sends the signal to the process whose pid `ready` holds (the one that called
enable(); the last one, when several did); the task saves its state and writes the number into `done`. The agent waits up
to the task's checkpoint timeout (30 s by default) for it, then freezes the task and reads its
workspace.

Outside a gpupool task (no GPUPOOL_CHECKPOINT_DIR) requested() is False and done() does nothing.
Standard library only.
"""

import os
import signal
import threading
from typing import Any, Optional

DIR_ENV = "GPUPOOL_CHECKPOINT_DIR"
SIGNAL_ENV = "GPUPOOL_CHECKPOINT_SIGNAL"
DEFAULT_SIGNAL = "SIGUSR1"
READY, REQUEST, DONE = "ready", "request", "done"


class _State:
    """This process's side of the protocol, once enabled."""

    def __init__(self) -> None:
        self.dir: Optional[str] = None  # GPUPOOL_CHECKPOINT_DIR, once the handler is installed
        self.previous: Any = None  # the handler ours replaced, which it chains to
        self.signalled = False  # the signal came since requested() last looked
        self.answered = ""  # the last request number written to `done`
        # The request requested() saw that done() has not answered: its number, "" for a signal
        # that came with no new number; None when there is none.
        self.pending: Optional[str] = None


_state = _State()


def _read_number(path: str) -> str:
    """The decimal number a protocol file holds; "" when it is missing or holds none."""
    try:
        with open(path, encoding="ascii") as f:
            text = f.read(64).strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return text if text.isdigit() else ""


def _handler(signum: int, frame: Any) -> None:
    """Only notes the request (the program checkpoints at its next requested()), then calls the
    handler it replaced, if that was a Python function."""
    _state.signalled = True
    previous = _state.previous
    if callable(previous) and previous is not signal.default_int_handler:
        previous(signum, frame)


def enable() -> bool:
    """Installs the handler of GPUPOOL_CHECKPOINT_SIGNAL and creates `ready`, so that snapshots
    ask this program to checkpoint; False outside a gpupool task. requested() does it on its
    first call; call enable() earlier when the program runs long before its loop. The signal goes
    to this process only (its pid is what `ready` holds). Only the main thread can install a
    signal handler: the first call from another thread is a RuntimeError. Later calls do nothing."""
    if _state.dir is not None:
        return True
    directory = os.environ.get(DIR_ENV)
    if not directory:
        return False
    name = os.environ.get(SIGNAL_ENV) or DEFAULT_SIGNAL
    try:
        signum = signal.Signals[name]
    except KeyError:
        raise RuntimeError(f"{SIGNAL_ENV}={name!r} is not a signal's name") from None
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("gpupool.checkpoint must first be used from the main thread (only it "
                           "can install a signal handler): call checkpoint.enable() there")
    _state.previous = signal.signal(signum, _handler)
    try:
        with open(os.path.join(directory, READY), "w", encoding="ascii") as f:
            f.write(f"{os.getpid()}\n")
    except OSError:
        signal.signal(signum, _state.previous)
        raise
    _state.answered = _read_number(os.path.join(directory, DONE))
    # A request written before the handler was installed (by an agent that saw `ready` from an
    # earlier process of this task) came with no signal for us.
    raced = _read_number(os.path.join(directory, REQUEST))
    if raced and raced != _state.answered:
        _state.pending = raced
    _state.dir = directory
    return True


def requested() -> bool:
    """Whether a snapshot asked this program to checkpoint and done() has not answered yet: the
    signal came, or `request` holds a number not answered. On the first call, enable(). False
    outside a gpupool task. Cheap: it reads a file only after the signal came."""
    if not enable():
        return False
    if _state.signalled:
        _state.signalled = False
        _state.pending = _read_number(os.path.join(_state.dir, REQUEST))
    return _state.pending is not None


def done() -> None:
    """Answers the request requested() saw: call it once the state is saved (written whole: the
    snapshot is taken right after). Writes its number to `done` through a temporary file, so
    the agent never reads half of it. Does nothing outside a gpupool task or with no request."""
    if _state.dir is None or _state.pending is None:
        return
    number, _state.pending = _state.pending, None
    if not number:
        return  # a signal with no new request number: nothing waits for an answer
    path = os.path.join(_state.dir, DONE)
    temporary = f"{path}.{os.getpid()}.tmp"  # one per process: several may answer at once
    with open(temporary, "w", encoding="ascii") as f:
        f.write(number + "\n")
    os.replace(temporary, path)
    _state.answered = number
