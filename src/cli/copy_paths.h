// The path arithmetic of `gpupool cp` (commands_files.cc), pure so that it is unit-tested: which
// argument names a task's file (ID:PATH), and where each file lands on the other side, cp -r
// style. Errors are usage errors naming the argument.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpupool::cli {

// One side of a copy: a local path, or a task's file or directory.
struct CopyEnd {
  bool remote = false;
  std::string task_id;  // remote only
  std::string path;     // remote: a task path, "" for the task's root; local: as given
};

// ID:PATH, ID being 1..128 characters of A-Z a-z 0-9 - _ . (a task id; a bare number N is t-N),
// is remote; anything else is local (write ./t-1:x for a local file of that name). A remote PATH
// is read by TaskPathFromUser: "/root/x" and "x" name the same file, "", "." and "/root" the
// task's root, and another absolute path is refused. `which` names the argument in errors
// ("source", "destination").
Result<CopyEnd> ParseCopyEnd(const std::string& arg, std::string_view which);

// The two sides of a copy (cp, sync), one remote and the other local; usage errors name the
// argument.
struct CopyEnds {
  CopyEnd source;
  CopyEnd destination;
};
Result<CopyEnds> ParseCopyEnds(const std::string& source, const std::string& destination);

// The name a local file or directory keeps on the other side: the last component of its
// absolute, normalised path (for "." the current directory's name), checked as a task path.
Result<std::string> LocalName(const std::string& local);

// `name` below the task directory `dir` ("" being the root).
std::string JoinTaskPath(const std::string& dir, const std::string& name);

// Where a file of a listing lands on the other side: its path relative to the listed path
// `base` (a directory, "" the root) — or its last component when `base` is the file itself.
std::string RelativeToListed(const std::string& base, bool base_is_dir, const std::string& path);

// One side of `gpupool sync`: its files by path relative to the synced directory, each with its
// size and SHA-256 (empty where not known yet: a local file is hashed only when it must be).
struct SyncEntry {
  int64_t size = 0;
  std::string sha256{};
};
using SyncSide = std::map<std::string, SyncEntry>;
using Sha256Of = std::function<Result<std::string>(const std::string& rel)>;

// The paths of `from` to send: those `to` lacks, holds at another size, or holds with other
// bytes (their SHA-256s compared, asked of `from_sha` / `to_sha` where unknown — only for files
// of equal sizes, so a sync that sends little reads little more than it sends). In path order;
// a hashing error is returned as it is.
Result<std::vector<std::string>> SyncDifferences(const SyncSide& from, const SyncSide& to,
                                                 const Sha256Of& from_sha, const Sha256Of& to_sha);

}  // namespace gpupool::cli
