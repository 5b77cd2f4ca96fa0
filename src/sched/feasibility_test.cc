// Tests for sched/feasibility: CheckNode's reject reason per case (uniform fast path and the
// per-GPU path for mixed nodes agreeing), RejectText and RejectCounts' summary of a pending task.
#include "sched/feasibility.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/node.h"
#include "core/task.h"
#include "sched/cluster_state.h"
#include "sched/test_builders.h"

namespace gpupool::sched {
namespace {

// ---------------------------------------------------------------------------------------------
// Builders (sched/test_builders.h). This file's node: "n", 32 cores and 64 GiB unless a row says
// otherwise; its GPU tasks ask 1 core and 1 GiB beside their GPUs (kTask).

Node MakeNode(const std::vector<std::string>& models, int64_t cpu_milli = 32000,
              int64_t memory_mib = 65536) {
  return TestNode("n", models, cpu_milli, memory_mib);
}

const Req kTask = CpuOnly(1000, 1024);

const char* Name(Reject r) {
  switch (r) {
    case Reject::kNone:
      return "kNone";
    case Reject::kCordoned:
      return "kCordoned";
    case Reject::kNoGpu:
      return "kNoGpu";
    case Reject::kWrongModel:
      return "kWrongModel";
    case Reject::kCpu:
      return "kCpu";
    case Reject::kMemory:
      return "kMemory";
    case Reject::kGpuShare:
      return "kGpuShare";
    case Reject::kWholeGpus:
      return "kWholeGpus";
    case Reject::kMig:
      return "kMig";
    case Reject::kNoDocker:
      return "kNoDocker";
    case Reject::kNoDockerGpus:
      return "kNoDockerGpus";
    case Reject::kDisk:
      return "kDisk";
    case Reject::kOtherNode:
      return "kOtherNode";
    case Reject::kNoSharedStorage:
      return "kNoSharedStorage";
    case Reject::kCount:
      break;
  }
  return "?";
}

// The state every CheckNode row runs in: the row's node at index 0, and a second node with a
// "G2" GPU so that G2 is a model the cluster knows (model lists naming it resolve to an id).
Reject Check(const Node& node, const TaskRequest& request, ClusterState* out = nullptr) {
  ClusterState state;
  state.AddNode(node);
  state.AddNode(MakeNode({"G2"}));
  const RequestView view(state, request);
  const Reject r = CheckNode(state, 0, view);
  if (out != nullptr) *out = state;
  return r;
}

// ---------------------------------------------------------------------------------------------
// CheckNode: one row per reason (and the boundary that just fits).

struct RejectRow {
  const char* name;
  Node node;
  TaskRequest request;
  Reject want;
};
void PrintTo(const RejectRow& row, std::ostream* os) { *os << row.name; }

class CheckNodeTest : public testing::TestWithParam<RejectRow> {};

TEST_P(CheckNodeTest, Reason) {
  const RejectRow& row = GetParam();
  EXPECT_STREQ(Name(Check(row.node, row.request)), Name(row.want));
}

INSTANTIATE_TEST_SUITE_P(
    Feasibility, CheckNodeTest,
    testing::ValuesIn(std::vector<RejectRow>{
        // --- cordoned: checked before anything else, for every form.
        {"cordoned_share", Cordoned(MakeNode({"G1", "G1"})), kTask.Share(100), Reject::kCordoned},
        {"cordoned_cpu_only", Cordoned(MakeNode({})), CpuOnly(1000), Reject::kCordoned},
        // --- no GPU: any GPU form on a CPU-only node; a CPU-only task fits there.
        {"no_gpu_share", MakeNode({}), kTask.Share(100), Reject::kNoGpu},
        {"no_gpu_whole", MakeNode({}), kTask.Whole(1), Reject::kNoGpu},
        {"no_gpu_mig", MakeNode({}), kTask.Mig("3g.40gb"), Reject::kNoGpu},
        {"cpu_only_on_gpu_less_node", MakeNode({}), CpuOnly(1000, 1024), Reject::kNone},
        // --- a node-local volume's node: that node only (a node not in the cluster: none).
        {"its_volumes_node", MakeNode({"G1"}), kTask.Share(100).OnNode("n"), Reject::kNone},
        {"not_its_volumes_node", MakeNode({"G1"}), kTask.Share(100).OnNode("m"),
         Reject::kOtherNode},
        {"its_volumes_node_cordoned", Cordoned(MakeNode({"G1"})), CpuOnly(1000).OnNode("n"),
         Reject::kCordoned},
        // --- a shared volume: nodes with the shared storage only.
        {"no_shared_storage", MakeNode({"G1"}), kTask.Share(100).SharedStorage(),
         Reject::kNoSharedStorage},
        {"shared_storage",
         [] {
           Node n = MakeNode({"G1"});
           n.shared_storage = true;
           return n;
         }(),
         kTask.Share(100).SharedStorage(), Reject::kNone},
        // A CPU-only task ignores the model list (it uses no GPU).
        {"cpu_only_ignores_models", MakeNode({"G1"}),
         [] {
           TaskRequest r = CpuOnly(1000);
           r.gpu_models = {"G2"};
           return r;
         }(),
         Reject::kNone},
        // --- wrong model, uniform node (decided by the node's model id).
        {"wrong_model_known_elsewhere", MakeNode({"G1", "G1"}), kTask.Share(100).Models({"G2"}),
         Reject::kWrongModel},
        {"wrong_model_unknown_to_cluster", MakeNode({"G1", "G1"}), kTask.Share(100).Models({"G9"}),
         Reject::kWrongModel},
        {"wrong_model_list_none_matches", MakeNode({"G1"}), kTask.Whole(1).Models({"G2", "G9"}),
         Reject::kWrongModel},
        {"model_list_one_matches", MakeNode({"G1"}), kTask.Whole(1).Models({"G2", "G1"}),
         Reject::kNone},
        // --- wrong model, mixed node (per-GPU scan): none of G2, G3 is G1.
        {"wrong_model_mixed_node", MakeNode({"G2", "G3"}), kTask.Share(100).Models({"G1"}),
         Reject::kWrongModel},
        // Only the node's second GPU is allowed: that is enough to pass the model check.
        {"mixed_node_second_gpu_allowed", MakeNode({"G1", "G2"}), kTask.Share(100).Models({"G2"}),
         Reject::kNone},
        {"wrong_model_mig", MakeNode({"A100-80GB"}), kTask.Mig("3g.40gb").Models({"H100-80GB"}),
         Reject::kWrongModel},
        // --- CPU: 4000 free; 4001 asked is short by one, 4000 fits exactly.
        {"cpu_short_by_one", MakeNode({"G1"}, 4000), kTask.Share(100).Cpu(4001), Reject::kCpu},
        {"cpu_exact", MakeNode({"G1"}, 4000), kTask.Share(100).Cpu(4000), Reject::kNone},
        {"cpu_short_cpu_only_task", MakeNode({}, 4000), CpuOnly(4001), Reject::kCpu},
        // --- memory: 8192 MiB free.
        {"memory_short_by_one", MakeNode({"G1"}, 32000, 8192), kTask.Share(100).Cpu(1000, 8193),
         Reject::kMemory},
        {"memory_exact", MakeNode({"G1"}, 32000, 8192), kTask.Share(100).Cpu(1000, 8192),
         Reject::kNone},
        // CPU is checked before memory: both short → kCpu.
        {"cpu_before_memory", MakeNode({"G1"}, 1000, 1000), kTask.Share(100).Cpu(2000, 2000),
         Reject::kCpu},
        // --- share without GPU memory: lefts 300, 469; 470 asked → no GPU has 470.
        {"share_no_gpu_with_470", WithLefts(MakeNode({"G1", "G1"}), {300, 469}), kTask.Share(470),
         Reject::kGpuShare},
        {"share_exact_470", WithLefts(MakeNode({"G1", "G1"}), {300, 470}), kTask.Share(470),
         Reject::kNone},
        // --- share with GPU memory (T4 = 15360 MiB). GPU0: 1000 milli, 2048 MiB free; GPU1: 100
        // milli, 15360 MiB free. 500 milli + 4096 MiB: GPU0 lacks memory, GPU1 lacks milli.
        {"share_memory_split_across_gpus",
         WithLefts(WithMemFree(MakeNode({"T4", "T4"}), 0, 2048), {1000, 100}),
         kTask.Share(500).GpuMem(4096), Reject::kGpuShare},
        // The same node without a memory reservation: GPU0 fits (500 ≤ 1000).
        {"share_same_node_no_memory_asked",
         WithLefts(WithMemFree(MakeNode({"T4", "T4"}), 0, 2048), {1000, 100}), kTask.Share(500),
         Reject::kNone},
        // Uniform node (all memory free): 16000 MiB > 15360 per T4, so the fast path must not
        // answer from milli alone.
        {"share_memory_larger_than_gpu", MakeNode({"T4", "T4"}), kTask.Share(500).GpuMem(16000),
         Reject::kGpuShare},
        {"share_memory_exact", MakeNode({"T4", "T4"}), kTask.Share(500).GpuMem(15360),
         Reject::kNone},
        // Mixed node: the G1 GPU has 1000 free but only G2 (200 left) is allowed.
        {"share_only_allowed_gpu_counts", WithLefts(MakeNode({"G1", "G2"}), {1000, 200}),
         kTask.Share(500).Models({"G2"}), Reject::kGpuShare},
        // --- whole GPUs: lefts 1000, 999, 1000 → 2 fully free.
        {"whole_3_of_2_free", WithLefts(MakeNode({"G1", "G1", "G1"}), {1000, 999, 1000}),
         kTask.Whole(3), Reject::kWholeGpus},
        {"whole_2_of_2_free", WithLefts(MakeNode({"G1", "G1", "G1"}), {1000, 999, 1000}),
         kTask.Whole(2), Reject::kNone},
        // A GPU with all its milli but some memory reserved is not fully free.
        {"whole_gpu_with_memory_reserved", WithMemFree(MakeNode({"T4", "T4"}), 1, 15000),
         kTask.Whole(2), Reject::kWholeGpus},
        // Mixed node G1, G1, G2 all free; only G1 allowed → 2 usable.
        {"whole_3_only_2_allowed", MakeNode({"G1", "G1", "G2"}), kTask.Whole(3).Models({"G1"}),
         Reject::kWholeGpus},
        {"whole_2_allowed", MakeNode({"G1", "G1", "G2"}), kTask.Whole(2).Models({"G1"}),
         Reject::kNone},
        // --- MIG-mode GPUs serve neither shares nor whole GPUs. GPU0: MIG mode, no instance
        // (milli_free still 1000); GPU1: 400 left.
        {"mig_mode_gpu_not_for_share",
         WithLefts(WithMig(MakeNode({"A100-80GB", "A100-80GB"}), 0, {}), {1000, 400}),
         kTask.Share(500), Reject::kGpuShare},
        {"share_fits_the_other_gpu",
         WithLefts(WithMig(MakeNode({"A100-80GB", "A100-80GB"}), 0, {}), {1000, 400}),
         kTask.Share(300), Reject::kNone},
        {"mig_mode_gpu_not_whole",
         WithLefts(WithMig(MakeNode({"A100-80GB", "A100-80GB"}), 0, {}), {1000, 400}),
         kTask.Whole(1), Reject::kWholeGpus},
        // --- MIG requests.
        // An idle A100 not in MIG mode can be re-partitioned.
        {"mig_idle_gpu", MakeNode({"A100-80GB"}), kTask.Mig("3g.40gb"), Reject::kNone},
        // In MIG mode, 4g@0 and 3g@4 in use: slots 0..7 all taken → no 1g anywhere.
        {"mig_full",
         WithMig(MakeNode({"A100-80GB"}), 0, {{"4g.40gb", 0, true}, {"3g.40gb", 4, true}}),
         kTask.Mig("1g.10gb"), Reject::kMig},
        // The same layout with the 3g unused: reused as is.
        {"mig_free_instance",
         WithMig(MakeNode({"A100-80GB"}), 0, {{"4g.40gb", 0, true}, {"3g.40gb", 4, false}}),
         kTask.Mig("3g.40gb"), Reject::kNone},
        // T4 has no MIG.
        {"mig_not_capable", MakeNode({"T4"}), kTask.Mig("3g.40gb"), Reject::kMig},
        // Not in MIG mode and busy with a share: cannot be switched.
        {"mig_busy_plain_gpu", WithLefts(MakeNode({"A100-80GB"}), {700}), kTask.Mig("3g.40gb"),
         Reject::kMig},
        // Profile of another model (A30's 2g.12gb on an A100).
        {"mig_profile_of_other_model", MakeNode({"A100-80GB"}), kTask.Mig("2g.12gb"), Reject::kMig},
    }),
    RowName());
;

// ---------------------------------------------------------------------------------------------
// The uniform fast path (NodeSummary alone) and the per-GPU path agree. Each case runs on three
// nodes holding the same two usable G1 GPUs (lefts a, b):
//   uniform: [G1 a, G1 b]                               (summary.uniform, fast path)
//   mixed:   [G1 a, G1 b, G2 free], request limited to G1 (non-uniform, per-GPU path)
//   mig:     [G1 a, G1 b, A100 in MIG mode]              (non-uniform, per-GPU path)
// and all three must give the answer of a plain per-GPU oracle: a share fits iff some GPU has
// left ≥ milli; k whole GPUs fit iff at least k GPUs have left = 1000.

struct PathRow {
  std::string name;
  int32_t a, b;
  bool share;  // true: share of `amount` milli; false: `amount` whole GPUs
  int amount;
};
void PrintTo(const PathRow& row, std::ostream* os) { *os << row.name; }

std::vector<PathRow> PathRows() {
  std::vector<PathRow> rows;
  const std::vector<std::pair<int32_t, int32_t>> lefts = {{1000, 1000}, {1000, 0},   {470, 300},
                                                          {0, 0},       {999, 1000}, {469, 1}};
  const std::vector<std::pair<bool, int>> requests = {
      {true, 1}, {true, 300}, {true, 470}, {true, 999}, {false, 1}, {false, 2}, {false, 3}};
  for (const auto& [a, b] : lefts) {
    for (const auto& [share, amount] : requests) {
      rows.push_back(PathRow{"lefts_" + std::to_string(a) + "_" + std::to_string(b) + "_" +
                                 (share ? "share_" : "whole_") + std::to_string(amount),
                             a, b, share, amount});
    }
  }
  return rows;
}

class FastPathTest : public testing::TestWithParam<PathRow> {};

TEST_P(FastPathTest, UniformAndPerGpuPathsAgree) {
  const PathRow& row = GetParam();
  const bool fits = row.share ? (row.a >= row.amount || row.b >= row.amount)
                              : ((row.a == kMilliPerGpu) + (row.b == kMilliPerGpu) >= row.amount);
  const Reject want = fits ? Reject::kNone : (row.share ? Reject::kGpuShare : Reject::kWholeGpus);
  const TaskRequest any = row.share ? kTask.Share(row.amount) : kTask.Whole(row.amount);
  const TaskRequest g1 =
      row.share ? kTask.Share(row.amount).Models({"G1"}) : kTask.Whole(row.amount).Models({"G1"});

  ClusterState s;
  EXPECT_STREQ(Name(Check(WithLefts(MakeNode({"G1", "G1"}), {row.a, row.b}), any, &s)), Name(want));
  EXPECT_TRUE(s.summary(0).uniform);
  EXPECT_STREQ(Name(Check(WithLefts(MakeNode({"G1", "G1"}), {row.a, row.b}), g1, &s)), Name(want));
  EXPECT_TRUE(s.summary(0).uniform);

  EXPECT_STREQ(Name(Check(WithLefts(MakeNode({"G1", "G1", "G2"}), {row.a, row.b}), g1, &s)),
               Name(want));
  EXPECT_FALSE(s.summary(0).uniform);

  const Node mig = WithMig(WithLefts(MakeNode({"G1", "G1", "A100-80GB"}), {row.a, row.b}), 2, {});
  EXPECT_STREQ(Name(Check(mig, any, &s)), Name(want));
  EXPECT_FALSE(s.summary(0).uniform);
}

INSTANTIATE_TEST_SUITE_P(Feasibility, FastPathTest, testing::ValuesIn(PathRows()), RowName());

// ---------------------------------------------------------------------------------------------
// RejectText: the words of each reason, naming the requested amounts.

struct TextRow {
  const char* name;
  Reject reason;
  TaskRequest request;
  const char* want;
};
void PrintTo(const TextRow& row, std::ostream* os) { *os << row.name; }

class RejectTextTest : public testing::TestWithParam<TextRow> {};

TEST_P(RejectTextTest, Text) {
  const TextRow& row = GetParam();
  EXPECT_EQ(RejectText(row.reason, row.request), row.want);
}

INSTANTIATE_TEST_SUITE_P(
    Feasibility, RejectTextTest,
    testing::ValuesIn(std::vector<TextRow>{
        {"fits", Reject::kNone, kTask.Share(100), "fits"},
        {"cordoned", Reject::kCordoned, kTask.Share(100), "cordoned"},
        {"no_gpu", Reject::kNoGpu, kTask.Share(100), "no GPU"},
        {"wrong_model", Reject::kWrongModel, kTask.Share(100).Models({"G1"}), "wrong GPU model"},
        {"cpu", Reject::kCpu, kTask.Share(100).Cpu(4000), "less than 4000 cpu milli free"},
        {"memory", Reject::kMemory, kTask.Share(100).Cpu(0, 8192),
         "less than 8192 MiB memory free"},
        {"share", Reject::kGpuShare, kTask.Share(470), "no GPU with 470 milli free"},
        {"share_with_memory", Reject::kGpuShare, kTask.Share(500).GpuMem(2048),
         "no GPU with 500 milli and 2048 MiB free"},
        {"whole", Reject::kWholeGpus, kTask.Whole(2), "fewer than 2 free GPUs"},
        {"mig", Reject::kMig, kTask.Mig("3g.40gb"), "no room for MIG 3g.40gb"},
        {"other_node", Reject::kOtherNode, CpuOnly(1000).OnNode("n3"),
         "not node n3, where its volume is"},
        {"no_shared_storage", Reject::kNoSharedStorage, CpuOnly(1000).SharedStorage(),
         "no shared storage (agent --shared-storage)"},
        {"no_docker", Reject::kNoDocker, kTask.Share(100), "no docker runtime"},
        {"no_docker_gpus", Reject::kNoDockerGpus, kTask.Share(100),
         "no NVIDIA container runtime for GPU tasks with an image"},
        {"disk", Reject::kDisk,
         [] {
           TaskRequest r = CpuOnly(1000);
           r.disk_gib = 50;
           return r;
         }(),
         "less than 50 GiB disk free"},
    }),
    RowName());
;

// ---------------------------------------------------------------------------------------------
// RejectCounts: "N nodes: reason" parts, most frequent first, equal counts in reason order.

struct SummaryRow {
  const char* name;
  std::vector<std::pair<Reject, int>> adds;  // reason, how many times, added in this order
  TaskRequest request;
  const char* want;
};
void PrintTo(const SummaryRow& row, std::ostream* os) { *os << row.name; }

class SummaryTest : public testing::TestWithParam<SummaryRow> {};

TEST_P(SummaryTest, Summary) {
  const SummaryRow& row = GetParam();
  RejectCounts counts;
  for (const auto& [reason, n] : row.adds) {
    for (int i = 0; i < n; ++i) counts.Add(reason);
  }
  EXPECT_EQ(counts.Summary(row.request), row.want);
}

INSTANTIATE_TEST_SUITE_P(
    Feasibility, SummaryTest,
    testing::ValuesIn(std::vector<SummaryRow>{
        // The example of the header: wrong model (added first, earlier in enum order) has the
        // smaller count, so it comes second.
        {"most_frequent_first",
         {{Reject::kWrongModel, 9}, {Reject::kGpuShare, 312}},
         kTask.Share(470),
         "312 nodes: no GPU with 470 milli free; 9 nodes: wrong GPU model"},
        // One node: singular "node".
        {"singular", {{Reject::kCordoned, 1}}, kTask.Share(100), "1 node: cordoned"},
        // Equal counts keep reason order (cordoned before no GPU), whatever the add order.
        {"ties_in_reason_order",
         {{Reject::kNoGpu, 2}, {Reject::kCordoned, 2}},
         kTask.Whole(1),
         "2 nodes: cordoned; 2 nodes: no GPU"},
        // Three reasons: 5 > 3 > 1.
        {"three_reasons",
         {{Reject::kMemory, 1}, {Reject::kWholeGpus, 5}, {Reject::kCpu, 3}},
         kTask.Whole(2).Cpu(4000, 8192),
         "5 nodes: fewer than 2 free GPUs; 3 nodes: less than 4000 cpu milli free; 1 node: less "
         "than 8192 MiB memory free"},
        // kNone adds are not reasons.
        {"fits_not_listed",
         {{Reject::kNone, 4}, {Reject::kMig, 2}},
         kTask.Mig("1g.10gb"),
         "2 nodes: no room for MIG 1g.10gb"},
        {"empty", {}, kTask.Share(100), "no nodes"},
    }),
    RowName());
;

TEST(RejectCountsTest, ReasonsArePairsMostFrequentFirst) {
  RejectCounts counts;
  counts.Add(Reject::kWrongModel);
  for (int i = 0; i < 3; ++i) counts.Add(Reject::kGpuShare);
  const std::vector<std::pair<std::string, int>> want = {{"no GPU with 470 milli free", 3},
                                                         {"wrong GPU model", 1}};
  EXPECT_EQ(counts.Reasons(kTask.Share(470)), want);
}

// ---------------------------------------------------------------------------------------------
// RequestView: model ids resolved once against the state.

TEST(RequestViewTest, ModelAllowedByClusterModelId) {
  ClusterState state;
  state.AddNode(MakeNode({"G1"}));
  state.AddNode(MakeNode({"G2"}));
  state.AddNode(MakeNode({"G3"}));
  const TaskRequest r = kTask.Share(100).Models({"G3", "G1", "G9"});
  const RequestView view(state, r);
  EXPECT_EQ(view.form, GpuForm::kShare);
  EXPECT_TRUE(view.ModelAllowed(state.ModelId("G1")));
  EXPECT_FALSE(view.ModelAllowed(state.ModelId("G2")));
  EXPECT_TRUE(view.ModelAllowed(state.ModelId("G3")));
  EXPECT_FALSE(view.ModelAllowed(-1));  // a node without GPUs has no model
  EXPECT_TRUE(view.GpuUsable(state, state.node(0).gpus[0]));
  EXPECT_FALSE(view.GpuUsable(state, state.node(1).gpus[0]));

  // No list: every model, and a GPU-less node's -1 too.
  const TaskRequest any = kTask.Share(100);
  const RequestView any_view(state, any);
  EXPECT_TRUE(any_view.model_allowed.empty());
  EXPECT_TRUE(any_view.ModelAllowed(state.ModelId("G2")));
}

// Cordoning through the state (SetSchedulable) is seen by CheckNode, and lifting it too.
// Tasks with an image go only where docker works (and, with GPUs, can give them); disk_gib is
// reserved on nodes that report their disk. CheckNode, CheckNodeFull and the SummaryFilter agree.
TEST(CheckNodeDockerAndDisk, ImagesNeedDockerAndDiskIsReserved) {
  auto node = [](bool docker, bool docker_gpus, int64_t disk_gib) {
    Node n = MakeNode({"G1", "G1"});
    n.docker = docker;
    n.docker_gpus = docker_gpus;
    n.disk_gib = n.disk_free_gib = disk_gib;
    return n;
  };
  auto req = [](TaskRequest r, bool image, int64_t disk_gib) {
    r.image = image;
    r.disk_gib = disk_gib;
    return r;
  };
  struct Row {
    const char* name;
    Node node;
    TaskRequest request;
    Reject want;
  };
  const std::vector<Row> rows = {
      {"image_no_docker", node(false, false, 0), req(CpuOnly(1000), true, 0), Reject::kNoDocker},
      {"image_gpu_no_docker", node(false, false, 0), req(kTask.Whole(1), true, 0),
       Reject::kNoDocker},
      {"image_gpu_docker_without_gpus", node(true, false, 0), req(kTask.Whole(1), true, 0),
       Reject::kNoDockerGpus},
      {"image_gpu_model_docker_without_gpus", node(true, false, 0),
       req(kTask.Whole(1).Models({"G1"}), true, 0), Reject::kNoDockerGpus},
      {"image_cpu_docker_without_gpus", node(true, false, 0), req(CpuOnly(1000), true, 0),
       Reject::kNone},
      {"image_gpu_docker_gpus", node(true, true, 0), req(kTask.Share(100), true, 0), Reject::kNone},
      {"no_image_no_docker", node(false, false, 0), req(kTask.Whole(1), false, 0), Reject::kNone},
      {"disk_over", node(false, false, 40), req(CpuOnly(1000), false, 41), Reject::kDisk},
      {"disk_exact", node(false, false, 40), req(kTask.Whole(2), false, 40), Reject::kNone},
      {"disk_not_reported", node(false, false, 0), req(CpuOnly(1000), false, 1000), Reject::kNone},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    ClusterState state;
    EXPECT_STREQ(Name(Check(row.node, row.request, &state)), Name(row.want));
    const RequestView view(state, row.request);
    EXPECT_STREQ(Name(CheckNodeFull(state, 0, view)), Name(row.want));
    const SummaryFilter filter(view);
    if (filter.usable()) {
      EXPECT_EQ(filter.Fits(state, 0, view), row.want == Reject::kNone);
    }
  }
  // What a bound task reserves is not free for the next; its release frees it.
  ClusterState state;
  state.AddNode(node(true, true, 40));
  const TaskRequest first = req(CpuOnly(1000), true, 30);
  ASSERT_TRUE(state.Bind("t-1", first, Placement{0, {}, 0, 0, std::nullopt}));
  EXPECT_EQ(state.node(0).disk_free_gib, 10);
  const TaskRequest second = req(CpuOnly(1000), false, 11);
  EXPECT_STREQ(Name(CheckNode(state, 0, RequestView(state, second))), "kDisk");
  EXPECT_FALSE(state.Bind("t-2", second, Placement{0, {}, 0, 0, std::nullopt}));
  // A node registering again with more disk keeps what its tasks reserve.
  Node again = node(true, true, 100);
  ASSERT_TRUE(state.UpdateNode(0, again));
  EXPECT_EQ(state.node(0).disk_free_gib, 70);
  EXPECT_TRUE(state.Unbind("t-1"));
  EXPECT_EQ(state.node(0).disk_free_gib, 100);
}

TEST(CheckNodeStateTest, SetSchedulableTogglesCordon) {
  ClusterState state;
  state.AddNode(MakeNode({"G1"}));
  const TaskRequest r = kTask.Share(100);
  const RequestView view(state, r);
  EXPECT_EQ(CheckNode(state, 0, view), Reject::kNone);
  state.SetSchedulable(0, false);
  EXPECT_EQ(CheckNode(state, 0, view), Reject::kCordoned);
  state.SetSchedulable(0, true);
  EXPECT_EQ(CheckNode(state, 0, view), Reject::kNone);
}

}  // namespace
}  // namespace gpupool::sched
