// Unit tests of the replay's event loop on tiny in-code clusters: queueing and start on a
// departure at the exact simulated time, queue order, preemption and re-queue, rejection of
// tasks that fit nowhere, distributed jobs (started whole, sent back whole, kept in one rack),
// the fast path against whole-queue passes, the report arithmetic, the synthetic job mix, and
// snapshots and moves (work kept, victims by the work they lose, an 8-GPU task let in).
#include "sim/replay.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "sim/job_mix.h"

namespace gpupool::sim {
namespace {

Node GpuNode(const std::string& name, int gpus, const std::string& model = "G2") {
  return Node::Make(name, 64000, 262144, gpus, model);
}

ReplayTask Whole(const std::string& name, int gpus, int64_t arrival_s, int64_t runtime_s,
                 int priority = 0) {
  ReplayTask t;
  t.name = name;
  t.request.cpu_milli = 1000;
  t.request.memory_mib = 1024;
  t.request.gpu_count = gpus;
  t.request.priority = priority;
  t.arrival_s = arrival_s;
  t.runtime_s = runtime_s;
  return t;
}

ReplayResult MustRun(const std::vector<Node>& nodes, const std::vector<ReplayTask>& tasks,
                     ReplayConfig config = {}) {
  if (config.policy == "default") config.policy = "best-fit";
  auto r = RunReplay(nodes, tasks, config);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return r ? *r : ReplayResult{};
}

const TaskRecord& Rec(const ReplayResult& r, const std::vector<ReplayTask>& tasks,
                      const std::string& name) {
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].name == name) return r.per_task.at(i);
  }
  static const TaskRecord kNone;
  ADD_FAILURE() << "no task " << name;
  return kNone;
}

// The members <id>-0 .. <id>-<members − 1> of distributed job `id`, each `gpus` whole GPUs.
std::vector<ReplayTask> Job(const std::string& id, int members, int gpus, int64_t arrival_s,
                            int64_t runtime_s, int members_per_node = 1, int priority = 0) {
  std::vector<ReplayTask> out;
  for (int m = 0; m < members; ++m) {
    ReplayTask t = Whole(id + "-" + std::to_string(m), gpus, arrival_s, runtime_s, priority);
    t.request.gang_id = id;
    t.request.gang_size = members;
    t.request.members_per_node = members_per_node;
    out.push_back(std::move(t));
  }
  return out;
}

void Append(std::vector<ReplayTask>& to, const std::vector<ReplayTask>& more) {
  to.insert(to.end(), more.begin(), more.end());
}

TEST(Replay, QueuesWhenFullAndStartsAtTheExactDepartureTime) {
  // One GPU. a holds it over [0, 100); b arrives at 10, waits, starts when a leaves at 100.
  const std::vector<Node> nodes = {GpuNode("n0", 1)};
  const std::vector<ReplayTask> tasks = {Whole("a", 1, 0, 100), Whole("b", 1, 10, 50)};
  const ReplayResult r = MustRun(nodes, tasks);
  EXPECT_EQ(Rec(r, tasks, "a").first_start_s, 0);
  EXPECT_EQ(Rec(r, tasks, "a").end_s, 100);
  EXPECT_EQ(Rec(r, tasks, "b").first_start_s, 100);
  EXPECT_EQ(Rec(r, tasks, "b").end_s, 150);  // its runtime counts from its start
  EXPECT_EQ(r.completed, 2);
  // Delays {0, 90}: mean 45; p50 = 1st of 2 (⌈0.5·2⌉) = 0; p99 = 2nd (⌈1.98⌉) = 90.
  EXPECT_DOUBLE_EQ(r.delay.mean_s, 45.0);
  EXPECT_EQ(r.delay.p50_s, 0);
  EXPECT_EQ(r.delay.p99_s, 90);
  EXPECT_EQ(r.delay.max_s, 90);
  EXPECT_EQ(r.makespan_s, 150);
}

TEST(Replay, DepartureIsProcessedBeforeAnArrivalAtTheSameInstant) {
  const std::vector<Node> nodes = {GpuNode("n0", 1)};
  const std::vector<ReplayTask> tasks = {Whole("a", 1, 0, 100), Whole("b", 1, 100, 5)};
  const ReplayResult r = MustRun(nodes, tasks);
  EXPECT_EQ(Rec(r, tasks, "b").first_start_s, 100);
  EXPECT_EQ(r.delay.max_s, 0);
}

TEST(Replay, RetriesOnlyWhatMayFitAndMatchesWholeQueuePasses) {
  // a holds the only GPU over [0, 100); b, c, d (one GPU, 10 s each) arrive at 10, 20, 30.
  // Fast path: each arrival is offered once (4 tries up to t=30); at 100 b is offered and
  // starts, and c and d are skipped (the released GPU is b's now); at 110 c, at 120 d: 7 tries.
  // Whole-queue passes: 1 + 1 + 2 + 3 (t=0..30) + 3 + 2 + 1 (t=100..120) = 13 tries.
  const std::vector<Node> nodes = {GpuNode("n0", 1)};
  const std::vector<ReplayTask> tasks = {Whole("a", 1, 0, 100), Whole("b", 1, 10, 10),
                                         Whole("c", 1, 20, 10), Whole("d", 1, 30, 10)};
  const ReplayResult fast = MustRun(nodes, tasks);
  ReplayConfig full_config;
  full_config.full_passes = true;
  const ReplayResult full = MustRun(nodes, tasks, full_config);
  EXPECT_EQ(fast.tries, 7);
  EXPECT_EQ(full.tries, 13);
  // No pass at 130 (d leaves, nobody waits): passes at 0, 10, 20, 30, 100, 110, 120.
  EXPECT_EQ(fast.passes, 7);
  EXPECT_EQ(ReplayTasksText(tasks, fast), ReplayTasksText(tasks, full));
  EXPECT_EQ(Rec(fast, tasks, "b").first_start_s, 100);
  EXPECT_EQ(Rec(fast, tasks, "c").first_start_s, 110);
  EXPECT_EQ(Rec(fast, tasks, "d").first_start_s, 120);
}

