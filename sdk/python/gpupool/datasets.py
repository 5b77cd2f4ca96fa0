"""Datasets (docs/sdk.md "Datasets"): a project's read-only, versioned directories of files, which
tasks mount read-only on any node. The Dataset record the server answers with and its versions,
the mounts a task asks for (create_task(datasets=...)) and the checks of the arguments that name a
dataset, a version or a mount, so that a mistake is a ValueError naming the argument before any
request. Versions are pushed by the CLI (`gpupool dataset push DIR NAME`), which sends only the
chunks the project's storage lacks; the SDK reads, mounts, publishes and deletes them."""

import dataclasses
import datetime
import re
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Union

from ._storage import Kind, fields_of, mount_list, mount_path, paths_overlap

if TYPE_CHECKING:
    from .client import Client

MAX_MOUNTS = 8  # core::kMaxDatasetMounts
DATASET = Kind("dataset", re.compile(r"d-[0-9]+"), "d-3")


def check_name(name: Any, argument: str = "name") -> str:
    """A new dataset's name: 1..63 of a-z 0-9 _ . -, starting with a letter or digit, not of an
    id's form d-<number> (core/dataset.cc ValidateDatasetName, with its messages)."""
    return DATASET.check_name(name, argument)


def dataset_ref(value: Any, argument: str = "dataset") -> str:
    """A dataset named by a user: a Dataset, its id ("d-3") or its name."""
    return DATASET.ref(value, argument)


def check_version(version: Any, argument: str = "version") -> int:
    """A version's number: an int ≥ 1 (versions are numbered 1, 2, … as they are pushed)."""
    if isinstance(version, bool) or not isinstance(version, int):
        raise TypeError(f"{argument} must be an int, got {type(version).__name__}")
    if version < 1:
        raise ValueError(f"{argument} {version} is not a number ≥ 1")
    return version


def _named_version(value: Any, argument: str) -> Dict[str, Any]:
    """A mapping's key as a DatasetMount's dataset and version: a Dataset (its latest), or
    "NAME", "NAME@VERSION", "d-3" or "d-3@2" (core's ParseDatasetMount before the colon)."""
    if not isinstance(value, str):
        return {"dataset": dataset_ref(value, argument), "version": 0}
    name, at, number = value.partition("@")
    version = 0
    if at:
        if not re.fullmatch(r"[0-9]{1,9}", number) or int(number) < 1:
            raise ValueError(f"{argument}: {value!r}: version {number!r} is not a number ≥ 1")
        version = int(number)
    return {"dataset": dataset_ref(name, argument), "version": version}


def parse_mount(text: str, argument: str = "datasets") -> Dict[str, Any]:
    """"NAME[@VERSION]:/root/data" (the CLI's --dataset; always read-only) as a DatasetMount
    body; version 0 is the latest when the task is submitted."""
    name, colon, path = text.partition(":")
    if not colon:
        raise ValueError(f"{argument}: {text!r} needs a path: 'NAME[@VERSION]:/root/PATH'")
    if path.endswith(":ro"):  # what a volume's read-only mount says: a dataset always is
        path = path[:-3]
    mount = _named_version(name, f"{argument}: dataset")
    mount["path"] = mount_path(path, f"{argument}: path of {name}")
    return mount


Mounts = Union[None, Mapping[Union[str, "Dataset"], str], Sequence[str]]


def dataset_mounts(datasets: Mounts, volumes: Optional[List[Dict[str, Any]]] = None
                   ) -> Optional[List[Dict[str, Any]]]:
    """create_task's `datasets` as TaskSubmit's: a mapping {"NAME[@VERSION]" (or a Dataset):
    path} or a list of "NAME[@VERSION]:PATH" strings; at most 8, no dataset twice, no path inside
    another's or one of the task's `volumes` (TaskSubmit's; core's ValidateDatasetMounts, checked
    here so that the message names the argument)."""
    if datasets is None:
        return None

    def from_key(key: Any, path: Any) -> Dict[str, Any]:
        mount = _named_version(key, "datasets: a key")
        mount["path"] = mount_path(path, f"datasets: path of {mount['dataset']}")
        return mount

    mounts = mount_list(datasets, "datasets", "NAME[@VERSION]:/root/PATH", from_key, parse_mount,
                        MAX_MOUNTS)
    for i, m in enumerate(mounts):
        a = m["path"]
        for other in mounts[:i]:
            if m["dataset"] == other["dataset"]:
                raise ValueError(f"datasets: dataset {m['dataset']!r} is mounted twice")
            if paths_overlap(a, other["path"]):
                raise ValueError(f"datasets: path {a} of {m['dataset']!r} overlaps "
                                 f"{other['path']} of {other['dataset']!r}")
        for volume in volumes or []:
            if paths_overlap(a, volume["path"]):
                raise ValueError(f"datasets: path {a} of {m['dataset']!r} overlaps "
                                 f"{volume['path']} of volume {volume['volume']!r}")
    return mounts


