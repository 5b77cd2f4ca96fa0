// Tests for sched/schedule: ScheduleOnce reserving as it goes, tie-breaks, pending reasons with
// counts, gangs (all or nothing), preemption (cheapest victims, explained; by the work they
// lose), moves instead of kills, and MIG placement.
#include "sched/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/mig.h"
#include "core/node.h"
#include "core/task.h"
#include "sched/cluster_state.h"
#include "sched/policy.h"
#include "sched/test_builders.h"

namespace gpupool::sched {
namespace {

// ---------------------------------------------------------------------------------------------
// Builders (sched/test_builders.h). This file's nodes have 32 cores unless a test says otherwise
// and 128 GiB; its GPU tasks ask 1 core beside their GPUs (kTask).

Node MakeNode(const std::string& name, int gpus, const std::string& model = "G1",
              int64_t cpu_milli = 32000) {
  return TestNode(name, gpus, model, cpu_milli, 131072);
}

const Req kTask = CpuOnly(1000);

std::unique_ptr<Policy> Make(const std::string& name, uint64_t seed = 1,
                             std::optional<TieBreak> tie_break = std::nullopt) {
  PolicyOptions o;
  o.seed = seed;
  o.tie_break = tie_break;
  return MustMakePolicy(name, o);
}

// Binds `id` with `r` as a share on GPU `gpu` of `node` (or whole GPUs from `gpu` on).
void BindShare(ClusterState& s, const std::string& id, const TaskRequest& r, int node, int gpu) {
  ASSERT_TRUE(s.Bind(id, r, Placement{node, {gpu}, r.gpu_milli, 0, std::nullopt}).has_value())
      << id;
}

const Assignment* FindAssignment(const Plan& plan, const std::string& id) {
  for (const Assignment& a : plan.assignments) {
    if (a.task_id == id) return &a;
  }
  return nullptr;
}
const PendingTask* FindPending(const Plan& plan, const std::string& id) {
  for (const PendingTask& p : plan.pending) {
    if (p.task_id == id) return &p;
  }
  return nullptr;
}
std::vector<std::string> AssignedIds(const Plan& plan) {
  std::vector<std::string> ids;
  for (const Assignment& a : plan.assignments) ids.push_back(a.task_id);
  return ids;
}
std::vector<std::string> PendingIds(const Plan& plan) {
  std::vector<std::string> ids;
  for (const PendingTask& p : plan.pending) ids.push_back(p.task_id);
  return ids;
}

// ---------------------------------------------------------------------------------------------
// Placements are reserved as the pass goes: later tasks see earlier ones.

struct Want {
  const char* task;
  int node;  // -1: pending
  std::vector<int> gpus;
};

struct ReserveRow {
  const char* name;
  const char* policy;
  std::vector<Node> nodes;
  std::vector<QueuedTask> queue;
  std::vector<Want> want;
};
void PrintTo(const ReserveRow& row, std::ostream* os) { *os << row.name; }

class ReserveTest : public testing::TestWithParam<ReserveRow> {};

TEST_P(ReserveTest, NoDoubleBooking) {
  const ReserveRow& row = GetParam();
  ClusterState s(row.nodes);
  std::unique_ptr<Policy> p = Make(row.policy);
  const Plan plan = ScheduleOnce(s, row.queue, *p);
  int64_t milli = 0;
  for (const Want& w : row.want) {
    SCOPED_TRACE(w.task);
    const Assignment* a = FindAssignment(plan, w.task);
    if (w.node < 0) {
      EXPECT_EQ(a, nullptr);
      EXPECT_NE(FindPending(plan, w.task), nullptr);
      EXPECT_EQ(s.FindBinding(w.task), nullptr);
      continue;
    }
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->placement.node, w.node);
    EXPECT_EQ(a->placement.gpus, w.gpus);
    // The state holds the binding the plan announces.
    const Binding* b = s.FindBinding(w.task);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->placement.node, w.node);
    EXPECT_EQ(b->placement.gpus, w.gpus);
    milli += b->request.GpuMilli();
  }
  EXPECT_EQ(s.AllocatedGpuMilli(), milli);
  EXPECT_TRUE(plan.preemptions.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Schedule, ReserveTest,
    testing::ValuesIn(std::vector<ReserveRow>{
        // One GPU; two shares of 600: 600 + 600 > 1000, the second must wait.
        {"one_gpu_two_shares",
         "first-fit",
         {MakeNode("n0", 1)},
         {{"t1", kTask.Share(600)}, {"t2", kTask.Share(600)}},
         {{"t1", 0, {0}}, {"t2", -1, {}}}},
        // Two 1-GPU nodes; best-fit ties on the idle nodes → n0; the second 600 no longer fits
        // n0 (400 left) → n1.
        {"second_goes_elsewhere",
         "best-fit",
         {MakeNode("n0", 1), MakeNode("n1", 1)},
         {{"t1", kTask.Share(600)}, {"t2", kTask.Share(600)}},
         {{"t1", 0, {0}}, {"t2", 1, {0}}}},
        // 600 → n0 (400 left); 700 → n1 (n0 too small; 300 left); then 300 fits both and
        // best-fit takes the tighter hole as it is now: n1 (0 left after) over n0 (100).
        {"sees_current_holes",
         "best-fit",
         {MakeNode("n0", 1), MakeNode("n1", 1)},
         {{"t1", kTask.Share(600)}, {"t2", kTask.Share(700)}, {"t3", kTask.Share(300)}},
         {{"t1", 0, {0}}, {"t2", 1, {0}}, {"t3", 1, {0}}}},
        // Three GPUs: 2 whole, then 2 whole again (only 1 free left) → pending, then 1 whole → 2.
        {"whole_gpus",
         "first-fit",
         {MakeNode("n0", 3)},
         {{"a", kTask.Whole(2)}, {"b", kTask.Whole(2)}, {"c", kTask.Whole(1)}},
         {{"a", 0, {0, 1}}, {"b", -1, {}}, {"c", 0, {2}}}},
        // Shares pack the same GPU (tightest fit) until it is full: 300, 300, 400 on GPU0.
        {"shares_pack_one_gpu",
         "first-fit",
         {MakeNode("n0", 2)},
         {{"a", kTask.Share(300)}, {"b", kTask.Share(300)}, {"c", kTask.Share(400)}, {"d", kTask.Share(100)}},
         {{"a", 0, {0}}, {"b", 0, {0}}, {"c", 0, {0}}, {"d", 0, {1}}}},
        // CPU is reserved too: 32000 cpu, tasks of 20000 → the second waits although GPUs are free.
        {"cpu_reserved",
         "first-fit",
         {MakeNode("n0", 2)},
         {{"a",
           [] {
             TaskRequest r = kTask.Share(100);
             r.cpu_milli = 20000;
             return r;
           }()},
          {"b",
           [] {
             TaskRequest r = kTask.Share(100);
             r.cpu_milli = 20000;
             return r;
           }()}},
         {{"a", 0, {0}}, {"b", -1, {}}}},
    }),
    RowName());

// ---------------------------------------------------------------------------------------------
// Tie-breaks among nodes with the same top score.

TEST(TieBreakTest, LowestIndexTakesTheFirstNode) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    ClusterState s({MakeNode("n0", 2), MakeNode("n1", 2), MakeNode("n2", 2)});
    std::unique_ptr<Policy> p = Make("best-fit", seed);
    ASSERT_EQ(p->tie_break(), TieBreak::kLowestIndex);
    const std::vector<QueuedTask> q = {{"t", kTask.Share(500)}};
    const Plan plan = ScheduleOnce(s, q, *p);
    ASSERT_EQ(plan.assignments.size(), 1u);
    EXPECT_EQ(plan.assignments[0].placement.node, 0) << "seed " << seed;
  }
}

