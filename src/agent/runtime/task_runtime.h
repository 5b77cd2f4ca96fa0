// What every task runtime of the node agent shares: the launch spec, the task's environment, how a
// task ended (ExitReport), the task directory's files and the TaskRuntime interface the agent
// drives. ProcessRuntime runs a command as a local process tree, DockerRuntime runs an image in a
// container; RuntimeRouter gives each task to exactly one of them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/runtime/cgroup.h"
#include "agent/runtime/rotating_log.h"
#include "core/result.h"
#include "core/task_path.h"
#include "core/unique_fd.h"

namespace gpupool::agent {

// What a task sees of itself, in both runtimes (where the process runtime gives it a mount
// namespace): its workspace at kTaskHome (core/task_path.h), its home; its metrics file as
// kTaskFilesDir/kMetricsFileName (docker: kMetricsFile of docker_api.h); its own uid named
// kTaskUser in /etc/passwd and /etc/group.
inline constexpr const char* kTaskFilesDir = "/run/gpupool";
inline constexpr const char* kMetricsFileName = "metrics.jsonl";
// The checkpoint protocol's directory (docs/snapshots.md), beside the metrics file in the task's
// view (GPUPOOL_CHECKPOINT_DIR): the task writes into kCheckpointReady the pid of its process that
// handles the checkpoint signal; before a snapshot the agent writes a request number into
// kCheckpointRequest and sends that process the signal; the task writes that number into
// kCheckpointDone once it checkpointed.
inline constexpr const char* kCheckpointDirName = "checkpoint";
inline constexpr const char* kCheckpointReady = "ready";
inline constexpr const char* kCheckpointRequest = "request";
inline constexpr const char* kCheckpointDone = "done";
// Where a task that holds a GPU-memory share sees the interposer (src/cudashim) it is given:
// kTaskFilesDir/kCudashimName in both runtimes (a process task without a mount namespace of its
// own: the library's host path).
inline constexpr const char* kCudashimName = "libgpupool_cudashim.so";
inline constexpr const char* kTaskUser = "gpupool";

// The task's /etc/passwd: the host's `passwd` without any entry named kTaskUser or of `uid`, then
// "gpupool:x:<uid>:<gid>:gpupool task:<kTaskHome>:/bin/sh".
std::string TaskPasswd(std::string_view passwd, uid_t uid, gid_t gid);
// The task's /etc/group: the host's without any group named kTaskUser or of `gid`, then
// "gpupool:x:<gid>:".
std::string TaskGroup(std::string_view group, gid_t gid);

// What to run and with which limits. 0 means "no limit" for cpu_milli, memory_mib and pids_max.
struct LaunchSpec {
  std::string task_id;  // [A-Za-z0-9_.-], 1..128 characters, not starting with '.'
  // Non-empty: the task runs in a container of this image (docker runtime); `command` then
  // replaces the image's Cmd (its Entrypoint stays), and an empty command runs the image's default.
  std::string image;
  std::vector<std::string> command;        // argv; command[0] without '/' is looked up in PATH
  std::map<std::string, std::string> env;  // extra variables (may override PATH, HOME, LANG)
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t pids_max = 4096;
  std::vector<std::string> gpu_uuids;  // CUDA_VISIBLE_DEVICES (GPU or MIG UUIDs); empty: no GPU
  int32_t gpu_milli_per_gpu = 0;       // 1..999: a share (MPS thread percentage); 0/1000: whole
  int64_t gpu_mem_mib = 0;             // > 0: MPS pinned device memory limit per visible GPU
  // A directory that becomes the workspace (renamed there, so on the same file system, and with
  // everything in it given to the task's uid): the task's input files, prepared by the agent.
  // Empty: a new, empty workspace.
  std::string workspace_from;
  // The server queues the task again elsewhere when it loses this node, so it must not outlive
  // the server's hearing from the node (process runtime: its lease is fenced, see ServerHeard).
  bool restartable = false;
  // A distributed job's member: its container shares the node's network (docker's network mode
  // host), so that the other members reach its ports at the node's address, as they reach a
  // process task's.
  bool host_network = false;
  // The signal that asks it to checkpoint before a snapshot (GPUPOOL_CHECKPOINT_SIGNAL), a name
  // of proto::kCheckpointSignals; empty: SIGUSR1.
  std::string checkpoint_signal;
  // Volumes (docs/volumes.md): each host directory (it exists) bound at `target`, an absolute
  // path below the workspace kTaskHome as the task sees it (its mount point is made in the
  // workspace), read-only or not. A writable one is given to the task's uid.
  struct VolumeBind {
    std::string host;
    std::string target;
    bool read_only = false;
  };
  std::vector<VolumeBind> volumes;
};

// Checks what every runtime needs of a spec (id, command or image, variable names, limits, GPU
// uuids); errors name the field. The variables the runtime owns (TaskVariables) may not be set.
Status ValidateLaunchSpec(const LaunchSpec& spec);

// How a runtime holds a task to its GPU-memory share. Simulated GPUs: not at all (nothing
// allocates on them). Real ones: the interposer library is preloaded into the task's processes
// (LD_PRELOAD), which refuses allocations past GPUPOOL_GPU_MEM_LIMIT_BYTES.
struct GpuMemoryShares {
  bool enforce = false;  // the node's GPUs are real: a share must be held to its memory
  std::string cudashim;  // the interposer (an absolute path); empty: such tasks are refused
};
// Whether the task holds a GPU-memory share: GPUs, a share of each (milli 1..999) and
// gpu_mem_mib > 0. Whole GPUs are the task's alone and need no limit.
bool HoldsGpuMemoryShare(const LaunchSpec& spec);
// kFailedPrecondition when `shares` must hold `spec` to its memory and has no interposer to do
// it with, naming the task, the library and the agent's --cudashim.
Status CheckGpuMemoryShare(const LaunchSpec& spec, const GpuMemoryShares& shares);
// [A-Za-z0-9_.-], 1..128 characters, not starting with '.': safe as a file and container name.
Status ValidTaskId(const std::string& id);

// The variables the runtime owns, over spec.env: GPUPOOL_TASK_ID, GPUPOOL_WORKSPACE,
// GPUPOOL_METRICS_FILE, GPUPOOL_CHECKPOINT_DIR (kCheckpointDirName beside the metrics file) and
// GPUPOOL_CHECKPOINT_SIGNAL, CUDA_VISIBLE_DEVICES (set even when empty, so a CPU task sees no GPU),
// and for a share CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (ceil(milli / 10), at least 1) and, with
// gpu_mem_mib, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT ("0=1024M,1=1024M": device ordinals within the
// visible set). With `cudashim` (the interposer as the task sees it; given only to a task that
// HoldsGpuMemoryShare): GPUPOOL_GPU_MEM_LIMIT_BYTES (gpu_mem_mib × 2^20, one value for every
// visible GPU) and LD_PRELOAD, the interposer first, then the task's own LD_PRELOAD. Paths as the
// task sees them. A container gets these over its image's environment.
std::map<std::string, std::string> TaskVariables(const LaunchSpec& spec,
                                                 const std::string& workspace,
                                                 const std::string& metrics_file,
                                                 const std::string& cudashim = {});
// A process task's whole environment: PATH=/usr/local/bin:/usr/bin:/bin, HOME=workspace,
// LANG=C.UTF-8, then TaskVariables. Nothing is inherited from the agent.
std::map<std::string, std::string> TaskEnvironment(const LaunchSpec& spec,
                                                   const std::string& workspace,
                                                   const std::string& metrics_file,
                                                   const std::string& cudashim = {});

enum class LogStream { kStdout, kStderr };
std::string_view LogStreamName(LogStream stream);  // "stdout", "stderr"

// A task the runtime watches.
struct RunningTask {
  std::string task_id;
  pid_t pid = 0;  // the first process, session and group leader; docker: the container's init
                  // (0 when the container ended before Launch or Adopt looked)
  uint64_t start_ticks = 0;  // process runtime: its /proc start time, against pid reuse
  int64_t started_ms = 0;    // wall clock: the process runtime's fork, docker's State.StartedAt
  uid_t uid = 0;             // the task's own uid (or the agent's when not root)
  gid_t gid = 0;
  bool own_uid = false;
  std::string workspace;  // on the host
  LimitStatus limits;     // which of cpu/memory/pids limits the kernel enforces
  TaskCgroup cgroup;      // process runtime only
  std::string container;  // docker runtime only: the container's id
  bool adopted = false;   // found by Adopt after a restart rather than launched
};

enum class ExitKind {
  kExited,     // exit code known
  kSignaled,   // killed by a signal (not a stop, not the OOM killer)
  kOomKilled,  // over its memory limit: the kernel killed a process, the rest went with it
  kStopped,    // Stop was called
  kLost,       // ended while the agent was not running (status unknown) or its pid was reused
  kUnknown,    // an adopted task ended; it was not the agent's child, so its status is unknown
};
std::string_view ExitKindName(ExitKind k);
std::optional<ExitKind> ParseExitKind(std::string_view name);

struct ExitReport {
  std::string task_id;
  ExitKind kind = ExitKind::kExited;
  int exit_code = -1;      // the exit status when it exited; -1 otherwise
  int signal = 0;          // the signal that ended it, 0 if none or unknown
  int64_t started_ms = 0;  // wall clock ms since the epoch
  int64_t finished_ms = 0;
  bool finish_exact = true;  // false: it ended while the agent was down; finished_ms is when
                             // the restarted agent noticed
  // "exited with code 3", "killed by signal 9", "oom-killed: memory limit 512 MiB", "stopped",
  // "lost: …", "exited (status unknown: …)".
  std::string reason;

