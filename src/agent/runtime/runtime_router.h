// The agent's one TaskRuntime over its two: a task with an image runs in the docker runtime, one
// without in the process runtime, and every later call about a task goes to the runtime that
// owns it. The docker runtime is optional: without it (no daemon, or none reachable) an image
// task is refused with the reason, and everything else works.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "agent/runtime/docker_runtime.h"
#include "agent/runtime/process_runtime.h"
#include "agent/runtime/task_runtime.h"

namespace gpupool::agent {

class RuntimeRouter : public TaskRuntime {
 public:
  // Opens the process runtime in `process_root` (its failure is the router's) and the docker
  // runtime in `docker_root` (its failure only leaves docker out: docker_unavailable() says
  // why). Both runtimes' on_exit are replaced by the router's, which calls process.on_exit.
  static Result<std::unique_ptr<RuntimeRouter>> Open(const std::string& process_root,
                                                     RuntimeOptions process,
                                                     const std::string& docker_root,
                                                     DockerOptions docker);

  // TaskRuntime. Launch picks the runtime by spec.image: without docker an image is refused
  // with kFailedPrecondition "docker runtime unavailable: <why>". A task the router does not
  // know (never launched, not adopted, or removed) is the process runtime's to answer for.
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

  // The task `task_id` among Running(): kNotFound "task … does not run on this node" when it
  // is not.
  Result<RunningTask> RunningTaskOf(const std::string& task_id) const;

  // The supervisors' lease and its fence (ProcessRuntime::SetLease, ServerHeard), for both
  // runtimes' tasks.
  void SetLease(std::chrono::milliseconds lease);
  std::chrono::milliseconds lease() const;
  void ServerHeard(std::chrono::steady_clock::time_point sent);

  ProcessRuntime& process() const { return *process_; }
  DockerRuntime* docker() const { return docker_.get(); }  // nullptr when unavailable
  const std::string& docker_unavailable() const { return docker_unavailable_; }

 private:
  // Wakes Reap(wait) when either runtime queued a report.
  struct ExitSignal {
    std::mutex mu;
    std::condition_variable cv;
    uint64_t count = 0;
    std::function<void()> on_exit;
    void Notify();
  };

  explicit RuntimeRouter(std::shared_ptr<ExitSignal> signal) : signal_(std::move(signal)) {}
  TaskRuntime& Owner(const std::string& task_id) const;
  std::vector<ExitReport> ReapAll();

  const std::shared_ptr<ExitSignal> signal_;
  std::unique_ptr<ProcessRuntime> process_;
  std::unique_ptr<DockerRuntime> docker_;
  std::string docker_unavailable_;

  mutable std::mutex mu_;
  std::set<std::string> docker_tasks_;  // the docker runtime's; every other id is the process's
};

}  // namespace gpupool::agent
