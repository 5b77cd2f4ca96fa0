// Unit tests of the task runner's state machine against scripted steps: each step's success and
// failure (fetch, launch, save, report), retries while the server cannot be reached, the order of
// outputs and reports, cancellation, and that one task's slow input fetch does not hold up another
// task's launch or reports. Every wait is on the runners' events, with a generous deadline.
#include "agent/task_runner.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>

namespace gpupool::agent {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kDeadline{10'000};  // an event that has not come by then never will

// Steps whose results the test scripts (default: success) and which record every call.
class FakeSteps : public TaskSteps {
 public:
  struct Reported {
    std::string task_id;
    proto::TaskReport report;
  };

  Result<FetchedInputs> FetchInputs(const std::string& task_id,
                                    const Cancelled& cancelled) override {
    std::unique_lock lock(mu_);
    calls_.push_back("fetch " + task_id);
    cv_.notify_all();
    // A held fetch asks `cancelled` as the real one does between chunks.
    while (held_.count(task_id) && !cancelled()) cv_.wait_for(lock, milliseconds(5));
    if (cancelled()) return MakeError(ErrorCode::kUnavailable, "cancelled");
    FetchedInputs f;
    f.dir = "/staging/" + task_id;
    f.files = 1;
    return Next(fetch_, task_id, f);
  }
  Result<FetchedInputs> Restore(const std::string& task_id, const proto::SnapshotRef& ref,
                                const std::string& into, CaptureState& state,
                                const Cancelled&) override {
    std::lock_guard lock(mu_);
    calls_.push_back("restore " + task_id + " " + ref.id + " into '" + into + "'");
    cv_.notify_all();
    state.index["restored.bin"] = ScannedFile{.size = 1};
    FetchedInputs f;
    f.dir = into.empty() ? "/restored/" + task_id : into;
    f.files = 1;
    return Next(restore_, task_id, f);
  }
  Result<proto::Snapshot> Snapshot(const std::string& task_id, const SnapshotJob& job,
                                   CaptureState& state, const Cancelled&) override {
    std::lock_guard lock(mu_);
    calls_.push_back("snapshot " + task_id + " " + std::string(SnapshotTriggerName(job.trigger)) +
                     " run " + std::to_string(job.run) + " knowing " +
                     std::to_string(state.index.size()) + " file(s)");
    cv_.notify_all();
    proto::Snapshot snap;
    snap.id = "s-1";
    snap.trigger = SnapshotTriggerName(job.trigger);
    return Next(snapshot_, task_id, snap);
  }
  Status FailSnapshot(const std::string& task_id, const SnapshotJob& job,
                      const std::string& error) override {
    std::lock_guard lock(mu_);
    calls_.push_back("fail-snapshot " + task_id + " " +
                     std::string(SnapshotTriggerName(job.trigger)) + ": " + error);
    cv_.notify_all();
    return {};
  }
  Result<std::string> MountDataset(const std::string& task_id, const DatasetMount& mount,
                                   const Cancelled&) override {
    std::lock_guard lock(mu_);
    calls_.push_back("mount " + task_id + " " + mount.name + "@" + std::to_string(mount.version));
    cv_.notify_all();
    return Next(mount_, task_id, "/datasets/" + mount.manifest + "/files");
  }
  Result<RunningTask> Launch(const LaunchSpec& spec) override {
    std::lock_guard lock(mu_);
    calls_.push_back("launch " + spec.task_id + " from " + spec.workspace_from);
    volumes_[spec.task_id] = spec.volumes;
    cv_.notify_all();
    RunningTask rt;
    rt.task_id = spec.task_id;
    rt.pid = 4242;
    rt.started_ms = 1'700'000'000'000;
    return Next(launch_, spec.task_id, rt);
  }
  Result<SavedOutputs> SaveOutputs(const std::string& task_id, const std::string& workspace,
                                   const Cancelled&) override {
    std::lock_guard lock(mu_);
    calls_.push_back("save " + task_id + " " + workspace);
    cv_.notify_all();
    return Next(save_, task_id, saved_);
  }
  Status Report(const std::string& task_id, const proto::TaskReport& report) override {
    std::lock_guard lock(mu_);
    calls_.push_back("report " + task_id + " " + report.state);
    cv_.notify_all();
    auto r = Next<bool>(report_, task_id, true);
    if (!r) return tl::unexpected(r.error());
    reported_.push_back({task_id, report});
    return {};
  }
  void Log(const std::string& line) override {
    std::lock_guard lock(mu_);
    log_.push_back(line);
  }

