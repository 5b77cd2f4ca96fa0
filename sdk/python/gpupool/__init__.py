"""gpupool: the Python SDK of a gpupool GPU pool (docs/sdk.md).

    import gpupool
    client = gpupool.Client()              # endpoint and keys: arguments, environment, profile
    task = client.create_task(command="python train.py", gpu_count=1)
    client.upload_files(task.id, ["train.py"], "/root/")
    task.start(); task.wait(); print(task.logs())
    job = client.create_task(command="torchrun train.py", gpu_count=8, nodes=4)  # a Job
    snap = task.snapshot()                 # of a running task: its workspace, stored
    task.stop(); task.resume(snap)         # queued again, its workspace restored from snap
    client.create_volume("data", "200Gi")  # a volume: data that outlives the tasks mounting it
    client.create_task(command="python train.py", volumes={"data": "/root/data"})
    # a dataset pushed with `gpupool dataset push DIR imagenet`, mounted read-only
    client.create_task(command="python train.py", datasets={"imagenet@2": "/root/imagenet"})

Inside a task, gpupool.checkpoint answers a snapshot's request to save the program's state.

Standard library only.
"""

from . import checkpoint
from .client import Client
from .errors import ApiError, ConfigError, GpupoolError, TransportError
from .monitor import Monitor, report
from .arrays import TaskArray
from .datasets import Dataset, DatasetMount, DatasetVersion
from .jobs import Job
from .snapshots import Snapshot
from .task import CREATED, QUEUED, RUNNING, STARTING, STOPPED, Task
from .volumes import Volume, VolumeMount

__version__ = "0.1.0"
__all__ = ["Client", "Task", "TaskArray", "Job", "Snapshot", "Volume", "VolumeMount", "Dataset",
           "DatasetVersion", "DatasetMount", "Monitor", "report", "checkpoint", "ApiError",
           "ConfigError", "GpupoolError", "TransportError", "CREATED", "QUEUED", "STARTING",
           "RUNNING", "STOPPED"]