TEST(Replay, PendingQueueIsOrderedByPriorityThenArrivalThenName) {
  // Preemption off, so priority only orders the queue. All wait for the holder to leave at 100,
  // then run 10 s each, one after the other, in queue order.
  const std::vector<Node> nodes = {GpuNode("n0", 1)};
  const std::vector<ReplayTask> tasks = {
      Whole("holder", 1, 0, 100),  Whole("z-low", 1, 5, 10, 0),  Whole("a-late", 1, 7, 10, 0),
      Whole("mid", 1, 20, 10, 10), Whole("y-hi", 1, 30, 10, 50), Whole("b-hi", 1, 30, 10, 50),
  };
  ReplayConfig config;
  config.allow_preemption = false;
  const ReplayResult r = MustRun(nodes, tasks, config);
  EXPECT_EQ(Rec(r, tasks, "b-hi").first_start_s, 100);  // priority 50, name b < y
  EXPECT_EQ(Rec(r, tasks, "y-hi").first_start_s, 110);
  EXPECT_EQ(Rec(r, tasks, "mid").first_start_s, 120);     // priority 10
  EXPECT_EQ(Rec(r, tasks, "z-low").first_start_s, 130);   // priority 0, arrived at 5
  EXPECT_EQ(Rec(r, tasks, "a-late").first_start_s, 140);  // priority 0, arrived at 7
  EXPECT_EQ(r.preemptions, 0);
}

TEST(Replay, PreemptsALowerPriorityTaskThatRestartsFromScratchAtItsQueuePosition) {
  // low (0) runs from 0; high (100) arrives at 10 and evicts it. low goes back to the queue ahead
  // of other (0, arrived at 5) because it arrived first, restarts when high leaves at 30 and
  // runs its whole 100 s again: ends at 130 (its stale end at 100 is ignored). other: 130..140.
  const std::vector<Node> nodes = {GpuNode("n0", 1)};
  const std::vector<ReplayTask> tasks = {Whole("low", 1, 0, 100, 0), Whole("other", 1, 5, 10, 0),
                                         Whole("high", 1, 10, 20, 100)};
  const ReplayResult r = MustRun(nodes, tasks);
  EXPECT_EQ(Rec(r, tasks, "high").first_start_s, 10);
  EXPECT_EQ(Rec(r, tasks, "high").end_s, 30);
  const TaskRecord& low = Rec(r, tasks, "low");
  EXPECT_EQ(low.first_start_s, 0);
  EXPECT_EQ(low.start_s, 30);
  EXPECT_EQ(low.end_s, 130);
  EXPECT_EQ(low.preemptions, 1);
  EXPECT_EQ(Rec(r, tasks, "other").first_start_s, 130);
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_EQ(r.completed, 3);

  // Without preemption high waits for low instead.
  ReplayConfig config;
  config.allow_preemption = false;
  const ReplayResult no = MustRun(nodes, tasks, config);
  EXPECT_EQ(Rec(no, tasks, "high").first_start_s, 100);
  EXPECT_EQ(no.preemptions, 0);
}

TEST(Replay, AWaitingTaskIsRetriedWhenADepartureMakesPreemptionPossible) {
  // n0 has 2 GPUs: peer (100) and low (0) hold one each. high (100) needs both: at 10 evicting
  // low is not enough (peer stays), so it waits. When peer leaves at 50 the node still has no
  // room, but evicting low now suffices: high starts at 50, low restarts at 60 (1000 s again).
  const std::vector<Node> nodes = {GpuNode("n0", 2)};
  const std::vector<ReplayTask> tasks = {Whole("peer", 1, 0, 50, 100), Whole("low", 1, 0, 1000, 0),
                                         Whole("high", 2, 10, 10, 100)};
  const ReplayResult r = MustRun(nodes, tasks);
  EXPECT_EQ(Rec(r, tasks, "high").first_start_s, 50);
  EXPECT_EQ(Rec(r, tasks, "low").preemptions, 1);
  EXPECT_EQ(Rec(r, tasks, "low").start_s, 60);
  EXPECT_EQ(Rec(r, tasks, "low").end_s, 1060);
  ReplayConfig full;
  full.full_passes = true;
  EXPECT_EQ(ReplayTasksText(tasks, r), ReplayTasksText(tasks, MustRun(nodes, tasks, full)));
}

TEST(Replay, AVictimMayEvictInTurnAtTheSameInstant) {
  // t=0 low (0) takes n0 (G2); t=1 mid (100) takes n1 (G3); t=2 high (200), which only runs on
  // G3, evicts mid; in the next pass of the same instant mid evicts low from n0. high leaves at
  // 12 and low restarts on n1.
  const std::vector<Node> nodes = {GpuNode("n0", 1, "G2"), GpuNode("n1", 1, "G3")};
  std::vector<ReplayTask> tasks = {Whole("low", 1, 0, 1000, 0), Whole("mid", 1, 1, 1000, 100),
                                   Whole("high", 1, 2, 10, 200)};
  tasks[2].request.gpu_models = {"G3"};
  const ReplayResult r = MustRun(nodes, tasks);
  EXPECT_EQ(r.preemptions, 2);
  EXPECT_EQ(Rec(r, tasks, "mid").first_start_s, 1);
  EXPECT_EQ(Rec(r, tasks, "mid").start_s, 2);
  EXPECT_EQ(Rec(r, tasks, "mid").node, 0);
  EXPECT_EQ(Rec(r, tasks, "low").start_s, 12);
  EXPECT_EQ(Rec(r, tasks, "low").node, 1);
  EXPECT_EQ(Rec(r, tasks, "low").end_s, 1012);
}

TEST(Replay, RejectsAtOnceATaskThatFitsNoNodeOfTheEmptyCluster) {
  const std::vector<Node> nodes = {GpuNode("n0", 2, "G2")};
  std::vector<ReplayTask> tasks = {Whole("too-big", 4, 0, 10), Whole("wrong-model", 1, 0, 10),
                                   Whole("fine", 2, 1, 10)};
  tasks[1].request.gpu_models = {"G3"};
  const ReplayResult r = MustRun(nodes, tasks);
  EXPECT_EQ(r.rejected, 2);
  EXPECT_EQ(r.never_started, 0);
  EXPECT_EQ(r.completed, 1);
  EXPECT_EQ(Rec(r, tasks, "too-big").outcome, TaskOutcome::kRejected);
  EXPECT_EQ(Rec(r, tasks, "too-big").first_start_s, -1);
  EXPECT_EQ(Rec(r, tasks, "wrong-model").outcome, TaskOutcome::kRejected);
  EXPECT_EQ(Rec(r, tasks, "fine").first_start_s, 1);
  EXPECT_EQ(r.delay.count, 1);  // rejected tasks are not in the delay statistics
}

TEST(Replay, ATaskStillWaitingWhenNoEventIsLeftCountsAsNeverStarted) {
  // A gang of two with one member only: ScheduleOnce keeps it waiting for the other.
  const std::vector<Node> nodes = {GpuNode("n0", 2)};
  std::vector<ReplayTask> tasks = {Whole("lonely", 1, 0, 10), Whole("solo", 1, 0, 10)};
  tasks[0].request.gang_id = "g";
  tasks[0].request.gang_size = 2;
  const ReplayResult r = MustRun(nodes, tasks);
  EXPECT_EQ(r.never_started, 1);
  EXPECT_EQ(r.completed, 1);
  EXPECT_EQ(Rec(r, tasks, "lonely").outcome, TaskOutcome::kNeverStarted);
  // A job short of members is not rejected: it waits for them to the end.
  EXPECT_EQ(r.jobs, 1);
  EXPECT_EQ(r.jobs_pending, 1);
  EXPECT_EQ(r.jobs_never_started, 1);
  EXPECT_EQ(r.jobs_rejected, 0);
  EXPECT_EQ(r.job_wait.count, 0);
}

