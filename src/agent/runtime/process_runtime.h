// The node agent's process runtime: each task a local process tree in its own workspace, uid,
// cgroup and clean environment (GPU visibility, share limits); rotated output logs; stop (SIGTERM,
// then SIGKILL after a grace); exact start/end reports; re-adoption after an agent restart.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/runtime/cgroup.h"
#include "agent/runtime/rotating_log.h"
#include "core/result.h"

namespace gpupool::agent {

// What to run and with which limits. 0 means "no limit" for cpu_milli, memory_mib and pids_max.
struct LaunchSpec {
  std::string task_id;               // [A-Za-z0-9_.-], 1..128 characters, not starting with '.'
  std::vector<std::string> command;  // argv; command[0] without '/' is looked up in PATH
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
};

// The task's environment, as Launch builds it: PATH=/usr/local/bin:/usr/bin:/bin, HOME=workspace,
// LANG=C.UTF-8, then spec.env, then GPUPOOL_TASK_ID, GPUPOOL_WORKSPACE, GPUPOOL_METRICS_FILE,
// CUDA_VISIBLE_DEVICES (set even when empty, so a CPU task sees no GPU), and for a share
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (ceil(milli / 10), at least 1) and, with gpu_mem_mib,
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT ("0=1024M,1=1024M": device ordinals within the visible set).
// Nothing is inherited from the agent. spec.env may not set the variables the runtime owns.
std::map<std::string, std::string> TaskEnvironment(const LaunchSpec& spec,
                                                   const std::string& workspace,
                                                   const std::string& metrics_file);

enum class LogStream { kStdout, kStderr };

// A task the runtime watches.
struct RunningTask {
  std::string task_id;
  pid_t pid = 0;             // the first process; session and process-group leader
  uint64_t start_ticks = 0;  // its /proc start time: guards against pid reuse
  int64_t started_ms = 0;    // wall clock, measured by the runtime at fork
  uid_t uid = 0;             // the task's own uid (or the agent's when not root)
  gid_t gid = 0;
  bool own_uid = false;
  std::string workspace;
  LimitStatus limits;  // which of cpu/memory/pids limits the kernel enforces
  TaskCgroup cgroup;
  bool adopted = false;  // found by Adopt after a restart rather than launched
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

struct AdoptResult {
  std::vector<RunningTask> running;  // still alive: watched again, Reap reports their end
  std::vector<ExitReport> ended;     // ended before (reported again until Remove) or lost now
};

struct RuntimeOptions {
  int64_t log_max_bytes = 16 << 20;  // rotate stdout.log / stderr.log at this size (0: never)
  int log_keep = 3;                  // rotated files kept: stdout.log.1 … .3
  bool use_cgroups = true;
  std::string cgroup_parent;            // hierarchy path to nest under; "": the agent's own group
  std::string cgroup_name = "gpupool";  // the runtime's group; tasks are <parent>/<name>/<id>
  bool own_uid = true;                  // root only: each task gets its own uid/gid from the range
  uint32_t uid_base = 200000;
  uint32_t uid_count = 65536;
  std::chrono::milliseconds poll_interval{100};  // OOM counters, processes without a pidfd
  // Called from the runtime's thread, with no lock held, after reports were queued for Reap
  // (may call any method but must not destroy the runtime).
  std::function<void()> on_exit;
};

// Layout of root_dir: tasks/<id>/{workspace/, metrics.jsonl, stdout.log*, stderr.log*,
// stdout.pipe, stderr.pipe, state.json} and uid_next. The task may write its workspace and
// metrics file only. Tasks survive the runtime (and the agent): destroying it stops watching,
// and a new runtime on the same root_dir finds them with Adopt.
//
// Output goes through a FIFO the task holds open for reading and writing, so a task writing while
// the agent restarts blocks when the pipe (1 MiB) is full instead of dying of SIGPIPE; the new
// agent drains it. When the first process ends, whatever is left of its tree is killed. As root,
// tasks run under uid_base + n (n from a counter persisted in root_dir, never reused while a task
// holds it); every directory above root_dir must be searchable by others (Open checks). When not
// root, tasks run as the agent's uid and can reach whatever the agent can. The agent must not
// reap children it did not start by waitpid(-1), nor ignore SIGCHLD.
//
// Thread-safe. One thread of its own polls the output pipes and pidfds.
class ProcessRuntime {
 public:
  static Result<std::unique_ptr<ProcessRuntime>> Open(const std::string& root_dir,
                                                      RuntimeOptions options = {});
  // Stops watching; the tasks keep running.
  ~ProcessRuntime();
  ProcessRuntime(const ProcessRuntime&) = delete;
  ProcessRuntime& operator=(const ProcessRuntime&) = delete;