  // The next calls of a step for `task_id` fail with these errors, in turn.
  void FailFetch(const std::string& id, std::vector<Error> e) { Script(fetch_, id, e); }
  void FailLaunch(const std::string& id, std::vector<Error> e) { Script(launch_, id, e); }
  void FailSave(const std::string& id, std::vector<Error> e) { Script(save_, id, e); }
  void FailReport(const std::string& id, std::vector<Error> e) { Script(report_, id, e); }
  void FailRestore(const std::string& id, std::vector<Error> e) { Script(restore_, id, e); }
  void FailSnapshots(const std::string& id, std::vector<Error> e) { Script(snapshot_, id, e); }
  void FailMount(const std::string& id, std::vector<Error> e) { Script(mount_, id, e); }
  // The volumes the task's launch bound (host:target:ro|rw).
  std::vector<std::string> Volumes(const std::string& id) const {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    if (auto it = volumes_.find(id); it != volumes_.end()) {
      for (const LaunchSpec::VolumeBind& v : it->second) {
        out.push_back(v.host + ":" + v.target + (v.read_only ? ":ro" : ":rw"));
      }
    }
    return out;
  }
  void SetSaved(SavedOutputs s) {
    std::lock_guard lock(mu_);
    saved_ = std::move(s);
  }
  void Hold(const std::string& id) {
    std::lock_guard lock(mu_);
    held_.insert(id);
  }
  void Release(const std::string& id) {
    std::lock_guard lock(mu_);
    held_.erase(id);
    cv_.notify_all();
  }
  // Waits until `call` was made (it is the start of a recorded call).
  bool AwaitCall(const std::string& call) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kDeadline, [&] {
      for (const std::string& c : calls_) {
        if (c.rfind(call, 0) == 0) return true;
      }
      return false;
    });
  }
  std::vector<std::string> Calls(const std::string& task_id) const {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const std::string& c : calls_) {
      if (c.find(" " + task_id) != std::string::npos) out.push_back(c);
    }
    return out;
  }
  std::vector<Reported> Reports() const {
    std::lock_guard lock(mu_);
    return reported_;
  }

 private:
  void Script(std::map<std::string, std::deque<Error>>& m, const std::string& id,
              const std::vector<Error>& e) {
    std::lock_guard lock(mu_);
    m[id].insert(m[id].end(), e.begin(), e.end());
  }
  template <typename T>
  Result<T> Next(std::map<std::string, std::deque<Error>>& m, const std::string& id, T ok) {
    auto it = m.find(id);
    if (it == m.end() || it->second.empty()) return ok;
    Error e = it->second.front();
    it->second.pop_front();
    return tl::unexpected(e);
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> calls_;
  std::vector<Reported> reported_;
  std::vector<std::string> log_;
  std::set<std::string> held_;
  std::map<std::string, std::deque<Error>> fetch_, launch_, save_, report_, restore_, snapshot_,
      mount_;
  std::map<std::string, std::vector<LaunchSpec::VolumeBind>> volumes_;
  SavedOutputs saved_;
};

// The runners' events as the control loop would hear of them.
class Events {
 public:
  std::function<void()> Notifier() {
    return [this] {
      std::lock_guard lock(mu_);
      ++count_;
      cv_.notify_all();
    };
  }
  // Collects `runner`'s events until one of `kind` came; false at the deadline.
  bool Await(TaskRunner& runner, RunnerEvent::Kind kind) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    std::unique_lock lock(mu_);
    while (true) {
      // Counted before the look: an event queued during it is waited for no longer.
      const uint64_t before = count_;
      lock.unlock();
      std::vector<RunnerEvent> events = runner.TakeEvents();
      lock.lock();
      bool found = false;
      for (RunnerEvent& e : events) {
        found = found || e.kind == kind;
        seen_[runner.task_id()].push_back(std::move(e));
      }
      if (found) return true;
      if (!cv_.wait_until(lock, deadline, [&] { return count_ != before; })) return false;
    }
  }
  std::vector<RunnerEvent::Kind> Kinds(const std::string& task_id) {
    std::lock_guard lock(mu_);
    std::vector<RunnerEvent::Kind> out;
    for (const RunnerEvent& e : seen_[task_id]) out.push_back(e.kind);
    return out;
  }
  std::vector<RunnerEvent> Seen(const std::string& task_id) {
    std::lock_guard lock(mu_);
    return seen_[task_id];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t count_ = 0;
  std::map<std::string, std::vector<RunnerEvent>> seen_;
};