TEST(ReplayJobs, MembersStartAtTheSameSecondOnDistinctNodesOnceAllFit) {
  // Three nodes of 4 GPUs; hold takes n0 over [0, 100). Job j (3 members × 2 GPUs, one per node)
  // arrives at 10: n1 and n2 could take two members but not the third, so none starts; at 100
  // all three start, one per node, and leave together at 150.
  const std::vector<Node> nodes = {GpuNode("n0", 4), GpuNode("n1", 4), GpuNode("n2", 4)};
  std::vector<ReplayTask> tasks = {Whole("hold", 4, 0, 100)};
  Append(tasks, Job("j", 3, 2, 10, 50));
  const ReplayResult r = MustRun(nodes, tasks);
  std::set<int> on;
  for (const char* m : {"j-0", "j-1", "j-2"}) {
    EXPECT_EQ(Rec(r, tasks, m).first_start_s, 100) << m;
    EXPECT_EQ(Rec(r, tasks, m).end_s, 150) << m;
    EXPECT_EQ(Rec(r, tasks, m).outcome, TaskOutcome::kCompleted) << m;
    on.insert(Rec(r, tasks, m).node);
  }
  EXPECT_EQ(on.size(), 3u);
  EXPECT_EQ(r.jobs, 1);
  EXPECT_EQ(r.job_members, 3);
  EXPECT_EQ(r.jobs_completed, 1);
  EXPECT_EQ(r.jobs_pending, 0);
  EXPECT_EQ(r.job_wait.count, 1);
  EXPECT_EQ(r.job_wait.max_s, 90);
  EXPECT_EQ(r.tasks, 4);  // the members are tasks too
  EXPECT_EQ(r.delay.count, 4);
  ReplayConfig full;
  full.full_passes = true;
  EXPECT_EQ(ReplayTasksText(tasks, r), ReplayTasksText(tasks, MustRun(nodes, tasks, full)));

  // Any number of members per node: n1 takes two, n2 the third, on arrival.
  for (ReplayTask& t : tasks) t.request.members_per_node = 0;
  const ReplayResult any = MustRun(nodes, tasks);
  std::set<int> any_on;
  for (const char* m : {"j-0", "j-1", "j-2"}) {
    EXPECT_EQ(Rec(any, tasks, m).first_start_s, 10) << m;
    any_on.insert(Rec(any, tasks, m).node);
  }
  EXPECT_EQ(any_on, (std::set<int>{1, 2}));
}

TEST(ReplayJobs, AJobThatCannotFitWaitsWholeAndOneThatNeverCanIsRejected) {
  // Two nodes of 2 GPUs; hold takes one GPU of n0 over [0, 100). Job w (2 members × 2 GPUs)
  // arrives at 5: n1 could take one member but n0 not the other, so both wait (n1 stays idle)
  // and start together at 100. Job big (3 members × 2 GPUs) needs 6 GPUs of the 4 there are:
  // all its members are rejected on arrival, though each alone fits a node.
  const std::vector<Node> nodes = {GpuNode("n0", 2), GpuNode("n1", 2)};
  std::vector<ReplayTask> tasks = {Whole("hold", 1, 0, 100)};
  Append(tasks, Job("w", 2, 2, 5, 10, 0));
  Append(tasks, Job("big", 3, 2, 0, 10, 0));
  const ReplayResult r = MustRun(nodes, tasks);
  for (const char* m : {"w-0", "w-1"}) {
    EXPECT_EQ(Rec(r, tasks, m).first_start_s, 100) << m;
    EXPECT_EQ(Rec(r, tasks, m).end_s, 110) << m;
    EXPECT_EQ(Rec(r, tasks, m).preemptions, 0) << m;
  }
  EXPECT_NE(Rec(r, tasks, "w-0").node, Rec(r, tasks, "w-1").node);
  for (const char* m : {"big-0", "big-1", "big-2"}) {
    EXPECT_EQ(Rec(r, tasks, m).outcome, TaskOutcome::kRejected) << m;
    EXPECT_EQ(Rec(r, tasks, m).first_start_s, -1) << m;
  }
  EXPECT_EQ(r.rejected, 3);
  EXPECT_EQ(r.completed, 3);
  EXPECT_EQ(r.jobs, 2);
  EXPECT_EQ(r.job_members, 5);
  EXPECT_EQ(r.jobs_completed, 1);
  EXPECT_EQ(r.jobs_rejected, 1);
  EXPECT_EQ(r.jobs_pending, 0);
  EXPECT_EQ(r.job_wait.count, 1);
  EXPECT_EQ(r.job_wait.max_s, 95);
  const std::string text = ReplaySummaryText(r);
  EXPECT_NE(text.find("jobs: 2 (5 member tasks, counted above too): 1 completed, 0 pending at "
                      "the end (0 never started), 1 rejected; 0 sent back whole when a member "
                      "was preempted\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("job wait s (first start - arrival) over 1 started: mean 95.00, p50 95, "
                      "p99 95, max 95\n"),
            std::string::npos)
      << text;
}

TEST(ReplayJobs, PreemptingOneMemberSendsTheWholeJobBack) {
  // Two nodes of 1 GPU. Job j (2 members, priority 0) starts at 0, one member per node. At 10
  // high (priority 100) evicts j-0 from n0; at the end of that pass j-1 is evicted too and its
  // GPU on n1 freed: filler (priority 0, arrived at 10) takes it in the next pass, where j
  // cannot start (n0 is high's). high leaves at 30, filler at 60: both members restart at 60
  // and run their whole 100 s again, to 160.
  const std::vector<Node> nodes = {GpuNode("n0", 1), GpuNode("n1", 1)};
  std::vector<ReplayTask> tasks = Job("j", 2, 1, 0, 100);
  tasks.push_back(Whole("high", 1, 10, 20, 100));
  tasks.push_back(Whole("filler", 1, 10, 50, 0));
  const ReplayResult r = MustRun(nodes, tasks);
  EXPECT_EQ(Rec(r, tasks, "high").first_start_s, 10);
  EXPECT_EQ(Rec(r, tasks, "high").node, 0);
  EXPECT_EQ(Rec(r, tasks, "filler").first_start_s, 10);
  EXPECT_EQ(Rec(r, tasks, "filler").node, 1);  // where j-1 ran
  for (const char* m : {"j-0", "j-1"}) {
    const TaskRecord& rec = Rec(r, tasks, m);
    EXPECT_EQ(rec.first_start_s, 0) << m;
    EXPECT_EQ(rec.preemptions, 1) << m;
    EXPECT_EQ(rec.start_s, 60) << m;
    EXPECT_EQ(rec.end_s, 160) << m;  // the stale ends at 100 are ignored
    EXPECT_EQ(rec.outcome, TaskOutcome::kCompleted) << m;
  }
  EXPECT_EQ(r.preemptions, 2);  // the victim and its fellow member
  EXPECT_EQ(r.job_restarts, 1);
  EXPECT_EQ(r.jobs_completed, 1);
  EXPECT_EQ(r.job_wait.max_s, 0);  // a job's wait ends at its first start
  EXPECT_EQ(r.completed, 4);
  ReplayConfig full;
  full.full_passes = true;
  EXPECT_EQ(ReplayTasksText(tasks, r), ReplayTasksText(tasks, MustRun(nodes, tasks, full)));
}

