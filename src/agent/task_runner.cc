// Implementation of task_runner.h: the runner's thread works through what the control loop
// asked of it, in order, each step retried with the backoff while the server cannot be reached.
#include "agent/task_runner.h"

#include <chrono>
#include <utility>

#include "agent/runtime/linux_proc.h"
#include "core/records.h"

namespace gpupool::agent {

proto::TaskReport RunningReport(int64_t started_ms, int64_t bound_ms) {
  proto::TaskReport r;
  r.state = "running";
  r.time_ms = started_ms;
  r.bound_ms = bound_ms;
  return r;
}

proto::TaskReport FailedReport(int exit_code, std::string reason, int64_t now_ms,
                               int64_t bound_ms) {
  proto::TaskReport r;
  r.state = "failed";
  r.exit_code = exit_code;
  r.reason = std::move(reason);
  r.time_ms = now_ms;
  r.bound_ms = bound_ms;
  return r;
}

const char* RunnerPhaseName(RunnerPhase phase) {
  switch (phase) {
    case RunnerPhase::kIdle:
      return "idle";
    case RunnerPhase::kFetchingInputs:
      return "fetching inputs";
    case RunnerPhase::kLaunching:
      return "launching";
    case RunnerPhase::kRunning:
      return "running";
    case RunnerPhase::kSavingOutputs:
      return "saving outputs";
    case RunnerPhase::kReporting:
      return "reporting";
    case RunnerPhase::kDone:
      return "done";
  }
  return "?";
}

// What the runner's thread and its owner share. The thread keeps it (and the steps) alive, so
// a released runner's thread may finish a step on its own.
struct TaskRunner::Core {
  std::string id;
  int64_t bound_ms = 0;
  std::shared_ptr<TaskSteps> steps;
  std::function<void()> on_event;
  Backoff backoff;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool cancelled = false;
  bool finished = false;  // the thread is past its last step
  RunnerPhase phase = RunnerPhase::kIdle;
  std::deque<Work> work;
  int pending_reports = 0;  // queued or being sent
  std::vector<RunnerEvent> events;
  // Snapshots: the last capture's (or restore's) files and saved image, and the periodic schedule.
  CaptureState capture;
  int64_t periodic_ms = 0;
  SnapshotJob periodic_job;
  std::chrono::steady_clock::time_point next_periodic{};
  bool rescheduled = false;  // SetPeriodic changed the schedule: the thread's wait starts anew

