// Paths of a task's files (docs/api.md "Task files"): relative to the task's workspace,
// '/'-separated, checked the same way by the server's file store, the agent and the CLI so that no
// path can name anything outside the workspace. Pure string rules; no file system access.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpupool {

// Where a task sees its workspace, in both runtimes: its home directory.
inline constexpr const char* kTaskHome = "/root";

inline constexpr size_t kMaxTaskPathBytes = 1024;
inline constexpr size_t kMaxTaskPathComponentBytes = 255;
inline constexpr size_t kMaxTaskPathDepth = 32;

// A task path names a file or directory below the workspace: 1..kMaxTaskPathBytes bytes of valid
// UTF-8 without NUL or control characters, not starting with '/', made of 1..kMaxTaskPathDepth
// components that are non-empty (no "//", no trailing '/'), not "." or "..", and at most
// kMaxTaskPathComponentBytes bytes each. kInvalidArgument names the path (`what`, e.g.
// "path") and the rule it breaks.
Status ValidateTaskPath(std::string_view path, std::string_view what = "path");

// A path of a task's files as people write it — "/root/data", "/root/", "data", "./data/" — as
// a task path, "" for the whole workspace: kTaskHome and what is below it are the workspace,
// a relative path is below it; trailing '/'s and "." components go. Any other absolute path is
// kInvalidArgument "<what> '/etc/x' is outside the task's workspace /root: …"; the result must
// pass ValidateTaskPath (errors name `what`).
Result<std::string> TaskPathFromUser(std::string_view path, std::string_view what = "path");

// The components of a valid task path ("a/b/c" → {"a", "b", "c"}).
std::vector<std::string> SplitTaskPath(std::string_view path);

// `path` quoted for a message: control characters and bytes that are not UTF-8 as \xNN.
std::string QuoteTaskPath(std::string_view path);

}  // namespace gpupool
