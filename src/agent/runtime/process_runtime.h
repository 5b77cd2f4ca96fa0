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
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/runtime/cgroup.h"
#include "agent/runtime/rotating_log.h"
#include "agent/runtime/task_runtime.h"
#include "agent/runtime/task_supervisor.h"
#include "core/result.h"

namespace gpupool::agent {

struct RuntimeOptions {
  int64_t log_max_bytes = 16 << 20;  // rotate stdout.log / stderr.log at this size (0: never)
  int log_keep = 3;                  // rotated files kept: stdout.log.1 … .3
  bool use_cgroups = true;
  std::string cgroup_parent;            // hierarchy path to nest under; "": the agent's own group
  std::string cgroup_name = "gpupool";  // the runtime's group; tasks are <parent>/<name>/<id>
  bool own_uid = true;                  // root only: each task gets its own uid/gid from the range
  // Root only: each task gets its own mount namespace (see the class comment). Off: tasks see
  // the host's file system, their workspace at its host path (what a non-root agent always does).
  bool task_view = true;
  uint32_t uid_base = 200000;
  uint32_t uid_count = 65536;
  std::chrono::milliseconds poll_interval{100};  // OOM counters, processes without a pidfd
  // How long a task's supervisor keeps it running without hearing from the runtime (see the class
  // comment); SetLease changes it. The agent makes it less than the server's node timeout.
  std::chrono::milliseconds lease{5000};
  // A task that holds a GPU-memory share gets the interposer: hard-linked (or copied) into its
  // task directory, where its mount namespace shows it at kTaskFilesDir/kCudashimName, and
  // preloaded (TaskVariables). Launch refuses such a task when the shares must be held and
  // there is no library.
  GpuMemoryShares gpu_memory;
  // Called from the runtime's thread, with no lock held, after reports were queued for Reap
  // (may call any method but must not destroy the runtime).
  std::function<void()> on_exit;
  // Called under the runtime's lock (must not call the runtime), on its thread or a caller's, when
  // a write no call returns starts or stops failing (see WriteTrouble). Unset: not reported.
  RuntimeWarning on_warning;
};

// Layout of root_dir: tasks/<id>/{workspace/, metrics.jsonl, stdout.log*, stderr.log*,
// stdout.pipe, stderr.pipe, state.json, supervisor.sock, supervisor.exit} and uid_next. The task
// may write its workspace and metrics file only.
//
// Each task runs under a supervisor process of its own (task_supervisor.h), its parent, which
// holds a lease the runtime's thread renews every quarter lease. Tasks survive the runtime (and
// the agent) for that long: destroying it, or the agent's death, ends the lease, and a new
// runtime on the same root_dir that finds them with Adopt within the lease renews it; otherwise
// the supervisor kills the task's tree and records it as lost. The supervisor records every end
// (exit code, signal, its exact time), so a task that ended while no runtime watched is still
// reported with its status. Tasks a runtime without supervisors started are adopted as they are
// (no lease; their status is then unknown).
//
// A restartable task (LaunchSpec::restartable: the server runs it again elsewhere once it loses
// this node) must also not outlive the server's hearing from the node, or a network cut would
// leave it running twice. Its lease is fenced: it is renewed only up to a lease after the last
// heartbeat the server acknowledged (ServerHeard), so its supervisor kills it a lease after the
// server last heard from the node, strictly before the server's node timeout (the agent makes the
// lease shorter than that), whether the agent is dead or only cut off. Until the first
// acknowledgement a launch gets one lease and an adopted task none (its supervisor keeps the
// deadline the previous agent gave it).
//
// Output goes through a FIFO the task holds open for reading and writing, so a task writing while
// the agent restarts blocks when the pipe (1 MiB) is full instead of dying of SIGPIPE; the new
// agent drains it. When the first process ends, whatever is left of its tree is killed. As root,
// tasks run under uid_base + n (n from a counter persisted in root_dir, never reused while a task
// holds it); every directory above root_dir must be searchable by others (Open checks). When not
// root, tasks run as the agent's uid and can reach whatever the agent can. The agent must not
// reap children it did not start by waitpid(-1), nor ignore SIGCHLD.
//
// As root (task_view), each task's first process gets a mount namespace of its own, private
// (no mount propagates either way), in which its workspace is bound at kTaskHome (/root: its
// HOME, GPUPOOL_WORKSPACE and working directory), tasks/<id>/tmp at /tmp, its task directory at
// kTaskFilesDir (GPUPOOL_METRICS_FILE is /run/gpupool/metrics.jsonl) and, with its own uid,
// generated /etc/passwd and /etc/group naming that uid kTaskUser with home /root (USER and
// LOGNAME set), so that `whoami`, `~` and getpwuid work. Everything else is the host's. The
// namespace lives as long as the task's processes: a restarted agent adopts the task as before,
// and /proc/<pid>/ns/mnt of its first process enters it. Without root no namespace can be made:
// tasks see the host's file system, HOME and GPUPOOL_WORKSPACE are the workspace's host path, and
// /root is not theirs (task_view() says which).
//
// Thread-safe. One thread of its own polls the output pipes and pidfds.
class ProcessRuntime : public TaskRuntime {
 public:
  static Result<std::unique_ptr<ProcessRuntime>> Open(const std::string& root_dir,
                                                      RuntimeOptions options = {});
  // Stops watching; the tasks keep running.
  ~ProcessRuntime() override;
  ProcessRuntime(const ProcessRuntime&) = delete;
  ProcessRuntime& operator=(const ProcessRuntime&) = delete;