  bool Cancelled() const {
    std::lock_guard lock(mu);
    return cancelled;
  }
  // Waits `d` or until cancelled; true when cancelled.
  bool WaitOrCancel(std::chrono::milliseconds d) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, d, [&] { return cancelled; });
  }
  void SetPhase(RunnerPhase p) {
    std::lock_guard lock(mu);
    phase = p;
  }
  void Emit(RunnerEvent::Kind kind, RunningTask running = {}, std::string message = "",
            SnapshotTrigger trigger = SnapshotTrigger::kManual) {
    {
      std::lock_guard lock(mu);
      events.push_back({kind, std::move(running), std::move(message), trigger});
    }
    on_event();
  }
  void Log(const std::string& line) { steps->Log(line); }
  TaskSteps::Cancelled CancelledFn() {
    return [this] { return Cancelled(); };
  }

  // Sends `report` until the server answers it; false when cancelled first. A refusal is the
  // answer too: 409 (the server moved the task on) and 404 (it is gone) are expected for a task
  // the server dropped; any other refusal is logged.
  bool Deliver(const proto::TaskReport& report) {
    ProblemLog problems([this](const std::string& line) { Log(line); });
    while (true) {
      const Status st = steps->Report(id, report);
      if (st || !RetryLater(st.error())) {
        if (!st && st.error().code != ErrorCode::kFailedPrecondition &&
            st.error().code != ErrorCode::kNotFound) {
          Log("report " + id + " " + report.state + " refused: " + Refusal(st.error()));
        }
        problems.Recover("reports of " + id + " reach the server again");
        backoff.Reset();
        std::lock_guard lock(mu);
        --pending_reports;
        return true;
      }
      problems.Fail(
          std::string(ErrorCodeName(st.error().code)),
          "reporting " + id + " " + report.state + " failed (retrying): " + st.error().message);
      if (WaitOrCancel(backoff.Next())) return false;
    }
  }

  // Calls `step` until it succeeds or fails for a reason other than kUnavailable (the server
  // cannot be reached, or the step was cancelled); nullopt when cancelled first.
  template <typename T>
  std::optional<Result<T>> Retrying(const std::string& what,
                                    const std::function<Result<T>()>& step) {
    ProblemLog problems([this](const std::string& line) { Log(line); });
    while (true) {
      Result<T> r = step();
      if (Cancelled()) return std::nullopt;
      if (r || r.error().code != ErrorCode::kUnavailable) {
        backoff.Reset();
        return r;
      }
      problems.Fail("unavailable", what + " (retrying): " + r.error().message);
      if (WaitOrCancel(backoff.Next())) return std::nullopt;
    }
  }

  // The failed launch: its event, then its report. Ends the runner.
  void FailLaunch(const std::string& message, int exit_code) {
    Log("cannot launch " + id + ": " + message + " → failed");
    SetPhase(RunnerPhase::kReporting);
    {
      std::lock_guard lock(mu);
      ++pending_reports;
    }
    Emit(RunnerEvent::Kind::kLaunchFailed, {}, message);
    Deliver(FailedReport(exit_code, message, WallMs(), bound_ms));
  }

  // Fetch (inputs, a snapshot or both, the datasets), launch, report running; true when the
  // runner has nothing more to do.
  bool LaunchStep(LaunchSpec spec, std::optional<RestoreJob> restore,
                  const std::vector<DatasetMount>& datasets) {
    SetPhase(RunnerPhase::kFetchingInputs);
    std::string staged;
    if (!restore || restore->with_inputs) {
      auto inputs = Retrying<FetchedInputs>("cannot fetch the input files of " + id,
                                            [&] { return steps->FetchInputs(id, CancelledFn()); });
      if (!inputs) return true;
      if (!*inputs) {
        FailLaunch(inputs->error().message, kLaunchFailedCode);
        return true;
      }
      if ((*inputs)->files > 0) {
        Log(id + ": fetched " + std::to_string((*inputs)->files) + " input file(s), " +
            std::to_string((*inputs)->bytes) + " bytes");
      }
      staged = (*inputs)->dir;
    }
    if (restore) {
      const auto started = std::chrono::steady_clock::now();
      auto restored = Retrying<FetchedInputs>(
          "cannot restore " + id + " from snapshot " + restore->snapshot.id,
          [&] { return steps->Restore(id, restore->snapshot, staged, capture, CancelledFn()); });
      if (!restored) return true;
      if (!*restored) {
        FailLaunch("cannot restore its workspace from snapshot " + restore->snapshot.id + ": " +
                       restored->error().message,
                   kLaunchFailedCode);
        return true;
      }
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - started)
                          .count();
      Log(id + ": workspace restored from snapshot " + restore->snapshot.id + ": " +
          std::to_string((*restored)->files) + " file(s), " + std::to_string((*restored)->bytes) +
          " bytes in " + std::to_string(ms) + " ms");
      staged = (*restored)->dir;
    }
    spec.workspace_from = staged;
    for (const DatasetMount& m : datasets) {
      const std::string label = "dataset " + m.name + "@" + std::to_string(m.version);
      auto dir = Retrying<std::string>("cannot mount " + label + " into " + id,
                                       [&] { return steps->MountDataset(id, m, CancelledFn()); });
      if (!dir) return true;
      if (!*dir) {
        FailLaunch("cannot mount " + label + ": " + dir->error().message, kLaunchFailedCode);
        return true;
      }
      spec.volumes.push_back({**dir, m.path, /*read_only=*/true});
    }
    if (Cancelled()) return true;
    SetPhase(RunnerPhase::kLaunching);
    auto rt = steps->Launch(spec);
    if (!rt) {
      if (rt.error().code == ErrorCode::kAlreadyExists) {
        // The runtime has a record we do not: it is taken over rather than started twice.
        Log(id + ": " + rt.error().message + "; adopting");
        Emit(RunnerEvent::Kind::kAlreadyExists);
        return true;
      }
      FailLaunch(rt.error().message,
                 rt.error().code == ErrorCode::kNotFound ? kNotFoundCode : kLaunchFailedCode);
      return true;
    }
    {
      std::lock_guard lock(mu);
      phase = RunnerPhase::kRunning;
      ++pending_reports;
    }
    Emit(RunnerEvent::Kind::kLaunched, *rt);
    Deliver(RunningReport(rt->started_ms, bound_ms));
    return false;
  }

  // A snapshot, retried while the server cannot be reached (until `deadline` for one before a
  // stop); a failure of one the server asked for is told to it.
  void SnapshotStep(const SnapshotJob& job) {
    const bool last = IsLastSnapshotTrigger(job.trigger);
    const auto deadline =
        std::chrono::steady_clock::now() +
        std::chrono::milliseconds((job.checkpoint_timeout_ms > 0 ? job.checkpoint_timeout_ms
                                                                 : kDefaultCheckpointTimeoutMs) +
                                  60'000);
    ProblemLog problems([this](const std::string& line) { Log(line); });
    std::string message;
    while (true) {
      Result<proto::Snapshot> r = steps->Snapshot(id, job, capture, CancelledFn());
      if (r) {
        message = "snapshot " + r->id + " of " + id + " (" + r->trigger + ", " + r->consistency +
                  "-consistent): " + std::to_string(r->files) + " file(s), " +
                  std::to_string(r->bytes) + " bytes, " + std::to_string(r->new_bytes) +
                  " new, frozen " + std::to_string(r->frozen_ms) + " ms, " +
                  std::to_string(r->duration_ms) + " ms in all";
        backoff.Reset();
        break;
      }
      const bool retry = r.error().code == ErrorCode::kUnavailable && !Cancelled() &&
                         (!last || std::chrono::steady_clock::now() < deadline);
      if (!retry) {
        message = "no snapshot of " + id + ": " + r.error().message;
        if (job.trigger != SnapshotTrigger::kPeriodic && !Cancelled()) {
          (void)steps->FailSnapshot(id, job, r.error().message);
        }
        break;
      }
      problems.Fail("unavailable", "snapshot of " + id + " (retrying): " + r.error().message);
      if (WaitOrCancel(backoff.Next())) return;
    }
    Log(message);
    {
      std::lock_guard lock(mu);
      if (periodic_ms > 0) {
        next_periodic = std::chrono::steady_clock::now() + std::chrono::milliseconds(periodic_ms);
      }
    }
    Emit(RunnerEvent::Kind::kSnapshotted, {}, message, job.trigger);
  }

  // Outputs first: once the server hears of the end, they must be there to download.
  void EndStep(std::optional<proto::TaskReport> report, const std::string& workspace) {
    SetPhase(RunnerPhase::kSavingOutputs);
    if (!workspace.empty()) {
      auto saved = Retrying<SavedOutputs>("saving the outputs of " + id + " failed", [&] {
        return steps->SaveOutputs(id, workspace, CancelledFn());
      });
      if (!saved) return;
      Log(id + " outputs: " +
          (*saved ? DescribeOutputs(**saved) : "not saved: " + saved->error().message));
      if (*saved && report) report->reason += OutputsNote(**saved);
    }
    SetPhase(RunnerPhase::kReporting);
    if (report) Deliver(*report);
  }
};

