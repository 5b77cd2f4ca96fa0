// Durable files: the one way gpupool replaces a small file (credentials, keys, identities,
// bindings, task state, hash records) so that a crash or power loss leaves either the old content
// or the new, never a part and never a name without its data; plus the default data directory,
// the free space of a file system and the error code of a failed file operation.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpupool::os {

// Writes all of `data` to `fd`, at `offset` (pwrite) or, when it is negative, at the descriptor's
// file offset (write); short writes and EINTR are retried. Returns 0 or the errno of the failure
// (EIO when nothing could be written).
int WriteAll(int fd, std::string_view data, int64_t offset = -1);

// fsync(2) of the directory `dir` ("" is the current one), so that entries created, renamed or
// removed in it survive a crash. Returns 0 or the errno of the failure.
int SyncDirectory(const std::string& dir);

struct AtomicWrite {
  mode_t mode = 0600;  // exactly (the umask does not narrow it)
  // Refuse (kAlreadyExists) rather than replace a file already at the path; two writers racing to
  // create it: one wins, the other is told, neither sees the other's half.
  bool replace = true;
  // Where the temporary file is made ("": beside `path`); on the same file system as `path`.
  std::string temp_dir = {};
};

// The code of an error from a file operation that failed with `err`: kInsufficientStorage for a
// full disk or an exhausted disk quota (ENOSPC, EDQUOT), else kInternal.
ErrorCode ErrorCodeOfErrno(int err);
// A failed file operation as an Error of that code: "<what>: <strerror(err)>".
tl::unexpected<Error> FileError(const std::string& what, int err);

// The bytes an unprivileged user may still write on the file system holding `path` (statvfs's
// f_bavail × f_frsize). Errors name the path (kInternal).
Result<int64_t> FreeBytes(const std::string& path);

// Writes `data` to `path` durably and atomically: a new temporary file (O_EXCL, random name) is
// written, fsynced and closed, renamed onto `path` (linked, with `replace` false) and the
// directory of `path` fsynced. On any failure `path` keeps what it had and the temporary file is
// removed. Errors name `path` and the failed step; kInsufficientStorage when the disk is full
// (ErrorCodeOfErrno), kAlreadyExists as above, else kInternal.
Status WriteFileAtomically(const std::string& path, std::string_view data,
                           const AtomicWrite& options = {});

// The data directory of the program `name` when none is given: /var/lib/<name> as root (tasks
// under their own uids must reach their workspaces below it, which root's 0700 home forbids),
// else $HOME/.local/share/<name> (./.local/share/<name> when HOME is unset or empty).
std::string DefaultDataDir(std::string_view name);

}  // namespace gpupool::os