  // TaskRuntime. Launch returns once the task runs its command (exec succeeded); an image is
  // kInvalidArgument here, kNotFound a command not found, kResourceExhausted no free uid, and
  // kInternal names what failed of fork, exec or the setup. Stop signals the process group and
  // every process in the task's cgroup. Adopt finds running tasks by pid and /proc start time.
  // Remove also deletes the task's cgroups.
  Result<RunningTask> Launch(const LaunchSpec& spec) override;
  Status Stop(const std::string& task_id, std::chrono::milliseconds grace) override;
  std::vector<ExitReport> Reap(
      std::chrono::milliseconds wait = std::chrono::milliseconds(0)) override;
  Result<AdoptResult> Adopt() override;
  Status Remove(const std::string& task_id) override;
  Result<ExecProcess> Exec(const std::string& task_id, const ExecSpec& spec) override;
  Status Freeze(const std::string& task_id, bool frozen) override;
  Status Signal(const std::string& task_id, pid_t pid, int sig) override;
  Result<LogChunk> ReadLog(const std::string& task_id, LogStream stream, int64_t offset,
                           int64_t max_bytes) const override;
  std::vector<RunningTask> Running() const override;
  std::vector<std::string> Tasks() const override;
  std::string TaskDir(const std::string& task_id) const override;
  std::string Workspace(const std::string& task_id) const override;
  std::string MetricsPath(const std::string& task_id) const override;
  std::string LogPath(const std::string& task_id, LogStream stream) const override;

  bool own_uids() const { return own_uid_; }
  // Whether tasks get their own mount namespace; when not, task_view_unavailable() says why.
  bool task_view() const { return task_view_; }
  const std::string& task_view_unavailable() const { return task_view_unavailable_; }
  const Cgroups& cgroups() const { return cgroups_; }
  // The lease every supervisor gets from now on (and at once); ignored when below 1 ms.
  void SetLease(std::chrono::milliseconds lease);
  std::chrono::milliseconds lease() const;
  // The server acknowledged a heartbeat this node sent at `sent`: restartable tasks may run until
  // a lease after it (their supervisors are told at once). An earlier time than one already
  // heard changes nothing.
  void ServerHeard(std::chrono::steady_clock::time_point sent);

 private:
  struct Task;
  ProcessRuntime(TaskFiles files, RuntimeOptions options, bool own_uid, Cgroups cgroups,
                 int wake_fd, std::string task_view_unavailable);
  Result<std::unique_ptr<Task>> Spawn(const LaunchSpec& spec, uid_t uid, gid_t gid);
  Result<uid_t> AllocateUidLocked();
  // Writes tasks/<id>/state.json durably. (Locked: under mu_ once the task is shared.)
  Status WriteStateLocked(const Task& t);
  // WriteStateLocked where no caller waits for it: a failure goes to on_warning.
  void SaveStateLocked(Task& t);
  Result<std::unique_ptr<Task>> LoadTaskLocked(const std::string& task_id, ExitReport* ended);
  void SignalTreeLocked(Task& t, int sig);
  void DrainLocked(Task& t, int stream, size_t budget);
  void ObserveExitLocked(Task& t, int64_t observed_ms);
  ExitReport SupervisedEnd(const Task& t, int64_t noticed_ms) const;
  ExitReport Concluded(const Task& t, ExitReport r) const;
  void RenewLeasesLocked(int64_t now_mono);
  void FinishLocked(Task& t, ExitReport report);
  void PollLocked(int64_t now_mono);
  void MonitorLoop();
  void Wake();

  const TaskFiles files_;
  const RuntimeOptions options_;
  const bool own_uid_;
  const bool task_view_;
  const std::string task_view_unavailable_;
  const Cgroups cgroups_;
  const int wake_fd_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::unique_ptr<Task>> tasks_;
  std::map<std::string, uid_t> launching_;  // ids being launched -> their uid
  std::vector<ExitReport> reports_;
  uint64_t uid_next_ = 0;
  int64_t last_poll_mono_ = 0;
  LeaseFence fence_;  // what the supervisors are told
  int64_t next_renewal_mono_ = 0;
  bool shutting_down_ = false;
  std::vector<char> buffer_;
  std::thread monitor_;
};

}  // namespace gpupool::agent