TaskRunner::TaskRunner(std::string task_id, int64_t bound_ms, std::shared_ptr<TaskSteps> steps,
                       std::function<void()> on_event, Backoff backoff)
    : task_id_(std::move(task_id)), bound_ms_(bound_ms), core_(std::make_shared<Core>()) {
  core_->id = task_id_;
  core_->bound_ms = bound_ms;
  core_->steps = std::move(steps);
  core_->on_event = std::move(on_event);
  core_->backoff = backoff;
  thread_ = std::thread(&TaskRunner::Run, core_);
}

TaskRunner::~TaskRunner() {
  Cancel();
  if (thread_.joinable()) thread_.join();
}

void TaskRunner::Run(std::shared_ptr<Core> c) {
  while (true) {
    Work w;
    {
      std::unique_lock lock(c->mu);
      // A periodic snapshot is due while the task runs and nothing else is asked.
      auto due = [&] {
        return c->periodic_ms > 0 && c->phase == RunnerPhase::kRunning &&
               std::chrono::steady_clock::now() >= c->next_periodic;
      };
      auto ready = [&] { return c->cancelled || !c->work.empty() || due() || c->rescheduled; };
      if (c->periodic_ms > 0 && c->phase == RunnerPhase::kRunning) {
        c->cv.wait_until(lock, c->next_periodic, ready);
      } else {
        c->cv.wait(lock, ready);
      }
      if (c->cancelled) break;
      c->rescheduled = false;
      if (!c->work.empty()) {
        w = std::move(c->work.front());
        c->work.pop_front();
      } else if (due()) {
        w.kind = Work::Kind::kSnapshot;
        w.snapshot = c->periodic_job;
        w.snapshot.trigger = SnapshotTrigger::kPeriodic;
        w.snapshot.request = 0;
      } else {
        continue;  // the periodic schedule changed: wait for its next time
      }
    }
    bool last = false;
    switch (w.kind) {
      case Work::Kind::kLaunch:
        last = c->LaunchStep(std::move(w.spec), std::move(w.restore), w.datasets);
        break;
      case Work::Kind::kSnapshot:
        c->SnapshotStep(w.snapshot);
        break;
      case Work::Kind::kReport:
        c->Deliver(*w.report);
        break;
      case Work::Kind::kEnd:
        c->EndStep(std::move(w.report), w.workspace);
        last = true;
        break;
    }
    if (last) break;
  }
  c->SetPhase(RunnerPhase::kDone);
  c->Emit(RunnerEvent::Kind::kDone);
  {
    std::lock_guard lock(c->mu);
    c->finished = true;
  }
  c->cv.notify_all();
}

