// Tests for sched/cluster_state: Bind / Unbind / ApplyToNode bookkeeping (CPU, memory, per-GPU
// milli and memory, cluster totals, tasks per node, versions, summaries), refused binds, MIG
// instances, the model / GPU indexes, the shares per GPU and the count of partly used GPUs per
// milli left; what stopping a bound task costs (WorkState, WorkLostMs, SetWork).
#include "sched/cluster_state.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/mig.h"
#include "core/node.h"
#include "core/task.h"
#include "sched/test_builders.h"

namespace gpupool::sched {
namespace {

// This file's nodes: 16 cores and 64 GiB unless a test says otherwise.
Node MakeNode(const std::string& name, const std::vector<std::string>& models,
              int64_t cpu_milli = 16000, int64_t memory_mib = 65536) {
  return TestNode(name, models, cpu_milli, memory_mib);
}

Placement SharePlacement(int node, int gpu, const TaskRequest& r) {
  return Placement{node, {gpu}, r.gpu_milli, r.gpu_mem_mib, std::nullopt};
}
Placement WholePlacement(int node, std::vector<int> gpus) {
  return Placement{node, std::move(gpus), kMilliPerGpu, 0, std::nullopt};
}

// The placement FindMigPlacement proposes for `profile` on GPU `gpu` of `node` now.
Placement MigPlacementNow(const ClusterState& state, int node, int gpu,
                          const std::string& profile) {
  const Gpu& g = state.node(node).gpus.at(static_cast<size_t>(gpu));
  const GpuModelInfo* info = FindGpuModel(g.model);
  std::optional<MigPlacement> p = FindMigPlacement(*info, g, info->ProfileIndex(profile));
  EXPECT_TRUE(p.has_value()) << "no MIG placement for " << profile;
  return Placement{node, {gpu}, 0, 0, p};
}

std::vector<int> Ints(std::span<const int> s) { return {s.begin(), s.end()}; }

// Placement's defaulted operator== is deleted (MigPlacement has none), so compare by fields.
void ExpectSamePlacement(const Placement& got, const Placement& want) {
  EXPECT_EQ(got.node, want.node);
  EXPECT_EQ(got.gpus, want.gpus);
  EXPECT_EQ(got.milli_per_gpu, want.milli_per_gpu);
  EXPECT_EQ(got.gpu_mem_mib, want.gpu_mem_mib);
  ASSERT_EQ(got.mig.has_value(), want.mig.has_value());
  if (got.mig) {
    EXPECT_EQ(got.mig->action, want.mig->action);
    EXPECT_EQ(got.mig->start, want.mig->start);
    EXPECT_EQ(got.mig->profile, want.mig->profile);
  }
}

// ---------------------------------------------------------------------------------------------
// Bind → Unbind → ApplyToNode: every number the state keeps, for each GPU form.

struct Expect {
  int64_t cpu_free_milli;
  int64_t memory_free_mib;
  std::vector<int32_t> milli_free;  // per GPU
  std::vector<int64_t> mem_free;    // per GPU
  int64_t allocated_milli;
  int32_t gpu_milli_left;  // summary
  int32_t max_gpu_left;
  int16_t free_gpus;
  bool uniform;
};

struct BindRow {
  const char* name;
  Node node;
  TaskRequest request;
  Placement placement;
  Expect before;
  Expect after;
};
void PrintTo(const BindRow& row, std::ostream* os) { *os << row.name; }

void ExpectState(const ClusterState& s, const Expect& e) {
  const Node& n = s.node(0);
  EXPECT_EQ(n.cpu_free_milli, e.cpu_free_milli);
  EXPECT_EQ(n.memory_free_mib, e.memory_free_mib);
  EXPECT_EQ(MilliFree(n), e.milli_free);
  EXPECT_EQ(MemFree(n), e.mem_free);
  EXPECT_EQ(s.AllocatedGpuMilli(), e.allocated_milli);
  const NodeSummary& sum = s.summary(0);
  EXPECT_EQ(sum.cpu_free_milli, e.cpu_free_milli);
  EXPECT_EQ(sum.memory_free_mib, e.memory_free_mib);
  EXPECT_EQ(sum.gpu_milli_left, e.gpu_milli_left);
  EXPECT_EQ(sum.max_gpu_left, e.max_gpu_left);
  EXPECT_EQ(sum.free_gpus, e.free_gpus);
  EXPECT_EQ(sum.gpu_count, static_cast<int16_t>(n.gpus.size()));
  EXPECT_TRUE(sum.schedulable);
  EXPECT_EQ(sum.uniform, e.uniform);
}

class BindTest : public testing::TestWithParam<BindRow> {};

TEST_P(BindTest, BindUnbindApply) {
  const BindRow& row = GetParam();
  ClusterState s;
  ASSERT_EQ(s.AddNode(row.node), 0);
  ExpectState(s, row.before);
  const int64_t total = s.TotalGpuMilli();
  EXPECT_EQ(total, kMilliPerGpu * static_cast<int64_t>(row.node.gpus.size()));

  const uint64_t v0 = s.NodeVersion(0);
  ASSERT_TRUE(s.Bind("t1", row.request, row.placement).has_value());
  EXPECT_EQ(s.NodeVersion(0), v0 + 1);
  ExpectState(s, row.after);
  EXPECT_EQ(s.TotalGpuMilli(), total);
  EXPECT_EQ(s.TasksOn(0), std::vector<std::string>{"t1"});
  const Binding* b = s.FindBinding("t1");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->task_id, "t1");
  EXPECT_EQ(b->request, row.request);
  ExpectSamePlacement(b->placement, row.placement);
  const Binding saved = *b;

