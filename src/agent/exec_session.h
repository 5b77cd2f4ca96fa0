// The agent's end of `gpupool exec` (docs/api.md "Exec"): the tunnel's `exec` streams. The
// stream carries proto/exec.h's frames: the client's `start` names the command, which the
// runtime starts inside the task (TaskRuntime::Exec); its output goes back as `stdout`/`stderr`
// frames, paced by the stream's credit; `stdin` frames are written to it as it reads them (the
// credit returns only then), `resize` changes its terminal's window; `exit` ends the stream once
// the command ended and its output is sent. The stream's reset (the client left, the task ended,
// the tunnel dropped) kills the command's process group.
#pragma once

#include <functional>
#include <string>

#include "agent/runtime/task_runtime.h"
#include "agent/tunnel_agent.h"
#include "core/result.h"

namespace gpupool::agent {

// Starts a command in a task (TaskRuntime::Exec).
using ExecStarter = std::function<Result<ExecProcess>(const std::string& task, const ExecSpec&)>;
// Whether task `task` runs on this node now: an error is the OPEN's refusal.
using TaskCheck = std::function<Status(const std::string& task)>;

// The tunnel handler of kind `exec`. Each accepted stream gets a thread of its own while its
// command runs.
TunnelHandler ExecHandler(TaskCheck runs_here, ExecStarter start);

}  // namespace gpupool::agent