using Kind = RunnerEvent::Kind;

LaunchSpec Spec(const std::string& id) {
  LaunchSpec s;
  s.task_id = id;
  s.command = {"true"};
  return s;
}

proto::TaskReport Succeeded(int64_t bound_ms) {
  proto::TaskReport r;
  r.state = "succeeded";
  r.reason = "exited with code 0";
  r.time_ms = 1'700'000'000'900;
  r.bound_ms = bound_ms;
  return r;
}

Error Unavailable() { return Error{ErrorCode::kUnavailable, "connection refused"}; }

class TaskRunnerTest : public ::testing::Test {
 protected:
  std::unique_ptr<TaskRunner> Runner(const std::string& id, int64_t bound_ms = 77) {
    return std::make_unique<TaskRunner>(id, bound_ms, steps_, events_.Notifier(),
                                        Backoff(milliseconds(1), milliseconds(2)));
  }
  std::shared_ptr<FakeSteps> steps_ = std::make_shared<FakeSteps>();
  Events events_;
};

TEST_F(TaskRunnerTest, LaunchesReportsRunningThenSavesOutputsBeforeTheEndReport) {
  SavedOutputs saved;
  saved.uploaded = 2;
  saved.skipped = {"'link': a symbolic link (not followed)"};
  steps_->SetSaved(saved);
  auto r = Runner("t-1");
  EXPECT_EQ(r->phase(), RunnerPhase::kIdle);
  r->Launch(Spec("t-1"));
  ASSERT_TRUE(events_.Await(*r, Kind::kLaunched));
  EXPECT_EQ(events_.Seen("t-1").back().running.pid, 4242);
  ASSERT_TRUE(steps_->AwaitCall("report t-1 running"));
  r->End(Succeeded(77), "/ws/t-1");
  ASSERT_TRUE(events_.Await(*r, Kind::kDone));
  EXPECT_EQ(r->phase(), RunnerPhase::kDone);
  EXPECT_FALSE(r->reports_pending());
  EXPECT_EQ(
      steps_->Calls("t-1"),
      (std::vector<std::string>{"fetch t-1", "launch t-1 from /staging/t-1", "report t-1 running",
                                "save t-1 /ws/t-1", "report t-1 succeeded"}));
  const auto reports = steps_->Reports();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].report.bound_ms, 77);
  EXPECT_EQ(reports[0].report.time_ms, 1'700'000'000'000);  // the true start
  EXPECT_EQ(reports[1].report.reason,
            "exited with code 0; outputs not saved: 'link': a symbolic link (not followed)");
  EXPECT_EQ(events_.Kinds("t-1"), (std::vector<Kind>{Kind::kLaunched, Kind::kDone}));
}

TEST_F(TaskRunnerTest, AResumedTaskStartsFromItsSnapshotAloneANewOneAfterItsInputs) {
  auto resumed = Runner("t-1");
  resumed->Launch(Spec("t-1"), RestoreJob{.snapshot = {"s-3", std::string(64, 'a'), 1}});
  ASSERT_TRUE(events_.Await(*resumed, Kind::kLaunched));
  auto fresh = Runner("t-2");
  fresh->Launch(Spec("t-2"),
                RestoreJob{.snapshot = {"s-3", std::string(64, 'a'), 1}, .with_inputs = true});
  ASSERT_TRUE(events_.Await(*fresh, Kind::kLaunched));
  ASSERT_TRUE(steps_->AwaitCall("report t-2 running"));
  ASSERT_TRUE(steps_->AwaitCall("report t-1 running"));
  EXPECT_EQ(steps_->Calls("t-1"),
            (std::vector<std::string>{"restore t-1 s-3 into ''", "launch t-1 from /restored/t-1",
                                      "report t-1 running"}));
  EXPECT_EQ(steps_->Calls("t-2"),
            (std::vector<std::string>{"fetch t-2", "restore t-2 s-3 into '/staging/t-2'",
                                      "launch t-2 from /staging/t-2", "report t-2 running"}));
  // The next snapshot knows the restored files (it reads only what changed since).
  resumed->Snapshot(SnapshotJob{.run = 2, .trigger = SnapshotTrigger::kManual, .request = 5});
  ASSERT_TRUE(events_.Await(*resumed, Kind::kSnapshotted));
  EXPECT_TRUE(steps_->AwaitCall("snapshot t-1 manual run 2 knowing 1 file(s)"));
}

