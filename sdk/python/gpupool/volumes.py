"""Volumes (docs/sdk.md "Volumes"): a project's data that outlives its tasks, on one node's disk
(node-local: the node of the first task that mounts it, unless created on one) or on the shared
storage. The Volume record the server answers with, the mounts a task asks for
(create_task(volumes=...)) and the checks of the arguments that name a volume, its size or a
mount, so that a mistake is a ValueError naming the argument before any request."""

import dataclasses
import datetime
import re
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Union

from ._storage import Kind, fields_of, mount_list, mount_path, paths_overlap

if TYPE_CHECKING:
    from .client import Client

MAX_MOUNTS = 16  # core::kMaxVolumeMounts
MAX_BYTES = 1 << 50  # proto::kMaxVolumeBytes: 1 PiB
VOLUME = Kind("volume", re.compile(r"v-[0-9]+"), "v-3")
_SIZE = re.compile(r"\s*([0-9]+)\s*([A-Za-z]*)\s*")
# Binary units, as the CLI's --size takes them: "200Gi", "200G", "200GiB" and "200GB" alike
# (None: no unit, which a string must have).
_UNIT_SHIFT: Dict[str, Optional[int]] = {
    "": None, "b": 0,
    **{letter + suffix: shift
       for letter, shift in (("k", 10), ("m", 20), ("g", 30), ("t", 40), ("p", 50))
       for suffix in ("", "i", "ib", "b")}}


def parse_size(value: Union[int, str], argument: str = "size") -> int:
    """A volume's size in bytes: an int (bytes), or a whole number with a binary unit as a
    string — "200Gi", "512M", "1T" ("1536Gi", not "1.5T"). At least 1 byte, at most 1 PiB; a
    ValueError (TypeError for another type) names `argument`."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"{argument} must be bytes (an int) or a size with a unit ('200Gi'), "
                        f"got {type(value).__name__}")
    if isinstance(value, int):
        size = value
    else:
        m = _SIZE.fullmatch(value)
        unit = m.group(2).lower() if m else "?"
        if unit not in _UNIT_SHIFT:
            raise ValueError(f"{argument} {value!r} is not a size: use a whole number and a "
                             "binary unit, like '512M', '200Gi' or '1T' (or bytes as an int)")
        shift = _UNIT_SHIFT[unit]
        if shift is None:
            raise ValueError(f"{argument} {value!r} needs a unit: '{value.strip()}Gi'? "
                             "(K, M, G, T, P: binary; or give bytes as an int)")
        size = int(m.group(1)) << shift
    if size < 1:
        raise ValueError(f"{argument} must be at least 1 byte, got {value!r}")
    if size > MAX_BYTES:
        raise ValueError(f"{argument} must be at most 1 PiB ({MAX_BYTES} bytes), got {value!r}")
    return size


def check_name(name: Any, argument: str = "name") -> str:
    """A new volume's name: 1..63 of a-z 0-9 _ . -, starting with a letter or digit, not of an
    id's form v-<number> (core/volume.cc ValidateVolumeName, with its messages)."""
    return VOLUME.check_name(name, argument)


def volume_ref(value: Any, argument: str = "volume") -> str:
    """A volume named by a user: a Volume, its id ("v-3") or its name."""
    return VOLUME.ref(value, argument)


def parse_mount(text: str, argument: str = "volumes") -> Dict[str, Any]:
    """"NAME:/root/data[:ro|:rw]" (the CLI's --volume) as a VolumeMount body."""
    if ":" not in text:
        raise ValueError(f"{argument}: {text!r} needs a path: 'NAME:/root/PATH[:ro]'")
    name, rest = text.split(":", 1)
    read_only = False
    if ":" in rest:
        rest, flag = rest.rsplit(":", 1)
        if flag not in ("ro", "rw"):
            raise ValueError(f"{argument}: {text!r}: {flag!r} is neither ro nor rw")
        read_only = flag == "ro"
    return {"volume": volume_ref(name, f"{argument}: volume"),
            "path": mount_path(rest, f"{argument}: path of {name}"), "read_only": read_only}


Mounts = Union[None, Mapping[Union[str, "Volume"], str], Sequence[str]]


