// Controller over an AsyncStore on a MemoryStore with a hand-driven clock: the task lifecycle,
// why-pending, tenancy, quotas, preemption, gangs, drains, metering and balances, nonces,
// rebuilding the state after a restart, and durable writes held back (answers wait for them and
// come from the store's thread, history reads queue behind them, a crash loses them unanswered).
// Scheduling passes and housekeeping are called directly (no loop thread).
#include "server/controller.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/base64.h"
#include "core/ssh_key.h"
#include "server/controller_testing.h"
#include "store/memory_store.h"

namespace gpupool::server {
namespace {

using testing::Await;
using testing::AwaitList;
using testing::AwaitStatus;
using testing::AwaitTask;
using testing::ControllerFixture;

// Nodes here send no heartbeats unless a test says so: they are never lost by default.
constexpr int64_t kNeverLostMs = int64_t{365} * 24 * 3600 * 1000;

class ControllerTest : public ControllerFixture {
 protected:
  ControllerTest() {
    options_.meter_interval_ms = 60'000;
    options_.node_timeout_ms = kNeverLostMs;
  }

  // A fresh controller over the same durable data, as after a restart.
  void Reopen(int64_t node_timeout_ms = kNeverLostMs) {
    options_.node_timeout_ms = node_timeout_ms;
    ControllerFixture::Reopen();
  }

