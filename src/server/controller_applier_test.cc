// The plan applier's order and quota counting: a group's own re-checks (the project's GPU quota,
// ClusterState::Bind) come before any victim is preempted, so that a refused preemptor leaves its
// victims running where they were; and the queue's quota pre-filter counts a MIG task by its
// slice share as the applier does; a planned move (sched::Move) is carried out only while its
// task still runs where the plan found it and is snapshotted on stop. Plans are made on a copy of
// the live cluster, then the live state changes (as it may while ScheduleOnce runs without the
// lock), then the plan is applied.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "sched/schedule.h"
#include "server/controller.h"
#include "server/controller_testing.h"

namespace gpupool::server {

using testing::Await;
using testing::AwaitTask;

// Befriended by Controller: drives the applier with a plan made before the state changed.
class PlanApplierTest : public testing::ControllerFixture {
 protected:
  PlanApplierTest() { options_.node_timeout_ms = int64_t{365} * 24 * 3600 * 1000; }

  void AddNode(const std::string& name, int gpus, bool mig = false) {
    Node n = Node::Make(name, 64'000, 512 * 1024, gpus, "A100-80GB");
    for (Gpu& g : n.gpus) g.mig_enabled = mig;
    ASSERT_TRUE(Await<NodeView>([&](Done<NodeView> d) { c_->RegisterNode(admin_, n, d); }));
  }

  Task Submit(const Caller& who, TaskRequest r, const std::string& project) {
    TaskSpec spec;
    spec.project_id = project;
    spec.request = std::move(r);
    spec.command = {"python3", "train.py"};
    spec.restartable = true;
    auto t = Await<Task>([&](Done<Task> d) { c_->SubmitTask(who, spec, d); });
    EXPECT_TRUE(t) << t.error().message;
    return t.value_or(Task{});
  }

  static TaskRequest Gpus(int n, int priority) {
    TaskRequest r;
    r.cpu_milli = 1000;
    r.memory_mib = 1024;
    r.gpu_count = n;
    r.priority = priority;
    return r;
  }

  void SetQuota(const std::string& project, int64_t max_gpu_milli) {
    Project p = *c_->GetProject(admin_, project);
    p.max_gpu_milli = max_gpu_milli;
    ASSERT_TRUE(Await<Project>([&](Done<Project> d) { c_->UpdateProject(admin_, p, d); }));
  }

  // What a pass would plan for `ids` on the cluster as it is now (the live state is untouched).
  sched::Plan PlanFor(const std::vector<std::string>& ids) {
    std::lock_guard lock(c_->mu_);
    std::vector<sched::QueuedTask> queue;
    for (const std::string& id : ids) queue.push_back({id, c_->FindTask(id)->request});
    sched::ClusterState copy = c_->cluster_;
    return sched::ScheduleOnce(copy, queue, *c_->policy_);
  }

  // Applies `plan` to the live state as a pass does; returns how many tasks it placed.
  int Apply(const sched::Plan& plan) {
    std::lock_guard lock(c_->mu_);
    store::WriteBatch batch;
    const int placed = c_->ApplyPlan(plan, {}, clock_.now_ms, batch);
    if (!batch.Empty()) c_->Commit(std::move(batch), [](Status) {});
    return placed;
  }

  // A binding made behind the plan's back (another pass's, say): it takes `cpu_milli` on node 0.
  void TakeCpu(const std::string& id, int64_t cpu_milli) {
    std::lock_guard lock(c_->mu_);
    TaskRequest r;
    r.cpu_milli = cpu_milli;
    sched::Placement p;
    p.node = 0;
    ASSERT_TRUE(c_->cluster_.Bind(id, r, p));
  }

  bool Bound(const std::string& id) {
    std::lock_guard lock(c_->mu_);
    return c_->cluster_.FindBinding(id) != nullptr;
  }

  // gpupool_scheduler_stale_total: groups the applier refused.
  double StalePlans() {
    const std::string text = c_->MetricsText();
    const std::string name = "\ngpupool_scheduler_stale_total ";
    const size_t at = text.find(name);
    return at == std::string::npos ? 0 : std::stod(text.substr(at + name.size()));
  }

  Task Get(const std::string& id) { return AwaitTask(*c_, admin_, id)->task; }

  bool EverPreempted(const std::string& id) {
    auto events = Await<std::vector<TaskEvent>>(
        [&](Done<std::vector<TaskEvent>> d) { c_->TaskEvents(admin_, id, std::move(d)); });
    EXPECT_TRUE(events) << events.error().message;
    for (const TaskEvent& e : events.value_or(std::vector<TaskEvent>{})) {
      if (e.to == TaskState::kPreempted) return true;
    }
    return false;
  }

  // A 4-GPU node (64 CPUs) with a low-priority 4-GPU task of project "batch" on it (1 CPU), and
  // a high-priority 4-GPU task of project "vision" (2 CPUs) planned to preempt it.
  void SetUpPreemption() {
    AddNode("n1", 4);
    alice_ = testing::MakeMember(*c_, admin_, "alice", "vision");
    bob_ = testing::MakeMember(*c_, admin_, "bob", "batch");
    low_ = Submit(bob_, Gpus(4, 0), "batch");
    ASSERT_EQ(c_->SchedulePass(), 1);
    TaskRequest high = Gpus(4, 10);
    high.cpu_milli = 2000;  // the victim frees 1000 of it
    high_ = Submit(alice_, high, "vision");
    plan_ = PlanFor({high_.id});
    ASSERT_EQ(plan_.assignments.size(), 1u);
    ASSERT_EQ(plan_.assignments[0].preempted, std::vector<std::string>{low_.id});
  }

  Caller alice_;
  Caller bob_;
  Task low_;
  Task high_;
  sched::Plan plan_;
};

TEST_F(PlanApplierTest, APreemptorRefusedByQuotaLeavesItsVictimRunning) {
  SetUpPreemption();
  SetQuota("vision", 2000);  // lowered while the plan was made
  EXPECT_EQ(Apply(plan_), 0);
  EXPECT_EQ(Get(low_.id).state, TaskState::kScheduled);
  EXPECT_TRUE(Bound(low_.id)) << "the victim keeps its GPUs";
  EXPECT_FALSE(EverPreempted(low_.id));
  EXPECT_EQ(Get(high_.id).state, TaskState::kPending);
  EXPECT_FALSE(Bound(high_.id));
  EXPECT_NE(AwaitTask(*c_, alice_, high_.id)
                ->pending_reason.find("project vision quota max_gpu_milli 2000 would be exceeded"),
            std::string::npos)
      << AwaitTask(*c_, alice_, high_.id)->pending_reason;
}

TEST_F(PlanApplierTest, APreemptorWhoseBindFailsLeavesItsVictimBoundWhereItWas) {
  SetUpPreemption();
  TakeCpu("other", 62'500);  // 500 CPU milli left: with the victim's 1000, short of 2000
  EXPECT_EQ(Apply(plan_), 0);
  EXPECT_EQ(Get(low_.id).state, TaskState::kScheduled);
  EXPECT_TRUE(Bound(low_.id));
  EXPECT_FALSE(EverPreempted(low_.id));
  EXPECT_EQ(Get(high_.id).state, TaskState::kPending);
  EXPECT_NE(AwaitTask(*c_, alice_, high_.id)->pending_reason.find("the plan was stale"),
            std::string::npos);
  EXPECT_EQ(StalePlans(), 1);
}

TEST_F(PlanApplierTest, AnAcceptedPreemptorPreemptsItsVictimAndTakesItsGpus) {
  SetUpPreemption();
  EXPECT_EQ(Apply(plan_), 1);
  EXPECT_EQ(Get(high_.id).state, TaskState::kScheduled);
  EXPECT_TRUE(Bound(high_.id));
  EXPECT_EQ(Get(low_.id).state, TaskState::kPending);
  EXPECT_FALSE(Bound(low_.id));
  EXPECT_TRUE(EverPreempted(low_.id));
}

TEST_F(PlanApplierTest, AVictimOfTheSameProjectFreesItsQuotaForThePreemptor) {
  AddNode("n1", 4);
  Caller alice = testing::MakeMember(*c_, admin_, "alice", "vision");
  SetQuota("vision", 4000);
  Task low = Submit(alice, Gpus(4, 0), "vision");
  ASSERT_EQ(c_->SchedulePass(), 1);
  Task high = Submit(alice, Gpus(4, 10), "vision");
  const sched::Plan plan = PlanFor({high.id});
  ASSERT_EQ(plan.assignments.size(), 1u);
  EXPECT_EQ(Apply(plan), 1) << "4000 in use, less the victim's 4000, plus 4000 fits 4000";
  EXPECT_EQ(Get(high.id).state, TaskState::kScheduled);
  EXPECT_EQ(Get(low.id).state, TaskState::kPending);
}

// Before the pre-filter counted MIG tasks by their share, it counted them as 0: the plan placed
// both, the applier refused the second as stale and asked for a retry, every pass.
TEST_F(PlanApplierTest, TheQuotaPreFilterCountsAMigTaskByItsSliceShareAsTheApplierDoes) {
  AddNode("n1", 1, /*mig=*/true);
  Caller alice = testing::MakeMember(*c_, admin_, "alice", "vision");
  SetQuota("vision", 500);
  TaskRequest r;
  r.cpu_milli = 1000;
  r.memory_mib = 1024;
  r.mig_profile = "3g.40gb";  // 3 of the A100's 7 compute slices: 428 milli-GPU
  Task first = Submit(alice, r, "vision");
  Task second = Submit(alice, r, "vision");
  EXPECT_EQ(c_->SchedulePass(), 1);
  EXPECT_EQ(Get(first.id).state, TaskState::kScheduled);
  EXPECT_EQ(Get(second.id).state, TaskState::kPending);
  const std::string reason = AwaitTask(*c_, alice, second.id)->pending_reason;
  EXPECT_NE(
      reason.find("quota: 428 of 500 milli-GPU in use or placed ahead of it, the task needs 428"),
      std::string::npos)
      << reason;
  EXPECT_EQ(StalePlans(), 0) << "the applier refused nothing the pre-filter let through";
  // A project quota too small for one instance refuses it at submission, by the same count.
  SetQuota("vision", 400);
  TaskSpec spec;
  spec.project_id = "vision";
  spec.request = r;
  spec.command = {"true"};
  auto refused = Await<Task>([&](Done<Task> d) { c_->SubmitTask(alice, spec, d); });
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("asks for 428 milli-GPU"), std::string::npos)
      << refused.error().message;
}

// A plan that moves a running 1-GPU task from n1 to n2 to place a 2-GPU task on n1: refused while
// the task to move is not snapshotted on stop (this controller keeps no chunks), and once it no
// longer runs there. Nothing moves; the waiting task says why.
TEST_F(PlanApplierTest, AMoveIsCarriedOutOnlyForATaskThatStillRunsWhereThePlanFoundIt) {
  AddNode("n1", 2);
  const Task mover = Submit(admin_, Gpus(1, 0), "default");
  ASSERT_EQ(c_->SchedulePass(), 1);
  ASSERT_EQ(Get(mover.id).placement->node, "n1");
  ASSERT_TRUE(Await<Task>([&](Done<Task> d) {
    c_->ReportTask(admin_, mover.id, TaskState::kRunning, 0, 0, "", 0, std::move(d));
  }));
  AddNode("n2", 1);
  const Task waiting = Submit(admin_, Gpus(2, 0), "default");
  sched::Plan plan;
  sched::Placement here;
  here.node = 0;
  here.gpus = {0, 1};
  sched::Placement there;
  there.node = 1;
  there.gpus = {0};
  plan.assignments.push_back(sched::Assignment{waiting.id, here, {}, {mover.id}});
  plan.moves.push_back(sched::Move{mover.id, 0, there, waiting.id, "planned"});
  auto reason = [&] { return AwaitTask(*c_, admin_, waiting.id)->pending_reason; };

  EXPECT_EQ(Apply(plan), 0);
  EXPECT_EQ(reason(), "task " + mover.id + " is not snapshotted when it stops: it cannot move");
  EXPECT_EQ(Get(mover.id).state, TaskState::kRunning);
  EXPECT_TRUE(Bound(mover.id)) << "it keeps its GPU";
  EXPECT_EQ(Get(waiting.id).state, TaskState::kPending);
  EXPECT_FALSE(Bound(waiting.id));
  EXPECT_EQ(StalePlans(), 1);

  ASSERT_TRUE(
      Await<Task>([&](Done<Task> d) { c_->StopTask(admin_, mover.id, true, std::move(d)); }));
  EXPECT_EQ(Apply(plan), 0);
  EXPECT_EQ(reason(), "task " + mover.id + ", to be moved, no longer runs on node n1");
  EXPECT_EQ(Get(mover.id).state, TaskState::kStopped);
  EXPECT_EQ(Get(waiting.id).state, TaskState::kPending);
}

}  // namespace gpupool::server
