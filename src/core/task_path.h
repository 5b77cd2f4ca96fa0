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

inline constexpr size_t kMaxTaskPathBytes = 1024;
inline constexpr size_t kMaxTaskPathComponentBytes = 255;
inline constexpr size_t kMaxTaskPathDepth = 32;

// A task path names a file or directory below the workspace: 1..kMaxTaskPathBytes bytes of valid
// UTF-8 without NUL or control characters, not starting with '/', made of 1..kMaxTaskPathDepth
// components that are non-empty (no "//", no trailing '/'), not "." or "..", and at most
// kMaxTaskPathComponentBytes bytes each. kInvalidArgument names the path (`what`, e.g.
// "path") and the rule it breaks.
Status ValidateTaskPath(std::string_view path, std::string_view what = "path");

// The components of a valid task path ("a/b/c" → {"a", "b", "c"}).
std::vector<std::string> SplitTaskPath(std::string_view path);

// `path` quoted for a message: control characters and bytes that are not UTF-8 as \xNN.
std::string QuoteTaskPath(std::string_view path);

}  // namespace gpupool