  // Starts the task; returns once it runs its command (exec succeeded). Errors: kInvalidArgument
  // (bad spec), kAlreadyExists (id known or its directory exists), kNotFound (command not
  // found), kResourceExhausted (no free uid), kInternal (fork, exec or setup failed: named).
  Result<RunningTask> Launch(const LaunchSpec& spec);
  // SIGTERM to the process group and every process in the task's cgroup, SIGKILL to all of them
  // after `grace` (at once when grace is 0). Returns at once; Reap reports the end ("stopped").
  // Stopping an ended task is a no-op; a second Stop may shorten the grace.
  Status Stop(const std::string& task_id, std::chrono::milliseconds grace);
  // Reports of tasks that ended since the last call, waiting up to `wait` for one.
  std::vector<ExitReport> Reap(std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  // Finds the tasks under root_dir this runtime does not know yet (after a restart): running
  // ones are watched again (pid and /proc start time must match), the others are reported.
  Result<AdoptResult> Adopt();
  // Deletes an ended task's directory and cgroups. kFailedPrecondition while it runs.
  Status Remove(const std::string& task_id);

  // Bytes of the task's stdout or stderr from logical `offset` (bytes since the task started,
  // unaffected by rotation), at most max_bytes. Works until Remove.
  Result<LogChunk> ReadLog(const std::string& task_id, LogStream stream, int64_t offset,
                           int64_t max_bytes) const;

  std::vector<RunningTask> Running() const;
  std::vector<std::string> Tasks() const;  // every task known, running or ended
  bool own_uids() const { return own_uid_; }
  const Cgroups& cgroups() const { return cgroups_; }

  std::string TaskDir(const std::string& task_id) const;
  std::string Workspace(const std::string& task_id) const;
  std::string MetricsPath(const std::string& task_id) const;
  std::string LogPath(const std::string& task_id, LogStream stream) const;

 private:
  struct Task;
  ProcessRuntime(std::string root, RuntimeOptions options, bool own_uid, Cgroups cgroups,
                 int wake_fd);
  Result<std::unique_ptr<Task>> Spawn(const LaunchSpec& spec, uid_t uid, gid_t gid);
  Result<uid_t> AllocateUidLocked();
  // Writes tasks/<id>/state.json; 0 or the errno. (Locked: under mu_ once the task is shared.)
  int WriteStateLocked(const Task& t);
  Result<std::unique_ptr<Task>> LoadTaskLocked(const std::string& task_id, ExitReport* ended);
  void SignalTreeLocked(Task& t, int sig);
  void DrainLocked(Task& t, int stream, size_t budget);
  void ObserveExitLocked(Task& t, int64_t observed_ms);
  void FinishLocked(Task& t, ExitReport report);
  void PollLocked(int64_t now_mono);
  void MonitorLoop();
  void Wake();

  const std::string root_;
  const RuntimeOptions options_;
  const bool own_uid_;
  const Cgroups cgroups_;
  const int wake_fd_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::unique_ptr<Task>> tasks_;
  std::map<std::string, uid_t> launching_;  // ids being launched -> their uid
  std::vector<ExitReport> reports_;
  uint64_t uid_next_ = 0;
  int64_t last_poll_mono_ = 0;
  bool shutting_down_ = false;
  std::vector<char> buffer_;
  std::thread monitor_;
};

}  // namespace gpupool::agent
