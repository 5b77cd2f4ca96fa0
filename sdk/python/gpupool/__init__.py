"""gpupool: the Python SDK of a gpupool GPU pool (docs/sdk.md).

    import gpupool
    client = gpupool.Client()              # endpoint and keys: arguments, environment, profile
    task = client.create_task(command="python train.py", gpu_count=1)
    client.upload_files(task.id, ["train.py"], "/root/")
    task.start(); task.wait(); print(task.logs())

Standard library only.
"""

from .client import Client
from .errors import ApiError, ConfigError, GpupoolError, TransportError
from .monitor import Monitor, report
from .arrays import TaskArray
from .task import CREATED, QUEUED, RUNNING, STARTING, STOPPED, Task

__version__ = "0.1.0"
__all__ = ["Client", "Task", "TaskArray", "Monitor", "report", "ApiError", "ConfigError", "GpupoolError",
           "TransportError", "CREATED", "QUEUED", "STARTING", "RUNNING", "STOPPED"]