TEST_F(TaskRunnerTest, ACorruptSnapshotFailsTheLaunchWithWhy) {
  steps_->FailRestore(
      "t-1", {Unavailable(), Error{ErrorCode::kInternal, "chunk 1a2b of 'model.pt' is corrupt"}});
  auto r = Runner("t-1", 99);
  r->Launch(Spec("t-1"), RestoreJob{.snapshot = {"s-3", std::string(64, 'a'), 1}});
  ASSERT_TRUE(events_.Await(*r, Kind::kDone));
  const auto reports = steps_->Reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].report.state, "failed");
  EXPECT_EQ(reports[0].report.reason,
            "cannot restore its workspace from snapshot s-3: chunk 1a2b of 'model.pt' is corrupt");
  for (const std::string& call : steps_->Calls("t-1"))
    EXPECT_EQ(call.rfind("launch", 0), std::string::npos);
}

DatasetMount Dataset(const std::string& name, int32_t version, const std::string& path) {
  return DatasetMount{.dataset_id = "d-1",
                      .name = name,
                      .version = version,
                      .path = path,
                      .project_id = "p-1",
                      .manifest = std::string(64, name[0])};
}

TEST_F(TaskRunnerTest, EachDatasetIsMadePresentThenBoundReadOnlyAtItsPath) {
  steps_->FailMount("t-1", {Unavailable()});  // the server is down a moment: retried
  auto r = Runner("t-1");
  r->Launch(Spec("t-1"), std::nullopt,
            {Dataset("imagenet", 2, "/root/data"), Dataset("coco", 1, "/root/coco")});
  ASSERT_TRUE(events_.Await(*r, Kind::kLaunched));
  ASSERT_TRUE(steps_->AwaitCall("report t-1 running"));
  EXPECT_EQ(steps_->Calls("t-1"),
            (std::vector<std::string>{"fetch t-1", "mount t-1 imagenet@2", "mount t-1 imagenet@2",
                                      "mount t-1 coco@1", "launch t-1 from /staging/t-1",
                                      "report t-1 running"}));
  EXPECT_EQ(
      steps_->Volumes("t-1"),
      (std::vector<std::string>{"/datasets/" + std::string(64, 'i') + "/files:/root/data:ro",
                                "/datasets/" + std::string(64, 'c') + "/files:/root/coco:ro"}));
}

TEST_F(TaskRunnerTest, ADatasetThatCannotBeMountedFailsTheLaunchNamingIt) {
  steps_->FailMount("t-1", {Error{ErrorCode::kInternal, "chunk 1a2b from the server is corrupt"}});
  auto r = Runner("t-1", 99);
  r->Launch(Spec("t-1"), std::nullopt, {Dataset("imagenet", 2, "/root/data")});
  ASSERT_TRUE(events_.Await(*r, Kind::kDone));
  const auto reports = steps_->Reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].report.state, "failed");
  EXPECT_EQ(reports[0].report.exit_code, kLaunchFailedCode);
  EXPECT_EQ(reports[0].report.reason,
            "cannot mount dataset imagenet@2: chunk 1a2b from the server is corrupt");
  for (const std::string& call : steps_->Calls("t-1"))
    EXPECT_EQ(call.rfind("launch", 0), std::string::npos);
}

TEST_F(TaskRunnerTest, AFailedSnapshotTheServerAskedForIsToldAndAPeriodicOneRuns) {
  auto r = Runner("t-1");
  r->Launch(Spec("t-1"));
  ASSERT_TRUE(events_.Await(*r, Kind::kLaunched));
  steps_->FailSnapshots("t-1", {Error{ErrorCode::kFailedPrecondition, "cannot freeze"}});
  r->Snapshot(SnapshotJob{.run = 1, .trigger = SnapshotTrigger::kStop});
  ASSERT_TRUE(events_.Await(*r, Kind::kSnapshotted));
  EXPECT_EQ(events_.Seen("t-1").back().trigger, SnapshotTrigger::kStop);
  EXPECT_TRUE(steps_->AwaitCall("fail-snapshot t-1 stop: cannot freeze"));
  EXPECT_NE(events_.Seen("t-1").back().message.find("cannot freeze"), std::string::npos);
  r->SetPeriodic(1, SnapshotJob{.run = 1});
  EXPECT_TRUE(steps_->AwaitCall("snapshot t-1 periodic run 1"));
}

