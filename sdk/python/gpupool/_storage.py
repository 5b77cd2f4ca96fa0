"""What volumes and datasets share (volumes.py, datasets.py): core's rules for their names
(core/volume.cc ValidateStorageName, with its messages), for where a task sees them
(VolumeMountPath: below the workspace /root) and for two mounts that overlap
(MountPathsOverlap); naming one by its name, its id or its record; the forms create_task takes
their mounts in; reading their mounts' records."""

import dataclasses
import re
from typing import Any, Callable, Dict, List, Mapping, Pattern

WORKSPACE = "/root"
MAX_NAME_BYTES = 63  # core::kMaxVolumeNameBytes: a dataset's name too
_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]*")


class Kind:
    """A kind of named storage: its word ("volume"), its ids' form (v-<number>) and an example
    id ("v-3") for the messages. Its record's class (Volume) names it as its KIND."""

    def __init__(self, word: str, id_form: Pattern[str], example_id: str):
        self.word = word
        self.id_form = id_form
        self.example_id = example_id

    def is_id(self, value: str) -> bool:
        return bool(self.id_form.fullmatch(value))

    def check_name(self, name: Any, argument: str) -> str:
        """A new one's name: 1..63 of a-z 0-9 _ . -, starting with a letter or digit, never of
        its ids' form (core's ValidateVolumeName and ValidateDatasetName)."""
        if not isinstance(name, str):
            raise TypeError(f"{argument} must be a str, got {type(name).__name__}")
        if not 1 <= len(name.encode()) <= MAX_NAME_BYTES:
            raise ValueError(f"{argument} {name!r} must be 1 to {MAX_NAME_BYTES} characters")
        if not re.fullmatch(r"[a-z0-9]", name[0]):
            raise ValueError(f"{argument} {name!r} must start with a lower-case letter or a "
                             "digit")
        if not _NAME.fullmatch(name):
            raise ValueError(f"{argument} {name!r} may hold only lower-case letters, digits, "
                             "'_', '.' and '-'")
        if self.is_id(name):
            prefix = self.example_id.split("-")[0]
            raise ValueError(f"{argument} {name!r} is a {self.word} id's form ({prefix}-<number>); "
                             "choose another name")
        return name

    def ref(self, value: Any, argument: str) -> str:
        """One named by a user: its record (its id), its id or its name."""
        if getattr(type(value), "KIND", None) is self:
            return value.id
        if not isinstance(value, str):
            raise TypeError(f"{argument} must be a {self.word}'s name, its id "
                            f"('{self.example_id}') or a {self.word.capitalize()}, got "
                            f"{type(value).__name__}")
        if self.is_id(value):
            return value
        try:
            return self.check_name(value, argument)
        except ValueError as e:
            raise ValueError(f"{e} (a {self.word} is named by its name or its id, "
                             f"'{self.example_id}')") from None


def mount_path(path: Any, argument: str = "path") -> str:
    """Where a task sees a volume or a dataset, as people write it ("/root/data", "data",
    "/root/data/"), in the server's canonical form "/root/data": below the workspace /root, not
    /root itself."""
    if not isinstance(path, str):
        raise TypeError(f"{argument} must be a str, got {type(path).__name__}")
    p = path.strip()
    if p.startswith("/"):
        if p != WORKSPACE and not p.startswith(WORKSPACE + "/"):
            raise ValueError(f"{argument} {path!r} is outside the task's workspace {WORKSPACE}: "
                             f"mount a volume below it, e.g. {WORKSPACE}/data")
        p = p[len(WORKSPACE):]
    parts = [c for c in p.split("/") if c not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"{argument} {path!r} has a '..' component; paths may not leave the "
                         "workspace")
    if not parts:
        raise ValueError(f"{argument} {path!r} is the task's whole workspace {WORKSPACE}: mount a "
                         f"volume below it, e.g. {WORKSPACE}/data")
    return WORKSPACE + "/" + "/".join(parts)


def paths_overlap(a: str, b: str) -> bool:
    """Whether two canonical mount paths are the same or one is below the other."""
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")



def mount_list(mounts: Any, argument: str, form: str,
               from_key: Callable[[Any, Any], Dict[str, Any]],
               from_text: Callable[[str], Dict[str, Any]], max_mounts: int) -> List[Dict[str, Any]]:
    """create_task's mounts of one kind as TaskSubmit's list: a mapping {key: path} (each pair
    read by `from_key`) or a list of `form` strings (each read by `from_text`); at most
    `max_mounts`. Errors name `argument`."""
    if isinstance(mounts, Mapping):
        out = [from_key(key, path) for key, path in mounts.items()]
    elif isinstance(mounts, (str, bytes)):
        raise TypeError(f"{argument} must be a mapping {{name: '/root/path'}} or a list of "
                        f"'{form}' strings, not one string: put it in a list")
    else:
        out = []
        for item in mounts:
            if not isinstance(item, str):
                raise TypeError(f"{argument}: each item must be a '{form}' string, "
                                f"got {type(item).__name__}")
            out.append(from_text(item))
    if len(out) > max_mounts:
        raise ValueError(f"{argument}: {len(out)} mounts; at most {max_mounts} are allowed")
    return out


def fields_of(cls, info: Dict[str, Any]):
    """A dataclass (VolumeMount, DatasetMount) of the server's object: the fields it knows, the
    others (a later server's) left out."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in info.items() if k in names})