def volume_mounts(volumes: Mounts) -> Optional[List[Dict[str, Any]]]:
    """create_task's `volumes` as TaskSubmit's: a mapping {name (or Volume): path} (read-write)
    or a list of "NAME:PATH[:ro]" strings; at most 16, no volume twice, no path inside another's
    (core's ValidateVolumeMounts, checked here so that the message names the argument)."""
    if volumes is None:
        return None

    def from_key(volume: Any, path: Any) -> Dict[str, Any]:
        ref = volume_ref(volume, "volumes: a key")
        return {"volume": ref, "path": mount_path(path, f"volumes: path of {ref}"),
                "read_only": False}

    mounts = mount_list(volumes, "volumes", "NAME:/root/PATH[:ro]", from_key, parse_mount,
                        MAX_MOUNTS)
    for i, m in enumerate(mounts):
        for other in mounts[:i]:
            if m["volume"] == other["volume"]:
                raise ValueError(f"volumes: volume {m['volume']!r} is mounted twice")
            a, b = m["path"], other["path"]
            if paths_overlap(a, b):
                raise ValueError(f"volumes: path {a} of {m['volume']!r} overlaps {b} of "
                                 f"{other['volume']!r}")
    return mounts


@dataclasses.dataclass(frozen=True)
class VolumeMount:
    """A task's mount of a volume (task.volumes): `volume` (its name), `path` (where the task
    sees it, "/root/data"), `read_only`, `volume_id` ("v-3") and `shared` (a shared volume)."""

    volume: str
    path: str
    read_only: bool = False
    volume_id: str = ""
    shared: bool = False

    from_info = classmethod(fields_of)


class Volume:
    """A project's volume (Client.create_volume, get_volume, list_volumes).

    id ("v-3"), name (unique in its project), project, size_bytes (what it may hold, counted
    against the project's storage quota), shared (on the shared storage; False: node-local),
    node (a node-local volume's node; "" until the first task that mounts it is placed, and for
    a shared one), state ("ready", or "deleting" while its node removes its files), created_ms,
    created_by (the user), used_by (the ids of the tasks that mount it and have not ended). They
    are the record as last read: refresh() reads it again; `info` is the server's object.
    """

    KIND = VOLUME
    FIELDS = ("id", "name", "project", "size_bytes", "shared", "node", "state", "created_ms",
              "created_by", "used_by")

    id: str
    name: str
    project: str
    size_bytes: int
    shared: bool
    node: str
    state: str
    created_ms: int
    created_by: str
    used_by: List[str]

    def __init__(self, client: "Client", info: Dict[str, Any]):
        self._client = client
        self._read(info)

    def _read(self, info: Dict[str, Any]) -> None:
        self.info: Dict[str, Any] = info
        defaults = {"size_bytes": 0, "shared": False, "created_ms": 0, "used_by": []}
        for field in self.FIELDS:
            value = info.get(field, defaults.get(field, ""))
            setattr(self, field, list(value) if field == "used_by" else value)

    def __repr__(self) -> str:
        where = ("shared" if self.shared
                 else f"on {self.node}" if self.node else "node-local, not yet bound")
        return (f"<gpupool.Volume {self.id} {self.name!r} {format_size(self.size_bytes)} "
                f"{where} {self.state}>")

    @property
    def created(self) -> datetime.datetime:
        """created_ms as an aware datetime (UTC)."""
        return datetime.datetime.fromtimestamp(self.created_ms / 1000, datetime.timezone.utc)

    def refresh(self) -> "Volume":
        """Reads the volume again (its size, node, state, used_by)."""
        self._read(self._client._call("GET", f"/v1/volumes/{self.id}"))
        return self

    def resize(self, size: Union[int, str]) -> "Volume":
        """Changes its size (bytes, or "300Gi"): larger, or smaller — a task that holds more
        than the new size is stopped. Counted against the project's storage quota."""
        body = {"size_bytes": parse_size(size)}
        self._read(self._client._call("PATCH", f"/v1/volumes/{self.id}", body=body))
        return self

    def delete(self) -> None:
        """Deletes it: its files are removed by its node, then it goes. Refused (ApiError 409,
        failed_precondition, naming them) while tasks that mount it have not ended."""
        self._client._call("DELETE", f"/v1/volumes/{self.id}")


def format_size(size: int) -> str:
    """Bytes as the largest binary unit that divides them: "200Gi", "1Ti", "512Mi", "10 B"."""
    for unit, shift in (("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
        if size and size % (1 << shift) == 0:
            return f"{size >> shift}{unit}"
    return f"{size} B"