TEST(TieBreakTest, RandomSpreadsOverTiedNodes) {
  int hits[3] = {};
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    ClusterState s({MakeNode("n0", 2), MakeNode("n1", 2), MakeNode("n2", 2)});
    std::unique_ptr<Policy> p = Make("best-fit", seed, TieBreak::kRandom);
    const std::vector<QueuedTask> q = {{"t", kTask.Share(500)}};
    const Plan plan = ScheduleOnce(s, q, *p);
    ASSERT_EQ(plan.assignments.size(), 1u);
    const int node = plan.assignments[0].placement.node;
    ++hits[node];
    // The same seed gives the same choice.
    ClusterState again({MakeNode("n0", 2), MakeNode("n1", 2), MakeNode("n2", 2)});
    std::unique_ptr<Policy> p2 = Make("best-fit", seed, TieBreak::kRandom);
    EXPECT_EQ(ScheduleOnce(again, q, *p2).assignments.at(0).placement.node, node);
  }
  // 300 draws over 3 nodes: expected 100 each (σ ≈ 8).
  for (int h : hits) {
    EXPECT_GT(h, 60);
    EXPECT_LT(h, 140);
  }
}

// Random tie-breaks only choose among the top score: best-fit prefers the fuller n1 every time.
TEST(TieBreakTest, RandomOnlyAmongTheTop) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    ClusterState s({MakeNode("n0", 2), MakeNode("n1", 2), MakeNode("n2", 2)});
    BindShare(s, "x", kTask.Share(500), 1, 0);
    std::unique_ptr<Policy> p = Make("best-fit", seed, TieBreak::kRandom);
    const std::vector<QueuedTask> q = {{"t", kTask.Share(300)}};
    const Plan plan = ScheduleOnce(s, q, *p);
    EXPECT_EQ(plan.assignments.at(0).placement.node, 1) << "seed " << seed;
  }
}

// A preference for nodes (they hold a task's dataset) wins over the policy's choice where one of
// them fits, and is no reason to wait where none does.
TEST(PreferNodesTest, APreferredNodeThatFitsWinsAndNoneFittingIsNoObstacle) {
  std::unique_ptr<Policy> p = Make("best-fit");
  // n1 holds a 500-milli share, n2 two 900-milli ones: a 300-milli share fits n0 and n1, not n2.
  auto node_of = [&](const TaskRequest& r) {
    ClusterState s({MakeNode("n0", 2), MakeNode("n1", 2), MakeNode("n2", 2)});
    BindShare(s, "x", kTask.Share(500), 1, 0);
    BindShare(s, "y", kTask.Share(900), 2, 0);
    BindShare(s, "z", kTask.Share(900), 2, 1);
    const std::vector<QueuedTask> q = {{"t", r}};
    const Plan plan = ScheduleOnce(s, q, *p);
    EXPECT_EQ(plan.assignments.size(), 1u) << (plan.pending.empty() ? "" : plan.pending[0].reason);
    return plan.assignments.empty() ? -1 : plan.assignments[0].placement.node;
  };
  // Best-fit alone puts it on the fuller n1.
  EXPECT_EQ(node_of(kTask.Share(300)), 1);
  EXPECT_EQ(node_of(kTask.Share(300).Prefer({"n0", "gone"})), 0);
  // n2 has no GPU with 300 milli free: the policy chooses among all again.
  EXPECT_EQ(node_of(kTask.Share(300).Prefer({"n2"})), 1);
}

// The `random` policy spreads CPU-only tasks over every node.
TEST(TieBreakTest, RandomPolicyChoosesEveryNode) {
  int hits[2] = {};
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    ClusterState s({MakeNode("n0", 1), MakeNode("n1", 0)});
    std::unique_ptr<Policy> p = Make("random", seed);
    const std::vector<QueuedTask> q = {{"t", CpuOnly(1000)}};
    ++hits[ScheduleOnce(s, q, *p).assignments.at(0).placement.node];
  }
  EXPECT_GT(hits[0], 25);
  EXPECT_GT(hits[1], 25);
}

// ---------------------------------------------------------------------------------------------
// Pending tasks carry counted reasons.

TEST(PendingTest, ReasonsCountedByNode) {
  // A share of 470 (cpu 1000) limited to G1:
  //   n0 G2 → wrong model; n1, n2 no GPU; n3 G1 cordoned; n4 G1 with 500 cpu → cpu;
  //   n5 G1 with 200 left, n6 G1 with 300 left → no GPU with 470 milli free.
  std::vector<Node> nodes = {
      MakeNode("n0", 1, "G2"),      MakeNode("n1", 0), MakeNode("n2", 0), MakeNode("n3", 1),
      MakeNode("n4", 1, "G1", 500), MakeNode("n5", 1), MakeNode("n6", 1)};
  nodes[3].schedulable = false;
  nodes[5].gpus[0].milli_free = 200;
  nodes[6].gpus[0].milli_free = 300;
  ClusterState s(nodes);
  std::unique_ptr<Policy> p = Make("fgd-plan");
  const std::vector<QueuedTask> q = {{"t", kTask.Share(470).Models({"G1"})}};
  const Plan plan = ScheduleOnce(s, q, *p);
  ASSERT_TRUE(plan.assignments.empty());
  ASSERT_EQ(plan.pending.size(), 1u);
  const PendingTask& t = plan.pending[0];
  EXPECT_EQ(t.task_id, "t");
  // 2, 2, then the 1s in reason order (cordoned, wrong model, cpu).
  EXPECT_EQ(t.reason,
            "no node fits: 2 nodes: no GPU; 2 nodes: no GPU with 470 milli free; 1 node: "
            "cordoned; 1 node: wrong GPU model; 1 node: less than 1000 cpu milli free");
  const std::vector<std::pair<std::string, int>> want = {{"no GPU", 2},
                                                         {"no GPU with 470 milli free", 2},
                                                         {"cordoned", 1},
                                                         {"wrong GPU model", 1},
                                                         {"less than 1000 cpu milli free", 1}};
  EXPECT_EQ(t.nodes, want);
  EXPECT_EQ(s.AllocatedGpuMilli(), 1500);  // the 800 + 700 already used, nothing added
}

