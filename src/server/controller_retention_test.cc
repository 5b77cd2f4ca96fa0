// Controller's bounded memory: a finished task leaves memory retain_finished_ms after its end
// (its telemetry, output and file caches with it) and every read of it then comes from the store
// with the same visibility rules; pages cross from memory to the store; the indexes by state
// stay true through every kind of transition; a restart brings back the live tasks and the
// retained finished ones only, and never reuses the id of a task that stayed in the store.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "server/controller.h"
#include "server/controller_testing.h"

namespace gpupool::server {

using testing::Await;
using testing::AwaitList;
using testing::AwaitMetrics;
using testing::AwaitStatus;
using testing::AwaitTask;

namespace fs = std::filesystem;

constexpr int64_t kRetainMs = 60'000;

// Not in an unnamed namespace: the Controller names it a friend, for ExpectIndexesTrue.
class ControllerRetentionTest : public testing::ControllerFixture {
 protected:
  void SetUp() override {
    std::string tmpl =
        (fs::path(::testing::TempDir()) / "controller_retention_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    options_.node_timeout_ms = int64_t{365} * 24 * 3600 * 1000;  // no heartbeats here
    options_.retain_finished_ms = kRetainMs;
    options_.output_dir = dir_ + "/output";
    ControllerFixture::SetUp();
    if (HasFatalFailure()) return;
    Node n = Node::Make("n1", 64'000, 512 * 1024, 8, "A100-80GB");
    ASSERT_TRUE(
        Await<NodeView>([&](Done<NodeView> d) { c_->RegisterNode(admin_, n, std::move(d)); }));
  }
  void TearDown() override {
    Shutdown();
    fs::remove_all(dir_);
  }

  Task Submit(const Caller& who, bool restartable = false) {
    TaskSpec spec;
    spec.request.cpu_milli = 1000;
    spec.request.memory_mib = 1024;
    spec.request.gpu_count = 1;
    spec.command = {"python3", "train.py"};
    spec.restartable = restartable;
    auto t = Await<Task>([&](Done<Task> d) { c_->SubmitTask(who, spec, std::move(d)); });
    EXPECT_TRUE(t) << t.error().message;
    return t.value_or(Task{});
  }

  Result<Task> Report(const std::string& id, TaskState to) {
    return Await<Task>(
        [&](Done<Task> d) { c_->ReportTask(admin_, id, to, 0, 0, "", 0, std::move(d)); });
  }

  // A task of `who`'s that ran on n1 and succeeded now.
  Task Finished(const Caller& who) {
    const Task t = Submit(who);
    EXPECT_EQ(c_->SchedulePass(), 1);
    EXPECT_TRUE(Report(t.id, TaskState::kRunning));
    auto done = Report(t.id, TaskState::kSucceeded);
    EXPECT_TRUE(done) << done.error().message;
    return done.value_or(Task{});
  }

  // What /metrics says memory holds in `state`, summed over the projects (0 without such lines).
  int64_t InMemory(const std::string& state) {
    std::istringstream text(c_->MetricsText());
    const std::string suffix = ",state=\"" + state + "\"} ";
    int64_t n = 0;
    for (std::string line; std::getline(text, line);) {
      const size_t at = line.find(suffix);
      if (line.rfind("gpupool_tasks{", 0) == 0 && at != std::string::npos) {
        n += std::stoll(line.substr(at + suffix.size()));
      }
    }
    return n;
  }

  std::vector<std::string> ListIds(const Caller& who, TaskFilter filter) {
    std::vector<std::string> ids;
    for (;;) {
      auto page = AwaitList(*c_, who, filter);
      EXPECT_TRUE(page) << page.error().message;
      if (!page) return ids;
      for (const Task& t : page->tasks) ids.push_back(t.id);
      if (page->next_after_seq == 0) return ids;
      filter.after_seq = page->next_after_seq;
    }
  }

  // Every task in memory is in exactly the index its state says, and the counts agree.
  void ExpectIndexesTrue() {
    std::lock_guard lock(c_->mu_);
    std::map<std::string, std::array<int64_t, kTaskStateCount>> by_state;
    size_t live = 0, finished = 0;
    for (const auto& [seq, t] : c_->tasks_) {
      ++by_state[t.project_id][static_cast<size_t>(t.state)];
      if (IsTerminal(t.state)) {
        ++finished;
        EXPECT_TRUE(c_->finished_.count({t.finished_ms, seq})) << t.id;
        EXPECT_FALSE(c_->live_.count(seq)) << t.id;
      } else {
        ++live;
        EXPECT_TRUE(c_->live_.count(seq)) << t.id;
      }
    }
    EXPECT_EQ(c_->live_.size(), live);
    EXPECT_EQ(c_->finished_.size(), finished);
    // A project whose tasks all left memory keeps its (zero) counts.
    for (const auto& [project, counts] : c_->by_state_) {
      if (!by_state.count(project)) {
        EXPECT_EQ(counts, (std::array<int64_t, kTaskStateCount>{})) << project;
      }
    }
    for (const auto& [project, counts] : by_state) EXPECT_EQ(c_->by_state_[project], counts);
    EXPECT_EQ(c_->seq_of_.size(), c_->tasks_.size());
  }

  size_t TasksInMemory() {
    std::lock_guard lock(c_->mu_);
    return c_->tasks_.size();
  }

  std::string dir_;
};

namespace {

TEST_F(ControllerRetentionTest, AFinishedTaskLeavesMemoryAfterItsRetentionAndIsReadFromTheStore) {
  const Task t = Finished(admin_);
  EXPECT_EQ(InMemory("succeeded"), 1);

  clock_.now_ms += kRetainMs - 1;
  c_->HousekeepingPass();
  EXPECT_EQ(InMemory("succeeded"), 1) << "inside its retention it stays";
  auto view = AwaitTask(*c_, admin_, t.id);
  ASSERT_TRUE(view) << view.error().message;

  clock_.now_ms += 2;
  c_->HousekeepingPass();
  EXPECT_EQ(InMemory("succeeded"), 0) << "past its retention it is gone from memory";
  EXPECT_EQ(TasksInMemory(), 0u);
  ExpectIndexesTrue();

  // Every read still answers, from the store.
  view = AwaitTask(*c_, admin_, t.id);
  ASSERT_TRUE(view) << view.error().message;
  EXPECT_EQ(view->task, t);
  EXPECT_EQ(view->queue_position, 0);
  EXPECT_EQ(ListIds(admin_, TaskFilter{}), std::vector<std::string>{t.id});
  TaskFilter succeeded;
  succeeded.states = {TaskState::kSucceeded};
  EXPECT_EQ(ListIds(admin_, succeeded), std::vector<std::string>{t.id});
  TaskFilter on_n1;
  on_n1.node = "n1";
  EXPECT_EQ(ListIds(admin_, on_n1), std::vector<std::string>{t.id});
  auto events = Await<std::vector<TaskEvent>>(
      [&](Done<std::vector<TaskEvent>> d) { c_->TaskEvents(admin_, t.id, d); });
  ASSERT_TRUE(events) << events.error().message;
  ASSERT_FALSE(events->empty());
  EXPECT_EQ(events->back().to, TaskState::kSucceeded);
  auto cost = Await<TaskCost>([&](Done<TaskCost> d) { c_->GetTaskCost(admin_, t.id, d); });
  ASSERT_TRUE(cost) << cost.error().message;
  EXPECT_EQ(cost->billed_until_ms, t.billed_until_ms);
  auto metrics = AwaitMetrics(*c_, admin_, t.id, 0, clock_.now_ms, Resolution::kRaw);
  ASSERT_TRUE(metrics) << metrics.error().message;
  EXPECT_TRUE(metrics->usage.empty()) << "its usage history left memory with it";

  // The writes it refuses say why, as for a task in memory.
  auto stop = Await<Task>([&](Done<Task> d) { c_->StopTask(admin_, t.id, /*discard=*/false, d); });
  ASSERT_FALSE(stop);
  EXPECT_EQ(stop.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(stop.error().message.find("already ended (succeeded)"), std::string::npos);
  auto release = Await<Task>([&](Done<Task> d) { c_->ReleaseTask(admin_, t.id, d); });
  ASSERT_FALSE(release);
  EXPECT_EQ(release.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(TasksInMemory(), 0u) << "reads do not bring it back into memory";
}

TEST_F(ControllerRetentionTest, AnotherProjectsUserFindsAnOldTaskNoMoreThanARecentOne) {
  const Caller alice = testing::MakeMember(*c_, admin_, "alice", "vision");
  const Caller bob = testing::MakeMember(*c_, admin_, "bob", "nlp");
  const Task old = Finished(alice);
  clock_.now_ms += kRetainMs + 1;
  c_->HousekeepingPass();
  const Task recent = Finished(alice);
  ASSERT_EQ(TasksInMemory(), 1u);

  for (const Task* t : {&old, &recent}) {
    EXPECT_TRUE(AwaitTask(*c_, alice, t->id)) << t->id;
    auto seen = AwaitTask(*c_, bob, t->id);
    ASSERT_FALSE(seen) << t->id;
    EXPECT_EQ(seen.error().code, ErrorCode::kNotFound);
    EXPECT_EQ(seen.error().message, "task " + t->id + " not found");
    auto events = Await<std::vector<TaskEvent>>(
        [&](Done<std::vector<TaskEvent>> d) { c_->TaskEvents(bob, t->id, d); });
    EXPECT_EQ(events.error().code, ErrorCode::kNotFound) << t->id;
    auto log =
        Await<LogSlice>([&](Done<LogSlice> d) { c_->ReadTaskLog(bob, t->id, LogRequest{}, d); });
    EXPECT_EQ(log.error().code, ErrorCode::kNotFound) << t->id;
    const Status deleted = AwaitStatus([&](DoneStatus d) { c_->DeleteTask(bob, t->id, d); });
    EXPECT_EQ(deleted.error().code, ErrorCode::kNotFound) << t->id;
  }
  EXPECT_EQ(ListIds(alice, TaskFilter{}), (std::vector<std::string>{old.id, recent.id}));
  EXPECT_TRUE(ListIds(bob, TaskFilter{}).empty());
  TaskFilter theirs;
  theirs.project_id = "vision";
  auto refused = AwaitList(*c_, bob, theirs);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kNotFound);
}

TEST_F(ControllerRetentionTest, PagesCrossFromTheStoreToMemoryInSeqOrder) {
  const Task a = Finished(admin_);
  const Task b = Finished(admin_);
  clock_.now_ms += kRetainMs + 1;
  c_->HousekeepingPass();  // a and b leave memory
  const Task c = Finished(admin_);
  const Task d = Submit(admin_);  // running
  ASSERT_EQ(c_->SchedulePass(), 1);
  ASSERT_TRUE(Report(d.id, TaskState::kRunning));
  const Task e = Submit(admin_);  // pending: n1 has GPUs left, no pass ran
  ASSERT_EQ(TasksInMemory(), 3u);

  TaskFilter one_by_one;
  one_by_one.limit = 1;
  EXPECT_EQ(ListIds(admin_, one_by_one), (std::vector<std::string>{a.id, b.id, c.id, d.id, e.id}));
  TaskFilter live;
  live.states = {TaskState::kRunning, TaskState::kPending};
  live.limit = 1;
  EXPECT_EQ(ListIds(admin_, live), (std::vector<std::string>{d.id, e.id}))
      << "a filter of live states is answered from memory";
  TaskFilter after_b;
  after_b.after_seq = b.seq;
  EXPECT_EQ(ListIds(admin_, after_b), (std::vector<std::string>{c.id, d.id, e.id}));
  // Past every task that left memory the page comes from memory: it does not wait for the store.
  store_->Hold();
  EXPECT_EQ(ListIds(admin_, after_b), (std::vector<std::string>{c.id, d.id, e.id}));
  store_->Release();
}

TEST_F(ControllerRetentionTest, IndexesFollowEveryTransitionAndHousekeepingVisitsOnlyLiveTasks) {
  options_.node_timeout_ms = 10'000;  // n1 sends no heartbeats: lost once the clock moves on
  Reopen();
  const Task done = Finished(admin_);
  const Task requeued = Submit(admin_, /*restartable=*/true);
  const Task stopped = Submit(admin_);
  ASSERT_EQ(c_->SchedulePass(), 2);
  ExpectIndexesTrue();
  // preempted → pending: live to live.
  ASSERT_TRUE(Report(requeued.id, TaskState::kPreempted));
  ExpectIndexesTrue();
  ASSERT_EQ(c_->SchedulePass(), 1);
  ASSERT_TRUE(
      Await<Task>([&](Done<Task> d) { c_->StopTask(admin_, stopped.id, /*discard=*/false, d); }));
  ExpectIndexesTrue();
  // n1 is lost: its restartable task is lost (terminal), then pending again (live).
  clock_.now_ms += 10'001;
  c_->HousekeepingPass();
  ExpectIndexesTrue();
  EXPECT_EQ(AwaitTask(*c_, admin_, requeued.id)->task.state, TaskState::kPending);
  EXPECT_EQ(InMemory("succeeded"), 1);
  EXPECT_EQ(InMemory("stopped"), 1);
  EXPECT_EQ(InMemory("pending"), 1);

  // Past the retention both finished tasks go; the live one stays.
  clock_.now_ms += kRetainMs;
  c_->HousekeepingPass();
  ExpectIndexesTrue();
  EXPECT_EQ(TasksInMemory(), 1u);
  EXPECT_EQ(InMemory("succeeded") + InMemory("stopped"), 0);
  EXPECT_EQ(AwaitTask(*c_, admin_, done.id)->task.state, TaskState::kSucceeded);

  // Deleting a task that left memory deletes it from the store.
  ASSERT_TRUE(AwaitStatus([&](DoneStatus d) { c_->DeleteTask(admin_, done.id, d); }));
  EXPECT_EQ(AwaitTask(*c_, admin_, done.id).error().code, ErrorCode::kNotFound);
  ExpectIndexesTrue();
}

TEST_F(ControllerRetentionTest, ARestartLoadsLiveAndRetainedTasksButNotOldOnes) {
  const Task old = Finished(admin_);
  clock_.now_ms += kRetainMs + 1;
  const Task recent = Finished(admin_);
  const Task waiting = Submit(admin_);
  Reopen();
  ExpectIndexesTrue();
  EXPECT_EQ(TasksInMemory(), 2u) << "the old task stayed in the store";
  EXPECT_EQ(InMemory("succeeded"), 1);
  EXPECT_EQ(InMemory("pending"), 1);
  EXPECT_EQ(AwaitTask(*c_, admin_, old.id)->task, old);
  EXPECT_EQ(AwaitTask(*c_, admin_, recent.id)->task, recent);
  EXPECT_EQ(ListIds(admin_, TaskFilter{}),
            (std::vector<std::string>{old.id, recent.id, waiting.id}));
}

TEST_F(ControllerRetentionTest, ARestartNeverReusesTheIdOfATaskLeftInTheStore) {
  Finished(admin_);
  const Task last = Finished(admin_);  // the highest seq, and finished
  clock_.now_ms += kRetainMs + 1;
  Reopen();
  ASSERT_EQ(TasksInMemory(), 0u);
  const Task next = Submit(admin_);
  EXPECT_GT(next.seq, last.seq);
  EXPECT_NE(next.id, last.id);
}

TEST_F(ControllerRetentionTest, ADroppedTasksTelemetryGoesAndItsLogIsStillReadFromDisk) {
  const Task t = Submit(admin_);
  ASSERT_EQ(c_->SchedulePass(), 1);
  ASSERT_TRUE(Report(t.id, TaskState::kRunning));
  const Task running = AwaitTask(*c_, admin_, t.id)->task;
  TaskTelemetry tt;
  tt.task_id = t.id;
  tt.bound_ms = running.bound_ms;
  tt.samples = {UsageSample{clock_.now_ms, {500, 1024, 80, 2048}}};
  tt.output = {OutputChunk{OutputStream::kStdout, 0, "epoch 1\nepoch 2\n"}};
  tt.output_complete = true;
  NodeTelemetry batch;
  batch.node = "n1";
  batch.tasks = {tt};
  ASSERT_TRUE(Await<std::vector<OutputOffsets>>(
      [&](Done<std::vector<OutputOffsets>> d) { c_->PushTelemetry(admin_, batch, d); }));
  ASSERT_TRUE(Report(t.id, TaskState::kSucceeded));
  auto metrics = AwaitMetrics(*c_, admin_, t.id, 0, clock_.now_ms, Resolution::kRaw);
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->usage.size(), 1u) << "kept while the task is in memory";

  clock_.now_ms += kRetainMs + 1;
  c_->HousekeepingPass();
  metrics = AwaitMetrics(*c_, admin_, t.id, 0, clock_.now_ms, Resolution::kRaw);
  ASSERT_TRUE(metrics) << metrics.error().message;
  EXPECT_TRUE(metrics->usage.empty()) << "its history left memory with it";
  auto log = Await<LogSlice>([&](Done<LogSlice> d) { c_->ReadTaskLog(admin_, t.id, {}, d); });
  ASSERT_TRUE(log) << log.error().message;
  EXPECT_EQ(log->slice.data, "epoch 1\nepoch 2\n");
  EXPECT_TRUE(log->complete);
  // Late telemetry of a task that left memory is refused, not stored.
  auto late = Await<std::vector<OutputOffsets>>(
      [&](Done<std::vector<OutputOffsets>> d) { c_->PushTelemetry(admin_, batch, d); });
  ASSERT_TRUE(late);
  ASSERT_EQ(late->size(), 1u);
  EXPECT_TRUE(late->front().refused);
}

}  // namespace
}  // namespace gpupool::server