TEST_F(TaskRunnerTest, AFetchTheServerCannotAnswerIsRetriedThenLaunches) {
  steps_->FailFetch("t-1", {Unavailable(), Unavailable()});
  auto r = Runner("t-1");
  r->Launch(Spec("t-1"));
  ASSERT_TRUE(events_.Await(*r, Kind::kLaunched));
  const auto calls = steps_->Calls("t-1");
  ASSERT_GE(calls.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(calls.begin(), calls.begin() + 4),
            (std::vector<std::string>{"fetch t-1", "fetch t-1", "fetch t-1",
                                      "launch t-1 from /staging/t-1"}));
}

TEST_F(TaskRunnerTest, AFetchThatFailsFailsTheLaunchForItsBinding) {
  steps_->FailFetch("t-1", {Error{ErrorCode::kInternal, "'a.bin' does not match its SHA-256"}});
  auto r = Runner("t-1", 99);
  r->Launch(Spec("t-1"));
  ASSERT_TRUE(events_.Await(*r, Kind::kDone));
  EXPECT_EQ(events_.Kinds("t-1"), (std::vector<Kind>{Kind::kLaunchFailed, Kind::kDone}));
  EXPECT_EQ(events_.Seen("t-1")[0].message, "'a.bin' does not match its SHA-256");
  const auto reports = steps_->Reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].report.state, "failed");
  EXPECT_EQ(reports[0].report.exit_code, kLaunchFailedCode);
  EXPECT_EQ(reports[0].report.bound_ms, 99);
  EXPECT_EQ(reports[0].report.reason, "'a.bin' does not match its SHA-256");
  EXPECT_EQ(steps_->Calls("t-1"), (std::vector<std::string>{"fetch t-1", "report t-1 failed"}));
}

TEST_F(TaskRunnerTest, ALaunchTheRuntimeRefusesIsReportedFailedWithTheShellsCode) {
  steps_->FailLaunch("t-1", {Error{ErrorCode::kNotFound, "no such command: trian.py"}});
  steps_->FailLaunch("t-2", {Error{ErrorCode::kInvalidArgument, "memory limit too low"}});
  auto r1 = Runner("t-1");
  auto r2 = Runner("t-2");
  r1->Launch(Spec("t-1"));
  r2->Launch(Spec("t-2"));
  ASSERT_TRUE(events_.Await(*r1, Kind::kDone));
  ASSERT_TRUE(events_.Await(*r2, Kind::kDone));
  std::map<std::string, int> codes;
  for (const auto& rep : steps_->Reports()) codes[rep.task_id] = rep.report.exit_code;
  EXPECT_EQ(codes,
            (std::map<std::string, int>{{"t-1", kNotFoundCode}, {"t-2", kLaunchFailedCode}}));
}

TEST_F(TaskRunnerTest, ADuplicateLaunchIsHandedBackForAdoptionWithoutAReport) {
  steps_->FailLaunch("t-1", {Error{ErrorCode::kAlreadyExists, "task t-1 exists"}});
  auto r = Runner("t-1");
  r->Launch(Spec("t-1"));
  ASSERT_TRUE(events_.Await(*r, Kind::kDone));
  EXPECT_EQ(events_.Kinds("t-1"), (std::vector<Kind>{Kind::kAlreadyExists, Kind::kDone}));
  EXPECT_TRUE(steps_->Reports().empty());
}

