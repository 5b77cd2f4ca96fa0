"""A task's files through the server (docs/api.md "Task files"), as `gpupool cp` moves them:
uploads in 4 MiB chunks that resume where an interrupted upload stopped and are committed with
their SHA-256; downloads chunk by chunk into a temporary file, resumed from it, checked against
the listed SHA-256 and only then renamed into place.

Remote paths are the task's workspace, which the task sees as its home `/root`: "/root/data",
"data" and "/root/" (the whole workspace) are accepted; another absolute path is refused.
"""

import hashlib
import os
from typing import TYPE_CHECKING, Any, Dict, List, Sequence, Tuple, Union

from .errors import ApiError

if TYPE_CHECKING:
    from .client import Client

CHUNK_BYTES = 4 << 20  # proto::kFileChunkBytes
WORKSPACE = "/root"
PART_SUFFIX = ".gpupool-part"
LocalPaths = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]  # upload_files' sources


def task_path(remote_path: str) -> str:
    """The workspace-relative path of `remote_path` ("" for the workspace itself)."""
    p = remote_path.strip()
    if p.startswith("/"):
        if p == WORKSPACE or p.startswith(WORKSPACE + "/"):
            p = p[len(WORKSPACE):]
        else:
            raise ValueError(f"remote_path '{remote_path}' is outside the task's workspace "
                             f"{WORKSPACE}: give a path below {WORKSPACE}/ or a relative one")
    parts = [c for c in p.split("/") if c not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"remote_path '{remote_path}' has a '..' component; paths may not leave "
                         "the workspace")
    return "/".join(parts)


def _join(a: str, b: str) -> str:
    return f"{a}/{b}" if a else b


def plan_upload(local_paths: Sequence[str], remote_path: str) -> List[Tuple[str, str]]:
    """(local file, task path) pairs, cp -r style: into `remote_path` when it is a directory
    (ends with "/", is the workspace, or several sources are given), else as that name."""
    base = task_path(remote_path)
    into_dir = (remote_path.endswith("/") or base == "" or len(local_paths) > 1
                or any(os.path.isdir(p) for p in local_paths))
    out = []
    for local in local_paths:
        if not os.path.exists(local):
            raise FileNotFoundError(f"local_path '{local}' does not exist")
        name = os.path.basename(os.path.normpath(os.path.abspath(local)))
        target = _join(base, name) if into_dir else base
        if os.path.isdir(local):
            for root, dirs, files in os.walk(local):
                dirs.sort()
                rel = os.path.relpath(root, local)
                for f in sorted(files):
                    sub = f if rel == "." else _join(rel.replace(os.sep, "/"), f)
                    out.append((os.path.join(root, f), _join(target, sub)))
        else:
            out.append((local, target))
    return out


def _hash_prefix(f, length: int):
    h = hashlib.sha256()
    left = length
    while left > 0:
        block = f.read(min(CHUNK_BYTES, left))
        if not block:
            break
        h.update(block)
        left -= len(block)
    return h


def upload_file(client: "Client", task_id: str, local: str, path: str) -> Dict[str, Any]:
    """Uploads one file, continuing an interrupted upload of the same path; when the bytes the
    server already had turn out to be another file's (the commit's hash differs), starts over
    once from 0."""
    size = os.path.getsize(local)
    for fresh in (False, True):
        received = 0
        if not fresh and size > 0:
            received = client._call("GET", f"/v1/tasks/{task_id}/uploads",
                                    query={"path": path})["received"]
            if received > size:
                received = 0
        with open(local, "rb") as f:
            h = _hash_prefix(f, received)
            offset = received
            f.seek(offset)
            while offset < size:
                chunk = f.read(CHUNK_BYTES)
                if not chunk:
                    raise OSError(f"{local} shrank while it was uploaded")
                client._call("PUT", f"/v1/tasks/{task_id}/uploads",
                             query={"path": path, "offset": offset, "size": size}, raw=chunk)
                h.update(chunk)
                offset += len(chunk)
        try:
            return client._call("POST", f"/v1/tasks/{task_id}/uploads/commit",
                                body={"path": path, "size": size, "sha256": h.hexdigest()})
        except ApiError as e:
            if fresh or received == 0 or e.code != "invalid_argument":
                raise
    raise AssertionError("unreachable")


def _relative_to_listed(base: str, base_is_dir: bool, path: str) -> str:
    if not base_is_dir:
        return path.rsplit("/", 1)[-1]
    return path[len(base) + 1:] if base else path


def download_file(client: "Client", task_id: str, entry: Dict[str, Any], target: str) -> None:
    """Downloads one listed file to `target` through target + PART_SUFFIX (resumed from it),
    checking size and SHA-256 before the rename; a resumed copy that does not check out is
    fetched again from 0 once."""
    part = target + PART_SUFFIX
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    for fresh in (False, True):
        have = 0 if fresh or not os.path.exists(part) else os.path.getsize(part)
        if have > entry["size"]:
            have = 0
        with open(part, "r+b" if have else "wb") as f:
            h = _hash_prefix(f, have)
            f.seek(have)
            f.truncate()
            offset = have
            while offset < entry["size"]:
                r = client._transport.request(
                    "GET", f"/v1/tasks/{task_id}/files/content",
                    query={"path": entry["path"], "offset": offset, "length": CHUNK_BYTES})
                if not r.body:
                    raise OSError(f"the server sent no bytes of '{entry['path']}' at {offset}")
                f.write(r.body)
                h.update(r.body)
                offset += len(r.body)
            f.flush()
            os.fsync(f.fileno())
        if offset == entry["size"] and h.hexdigest() == entry["sha256"]:
            os.replace(part, target)
            return
        if fresh or have == 0:
            os.unlink(part)
            raise OSError(f"'{entry['path']}' of task {task_id} arrived as {offset} bytes hashing "
                          f"to {h.hexdigest()}, the listing says {entry['size']} bytes hashing to "
                          f"{entry['sha256']}; nothing was kept")


def download(client: "Client", task_id: str, remote_path: str, local_path: str) -> List[str]:
    """A file, or a directory's files (into `local_path`, keeping their paths below it)."""
    base = task_path(remote_path)
    listing = client._call("GET", f"/v1/tasks/{task_id}/files", query={"path": base or None})
    is_dir = listing["type"] == "dir"
    written = []
    for entry in listing["files"]:
        rel = _relative_to_listed(base, is_dir, entry["path"])
        if is_dir:
            target = os.path.join(local_path, *rel.split("/"))
        elif os.path.isdir(local_path) or local_path.endswith(os.sep):
            target = os.path.join(local_path, rel)
        else:
            target = local_path
        download_file(client, task_id, entry, target)
        written.append(target)
    if is_dir:
        os.makedirs(local_path, exist_ok=True)
    return written

