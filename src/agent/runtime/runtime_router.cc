// Implementation of runtime_router.h.
#include "agent/runtime/runtime_router.h"

#include <utility>

namespace gpupool::agent {

void RuntimeRouter::ExitSignal::Notify() {
  {
    std::lock_guard lock(mu);
    ++count;
  }
  cv.notify_all();
  if (on_exit) on_exit();
}

Result<std::unique_ptr<RuntimeRouter>> RuntimeRouter::Open(const std::string& process_root,
                                                           RuntimeOptions process,
                                                           const std::string& docker_root,
                                                           DockerOptions docker) {
  auto signal = std::make_shared<ExitSignal>();
  signal->on_exit = std::move(process.on_exit);
  process.on_exit = [signal] { signal->Notify(); };
  docker.on_exit = [signal] { signal->Notify(); };
  std::unique_ptr<RuntimeRouter> router(new RuntimeRouter(signal));
  auto p = ProcessRuntime::Open(process_root, std::move(process));
  if (!p) return tl::unexpected(p.error());
  router->process_ = std::move(*p);
  auto d = DockerRuntime::Open(docker_root, std::move(docker));
  if (d) {
    router->docker_ = std::move(*d);
  } else {
    router->docker_unavailable_ = d.error().message;
  }
  return router;
}

TaskRuntime& RuntimeRouter::Owner(const std::string& task_id) const {
  std::lock_guard lock(mu_);
  if (docker_ && docker_tasks_.count(task_id)) return *docker_;
  return *process_;
}

Result<RunningTask> RuntimeRouter::Launch(const LaunchSpec& spec) {
  const std::string exists = "task " + spec.task_id + " exists in the ";
  if (spec.image.empty()) {
    {
      std::lock_guard lock(mu_);
      if (docker_tasks_.count(spec.task_id)) {
        return MakeError(ErrorCode::kAlreadyExists, exists + "docker runtime");
      }
    }
    return process_->Launch(spec);
  }
  if (!docker_) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "docker runtime unavailable: " + docker_unavailable_);
  }
  for (const std::string& id : process_->Tasks()) {
    if (id == spec.task_id) return MakeError(ErrorCode::kAlreadyExists, exists + "process runtime");
  }
  auto t = docker_->Launch(spec);
  if (t) {
    std::lock_guard lock(mu_);
    docker_tasks_.insert(spec.task_id);
  }
  return t;
}

Status RuntimeRouter::Stop(const std::string& task_id, std::chrono::milliseconds grace) {
  return Owner(task_id).Stop(task_id, grace);
}

Status RuntimeRouter::Freeze(const std::string& task_id, bool frozen) {
  return Owner(task_id).Freeze(task_id, frozen);
}

Status RuntimeRouter::Signal(const std::string& task_id, pid_t pid, int sig) {
  return Owner(task_id).Signal(task_id, pid, sig);
}

std::vector<ExitReport> RuntimeRouter::ReapAll() {
  std::vector<ExitReport> out = process_->Reap();
  if (docker_) {
    for (ExitReport& r : docker_->Reap()) out.push_back(std::move(r));
  }
  return out;
}

std::vector<ExitReport> RuntimeRouter::Reap(std::chrono::milliseconds wait) {
  uint64_t seen;
  {
    std::lock_guard lock(signal_->mu);
    seen = signal_->count;
  }
  std::vector<ExitReport> out = ReapAll();
  if (!out.empty() || wait.count() <= 0) return out;
  {
    // A report queued after `seen` was read has bumped the count by now or will.
    std::unique_lock lock(signal_->mu);
    signal_->cv.wait_for(lock, wait, [&] { return signal_->count != seen; });
  }
  return ReapAll();
}

Result<AdoptResult> RuntimeRouter::Adopt() {
  auto out = process_->Adopt();
  if (!out) return out;
  if (!docker_) return out;
  auto d = docker_->Adopt();
  if (!d) return MakeError(d.error().code, "docker runtime: " + d.error().message);
  std::lock_guard lock(mu_);
  for (RunningTask& t : d->running) {
    docker_tasks_.insert(t.task_id);
    out->running.push_back(std::move(t));
  }
  for (ExitReport& r : d->ended) {
    docker_tasks_.insert(r.task_id);
    out->ended.push_back(std::move(r));
  }
  return out;
}

Status RuntimeRouter::Remove(const std::string& task_id) {
  Status st = Owner(task_id).Remove(task_id);
  if (st) {
    std::lock_guard lock(mu_);
    docker_tasks_.erase(task_id);
  }
  return st;
}

Result<ExecProcess> RuntimeRouter::Exec(const std::string& task_id, const ExecSpec& spec) {
  return Owner(task_id).Exec(task_id, spec);
}

Result<LogChunk> RuntimeRouter::ReadLog(const std::string& task_id, LogStream stream,
                                        int64_t offset, int64_t max_bytes) const {
  return Owner(task_id).ReadLog(task_id, stream, offset, max_bytes);
}

std::vector<RunningTask> RuntimeRouter::Running() const {
  std::vector<RunningTask> out = process_->Running();
  if (docker_) {
    for (RunningTask& t : docker_->Running()) out.push_back(std::move(t));
  }
  return out;
}

Result<RunningTask> RuntimeRouter::RunningTaskOf(const std::string& task_id) const {
  for (RunningTask& t : Running()) {
    if (t.task_id == task_id) return std::move(t);
  }
  return NotFound("task " + task_id + " does not run on this node");
}

std::vector<std::string> RuntimeRouter::Tasks() const {
  std::vector<std::string> out = process_->Tasks();
  if (docker_) {
    for (std::string& id : docker_->Tasks()) out.push_back(std::move(id));
  }
  return out;
}

std::string RuntimeRouter::TaskDir(const std::string& task_id) const {
  return Owner(task_id).TaskDir(task_id);
}
std::string RuntimeRouter::Workspace(const std::string& task_id) const {
  return Owner(task_id).Workspace(task_id);
}
std::string RuntimeRouter::MetricsPath(const std::string& task_id) const {
  return Owner(task_id).MetricsPath(task_id);
}
std::string RuntimeRouter::LogPath(const std::string& task_id, LogStream stream) const {
  return Owner(task_id).LogPath(task_id, stream);
}

void RuntimeRouter::SetLease(std::chrono::milliseconds lease) {
  process_->SetLease(lease);
  if (docker_) docker_->SetLease(lease);
}

std::chrono::milliseconds RuntimeRouter::lease() const { return process_->lease(); }

void RuntimeRouter::ServerHeard(std::chrono::steady_clock::time_point sent) {
  process_->ServerHeard(sent);
  if (docker_) docker_->ServerHeard(sent);
}

}  // namespace gpupool::agent