  NodeView AddNode(const std::string& name, int gpus, const std::string& model = "A100-80GB") {
    Node n = Node::Make(name, 64'000, 512 * 1024, gpus, model);
    auto v = Await<NodeView>([&](Done<NodeView> d) { c_->RegisterNode(admin_, n, std::move(d)); });
    EXPECT_TRUE(v) << v.error().message;
    return *v;
  }

  Task Submit(const Caller& who, TaskRequest r, const std::string& project = "",
              bool restartable = false) {
    auto t = TrySubmit(who, std::move(r), project, restartable);
    EXPECT_TRUE(t) << t.error().message;
    return t.value_or(Task{});
  }

  Result<Task> TrySubmit(const Caller& who, TaskRequest r, const std::string& project = "",
                         bool restartable = false, int64_t max_runtime_ms = 0) {
    TaskSpec spec;
    spec.project_id = project;
    spec.request = std::move(r);
    spec.command = {"python3", "train.py"};
    spec.restartable = restartable;
    spec.max_runtime_ms = max_runtime_ms;
    return Await<Task>([&](Done<Task> d) { c_->SubmitTask(who, spec, std::move(d)); });
  }

  Task Get(const std::string& id) { return AwaitTask(*c_, admin_, id)->task; }

  Result<std::vector<TaskEvent>> Events(const std::string& id) {
    return Await<std::vector<TaskEvent>>(
        [&](Done<std::vector<TaskEvent>> d) { c_->TaskEvents(admin_, id, std::move(d)); });
  }
  // A 1-GPU task bound now on n1 (4 × A100-80GB at 1000 micros per GPU-second; the project has
  // 1,000,000 micros of credit).
  Task BindMetered() {
    AddNode("n1", 4);
    SetPrice("gpu:A100-80GB", 3'600'000);
    Credit("default", 1'000'000);
    Task t = Submit(admin_, Gpus(1));
    EXPECT_EQ(c_->SchedulePass(), 1);
    return t;
  }
  Result<TaskCost> Cost(const std::string& id) {
    return Await<TaskCost>([&](Done<TaskCost> d) { c_->GetTaskCost(admin_, id, std::move(d)); });
  }
  Result<Task> Report(const std::string& id, TaskState to, int64_t at = 0) {
    return Await<Task>(
        [&](Done<Task> d) { c_->ReportTask(admin_, id, to, at, 0, "", 0, std::move(d)); });
  }

  Caller Member(const std::string& user, const std::string& project) {
    return testing::MakeMember(*c_, admin_, user, project);
  }

  void SetPrice(const std::string& resource, int64_t micros_per_hour) {
    Price p;
    p.resource = resource;
    p.micros_per_hour = micros_per_hour;
    p.effective_ms = clock_.now_ms;
    ASSERT_TRUE(Await<Price>([&](Done<Price> d) { c_->SetPrice(admin_, p, d); }));
  }

  void Credit(const std::string& project, int64_t micros) {
    ASSERT_TRUE(Await<LedgerEntry>(
        [&](Done<LedgerEntry> d) { c_->Credit(admin_, project, micros, "top-up", d); }));
  }

  static TaskRequest Gpus(int n, int priority = 0) {
    TaskRequest r;
    r.cpu_milli = 1000;
    r.memory_mib = 1024;
    r.gpu_count = n;
    r.priority = priority;
    return r;
  }
};

TEST_F(ControllerTest, BootstrapsOnceAndSealsTheSecret) {
  auto again = c_->Bootstrap();
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->has_value()) << "a second bootstrap must not mint another admin key";
  auto snap = store_->Load({});
  ASSERT_EQ(snap->access_keys.size(), 1u);
  const std::string secret = c_->LookupKey(snap->access_keys[0].access_key)->secret;
  EXPECT_EQ(secret.size(), 40u);
  EXPECT_EQ(snap->access_keys[0].sealed_secret.find(secret), std::string::npos)
      << "the stored form must not contain the plain secret";
  Reopen();
  EXPECT_EQ(c_->LookupKey(snap->access_keys[0].access_key)->secret, secret);
}

TEST_F(ControllerTest, FullLifecycleRecordsEveryTransition) {
  AddNode("n1", 4);
  Task t = Submit(admin_, Gpus(2));
  EXPECT_EQ(t.state, TaskState::kPending);
  EXPECT_EQ(AwaitTask(*c_, admin_, t.id)->queue_position, 1);
  EXPECT_EQ(c_->SchedulePass(), 1);
  Task s = Get(t.id);
  ASSERT_EQ(s.state, TaskState::kScheduled);
  ASSERT_TRUE(s.placement);
  EXPECT_EQ(s.placement->node, "n1");
  EXPECT_EQ(s.placement->gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(c_->GetNode(admin_, "n1")->gpu_milli_free, 2000);
  ASSERT_TRUE(Report(t.id, TaskState::kRunning));
  ASSERT_TRUE(Report(t.id, TaskState::kSucceeded));
  EXPECT_EQ(c_->GetNode(admin_, "n1")->gpu_milli_free, 4000) << "resources released";
  auto events = Events(t.id);
  ASSERT_TRUE(events);
  std::vector<TaskState> to;
  for (const TaskEvent& e : *events) to.push_back(e.to);
  EXPECT_EQ(to, (std::vector<TaskState>{TaskState::kPending, TaskState::kScheduled,
                                        TaskState::kRunning, TaskState::kSucceeded}));
  auto illegal = Report(t.id, TaskState::kRunning);
  ASSERT_FALSE(illegal);
  EXPECT_EQ(illegal.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(illegal.error().message.find("cannot go from succeeded to running"), std::string::npos);
  EXPECT_TRUE(AwaitStatus([&](DoneStatus d) { c_->DeleteTask(admin_, t.id, d); }));
  EXPECT_EQ(AwaitTask(*c_, admin_, t.id).error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(store_->TaskEvents(t.id)->empty()) << "a deleted task's events go with it";
}

TEST_F(ControllerTest, PendingTaskSaysWhyAndWhere) {
  AddNode("n1", 4);
  AddNode("n2", 2, "T4");
  Submit(admin_, Gpus(1));  // runs
  Task big = Submit(admin_, Gpus(8));
  c_->SchedulePass();
  auto v = AwaitTask(*c_, admin_, big.id);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->task.state, TaskState::kPending);
  EXPECT_EQ(v->queue_position, 1);
  EXPECT_FALSE(v->pending_reason.empty());
  auto refused = AwaitStatus([&](DoneStatus d) { c_->DeleteTask(admin_, big.id, d); });
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kFailedPrecondition) << "only ended tasks go";
  int nodes = 0;
  for (const auto& [why, n] : v->pending_nodes) nodes += n;
  EXPECT_EQ(nodes, 2) << "both nodes must be accounted for in the counted reasons";
}

TEST_F(ControllerTest, ProjectsAreInvisibleToOutsiders) {
  Caller alice = Member("alice", "vision");
  Caller bob = Member("bob", "speech");
  Task t = Submit(alice, Gpus(1));
  EXPECT_EQ(t.project_id, "vision");
  auto seen = AwaitTask(*c_, bob, t.id);
  ASSERT_FALSE(seen);
  EXPECT_EQ(seen.error().code, ErrorCode::kNotFound);
  auto stop = Await<Task>([&](Done<Task> d) { c_->StopTask(bob, t.id, /*discard=*/false, d); });
  EXPECT_EQ(stop.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(AwaitList(*c_, bob, TaskFilter{})->tasks.empty());
  EXPECT_EQ(AwaitList(*c_, alice, TaskFilter{})->tasks.size(), 1u);
  EXPECT_EQ(c_->GetBalance(bob, "vision").error().code, ErrorCode::kNotFound);
  auto other = TrySubmit(bob, Gpus(1), "vision");
  EXPECT_EQ(other.error().code, ErrorCode::kNotFound);
  Project mine;
  mine.id = "mine";
  auto admin_only = Await<Project>([&](Done<Project> d) { c_->CreateProject(bob, mine, d); });
  EXPECT_EQ(admin_only.error().code, ErrorCode::kPermissionDenied);
}

TEST_F(ControllerTest, ListPaginatesInSubmissionOrder) {
  for (int i = 0; i < 7; ++i) Submit(admin_, Gpus(1));
  TaskFilter f;
  f.limit = 3;
  std::vector<std::string> ids;
  for (;;) {
    auto page = AwaitList(*c_, admin_, f);
    ASSERT_TRUE(page);
    for (const Task& t : page->tasks) ids.push_back(t.id);
    if (page->next_after_seq == 0) break;
    f.after_seq = page->next_after_seq;
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"t-1", "t-2", "t-3", "t-4", "t-5", "t-6", "t-7"}));
  f = TaskFilter{};
  f.limit = 0;
  EXPECT_EQ(AwaitList(*c_, admin_, f).error().code, ErrorCode::kInvalidArgument);
}

TEST_F(ControllerTest, QuotasLimitTasksAndGpus) {
  AddNode("n1", 8);
  Caller alice = Member("alice", "vision");
  Project q;
  q.id = "vision";
  q.max_gpu_milli = 2000;
  q.max_tasks = 3;
  ASSERT_TRUE(Await<Project>([&](Done<Project> d) { c_->UpdateProject(admin_, q, d); }));
  Task a = Submit(alice, Gpus(2));
  Task b = Submit(alice, Gpus(1));
  Submit(alice, Gpus(1));
  auto fourth = TrySubmit(alice, Gpus(1));
  ASSERT_FALSE(fourth);
  EXPECT_EQ(fourth.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(fourth.error().message.find("max_tasks is 3"), std::string::npos);
  c_->SchedulePass();
  EXPECT_EQ(Get(a.id).state, TaskState::kScheduled);
  EXPECT_EQ(Get(b.id).state, TaskState::kPending) << "2000 milli already held";
  EXPECT_NE(AwaitTask(*c_, alice, b.id)->pending_reason.find("quota"), std::string::npos);
  ASSERT_TRUE(Report(a.id, TaskState::kSucceeded));
  c_->SchedulePass();
  EXPECT_EQ(Get(b.id).state, TaskState::kScheduled);
}

TEST_F(ControllerTest, HigherPriorityPreemptsAndTheVictimRequeues) {
  AddNode("n1", 4);
  Task low = Submit(admin_, Gpus(4, 0), "", /*restartable=*/true);
  c_->SchedulePass();
  ASSERT_EQ(Get(low.id).state, TaskState::kScheduled);
  Task high = Submit(admin_, Gpus(4, 10));
  c_->SchedulePass();
  EXPECT_EQ(Get(high.id).state, TaskState::kScheduled);
  Task victim = Get(low.id);
  EXPECT_EQ(victim.state, TaskState::kPending);
  EXPECT_EQ(victim.preemptions, 1);
  EXPECT_FALSE(victim.placement);
  auto events = Events(low.id);
  ASSERT_GE(events->size(), 4u);
  EXPECT_EQ((*events)[events->size() - 2].to, TaskState::kPreempted);
  EXPECT_NE((*events)[events->size() - 2].reason.find(high.id), std::string::npos);
}

TEST_F(ControllerTest, GangsPlaceAllOrNothing) {
  AddNode("n1", 8);
  AddNode("n2", 8);
  auto member = [](const std::string& gang, int size) {
    TaskRequest r = Gpus(8);
    r.gang_id = gang;
    r.gang_size = size;
    return r;
  };
  Task a1 = Submit(admin_, member("big", 3));
  Task a2 = Submit(admin_, member("big", 3));
  Task a3 = Submit(admin_, member("big", 3));
  c_->SchedulePass();
  for (const Task& t : {a1, a2, a3}) EXPECT_EQ(Get(t.id).state, TaskState::kPending) << t.id;
  EXPECT_EQ(c_->GetNode(admin_, "n1")->gpu_milli_free, 8000);
  for (const Task& t : {a1, a2, a3}) {
    ASSERT_TRUE(
        Await<Task>([&](Done<Task> d) { c_->StopTask(admin_, t.id, /*discard=*/false, d); }));
  }
  Task b1 = Submit(admin_, member("pair", 2));
  Task b2 = Submit(admin_, member("pair", 2));
  EXPECT_EQ(c_->SchedulePass(), 2);
  EXPECT_NE(Get(b1.id).placement->node, Get(b2.id).placement->node);
}

TEST_F(ControllerTest, DrainRequeuesRestartableTasksAndStopsOthers) {
  AddNode("n1", 4);
  Task keep = Submit(admin_, Gpus(1), "", /*restartable=*/true);
  Task gone = Submit(admin_, Gpus(1));
  c_->SchedulePass();
  auto v = Await<NodeView>([&](Done<NodeView> d) { c_->DrainNode(admin_, "n1", d); });
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->tasks.empty());
  EXPECT_EQ(Get(keep.id).state, TaskState::kPending);
  EXPECT_EQ(Get(gone.id).state, TaskState::kStopped);
  EXPECT_EQ(c_->SchedulePass(), 0) << "a drained node takes no new work";
  ASSERT_TRUE(Await<NodeView>([&](Done<NodeView> d) { c_->SetCordon(admin_, "n1", false, d); }));
  EXPECT_EQ(c_->SchedulePass(), 1);
}

TEST_F(ControllerTest, MetersPerSecondAcrossTicksAndRestarts) {
  const Task t = BindMetered();
  const int64_t bound = clock_.now_ms;
  clock_.now_ms += 61'500;  // 61.5 s: 62 seconds begun
  c_->HousekeepingPass();
  EXPECT_EQ(Cost(t.id)->cost_micros, 62'000);
  // A restart in the middle: nothing billed twice, nothing lost.
  Reopen();
  clock_.now_ms = bound + 100'000;
  ASSERT_TRUE(Await<Task>([&](Done<Task> d) { c_->StopTask(admin_, t.id, /*discard=*/false, d); }));
  auto cost = Cost(t.id);
  EXPECT_EQ(cost->cost_micros, 100'000);  // 100 s × 1000
  EXPECT_EQ(cost->entries.size(), 2u);
  EXPECT_EQ(cost->billed_until_ms, bound + 100'000);
  auto balance = c_->GetBalance(admin_, "default");
  EXPECT_EQ(balance->balance_micros, 1'000'000 - 100'000);
  EXPECT_EQ(balance->usage_micros, 100'000);
}

// A running task's cost shows live: what the next meter tick will bill is answered as accrued.
TEST_F(ControllerTest, ARunningTasksCostIncludesWhatIsNotBilledYet) {
  const Task t = BindMetered();
  const int64_t bound = clock_.now_ms;
  clock_.now_ms = bound + 20'000;  // before the first meter tick
  auto cost = Cost(t.id);
  ASSERT_TRUE(cost);
  EXPECT_EQ(cost->cost_micros, 0);
  EXPECT_EQ(cost->accrued_micros, 20'000);
  EXPECT_EQ(cost->as_of_ms, bound + 20'000);
  clock_.now_ms = bound + 61'000;
  c_->HousekeepingPass();  // bills the 61 s
  clock_.now_ms = bound + 70'000;
  cost = Cost(t.id);
  EXPECT_EQ(cost->cost_micros, 61'000);
  EXPECT_EQ(cost->accrued_micros, 9'000);
  ASSERT_TRUE(Await<Task>([&](Done<Task> d) { c_->StopTask(admin_, t.id, /*discard=*/false, d); }));
  cost = Cost(t.id);
  EXPECT_EQ(cost->cost_micros, 70'000);
  EXPECT_EQ(cost->accrued_micros, 0) << "an ended task has nothing left to bill";
}

TEST_F(ControllerTest, BillingRunsFromTheAgentsTrueStartToItsTrueStop) {
  const Task t = BindMetered();
  const int64_t bound = clock_.now_ms;
  clock_.now_ms = bound + 40'000;
  ASSERT_TRUE(Report(t.id, TaskState::kRunning, bound + 30'000));  // started 30 s after binding
  clock_.now_ms = bound + 95'000;
  ASSERT_TRUE(Report(t.id, TaskState::kSucceeded, bound + 90'000));  // ended at 90 s
  // Seconds 30..89 after binding: 60 s × 1000 micros; the 30 s of launching are not billed.
  EXPECT_EQ(Cost(t.id)->cost_micros, 60'000);
  EXPECT_EQ(Get(t.id).started_ms, bound + 30'000);
  EXPECT_EQ(Get(t.id).finished_ms, bound + 90'000);
}

TEST_F(ControllerTest, NoBalanceRefusesWorkAndStopsRunningTasksAfterGrace) {
  AddNode("n1", 4);
  SetPrice("gpu:*", 3'600'000);
  auto refused = TrySubmit(admin_, Gpus(1));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);
  Credit("default", 5'000);  // five GPU-seconds
  Project p;
  p.id = "default";
  p.stop_grace_ms = 10'000;
  ASSERT_TRUE(Await<Project>([&](Done<Project> d) { c_->UpdateProject(admin_, p, d); }));
  Task t = Submit(admin_, Gpus(1));
  c_->SchedulePass();
  clock_.now_ms += 60'000;
  c_->HousekeepingPass();  // bills 60 s: the balance goes negative, the grace starts
  EXPECT_LT(c_->GetBalance(admin_, "default")->balance_micros, 0);
  EXPECT_EQ(Get(t.id).state, TaskState::kScheduled);
  clock_.now_ms += 10'000;
  c_->HousekeepingPass();
  EXPECT_EQ(Get(t.id).state, TaskState::kStopped);
  EXPECT_NE(Get(t.id).reason.find("ran out of balance"), std::string::npos);
}

// Issue 11 finding 8: a task that started after its node's last heartbeat was lost with
// finished_ms < started_ms. It ends no earlier than its start, and is billed to its end only.
TEST_F(ControllerTest, ALostTaskNeverEndsBeforeItStarted) {
  Reopen(/*node_timeout_ms=*/10'000);
  AddNode("n1", 4);              // its last heartbeat: now
  SetPrice("gpu:*", 3'600'000);  // 1000 micros per GPU-second
  Credit("default", 1'000'000);
  Task t = Submit(admin_, Gpus(1));
  ASSERT_EQ(c_->SchedulePass(), 1);
  const int64_t t0 = clock_.now_ms;
  clock_.now_ms = t0 + 3'000;
  ASSERT_TRUE(Report(t.id, TaskState::kRunning, t0 + 3'000));
  clock_.now_ms = t0 + 8'000;
  c_->HousekeepingPass();  // the meter bills up to t0 + 8 s
  clock_.now_ms = t0 + 20'000;
  c_->HousekeepingPass();  // n1 silent for 20 s > 10 s
  Task lost = Get(t.id);
  ASSERT_EQ(lost.state, TaskState::kLost);
  EXPECT_EQ(lost.started_ms, t0 + 3'000);
  EXPECT_EQ(lost.finished_ms, t0 + 3'000);
  EXPECT_EQ(lost.billed_until_ms, t0 + 3'000);
  // Billing starts at the start; nothing after it is vouched for: the 5 s billed are refunded.
  EXPECT_EQ(c_->GetBalance(admin_, "default")->balance_micros, 1'000'000);
}

TEST_F(ControllerTest, ASilentNodeIsLostAndItsRestartableTasksMove) {
  Reopen(/*node_timeout_ms=*/10'000);
  AddNode("n1", 4);
  SetPrice("gpu:*", 3'600'000);  // 1000 micros per GPU-second
  Credit("default", 1'000'000);
  Task keep = Submit(admin_, Gpus(1), "", /*restartable=*/true);
  Task gone = Submit(admin_, Gpus(1));
  ASSERT_EQ(c_->SchedulePass(), 2);
  const int64_t first_binding = Get(keep.id).bound_ms;
  AddNode("n2", 4);
  const int64_t t0 = clock_.now_ms;
  clock_.now_ms = t0 + 55'000;
  // n1's last sign of life; the answer tells its agent how long the server waits for the next.
  EXPECT_EQ(c_->Heartbeat(admin_, "n1", {}), 10'000);
  ASSERT_TRUE(c_->Heartbeat(admin_, "n2", {}));
  clock_.now_ms = t0 + 60'000;
  c_->HousekeepingPass();  // the meter bills both tasks up to t0 + 60 s
  EXPECT_EQ(c_->GetNode(admin_, "n1")->info.status, NodeStatus::kReady);
  clock_.now_ms = t0 + 70'000;
  ASSERT_TRUE(c_->Heartbeat(admin_, "n2", {}));
  c_->HousekeepingPass();  // n1 silent for 15 s > 10 s
  EXPECT_EQ(c_->GetNode(admin_, "n1")->info.status, NodeStatus::kLost);
  EXPECT_EQ(Get(gone.id).state, TaskState::kLost);
  EXPECT_NE(Get(gone.id).reason.find("n1 lost"), std::string::npos);
  EXPECT_EQ(Get(keep.id).state, TaskState::kPending);
  // Usage ends at the last heartbeat: 55 s per task; the 5 s billed after it are credited back.
  EXPECT_EQ(c_->GetBalance(admin_, "default")->balance_micros, 1'000'000 - 2 * 55'000);
  EXPECT_EQ(c_->SchedulePass(), 1);
  EXPECT_EQ(Get(keep.id).placement->node, "n2") << "re-queued onto the node that is alive";
  // A late report from n1's agent about the first binding must not end the second one.
  auto stale = Await<Task>([&](Done<Task> d) {
    c_->ReportTask(admin_, keep.id, TaskState::kSucceeded, 0, 0, "", first_binding, d);
  });
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(Get(keep.id).state, TaskState::kScheduled);
  EXPECT_TRUE(Await<Task>([&](Done<Task> d) {
    c_->ReportTask(admin_, keep.id, TaskState::kRunning, 0, 0, "", Get(keep.id).bound_ms, d);
  }));
  // n1 comes back: ready and empty, never running the old tasks again.
  ASSERT_TRUE(c_->Heartbeat(admin_, "n1", {}));
  EXPECT_EQ(c_->GetNode(admin_, "n1")->info.status, NodeStatus::kReady);
  EXPECT_TRUE(c_->GetNode(admin_, "n1")->tasks.empty());
  EXPECT_EQ(c_->GetNode(admin_, "n1")->gpu_milli_free, 4000);
}

// The agents' long-poll, with the scheduling loop running: answered when the node's tasks
// change, when the wait is over, and at shutdown.
TEST_F(ControllerTest, AssignmentWatchersAreAnsweredOnChangeTimeoutAndStop) {
  using Answer = Result<NodeAssignments>;
  auto watch = [&](int64_t after, int64_t wait_ms) {
    auto promise = std::make_shared<std::promise<Answer>>();
    c_->WatchAssignments(admin_, "n1", after, wait_ms,
                         [promise](Answer a) { promise->set_value(std::move(a)); });
    return promise->get_future();
  };
  AddNode("n1", 4);
  auto first = watch(0, 10'000);
  ASSERT_EQ(first.wait_for(std::chrono::seconds(0)), std::future_status::ready)
      << "a version newer than the agent's answers at once";
  const int64_t v1 = first.get()->version;
  EXPECT_TRUE(Await<NodeAssignments>([&](Done<NodeAssignments> d) {
                c_->WatchAssignments(admin_, "n1", v1, 0, d);
              })->tasks.empty());
  c_->Start();
  auto change = watch(v1, 10'000);
  EXPECT_EQ(change.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  Task t = Submit(admin_, Gpus(2));
  ASSERT_EQ(change.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  Answer placed = change.get();
  ASSERT_TRUE(placed);
  EXPECT_GT(placed->version, v1);
  ASSERT_EQ(placed->tasks.size(), 1u);
  EXPECT_EQ(placed->tasks[0].id, t.id);
  EXPECT_EQ(placed->tasks[0].state, TaskState::kScheduled);
  auto timeout = watch(placed->version, 10'000);
  clock_.now_ms += 11'000;  // the loop's housekeeping (once a second) sees the wait is over
  ASSERT_EQ(timeout.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(timeout.get()->version, placed->version);
  auto at_stop = watch(placed->version, 10'000);
  c_->Stop();
  ASSERT_EQ(at_stop.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_EQ(at_stop.get()->tasks.size(), 1u);
  auto unknown = Await<NodeAssignments>(
      [&](Done<NodeAssignments> d) { c_->WatchAssignments(admin_, "n9", 0, 0, d); });
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
}

TEST_F(ControllerTest, MaxRuntimeStopsAtTheDeadline) {
  AddNode("n1", 4);
  auto t = TrySubmit(admin_, Gpus(1), "", false, /*max_runtime_ms=*/10'000);
  ASSERT_TRUE(t);
  c_->SchedulePass();
  const int64_t bound = clock_.now_ms;
  clock_.now_ms += 9'000;
  c_->HousekeepingPass();
  EXPECT_EQ(Get(t->id).state, TaskState::kScheduled);
  clock_.now_ms += 2'500;
  c_->HousekeepingPass();
  Task stopped = Get(t->id);
  EXPECT_EQ(stopped.state, TaskState::kStopped);
  EXPECT_EQ(stopped.finished_ms, bound + 10'000);
  EXPECT_EQ(stopped.billed_until_ms, bound + 10'000);
}

// Issue 11 finding 1: max_runtime_ms = 2^63−1 was accepted and the deadline run_start + max wrapped
// into the past, stopping the task at once with a negative finished_ms.
TEST_F(ControllerTest, MaxRuntimeIsBoundedAndAHugeOneNeverWraps) {
  AddNode("n1", 4);
  auto huge = TrySubmit(admin_, Gpus(1), "", false, std::numeric_limits<int64_t>::max());
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(huge.error().message.find("max_runtime_ms"), std::string::npos) << huge.error().message;
  auto year = TrySubmit(admin_, Gpus(1), "", false, int64_t{365} * 24 * 3600 * 1000);
  ASSERT_TRUE(year) << year.error().message;
  c_->SchedulePass();
  clock_.now_ms += 5'000;
  c_->HousekeepingPass();
  EXPECT_EQ(Get(year->id).state, TaskState::kScheduled);
  EXPECT_EQ(Get(year->id).finished_ms, 0);
}

// Issue 11 finding 7: a command with a NUL or an empty program was accepted and failed on the
// node with exit 126.
TEST_F(ControllerTest, CommandsExecCannotRunAreRefused) {
  auto submit = [&](std::vector<std::string> command) {
    TaskSpec spec;
    spec.request = Gpus(0);
    spec.command = std::move(command);
    return Await<Task>([&](Done<Task> d) { c_->SubmitTask(admin_, spec, std::move(d)); });
  };
  auto empty = submit({""});
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().message, "command[0] (the program) must not be empty");
  auto nul = submit({"echo", std::string("a\0b", 3)});
  ASSERT_FALSE(nul);
  EXPECT_EQ(nul.error().message, "command[1] must not contain a NUL byte");
  EXPECT_TRUE(submit({"echo", ""})) << "an empty argument is fine";
}

// Issue 11 finding 2: two credits of 2^63−1 answered 201 and the balance read −2.
TEST_F(ControllerTest, CreditsRefuseOverflow) {
  auto credit = [&](int64_t micros) {
    return Await<LedgerEntry>(
        [&](Done<LedgerEntry> d) { c_->Credit(admin_, "default", micros, "", d); });
  };
  auto too_big = credit(std::numeric_limits<int64_t>::max());
  ASSERT_FALSE(too_big);
  EXPECT_NE(too_big.error().message.find("amount_micros"), std::string::npos);
  const int64_t max = int64_t{1'000'000'000'000'000};
  ASSERT_TRUE(credit(max));
  auto past = credit(1);
  ASSERT_FALSE(past);
  EXPECT_EQ(past.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(past.error().message.find("amount_micros"), std::string::npos);
  EXPECT_EQ(c_->GetBalance(admin_, "default")->balance_micros, max);
}

TEST_F(ControllerTest, RestartReadoptsBoundTasksWithoutPlacingThemTwice) {
  AddNode("n1", 4);
  Task t = Submit(admin_, Gpus(4));
  c_->SchedulePass();
  const TaskPlacement where = *Get(t.id).placement;
  Reopen();
  EXPECT_EQ(Get(t.id).state, TaskState::kScheduled);
  EXPECT_EQ(*Get(t.id).placement, where);
  Task other = Submit(admin_, Gpus(1));
  EXPECT_EQ(c_->SchedulePass(), 0) << "the re-adopted task still holds all four GPUs";
  EXPECT_EQ(Get(other.id).state, TaskState::kPending);
  EXPECT_EQ(other.id, "t-2") << "ids continue after a restart";
}

// Issue 11 finding 6: a node registering again with more CPU, memory or GPUs is taken at its
// word (and stays so across a restart); while a task is bound, what it holds is kept: less than
// that, or another GPU list, is refused with the reason and changes nothing.
TEST_F(ControllerTest, ANodeRegisteringAgainUpdatesItsCapacity) {
  AddNode("n1", 1);
  auto reregister = [&](int64_t cpu_milli, int64_t memory_mib, int gpus) {
    Node n = Node::Make("n1", cpu_milli, memory_mib, gpus, "A100-80GB");
    return Await<NodeView>([&](Done<NodeView> d) { c_->RegisterNode(admin_, n, std::move(d)); });
  };
  auto grown = reregister(96'000, 1024 * 1024, 2);
  ASSERT_TRUE(grown) << grown.error().message;
  EXPECT_EQ(grown->info.node.cpu_milli, 96'000);
  EXPECT_EQ(grown->info.node.memory_mib, 1024 * 1024);
  ASSERT_EQ(grown->info.node.gpus.size(), 2u);
  EXPECT_EQ(grown->cpu_free_milli, 96'000);
  EXPECT_EQ(grown->gpu_milli_free, 2 * kMilliPerGpu);
  Reopen();
  const Result<NodeView> stored = c_->GetNode(admin_, "n1");
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->info.node.cpu_milli, 96'000);
  EXPECT_EQ(stored->info.node.gpus.size(), 2u);

  TaskRequest two = Gpus(2);
  two.cpu_milli = 80'000;
  const Task t = Submit(admin_, two);
  EXPECT_EQ(c_->SchedulePass(), 1) << "the second GPU and the added CPU are usable";
  EXPECT_EQ(Get(t.id).state, TaskState::kScheduled);
  // The pass writes the binding behind its answer; a history read queues a barrier behind that
  // write, so the count below includes it.
  ASSERT_TRUE(Events(t.id));
  const size_t applied = store_->applied();
  auto too_little = reregister(64'000, 1024 * 1024, 2);
  ASSERT_FALSE(too_little);
  EXPECT_EQ(too_little.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(too_little.error().message.find("cpu_milli 64000 is less than its bound tasks hold"),
            std::string::npos)
      << too_little.error().message;
  auto fewer_gpus = reregister(96'000, 1024 * 1024, 1);
  ASSERT_FALSE(fewer_gpus);
  EXPECT_NE(fewer_gpus.error().message.find("its GPU list cannot change"), std::string::npos);
  EXPECT_EQ(store_->applied(), applied) << "nothing was written";
  EXPECT_EQ(c_->GetNode(admin_, "n1")->info.node.cpu_milli, 96'000);
}

// The audit log (issue 11): every administrative change is recorded with who, when and what,
// in the batch that makes it (so it survives a restart and seqs continue), a refused change adds
// nothing, and only admins read the log.
TEST_F(ControllerTest, AdministrativeChangesAreAuditedAndOnlyAdminsReadTheLog) {
  auto log = [&](const Caller& who, AuditFilter filter = {}) {
    return Await<std::vector<AuditEntry>>(
        [&](Done<std::vector<AuditEntry>> d) { c_->ListAudit(who, filter, std::move(d)); });
  };
  const Caller mia = Member("mia", "p-1");  // project.create, user.create, key.create
  Project quota;
  quota.id = "p-1";
  quota.max_tasks = 7;
  quota.max_gpu_milli = -1;
  ASSERT_TRUE(Await<Project>([&](Done<Project> d) { c_->UpdateProject(admin_, quota, d); }));
  Credit("p-1", 5'000'000);
  SetPrice("gpu:A100-80GB", 3'600'000);
  AddNode("n1", 1);
  ASSERT_TRUE(Await<NodeView>([&](Done<NodeView> d) { c_->SetCordon(admin_, "n1", true, d); }));
  ASSERT_TRUE(Await<NodeView>([&](Done<NodeView> d) { c_->DrainNode(admin_, "n1", d); }));
  auto token = Await<NewJoinToken>(
      [&](Done<NewJoinToken> d) { c_->CreateJoinToken(admin_, "rack 4", 0, d); });
  ASSERT_TRUE(token);
  ASSERT_TRUE(Await<JoinTokenView>(
      [&](Done<JoinTokenView> d) { c_->RevokeJoinToken(admin_, token->view.token.id, d); }));
  // A member revoking their own key is audited too; a refused change is not.
  ASSERT_TRUE(Await<AccessKey>(
      [&](Done<AccessKey> d) { c_->RevokeAccessKey(mia, mia.access_key, d); }));
  Project again;
  again.id = "p-1";
  EXPECT_FALSE(Await<Project>([&](Done<Project> d) { c_->CreateProject(admin_, again, d); }));

  auto entries = log(admin_);
  ASSERT_TRUE(entries) << entries.error().message;
  std::vector<std::string> actions;
  for (const AuditEntry& e : *entries) actions.push_back(e.action + " " + e.target);
  const std::string token_id = token->view.token.id;
  EXPECT_EQ(actions, (std::vector<std::string>{
                         "project.create p-1", "user.create mia", "key.create " + mia.access_key,
                         "project.update p-1", "credit.add p-1", "price.set gpu:A100-80GB",
                         "node.cordon n1", "node.drain n1", "join_token.create " + token_id,
                         "join_token.revoke " + token_id, "key.revoke " + mia.access_key}));
  for (size_t i = 0; i < entries->size(); ++i) {
    const AuditEntry& e = entries->at(i);
    EXPECT_EQ(e.seq, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(e.time_ms, clock_.now_ms);
    EXPECT_EQ(e.actor, e.action == "key.revoke" ? "mia" : admin_.user_id) << e.action;
    EXPECT_EQ(e.access_key, e.action == "key.revoke" ? mia.access_key : admin_.access_key);
  }
  EXPECT_EQ(entries->at(3).detail, "max_tasks -1 → 7") << "what the update changed";
  EXPECT_EQ(entries->at(1).detail, "name mia, role member, projects p-1");
  EXPECT_EQ(entries->at(0).detail, "name p-1, max_gpu_milli -1, max_tasks -1, stop_grace_ms " +
                                       std::to_string(Project{}.stop_grace_ms) +
                                       ", max_storage_bytes -1");

  auto denied = log(mia);
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, ErrorCode::kPermissionDenied);
  auto by_target = log(admin_, AuditFilter{.after_seq = 0, .limit = 10, .actor = "", .target = "n1"});
  ASSERT_TRUE(by_target);
  EXPECT_EQ(by_target->size(), 2u);
  auto page = log(admin_, AuditFilter{.after_seq = 9, .limit = 1, .actor = "", .target = ""});
  ASSERT_TRUE(page);
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ(page->front().seq, 10);

  Reopen();
  ASSERT_TRUE(Await<NodeView>([&](Done<NodeView> d) { c_->SetCordon(admin_, "n1", false, d); }));
  auto after = log(admin_);
  ASSERT_TRUE(after);
  ASSERT_EQ(after->size(), entries->size() + 1) << "the log survives the restart";
  EXPECT_EQ(after->back().seq, static_cast<int64_t>(entries->size()) + 1);
  EXPECT_EQ(after->back().action, "node.uncordon");
}

TEST_F(ControllerTest, NoncesAreSingleUseAcrossRestarts) {
  const std::string ak = admin_.access_key;
  EXPECT_TRUE(c_->ConsumeNonce(ak, "n-1", clock_.now_ms, /*durable=*/true));
  auto again = c_->ConsumeNonce(ak, "n-1", clock_.now_ms, true);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kUnauthenticated);
  Reopen();
  EXPECT_FALSE(c_->ConsumeNonce(ak, "n-1", clock_.now_ms, true));
  EXPECT_TRUE(c_->ConsumeNonce(ak, "n-2", clock_.now_ms, true));
}

TEST_F(ControllerTest, AKeyPastItsBurstIsRefusedWithWhenToRetryAndItsNonceIsNotKept) {
  options_.key_rate_per_s = 4;  // a token every 250 ms
  options_.key_burst = 3;
  Reopen();
  const std::string ak = admin_.access_key;
  const int64_t start = clock_.now_ms;
  for (const char* nonce : {"n-1", "n-2", "n-3"}) {
    EXPECT_TRUE(c_->ConsumeNonce(ak, nonce, start, false)) << nonce;
  }
  Status refused = c_->ConsumeNonce(ak, "n-4", start, false);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(refused.error().retry_after_ms, 250);
  EXPECT_NE(refused.error().message.find("past its rate of 4 signed requests per second (bursts "
                                         "of 3)"),
            std::string::npos)
      << refused.error().message;
  // A replay is still told as such, whatever the rate.
  EXPECT_EQ(c_->ConsumeNonce(ak, "n-1", start, false).error().code, ErrorCode::kUnauthenticated);
  // Each key has its own bucket.
  Caller alice = Member("alice", "vision");
  EXPECT_TRUE(c_->ConsumeNonce(alice.access_key, "n-4", start, false));

  clock_.now_ms += 249;
  EXPECT_EQ(c_->ConsumeNonce(ak, "n-4", start, false).error().retry_after_ms, 1);
  clock_.now_ms += 1;
  EXPECT_TRUE(c_->ConsumeNonce(ak, "n-4", start, false))
      << "refused, so not kept: it may come again";
  EXPECT_FALSE(c_->ConsumeNonce(ak, "n-5", start, false));
  // A long pause refills the bucket to its burst, no more.
  clock_.now_ms += 60'000;
  for (const char* nonce : {"n-5", "n-6", "n-7"}) {
    EXPECT_TRUE(c_->ConsumeNonce(ak, nonce, clock_.now_ms, false)) << nonce;
  }
  EXPECT_FALSE(c_->ConsumeNonce(ak, "n-8", clock_.now_ms, false));
  EXPECT_NE(c_->MetricsText().find("gpupool_api_requests_throttled_total{reason=\"rate\"} 4\n"),
            std::string::npos);
}

TEST_F(ControllerTest, TheNonceCacheIsBoundedAndRefusesRatherThanForgets) {
  options_.key_rate_per_s = 0;  // no rate: one key fills the cache
  options_.max_nonces = 3;
  Reopen();
  const std::string ak = admin_.access_key;
  const int64_t t0 = clock_.now_ms;
  EXPECT_TRUE(c_->ConsumeNonce(ak, "n-1", t0, false));
  EXPECT_TRUE(c_->ConsumeNonce(ak, "n-2", t0 + 1000, false));
  EXPECT_TRUE(c_->ConsumeNonce(ak, "n-3", t0 + 2000, false));
  Status full = c_->ConsumeNonce(ak, "n-4", t0, false);
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, ErrorCode::kUnavailable);
  // n-1 leaves the window first: just past t0 + the window.
  EXPECT_EQ(full.error().retry_after_ms, options_.nonce_window_ms + 1);
  EXPECT_NE(full.error().message.find("holds the nonces of 3 signed requests"), std::string::npos)
      << full.error().message;
  // Nothing was forgotten to make room: every nonce kept is still refused as a replay.
  for (const char* nonce : {"n-1", "n-2", "n-3"}) {
    EXPECT_EQ(c_->ConsumeNonce(ak, nonce, t0, false).error().code, ErrorCode::kUnauthenticated);
  }
  // Once the oldest is out of the window (a request with it would be refused as stale), there
  // is room for one more.
  clock_.now_ms = t0 + options_.nonce_window_ms + 1;
  EXPECT_TRUE(c_->ConsumeNonce(ak, "n-4", clock_.now_ms, false));
  EXPECT_EQ(c_->ConsumeNonce(ak, "n-5", clock_.now_ms, false).error().code,
            ErrorCode::kUnavailable);
  EXPECT_NE(c_->MetricsText().find("gpupool_api_requests_throttled_total{reason=\"cache\"} 2\n"),
            std::string::npos);
}

TEST_F(ControllerTest, RevokedKeysStopWorking) {
  Caller alice = Member("alice", "vision");
  ASSERT_TRUE(c_->LookupKey(alice.access_key));
  auto revoked =
      Await<AccessKey>([&](Done<AccessKey> d) { c_->RevokeAccessKey(alice, alice.access_key, d); });
  ASSERT_TRUE(revoked);
  EXPECT_TRUE(revoked->sealed_secret.empty());
  auto lookup = c_->LookupKey(alice.access_key);
  ASSERT_FALSE(lookup);
  EXPECT_NE(lookup.error().message.find("revoked"), std::string::npos);
  Reopen();
  EXPECT_FALSE(c_->LookupKey(alice.access_key));
}

// Made with ssh-keygen (public halves only).
constexpr const char* kAliceKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO1FzrfO07qkSSTT6fTpOmTzTBmX7XUZITTGMy62m4lS";
constexpr const char* kBobKey =
    "ecdsa-sha2-nistp256 "
    "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBLLFdv6LuD50k222hCc2XU84LPms8kn465DVWhNlc"
    "Tpv+sD3Znn9WM5qFwcPhBxM2qgn5sG2VqxnufmWKsHf73w=";

TEST_F(ControllerTest, SshKeysAreTheirUsersOwnAndOutliveARestart) {
  Caller alice = Member("alice", "vision");
  Caller bob = Member("bob", "nlp");
  const auto add = [&](const Caller& who, const std::string& user, const std::string& name,
                       const std::string& key) {
    return Await<SshKey>([&](Done<SshKey> d) { c_->AddSshKey(who, user, name, key, d); });
  };
  auto added = add(alice, "alice", "", std::string(kAliceKey) + " alice@laptop\n");
  ASSERT_TRUE(added) << added.error().message;
  EXPECT_EQ(added->name, "alice-laptop") << "the comment names it";
  EXPECT_EQ(added->public_key, kAliceKey);
  // As ssh-keygen -lf prints it.
  EXPECT_EQ(added->fingerprint, "SHA256:k8flRrTgclSVM4w8vzimHe+94OexcAdZ9KhIQt8NVjI");

  auto twice = add(alice, "alice", "again", kAliceKey);
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().code, ErrorCode::kAlreadyExists);
  EXPECT_NE(twice.error().message.find("as 'alice-laptop'"), std::string::npos);
  auto taken = add(alice, "alice", "alice-laptop", kBobKey);
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code, ErrorCode::kAlreadyExists);
  auto bad = add(alice, "alice", "", "ssh-ed25519 nonsense");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  auto bad_name = add(alice, "alice", "a/b", kBobKey);
  ASSERT_FALSE(bad_name);
  EXPECT_NE(bad_name.error().message.find("name must be"), std::string::npos);

  // Bob can neither add to, read nor remove Alice's keys: she does not exist for him.
  EXPECT_EQ(add(bob, "alice", "", kBobKey).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(c_->ListSshKeys(bob, "alice").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(
      Await<SshKey>([&](Done<SshKey> d) { c_->RemoveSshKey(bob, "alice", "alice-laptop", d); })
          .error()
          .code,
      ErrorCode::kNotFound);
  ASSERT_TRUE(add(bob, "bob", "", kBobKey));
  EXPECT_EQ(c_->ListSshKeys(bob, "bob")->front().name, "key-1") << "no comment: key-N";

  // What logs into a task of project vision: its members' keys, and the caller's own.
  EXPECT_EQ(c_->SshKeysOfProject(alice, "vision"), std::vector<std::string>{kAliceKey});
  EXPECT_EQ(c_->SshKeysOfProject(bob, "vision"), (std::vector<std::string>{kBobKey, kAliceKey}));

  Reopen();
  auto kept = c_->ListSshKeys(admin_, "alice");
  ASSERT_TRUE(kept);
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_EQ(kept->front(), *added);
  auto removed =
      Await<SshKey>([&](Done<SshKey> d) { c_->RemoveSshKey(alice, "alice", "alice-laptop", d); });
  ASSERT_TRUE(removed);
  EXPECT_TRUE(c_->SshKeysOfProject(alice, "vision").empty());
  EXPECT_EQ(
      Await<SshKey>([&](Done<SshKey> d) { c_->RemoveSshKey(alice, "alice", "alice-laptop", d); })
          .error()
          .code,
      ErrorCode::kNotFound);
}

TEST_F(ControllerTest, AUserHasAtMostSoManySshKeys) {
  Caller alice = Member("alice", "vision");
  // Distinct ed25519 keys: 32 bytes that differ in their last one.
  std::string blob = std::string("\0\0\0\x0bssh-ed25519\0\0\0\x20", 19) + std::string(32, 'k');
  for (size_t i = 0; i <= kMaxSshKeysPerUser; ++i) {
    blob.back() = static_cast<char>(i);
    auto key = Await<SshKey>([&](Done<SshKey> d) {
      c_->AddSshKey(alice, "alice", "", "ssh-ed25519 " + Base64Encode(blob), d);
    });
    if (i < kMaxSshKeysPerUser) {
      ASSERT_TRUE(key) << i << ": " << key.error().message;
    } else {
      ASSERT_FALSE(key);
      EXPECT_EQ(key.error().code, ErrorCode::kResourceExhausted) << key.error().message;
    }
  }
}

TEST_F(ControllerTest, MetricsExposeQueueTasksAndAllocation) {
  AddNode("n1", 4);
  Submit(admin_, Gpus(1));
  Submit(admin_, Gpus(8));
  c_->SchedulePass();
  const std::string text = c_->MetricsText();
  EXPECT_NE(text.find("gpupool_queue_depth{project=\"default\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gpupool_tasks{project=\"default\",state=\"scheduled\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpupool_gpus_allocated{model=\"A100-80GB\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("gpupool_scheduler_cycle_seconds_count 1\n"), std::string::npos);
}

// Every gauge family CollectGauges fills: tasks by project and state, each node's status, per GPU
// model the GPUs of ready nodes allocated and free (a MIG task by its slices, not its GPU), what
// each bound task holds, and the queue per project with its longest wait.
TEST_F(ControllerTest, MetricsCountTasksNodesAndGpusByModel) {
  Reopen(/*node_timeout_ms=*/10'000);
  AddNode("n1", 4);
  AddNode("old", 2, "V100-32GB");
  Node mig = Node::Make("n3", 64'000, 512 * 1024, 1, "A100-80GB");
  mig.gpus[0].mig_enabled = true;
  ASSERT_TRUE(Await<NodeView>([&](Done<NodeView> d) { c_->RegisterNode(admin_, mig, d); }));
  clock_.now_ms += 15'000;
  ASSERT_TRUE(c_->Heartbeat(admin_, "n1", {}));
  ASSERT_TRUE(c_->Heartbeat(admin_, "n3", {}));
  c_->HousekeepingPass();  // "old" silent for 15 s > 10 s: lost, its GPUs no longer counted
  ASSERT_EQ(c_->GetNode(admin_, "old")->info.status, NodeStatus::kLost);
  TaskRequest slices = Gpus(0);
  slices.mig_profile = "3g.40gb";  // 3 of the A100's 7 compute slices: 428 milli-GPU
  const Task whole = Submit(admin_, Gpus(1));
  const Task sliced = Submit(admin_, slices);
  const int64_t queued_ms = clock_.now_ms;
  Submit(admin_, Gpus(8));  // fits nowhere
  clock_.now_ms += 1'000;
  Submit(admin_, Gpus(8));  // neither; it waits less long
  Member("bo", "p-other");
  ASSERT_EQ(c_->SchedulePass(), 2);
  const std::string text = c_->MetricsText();
  for (const std::string& line : std::vector<std::string>{
           "gpupool_tasks{project=\"default\",state=\"scheduled\"} 2\n",
           "gpupool_tasks{project=\"default\",state=\"pending\"} 2\n",
           "gpupool_node_status{node=\"n1\",status=\"ready\"} 1\n",
           "gpupool_node_status{node=\"n1\",status=\"lost\"} 0\n",
           "gpupool_node_status{node=\"old\",status=\"ready\"} 0\n",
           "gpupool_node_status{node=\"old\",status=\"lost\"} 1\n",
           "gpupool_gpus{model=\"A100-80GB\"} 5\n",
           "gpupool_gpus_allocated{model=\"A100-80GB\"} 1.428\n",
           "gpupool_task_gpus{project=\"default\",task=\"" + whole.id + "\",node=\"n1\"} 1\n",
           "gpupool_task_gpus{project=\"default\",task=\"" + sliced.id + "\",node=\"n3\"} 0.428\n",
           "gpupool_queue_depth{project=\"default\"} 2\n",
           "gpupool_queue_depth{project=\"p-other\"} 0\n",
           "gpupool_queue_oldest_task_timestamp_seconds{project=\"default\"} " +
               std::to_string(queued_ms / 1000) + "\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << " in\n" << text;
  }
  EXPECT_EQ(text.find("model=\"V100-32GB\""), std::string::npos) << "only ready nodes count";
  EXPECT_EQ(text.find("state=\"running\""), std::string::npos) << "no empty state is shown";
  EXPECT_EQ(text.find("oldest_task_timestamp_seconds{project=\"p-other\""), std::string::npos)
      << "a project with nothing waiting has no oldest task";
  EXPECT_EQ(text.find("gpupool_project_balance_micros{"), std::string::npos)
      << "billing is off: balances gate nothing and are not shown";
}

// With billing on, each project's balance and the usage billed to it.
TEST_F(ControllerTest, MetricsShowBalancesAndUsageWhileBillingIsOn) {
  BindMetered();  // 1 GPU at 1000 micros per GPU-second, 1,000,000 micros of credit
  clock_.now_ms += 60'000;
  c_->HousekeepingPass();  // bills 60 s
  const std::string text = c_->MetricsText();
  EXPECT_NE(text.find("gpupool_project_usage_micros_total{project=\"default\"} 60000\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpupool_project_balance_micros{project=\"default\"} 940000\n"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Held tasks: pending outside the queue until released.

// ---------------------------------------------------------------------------------------------
// Durable writes held back in the store.

TEST_F(ControllerTest, AnAnswerWaitsForItsDurableWriteAndComesFromTheStoreOutsideTheLock) {
  AddNode("n1", 4);
  const Task t = Submit(admin_, Gpus(1));
  store_->Hold();
  struct Seen {
    Result<Task> answer;
    std::thread::id thread;
    TaskState state_read_back;
  };
  std::promise<Seen> seen;
  c_->StopTask(admin_, t.id, /*discard=*/false, [&](Result<Task> r) {
    // A read of the controller from the callback: under the controller's lock this would
    // deadlock, as it did while MemoryStore called back from inside Write.
    const TaskState now = Get(t.id).state;
    seen.set_value(Seen{std::move(r), std::this_thread::get_id(), now});
  });
  std::future<Seen> answered = seen.get_future();
  const std::vector<store::WriteBatch> held = store_->AwaitHeld(1);
  ASSERT_EQ(held.size(), 1u);
  ASSERT_EQ(held[0].tasks.size(), 1u);
  EXPECT_EQ(held[0].tasks[0].state, TaskState::kStopped);
  EXPECT_EQ(Get(t.id).state, TaskState::kStopped) << "memory runs ahead of the disk";
  EXPECT_EQ(answered.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "not answered before it is durable";
  store_->Release();
  ASSERT_EQ(answered.wait_for(testing::kAnswerLimit), std::future_status::ready);
  const Seen got = answered.get();
  ASSERT_TRUE(got.answer) << got.answer.error().message;
  EXPECT_EQ(got.answer->state, TaskState::kStopped);
  EXPECT_NE(got.thread, std::this_thread::get_id()) << "called back by the store's thread";
  EXPECT_EQ(got.state_read_back, TaskState::kStopped);
}

// What a thread answered with, and which thread it was.
template <typename T>
struct Answer {
  std::promise<std::pair<Result<T>, std::thread::id>> promise;
  std::future<std::pair<Result<T>, std::thread::id>> future = promise.get_future();
  Done<T> Callback() {
    return [this](Result<T> r) { promise.set_value({std::move(r), std::this_thread::get_id()}); };
  }
};

TEST_F(ControllerTest, HistoryReadsWaitForTheWritesQueuedBeforeThemWithoutBlockingTheCaller) {
  AddNode("n1", 4);
  const Task t = Submit(admin_, Gpus(1));
  store_->Hold();
  Answer<Task> stop;
  c_->StopTask(admin_, t.id, /*discard=*/false, stop.Callback());
  Answer<std::vector<TaskEvent>> events;
  c_->TaskEvents(admin_, t.id, events.Callback());  // returns at once: the caller never waits
  ASSERT_EQ(store_->AwaitHeld(2).size(), 2u) << "the stop, and the reader's barrier behind it";
  EXPECT_EQ(events.future.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  store_->Release();
  ASSERT_EQ(stop.future.wait_for(testing::kAnswerLimit), std::future_status::ready);
  ASSERT_EQ(events.future.wait_for(testing::kAnswerLimit), std::future_status::ready);
  const std::thread::id store_thread = stop.future.get().second;
  auto [read, reader] = events.future.get();
  ASSERT_TRUE(read) << read.error().message;
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ(read->back().to, TaskState::kStopped) << "the events agree with memory";
  EXPECT_NE(reader, std::this_thread::get_id());
  EXPECT_NE(reader, store_thread) << "the store read ran on the blocking-work executor";
}

TEST_F(ControllerTest, AFullBlockingQueueRefusesHistoryReadsAndDeletionsBeforeAnythingChanges) {
  options_.blocking_threads = 1;
  options_.blocking_queue = 1;
  Reopen();
  AddNode("n1", 4);
  const Task t = Submit(admin_, Gpus(1));
  ASSERT_TRUE(Await<Task>([&](Done<Task> d) { c_->StopTask(admin_, t.id, /*discard=*/false, d); }));
  store_->Hold();
  Answer<std::vector<TaskEvent>> first;
  c_->TaskEvents(admin_, t.id, first.Callback());  // its place is reserved; its barrier held
  const Result<std::vector<TaskEvent>> second = Events(t.id);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(second.error().message.find("blocking-work queue is full"), std::string::npos);
  const Status deleted = AwaitStatus([&](DoneStatus d) { c_->DeleteTask(admin_, t.id, d); });
  ASSERT_FALSE(deleted);
  EXPECT_EQ(deleted.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(AwaitTask(*c_, admin_, t.id)) << "a refused deletion deleted nothing";
  store_->Release();
  ASSERT_EQ(first.future.wait_for(testing::kAnswerLimit), std::future_status::ready);
  EXPECT_TRUE(first.future.get().first) << "a reserved read is never refused later";
  EXPECT_TRUE(AwaitStatus([&](DoneStatus d) { c_->DeleteTask(admin_, t.id, d); }));
}

// Records on which thread the controller removes a task's files (the rest is never called).
class RemovalRecorder : public TaskFiles {
 public:
  Result<FileListing> List(const std::string&, const std::string&) override { return Unused(); }
  Result<FileChunk> Read(const std::string&, const std::string&, int64_t, int64_t) override {
    return Unused();
  }
  Result<int64_t> Received(const std::string&, const std::string&) override { return Unused(); }
  Result<int64_t> Append(const std::string&, const std::string&, int64_t, std::string_view,
                         std::optional<int64_t>, const StorageQuota&) override {
    return Unused();
  }
  Result<StoredFile> Commit(const std::string&, const std::string&, int64_t,
                            const std::string&) override {
    return Unused();
  }
  void Remove(const std::string& task_id) override {
    std::lock_guard lock(mu);
    removed.emplace_back(task_id, std::this_thread::get_id());
  }
  void Forget(const std::string&) override {}
  int64_t ProjectBytes(const std::string&) override { return 0; }
  FileLimits Limits() const override { return {}; }

  std::mutex mu;
  std::vector<std::pair<std::string, std::thread::id>> removed;

 private:
  static tl::unexpected<Error> Unused() { return MakeError(ErrorCode::kInternal, "unused"); }
};

TEST_F(ControllerTest, DeletionRemovesFilesAndOutputOnTheExecutorNotTheStoreThread) {
  RemovalRecorder files;
  options_.task_files = &files;
  options_.output_dir = ::testing::TempDir() + "/controller_test_output";
  Reopen();
  AddNode("n1", 4);
  const Task t = Submit(admin_, Gpus(1));
  Answer<Task> stop;
  c_->StopTask(admin_, t.id, /*discard=*/false, stop.Callback());
  ASSERT_EQ(stop.future.wait_for(testing::kAnswerLimit), std::future_status::ready);
  const std::thread::id store_thread = stop.future.get().second;
  ASSERT_TRUE(AwaitStatus([&](DoneStatus d) { c_->DeleteTask(admin_, t.id, d); }));
  std::lock_guard lock(files.mu);
  ASSERT_EQ(files.removed.size(), 1u) << "removed before the deletion is answered";
  EXPECT_EQ(files.removed[0].first, t.id);
  EXPECT_NE(files.removed[0].second, store_thread);
  EXPECT_NE(files.removed[0].second, std::this_thread::get_id());
  Shutdown();  // the controller goes before `files`
}

TEST_F(ControllerTest, AWriteHeldAtACrashIsLostAndWasNeverAnswered) {
  AddNode("n1", 4);
  const Task t = Submit(admin_, Gpus(1));
  store_->Hold();
  std::atomic<bool> answered{false};
  c_->StopTask(admin_, t.id, /*discard=*/false, [&](Result<Task>) { answered = true; });
  ASSERT_EQ(store_->AwaitHeld(1).size(), 1u);
  CrashAndReopen();
  EXPECT_FALSE(answered) << "a write that never became durable is never acknowledged";
  EXPECT_EQ(Get(t.id).state, TaskState::kPending) << "after the crash the stop never happened";
  EXPECT_EQ(c_->SchedulePass(), 1);
}

class HeldTaskTest : public ControllerTest {
 protected:
  Result<Task> SubmitHeld(const Caller& who, TaskRequest r) {
    TaskSpec spec;
    spec.request = std::move(r);
    spec.command = {"sh", "-c", "cat data/x"};
    spec.hold = true;
    return Await<Task>([&](Done<Task> d) { c_->SubmitTask(who, spec, std::move(d)); });
  }
  Result<Task> Release(const Caller& who, const std::string& id) {
    return Await<Task>([&](Done<Task> d) { c_->ReleaseTask(who, id, std::move(d)); });
  }
  static std::string HeldReason(const std::string& id) {
    return "held: release it with POST /v1/tasks/" + id + "/release (gpupool release " + id + ")";
  }
};

TEST_F(HeldTaskTest, IsNotScheduledWithFreeGpusUntilReleased) {
  AddNode("n1", 4);
  auto held = SubmitHeld(admin_, Gpus(1));
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_EQ(held->state, TaskState::kPending);
  EXPECT_TRUE(held->held);
  Task queued = Submit(admin_, Gpus(1));
  auto view = AwaitTask(*c_, admin_, held->id);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->queue_position, 0) << "a held task is not in the queue";
  EXPECT_EQ(view->pending_reason, HeldReason(held->id));
  EXPECT_TRUE(view->pending_nodes.empty());
  EXPECT_EQ(AwaitTask(*c_, admin_, queued.id)->queue_position, 1);

  EXPECT_EQ(c_->SchedulePass(), 1) << "only the queued task is placed";
  EXPECT_EQ(Get(queued.id).state, TaskState::kScheduled);
  EXPECT_EQ(Get(held->id).state, TaskState::kPending);
  EXPECT_EQ(AwaitTask(*c_, admin_, held->id)->pending_reason, HeldReason(held->id))
      << "a pass over every pending task leaves it alone too";

  auto released = Release(admin_, held->id);
  ASSERT_TRUE(released) << released.error().message;
  EXPECT_FALSE(released->held);
  EXPECT_EQ(released->state, TaskState::kPending);
  EXPECT_EQ(released->reason, "released by admin");
  view = AwaitTask(*c_, admin_, held->id);
  EXPECT_EQ(view->queue_position, 1);
  EXPECT_EQ(view->pending_reason, "waiting for the next scheduling pass");
  EXPECT_EQ(c_->SchedulePass(), 1);
  EXPECT_EQ(Get(held->id).state, TaskState::kScheduled);

  auto events = Events(held->id);
  ASSERT_TRUE(events);
  std::vector<std::string> reasons;
  for (const TaskEvent& e : *events) reasons.push_back(e.reason);
  ASSERT_EQ(reasons.size(), 3u);
  EXPECT_EQ(reasons[0], "submitted, " + HeldReason(held->id));
  EXPECT_EQ(reasons[1], "released by admin");
  EXPECT_EQ(events->at(1).from, TaskState::kPending);
  EXPECT_EQ(events->at(1).to, TaskState::kPending);
  EXPECT_EQ(events->at(2).to, TaskState::kScheduled);
}

TEST_F(HeldTaskTest, ReleaseWakesTheSchedulingLoop) {
  AddNode("n1", 4);
  const int64_t v1 = Await<NodeAssignments>([&](Done<NodeAssignments> d) {
                       c_->WatchAssignments(admin_, "n1", 0, 0, d);
                     })->version;
  auto held = SubmitHeld(admin_, Gpus(1));
  ASSERT_TRUE(held);
  c_->Start();
  auto promise = std::make_shared<std::promise<Result<NodeAssignments>>>();
  c_->WatchAssignments(admin_, "n1", v1, 10'000,
                       [promise](Result<NodeAssignments> a) { promise->set_value(std::move(a)); });
  auto change = promise->get_future();
  ASSERT_TRUE(Release(admin_, held->id));
  ASSERT_EQ(change.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "the release woke the loop, which placed the task";
  Result<NodeAssignments> placed = change.get();
  ASSERT_TRUE(placed);
  ASSERT_EQ(placed->tasks.size(), 1u);
  EXPECT_EQ(placed->tasks[0].id, held->id);
  c_->Stop();
}

TEST_F(HeldTaskTest, OnlyAHeldPendingTaskCanBeReleasedAndOnlyByItsProject) {
  AddNode("n1", 4);
  Caller alice = Member("alice", "vision");
  Caller bob = Member("bob", "speech");
  auto held = SubmitHeld(alice, Gpus(1));
  ASSERT_TRUE(held);
  auto outsider = Release(bob, held->id);
  ASSERT_FALSE(outsider);
  EXPECT_EQ(outsider.error().code, ErrorCode::kNotFound) << "never revealed to other projects";
  EXPECT_TRUE(Get(held->id).held);
  EXPECT_EQ(Release(admin_, "t-404").error().code, ErrorCode::kNotFound);

  ASSERT_TRUE(Release(alice, held->id));
  auto twice = Release(alice, held->id);
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(twice.error().message, "task " + held->id + " is not held: it is already in the queue");

  c_->SchedulePass();
  auto scheduled = Release(alice, held->id);
  ASSERT_FALSE(scheduled);
  EXPECT_EQ(scheduled.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(scheduled.error().message, "task " + held->id +
                                           " is scheduled, not held: only a held pending task "
                                           "can be released");
}

TEST_F(HeldTaskTest, StaysHeldAcrossARestart) {
  AddNode("n1", 4);
  auto held = SubmitHeld(admin_, Gpus(1));
  ASSERT_TRUE(held);
  Reopen();
  EXPECT_TRUE(Get(held->id).held);
  EXPECT_EQ(c_->SchedulePass(), 0) << "rebuilt out of the queue";
  EXPECT_EQ(AwaitTask(*c_, admin_, held->id)->queue_position, 0);
  EXPECT_EQ(AwaitTask(*c_, admin_, held->id)->pending_reason, HeldReason(held->id));
  ASSERT_TRUE(Release(admin_, held->id));
  Reopen();
  EXPECT_FALSE(Get(held->id).held) << "the release is durable";
  EXPECT_EQ(c_->SchedulePass(), 1);
  EXPECT_EQ(Get(held->id).state, TaskState::kScheduled);
}

TEST_F(HeldTaskTest, CountsTowardMaxTasksButHoldsNoGpu) {
  AddNode("n1", 1);
  Caller alice = Member("alice", "vision");
  Project q;
  q.id = "vision";
  q.max_tasks = 2;
  q.max_gpu_milli = 1000;
  ASSERT_TRUE(Await<Project>([&](Done<Project> d) { c_->UpdateProject(admin_, q, d); }));
  auto held = SubmitHeld(alice, Gpus(1));
  ASSERT_TRUE(held);
  Task queued = Submit(alice, Gpus(1));
  auto third = SubmitHeld(alice, Gpus(1));
  ASSERT_FALSE(third);
  EXPECT_EQ(third.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(third.error().message.find("has 2 active tasks, its quota max_tasks is 2"),
            std::string::npos)
      << third.error().message;
  EXPECT_EQ(c_->SchedulePass(), 1);
  EXPECT_EQ(Get(queued.id).state, TaskState::kScheduled)
      << "the held task takes neither the node's only GPU nor the project's GPU quota";
  EXPECT_EQ(c_->GetNode(admin_, "n1")->gpu_milli_free, 0);
}

TEST_F(HeldTaskTest, StoppingAHeldTaskEndsItAndItCanBeDeleted) {
  auto held = SubmitHeld(admin_, Gpus(1));
  ASSERT_TRUE(held);
  auto stopped =
      Await<Task>([&](Done<Task> d) { c_->StopTask(admin_, held->id, /*discard=*/false, d); });
  ASSERT_TRUE(stopped) << stopped.error().message;
  EXPECT_EQ(stopped->state, TaskState::kStopped);
  EXPECT_FALSE(stopped->held) << "an ended task is no longer held";
  auto release = Release(admin_, held->id);
  ASSERT_FALSE(release);
  EXPECT_EQ(release.error().message,
            "task " + held->id + " is stopped, not held: only a held pending task can be released");
  AddNode("n1", 4);
  EXPECT_EQ(c_->SchedulePass(), 0);
  EXPECT_TRUE(AwaitStatus([&](DoneStatus d) { c_->DeleteTask(admin_, held->id, d); }));
  Reopen();
  EXPECT_EQ(AwaitTask(*c_, admin_, held->id).error().code, ErrorCode::kNotFound);
}

// What a caller sends that the store would refuse (its validation, store::ValidateBatch) is
// answered with why before memory changes: the server keeps running, memory shows nothing of it,
// nothing reaches the store, and a restart from the disk shows the same.
TEST_F(ControllerTest, AWriteTheStoreWouldRefuseIsAnsweredWithWhyAndChangesNothing) {
  User dave;
  dave.id = "dave";
  ASSERT_TRUE(Await<User>([&](Done<User> d) { c_->CreateUser(admin_, dave, d); }));
  const size_t applied = store_->applied();
  auto expect_refused = [](const auto& result, const std::string& why) {
    ASSERT_FALSE(result);
    EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(result.error().message.find(why), std::string::npos) << result.error().message;
  };
  User carol;
  carol.id = "carol";
  carol.role = static_cast<Role>(7);
  expect_refused(Await<User>([&](Done<User> d) { c_->CreateUser(admin_, carol, d); }),
                 "user 'carol': role 7 is not a role");
  dave.role = static_cast<Role>(9);
  expect_refused(Await<User>([&](Done<User> d) { c_->UpdateUser(admin_, dave, d); }),
                 "user 'dave': role 9 is not a role");
  TaskSpec spec;
  spec.command = {"python3", "\xff.py"};
  expect_refused(Await<Task>([&](Done<Task> d) { c_->SubmitTask(admin_, spec, d); }),
                 "command is not valid utf-8");
  Node n = Node::Make("n1", 64'000, 512 * 1024, 1, "A100-80GB");
  n.labels["zone"] = "\xc3";
  expect_refused(Await<NodeView>([&](Done<NodeView> d) { c_->RegisterNode(admin_, n, d); }),
                 "node 'n1': label value is not valid utf-8");

  auto users = c_->ListUsers(admin_);
  ASSERT_EQ(users->size(), 2u) << "the bootstrap admin and dave";
  EXPECT_EQ(users->at(1).id, "dave");
  EXPECT_EQ(users->at(1).role, Role::kMember);
  EXPECT_TRUE(AwaitList(*c_, admin_, TaskFilter{})->tasks.empty());
  EXPECT_TRUE(c_->ListNodes(admin_).empty());
  EXPECT_EQ(store_->applied(), applied) << "nothing was written";
  EXPECT_EQ(Submit(admin_, Gpus(0)).id, "t-1") << "the refused submission took no id";
  Reopen();
  EXPECT_EQ(c_->ListUsers(admin_)->at(1).role, Role::kMember);
  EXPECT_EQ(AwaitList(*c_, admin_, TaskFilter{})->tasks.size(), 1u);
  EXPECT_TRUE(c_->ListNodes(admin_).empty());
}

}  // namespace
}  // namespace gpupool::server