TEST(ReplayJobs, RequiredTopologyKeepsAJobInOneRack) {
  // Racks r0 = {n0, n1} and r1 = {n2, n3}, one GPU per node. h0 and h1 (G3 only) hold n0 and
  // n2 over [0, 100), leaving one free GPU per rack. Job j (2 members, one per node) arrives at
  // 10: with the rack required it waits until 100 and starts in one rack; preferred or without a
  // topology it starts at 10 across the two racks.
  std::vector<Node> nodes = {GpuNode("n0", 1, "G3"), GpuNode("n1", 1, "G2"), GpuNode("n2", 1, "G3"),
                             GpuNode("n3", 1, "G2")};
  ASSERT_TRUE(LabelRacks(nodes, 2).has_value());
  const auto rack = [&](const ReplayResult& r, const std::vector<ReplayTask>& tasks,
                        const std::string& m) {
    const int n = Rec(r, tasks, m).node;
    return n < 0 ? std::string("none") : nodes.at(static_cast<size_t>(n)).labels.at("rack");
  };
  struct Row {
    const char* name;
    std::string label;
    Topology topology;
    int64_t start;
    bool one_rack;
  };
  const std::vector<Row> rows = {
      {"required", "rack", Topology::kRequired, 100, true},
      {"preferred", "rack", Topology::kPreferred, 10, false},
      {"none", "", Topology::kPreferred, 10, false},
  };
  for (const Row& row : rows) {
    std::vector<ReplayTask> tasks = {Whole("h0", 1, 0, 100), Whole("h1", 1, 0, 100)};
    for (ReplayTask& t : tasks) t.request.gpu_models = {"G3"};
    Append(tasks, Job("j", 2, 1, 10, 50));
    for (ReplayTask& t : tasks) {
      if (t.request.gang_size < 2) continue;
      t.request.topology_label = row.label;
      t.request.topology = row.topology;
    }
    const ReplayResult r = MustRun(nodes, tasks);
    EXPECT_EQ(Rec(r, tasks, "h0").node, 0) << row.name;
    EXPECT_EQ(Rec(r, tasks, "h1").node, 2) << row.name;
    EXPECT_EQ(Rec(r, tasks, "j-0").first_start_s, row.start) << row.name;
    EXPECT_EQ(Rec(r, tasks, "j-1").first_start_s, row.start) << row.name;
    EXPECT_EQ(rack(r, tasks, "j-0") == rack(r, tasks, "j-1"), row.one_rack) << row.name;
    EXPECT_EQ(r.job_wait.max_s, row.start - 10) << row.name;
  }
}

TEST(ReplayJobs, RefusesAJobWhoseMembersDisagree) {
  const std::vector<Node> nodes = {GpuNode("n0", 2)};
  std::vector<ReplayTask> tasks = Job("j", 2, 1, 0, 10);
  tasks[1].arrival_s = 5;
  auto r = RunReplay(nodes, tasks, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message,
            "task j-1: arrival_s 5 differs from 0 of j-0, the first member of job j (a job's "
            "members arrive, run and queue together)");
  tasks[1].arrival_s = 0;
  tasks[1].runtime_s = 11;
  r = RunReplay(nodes, tasks, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message.rfind("task j-1: runtime_s 11 differs from 10 of j-0", 0), 0u)
      << r.error().message;
  tasks[1].runtime_s = 10;
  tasks[1].request.priority = 100;
  r = RunReplay(nodes, tasks, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message.rfind("task j-1: priority 100 differs from 0 of j-0", 0), 0u)
      << r.error().message;

  std::vector<ReplayTask> three = Job("k", 3, 1, 0, 10);
  for (ReplayTask& t : three) t.request.gang_size = 2;
  r = RunReplay(nodes, three, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message, "job k has more members than its gang_size 2 (k-2 is one too many)");
}

// The fast path (pending tasks offered one at a time, the hopeless ones skipped) decides as whole
// queue passes do, with fewer tries, for each policy that does not break ties at random; the
// results of the fast runs, by policy.
std::map<std::string, ReplayResult> ExpectFastPathAgrees(const std::vector<Node>& nodes,
                                                         const std::vector<ReplayTask>& tasks) {
  std::map<std::string, ReplayResult> out;
  for (const char* policy : {"best-fit", "fgd", "first-fit"}) {
    ReplayConfig config;
    config.policy = policy;
    config.allow_preemption = false;
    const ReplayResult fast = MustRun(nodes, tasks, config);
    config.full_passes = true;
    const ReplayResult full = MustRun(nodes, tasks, config);
    EXPECT_EQ(ReplayTasksText(tasks, fast), ReplayTasksText(tasks, full)) << policy;
    EXPECT_EQ(ReplaySummaryText(fast), ReplaySummaryText(full)) << policy;
    EXPECT_LT(fast.tries, full.tries) << policy;
    out.emplace(policy, fast);
  }
  return out;
}