  friend bool operator==(const ExitReport&, const ExitReport&) = default;
};
// The reason text of a report of kind kExited, kSignaled, kOomKilled, kStopped or kUnknown.
std::string ExitReason(const ExitReport& report, int64_t memory_mib);

struct AdoptResult {
  std::vector<RunningTask> running;  // still alive: watched again, Reap reports their end
  std::vector<ExitReport> ended;     // ended before (reported again until Remove) or lost now
};

// A runtime's task directory, root/tasks/<id>: workspace/ (the task's), metrics.jsonl (the
// task's), stdout.log* and stderr.log* (rotated output), state.json (the runtime's record).
class TaskFiles {
 public:
  explicit TaskFiles(std::string root) : root_(std::move(root)) {}
  // Creates root and root/tasks (0711: task uids walk through them). `root` made absolute.
  static Result<TaskFiles> Open(const std::string& root_dir);

  const std::string& root() const { return root_; }
  std::string TaskDir(const std::string& id) const { return root_ + "/tasks/" + id; }
  std::string Workspace(const std::string& id) const { return TaskDir(id) + "/workspace"; }
  std::string MetricsPath(const std::string& id) const {
    return TaskDir(id) + "/" + kMetricsFileName;
  }
  std::string CheckpointDir(const std::string& id) const {
    return TaskDir(id) + "/" + kCheckpointDirName;
  }
  std::string LogPath(const std::string& id, LogStream stream) const;
  std::string StatePath(const std::string& id) const { return TaskDir(id) + "/state.json"; }

