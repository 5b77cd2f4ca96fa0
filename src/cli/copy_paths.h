// The path arithmetic of `gpupool cp` (commands_files.cc), pure so that it is unit-tested: which
// argument names a task's file (ID:PATH), and where each file lands on the other side, cp -r
// style. Errors are usage errors naming the argument.
#pragma once

#include <string>
#include <string_view>

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

// The name a local file or directory keeps on the other side: the last component of its
// absolute, normalised path (for "." the current directory's name), checked as a task path.
Result<std::string> LocalName(const std::string& local);

// `name` below the task directory `dir` ("" being the root).
std::string JoinTaskPath(const std::string& dir, const std::string& name);

// Where a file of a listing lands on the other side: its path relative to the listed path
// `base` (a directory, "" the root) — or its last component when `base` is the file itself.
std::string RelativeToListed(const std::string& base, bool base_is_dir, const std::string& path);

}  // namespace gpupool::cli