TEST(ReplayJobs, FastPathMakesTheDecisionsOfWholeQueuePassesWithJobs) {
  // A seeded random workload of tasks and jobs (members alike or not, one per node or not, a
  // rack preferred, required or neither), preemption off as in the test without jobs.
  std::vector<Node> nodes = {GpuNode("n0", 8, "G2"), GpuNode("n1", 4, "G2"), GpuNode("n2", 4, "G2"),
                             GpuNode("n3", 2, "G3"), GpuNode("n4", 0, "")};
  ASSERT_TRUE(LabelRacks(nodes, 2).has_value());  // r0 = {n0, n1, n2}, r1 = {n3, n4}
  std::vector<ReplayTask> tasks;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200; ++i) {
    const int kind = static_cast<int>(rng() % 4);
    const int gpus = kind == 0 ? 0 : 1 + static_cast<int>(rng() % 4);
    const int64_t arrival = static_cast<int64_t>(rng() % 2000);
    const int64_t runtime = 1 + static_cast<int64_t>(rng() % 300);
    const int priority = static_cast<int>(rng() % 3) * 100;
    ReplayTask t = Whole("t" + std::to_string(i), gpus, arrival, runtime, priority);
    if (kind == 1) {
      t.request.gpu_count = 0;
      t.request.gpu_milli = 100 + static_cast<int32_t>(rng() % 800);
    }
    t.request.cpu_milli = 1000 + static_cast<int64_t>(rng() % 16) * 1000;
    tasks.push_back(std::move(t));
  }
  for (int j = 0; j < 30; ++j) {
    const int members = 2 + static_cast<int>(rng() % 2);
    const int gpus = 1 + static_cast<int>(rng() % 4);
    const int64_t arrival = static_cast<int64_t>(rng() % 2000);
    const int64_t runtime = 1 + static_cast<int64_t>(rng() % 300);
    const int per_node = static_cast<int>(rng() % 2);
    const int priority = static_cast<int>(rng() % 3) * 100;
    std::vector<ReplayTask> job =
        Job("j" + std::to_string(j), members, gpus, arrival, runtime, per_node, priority);
    if (j % 3 == 0) job.back().request.gpu_count = 1;  // members not alike
    if (j % 4 == 1) {
      for (ReplayTask& t : job) {
        t.request.topology_label = "rack";
        t.request.topology = j % 8 == 1 ? Topology::kRequired : Topology::kPreferred;
      }
    }
    Append(tasks, job);
  }
  for (const auto& [policy, fast] : ExpectFastPathAgrees(nodes, tasks)) {
    EXPECT_EQ(fast.jobs, 30) << policy;
    EXPECT_GT(fast.job_wait.max_s, 0) << policy << ": the jobs must queue to test anything";
  }
}

TEST(ReplayJobs, JobsAreReportedOnlyWhenThereAreJobs) {
  const std::vector<Node> nodes = {GpuNode("n0", 1), GpuNode("n1", 1)};
  const std::vector<ReplayTask> plain = {Whole("a", 1, 0, 100)};
  const ReplayResult p = MustRun(nodes, plain);
  EXPECT_EQ(ReplayResultJson(p).find("\"jobs\""), std::string::npos);
  EXPECT_EQ(ReplayResultText(p).find("job"), std::string::npos);

  // j (2 members, one per node) waits for a to leave n0 at 100.
  std::vector<ReplayTask> tasks = plain;
  Append(tasks, Job("j", 2, 1, 10, 5));
  const std::string j = ReplayResultJson(MustRun(nodes, tasks));
  for (const char* key : {"\"jobs\":{\"completed\":1,\"count\":1,\"members\":2,"
                          "\"never_started\":0,\"pending\":0,\"rejected\":0,\"restarts\":0,",
                          "\"wait_s\":{\"count\":1,\"max\":90,", "\"p99\":90}"}) {
    EXPECT_NE(j.find(key), std::string::npos) << key << " in " << j;
  }
}

TEST(Replay, AllocationCurveIsTimeWeightedAndDownsampled) {
  // Two GPUs: a holds one over [0, 100), b the other over [50, 100). With two points of 50 s:
  // 50 % then 100 %; the mean over the makespan is (1000·50 + 2000·50) / (2000·100) = 75 %.
  const std::vector<Node> nodes = {GpuNode("n0", 2)};
  const std::vector<ReplayTask> tasks = {Whole("a", 1, 0, 100), Whole("b", 1, 50, 50)};
  ReplayConfig config;
  config.max_alloc_points = 2;
  const ReplayResult r = MustRun(nodes, tasks, config);
  EXPECT_EQ(r.alloc_interval_s, 50);
  ASSERT_EQ(r.alloc.size(), 2u);
  EXPECT_EQ(r.alloc[0].t_s, 0);
  EXPECT_DOUBLE_EQ(r.alloc[0].pct, 50.0);
  EXPECT_EQ(r.alloc[1].t_s, 50);
  EXPECT_DOUBLE_EQ(r.alloc[1].pct, 100.0);
  EXPECT_DOUBLE_EQ(r.mean_alloc_pct, 75.0);
  EXPECT_DOUBLE_EQ(r.peak_alloc_pct, 100.0);

  // 1,000 s of makespan in at most 200 points: 5 s each, 200 points.
  const std::vector<ReplayTask> long_task = {Whole("long", 2, 0, 1000)};
  const ReplayResult l = MustRun(nodes, long_task);
  EXPECT_EQ(l.alloc_interval_s, 5);
  EXPECT_EQ(l.alloc.size(), 200u);
  EXPECT_DOUBLE_EQ(l.alloc.back().pct, 100.0);
}

TEST(Replay, FastPathMakesTheDecisionsOfWholeQueuePasses) {
  // A seeded random workload far larger than the cluster, priorities ordering the queue
  // (preemption off: see the report on why preemption may differ). Same start of every task.
  std::vector<Node> nodes = {GpuNode("n0", 8, "G2"), GpuNode("n1", 4, "G2"), GpuNode("n2", 2, "G3"),
                             GpuNode("n3", 0, "")};
  std::vector<ReplayTask> tasks;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 300; ++i) {
    const int kind = static_cast<int>(rng() % 4);
    ReplayTask t = Whole("t" + std::to_string(i), kind == 0 ? 0 : 1 + static_cast<int>(rng() % 4),
                         static_cast<int64_t>(rng() % 2000), 1 + static_cast<int64_t>(rng() % 300),
                         static_cast<int>(rng() % 3) * 100);
    if (kind == 1) {
      t.request.gpu_count = 0;
      t.request.gpu_milli = 100 + static_cast<int32_t>(rng() % 800);
    }
    t.request.cpu_milli = 1000 + static_cast<int64_t>(rng() % 16) * 1000;
    tasks.push_back(std::move(t));
  }
  for (const auto& [policy, fast] : ExpectFastPathAgrees(nodes, tasks)) {
    EXPECT_GT(fast.delay.max_s, 0) << policy << ": the workload must queue to test anything";
  }
}

