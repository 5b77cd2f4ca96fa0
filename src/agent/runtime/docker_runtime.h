// The node agent's docker runtime: each task a container of its image, run through the Docker
// Engine API over its unix socket: the workspace bind-mounted, CPU, memory and pids limits, GPUs
// by device request, output copied into the same rotated logs as a process task's, stop
// (SIGTERM, then SIGKILL after a grace), exact start and end times from Docker, re-adoption of
// its containers (found by label) after an agent restart, and a supervisor per container that
// kills it when the agent is gone for longer than its lease.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "agent/runtime/image_archive.h"
#include "agent/runtime/task_runtime.h"
#include "agent/runtime/task_supervisor.h"
#include "agent/runtime/unix_http.h"
#include "core/result.h"

namespace gpupool::agent {

namespace docker {
struct ContainerState;
}

struct DockerOptions {
  std::string socket = "/var/run/docker.sock";
  std::string network_mode = "bridge";  // HostConfig.NetworkMode of every task's container
  int64_t log_max_bytes = 16 << 20;     // as RuntimeOptions: rotate stdout.log / stderr.log
  int log_keep = 3;
  std::chrono::milliseconds api_timeout{30'000};    // one API call (a stop adds its grace)
  std::chrono::milliseconds pull_timeout{600'000};  // pulling an image missing here
  // Whether a task's GPUs are devices Docker must give its container (DeviceRequests "nvidia"):
  // true for real GPUs; false for simulated ones, which get the environment alone.
  bool gpu_devices = true;
  // A task that holds a GPU-memory share gets the interposer, bind-mounted read-only and
  // preloaded (docker::ContainerSetup::host_cudashim); Launch refuses it when the shares must be
  // held and there is no library. The library must suit the image's C library (glibc ≥ the
  // build machine's).
  GpuMemoryShares gpu_memory;
  // How long a container's supervisor keeps it without hearing from the runtime (as
  // RuntimeOptions::lease; SetLease changes it).
  std::chrono::milliseconds lease{5000};
  // Called from a runtime thread, with no lock held, after reports were queued for Reap (may
  // call any method but must not destroy the runtime).
  std::function<void()> on_exit;
  // Called on any thread, possibly under the runtime's lock (must not call the runtime), when a
  // write no call returns starts or stops failing (see WriteTrouble), or a failed launch leaves
  // its container behind. Unset: not reported.
  RuntimeWarning on_warning;
};

// Layout of root_dir: instance (this runtime's id, made at the first Open), and tasks/<id>/ as
// TaskFiles lays it out; state.json holds the container's id, where the logs stand (the rotated
// bytes and the last entry's time, so that a restarted agent neither loses nor repeats lines)
// whether Stop was called and whether the task is restartable; supervisor.sock and
// supervisor.exit are its supervisor's (task_supervisor.h). The container sees its workspace at /root (its HOME and working
// directory) and its metrics file at /gpupool/metrics.jsonl; it runs as its image's user (root
// in most images; the workspace is given to a numeric image user, opened to all for a named one).
//
// Containers are named gpupool-<instance>-<task id> and labelled gpupool.task=<task id> and
// gpupool.agent=<instance>: two agents on one machine never touch each other's containers.
// A missing image is pulled (without credentials) during Launch. Docker keeps each container's
// output (json-file) until Remove, so output written while the agent is down is copied when it
// is back. One thread per running task follows its logs; when they end, the container's state
// says how it ended. Stop is Docker's own (POST /containers/{id}/stop?t=grace), so the SIGKILL
// comes even when the agent is gone by then.
//
// Each running container has a supervisor (task_supervisor.h), a process of the agent's binary
// detached from the agent (a session of its own, adopted by init), holding a lease the
// runtime's renewal thread renews every quarter lease over its socket in the task directory, as
// the process runtime's supervisors do, fenced the same way for a restartable task
// (ServerHeard). When the agent has been gone for the lease it kills the container, and the task
// is then reported lost with why; a runtime that adopts the container within the lease renews
// it (and starts a supervisor for a running container that has none).
//
// Thread-safe.
class DockerRuntime : public TaskRuntime {
 public:
  // Checks that the daemon answers the pinned API version (kUnavailable naming the socket and
  // what failed otherwise).
  static Result<std::unique_ptr<DockerRuntime>> Open(const std::string& root_dir,
                                                     DockerOptions options = {});
  // Stops following; the containers keep running.
  ~DockerRuntime() override;
  DockerRuntime(const DockerRuntime&) = delete;
  DockerRuntime& operator=(const DockerRuntime&) = delete;

  // TaskRuntime. Launch needs spec.image (kInvalidArgument without); kFailedPrecondition for an
  // image neither here nor pullable. A command the image lacks starts and exits with 127 (the
  // init process says why on stderr), as `docker run --init` does. Adopt finds this instance's
  // containers; a task directory without a container is reported lost.
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

  // The lease every supervisor gets from now on (and at once); ignored when below 1 ms.
  void SetLease(std::chrono::milliseconds lease);
  // The server acknowledged a heartbeat sent at `sent`: restartable tasks are renewed up to a
  // lease after it (ProcessRuntime::ServerHeard).
  void ServerHeard(std::chrono::steady_clock::time_point sent);

  // Saves running task `task_id`'s container as an image (docs/snapshots.md "Saving a container
  // as an image"): Docker commits it (pausing it meanwhile); into `archive_fd` (an empty file)
  // goes the `docker load` archive of the layers that `base`, the task's image, lacks, with the
  // base's configuration rather than the container's (whose variables hold the task's token)
  // and `created_by` as its last history entry; that image is then loaded here too, and the
  // committed one removed. The id is the image's.
  Result<docker::LoadArchive> SaveImage(const std::string& task_id, const std::string& base,
                                        int archive_fd, const std::string& created_by);
  // Makes image `id` present: nothing when it is; else `base` is made present (pulled when
  // missing: kFailedPrecondition when it cannot be) and the archive SaveImage wrote (`bytes` of
  // `archive_fd`) loaded. kInternal when Docker then still lacks `id`.
  Status LoadImage(const std::string& id, const std::string& base, int archive_fd, int64_t bytes);
  // Whether image `image` (a reference or an id) is here.
  Result<bool> HasImage(const std::string& image) const;

  // The running task's container's address on its network (where its ports are reached):
  // kNotFound for a task not running here, kFailedPrecondition for a container without one
  // (network mode host or none).
  Result<std::string> Address(const std::string& task_id) const;

  const std::string& instance() const { return instance_; }
  // "docker 20.10.24 (API 1.41) at /var/run/docker.sock".
  const std::string& description() const { return description_; }
  // Whether the daemon can give containers NVIDIA GPUs: it lists an "nvidia" runtime (GET /info)
  // or the NVIDIA container toolkit's hook, which makes dockerd register the "nvidia" device
  // driver, is installed.
  bool nvidia() const { return nvidia_; }

 private:
  struct Task;
  DockerRuntime(TaskFiles files, DockerOptions options, std::string instance, int cancel_fd);

  Result<std::unique_ptr<Task>> Create(const LaunchSpec& spec);
  Result<std::string> EnsureImage(const std::string& image);
  Result<nlohmann::json> InspectImage(const std::string& image) const;
  Result<docker::ContainerState> Inspect(const std::string& container) const;
  void PrepareWorkspace(const std::string& task_id, const std::string& image_user) const;
  void Watch(Task* t);
  // Copies the container's output since the last entry into its logs; follows it to the end
  // when `follow`. Ends at the stream's end, on an error or when cancelled.
  Status CopyLogs(Task& t, bool follow);
  void Finish(Task& t, ExitReport report);
  // How the container ended: its state's, unless its supervisor killed it (the lease ran out).
  ExitReport EndOf(const Task& t, const docker::ContainerState& state, bool stop_requested) const;
  // The renewal thread: every quarter lease, and at once after SetLease or ServerHeard, tells
  // each running container's supervisor its lease, starting one where there is none.
  void RenewLoop();
  void RenewLocked(Task& t, int64_t now_mono);
  // Writes tasks/<id>/state.json durably. (Locked: under mu_ once the task is shared.)
  Status WriteStateLocked(Task& t);
  // WriteStateLocked where no caller waits for it: a failure goes to on_warning.
  void SaveStateLocked(Task& t);
  // Removes the container (already gone is no error); errors start with `what`.
  Status DeleteContainer(const std::string& container, const std::string& what) const;
  Result<std::unique_ptr<Task>> LoadTask(const std::string& task_id, const std::string& container);
  bool WaitCancelled(std::chrono::milliseconds d);
  std::string Api(const std::string& path) const;

  const TaskFiles files_;
  const DockerOptions options_;
  const std::string instance_;
  const int cancel_fd_;  // an eventfd, written once by the destructor: every call ends
  UnixHttpClient client_;
  std::string description_;
  bool nvidia_ = false;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::unique_ptr<Task>> tasks_;
  std::set<std::string> launching_;
  std::vector<ExitReport> reports_;
  LeaseFence fence_;
  int64_t next_renewal_mono_ = 0;
  bool shutting_down_ = false;
  std::thread renewer_;  // last: started once the rest is
};

}  // namespace gpupool::agent
