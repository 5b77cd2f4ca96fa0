// Tests for sched/cluster_snapshot and the change journal under it (ClusterState's ChangeSeq,
// NodeVersion, NodesChangedSince, CopyNodesFrom): a snapshot does not see later changes, a
// refresh copies only what changed on either side and leaves the snapshot equal to a full copy,
// a plan made on a stale snapshot is refused by the live state's Bind, and plans made on a
// refreshed snapshot (warm policy caches) are the plans a fresh copy gives.
#include "sched/cluster_snapshot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/node.h"
#include "core/task.h"
#include "sched/fragmentation.h"
#include "sched/policy.h"
#include "sched/schedule.h"

namespace gpupool::sched {
namespace {

TaskRequest Share(int32_t milli) {
  TaskRequest r;
  r.cpu_milli = 1000;
  r.memory_mib = 1024;
  r.gpu_milli = milli;
  return r;
}

TaskRequest Whole(int count) {
  TaskRequest r;
  r.cpu_milli = 1000;
  r.memory_mib = 1024;
  r.gpu_count = count;
  return r;
}

Node GpuNode(int i, int gpus = 8) {
  return Node::Make("node-" + std::to_string(i), 64'000, 262'144, gpus,
                    i % 3 == 2 ? "V100-32GB" : "A100-80GB");
}

ClusterState Cluster(int nodes) {
  ClusterState s;
  for (int i = 0; i < nodes; ++i) s.AddNode(GpuNode(i));
  return s;
}

Placement OnGpus(int node, std::vector<int> gpus, int32_t milli) {
  return Placement{node, std::move(gpus), milli, 0, std::nullopt};
}

// Everything a decision can read of a state, except its versions and InstanceId.
void ExpectSameContent(const ClusterState& a, const ClusterState& b) {
  ASSERT_EQ(a.NodeCount(), b.NodeCount());
  ASSERT_EQ(a.ModelCount(), b.ModelCount());
  for (int m = 0; m < a.ModelCount(); ++m) {
    EXPECT_EQ(a.ModelName(m), b.ModelName(m));
    EXPECT_TRUE(std::ranges::equal(a.NodesOfModel(m), b.NodesOfModel(m))) << "model " << m;
    for (int32_t left = 1; left < kMilliPerGpu; ++left) {
      ASSERT_EQ(a.PartialGpuCount(m, left), b.PartialGpuCount(m, left)) << m << " " << left;
    }
  }
  EXPECT_TRUE(std::ranges::equal(a.AllNodes(), b.AllNodes()));
  EXPECT_TRUE(std::ranges::equal(a.NodesWithGpus(), b.NodesWithGpus()));
  EXPECT_TRUE(std::ranges::equal(a.NodesWithoutGpus(), b.NodesWithoutGpus()));
  for (int k = 1; k <= kMaxGpusPerTask; ++k) {
    EXPECT_TRUE(std::ranges::equal(a.FreeGpuBits(k), b.FreeGpuBits(k))) << "free bits " << k;
  }
  for (int32_t milli = 0; milli <= kMilliPerGpu; milli += ClusterState::kShareBitsStep) {
    EXPECT_TRUE(std::ranges::equal(a.ShareBits(milli), b.ShareBits(milli))) << "share " << milli;
  }
  EXPECT_EQ(a.TotalGpuMilli(), b.TotalGpuMilli());
  EXPECT_EQ(a.AllocatedGpuMilli(), b.AllocatedGpuMilli());
  for (int n = 0; n < a.NodeCount(); ++n) {
    SCOPED_TRACE("node " + std::to_string(n));
    ASSERT_EQ(a.node(n), b.node(n));
    EXPECT_EQ(a.FindNode(a.node(n).name), n);
    EXPECT_EQ(b.FindNode(b.node(n).name), n);
    EXPECT_EQ(a.summary(n), b.summary(n));
    EXPECT_EQ(a.NodeModelId(n), b.NodeModelId(n));
    ASSERT_EQ(a.TasksOn(n), b.TasksOn(n));
    for (const std::string& id : a.TasksOn(n)) {
      const Binding* x = a.FindBinding(id);
      const Binding* y = b.FindBinding(id);
      ASSERT_NE(x, nullptr);
      ASSERT_NE(y, nullptr) << id;
      EXPECT_EQ(x->request, y->request) << id;
      EXPECT_EQ(x->placement, y->placement) << id;
    }
    for (int g = 0; g < static_cast<int>(a.node(n).gpus.size()); ++g) {
      EXPECT_TRUE(std::ranges::equal(a.GpuShares(n, g), b.GpuShares(n, g))) << "gpu " << g;
      EXPECT_EQ(a.GpuModelId(n, g), b.GpuModelId(n, g));
    }
  }
}

TEST(ChangeJournalTest, VersionsComeFromOneCounterAndNameWhatChanged) {
  ClusterState s = Cluster(4);
  EXPECT_EQ(s.ChangeSeq(), 4u);  // adding a node is a change
  for (int n = 0; n < 4; ++n) EXPECT_EQ(s.NodeVersion(n), static_cast<uint64_t>(n) + 1);
  const uint64_t before = s.ChangeSeq();
  EXPECT_TRUE(s.NodesChangedSince(before).empty());
  ASSERT_TRUE(s.Bind("a", Share(250), OnGpus(2, {0}, 250)).has_value());
  ASSERT_TRUE(s.Bind("b", Whole(1), OnGpus(0, {1}, 1000)).has_value());
  s.SetSchedulable(2, false);
  EXPECT_EQ(s.ChangeSeq(), before + 3);
  EXPECT_EQ(s.NodeVersion(2), before + 3);
  EXPECT_EQ(s.NodeVersion(0), before + 2);
  EXPECT_EQ(s.NodesChangedSince(before), (std::vector<int>{0, 2}));  // each once, ascending
  EXPECT_EQ(s.NodesChangedSince(before + 2), std::vector<int>{2});
  EXPECT_EQ(s.NodesChangedSince(0), (std::vector<int>{0, 1, 2, 3}));
  // A refused change changes nothing.
  ASSERT_FALSE(s.Bind("a", Share(250), OnGpus(1, {0}, 250)).has_value());
  EXPECT_EQ(s.ChangeSeq(), before + 3);
}

TEST(ChangeJournalTest, StaysCompleteAndBoundedAcrossManyChanges) {
  ClusterState s = Cluster(3);
  uint64_t mark = 0;
  for (int i = 0; i < 1000; ++i) {
    if (i == 900) mark = s.ChangeSeq();
    ASSERT_TRUE(s.Bind("t", Share(100), OnGpus(i % 2, {0}, 100)).has_value());
    ASSERT_TRUE(s.Unbind("t").has_value());
  }
  EXPECT_EQ(s.NodesChangedSince(mark), (std::vector<int>{0, 1}));
  EXPECT_EQ(s.NodesChangedSince(0), (std::vector<int>{0, 1, 2}));
  // A copy carries the journal along.
  const ClusterState copy = s;
  EXPECT_EQ(copy.NodesChangedSince(mark), (std::vector<int>{0, 1}));
  EXPECT_EQ(copy.NodeVersion(1), s.NodeVersion(1));
}

TEST(ClusterSnapshotTest, DoesNotSeeLaterChangesUntilRefreshed) {
  ClusterState live = Cluster(3);
  ClusterSnapshot snap;
  EXPECT_EQ(snap.Refresh(live), 3);  // the first refresh copies all
  EXPECT_EQ(snap.version(), live.ChangeSeq());
  ExpectSameContent(snap.state(), live);

  ASSERT_TRUE(live.Bind("t1", Whole(8), OnGpus(1, {0, 1, 2, 3, 4, 5, 6, 7}, 1000)).has_value());
  live.SetSchedulable(2, false);
  const Node extra = GpuNode(3, 4);
  live.AddNode(extra);
  // The snapshot still shows the cluster as of version().
  EXPECT_EQ(snap.state().FindBinding("t1"), nullptr);
  EXPECT_EQ(snap.state().summary(1).free_gpus, 8);
  EXPECT_TRUE(snap.state().node(2).schedulable);
  EXPECT_EQ(snap.state().NodeCount(), 3);
  EXPECT_GT(live.NodeVersion(1), snap.version());
  EXPECT_LE(live.NodeVersion(0), snap.version());  // node 0 is as the snapshot shows it

  EXPECT_EQ(snap.Refresh(live), 3);  // nodes 1, 2 and the new 3; node 0 is not copied
  ExpectSameContent(snap.state(), live);
  ASSERT_NE(snap.state().FindBinding("t1"), nullptr);
  EXPECT_EQ(snap.state().FindNode(extra.name), 3);
  EXPECT_EQ(snap.Refresh(live), 0);  // nothing changed since
}

// A node whose agent registers another GPU list (UpdateNode, while idle) is copied with its
// model index, lists of nodes with and without GPUs, per-GPU tables and the totals.
TEST(ClusterSnapshotTest, ANodeRegisteringAnotherGpuListIsCopiedWithItsIndexes) {
  ClusterState live = Cluster(4);
  ClusterSnapshot snap;
  snap.Refresh(live);
  ASSERT_TRUE(live.Bind("t1", Share(300), OnGpus(0, {0}, 300)).has_value());
  ASSERT_TRUE(live.UpdateNode(1, Node::Make("node-1", 96'000, 524'288, 2, "H100-80GB")));
  ASSERT_TRUE(live.UpdateNode(3, Node::Make("node-3", 8'000, 16'384, 0, "")));
  EXPECT_EQ(snap.Refresh(live), 3);
  ExpectSameContent(snap.state(), live);
  EXPECT_EQ(snap.state().ModelName(snap.state().NodeModelId(1)), "H100-80GB");
  EXPECT_EQ(snap.state().NodeModelId(3), -1);
  EXPECT_TRUE(std::ranges::equal(snap.state().NodesWithoutGpus(), std::vector<int>{3}));
  EXPECT_EQ(snap.state().TotalGpuMilli(), (8 + 2 + 8) * kMilliPerGpu);
}

TEST(ClusterSnapshotTest, RefreshPutsBackWhatAPassReservedAndKeepsTheInstance) {
  ClusterState live = Cluster(50);
  ASSERT_TRUE(live.Bind("old", Share(500), OnGpus(7, {3}, 500)).has_value());
  ClusterSnapshot snap;
  snap.Refresh(live);
  const uint64_t instance = snap.state().InstanceId();
  auto policy = MakePolicy("best-fit", {});
  ASSERT_TRUE(policy.has_value());
  const std::vector<QueuedTask> queue = {{"q1", Share(250)}, {"q2", Whole(4)}, {"q3", Share(500)}};
  const Plan plan = ScheduleOnce(snap.state(), queue, **policy);
  ASSERT_EQ(plan.assignments.size(), 3u);
  std::vector<int> touched;
  for (const Assignment& a : plan.assignments) touched.push_back(a.placement.node);
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  ASSERT_NE(snap.state().FindBinding("q1"), nullptr);  // reserved in the snapshot only
  EXPECT_EQ(live.FindBinding("q1"), nullptr);

  // The applier binds q1 and q3 as planned; q2 is refused elsewhere (not bound in live).
  for (const Assignment& a : plan.assignments) {
    if (a.task_id == "q2") continue;
    const TaskRequest& r = a.task_id == "q1" ? queue[0].request : queue[2].request;
    ASSERT_TRUE(live.Bind(a.task_id, r, a.placement).has_value());
  }
  EXPECT_EQ(snap.Refresh(live), static_cast<int>(touched.size()));
  ExpectSameContent(snap.state(), live);
  EXPECT_EQ(snap.state().FindBinding("q2"), nullptr);
  EXPECT_EQ(snap.state().InstanceId(), instance);  // the policies' caches stay valid
}

TEST(ClusterSnapshotTest, TaskMovedBetweenNodesEndsWhereTheLiveStateHasIt) {
  ClusterState live = Cluster(4);
  ClusterSnapshot snap;
  snap.Refresh(live);
  // The snapshot reserves t on node 3 (a pass), while the live state binds t on node 0 and
  // releases u from node 1.
  ASSERT_TRUE(live.Bind("u", Whole(2), OnGpus(1, {0, 1}, 1000)).has_value());
  snap.Refresh(live);
  ASSERT_TRUE(snap.state().Bind("t", Whole(1), OnGpus(3, {5}, 1000)).has_value());
  ASSERT_TRUE(live.Bind("t", Whole(1), OnGpus(0, {2}, 1000)).has_value());
  ASSERT_TRUE(live.Unbind("u").has_value());
  EXPECT_EQ(snap.Refresh(live), 3);
  ExpectSameContent(snap.state(), live);
  ASSERT_NE(snap.state().FindBinding("t"), nullptr);
  EXPECT_EQ(snap.state().FindBinding("t")->placement.node, 0);
  EXPECT_TRUE(snap.state().TasksOn(3).empty());
  EXPECT_EQ(snap.state().FindBinding("u"), nullptr);
}

TEST(ClusterSnapshotTest, StalePlanIsRefusedByTheLiveStateAndReplannedAfterRefresh) {
  ClusterState live = Cluster(2);
  ASSERT_TRUE(live.Bind("a", Whole(8), OnGpus(1, {0, 1, 2, 3, 4, 5, 6, 7}, 1000)).has_value());
  ClusterSnapshot snap;
  snap.Refresh(live);
  auto policy = MakePolicy("first-fit", {});
  ASSERT_TRUE(policy.has_value());
  const std::vector<QueuedTask> queue = {{"late", Whole(8)}};
  const Plan plan = ScheduleOnce(snap.state(), queue, **policy);
  ASSERT_EQ(plan.assignments.size(), 1u);
  EXPECT_EQ(plan.assignments[0].placement.node, 0);
  // Meanwhile node 0 filled up in the live state: the plan is older than the node's version.
  ASSERT_TRUE(live.Bind("b", Whole(4), OnGpus(0, {0, 1, 2, 3}, 1000)).has_value());
  EXPECT_GT(live.NodeVersion(0), snap.version());
  const Status applied = live.Bind("late", queue[0].request, plan.assignments[0].placement);
  ASSERT_FALSE(applied.has_value());
  EXPECT_EQ(applied.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(live.FindBinding("late"), nullptr);
  // The retry pass plans on the refreshed snapshot: nothing fits now.
  snap.Refresh(live);
  const Plan again = ScheduleOnce(snap.state(), queue, **policy);
  EXPECT_TRUE(again.assignments.empty());
  ASSERT_EQ(again.pending.size(), 1u);
}

TEST(ClusterSnapshotTest, AnotherLiveStateIsCopiedWhole) {
  ClusterState one = Cluster(2);
  ClusterState two = Cluster(5);
  ClusterSnapshot snap;
  snap.Refresh(one);
  const uint64_t instance = snap.state().InstanceId();
  EXPECT_EQ(snap.Refresh(two), 5);
  ExpectSameContent(snap.state(), two);
  EXPECT_NE(snap.state().InstanceId(), instance);
}

// Random changes to a live state (binds, releases, cordons, new nodes, MIG layouts) interleaved
// with passes: after every refresh the snapshot equals the live state, and a pass on it (whose
// policy keeps its caches from pass to pass) plans exactly what the same pass on a fresh copy
// plans with a fresh policy.
TEST(ClusterSnapshotTest, PassesOnARefreshedSnapshotPlanAsOnAFreshCopy) {
  std::mt19937_64 rng(7);
  ClusterState live = Cluster(40);
  Node mig = Node::Make("mig-0", 64'000, 262'144, 2, "A100-80GB");
  mig.gpus[0].mig_enabled = true;
  live.AddNode(mig);
  std::vector<TaskRequest> workload = {Share(250), Share(500), Whole(1), Whole(4), Share(250)};
  TaskRequest m;
  m.cpu_milli = 1000;
  m.memory_mib = 1024;
  m.mig_profile = "3g.40gb";
  workload.push_back(m);
  PolicyOptions options;
  options.typical = TypicalTasks(workload);
  auto kept = MakePolicy("fgd-plan", options);
  ASSERT_TRUE(kept.has_value());
  ClusterSnapshot snap;
  std::vector<std::string> bound;
  int next_id = 0;
  for (int round = 0; round < 60; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    // Some changes to the live state between passes.
    for (int c = 0; c < 5; ++c) {
      const uint64_t what = rng() % 10;
      if (what < 3 && !bound.empty()) {
        const size_t i = rng() % bound.size();
        ASSERT_TRUE(live.Unbind(bound[i]).has_value());
        bound.erase(bound.begin() + static_cast<long>(i));
      } else if (what < 5) {
        live.SetSchedulable(static_cast<int>(rng() % live.NodeCount()), rng() % 4 != 0);
      } else if (what == 5) {
        live.AddNode(GpuNode(live.NodeCount(), 1 + static_cast<int>(rng() % 8)));
      }
    }
    snap.Refresh(live);
    ExpectSameContent(snap.state(), live);
    for (int id = 0; id < next_id; ++id) {  // no reservation of a pass outlives the refresh
      const std::string t = "t" + std::to_string(id);
      EXPECT_EQ(snap.state().FindBinding(t) == nullptr, live.FindBinding(t) == nullptr) << t;
    }
    if (HasFailure()) return;
    std::vector<QueuedTask> queue;
    for (int q = 0; q < 8; ++q) {
      queue.push_back({"t" + std::to_string(next_id++), workload[rng() % workload.size()]});
    }
    ClusterState copy = live;
    auto fresh = MakePolicy("fgd-plan", options);
    ASSERT_TRUE(fresh.has_value());
    const Plan expected = ScheduleOnce(copy, queue, **fresh);
    const Plan plan = ScheduleOnce(snap.state(), queue, **kept);
    ASSERT_EQ(plan.assignments.size(), expected.assignments.size());
    for (size_t i = 0; i < plan.assignments.size(); ++i) {
      EXPECT_EQ(plan.assignments[i].task_id, expected.assignments[i].task_id);
      EXPECT_EQ(plan.assignments[i].placement, expected.assignments[i].placement);
    }
    ASSERT_EQ(plan.pending.size(), expected.pending.size());
    // The applier takes most of the plan; every fourth assignment is lost to a race.
    for (size_t i = 0; i < plan.assignments.size(); ++i) {
      if (i % 4 == 3) continue;
      const Assignment& a = plan.assignments[i];
      const QueuedTask* t = nullptr;
      for (const QueuedTask& q : queue) t = q.id == a.task_id ? &q : t;
      if (live.Bind(a.task_id, t->request, a.placement)) bound.push_back(a.task_id);
    }
  }
}

}  // namespace
}  // namespace gpupool::sched