TEST(JobMix, SyntheticJobsAreEvenlySpacedShapedLikeTheTraceAndDeterministic) {
  // Arrivals span [100, 1100]; three 8-GPU tasks give the members' shape: the medians (2nd of 3)
  // of CPU {64, 88, 96} cores, memory {100, 200, 300} GiB and runtime {10, 20, 30} s.
  std::vector<ReplayTask> trace = {Whole("a", 8, 100, 10), Whole("b", 8, 600, 30),
                                   Whole("c", 8, 1100, 20), Whole("d", 1, 300, 999)};
  trace[0].request.cpu_milli = 64000;
  trace[1].request.cpu_milli = 96000;
  trace[2].request.cpu_milli = 88000;
  trace[0].request.memory_mib = 300 * 1024;
  trace[1].request.memory_mib = 200 * 1024;
  trace[2].request.memory_mib = 100 * 1024;
  auto shape = MedianWholeGpuShape(trace, 8);
  ASSERT_TRUE(shape.has_value()) << shape.error().message;
  EXPECT_EQ(shape->tasks, 3);
  EXPECT_EQ(shape->cpu_milli, 88000);
  EXPECT_EQ(shape->memory_mib, 200 * 1024);
  EXPECT_EQ(shape->runtime_s, 20);
  auto none = MedianWholeGpuShape(trace, 4);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().message,
            "no task asks 4 whole GPUs to take a job member's CPU, memory and runtime from");

  JobMix mix;
  mix.count = 4;
  mix.members = 2;
  mix.gpus = 8;
  mix.cpu_milli = shape->cpu_milli;
  mix.memory_mib = shape->memory_mib;
  mix.runtime_s = shape->runtime_s;
  mix.topology_label = "rack";
  mix.topology = Topology::kRequired;
  auto jobs = SyntheticJobs(trace, mix);
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
  ASSERT_EQ(jobs->size(), 8u);
  // The middles of the quarters of the span: 100 + ⌊(2k + 1)·1000 / 8⌋.
  const std::vector<int64_t> arrivals = {225, 475, 725, 975};
  for (size_t k = 0; k < 4; ++k) {
    for (size_t m = 0; m < 2; ++m) {
      const ReplayTask& t = (*jobs)[k * 2 + m];
      const std::string id = "job-" + std::to_string(k);
      EXPECT_EQ(t.name, id + "-" + std::to_string(m));
      EXPECT_EQ(t.arrival_s, arrivals[k]) << t.name;
      EXPECT_EQ(t.runtime_s, 20) << t.name;
      EXPECT_EQ(t.request.gang_id, id) << t.name;
      EXPECT_EQ(t.request.gang_size, 2) << t.name;
      EXPECT_EQ(t.request.gpu_count, 8) << t.name;
      EXPECT_EQ(t.request.cpu_milli, 88000) << t.name;
      EXPECT_EQ(t.request.memory_mib, 200 * 1024) << t.name;
      EXPECT_EQ(t.request.priority, 0) << t.name;
      EXPECT_EQ(t.request.members_per_node, 1) << t.name;
      EXPECT_EQ(t.request.topology_label, "rack") << t.name;
      EXPECT_EQ(t.request.topology, Topology::kRequired) << t.name;
    }
  }
  auto again = SyntheticJobs(trace, mix);
  ASSERT_TRUE(again.has_value());
  ASSERT_EQ(again->size(), jobs->size());
  for (size_t i = 0; i < jobs->size(); ++i) {
    EXPECT_EQ((*again)[i].name, (*jobs)[i].name);
    EXPECT_EQ((*again)[i].arrival_s, (*jobs)[i].arrival_s);
    EXPECT_EQ((*again)[i].request, (*jobs)[i].request);
  }
  // The replay takes them as they are.
  std::vector<ReplayTask> all = trace;
  Append(all, *jobs);
  const std::vector<Node> nodes = {GpuNode("n0", 8), GpuNode("n1", 8)};
  EXPECT_EQ(MustRun(nodes, all).jobs, 4);

  // Job numbers are padded to the digits of count − 1.
  mix.count = 12;
  auto twelve = SyntheticJobs(trace, mix);
  ASSERT_TRUE(twelve.has_value());
  EXPECT_EQ(twelve->front().name, "job-00-0");
  EXPECT_EQ(twelve->back().name, "job-11-1");
  // No trace: every job arrives at 0.
  auto bare = SyntheticJobs({}, mix);
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->back().arrival_s, 0);

  mix.count = 4;
  mix.members = 1;
  auto e = SyntheticJobs(trace, mix);
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().message, "members must be 2..4096, got 1");
  mix.members = 2;
  mix.gpus = 9;
  e = SyntheticJobs(trace, mix);
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().message, "gpus must be 1..8, got 9");
  mix.gpus = 8;
  trace.push_back(Whole("job-2-1", 1, 0, 1));
  e = SyntheticJobs(trace, mix);
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().message, "job member name job-2-1 is a task's name already");
}

TEST(JobMix, LabelRacksInContiguousBlocks) {
  std::vector<Node> nodes;
  for (int i = 0; i < 7; ++i) nodes.push_back(GpuNode("n" + std::to_string(i), 1));
  // Node i in rack ⌊3i / 7⌋: 3, 2 and 2 nodes.
  ASSERT_TRUE(LabelRacks(nodes, 3).has_value());
  std::vector<std::string> racks;
  for (const Node& n : nodes) racks.push_back(n.labels.at("rack"));
  EXPECT_EQ(racks, (std::vector<std::string>{"r0", "r0", "r0", "r1", "r1", "r2", "r2"}));
  ASSERT_TRUE(LabelRacks(nodes, 7, "row").has_value());
  EXPECT_EQ(nodes[6].labels.at("row"), "r6");
  EXPECT_EQ(nodes[6].labels.at("rack"), "r2");  // other labels kept
  auto zero = LabelRacks(nodes, 0);
  ASSERT_FALSE(zero.has_value());
  EXPECT_EQ(zero.error().message, "racks must be 1..7 (the node count), got 0");
  EXPECT_FALSE(LabelRacks(nodes, 8).has_value());
}