TEST(PendingTest, EmptyClusterSaysNoNodes) {
  ClusterState s;
  std::unique_ptr<Policy> p = Make("first-fit");
  const std::vector<QueuedTask> q = {{"t", kTask.Whole(1)}};
  const Plan plan = ScheduleOnce(s, q, *p);
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].reason, "no node fits: no nodes");
}

// ---------------------------------------------------------------------------------------------
// Gangs: all members placed or none.

TEST(GangTest, AllOrNothing) {
  // Two GPUs; a gang of three shares of 600: members 1 and 2 fit (one GPU each), member 3 does
  // not → all three pending, nothing reserved.
  ClusterState s({MakeNode("n0", 2)});
  std::unique_ptr<Policy> p = Make("first-fit");
  const std::vector<QueuedTask> q = {{"g1", kTask.Share(600).Gang("g", 3)},
                                     {"g2", kTask.Share(600).Gang("g", 3)},
                                     {"g3", kTask.Share(600).Gang("g", 3)}};
  const Plan plan = ScheduleOnce(s, q, *p);
  EXPECT_TRUE(plan.assignments.empty());
  EXPECT_EQ(PendingIds(plan), (std::vector<std::string>{"g1", "g2", "g3"}));
  for (const PendingTask& t : plan.pending) {
    EXPECT_EQ(t.reason,
              "gang g: member g3 does not fit, no node fits: 1 node: no GPU with 600 milli free")
        << t.task_id;
  }
  EXPECT_EQ(s.AllocatedGpuMilli(), 0);
  EXPECT_EQ(MilliFree(s.node(0)), (std::vector<int32_t>{1000, 1000}));
  EXPECT_EQ(s.node(0).cpu_free_milli, 32000);
  EXPECT_TRUE(s.TasksOn(0).empty());
  for (const char* id : {"g1", "g2", "g3"}) EXPECT_EQ(s.FindBinding(id), nullptr);
  EXPECT_EQ(s.summary(0).free_gpus, 2);
}

TEST(GangTest, WholeGangPlacedTogether) {
  // Gang of two whole GPUs across 1-GPU nodes; a task between its members in the queue. The gang
  // is placed at its first member's turn, so x (queued before g2) finds both nodes taken.
  ClusterState s({MakeNode("n0", 1), MakeNode("n1", 1)});
  std::unique_ptr<Policy> p = Make("first-fit");
  const std::vector<QueuedTask> q = {{"g1", kTask.Whole(1).Gang("g", 2)},
                                     {"x", kTask.Whole(1)},
                                     {"g2", kTask.Whole(1).Gang("g", 2)}};
  const Plan plan = ScheduleOnce(s, q, *p);
  EXPECT_EQ(AssignedIds(plan), (std::vector<std::string>{"g1", "g2"}));
  EXPECT_EQ(FindAssignment(plan, "g1")->placement.node, 0);
  EXPECT_EQ(FindAssignment(plan, "g2")->placement.node, 1);
  EXPECT_EQ(PendingIds(plan), std::vector<std::string>{"x"});
  EXPECT_EQ(s.AllocatedGpuMilli(), 2000);
}

TEST(GangTest, WaitsForItsMembers) {
  ClusterState s({MakeNode("n0", 4)});
  std::unique_ptr<Policy> p = Make("first-fit");
  const std::vector<QueuedTask> q = {{"g1", kTask.Whole(1).Gang("g", 3)},
                                     {"g2", kTask.Whole(1).Gang("g", 3)}};
  const Plan plan = ScheduleOnce(s, q, *p);
  EXPECT_TRUE(plan.assignments.empty());
  EXPECT_EQ(PendingIds(plan), (std::vector<std::string>{"g1", "g2"}));
  for (const PendingTask& t : plan.pending) {
    EXPECT_EQ(t.reason, "gang g waits for its members: 2 of 3 queued");
  }
  EXPECT_EQ(s.AllocatedGpuMilli(), 0);
}

// A gang that fails must leave the state as it found it, MIG layout included: a member that was
// given a MIG instance by re-partitioning an idle GPU is rolled back, and the GPU must not stay in
// MIG mode (it would then refuse the whole-GPU task queued after the gang).
TEST(GangTest, FailedMigGangLeavesGpuAsItWas) {
  ClusterState s({MakeNode("n0", 1, "A100-80GB")});
  std::unique_ptr<Policy> p = Make("first-fit");
  // Two 7g instances cannot share one GPU: the gang fails at its second member.
  const std::vector<QueuedTask> q = {{"m1", kTask.Mig("7g.80gb").Gang("g", 2)},
                                     {"m2", kTask.Mig("7g.80gb").Gang("g", 2)},
                                     {"w", kTask.Whole(1)}};
  const Plan plan = ScheduleOnce(s, q, *p);
  EXPECT_NE(FindPending(plan, "m1"), nullptr);
  EXPECT_NE(FindPending(plan, "m2"), nullptr);
  EXPECT_FALSE(s.node(0).gpus[0].mig_enabled);
  EXPECT_TRUE(s.node(0).gpus[0].mig_instances.empty());
  EXPECT_NE(FindAssignment(plan, "w"), nullptr) << "the whole GPU is idle again after the gang";
}

// A distributed job's members: at most members_per_node on a node, and kept under one value of a
// topology label.

Node InRack(Node n, const std::string& rack) {
  n.labels["rack"] = rack;
  return n;
}

std::vector<QueuedTask> Members(const Req& r, int count) {
  std::vector<QueuedTask> q;
  for (int i = 0; i < count; ++i) q.push_back({"m" + std::to_string(i), r});
  return q;
}

TEST(GangTest, OneMemberPerNodeSpreadsThemAndSaysWhyWhenNodesAreShort) {
  // Two 8-GPU nodes: three 1-GPU members fit on one node by resources, but one per node needs
  // three nodes.
  ClusterState s({MakeNode("n0", 8), MakeNode("n1", 8)});
  std::unique_ptr<Policy> p = Make("first-fit");
  Plan plan = ScheduleOnce(s, Members(kTask.Whole(1).Gang("j-1", 2).PerNode(1), 2), *p);
  ASSERT_EQ(plan.assignments.size(), 2u);
  EXPECT_NE(plan.assignments[0].placement.node, plan.assignments[1].placement.node);

  ClusterState t({MakeNode("n0", 8), MakeNode("n1", 8)});
  plan = ScheduleOnce(t, Members(kTask.Whole(1).Gang("j-1", 3).PerNode(1), 3), *p);
  EXPECT_TRUE(plan.assignments.empty());
  ASSERT_EQ(plan.pending.size(), 3u);
  EXPECT_EQ(plan.pending[0].reason,
            "gang j-1: member m2 does not fit: 2 node(s) that fit hold 1 member(s) already");
  EXPECT_EQ(t.AllocatedGpuMilli(), 0);

  // Two per node: the three fit.
  ClusterState u({MakeNode("n0", 8), MakeNode("n1", 8)});
  plan = ScheduleOnce(u, Members(kTask.Whole(1).Gang("j-1", 3).PerNode(2), 3), *p);
  EXPECT_EQ(plan.assignments.size(), 3u);
}

