"""Client: the SDK's entry point — tasks, job arrays, distributed jobs, snapshots, volumes,
datasets, files, balance — over the signed REST API of `gpupool server` (docs/api.md; the
contract is docs/openapi.json)."""

import datetime
import os
import signal
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from . import _config, files
from ._transport import Query, Transport
from .errors import ApiError
from .arrays import TaskArray
from .datasets import Dataset, check_version, dataset_mounts, dataset_ref
from .datasets import Mounts as DatasetMounts
from .datasets import check_name as check_dataset_name
from .jobs import Job, job_fields
from .snapshots import Snapshot, signal_name, snapshot_id
from .task import Task
from .volumes import Mounts, Volume, check_name, parse_size, volume_mounts, volume_ref

Duration = Union[None, int, float, datetime.timedelta]
# Periodic snapshots are at least this far apart; a checkpoint is waited for at most this long.
MIN_SNAPSHOT_EVERY_MS = 10_000
MAX_CHECKPOINT_TIMEOUT_MS = 3_600_000


def _duration_ms(value: Duration, field: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise TypeError(f"{field} must be a timedelta or seconds, got {type(value).__name__}")
    if seconds < 0:
        raise ValueError(f"{field} must be >= 0, got {value}")
    return int(round(seconds * 1000))


def _command(command: Union[None, str, Sequence[str]]) -> Optional[List[str]]:
    """A string runs through /bin/sh -c (so "python train.py --lr=1e-3 > log" works as typed);
    a list is the argv itself."""
    if command is None:
        return None
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    return [str(a) for a in command]


def _submit_body(*, command, image, name, gpu_type, gpu_count, gpu_share, gpu_memory,
                 mig_profile, cpu, memory, disk_size, max_runtime, stop_when, priority, project,
                 restartable, start, ports=None, snapshot_every=None, checkpoint_signal=None,
                 checkpoint_timeout=None, from_snapshot=None, volumes=None,
                 datasets=None) -> Dict[str, Any]:
    """The TaskSubmit body of create_task's (and create_tasks') arguments."""
    body: Dict[str, Any] = {"hold": not start}
    volume_list = volume_mounts(volumes)
    every_ms = _duration_ms(snapshot_every, "snapshot_every")
    if every_ms and every_ms < MIN_SNAPSHOT_EVERY_MS:
        raise ValueError(f"snapshot_every must be 0 (snapshots only when asked and before a "
                         f"stop) or at least 10 s, got {snapshot_every}")
    checkpoint_ms = _duration_ms(checkpoint_timeout, "checkpoint_timeout")
    if checkpoint_ms is not None and checkpoint_ms > MAX_CHECKPOINT_TIMEOUT_MS:
        raise ValueError(f"checkpoint_timeout must be at most 1 hour, got {checkpoint_timeout}")
    optional = {
        "name": name, "image": image, "command": _command(command), "gpu_count": gpu_count,
        "gpu_mem_mib": gpu_memory, "mig_profile": mig_profile, "memory_mib": memory,
        "disk_gib": disk_size, "max_runtime_ms": _duration_ms(max_runtime, "max_runtime"),
        "stop_when": stop_when, "priority": priority, "project": project,
        "restartable": restartable,
        "ports": None if ports is None else [int(p) for p in ports],
        "snapshot_every_ms": every_ms, "checkpoint_signal": signal_name(checkpoint_signal),
        "checkpoint_timeout_ms": checkpoint_ms,
        "from_snapshot": (None if from_snapshot is None
                          else snapshot_id(from_snapshot, "from_snapshot")),
        "volumes": volume_list,
        "datasets": dataset_mounts(datasets, volume_list),
    }
    if gpu_type is not None:
        optional["gpu_models"] = [gpu_type] if isinstance(gpu_type, str) else list(gpu_type)
    if gpu_share is not None:
        if not 0 < gpu_share < 1:
            raise ValueError(f"gpu_share must be between 0 and 1 (a fraction of one GPU), "
                             f"got {gpu_share}; use gpu_count for whole GPUs")
        optional["gpu_milli"] = max(1, min(999, round(gpu_share * 1000)))
    if cpu is not None:
        optional["cpu_milli"] = int(round(cpu * 1000))
    body.update({k: v for k, v in optional.items() if v is not None})
    return body


# create_task's arguments that make a distributed job (jobs.job_fields), not a TaskSubmit's.
_JOB_ARGS = ("nodes", "members_per_node", "topology_label", "topology")


class Client:
    """A connection to a gpupool pool.

    Client(access_key=..., secret_key=..., endpoint=...): what is not passed comes from the
    environment (GPUPOOL_ENDPOINT, GPUPOOL_ACCESS_KEY, GPUPOOL_SECRET_KEY), the CLI's profile
    (`gpupool login`) or the local pool's credentials.env (see _config.py). Errors the server
    answers raise ApiError with its status, code and message.

    An https:// endpoint's certificate is verified against ca_file (a PEM CA; when not passed,
    GPUPOOL_CA_FILE or the profile's ca_file that goes with the endpoint) or else the system's
    certificate store; an untrusted server is a TransportError, a CA file that cannot be read
    or is not PEM a ConfigError.
    """

    def __init__(self, access_key: Optional[str] = None, secret_key: Optional[str] = None,
                 endpoint: Optional[str] = None, *, profile: Optional[str] = None,
                 timeout: float = 30.0, retries: int = 3, ca_file: Optional[str] = None):
        s = _config.resolve(endpoint, access_key, secret_key, profile, ca_file=ca_file)
        self.endpoint = s.endpoint
        self.access_key = s.access_key
        self.ca_file = s.ca_file or None
        self._transport = Transport(s.endpoint, s.access_key, s.secret_key, timeout=timeout,
                                    retries=retries, ca_file=s.ca_file, ca_source=s.ca_source)

    @classmethod
    def for_task(cls, task_token: str, endpoint: str, *, timeout: float = 30.0,
                 ca_file: Optional[str] = None) -> "Client":
        """A client with a task's own token (GPUPOOL_TASK_TOKEN, GPUPOOL_ENDPOINT inside a task):
        it reads that task's usage and metrics, and every other call is refused (403). An https
        server is verified against ca_file when passed, else the CA text the agent puts in the
        task's environment (GPUPOOL_CA_PEM: a container cannot read the agent's files), else
        the system's store."""
        ca_pem, source = None, "ca_file="
        if not ca_file:
            ca_pem = os.environ.get(_config.CA_PEM_ENV) or None
            source = f"{_config.CA_PEM_ENV} in the environment"
        self = cls.__new__(cls)
        self.endpoint = endpoint
        self.access_key = None
        self.ca_file = ca_file or None
        self._transport = Transport(endpoint, "", "", timeout=timeout, task_token=task_token,
                                    ca_file=ca_file, ca_source=source, ca_pem=ca_pem)
        return self

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method: str, path: str, query: Query = None, body: Any = None,
              raw: Optional[bytes] = None, timeout: Optional[float] = None) -> Any:
        return self._transport.request(method, path, query=query, body=body, raw=raw,
                                       timeout=timeout).json()

    # --- identity and money ---
    def whoami(self) -> Dict[str, Any]:
        """{"user", "access_key", "role", "projects"}."""
        return self._call("GET", "/v1/whoami")

    def _only_project(self) -> str:
        projects = self.whoami()["projects"]
        if len(projects) != 1:
            raise ValueError("project= is required: this key's user is in "
                             f"{len(projects)} projects ({', '.join(projects) or 'none'})")
        return projects[0]

    def balance(self, project: Optional[str] = None) -> Dict[str, Any]:
        """The project's credits, usage and balance in micros (the caller's only project by
        default)."""
        return self._call("GET", f"/v1/projects/{project or self._only_project()}/balance")

    def nodes(self) -> List[Dict[str, Any]]:
        return self._call("GET", "/v1/nodes")["nodes"]

    # --- tasks ---
    def create_task(self, *, command: Union[None, str, Sequence[str]] = None,
                    image: Optional[str] = None, name: Optional[str] = None,
                    gpu_type: Union[None, str, Sequence[str]] = None,
                    gpu_count: Optional[int] = None, gpu_share: Optional[float] = None,
                    gpu_memory: Optional[int] = None, mig_profile: Optional[str] = None,
                    cpu: Optional[float] = None, memory: Optional[int] = None,
                    disk_size: Optional[int] = None, max_runtime: Duration = None,
                    stop_when: Optional[str] = None, priority: Optional[int] = None,
                    project: Optional[str] = None, restartable: Optional[bool] = None,
                    ports: Optional[Sequence[int]] = None, start: bool = False,
                    nodes: Optional[int] = None, members_per_node: Optional[int] = None,
                    topology_label: Optional[str] = None, topology: Optional[str] = None,
                    snapshot_every: Duration = None,
                    checkpoint_signal: Union[None, str, signal.Signals] = None,
                    checkpoint_timeout: Duration = None,
                    from_snapshot: Union[None, str, Snapshot] = None,
                    volumes: Mounts = None,
                    datasets: DatasetMounts = None) -> Union[Task, Job]:
        """Creates a task, not yet started (held) unless start=True: upload its inputs, then
        task.start() queues it.

        command: a shell line (run by /bin/sh -c) or an argv list; image: a container image.
        gpu_type: a GPU model or several ("A100-80GB"); gpu_count whole GPUs, or gpu_share a
        fraction of one GPU (0 < share < 1) with gpu_memory MiB reserved, or mig_profile
        ("3g.40gb"). cpu in cores, memory in MiB, disk_size in GiB, max_runtime a timedelta or
        seconds, stop_when a condition on the metrics the task reports ("val_acc > 0.95").
        ports: TCP ports the task serves, each at the gateway's /t/<task>/<port>/.

        Snapshots (docs/sdk.md "Snapshots and resuming"): snapshot_every (a timedelta or
        seconds, at least 10 s) snapshots the workspace that often while it runs;
        checkpoint_signal ("SIGUSR1" by default) asks the task to checkpoint before each
        snapshot once it handles it (gpupool.checkpoint), checkpoint_timeout (30 s by default,
        at most 1 hour) says how long the snapshot waits for it; from_snapshot (a Snapshot or
        "s-12") starts its workspace as that snapshot's.

        volumes: the project's volumes it mounts (docs/sdk.md "Volumes"), a mapping
        {"data": "/root/data"} (read-write) or a list of "NAME:/root/PATH[:ro]" strings; each
        below /root, at most 16. A task that mounts a node-local volume runs on its node.
        datasets: the datasets it mounts read-only (docs/sdk.md "Datasets"), a mapping
        {"imagenet": "/root/data", "coco@3": "/root/coco"} (NAME or NAME@VERSION; without a
        version the latest when it is submitted) or a list of "NAME[@VERSION]:/root/PATH"
        strings; each below /root and apart from the volumes, at most 8.

        nodes=N (2..4096) makes it a distributed job of N members instead (docs/sdk.md
        "Distributed jobs"), each the task described (gpu_count whole GPUs or a mig_profile, not
        a gpu_share), placed all together, with torchrun's rendezvous (MASTER_ADDR, MASTER_PORT,
        RANK, WORLD_SIZE, PET_*) in its environment; it returns a Job (job.start() queues it).
        members_per_node: at most this many members on one node (default 1); topology_label: a
        node label ("rack") whose one value the members are kept under, topology "preferred"
        (default: anywhere when no value has room) or "required" (the job waits).
        """
        args = {k: v for k, v in locals().items() if k not in ("self",) + _JOB_ARGS}
        job = job_fields(nodes, members_per_node, topology_label, topology, gpu_share)
        body = _submit_body(**args)
        if job is None:
            return Task(self, self._call("POST", "/v1/tasks", body=body))
        body.update(job)
        return Job(self, self._call("POST", "/v1/jobs", body=body))

    def create_tasks(self, array: Union[str, Iterable[int]], *,
                     command: Union[None, str, Sequence[str]] = None,
                     image: Optional[str] = None, name: Optional[str] = None,
                     gpu_type: Union[None, str, Sequence[str]] = None,
                     gpu_count: Optional[int] = None, gpu_share: Optional[float] = None,
                     gpu_memory: Optional[int] = None, mig_profile: Optional[str] = None,
                     cpu: Optional[float] = None, memory: Optional[int] = None,
                     disk_size: Optional[int] = None, max_runtime: Duration = None,
                     stop_when: Optional[str] = None, priority: Optional[int] = None,
                     project: Optional[str] = None, restartable: Optional[bool] = None,
                     max_running: Optional[int] = None, start: bool = True,
                     volumes: Mounts = None, datasets: DatasetMounts = None) -> TaskArray:
        """Creates a job array in one request: one task per index, each with GPUPOOL_ARRAY_INDEX
        (and GPUPOOL_ARRAY_ID) in its environment, so a sweep's command picks its variant by
        index. `array` is Slurm's text ("0-99", "1,3,5-9", "0-99%10") or integers (range(5));
        max_running=N runs at most N at once (the "%N"). Queued at once unless start=False
        (then TaskArray.start() queues every element). The other arguments are create_task's.
        """
        if isinstance(array, str):
            spec = array
        else:
            indexes = sorted(set(int(i) for i in array))
            if not indexes:
                raise ValueError("array must have at least one index")
            spec = ",".join(str(i) for i in indexes)
        if max_running is not None:
            if "%" in spec:
                raise ValueError("give the limit once: max_running or a %N in array")
            spec += f"%{int(max_running)}"
        args = {k: v for k, v in locals().items()
                if k not in ("self", "array", "spec", "indexes", "max_running")}
        body = _submit_body(**args)
        body["array"] = spec
        return TaskArray(self, self._call("POST", "/v1/arrays", body=body))

    def get_array(self, array_id: str) -> TaskArray:
        return TaskArray(self, self._call("GET", f"/v1/arrays/{array_id}"))

    def get_job(self, job_id: str) -> Job:
        """A distributed job ("j-7") made with create_task(nodes=N)."""
        return Job(self, self._call("GET", f"/v1/jobs/{job_id}"))

    def get_task(self, task_id: str) -> Task:
        return Task(self, self._call("GET", f"/v1/tasks/{task_id}"))

    def list_tasks(self, state: Union[None, str, Sequence[str]] = None,
                   project: Optional[str] = None, node: Optional[str] = None,
                   limit: Optional[int] = None, array: Optional[str] = None,
                   metrics: Optional[Sequence[str]] = None) -> List[Task]:
        """The tasks the caller may see, in submission order (every page; at most `limit`);
        array="a-7": that job array's elements. With metrics=["val_acc", "loss"], each task's
        `latest_metrics` holds its latest value of those it reported."""
        out: List[Task] = []
        after = None
        while limit is None or len(out) < limit:
            page_size = 1000 if limit is None else min(1000, limit - len(out))
            page = self._call("GET", "/v1/tasks",
                              query={"state": [state] if isinstance(state, str) else state,
                                     "project": project, "node": node, "array": array,
                                     "metrics": list(metrics) if metrics else None,
                                     "limit": page_size, "after": after})
            values = {m["task_id"]: m["values"] for m in page.get("metrics", [])}
            for t in page["tasks"]:
                task = Task(self, t)
                if metrics:
                    task.latest_metrics = values.get(task.id, {})
                out.append(task)
            after = page["next_after"]
            if after is None:
                break
        return out

    # --- snapshots ---
    def list_snapshots(self, task_id: Optional[str] = None,
                       project: Optional[str] = None) -> List[Snapshot]:
        """The snapshots the caller may see, oldest first: one task's, one project's, or
        every one."""
        page = self._call("GET", "/v1/snapshots", query={"task": task_id, "project": project})
        return [Snapshot.from_info(s) for s in page["snapshots"]]

    def get_snapshot(self, snapshot: Union[str, Snapshot]) -> Snapshot:
        """A snapshot ("s-12") read again."""
        return Snapshot.from_info(
            self._call("GET", f"/v1/snapshots/{snapshot_id(snapshot, 'snapshot')}"))

    def delete_snapshot(self, snapshot: Union[str, Snapshot]) -> None:
        """Deletes a snapshot; the storage only it held is freed. A task that was to resume
        from it resumes from its latest other snapshot (or afresh)."""
        self._call("DELETE", f"/v1/snapshots/{snapshot_id(snapshot, 'snapshot')}")

    # --- volumes ---
    def create_volume(self, name: str, size: Union[int, str], *, shared: bool = False,
                      node: Optional[str] = None, project: Optional[str] = None) -> Volume:
        """Creates a volume: data of the project that outlives its tasks, which mount it with
        create_task(volumes={name: "/root/data"}). `size` is bytes (an int) or a string with a
        binary unit ("200Gi", "512M", "1T"), counted against the project's storage quota.
        Node-local by default: on the disk of `node`, or else of the node of the first task that
        mounts it (its tasks then run there); shared=True puts it on the shared storage of every
        node started with --shared-storage. `project`: by default the caller's only one."""
        body: Dict[str, Any] = {"name": check_name(name), "size_bytes": parse_size(size),
                                "shared": bool(shared)}
        if node is not None:
            if shared:
                raise ValueError("node applies to a node-local volume: a shared volume is on "
                                 "every node with the shared storage")
            body["node"] = node
        if project is not None:
            body["project"] = project
        return Volume(self, self._call("POST", "/v1/volumes", body=body))

    def list_volumes(self, project: Optional[str] = None) -> List[Volume]:
        """The volumes of the caller's projects (or of one), oldest first."""
        page = self._call("GET", "/v1/volumes", query={"project": project})
        return [Volume(self, v) for v in page["volumes"]]

    def get_volume(self, volume: Union[str, Volume]) -> Volume:
        """A volume by its name, its id ("v-3") or a Volume (read again)."""
        return Volume(self, self._call("GET", f"/v1/volumes/{volume_ref(volume)}"))

    def resize_volume(self, volume: Union[str, Volume], size: Union[int, str]) -> Volume:
        """Changes a volume's size (bytes, or "300Gi"); see Volume.resize."""
        body = {"size_bytes": parse_size(size)}
        return Volume(self, self._call("PATCH", f"/v1/volumes/{volume_ref(volume)}", body=body))

    def delete_volume(self, volume: Union[str, Volume]) -> None:
        """Deletes a volume (by name, id or Volume): its files are removed by its node, then it
        goes. Refused (ApiError 409, failed_precondition, naming them) while tasks that mount it
        have not ended."""
        self._call("DELETE", f"/v1/volumes/{volume_ref(volume)}")

    # --- datasets ---
    def create_dataset(self, name: str, *, project: Optional[str] = None) -> Dataset:
        """Creates an empty dataset (`project`: by default the caller's only one). Its versions
        are pushed with the CLI, `gpupool dataset push DIR NAME`."""
        body: Dict[str, Any] = {"name": check_dataset_name(name)}
        if project is not None:
            body["project"] = project
        return Dataset(self, self._call("POST", "/v1/datasets", body=body))

    def list_datasets(self, project: Optional[str] = None) -> List[Dataset]:
        """The datasets of the caller's projects (or of one) and the published ones, oldest
        first."""
        page = self._call("GET", "/v1/datasets", query={"project": project})
        return [Dataset(self, d) for d in page["datasets"]]

    def get_dataset(self, dataset: Union[str, Dataset]) -> Dataset:
        """A dataset by its name, its id ("d-3") or a Dataset (read again)."""
        return Dataset(self, self._call("GET", f"/v1/datasets/{dataset_ref(dataset)}"))

    def publish_dataset(self, dataset: Union[str, Dataset], published: bool = True) -> Dataset:
        """Publishes a dataset to every project, or takes it back; see Dataset.publish."""
        body = {"published": bool(published)}
        return Dataset(self, self._call("PATCH", f"/v1/datasets/{dataset_ref(dataset)}",
                                        body=body))

    def delete_dataset_version(self, dataset: Union[str, Dataset], version: int) -> Dataset:
        """Deletes one version of a dataset; see Dataset.delete_version."""
        return Dataset(self, self._call(
            "DELETE", f"/v1/datasets/{dataset_ref(dataset)}/versions/{check_version(version)}"))

    def delete_dataset(self, dataset: Union[str, Dataset]) -> None:
        """Deletes a dataset (by name, id or Dataset) with every version. Refused (ApiError 409,
        failed_precondition, naming them) while tasks that mount it have not ended."""
        self._call("DELETE", f"/v1/datasets/{dataset_ref(dataset)}")

    # --- files ---
    def list_files(self, task_id: str, remote_path: str = "/root/") -> List[Dict[str, Any]]:
        """Every file at or below `remote_path`: {"path", "size", "sha256"}."""
        base = files.task_path(remote_path)
        try:
            return self._call("GET", f"/v1/tasks/{task_id}/files",
                              query={"path": base or None})["files"]
        except ApiError as e:
            if e.status == 404 and base and "no file or directory" in e.message:
                return []
            raise

    def upload_files(self, task_id: str, local_path: files.LocalPaths,
                     remote_path: str = "/root/") -> List[Dict[str, Any]]:
        """Uploads files or directories (recursively) to a pending task (its inputs) or a
        running one (into its workspace), like `cp -r`:
        into `remote_path` when it ends with "/" (or several sources are given), else as that
        name. Interrupted uploads resume; each file is committed with its SHA-256."""
        paths = [local_path] if isinstance(local_path, (str, os.PathLike)) else list(local_path)
        plan = files.plan_upload([os.fspath(p) for p in paths], remote_path)
        return [files.upload_file(self, task_id, local, path) for local, path in plan]

    def download_files(self, task_id: str, remote_path: str, local_path: str) -> List[str]:
        """Downloads a task's file, or a directory's files into `local_path` (created), each
        checked against its SHA-256; returns the local paths written."""
        return files.download(self, task_id, remote_path, os.fspath(local_path))