TEST(ReplayDelayStats, NearestRankArithmetic) {
  struct Row {
    const char* name;
    std::vector<int64_t> delays;
    double mean;
    int64_t p50, p99, max;
  };
  std::vector<int64_t> hundred(100);
  for (int i = 0; i < 100; ++i) hundred[static_cast<size_t>(i)] = 100 - i;  // 100..1, unsorted
  std::vector<int64_t> two_hundred(200);
  for (int i = 0; i < 200; ++i) two_hundred[static_cast<size_t>(i)] = i + 1;
  const std::vector<Row> rows = {
      {"empty", {}, 0.0, 0, 0, 0},
      {"one", {7}, 7.0, 7, 7, 7},
      // p50: ⌈0.5·4⌉ = 2nd = 0; p99: ⌈0.99·4⌉ = 4th = 10; mean 10/4.
      {"mostly_zero", {0, 10, 0, 0}, 2.5, 0, 10, 10},
      // 1..100: p50 = 50th = 50, p99 = 99th = 99, mean 5050/100.
      {"one_to_hundred", hundred, 50.5, 50, 99, 100},
      // 1..200: p50 = 100th = 100, p99 = ⌈198⌉ = 198th = 198, mean 20100/200.
      {"one_to_two_hundred", two_hundred, 100.5, 100, 198, 200},
  };
  for (const Row& row : rows) {
    const DelayStats s = ComputeDelayStats(row.delays);
    EXPECT_EQ(s.count, static_cast<int64_t>(row.delays.size())) << row.name;
    EXPECT_DOUBLE_EQ(s.mean_s, row.mean) << row.name;
    EXPECT_EQ(s.p50_s, row.p50) << row.name;
    EXPECT_EQ(s.p99_s, row.p99) << row.name;
    EXPECT_EQ(s.max_s, row.max) << row.name;
  }
  const std::vector<int64_t> three = {1, 2, 3};
  EXPECT_EQ(NearestRank(three, 50), 2);  // ⌈1.5⌉ = 2nd
  EXPECT_EQ(NearestRank(three, 34), 2);  // ⌈1.02⌉ = 2nd
  EXPECT_EQ(NearestRank(three, 33), 1);  // ⌈0.99⌉ = 1st
  EXPECT_EQ(NearestRank(three, 100), 3);
}

TEST(ReplayTasksFromTrace, TimesSpeedupLimitAndErrors) {
  std::vector<TracePod> pods(3);
  for (size_t i = 0; i < pods.size(); ++i) {
    pods[i].name = "p" + std::to_string(i);
    pods[i].request.gpu_count = 1;
    pods[i].priority = static_cast<int>(i) * 100;
  }
  pods[0].creation_s = 100, pods[0].deletion_s = 350;
  pods[1].creation_s = 205, pods[1].deletion_s = 205;  // deleted when created: runs 1 s
  pods[2].creation_s = 300, pods[2].deletion_s = 290;  // deleted before created: runs 1 s
  auto t = ReplayTasksFromTrace(pods);
  ASSERT_TRUE(t.has_value()) << t.error().message;
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[0].arrival_s, 100);
  EXPECT_EQ((*t)[0].runtime_s, 250);
  EXPECT_EQ((*t)[1].runtime_s, 1);
  EXPECT_EQ((*t)[2].runtime_s, 1);
  EXPECT_EQ((*t)[2].request.priority, 200);

  auto fast = ReplayTasksFromTrace(pods, 2, 10);  // arrivals ⌊c / 10⌋, runtimes kept
  ASSERT_TRUE(fast.has_value());
  ASSERT_EQ(fast->size(), 2u);
  EXPECT_EQ((*fast)[0].arrival_s, 10);
  EXPECT_EQ((*fast)[1].arrival_s, 20);
  EXPECT_EQ((*fast)[0].runtime_s, 250);

  EXPECT_FALSE(ReplayTasksFromTrace(pods, -1, 0).has_value());
  std::vector<TracePod> dup = {pods[0], pods[0]};
  auto d = ReplayTasksFromTrace(dup);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().message, "pod name p0 appears twice");
  pods[1].deletion_s = -1;
  EXPECT_FALSE(ReplayTasksFromTrace(pods).has_value());
}

TEST(QosPriority, MapsTheTraceClasses) {
  EXPECT_EQ(QosPriority("LS").value_or(-1), 200);
  EXPECT_EQ(QosPriority("Guaranteed").value_or(-1), 200);
  EXPECT_EQ(QosPriority("Burstable").value_or(-1), 100);
  EXPECT_EQ(QosPriority("BE").value_or(-1), 0);
  EXPECT_EQ(QosPriority("").value_or(-1), 0);
  auto bad = QosPriority("Gold");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message, "qos must be LS, Guaranteed, Burstable or BE, got 'Gold'");
}

TEST(Replay, RejectsAnUnknownPolicyAndDuplicateNames) {
  const std::vector<Node> nodes = {GpuNode("n0", 1)};
  ReplayConfig config;
  config.policy = "no-such-policy";
  EXPECT_FALSE(RunReplay(nodes, {Whole("a", 1, 0, 1)}, config).has_value());
  auto dup = RunReplay(nodes, {Whole("a", 1, 0, 1), Whole("a", 1, 5, 1)}, {});
  ASSERT_FALSE(dup.has_value());
  EXPECT_EQ(dup.error().message, "task name a appears twice");
}

TEST(Replay, JsonCarriesTheSummary) {
  const std::vector<Node> nodes = {GpuNode("n0", 1)};
  const std::vector<ReplayTask> tasks = {Whole("a", 1, 0, 100), Whole("b", 1, 10, 50)};
  const std::string j = ReplayResultJson(MustRun(nodes, tasks));
  for (const char* key :
       {"\"policy\":\"best-fit\"", "\"completed\":2", "\"preemptions\":0", "\"p99\":90",
        "\"makespan_s\":150", "\"never_started\":0", "\"rejected\":0", "\"alloc\":[{"}) {
    EXPECT_NE(j.find(key), std::string::npos) << key << " in " << j;
  }
}

// ---------------------------------------------------------------------------------------------
// Snapshots and moves (issue 15).