TEST_F(TaskRunnerTest, AReportIsRetriedUntilDeliveredAndARefusalIsNotRepeated) {
  steps_->FailReport("t-1", {Unavailable(), Error{ErrorCode::kInternal, "HTTP 500"}});
  auto r = Runner("t-1");
  r->Adopt();
  EXPECT_EQ(r->phase(), RunnerPhase::kRunning);
  r->Report(RunningReport(5, 77));
  r->End(Succeeded(77), "");
  ASSERT_TRUE(events_.Await(*r, Kind::kDone));
  EXPECT_EQ(steps_->Calls("t-1"),
            (std::vector<std::string>{"report t-1 running", "report t-1 running",
                                      "report t-1 running", "report t-1 succeeded"}));

  steps_->FailReport("t-2", {Error{ErrorCode::kFailedPrecondition, "task t-2 is stopped"}});
  auto r2 = Runner("t-2");
  r2->Adopt();
  r2->End(Succeeded(77), "");
  ASSERT_TRUE(events_.Await(*r2, Kind::kDone));
  EXPECT_EQ(steps_->Calls("t-2"), std::vector<std::string>{"report t-2 succeeded"});
  EXPECT_FALSE(r2->reports_pending());  // answered: the server moved the task on
}

TEST_F(TaskRunnerTest, OutputsAreRetriedWhileTheServerIsDownAndARefusalStillReportsTheEnd) {
  steps_->FailSave("t-1", {Unavailable()});
  steps_->FailSave("t-2", {Error{ErrorCode::kNotFound, "no task t-2"}});
  auto r1 = Runner("t-1");
  auto r2 = Runner("t-2");
  r1->Adopt();
  r2->Adopt();
  r1->End(Succeeded(77), "/ws/t-1");
  r2->End(std::nullopt, "/ws/t-2");  // outputs only: a run the server ended itself
  ASSERT_TRUE(events_.Await(*r1, Kind::kDone));
  ASSERT_TRUE(events_.Await(*r2, Kind::kDone));
  EXPECT_EQ(steps_->Calls("t-1"), (std::vector<std::string>{"save t-1 /ws/t-1", "save t-1 /ws/t-1",
                                                            "report t-1 succeeded"}));
  EXPECT_EQ(steps_->Calls("t-2"), std::vector<std::string>{"save t-2 /ws/t-2"});
}

TEST_F(TaskRunnerTest, ASlowInputFetchDoesNotHoldUpAnotherTasksLaunchOrReports) {
  steps_->Hold("t-slow");
  auto slow = Runner("t-slow");
  auto quick = Runner("t-quick");
  slow->Launch(Spec("t-slow"));
  ASSERT_TRUE(steps_->AwaitCall("fetch t-slow"));
  quick->Launch(Spec("t-quick"));
  ASSERT_TRUE(events_.Await(*quick, Kind::kLaunched));
  ASSERT_TRUE(steps_->AwaitCall("report t-quick running"));
  quick->End(Succeeded(77), "/ws/t-quick");
  ASSERT_TRUE(events_.Await(*quick, Kind::kDone));
  // All of it while the other fetch is still held.
  EXPECT_EQ(slow->phase(), RunnerPhase::kFetchingInputs);
  EXPECT_EQ(steps_->Calls("t-slow"), std::vector<std::string>{"fetch t-slow"});
  steps_->Release("t-slow");
  ASSERT_TRUE(events_.Await(*slow, Kind::kLaunched));
}

TEST_F(TaskRunnerTest, CancelAbandonsAFetchAndLaunchesNothing) {
  steps_->Hold("t-1");
  auto r = Runner("t-1");
  r->Launch(Spec("t-1"));
  ASSERT_TRUE(steps_->AwaitCall("fetch t-1"));
  r->Cancel();
  ASSERT_TRUE(events_.Await(*r, Kind::kDone));
  EXPECT_EQ(events_.Kinds("t-1"), std::vector<Kind>{Kind::kDone});
  EXPECT_EQ(steps_->Calls("t-1"), std::vector<std::string>{"fetch t-1"});
  EXPECT_FALSE(r->reports_pending());
}

TEST_F(TaskRunnerTest, CancelLeavesAReportTheServerNeverTookPending) {
  steps_->FailReport("t-1", std::vector<Error>(100000, Unavailable()));
  auto r = Runner("t-1");
  r->Adopt();
  r->End(Succeeded(77), "");
  ASSERT_TRUE(steps_->AwaitCall("report t-1 succeeded"));
  EXPECT_TRUE(r->reports_pending());
  r->Release(kDeadline);
  EXPECT_EQ(r->phase(), RunnerPhase::kDone);
  EXPECT_TRUE(r->reports_pending());  // the next agent on the data dir reports it again
  EXPECT_TRUE(steps_->Reports().empty());
}

}  // namespace
}  // namespace gpupool::agent