void TaskRunner::Launch(LaunchSpec spec, std::optional<RestoreJob> restore,
                        std::vector<DatasetMount> datasets) {
  {
    std::lock_guard lock(core_->mu);
    Work w{Work::Kind::kLaunch, std::move(spec), std::nullopt, "", std::move(restore), {},
           std::move(datasets)};
    core_->work.push_back(std::move(w));
  }
  core_->cv.notify_all();
}

void TaskRunner::Snapshot(SnapshotJob job) {
  {
    std::lock_guard lock(core_->mu);
    core_->work.push_back({Work::Kind::kSnapshot, {}, std::nullopt, "", std::nullopt, job});
  }
  core_->cv.notify_all();
}

void TaskRunner::SetPeriodic(int64_t every_ms, SnapshotJob job) {
  {
    std::lock_guard lock(core_->mu);
    const SnapshotJob& had = core_->periodic_job;
    if (every_ms == core_->periodic_ms && job.run == had.run &&
        job.checkpoint_signal == had.checkpoint_signal &&
        job.checkpoint_timeout_ms == had.checkpoint_timeout_ms) {
      return;
    }
    core_->periodic_ms = every_ms;
    core_->periodic_job = std::move(job);
    core_->next_periodic = std::chrono::steady_clock::now() +
                           std::chrono::milliseconds(std::max<int64_t>(every_ms, 0));
    core_->rescheduled = true;
  }
  core_->cv.notify_all();
}

void TaskRunner::Adopt() { core_->SetPhase(RunnerPhase::kRunning); }

void TaskRunner::Report(proto::TaskReport report) {
  {
    std::lock_guard lock(core_->mu);
    core_->work.push_back({Work::Kind::kReport, {}, std::move(report), "", std::nullopt, {}});
    ++core_->pending_reports;
  }
  core_->cv.notify_all();
}

void TaskRunner::End(std::optional<proto::TaskReport> report, std::string workspace) {
  {
    std::lock_guard lock(core_->mu);
    if (report) ++core_->pending_reports;
    core_->work.push_back(
        {Work::Kind::kEnd, {}, std::move(report), std::move(workspace), std::nullopt, {}});
  }
  core_->cv.notify_all();
}

void TaskRunner::Cancel() {
  {
    std::lock_guard lock(core_->mu);
    core_->cancelled = true;
  }
  core_->cv.notify_all();
}

void TaskRunner::Release(std::chrono::milliseconds grace) {
  Cancel();
  if (!thread_.joinable()) return;
  bool finished;
  {
    std::unique_lock lock(core_->mu);
    finished = core_->cv.wait_for(lock, grace, [&] { return core_->finished; });
  }
  if (finished) {
    thread_.join();
  } else {
    thread_.detach();  // inside a step; it ends on its own, holding only core_ and the steps
  }
}

RunnerPhase TaskRunner::phase() const {
  std::lock_guard lock(core_->mu);
  return core_->phase;
}

bool TaskRunner::reports_pending() const {
  std::lock_guard lock(core_->mu);
  return core_->pending_reports > 0;
}

std::vector<RunnerEvent> TaskRunner::TakeEvents() {
  std::lock_guard lock(core_->mu);
  return std::exchange(core_->events, {});
}

}  // namespace gpupool::agent