// low (priority 0, 100 s of work) runs from 0; high (100) arrives at 50 and evicts it for 20 s.
TEST(ReplaySnapshots, APreemptedTaskResumesFromItsSnapshotAndEndsEarlierByItsSavedWork) {
  const std::vector<Node> nodes = {GpuNode("n0", 1)};
  const std::vector<ReplayTask> tasks = {Whole("low", 1, 0, 100, 0), Whole("high", 1, 50, 20, 100)};
  // Kill and restart: low starts again at 70 and does its 100 s again: ends at 170, its 50 s lost.
  const ReplayResult kill = MustRun(nodes, tasks);
  EXPECT_EQ(Rec(kill, tasks, "low").end_s, 170);
  EXPECT_FALSE(kill.snapshots);
  EXPECT_DOUBLE_EQ(kill.work_lost_gpu_s, 50);
  EXPECT_DOUBLE_EQ(kill.kill_restart_gpu_s, 50);

  // Snapshots every 20 s: the one at 40 keeps 40 s; low restarts at 70, restores for 2 s and
  // does the 60 s left: ends at 132, 38 s before kill and restart (40 saved, 2 restoring).
  ReplayConfig periodic;
  periodic.snapshots.every_s = 20;
  periodic.snapshots.restore_s = 2;
  const ReplayResult p = MustRun(nodes, tasks, periodic);
  const TaskRecord& low = Rec(p, tasks, "low");
  EXPECT_EQ(low.preemptions, 1);
  EXPECT_EQ(low.start_s, 70);
  EXPECT_EQ(low.end_s, 132);
  EXPECT_EQ(Rec(p, tasks, "high").first_start_s, 50);  // no snapshot before the stop: at once
  EXPECT_TRUE(p.snapshots);
  EXPECT_DOUBLE_EQ(p.work_lost_gpu_s, 10);        // 40..50
  EXPECT_DOUBLE_EQ(p.kill_restart_gpu_s, 50);     // what kill and restart loses on it
  EXPECT_DOUBLE_EQ(p.snapshot_restore_gpu_s, 2);  // the restore

  // Snapshotted on stop (3 s): high starts once it is taken, at 53, and leaves at 73; low keeps
  // all 50 s, restores for 2 s from 73 and ends at 125.
  ReplayConfig on_stop = periodic;
  on_stop.snapshots.on_stop = true;
  on_stop.snapshots.snapshot_s = 3;
  const ReplayResult s = MustRun(nodes, tasks, on_stop);
  EXPECT_EQ(Rec(s, tasks, "high").first_start_s, 53);
  EXPECT_EQ(Rec(s, tasks, "high").end_s, 73);
  EXPECT_EQ(Rec(s, tasks, "low").start_s, 73);
  EXPECT_EQ(Rec(s, tasks, "low").end_s, 125);
  EXPECT_DOUBLE_EQ(s.work_lost_gpu_s, 0);
  EXPECT_DOUBLE_EQ(s.snapshot_restore_gpu_s, 5);
  const std::string text = ReplaySummaryText(s);
  EXPECT_NE(text.find("preemptions: 1 (victims resume from their latest snapshot)\n"
                      "work lost to preemption: 0.00 GPU-s since the victims' latest snapshots "
                      "(kill and restart: 50.00 GPU-s); snapshots before stops and restores: "
                      "5.00 GPU-s\n"),
            std::string::npos)
      << text;
  const std::string j = ReplayResultJson(s);
  EXPECT_NE(j.find("\"work\":{\"kill_restart_gpu_s\":50.0,\"lost_gpu_s\":0.0,\"moved_gpu_s\":0.0,"
                   "\"moves\":0,\"snapshot_restore_gpu_s\":5.0,\"snapshots\":true}"),
            std::string::npos)
      << j;
}

// The scheduler is told the work of each run: a (since 0) and b (since 90) hold one GPU each at
// priority 0; high needs one at 100. Knowing nothing, it takes the first node's task, a (100 s of
// work lost); told, it takes b, which loses 10.
TEST(ReplaySnapshots, VictimsAreChosenByTheWorkTheyLose) {
  const std::vector<Node> nodes = {GpuNode("n0", 1), GpuNode("n1", 1)};
  const std::vector<ReplayTask> tasks = {Whole("a", 1, 0, 1000), Whole("b", 1, 90, 1000),
                                         Whole("high", 1, 100, 10, 100)};
  ReplayConfig config;
  config.policy = "first-fit";
  const ReplayResult blind = MustRun(nodes, tasks, config);
  EXPECT_EQ(Rec(blind, tasks, "a").preemptions, 1);
  EXPECT_DOUBLE_EQ(blind.work_lost_gpu_s, 100);
  config.snapshots.every_s = 100'000;  // none taken here: unsaved since each run's start
  const ReplayResult told = MustRun(nodes, tasks, config);
  EXPECT_EQ(Rec(told, tasks, "b").preemptions, 1);
  EXPECT_EQ(Rec(told, tasks, "a").preemptions, 0);
  EXPECT_DOUBLE_EQ(told.work_lost_gpu_s, 10);
}

// n0 has 8 GPUs, n1 2. small (1 GPU, priority 0) takes n0 at 0 (first-fit); big (8 GPUs, the
// same priority: it cannot preempt) arrives at 10. Without moves it waits for small to end at
// 1000; with them small is moved to n1 (snapshot 2 s, restore 3 s) and big starts at 12.
TEST(ReplaySnapshots, AMoveLetsAnEightGpuTaskStartSooner) {
  const std::vector<Node> nodes = {GpuNode("n0", 8), GpuNode("n1", 2)};
  const std::vector<ReplayTask> tasks = {Whole("small", 1, 0, 1000), Whole("big", 8, 10, 50)};
  ReplayConfig config;
  config.policy = "first-fit";
  config.snapshots.on_stop = true;
  config.snapshots.snapshot_s = 2;
  config.snapshots.restore_s = 3;
  const ReplayResult waits = MustRun(nodes, tasks, config);
  EXPECT_EQ(Rec(waits, tasks, "big").first_start_s, 1000);
  EXPECT_EQ(waits.eight_gpu_delay.max_s, 990);
  EXPECT_EQ(waits.moves, 0);

  config.moves = true;
  const ReplayResult moved = MustRun(nodes, tasks, config);
  EXPECT_EQ(Rec(moved, tasks, "big").first_start_s, 12);
  EXPECT_EQ(Rec(moved, tasks, "big").node, 0);
  EXPECT_EQ(moved.eight_gpu_delay.count, 1);
  EXPECT_EQ(moved.eight_gpu_delay.max_s, 2);
  // small keeps its 10 s of work, resumes on n1 at 12, restores until 15 and ends at 1005.
  const TaskRecord& small = Rec(moved, tasks, "small");
  EXPECT_EQ(small.moves, 1);
  EXPECT_EQ(small.preemptions, 0);
  EXPECT_EQ(small.node, 1);
  EXPECT_EQ(small.end_s, 1005);
  EXPECT_EQ(moved.moves, 1);
  EXPECT_DOUBLE_EQ(moved.moved_gpu_s, 5);
  EXPECT_EQ(moved.preemptions, 0);
  const std::string text = ReplaySummaryText(moved);
  EXPECT_NE(text.find("moves: 1 (5.00 GPU-s of snapshot and restore)\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("8-GPU tasks' queueing delay s over 1 started: mean 2.00, p50 2, p99 2, "
                      "max 2\n"),
            std::string::npos)
      << text;
  // The fast path decides as whole-queue passes do with moves too.
  config.full_passes = true;
  EXPECT_EQ(ReplayTasksText(tasks, moved), ReplayTasksText(tasks, MustRun(nodes, tasks, config)));
}

TEST(ReplaySnapshots, RefusesMovesWithoutSnapshotsOnStopAndNegativeTimes) {
  const std::vector<Node> nodes = {GpuNode("n0", 1)};
  const std::vector<ReplayTask> tasks = {Whole("a", 1, 0, 10)};
  ReplayConfig config;
  config.moves = true;
  auto r = RunReplay(nodes, tasks, config);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message, "moves need snapshots on stop: a task is moved by a snapshot");
  config.moves = false;
  config.snapshots.restore_s = -1;
  r = RunReplay(nodes, tasks, config);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message,
            "snapshot times must be >= 0 s, got every 0, snapshot 0, restore -1");
}

}  // namespace
}  // namespace gpupool::sim