  // Creates the directory (0711), the workspace (0700; `workspace_from` renamed there when not
  // empty), the empty metrics file (0600) and the checkpoint directory (0700). kAlreadyExists when
  // the directory exists (then nothing is touched).
  Status Create(const std::string& id, const std::string& workspace_from = "") const;
  // Opens (appending) the task's stdout or stderr log; `base` as persisted in its state.
  Result<RotatingLog> OpenLog(const std::string& id, LogStream stream, int64_t max_bytes, int keep,
                              int64_t base) const;
  // The ids of the task directories under root/tasks, sorted; names that are not ids skipped.
  Result<std::vector<std::string>> List() const;
  // Deletes the task's directory.
  Status Delete(const std::string& id) const;

 private:
  std::string root_;
};

// Where a runtime reports trouble that no call returns (see WriteTrouble); the agent logs it.
using RuntimeWarning = std::function<void(const std::string& message)>;

// One kind of write of one task that no caller waits for (its state file, one of its logs) and
// that may keep failing, on a full disk or a read-only directory. The runtime carries on either
// way: the task runs on, output written meanwhile is lost, and an agent restarted meanwhile finds
// the task's state as last written. The failure is reported once when it starts and once when
// the write works again, not at every attempt.
class WriteTrouble {
 public:
  // `what` names the write ("state file", "stdout log").
  void Observe(const Status& written, std::string_view task_id, std::string_view what,
               const RuntimeWarning& warn);