TEST(GangTest, EightGpuMembersEachGetOneWholeNode) {
  ClusterState s({MakeNode("n0", 8), MakeNode("n1", 8), MakeNode("n2", 4), MakeNode("n3", 4)});
  std::unique_ptr<Policy> p = Make("first-fit");
  // Packing allowed: still each member's 8 GPUs on one node (a task is never split).
  const Plan plan = ScheduleOnce(s, Members(kTask.Whole(8).Gang("j-1", 2).PerNode(4), 2), *p);
  ASSERT_EQ(plan.assignments.size(), 2u);
  std::set<int> nodes;
  for (const Assignment& a : plan.assignments) {
    EXPECT_EQ(a.placement.gpus.size(), 8u);
    EXPECT_LT(a.placement.node, 2) << "only n0 and n1 have 8 GPUs";
    nodes.insert(a.placement.node);
  }
  EXPECT_EQ(nodes.size(), 2u);
  // A third 8-GPU member has nowhere to go: the 4-GPU nodes never take part of one.
  ClusterState t({MakeNode("n0", 8), MakeNode("n1", 8), MakeNode("n2", 4), MakeNode("n3", 4)});
  const Plan three = ScheduleOnce(t, Members(kTask.Whole(8).Gang("j-1", 3).PerNode(4), 3), *p);
  EXPECT_TRUE(three.assignments.empty());
  EXPECT_EQ(t.AllocatedGpuMilli(), 0);
}

TEST(GangTest, RequiredTopologyKeepsTheMembersUnderOneLabelValueOrWaits) {
  // Rack a: two 4-GPU nodes, one of them half used; rack b: two free 4-GPU nodes. Two members of
  // 4 GPUs fit only in rack b.
  ClusterState s({InRack(MakeNode("a0", 4), "a"), InRack(MakeNode("a1", 4), "a"),
                  InRack(MakeNode("b0", 4), "b"), InRack(MakeNode("b1", 4), "b")});
  ASSERT_TRUE(s.Bind("busy", kTask.Whole(2), Placement{1, {0, 1}, 1000, 0, std::nullopt}));
  std::unique_ptr<Policy> p = Make("first-fit");
  const Req job = kTask.Whole(4).Gang("j-1", 2).PerNode(1).Topology("rack", Topology::kRequired);
  Plan plan = ScheduleOnce(s, Members(job, 2), *p);
  ASSERT_EQ(plan.assignments.size(), 2u);
  for (const Assignment& a : plan.assignments) {
    EXPECT_EQ(s.node(a.placement.node).labels.at("rack"), "b");
  }
  // Three members: no rack holds them. Required: all wait, with the reason; nothing reserved.
  ClusterState t({InRack(MakeNode("a0", 4), "a"), InRack(MakeNode("a1", 4), "a"),
                  InRack(MakeNode("b0", 4), "b"), InRack(MakeNode("b1", 4), "b")});
  plan = ScheduleOnce(t, Members(job.Gang("j-1", 3), 3), *p);
  EXPECT_TRUE(plan.assignments.empty());
  ASSERT_EQ(plan.pending.size(), 3u);
  EXPECT_EQ(plan.pending[0].reason,
            "gang j-1 needs its 3 members under one value of node label rack: none has room "
            "(rack=a: 2 of 3 placed, rack=b: 2 of 3 placed)");
  EXPECT_EQ(t.AllocatedGpuMilli(), 0);
  // Preferred: placed across the racks instead.
  const Req preferred = job.Gang("j-1", 3).Topology("rack", Topology::kPreferred);
  plan = ScheduleOnce(t, Members(preferred, 3), *p);
  EXPECT_EQ(plan.assignments.size(), 3u);
}

// ---------------------------------------------------------------------------------------------
// Preemption.

// n0, one GPU: p1 (priority 1, 300), p0 (priority 0, 300), mid (priority 5, 300) → 100 left.
ClusterState PreemptState() {
  ClusterState s({MakeNode("n0", 1)});
  BindShare(s, "p1", kTask.Share(300).Priority(1), 0, 0);
  BindShare(s, "p0", kTask.Share(300), 0, 0);
  BindShare(s, "mid", kTask.Share(300).Priority(5), 0, 0);
  return s;
}

TEST(PreemptTest, LowestPriorityVictimExplained) {
  // hi (priority 5) needs 400: releasing p0 (the lowest) gives 100 + 300 = 400. mid (priority
  // 5, equal) is never a victim; p1 is not needed.
  ClusterState s = PreemptState();
  std::unique_ptr<Policy> p = Make("first-fit");
  const std::vector<QueuedTask> q = {{"hi", kTask.Share(400).Priority(5)}};
  const Plan plan = ScheduleOnce(s, q, *p);
  ASSERT_EQ(plan.assignments.size(), 1u);
  const Assignment& a = plan.assignments[0];
  EXPECT_EQ(a.task_id, "hi");
  EXPECT_EQ(a.preempted, std::vector<std::string>{"p0"});
  EXPECT_EQ(a.placement.node, 0);
  EXPECT_EQ(a.placement.gpus, std::vector<int>{0});
  ASSERT_EQ(plan.preemptions.size(), 1u);
  EXPECT_EQ(plan.preemptions[0].victim_id, "p0");
  EXPECT_EQ(plan.preemptions[0].for_task, "hi");
  EXPECT_EQ(plan.preemptions[0].reason,
            "p0 (priority 0) preempted by hi (priority 5) to fit on n0");
  EXPECT_TRUE(plan.pending.empty());
  // The state after the pass: p0 released, hi bound, the GPU full (300 + 300 + 400).
  EXPECT_EQ(s.FindBinding("p0"), nullptr);
  ASSERT_NE(s.FindBinding("hi"), nullptr);
  EXPECT_NE(s.FindBinding("p1"), nullptr);
  EXPECT_NE(s.FindBinding("mid"), nullptr);
  EXPECT_EQ(MilliFree(s.node(0)), std::vector<int32_t>{0});
  EXPECT_EQ(s.AllocatedGpuMilli(), 1000);
  EXPECT_EQ(s.TasksOn(0), (std::vector<std::string>{"p1", "mid", "hi"}));
}

TEST(PreemptTest, DisabledByOption) {
  ClusterState s = PreemptState();
  std::unique_ptr<Policy> p = Make("first-fit");
  const std::vector<QueuedTask> q = {{"hi", kTask.Share(400).Priority(5)}};
  ScheduleOptions o;
  o.allow_preemption = false;
  const Plan plan = ScheduleOnce(s, q, *p, o);
  EXPECT_TRUE(plan.assignments.empty());
  EXPECT_TRUE(plan.preemptions.empty());
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].reason, "no node fits: 1 node: no GPU with 400 milli free");
  EXPECT_NE(s.FindBinding("p0"), nullptr);
  EXPECT_EQ(s.AllocatedGpuMilli(), 900);
}

