// Whether this node could checkpoint a task's processes transparently (CRIU, with NVIDIA's
// cuda-checkpoint for the GPU state, which needs driver 550 or later), and why not. gpupool's
// snapshots hold a task's workspace, not its processes: a resumed task starts its command again
// (docs/snapshots.md). A node where this is available says so with the node label
// kProcessCheckpointLabel, for the scheduler and for the process-level snapshots that would plug
// into the agent's snapshotter there (its capture after the freeze, its restore before the
// launch). Nothing here fakes it: where CRIU does not work (this project's CI kernel), the node
// says why.
#pragma once

#include <functional>
#include <string>

namespace gpupool::agent {

// The label a node that can checkpoint processes registers, with the value "criu".
inline constexpr const char* kProcessCheckpointLabel = "gpupool.process-checkpoint";

struct ProcessCheckpointSupport {
  bool available = false;
  std::string why;  // not available: what is missing or failed, for people
};

// Where a program is: its path, or empty when the node has none (programs.h FindProgram).
using ProgramFinder = std::function<std::string(const std::string& name)>;

// Looks for `criu` with `find` and runs `criu check`; with real GPUs it needs `cuda-checkpoint`
// too.
ProcessCheckpointSupport DetectProcessCheckpoint(bool real_gpus, const ProgramFinder& find);

}  // namespace gpupool::agent