 private:
  bool failing_ = false;
};

// A task's stdout and stderr logs as both runtimes keep them.
struct TaskLogs {
  std::optional<RotatingLog> streams[2];
  WriteTrouble trouble[2];

  // Opens both (appending) at the logical bases persisted in the task's state; the first error
  // is returned, the other stream opened regardless.
  Status Open(const TaskFiles& files, const std::string& task_id, int64_t max_bytes, int keep,
              int64_t stdout_base, int64_t stderr_base);
  RotatingLog* of(LogStream s);  // nullptr when not open
  // Appends to the stream's log when it is open (sets *rotated when it rotated); a failure goes
  // to `warn` through the stream's WriteTrouble.
  void Append(LogStream s, std::string_view data, bool* rotated, std::string_view task_id,
              const RuntimeWarning& warn);
  int64_t base(LogStream s) const;
  void CloseWriters();
  // The stream's files now (take it under the owner's lock, read without); kNotFound without one.
  Result<RotatingLog::Snapshot> Snapshot(const std::string& task_id, LogStream stream) const;
};

// The queries both runtimes answer alike from their task maps (id -> unique_ptr<Task>, a Task
// having `info`, `logs` and `ended`); the caller holds its lock.
template <typename TaskMap>
std::vector<RunningTask> RunningOf(const TaskMap& tasks) {
  std::vector<RunningTask> out;
  for (const auto& [id, t] : tasks) {
    if (!t->ended) out.push_back(t->info);
  }
  return out;
}
template <typename TaskMap>
std::vector<std::string> IdsOf(const TaskMap& tasks) {
  std::vector<std::string> out;
  for (const auto& [id, t] : tasks) out.push_back(id);
  return out;
}
template <typename TaskMap>
Result<RotatingLog::Snapshot> LogSnapshotOf(const TaskMap& tasks, const std::string& task_id,
                                            LogStream stream) {
  const auto it = tasks.find(task_id);
  if (it == tasks.end()) return NotFound("task " + task_id + " is not known");
  return it->second->logs.Snapshot(task_id, stream);
}

// A command to run inside a running task (gpupool exec): in its environment, as its user, in
// its cgroup and its view of the file system.
struct ExecSpec {
  std::vector<std::string> command;  // argv; a bare name is looked up in the task's PATH
  bool tty = false;                  // a terminal, stdout and stderr merged
  uint16_t cols = 0;                 // tty: the window (0: the kernel's default)
  uint16_t rows = 0;
  std::string term;  // tty: TERM (empty: the task's own)
  // >= 0: this connected socket is its stdin and stdout instead of pipes (an inetd-style server:
  // `dropbear -i`); `error` is still its stderr. Not with tty. Borrowed for the call.
  int stdio_socket = -1;
  // >= 0: given to it as descriptor 3 (the SSH server's host key). Borrowed for the call.
  int fd3 = -1;
};

// How a command run by Exec ended.
struct ExecStatus {
  int exit_code = 0;  // 128 + signal when a signal ended it
  int signal = 0;
};

// The command once it runs, as the caller drives it: descriptors it reads and writes (non-
// blocking once the caller sets them so), one that becomes readable when the command ended, and
// what the runtime does for the rest.
struct ExecProcess {
  UniqueFd input;   // its stdin (the process runtime's tty: the terminal's master, its output too)
  UniqueFd output;  // its stdout (a tty's whole output), or none: read `input`
  UniqueFd error;   // no tty: its stderr
  UniqueFd done;    // readable once it ended
  std::function<ExecStatus()> wait;  // once `done` is readable: how it ended (reaped)
  std::function<void()> kill;        // ends it (and what it started) now; then `wait`
  std::function<void(uint16_t cols, uint16_t rows)> resize;  // a tty's window
};

// A task runtime as the agent drives it. Implementations are thread-safe; tasks survive the
// runtime (and the agent): a new runtime on the same root finds them with Adopt.
class TaskRuntime {
 public:
  virtual ~TaskRuntime() = default;