@dataclasses.dataclass(frozen=True)
class DatasetMount:
    """A task's read-only mount of a dataset's version (task.datasets), as the server resolved
    it at submission: `dataset` (as asked: its name or id), `version` (the number, also when the
    latest was asked for), `path` ("/root/data"), `dataset_id` ("d-3"), `project` (the one that
    holds it) and `manifest` (the version's SHA-256)."""

    dataset: str
    version: int
    path: str
    dataset_id: str = ""
    project: str = ""
    manifest: str = ""

    from_info = classmethod(fields_of)


@dataclasses.dataclass(frozen=True)
class DatasetVersion:
    """One pushed version of a dataset: `version` (1, 2, … in the order pushed), `manifest` (its
    SHA-256), `files`, `bytes` (the files' sizes), `new_bytes` (what its push added to the
    project's storage: chunks no earlier version or snapshot had), `created_ms`, `created_by`,
    `nodes` (the nodes that hold its files: a task that mounts it is placed on one of them where
    one fits)."""

    version: int
    manifest: str = ""
    files: int = 0
    bytes: int = 0
    new_bytes: int = 0
    created_ms: int = 0
    created_by: str = ""
    nodes: List[str] = dataclasses.field(default_factory=list)

    from_info = classmethod(fields_of)

    @property
    def created(self) -> datetime.datetime:
        """created_ms as an aware datetime (UTC)."""
        return datetime.datetime.fromtimestamp(self.created_ms / 1000, datetime.timezone.utc)


class Dataset:
    """A dataset (Client.create_dataset, get_dataset, list_datasets).

    id ("d-3"), name (unique in its project), project (whose storage holds it), published (every
    project may list and mount it: an admin's choice), versions (DatasetVersion, oldest first;
    empty until the first push completes), created_ms, created_by (the user), used_by (the ids of
    the caller's tasks that mount it and have not ended). They are the record as last read:
    refresh() reads it again; `info` is the server's object.
    """

    KIND = DATASET
    FIELDS = ("id", "name", "project", "published", "versions", "created_ms", "created_by",
              "used_by")

    id: str
    name: str
    project: str
    published: bool
    versions: List[DatasetVersion]
    created_ms: int
    created_by: str
    used_by: List[str]

    def __init__(self, client: "Client", info: Dict[str, Any]):
        self._client = client
        self._read(info)

    def _read(self, info: Dict[str, Any]) -> None:
        self.info: Dict[str, Any] = info
        for field in ("id", "name", "project", "created_by"):
            setattr(self, field, info.get(field, ""))
        self.published = bool(info.get("published", False))
        self.created_ms = info.get("created_ms", 0)
        self.used_by = list(info.get("used_by", []))
        self.versions = [DatasetVersion.from_info(v) for v in info.get("versions", [])]

    def __repr__(self) -> str:
        latest = self.latest
        what = (f"v{latest.version} ({latest.files} files, {latest.bytes} bytes)" if latest
                else "no version yet")
        return (f"<gpupool.Dataset {self.id} {self.name!r} of {self.project} {what}"
                f"{' published' if self.published else ''}>")

    @property
    def latest(self) -> Optional[DatasetVersion]:
        """Its latest version (what a mount without @VERSION gets), None before the first push."""
        return self.versions[-1] if self.versions else None

    def version(self, number: int) -> DatasetVersion:
        """Its version `number`; a KeyError when it has none such (never pushed, or deleted)."""
        wanted = check_version(number)
        for v in self.versions:
            if v.version == wanted:
                return v
        raise KeyError(f"dataset {self.name} has no version {number}; it has "
                       f"{[v.version for v in self.versions] or 'none'}")

    @property
    def created(self) -> datetime.datetime:
        """created_ms as an aware datetime (UTC)."""
        return datetime.datetime.fromtimestamp(self.created_ms / 1000, datetime.timezone.utc)

    def refresh(self) -> "Dataset":
        """Reads the dataset again (its versions, published, used_by)."""
        self._read(self._client._call("GET", f"/v1/datasets/{self.id}"))
        return self

    def publish(self, published: bool = True) -> "Dataset":
        """Publishes it to every project (or, with False, takes it back): admins only (ApiError
        403 otherwise). A task of another project mounts it by its id ("d-3")."""
        body = {"published": bool(published)}
        self._read(self._client._call("PATCH", f"/v1/datasets/{self.id}", body=body))
        return self

    def delete_version(self, version: int) -> "Dataset":
        """Deletes one version (its chunks go once no other version or snapshot lists them);
        the others keep their numbers. Refused (ApiError 409, failed_precondition) while tasks
        that mount that version have not ended."""
        number = check_version(version)
        self._read(self._client._call("DELETE", f"/v1/datasets/{self.id}/versions/{number}"))
        return self

    def delete(self) -> None:
        """Deletes it with every version. Refused (ApiError 409, failed_precondition, naming
        them) while tasks that mount it have not ended."""
        self._client._call("DELETE", f"/v1/datasets/{self.id}")
