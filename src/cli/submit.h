// `gpupool submit`'s flags and their mapping onto the POST /v1/tasks body: a pure function, so
// every check happens before any request and the mapping is unit-tested. Errors are usage errors
// that name the flag.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "proto/tasks.h"

namespace gpupool::cli {

// The flags as typed (nullopt: not given). Numbers stay text until BuildSubmitBody checks them.
struct SubmitFlags {
  std::optional<std::string> name;
  std::optional<std::string> gpus;       // whole GPUs, 1..8
  std::optional<std::string> gpu_share;  // milli-GPU of one GPU, 1..999
  std::optional<std::string> gpu_mem;    // GPU memory with a share: MiB or 16Gi
  std::optional<std::string> mig;        // MIG profile, "3g.40gb"
  std::optional<std::string> gpu_model;  // "A100-80GB,H100-80GB"
  std::optional<std::string> cpu;        // milli-CPU
  std::optional<std::string> mem;        // MiB or 16Gi
  std::optional<std::string> disk;       // GiB
  std::optional<std::string> image;
  std::optional<std::string> max_runtime;  // duration, "2h"
  std::optional<std::string> stop_when;
  std::optional<std::string> stop_when_idle;  // duration: stop after its GPUs idled this long
  std::optional<std::string> priority;        // 0..1000
  std::optional<std::string> project;
  bool restartable = false;
  std::optional<std::string> snapshot_every;      // duration: periodic snapshots
  std::optional<std::string> checkpoint_signal;   // SIGUSR1, USR2, …
  std::optional<std::string> checkpoint_timeout;  // duration
  std::optional<std::string> from_snapshot;       // s-12
  std::optional<std::string> nodes;             // a distributed job's members: 2..4096
  std::optional<std::string> members_per_node;  // at most this many members on a node
  std::optional<std::string> topology_label;    // the node label naming a network domain
  std::optional<std::string> topology;          // required | preferred
  bool hold = false;                     // stays held after submission (and the inputs' upload)
  std::optional<std::string> array;      // a job array's indexes: "0-99%10"
  std::vector<std::string> inputs;       // --input LOCAL[:PATH], as typed
  std::vector<std::string> ports;        // --port N, as typed (repeatable)
  std::vector<std::string> volumes;      // --volume NAME:PATH[:ro], as typed (repeatable)
  std::vector<std::string> datasets;     // --dataset NAME[@V]:PATH, as typed (repeatable)
  bool jupyter = false;                  // run JupyterLab (or Notebook) on the first port
  std::vector<std::string> command;      // after --
};

// One --input: a local file or directory and the path it becomes in the task's workspace.
struct SubmitInput {
  std::string flag;  // as typed, for messages
  std::string local;
  std::string path;  // a task path
};

// The request body for POST /v1/tasks, with only the fields the flags set (the rest keep the wire
// type's defaults, which are the server's). Fails on the first problem, naming the flag:
// malformed numbers, sizes and durations, out-of-range values, two GPU forms at once (--gpus,
// --gpu-share, --mig), --gpu-mem without --gpu-share, an unknown MIG profile,
// nothing to run. --hold or any --input submits the task held (hold).
// --jupyter: the command is JupyterCommand on the first --port (8888 when none is given).
Result<proto::TaskSubmit> BuildSubmitBody(const SubmitFlags& flags);

// With --array, the POST /v1/arrays body: BuildSubmitBody's, and the indexes as ParseArraySpec
// reads them (sent in canonical form). Errors name --array; --input and --nodes are refused with
// it (an array's elements get no inputs of their own and are no distributed job).
Result<proto::TaskArraySubmit> BuildArrayBody(const SubmitFlags& flags);

// With --nodes, the POST /v1/jobs body: BuildSubmitBody's, and the job's size and placement
// rules. Errors name the flag: --gpu-share (members use whole GPUs or a MIG instance), --input
// (members get no inputs of their own), --members-per-node, --topology-label and --topology
// without --nodes, --topology required without a label.
Result<proto::JobSubmit> BuildJobBody(const SubmitFlags& flags);

// The command of `gpupool submit --jupyter`: JupyterLab when the task's environment has it, else
// Jupyter Notebook, on `port` with the gateway's base path ($GPUPOOL_BASE_PATH_<port>), without
// a token or password (the gateway authenticates), open to the gateway's Host, its root the
// workspace. It listens on 127.0.0.1 (a process task: only the tunnel reaches it, as the task's
// own socket) or on every address of a container (`in_container`: the agent dials the
// container's address).
std::vector<std::string> JupyterCommand(int32_t port, bool in_container);

// The --input values: LOCAL[:PATH], split at the last ':' ("./a:b:" keeps a local name with a
// ':'). PATH (without trailing '/'s) must pass the task path rules; absent or empty, it is
// LOCAL's base name. Two inputs may not become the same path. Usage errors name the flag.
Result<std::vector<SubmitInput>> ParseSubmitInputs(const std::vector<std::string>& inputs);

}  // namespace gpupool::cli
