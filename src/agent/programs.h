// The node's own programs the agent runs beside its tasks (dropbear's key tool, criu): found in
// PATH and the system's directories, run to completion with their output collected.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"

namespace gpupool::agent {

// The first executable `name` in PATH, /usr/sbin, /usr/bin, /sbin or /bin; empty when none.
std::string FindProgram(const std::string& name);

// Reads `fd` (a blocking descriptor) to its end; what passes 64 KiB is dropped.
std::string ReadToEnd(int fd);

// Runs `argv` (no shell; argv[0] a path) and returns what it printed (stdout and stderr
// together), or, when it does not exit with 0, kInternal with that text.
Result<std::string> RunTool(const std::vector<std::string>& argv);

}  // namespace gpupool::agent