// Cheapest victim set across nodes. Each node has one GPU; `bound` lists (id, milli, priority)
// per node; the task asks `need` milli at priority 5.
struct Victim {
  const char* id;
  int32_t milli;
  int priority;
};
struct PreemptRow {
  const char* name;
  std::vector<std::vector<Victim>> bound;  // per node, in bind order
  int32_t need;
  int want_node;                  // -1: pending, nothing preempted
  std::vector<std::string> want;  // victims, in the plan's order
};
void PrintTo(const PreemptRow& row, std::ostream* os) { *os << row.name; }

class PreemptChoiceTest : public testing::TestWithParam<PreemptRow> {};

TEST_P(PreemptChoiceTest, CheapestSet) {
  const PreemptRow& row = GetParam();
  std::vector<Node> nodes;
  for (size_t i = 0; i < row.bound.size(); ++i)
    nodes.push_back(MakeNode("n" + std::to_string(i), 1));
  ClusterState s(nodes);
  for (size_t n = 0; n < row.bound.size(); ++n) {
    for (const Victim& v : row.bound[n]) {
      BindShare(s, v.id, kTask.Share(v.milli).Priority(v.priority), static_cast<int>(n), 0);
    }
  }
  std::unique_ptr<Policy> p = Make("first-fit");
  const std::vector<QueuedTask> q = {{"hi", kTask.Share(row.need).Priority(5)}};
  const Plan plan = ScheduleOnce(s, q, *p);
  if (row.want_node < 0) {
    EXPECT_TRUE(plan.assignments.empty());
    EXPECT_TRUE(plan.preemptions.empty());
    EXPECT_NE(FindPending(plan, "hi"), nullptr);
    for (const auto& node : row.bound) {
      for (const Victim& v : node) EXPECT_NE(s.FindBinding(v.id), nullptr) << v.id;
    }
    return;
  }
  ASSERT_EQ(plan.assignments.size(), 1u);
  EXPECT_EQ(plan.assignments[0].placement.node, row.want_node);
  // Victim order is not part of the contract: compare as sets.
  std::vector<std::string> got = plan.assignments[0].preempted;
  std::vector<std::string> want = row.want;
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  ASSERT_EQ(plan.preemptions.size(), row.want.size());
  for (size_t i = 0; i < plan.preemptions.size(); ++i) {
    const Preemption& pre = plan.preemptions[i];
    EXPECT_EQ(pre.victim_id, plan.assignments[0].preempted[i]);
    EXPECT_EQ(pre.for_task, "hi");
    const std::string node = "n" + std::to_string(row.want_node);
    EXPECT_NE(pre.reason.find(pre.victim_id + " (priority "), std::string::npos) << pre.reason;
    EXPECT_NE(pre.reason.find(") preempted by hi (priority 5) to fit on "), std::string::npos)
        << pre.reason;
    EXPECT_NE(pre.reason.find(") to fit on " + node), std::string::npos) << pre.reason;
    EXPECT_EQ(s.FindBinding(pre.victim_id), nullptr);
  }
  EXPECT_NE(s.FindBinding("hi"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(
    Schedule, PreemptChoiceTest,
    testing::ValuesIn(std::vector<PreemptRow>{
        // n0: one priority-3 task of 600 (400 free); n1: two priority-0 tasks of 300 (400 free).
        // 900 needed. Costs (top priority, count): n0 (3, 1), n1 (0, 2) → n1: lower priority
        // beats fewer victims.
        {"lowest_priority_first",
         {{{"x3", 600, 3}}, {{"a", 300, 0}, {"b", 300, 0}}},
         900,
         1,
         {"a", "b"}},
        // n0: two priority-0 tasks of 300; n1: one priority-0 task of 600. 900 needed:
        // n0 (0, 2), n1 (0, 1) → n1, one victim.
        {"fewest_victims", {{{"a", 300, 0}, {"b", 300, 0}}, {{"c", 600, 0}}}, 900, 1, {"c"}},
        // Same priority and count: n0 frees 700 (victim 700), n1 frees 600 → less GPU lost: n1.
        {"least_milli", {{{"a", 700, 0}}, {{"b", 600, 0}}}, 900, 1, {"b"}},
        // Everything equal: the lower node index.
        {"lowest_node_on_equal_cost", {{{"a", 600, 0}}, {{"b", 600, 0}}}, 900, 0, {"a"}},
        // One GPU: b (600) then a (100) bound, 300 free; 800 needed. Released a, then b; a is
        // given back (300 + 600 = 900 ≥ 800 without it): only b.
        {"unneeded_victim_given_back", {{{"b", 600, 0}, {"a", 100, 0}}}, 800, 0, {"b"}},
        // Equal priority is never preempted.
        {"equal_priority_not_preempted", {{{"a", 600, 5}}}, 900, -1, {}},
        {"higher_priority_not_preempted", {{{"a", 600, 6}}}, 900, -1, {}},
        // Releasing every lower-priority task is still not enough: the 200 of priority 7 stays,
        // so at most 200 free + 600 = 800 < 900.
        {"not_enough_even_with_all", {{{"a", 600, 0}, {"k", 200, 7}}}, 900, -1, {}},
        // One GPU full with big (500) then s1, s2 (250 each), all priority 0; 500 needed. The
        // cheapest set is {big}: one victim. {s1, s2} frees the same 500 with two.
        {"fewest_victims_on_one_node",
         {{{"big", 500, 0}, {"s1", 250, 0}, {"s2", 250, 0}}},
         500,
         0,
         {"big"}},
    }),
    RowName());

// Among equal priorities the most recently bound task is released first. A preemption search
// that fails must not change which task that is: n0 holds a (300, priority 0), then b (300,
// priority 0), then k (300, priority 7); 100 free. t1 (1000) cannot fit even without a and b
// (k stays) → pending. t2 (400) needs one victim: b, the most recently bound of the two.
TEST(PreemptTest, FailedSearchKeepsBindOrder) {
  ClusterState s({MakeNode("n0", 1)});
  BindShare(s, "a", kTask.Share(300), 0, 0);
  BindShare(s, "b", kTask.Share(300), 0, 0);
  BindShare(s, "k", kTask.Share(300).Priority(7), 0, 0);
  std::unique_ptr<Policy> p = Make("first-fit");
  const std::vector<QueuedTask> q = {{"t1", kTask.Whole(1).Priority(5)},
                                     {"t2", kTask.Share(400).Priority(5)}};
  const Plan plan = ScheduleOnce(s, q, *p);
  EXPECT_EQ(PendingIds(plan), std::vector<std::string>{"t1"});
  ASSERT_NE(FindAssignment(plan, "t2"), nullptr);
  EXPECT_EQ(FindAssignment(plan, "t2")->preempted, std::vector<std::string>{"b"});
  EXPECT_NE(s.FindBinding("a"), nullptr);
}

// A priority-0 task never preempts.
TEST(PreemptTest, PriorityZeroNeverPreempts) {
  ClusterState s({MakeNode("n0", 1)});
  BindShare(s, "a", kTask.Share(900), 0, 0);
  std::unique_ptr<Policy> p = Make("first-fit");
  const std::vector<QueuedTask> q = {{"t", kTask.Share(500)}};
  const Plan plan = ScheduleOnce(s, q, *p);
  EXPECT_TRUE(plan.preemptions.empty());
  EXPECT_EQ(PendingIds(plan), std::vector<std::string>{"t"});
}

// Gangs do not preempt: a gang of high priority waits.
TEST(PreemptTest, GangsDoNotPreempt) {
  ClusterState s({MakeNode("n0", 1), MakeNode("n1", 1)});
  BindShare(s, "a", kTask.Share(900), 0, 0);
  std::unique_ptr<Policy> p = Make("first-fit");
  const std::vector<QueuedTask> q = {{"g1", kTask.Whole(1).Priority(9).Gang("g", 2)},
                                     {"g2", kTask.Whole(1).Priority(9).Gang("g", 2)}};
  const Plan plan = ScheduleOnce(s, q, *p);
  EXPECT_TRUE(plan.preemptions.empty());
  EXPECT_EQ(PendingIds(plan), (std::vector<std::string>{"g1", "g2"}));
  EXPECT_NE(s.FindBinding("a"), nullptr);
  EXPECT_EQ(s.AllocatedGpuMilli(), 900);
}

// ---------------------------------------------------------------------------------------------
// Preemption by the work victims lose (WorkState, issue 15). The clock: now = 1,000 s.

constexpr int64_t kNowMs = 1'000'000;

// Work unsaved for the last `seconds`, not snapshotted on stop.
WorkState UnsavedFor(int64_t seconds) { return WorkState{kNowMs - seconds * 1000, 0, false, 0}; }
// Snapshotted on stop, at `seconds` of snapshot and restore (and hours of unsaved work).
WorkState SnapshotOnStop(int64_t seconds) { return WorkState{1, 0, true, seconds * 1000}; }

struct WorkVictim {
  const char* id;
  int32_t milli;
  int priority;
  WorkState work;
};
struct WorkRow {
  const char* name;
  std::vector<std::vector<WorkVictim>> bound;  // per node (one GPU each), in bind order
  int32_t need;                                // milli asked at priority 5
  std::vector<std::string> want;               // victims, as a set
  std::string want_reason;  // the first victim's reason (the most recently bound goes first)
};
void PrintTo(const WorkRow& row, std::ostream* os) { *os << row.name; }

class PreemptWorkTest : public testing::TestWithParam<WorkRow> {};

TEST_P(PreemptWorkTest, CheapestByWorkLost) {
  const WorkRow& row = GetParam();
  std::vector<Node> nodes;
  for (size_t i = 0; i < row.bound.size(); ++i) {
    nodes.push_back(MakeNode("n" + std::to_string(i), 1));
  }
  ClusterState s(nodes);
  for (size_t n = 0; n < row.bound.size(); ++n) {
    for (const WorkVictim& v : row.bound[n]) {
      const Req r = kTask.Share(v.milli).Priority(v.priority);
      ASSERT_TRUE(
          s.Bind(v.id, r, Placement{static_cast<int>(n), {0}, v.milli, 0, std::nullopt}, v.work)
              .has_value());
    }
  }
  std::unique_ptr<Policy> p = Make("first-fit");
  ScheduleOptions o;
  o.now_ms = kNowMs;
  const std::vector<QueuedTask> q = {{"hi", kTask.Share(row.need).Priority(5)}};
  const Plan plan = ScheduleOnce(s, q, *p, o);
  ASSERT_EQ(plan.assignments.size(), 1u);
  std::vector<std::string> got = plan.assignments[0].preempted;
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, row.want);
  ASSERT_FALSE(plan.preemptions.empty());
  EXPECT_EQ(plan.preemptions[0].reason, row.want_reason);
}

INSTANTIATE_TEST_SUITE_P(
    Schedule, PreemptWorkTest,
    testing::ValuesIn(std::vector<WorkRow>{
        // Same priority, size and count: n0's victim loses 0.6 × 900 = 540 GPU-s, n1's 6.
        {"least_work_lost_over_node_order",
         {{{"a", 600, 0, UnsavedFor(900)}}, {{"b", 600, 0, UnsavedFor(10)}}},
         900,
         {"b"},
         "b (priority 0) preempted by hi (priority 5) to fit on n1; 6.0 GPU-s of work since its "
         "last snapshot (or start)"},
        // Less work lost beats fewer victims: n0 loses 540 GPU-s with one, n1 6 with two.
        {"least_work_lost_over_fewest_victims",
         {{{"a", 600, 0, UnsavedFor(900)}},
          {{"b", 300, 0, UnsavedFor(10)}, {"c", 300, 0, UnsavedFor(10)}}},
         900,
         {"b", "c"},
         "c (priority 0) preempted by hi (priority 5) to fit on n1; 3.0 GPU-s of work since its "
         "last snapshot (or start)"},
        // The lowest priority still comes first: b loses 540 GPU-s at priority 0, a 0.6 at 1.
        {"lowest_priority_over_work_lost",
         {{{"a", 600, 1, UnsavedFor(1)}}, {{"b", 600, 0, UnsavedFor(900)}}},
         900,
         {"b"},
         "b (priority 0) preempted by hi (priority 5) to fit on n1; 540 GPU-s of work since its "
         "last snapshot (or start)"},
        // Snapshotted on stop, a loses only 0.6 × 5 s; b would lose 0.6 × 20 s.
        {"snapshot_on_stop_loses_only_snapshot_and_restore",
         {{{"a", 600, 0, SnapshotOnStop(5)}}, {{"b", 600, 0, UnsavedFor(20)}}},
         900,
         {"a"},
         "a (priority 0) preempted by hi (priority 5) to fit on n0; snapshotted first: 3.0 GPU-s "
         "to snapshot and restore"},
        // Periodic snapshots every 100 s since 900 s ago: a has 0 s unsaved (one just now), b 50.
        {"periodic_snapshots",
         {{{"b", 600, 0, UnsavedFor(50)}},
          {{"a", 600, 0, WorkState{kNowMs - 900'000, 100'000, false, 0}}}},
         900,
         {"a"},
         "a (priority 0) preempted by hi (priority 5) to fit on n1; 0.0 GPU-s of work since its "
         "last snapshot (or start)"},
        // On one node: the two small ones lose less than the big one that alone would do.
        {"two_cheap_over_one_dear_on_a_node",
         {{{"big", 500, 0, UnsavedFor(600)},
           {"s1", 250, 0, UnsavedFor(10)},
           {"s2", 250, 0, UnsavedFor(10)}}},
         500,
         {"s1", "s2"},
         "s2 (priority 0) preempted by hi (priority 5) to fit on n0; 2.5 GPU-s of work since its "
         "last snapshot (or start)"},
    }),
    RowName());

// ---------------------------------------------------------------------------------------------
// Move instead of kill (ScheduleOptions::allow_moves).

// Binds `id` on whole GPUs [first, first + r.gpu_count) of `node` with `work`.
void BindWhole(ClusterState& s, const std::string& id, const TaskRequest& r, int node, int first,
               const WorkState& work) {
  std::vector<int> gpus;
  for (int g = first; g < first + r.gpu_count; ++g) gpus.push_back(g);
  ASSERT_TRUE(s.Bind(id, r, Placement{node, gpus, kMilliPerGpu, 0, std::nullopt}, work).has_value())
      << id;
}

ScheduleOptions Moves() {
  ScheduleOptions o;
  o.now_ms = kNowMs;
  o.allow_moves = true;
  return o;
}

// n0 is the only node with 8 GPUs; a movable one-GPU task s1 holds one of them; n1 (2 GPUs) is
// free. The 8-GPU task, of s1's priority, can neither fit nor preempt: s1 moves to n1 and it gets
// n0.
TEST(MoveTest, MovesASmallTaskToLetAnEightGpuTaskIn) {
  ClusterState s({MakeNode("n0", 8), MakeNode("n1", 2)});
  BindWhole(s, "s1", kTask.Whole(1), 0, 0, SnapshotOnStop(4));
  std::unique_ptr<Policy> p = Make("first-fit");
  const std::vector<QueuedTask> q = {{"big", kTask.Whole(8)}};
  {
    ClusterState without = s;
    const Plan plan = ScheduleOnce(without, q, *p);  // moves off by default
    EXPECT_EQ(PendingIds(plan), std::vector<std::string>{"big"});
    EXPECT_TRUE(plan.moves.empty());
  }
  const Plan plan = ScheduleOnce(s, q, *p, Moves());
  EXPECT_TRUE(plan.preemptions.empty());
  ASSERT_EQ(plan.assignments.size(), 1u);
  const Assignment& a = plan.assignments[0];
  EXPECT_EQ(a.task_id, "big");
  EXPECT_EQ(a.placement.node, 0);
  EXPECT_EQ(a.moved, std::vector<std::string>{"s1"});
  EXPECT_TRUE(a.preempted.empty());
  ASSERT_EQ(plan.moves.size(), 1u);
  const Move& m = plan.moves[0];
  EXPECT_EQ(m.task_id, "s1");
  EXPECT_EQ(m.from_node, 0);
  EXPECT_EQ(m.to.node, 1);
  EXPECT_EQ(m.to.gpus, std::vector<int>{0});
  EXPECT_EQ(m.for_task, "big");
  EXPECT_EQ(m.reason,
            "s1 moved from n0 to n1 to make room for big; 4.0 GPU-s to snapshot and "
            "restore");
  // The state as the plan leaves it: s1 on n1, resuming from a snapshot taken now; big on n0.
  const Binding* moved = s.FindBinding("s1");
  ASSERT_NE(moved, nullptr);
  EXPECT_EQ(moved->placement.node, 1);
  EXPECT_EQ(moved->work.unsaved_since_ms, kNowMs);
  EXPECT_TRUE(moved->work.snapshot_on_stop);
  EXPECT_EQ(s.TasksOn(0), std::vector<std::string>{"big"});
  EXPECT_EQ(s.AllocatedGpuMilli(), 9000);
}

// Which set moves: the least GPU time of snapshot and restore (GPU × seconds), then the fewest
// tasks, then the least GPU.
struct MoveRow {
  const char* name;
  int64_t a_restore_s;  // a: 2 GPUs on n0
  int64_t b_restore_s;  // b: 1 GPU on n1
  int want_node;
};
void PrintTo(const MoveRow& row, std::ostream* os) { *os << row.name; }

class MoveChoiceTest : public testing::TestWithParam<MoveRow> {};

TEST_P(MoveChoiceTest, CheapestSet) {
  const MoveRow& row = GetParam();
  ClusterState s({MakeNode("n0", 8), MakeNode("n1", 8), MakeNode("n2", 4)});
  BindWhole(s, "a", kTask.Whole(2), 0, 0, SnapshotOnStop(row.a_restore_s));
  BindWhole(s, "b", kTask.Whole(1), 1, 0, SnapshotOnStop(row.b_restore_s));
  std::unique_ptr<Policy> p = Make("first-fit");
  const Plan plan = ScheduleOnce(s, std::vector<QueuedTask>{{"big", kTask.Whole(8)}}, *p, Moves());
  ASSERT_EQ(plan.assignments.size(), 1u);
  EXPECT_EQ(plan.assignments[0].placement.node, row.want_node);
  ASSERT_EQ(plan.moves.size(), 1u);
  EXPECT_EQ(plan.moves[0].task_id, row.want_node == 0 ? "a" : "b");
  EXPECT_NE(plan.moves[0].to.node, row.want_node);
}

INSTANTIATE_TEST_SUITE_P(Schedule, MoveChoiceTest,
                         testing::ValuesIn(std::vector<MoveRow>{
                             // a: 2 GPUs × 5 s = 10 GPU-s; b: 1 × 5 = 5 → b, on n1.
                             {"least_gpu_time", 5, 5, 1},
                             // a: 2 × 1 s = 2 GPU-s; b: 1 × 5 = 5 → a, on n0.
                             {"snapshot_and_restore_time_counts", 1, 5, 0},
                             // 2 × 5 = 10 GPU-s both ways: the least GPU moved, b.
                             {"least_gpu_on_equal_cost", 5, 10, 1},
                         }),
                         RowName());

// No proposal, and nothing changed, when the tasks that would have to move fit nowhere else: n1
// has room for one of the two 4-GPU tasks but not for both, which n0 needs gone.
TEST(MoveTest, NoProposalWhenTheMoversFitNowhereElse) {
  ClusterState s({MakeNode("n0", 8), MakeNode("n1", 8)});
  BindWhole(s, "s1", kTask.Whole(4), 0, 0, SnapshotOnStop(1));
  BindWhole(s, "s2", kTask.Whole(4), 0, 4, SnapshotOnStop(1));
  BindWhole(s, "x", kTask.Whole(4), 1, 0, WorkState{});
  std::unique_ptr<Policy> p = Make("first-fit");
  const Plan plan = ScheduleOnce(s, std::vector<QueuedTask>{{"big", kTask.Whole(8)}}, *p, Moves());
  EXPECT_TRUE(plan.moves.empty());
  EXPECT_EQ(PendingIds(plan), std::vector<std::string>{"big"});
  EXPECT_EQ(s.TasksOn(0), (std::vector<std::string>{"s1", "s2"}));
  EXPECT_EQ(s.TasksOn(1), std::vector<std::string>{"x"});
  EXPECT_EQ(s.AllocatedGpuMilli(), 12000);
}

// Only tasks snapshotted on stop, not in a gang and of at most the waiting task's priority move
// (the waiting task has priority 0: it cannot preempt either).
TEST(MoveTest, OnlyMovableTasksMove) {
  const std::vector<std::pair<const char*, std::pair<Req, WorkState>>> blockers = {
      {"not_snapshotted_on_stop", {kTask.Whole(1), UnsavedFor(10)}},
      {"gang_member", {kTask.Whole(1).Gang("g", 2), SnapshotOnStop(1)}},
      {"higher_priority", {kTask.Whole(1).Priority(1), SnapshotOnStop(1)}},
  };
  for (const auto& [name, blocker] : blockers) {
    SCOPED_TRACE(name);
    ClusterState s({MakeNode("n0", 8), MakeNode("n1", 2)});
    BindWhole(s, "s1", blocker.first, 0, 0, blocker.second);
    std::unique_ptr<Policy> p = Make("first-fit");
    const Plan plan =
        ScheduleOnce(s, std::vector<QueuedTask>{{"big", kTask.Whole(8)}}, *p, Moves());
    EXPECT_TRUE(plan.moves.empty());
    EXPECT_EQ(PendingIds(plan), std::vector<std::string>{"big"});
  }
}

// With move_any_priority a task of higher priority moves too (it loses no work), still never to
// make room by preemption: the waiting task has priority 0.
TEST(MoveTest, AnyPriorityMovesHigherPriorityTasks) {
  ClusterState s({MakeNode("n0", 8), MakeNode("n1", 2)});
  BindWhole(s, "ls", kTask.Whole(1).Priority(200), 0, 0, SnapshotOnStop(1));
  std::unique_ptr<Policy> p = Make("first-fit");
  ScheduleOptions o = Moves();
  o.move_any_priority = true;
  const Plan plan = ScheduleOnce(s, std::vector<QueuedTask>{{"big", kTask.Whole(8)}}, *p, o);
  ASSERT_EQ(plan.moves.size(), 1u);
  EXPECT_EQ(plan.moves[0].task_id, "ls");
  EXPECT_EQ(plan.moves[0].to.node, 1);
  ASSERT_NE(FindAssignment(plan, "big"), nullptr);
  EXPECT_EQ(FindAssignment(plan, "big")->moved, std::vector<std::string>{"ls"});
}

// ---------------------------------------------------------------------------------------------
// MIG through the scheduler.

Node MigNode(const std::string& name, bool mig_mode, const std::vector<MigInst>& instances) {
  return WithMig(MakeNode(name, 1, "A100-80GB"), 0, instances, mig_mode);
}

struct MigRow {
  const char* name;
  Node node;
  const char* profile;
  MigAction action;
  int start;
  size_t instances_after;
};
void PrintTo(const MigRow& row, std::ostream* os) { *os << row.name; }

class MigScheduleTest : public testing::TestWithParam<MigRow> {};

TEST_P(MigScheduleTest, Placement) {
  const MigRow& row = GetParam();
  for (const char* policy : {"fgd-plan", "first-fit", "fgd"}) {
    SCOPED_TRACE(policy);
    ClusterState s({row.node});
    std::unique_ptr<Policy> p = Make(policy);
    const std::vector<QueuedTask> q = {{"m", kTask.Mig(row.profile)}};
    const Plan plan = ScheduleOnce(s, q, *p);
    ASSERT_EQ(plan.assignments.size(), 1u);
    const Placement& pl = plan.assignments[0].placement;
    EXPECT_EQ(pl.gpus, std::vector<int>{0});
    ASSERT_TRUE(pl.mig.has_value());
    EXPECT_EQ(pl.mig->action, row.action);
    EXPECT_EQ(pl.mig->start, row.start);
    // The state holds the instance, in use, at that slot.
    const Gpu& g = s.node(0).gpus[0];
    EXPECT_TRUE(g.mig_enabled);
    EXPECT_EQ(g.mig_instances.size(), row.instances_after);
    int in_use_at_start = 0;
    for (const MigInstance& m : g.mig_instances)
      in_use_at_start += m.start == row.start && m.in_use;
    EXPECT_EQ(in_use_at_start, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schedule, MigScheduleTest,
    testing::ValuesIn(std::vector<MigRow>{
        // 3g@0 in use, 3g@4 unused: reuse the one at 4 (still 2 instances).
        {"reuse_free_instance", MigNode("n0", true, {{"3g.40gb", 0, true}, {"3g.40gb", 4, false}}),
         "3g.40gb", MigAction::kUseFree, 4, 2},
        // 3g@0 in use only: create one at the free half, slot 4.
        {"create_in_free_slot", MigNode("n0", true, {{"3g.40gb", 0, true}}), "3g.40gb",
         MigAction::kCreate, 4, 2},
        // Idle GPU not in MIG mode: propose enabling MIG (a re-partition), 7g at 0.
        {"repartition_idle_gpu", MigNode("n0", false, {}), "7g.80gb", MigAction::kRepartition, 0,
         1},
        // An unused 7g covers every slot: destroy it to make the 4g at 0.
        {"repartition_destroys_unused", MigNode("n0", true, {{"7g.80gb", 0, false}}), "4g.40gb",
         MigAction::kRepartition, 0, 1},
    }),
    RowName());

TEST(MigScheduleTest, RepartitionIsAProposalInThePlan) {
  ClusterState s({MigNode("n0", false, {})});
  std::unique_ptr<Policy> p = Make("default");
  const std::vector<QueuedTask> q = {{"m", kTask.Mig("3g.40gb")}};
  const Plan plan = ScheduleOnce(s, q, *p);
  ASSERT_EQ(plan.assignments.size(), 1u);
  ASSERT_TRUE(plan.assignments[0].placement.mig.has_value());
  EXPECT_EQ(plan.assignments[0].placement.mig->action, MigAction::kRepartition);
  EXPECT_TRUE(plan.assignments[0].placement.mig->enable_mig);
}

// fgd-plan prefers the node where an instance is reused over one that must be re-partitioned;
// first-fit takes the first node.
TEST(MigScheduleTest, CheapestActionAcrossNodes) {
  const std::vector<Node> nodes = {MigNode("n0", false, {}),
                                   MigNode("n1", true, {{"3g.40gb", 4, false}})};
  const std::vector<QueuedTask> q = {{"m", kTask.Mig("3g.40gb")}};
  {
    ClusterState s(nodes);
    std::unique_ptr<Policy> p = Make("fgd-plan");
    const Plan plan = ScheduleOnce(s, q, *p);
    ASSERT_EQ(plan.assignments.size(), 1u);
    EXPECT_EQ(plan.assignments[0].placement.node, 1);
    EXPECT_EQ(plan.assignments[0].placement.mig->action, MigAction::kUseFree);
  }
  {
    ClusterState s(nodes);
    std::unique_ptr<Policy> p = Make("first-fit");
    const Plan plan = ScheduleOnce(s, q, *p);
    ASSERT_EQ(plan.assignments.size(), 1u);
    EXPECT_EQ(plan.assignments[0].placement.node, 0);
  }
}

// A MIG request that fits nowhere pends with the MIG reason.
TEST(MigScheduleTest, NoRoomPends) {
  ClusterState s({MigNode("n0", true, {{"4g.40gb", 0, true}, {"3g.40gb", 4, true}})});
  std::unique_ptr<Policy> p = Make("fgd-plan");
  const std::vector<QueuedTask> q = {{"m", kTask.Mig("1g.10gb")}};
  const Plan plan = ScheduleOnce(s, q, *p);
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].reason, "no node fits: 1 node: no room for MIG 1g.10gb");
}

}  // namespace
}  // namespace gpupool::sched