  // Starts the task; returns once it runs. Errors: kInvalidArgument (bad spec), kAlreadyExists
  // (id known or its directory exists), kNotFound (command or image not found),
  // kFailedPrecondition (this runtime cannot run it), kInternal (setup failed: named).
  virtual Result<RunningTask> Launch(const LaunchSpec& spec) = 0;
  // SIGTERM, then SIGKILL after `grace` (at once when grace is 0). Returns at once; Reap reports
  // the end ("stopped"). Stopping an ended task is a no-op; a second Stop may shorten the grace.
  virtual Status Stop(const std::string& task_id, std::chrono::milliseconds grace) = 0;
  // Reports of tasks that ended since the last call, waiting up to `wait` for one.
  virtual std::vector<ExitReport> Reap(
      std::chrono::milliseconds wait = std::chrono::milliseconds(0)) = 0;
  // Finds the tasks this runtime does not know yet (after a restart): running ones are watched
  // again, the others are reported.
  virtual Result<AdoptResult> Adopt() = 0;
  // Deletes an ended task's directory (and whatever else holds it). kFailedPrecondition while
  // it runs.
  virtual Status Remove(const std::string& task_id) = 0;

  // Bytes of the task's stdout or stderr from logical `offset` (bytes since the task started,
  // unaffected by rotation), at most max_bytes. Works until Remove.
  virtual Result<LogChunk> ReadLog(const std::string& task_id, LogStream stream, int64_t offset,
                                   int64_t max_bytes) const = 0;

  // Starts `spec` in running task `task_id`. kNotFound: no such task here, or (the process
  // runtime) no such command; kPermissionDenied: a command not executable; kFailedPrecondition:
  // the task is not running. A container's runc refusal comes as the command's failure instead.
  virtual Result<ExecProcess> Exec(const std::string& task_id, const ExecSpec& spec) = 0;

  // Freezes (true) or thaws (false) every process of a running task, so that its files can be
  // read while it changes none (a snapshot): the process runtime's freezer cgroup, docker's
  // pause. Freezing returns once the task is frozen. kFailedPrecondition when it cannot be
  // (no freezer; not running); kNotFound for a task not known.
  virtual Status Freeze(const std::string& task_id, bool frozen) = 0;
  // Sends `sig` to process `pid` of a running task (a checkpoint request), `pid` as the task sees
  // it (a container's own pid namespace). kNotFound when no such process is the task's.
  virtual Status Signal(const std::string& task_id, pid_t pid, int sig) = 0;

  virtual std::vector<RunningTask> Running() const = 0;
  virtual std::vector<std::string> Tasks() const = 0;  // every task known, running or ended

  virtual std::string TaskDir(const std::string& task_id) const = 0;
  virtual std::string Workspace(const std::string& task_id) const = 0;  // on the host
  virtual std::string MetricsPath(const std::string& task_id) const = 0;
  virtual std::string LogPath(const std::string& task_id, LogStream stream) const = 0;
};

}  // namespace gpupool::agent