  ASSERT_TRUE(s.Unbind("t1").has_value());
  EXPECT_EQ(s.NodeVersion(0), v0 + 2);
  ExpectState(s, row.before);
  EXPECT_TRUE(s.TasksOn(0).empty());
  EXPECT_EQ(s.FindBinding("t1"), nullptr);

  // ApplyToNode on a copy takes what Bind took, and gives it back.
  Node copy = s.node(0);
  EXPECT_EQ(ApplyToNode(copy, saved, +1), row.after.allocated_milli - row.before.allocated_milli);
  EXPECT_EQ(copy.cpu_free_milli, row.after.cpu_free_milli);
  EXPECT_EQ(copy.memory_free_mib, row.after.memory_free_mib);
  EXPECT_EQ(MilliFree(copy), row.after.milli_free);
  EXPECT_EQ(MemFree(copy), row.after.mem_free);
  ApplyToNode(copy, saved, -1);
  EXPECT_EQ(MilliFree(copy), row.before.milli_free);
  EXPECT_EQ(copy.cpu_free_milli, row.before.cpu_free_milli);
}

INSTANTIATE_TEST_SUITE_P(
    ClusterState, BindTest,
    testing::ValuesIn(std::vector<BindRow>{
        // Node: 16000 cpu, 65536 MiB, two T4 (15360 MiB each). Share of 300 milli + 4096 MiB,
        // 2000 cpu, 8192 MiB on GPU 1:
        //   cpu 16000−2000 = 14000; memory 65536−8192 = 57344; GPU1 1000−300 = 700 milli,
        //   15360−4096 = 11264 MiB; allocated 300; Σ left 1000+700 = 1700, max 1000, 1 free GPU;
        //   not uniform once GPU memory is reserved.
        {"share_with_gpu_memory",
         MakeNode("n0", {"T4", "T4"}),
         Share(300).GpuMem(4096).Cpu(2000, 8192),
         SharePlacement(0, 1, Share(300).GpuMem(4096)),
         {16000, 65536, {1000, 1000}, {15360, 15360}, 0, 2000, 1000, 2, true},
         {14000, 57344, {1000, 700}, {15360, 11264}, 300, 1700, 1000, 1, false}},
        // Share of 470 without memory on GPU 0 of two G1: left 530 + 1000 = 1530; uniform stays.
        {"share_without_gpu_memory",
         MakeNode("n0", {"G1", "G1"}),
         Share(470).Cpu(1000),
         SharePlacement(0, 0, Share(470)),
         {16000, 65536, {1000, 1000}, {16384, 16384}, 0, 2000, 1000, 2, true},
         {15000, 65536, {530, 1000}, {16384, 16384}, 470, 1530, 1000, 1, true}},
        // Two whole GPUs (1 and 3) of four: lefts 1000, 0, 1000, 0 → Σ 2000, allocated 2000.
        {"whole_two_of_four",
         MakeNode("n0", {"G1", "G1", "G1", "G1"}),
         Whole(2).Cpu(4000, 16384),
         WholePlacement(0, {1, 3}),
         {16000,
          65536,
          {1000, 1000, 1000, 1000},
          {16384, 16384, 16384, 16384},
          0,
          4000,
          1000,
          4,
          true},
         {12000,
          49152,
          {1000, 0, 1000, 0},
          {16384, 16384, 16384, 16384},
          2000,
          2000,
          1000,
          2,
          true}},
        // CPU-only on a GPU-less node: only CPU and memory move.
        {"cpu_only",
         MakeNode("n0", {}),
         CpuOnly(3500, 1000),
         Placement{0, {}, 0, 0, std::nullopt},
         {16000, 65536, {}, {}, 0, 0, 0, 0, true},
         {12500, 64536, {}, {}, 0, 0, 0, 0, true}},
    }),
    RowName());

TEST(ClusterStateTest, TasksOnKeepsBindOrderAndTotalsAddUp) {
  ClusterState s;
  s.AddNode(MakeNode("n0", {"G1", "G1"}));
  s.AddNode(MakeNode("n1", {"G1"}));
  const uint64_t v1 = s.NodeVersion(1);
  ASSERT_TRUE(s.Bind("c", Share(200), SharePlacement(0, 1, Share(200))).has_value());
  ASSERT_TRUE(s.Bind("a", Share(300), SharePlacement(0, 1, Share(300))).has_value());
  ASSERT_TRUE(s.Bind("b", Whole(1), WholePlacement(0, {0})).has_value());
  EXPECT_EQ(s.TasksOn(0), (std::vector<std::string>{"c", "a", "b"}));
  EXPECT_TRUE(s.TasksOn(1).empty());
  EXPECT_EQ(s.NodeVersion(1), v1);  // other nodes untouched
  // GPU1: 1000 − 200 − 300 = 500; GPU0: 0. Allocated 200 + 300 + 1000 = 1500 of 3000.
  EXPECT_EQ(MilliFree(s.node(0)), (std::vector<int32_t>{0, 500}));
  EXPECT_EQ(s.AllocatedGpuMilli(), 1500);
  EXPECT_EQ(s.TotalGpuMilli(), 3000);
  // Unbinding the middle one keeps the order of the others.
  ASSERT_TRUE(s.Unbind("a").has_value());
  EXPECT_EQ(s.TasksOn(0), (std::vector<std::string>{"c", "b"}));
  EXPECT_EQ(s.AllocatedGpuMilli(), 1200);
  EXPECT_EQ(s.summary(0).max_gpu_left, 800);
}

TEST(ClusterStateTest, AddNodeCountsGpusAlreadyInUse) {
  Node n = MakeNode("n0", {"G1", "G1", "G1"});
  n.gpus[0].milli_free = 300;
  n.gpus[2].milli_free = 0;
  ClusterState s;
  s.AddNode(n);
  // Allocated (1000 − 300) + 0 + (1000 − 0) = 1700 of 3000; summary Σ left 1300, max 1000, 1 free.
  EXPECT_EQ(s.TotalGpuMilli(), 3000);
  EXPECT_EQ(s.AllocatedGpuMilli(), 1700);
  EXPECT_EQ(s.summary(0).gpu_milli_left, 1300);
  EXPECT_EQ(s.summary(0).max_gpu_left, 1000);
  EXPECT_EQ(s.summary(0).free_gpus, 1);
}

TEST(ClusterStateTest, SetSchedulableBumpsVersionAndSummary) {
  ClusterState s;
  s.AddNode(MakeNode("n0", {"G1"}));
  const uint64_t v = s.NodeVersion(0);
  s.SetSchedulable(0, false);
  EXPECT_EQ(s.NodeVersion(0), v + 1);
  EXPECT_FALSE(s.summary(0).schedulable);
  EXPECT_FALSE(s.node(0).schedulable);
  s.SetSchedulable(0, true);
  EXPECT_EQ(s.NodeVersion(0), v + 2);
  EXPECT_TRUE(s.summary(0).schedulable);
}

// ---------------------------------------------------------------------------------------------
// Refused binds: nothing changes, and the error says what is short.
//
// Node n0: 4000 cpu, 8192 MiB; GPU0 T4 holding task "busy" (600 milli, 10000 MiB: 400 milli and
// 15360 − 10000 = 5360 MiB left), GPU1 T4 free, GPU2 A100-80GB in MIG mode without instances,
// GPU3 of the opaque model G1 (not in the catalog) free.

ClusterState RefusalState() {
  Node n = MakeNode("n0", {"T4", "T4", "A100-80GB", "G1"}, 4000, 8192);
  n.gpus[2].mig_enabled = true;
  ClusterState s;
  s.AddNode(n);
  const TaskRequest busy = Share(600).GpuMem(10000);
  EXPECT_TRUE(s.Bind("busy", busy, SharePlacement(0, 0, busy)).has_value());
  return s;
}

struct RefuseRow {
  const char* name;
  TaskRequest request;
  Placement placement;
  ErrorCode code;
  std::vector<std::string> message_has;
};
void PrintTo(const RefuseRow& row, std::ostream* os) { *os << row.name; }

class RefuseTest : public testing::TestWithParam<RefuseRow> {};

TEST_P(RefuseTest, RefusedWithReasonAndNoChange) {
  const RefuseRow& row = GetParam();
  ClusterState s = RefusalState();
  const uint64_t v = s.NodeVersion(0);
  const std::vector<int32_t> milli = MilliFree(s.node(0));
  const std::vector<int64_t> mem = MemFree(s.node(0));

  const Status st = s.Bind("t", row.request, row.placement);
  ASSERT_FALSE(st.has_value()) << "bind was accepted";
  EXPECT_EQ(st.error().code, row.code) << st.error().message;
  for (const std::string& part : row.message_has) {
    EXPECT_NE(st.error().message.find(part), std::string::npos)
        << "message '" << st.error().message << "' lacks '" << part << "'";
  }
  // CheckPlacement gives the same answer without binding.
  const Status check = s.CheckPlacement(row.request, row.placement);
  ASSERT_FALSE(check.has_value());
  EXPECT_EQ(check.error(), st.error());

  EXPECT_EQ(s.NodeVersion(0), v);
  EXPECT_EQ(s.node(0).cpu_free_milli, 4000);
  EXPECT_EQ(s.node(0).memory_free_mib, 8192);
  EXPECT_EQ(MilliFree(s.node(0)), milli);
  EXPECT_EQ(MemFree(s.node(0)), mem);
  EXPECT_TRUE(s.node(0).gpus[2].mig_instances.empty());
  EXPECT_EQ(s.AllocatedGpuMilli(), 600);
  EXPECT_EQ(s.TasksOn(0), std::vector<std::string>{"busy"});
  EXPECT_EQ(s.FindBinding("t"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(
    ClusterState, RefuseTest,
    testing::ValuesIn(std::vector<RefuseRow>{
        // 5000 cpu asked, 4000 free.
        {"cpu_short",
         Share(100).Cpu(5000),
         SharePlacement(0, 1, Share(100)),
         ErrorCode::kFailedPrecondition,
         {"n0", "cpu_milli 5000 requested, 4000 free"}},
        // 9000 MiB asked, 8192 free.
        {"memory_short",
         Share(100).Cpu(0, 9000),
         SharePlacement(0, 1, Share(100)),
         ErrorCode::kFailedPrecondition,
         {"n0", "memory_mib 9000 requested, 8192 free"}},
        // GPU0 has 1000 − 600 = 400 milli; 500 asked.
        {"gpu_milli_short",
         Share(500),
         SharePlacement(0, 0, Share(500)),
         ErrorCode::kFailedPrecondition,
         {"n0: gpu 0", "400 milli free", "500 needed"}},
        // GPU0 has 400 milli (enough for 300) but 5360 MiB, not 8000: the message must name the
        // GPU memory that is short, not the milli that is not.
        {"gpu_memory_short",
         Share(300).GpuMem(8000),
         SharePlacement(0, 0, Share(300).GpuMem(8000)),
         ErrorCode::kFailedPrecondition,
         {"n0: gpu 0", "5360", "8000", "MiB"}},
        // A whole GPU on the busy GPU0: 1000 needed, 400 free.
        {"whole_on_busy_gpu",
         Whole(1),
         WholePlacement(0, {0}),
         ErrorCode::kFailedPrecondition,
         {"n0: gpu 0", "400 milli free", "1000 needed"}},
        {"share_on_mig_mode_gpu",
         Share(100),
         SharePlacement(0, 2, Share(100)),
         ErrorCode::kFailedPrecondition,
         {"n0: gpu 2 is in MIG mode"}},
        {"whole_on_mig_mode_gpu",
         Whole(1),
         WholePlacement(0, {2}),
         ErrorCode::kFailedPrecondition,
         {"n0: gpu 2 is in MIG mode"}},
        {"disallowed_model",
         [] {
           TaskRequest r = Share(100);
           r.gpu_models = {"A100-80GB"};
           return r;
         }(),
         SharePlacement(0, 1, Share(100)),
         ErrorCode::kFailedPrecondition,
         {"n0: gpu 1 is a T4, not an allowed model"}},
        {"gpu_index_out_of_range",
         Share(100),
         SharePlacement(0, 5, Share(100)),
         ErrorCode::kInvalidArgument,
         {"n0: gpu index 5 does not exist"}},
        {"same_gpu_twice",
         Whole(2),
         WholePlacement(0, {1, 1}),
         ErrorCode::kInvalidArgument,
         {"n0: placement names a gpu twice"}},
        {"node_out_of_range",
         Share(100),
         SharePlacement(7, 0, Share(100)),
         ErrorCode::kInvalidArgument,
         {"placement node 7 does not exist"}},
        // MIG on a T4 (a catalog model without MIG profiles): no slot for the profile.
        {"mig_on_plain_model",
         CpuOnly(1000, 1024).Mig("3g.40gb"),
         Placement{0, {1}, 0, 0, MigPlacement{MigAction::kCreate, 4, 0, -1, {}, false}},
         ErrorCode::kFailedPrecondition,
         {"n0: gpu 1 has no room for MIG profile 3g.40gb"}},
        // MIG on an opaque model: not in the catalog, no MIG.
        {"mig_on_opaque_model",
         CpuOnly(1000, 1024).Mig("3g.40gb"),
         Placement{0, {3}, 0, 0, MigPlacement{MigAction::kCreate, 4, 0, -1, {}, false}},
         ErrorCode::kFailedPrecondition,
         {"n0: gpu 3 (G1) has no MIG"}},
        // GPU2 has no instance to reuse: a kUseFree placement is stale.
        {"mig_stale_placement",
         CpuOnly(1000, 1024).Mig("3g.40gb"),
         Placement{0, {2}, 0, 0, MigPlacement{MigAction::kUseFree, 4, 0, 0, {}, false}},
         ErrorCode::kFailedPrecondition,
         {"n0: gpu 2 has no room for MIG profile 3g.40gb"}},
    }),
    RowName());

TEST(ClusterStateTest, DoubleBindIsRefused) {
  ClusterState s = RefusalState();
  const uint64_t v = s.NodeVersion(0);
  // "busy" is bound on GPU0; binding it again on the free GPU1 must not take GPU1.
  const Status st = s.Bind("busy", Share(100), SharePlacement(0, 1, Share(100)));
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(st.error().message, "task busy is already bound");
  EXPECT_EQ(MilliFree(s.node(0))[1], 1000);
  EXPECT_EQ(s.NodeVersion(0), v);
  EXPECT_EQ(s.TasksOn(0), std::vector<std::string>{"busy"});
  EXPECT_EQ(s.AllocatedGpuMilli(), 600);
}

TEST(ClusterStateTest, UnbindUnknownIsNotFound) {
  ClusterState s = RefusalState();
  const Status st = s.Unbind("ghost");
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(st.error().message, "task ghost is not bound");
  // Unbinding twice: the second is NotFound and nothing is given back twice.
  ASSERT_TRUE(s.Unbind("busy").has_value());
  EXPECT_FALSE(s.Unbind("busy").has_value());
  EXPECT_EQ(s.AllocatedGpuMilli(), 0);
  EXPECT_EQ(MilliFree(s.node(0))[0], 1000);
}

// ---------------------------------------------------------------------------------------------
// What stopping a bound task costs (WorkState, issue 15).

TEST(WorkStateTest, WorkLostMs) {
  const int64_t now = 1'000'000;
  EXPECT_EQ(WorkLostMs(WorkState{}, now), 0);  // unknown: nothing to lose
  EXPECT_EQ(WorkLostMs(WorkState{400'000, 0, false, 0}, now), 600'000);
  EXPECT_EQ(WorkLostMs(WorkState{400'000, 0, false, 0}, 300'000), 0);  // clocks apart: none
  // Snapshots every 250 s from 400 s on: the latest at 900 s, 100 s unsaved.
  EXPECT_EQ(WorkLostMs(WorkState{400'000, 250'000, false, 0}, now), 100'000);
  // Snapshotted on stop: only the snapshot and the restore, whatever is unsaved.
  EXPECT_EQ(WorkLostMs(WorkState{400'000, 0, true, 7'000}, now), 7'000);
}

TEST(WorkStateTest, BindKeepsItSetWorkReplacesItAndBumpsTheVersion) {
  ClusterState s({MakeNode("n0", {"G1", "G1"})});
  const WorkState work{5'000, 0, true, 2'000};
  ASSERT_TRUE(s.Bind("t", Whole(2), WholePlacement(0, {0, 1}), work).has_value());
  EXPECT_EQ(s.FindBinding("t")->work.snapshot_restore_ms, 2'000);
  EXPECT_EQ(BindingGpuMilli(s.node(0), *s.FindBinding("t")), 2000);
  const uint64_t v = s.NodeVersion(0);
  ASSERT_TRUE(s.SetWork("t", WorkState{9'000, 0, false, 0}).has_value());
  EXPECT_EQ(s.FindBinding("t")->work.unsaved_since_ms, 9'000);
  EXPECT_FALSE(s.FindBinding("t")->work.snapshot_on_stop);
  EXPECT_GT(s.NodeVersion(0), v);  // a snapshot's refresh copies the node
  const Status st = s.SetWork("ghost", work);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kNotFound);
}

// BindingGpuMilli: a MIG instance counts its compute fraction of the GPU's model (3 of 7 slices).
TEST(WorkStateTest, BindingGpuMilliOfMig) {
  ClusterState s({MakeNode("n0", {"A100-80GB"})});
  ASSERT_TRUE(s.Bind("m", Mig("3g.40gb"), MigPlacementNow(s, 0, 0, "3g.40gb")).has_value());
  EXPECT_EQ(BindingGpuMilli(s.node(0), *s.FindBinding("m")), 428);
  EXPECT_EQ(s.AllocatedGpuMilli(), 428);
}

// ---------------------------------------------------------------------------------------------
// MIG: bind creates the instance (switching the GPU to MIG mode), Unbind leaves it unused, the
// next bind of the profile reuses it.

TEST(ClusterStateMigTest, CreateUnbindReuse) {
  ClusterState s;
  s.AddNode(MakeNode("n0", {"A100-80GB"}));
  const TaskRequest r = CpuOnly(1000, 1024).Mig("3g.40gb");
  const int profile = FindGpuModel("A100-80GB")->ProfileIndex("3g.40gb");

  // 1. Idle GPU, not in MIG mode: re-partition (enable MIG), one instance, in use.
  const Placement p1 = MigPlacementNow(s, 0, 0, "3g.40gb");
  ASSERT_EQ(p1.mig->action, MigAction::kRepartition);
  EXPECT_TRUE(p1.mig->enable_mig);
  ASSERT_TRUE(s.Bind("m1", r, p1).has_value());
  const Gpu& g = s.node(0).gpus[0];
  EXPECT_TRUE(g.mig_enabled);
  ASSERT_EQ(g.mig_instances.size(), 1u);
  EXPECT_EQ(g.mig_instances[0].profile, profile);
  EXPECT_EQ(g.mig_instances[0].start, p1.mig->start);
  EXPECT_TRUE(g.mig_instances[0].in_use);
  // 3 of 7 compute slices: ⌊3·1000/7⌋ = 428 milli allocated.
  EXPECT_EQ(s.AllocatedGpuMilli(), 428);
  EXPECT_EQ(s.node(0).cpu_free_milli, 16000 - 1000);
  // A MIG-mode GPU offers nothing to shares / whole GPUs.
  EXPECT_EQ(s.summary(0).gpu_milli_left, 0);
  EXPECT_EQ(s.summary(0).max_gpu_left, 0);
  EXPECT_EQ(s.summary(0).free_gpus, 0);
  EXPECT_FALSE(s.summary(0).uniform);

  // 2. Unbind: the instance stays, unused.
  ASSERT_TRUE(s.Unbind("m1").has_value());
  ASSERT_EQ(g.mig_instances.size(), 1u);
  EXPECT_FALSE(g.mig_instances[0].in_use);
  EXPECT_TRUE(g.mig_enabled);
  EXPECT_EQ(s.AllocatedGpuMilli(), 0);
  EXPECT_EQ(s.node(0).cpu_free_milli, 16000);

  // 3. The next 3g reuses that instance: still one instance, in use again.
  const Placement p2 = MigPlacementNow(s, 0, 0, "3g.40gb");
  ASSERT_EQ(p2.mig->action, MigAction::kUseFree);
  ASSERT_TRUE(s.Bind("m2", r, p2).has_value());
  ASSERT_EQ(g.mig_instances.size(), 1u);
  EXPECT_TRUE(g.mig_instances[0].in_use);
  EXPECT_EQ(s.AllocatedGpuMilli(), 428);

  // The same kUseFree placement again is stale now (the instance is taken).
  EXPECT_FALSE(s.Bind("m3", r, p2).has_value());

  // 4. A second 3g goes into the free half: a new instance, 428 + 428 = 856 allocated.
  const Placement p3 = MigPlacementNow(s, 0, 0, "3g.40gb");
  ASSERT_EQ(p3.mig->action, MigAction::kCreate);
  EXPECT_NE(p3.mig->start, g.mig_instances[0].start);
  ASSERT_TRUE(s.Bind("m3", r, p3).has_value());
  ASSERT_EQ(g.mig_instances.size(), 2u);
  EXPECT_TRUE(g.mig_instances[1].in_use);
  EXPECT_EQ(s.AllocatedGpuMilli(), 856);
  EXPECT_EQ(s.TasksOn(0), (std::vector<std::string>{"m2", "m3"}));

  // Unbinding m2 frees exactly its instance (by start slot), not m3's.
  ASSERT_TRUE(s.Unbind("m2").has_value());
  EXPECT_FALSE(g.mig_instances[0].in_use);
  EXPECT_TRUE(g.mig_instances[1].in_use);
  EXPECT_EQ(s.AllocatedGpuMilli(), 428);
}

// SetMigLayout puts a layout back (the undo of a failed gang) but never drops an instance in use.
TEST(ClusterStateMigTest, SetMigLayoutKeepsInstancesInUse) {
  ClusterState s;
  s.AddNode(MakeNode("n0", {"A100-80GB"}));
  ASSERT_TRUE(s.Bind("m1", CpuOnly(1000, 1024).Mig("1g.10gb"), MigPlacementNow(s, 0, 0, "1g.10gb"))
                  .has_value());
  const Gpu before = s.node(0).gpus[0];
  ASSERT_EQ(before.mig_instances.size(), 1u);
  // Dropping the in-use instance is refused and changes nothing.
  const Status refused = s.SetMigLayout(0, 0, false, {});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(s.node(0).gpus[0].mig_enabled);
  // Adding an unused instance beside it is accepted; the in-use one stays in use.
  std::vector<MigInstance> layout = before.mig_instances;
  layout.push_back(MigInstance{0, 0, false});
  ASSERT_TRUE(s.SetMigLayout(0, 0, true, layout).has_value());
  EXPECT_EQ(s.node(0).gpus[0].mig_instances, layout);
  // Once released, the GPU can go back to no MIG at all.
  ASSERT_TRUE(s.Unbind("m1").has_value());
  ASSERT_TRUE(s.SetMigLayout(0, 0, false, {}).has_value());
  EXPECT_FALSE(s.node(0).gpus[0].mig_enabled);
  EXPECT_TRUE(s.node(0).gpus[0].mig_instances.empty());
}

// ---------------------------------------------------------------------------------------------
// Model index: n0 [G1, G1], n1 [] , n2 [G2, G1], n3 [G2], n4 [A100-80GB].

ClusterState IndexState() {
  ClusterState s;
  s.AddNode(MakeNode("n0", {"G1", "G1"}));
  s.AddNode(MakeNode("n1", {}));
  s.AddNode(MakeNode("n2", {"G2", "G1"}));
  s.AddNode(MakeNode("n3", {"G2"}));
  s.AddNode(MakeNode("n4", {"A100-80GB"}));
  return s;
}

struct ModelRow {
  const char* name;
  const char* model;
  int id;                  // interned in first-seen order: G1 0, G2 1, A100-80GB 2
  std::vector<int> nodes;  // NodesOfModel, ascending
};
void PrintTo(const ModelRow& row, std::ostream* os) { *os << row.name; }

class ModelIndexTest : public testing::TestWithParam<ModelRow> {};

TEST_P(ModelIndexTest, NodesOfModel) {
  const ModelRow& row = GetParam();
  const ClusterState s = IndexState();
  ASSERT_EQ(s.ModelId(row.model), row.id);
  EXPECT_EQ(s.ModelName(row.id), row.model);
  EXPECT_EQ(Ints(s.NodesOfModel(row.id)), row.nodes);
}

INSTANTIATE_TEST_SUITE_P(ClusterState, ModelIndexTest,
                         testing::ValuesIn(std::vector<ModelRow>{
                             // n2 holds both models: listed under each.
                             {"g1", "G1", 0, {0, 2}},
                             {"g2", "G2", 1, {2, 3}},
                             {"a100", "A100-80GB", 2, {4}},
                         }),
                         RowName());

TEST(ClusterStateIndexTest, GpuAndGpuLessNodes) {
  const ClusterState s = IndexState();
  EXPECT_EQ(s.ModelCount(), 3);
  EXPECT_EQ(s.ModelId("G9"), -1);
  EXPECT_EQ(Ints(s.NodesWithGpus()), (std::vector<int>{0, 2, 3, 4}));
  EXPECT_EQ(Ints(s.NodesWithoutGpus()), (std::vector<int>{1}));
  // A node's model id is its first GPU's; -1 without GPUs.
  EXPECT_EQ(s.NodeModelId(0), 0);
  EXPECT_EQ(s.NodeModelId(1), -1);
  EXPECT_EQ(s.NodeModelId(2), 1);
  EXPECT_EQ(s.NodeModelId(4), 2);
  EXPECT_EQ(s.FindNode("n3"), 3);
  EXPECT_EQ(s.FindNode("nx"), -1);
  EXPECT_EQ(s.NodeCount(), 5);
  // 2 + 0 + 2 + 1 + 1 = 6 GPUs.
  EXPECT_EQ(s.TotalGpuMilli(), 6000);
  // Mixed node n2 is not uniform; the single-model ones are.
  EXPECT_TRUE(s.summary(0).uniform);
  EXPECT_FALSE(s.summary(2).uniform);
  EXPECT_TRUE(s.summary(3).uniform);
}

TEST(ClusterStateIndexTest, ConstructorFromNodesMatchesAddNode) {
  ClusterState s({MakeNode("a", {"G1"}), MakeNode("b", {}), MakeNode("c", {"G1"})});
  EXPECT_EQ(s.NodeCount(), 3);
  EXPECT_EQ(s.FindNode("c"), 2);
  EXPECT_EQ(Ints(s.NodesOfModel(s.ModelId("G1"))), (std::vector<int>{0, 2}));
  EXPECT_EQ(Ints(s.NodesWithoutGpus()), (std::vector<int>{1}));
}

// A known node registering again: an idle node takes its new CPU, memory and GPU list, and every
// index follows (as if it had been added so); a busy one keeps what its tasks hold.
TEST(ClusterStateTest, UpdateNodeTakesNewCapacityAndKeepsWhatTasksHold) {
  ClusterState s({MakeNode("a", {"G1", "G1"}), MakeNode("b", {}), MakeNode("c", {"G1"})});
  const int g1 = s.ModelId("G1");
  const TaskRequest held = Share(300).Cpu(1000, 1024);
  ASSERT_TRUE(s.Bind("t1", held, SharePlacement(2, 0, held)).has_value());
  // Idle "b" gains two A100s, more CPU and memory.
  const uint64_t before = s.NodeVersion(1);
  ASSERT_TRUE(s.UpdateNode(1, MakeNode("b", {"A100-80GB", "A100-80GB"}, 32000, 131072)));
  const int a100 = s.ModelId("A100-80GB");
  ASSERT_GE(a100, 0);
  EXPECT_GT(s.NodeVersion(1), before);
  EXPECT_EQ(s.node(1).cpu_milli, 32000);
  EXPECT_EQ(s.node(1).cpu_free_milli, 32000);
  EXPECT_EQ(s.node(1).memory_free_mib, 131072);
  EXPECT_EQ(s.summary(1).free_gpus, 2);
  EXPECT_EQ(s.NodeModelId(1), a100);
  EXPECT_EQ(s.GpuModelId(1, 1), a100);
  EXPECT_EQ(Ints(s.NodesOfModel(a100)), (std::vector<int>{1}));
  EXPECT_EQ(Ints(s.NodesOfModel(g1)), (std::vector<int>{0, 2}));
  EXPECT_EQ(Ints(s.NodesWithGpus()), (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(s.NodesWithoutGpus().empty());
  EXPECT_EQ(s.TotalGpuMilli(), 5 * kMilliPerGpu);
  EXPECT_EQ(s.AllocatedGpuMilli(), 300);
  EXPECT_EQ(s.FreeGpuBits(2).front() & 0b111, 0b011u);  // nodes a and b have 2 free GPUs
  ASSERT_TRUE(s.Bind("t2", Whole(2), WholePlacement(1, {0, 1})).has_value());
  ASSERT_TRUE(s.Unbind("t2").has_value());
  // Idle "a" loses its GPUs: out of the model index, among the GPU-less nodes.
  ASSERT_TRUE(s.UpdateNode(0, MakeNode("a", {})));
  EXPECT_EQ(Ints(s.NodesOfModel(g1)), (std::vector<int>{2}));
  EXPECT_EQ(Ints(s.NodesWithoutGpus()), (std::vector<int>{0}));
  EXPECT_EQ(s.NodeModelId(0), -1);
  EXPECT_EQ(s.TotalGpuMilli(), 3 * kMilliPerGpu);
  // Busy "c" (t1 holds 1000 CPU milli, 1 GiB, 300 milli of its GPU): more CPU is taken with
  // what t1 holds kept; less than t1 holds, or another GPU list, is refused and changes nothing.
  ASSERT_TRUE(s.UpdateNode(2, MakeNode("c", {"G1"}, 20000)));
  EXPECT_EQ(s.node(2).cpu_free_milli, 20000 - held.cpu_milli);
  EXPECT_EQ(s.PartialGpuCount(g1, 700), 1);
  const Node c = s.node(2);
  const uint64_t version = s.NodeVersion(2);
  Result<void> low_cpu = s.UpdateNode(2, MakeNode("c", {"G1"}, held.cpu_milli - 1));
  ASSERT_FALSE(low_cpu);
  EXPECT_EQ(low_cpu.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(low_cpu.error().message.find("cpu_milli"), std::string::npos);
  Result<void> low_memory = s.UpdateNode(2, MakeNode("c", {"G1"}, 20000, held.memory_mib - 1));
  ASSERT_FALSE(low_memory);
  EXPECT_NE(low_memory.error().message.find("memory_mib"), std::string::npos);
  Result<void> more_gpus = s.UpdateNode(2, MakeNode("c", {"G1", "G1"}, 20000));
  ASSERT_FALSE(more_gpus);
  EXPECT_NE(more_gpus.error().message.find("GPU list cannot change"), std::string::npos);
  EXPECT_EQ(s.node(2), c);
  EXPECT_EQ(s.NodeVersion(2), version);
}

// GpuShares lists the shares bound to each GPU, largest first; PartialGpuCount counts the GPUs
// of a model per milli left while partly used (not free, not full, not in MIG mode).
TEST(ClusterStateTest, SharesAndPartialCounts) {
  ClusterState s({MakeNode("a", {"G1", "G1", "A100-80GB"}), MakeNode("b", {"G1"})});
  const int g1 = s.ModelId("G1");
  const int a100 = s.ModelId("A100-80GB");
  ASSERT_GE(g1, 0);
  ASSERT_GE(a100, 0);
  EXPECT_EQ(s.GpuModelId(0, 0), g1);
  EXPECT_EQ(s.GpuModelId(0, 2), a100);
  EXPECT_EQ(s.GpuModelId(1, 0), g1);
  EXPECT_TRUE(s.GpuShares(0, 0).empty());
  for (int32_t left = 0; left <= kMilliPerGpu; ++left) EXPECT_EQ(s.PartialGpuCount(g1, left), 0);

  ASSERT_TRUE(s.Bind("t1", Share(300), SharePlacement(0, 0, Share(300))).has_value());
  ASSERT_TRUE(s.Bind("t2", Share(500), SharePlacement(0, 0, Share(500))).has_value());
  ASSERT_TRUE(s.Bind("t3", Share(300), SharePlacement(1, 0, Share(300))).has_value());
  ASSERT_TRUE(s.Bind("t4", Share(300), SharePlacement(0, 2, Share(300))).has_value());
  EXPECT_EQ(std::vector<int32_t>(s.GpuShares(0, 0).begin(), s.GpuShares(0, 0).end()),
            (std::vector<int32_t>{500, 300}));
  EXPECT_EQ(s.PartialGpuCount(g1, 200), 1);  // a/0: 1000 − 300 − 500
  EXPECT_EQ(s.PartialGpuCount(g1, 700), 1);  // b/0; a/2 is another model
  EXPECT_EQ(s.PartialGpuCount(a100, 700), 1);
  EXPECT_EQ(s.PartialGpuCount(g1, 1000), 0);  // a/1 is free: not counted
  EXPECT_EQ(s.PartialGpuCount(g1, 0), 0);
  EXPECT_EQ(s.PartialGpuCount(-1, 700), 0);
  EXPECT_EQ(s.PartialGpuCount(99, 700), 0);

  // Filling a GPU takes it out of the count; a whole-GPU task is no share.
  ASSERT_TRUE(s.Bind("t5", Share(200), SharePlacement(0, 0, Share(200))).has_value());
  EXPECT_EQ(s.PartialGpuCount(g1, 200), 0);
  ASSERT_TRUE(s.Bind("w", Whole(1), WholePlacement(0, {1})).has_value());
  EXPECT_TRUE(s.GpuShares(0, 1).empty());
  EXPECT_EQ(s.PartialGpuCount(g1, 700), 1);

  // Unbinding gives both back: one of two equal shares goes.
  ASSERT_TRUE(s.Bind("t6", Share(300), SharePlacement(1, 0, Share(300))).has_value());
  EXPECT_EQ(s.PartialGpuCount(g1, 400), 1);
  EXPECT_EQ(s.PartialGpuCount(g1, 700), 0);
  ASSERT_TRUE(s.Unbind("t3").has_value());
  EXPECT_EQ(std::vector<int32_t>(s.GpuShares(1, 0).begin(), s.GpuShares(1, 0).end()),
            (std::vector<int32_t>{300}));
  EXPECT_EQ(s.PartialGpuCount(g1, 700), 1);
  EXPECT_EQ(s.PartialGpuCount(g1, 400), 0);
  ASSERT_TRUE(s.Unbind("t5").has_value());
  EXPECT_EQ(s.PartialGpuCount(g1, 200), 1);
  ASSERT_TRUE(s.Unbind("t1").has_value());
  ASSERT_TRUE(s.Unbind("t2").has_value());
  EXPECT_TRUE(s.GpuShares(0, 0).empty());
  EXPECT_EQ(s.PartialGpuCount(g1, 200), 0);
  EXPECT_EQ(s.PartialGpuCount(g1, 700), 1);  // b/0 only

  // A GPU in MIG mode is not counted, whatever its milli says.
  ASSERT_TRUE(s.Unbind("t4").has_value());
  ASSERT_TRUE(s.SetMigLayout(0, 2, true, {}).has_value());
  EXPECT_EQ(s.PartialGpuCount(a100, 700), 0);
}

}  // namespace
}  // namespace gpupool::sched
