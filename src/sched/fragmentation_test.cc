// Tests for sched/fragmentation: TypicalTasks (coverage cut, renormalised weights, order, what
// counts as a shape), FragModel::Bins per fragment category with hand-computed values, the
// capacity-aware measure (FragMeasure::kCapacity) with hand-computed values, and the Amount memo
// (which keeps the two measures apart).
#include "sched/fragmentation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/node.h"
#include "core/task.h"
#include "sched/cluster_state.h"
#include "sched/test_builders.h"

namespace gpupool::sched {
namespace {

// `n` copies of `r` appended to `w`.
void Add(std::vector<TaskRequest>& w, int n, const TaskRequest& r) {
  for (int i = 0; i < n; ++i) w.push_back(r);
}

TypicalTask T(int64_t cpu, int32_t milli, int count, double weight,
              std::vector<std::string> models = {}) {
  TypicalTask t;
  t.cpu_milli = cpu;
  t.milli_per_gpu = milli;
  t.gpu_count = count;
  t.models = std::move(models);
  t.weight = weight;
  return t;
}

// ---------------------------------------------------------------------------------------------
// TypicalTasks.

struct TypicalRow {
  const char* name;
  std::vector<TaskRequest> workload;
  double coverage_pct;
  std::vector<TypicalTask> want;  // in order
};
void PrintTo(const TypicalRow& row, std::ostream* os) { *os << row.name; }

class TypicalTasksTest : public testing::TestWithParam<TypicalRow> {};

TEST_P(TypicalTasksTest, ShapesOrderAndWeights) {
  const TypicalRow& row = GetParam();
  const std::vector<TypicalTask> got = TypicalTasks(row.workload, row.coverage_pct);
  ASSERT_EQ(got.size(), row.want.size());
  double sum = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("typical task " + std::to_string(i));
    EXPECT_EQ(got[i].cpu_milli, row.want[i].cpu_milli);
    EXPECT_EQ(got[i].milli_per_gpu, row.want[i].milli_per_gpu);
    EXPECT_EQ(got[i].gpu_count, row.want[i].gpu_count);
    EXPECT_EQ(got[i].models, row.want[i].models);
    EXPECT_NEAR(got[i].weight, row.want[i].weight, 1e-12);
    sum += got[i].weight;
  }
  if (!got.empty()) {
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
}

std::vector<TypicalRow> TypicalRows() {
  std::vector<TypicalRow> rows;
  {
    // 10 S(1000 cpu, 500) + 6 W(2000 cpu, 1 GPU) + 3 CPU-only(4000) + 1 S(1000, 250) + 5 MIG.
    // MIG left out: total 20, 95 % of it = 19. Cumulative 10, 16, 19 → stop (19 is not < 19):
    // three shapes covering 19, weights (n/20)/(19/20) = 10/19, 6/19, 3/19.
    TypicalRow r{"coverage_cut_at_95", {}, 95.0, {}};
    Add(r.workload, 10, CpuOnly(1000, 1024).Share(500));
    Add(r.workload, 5, CpuOnly(1000, 1024).Mig("3g.40gb"));
    Add(r.workload, 6, CpuOnly(2000, 1024).Whole(1));
    Add(r.workload, 1, CpuOnly(1000, 1024).Share(250));
    Add(r.workload, 3, CpuOnly(4000, 1024));
    r.want = {T(1000, 500, 1, 10.0 / 19), T(2000, 1000, 1, 6.0 / 19), T(4000, 0, 0, 3.0 / 19)};
    rows.push_back(r);
  }
  {
    // The same workload at 100 %: every shape, weights n/20 (nothing to renormalise).
    TypicalRow r{"coverage_100_takes_all", rows[0].workload, 100.0, {}};
    r.want = {T(1000, 500, 1, 0.5), T(2000, 1000, 1, 0.3), T(4000, 0, 0, 0.15),
              T(1000, 250, 1, 0.05)};
    rows.push_back(r);
  }
  {
    // 19 + 1 of 20: the first shape alone reaches 19 = 95 % → one shape, weight 1.
    TypicalRow r{"first_shape_reaches_coverage", {}, 95.0, {}};
    Add(r.workload, 19, CpuOnly(1000, 1024).Share(500));
    Add(r.workload, 1, CpuOnly(1000, 1024).Share(100));
    r.want = {T(1000, 500, 1, 1.0)};
    rows.push_back(r);
  }
  {
    // 18 + 2 of 20: 18 < 19 so the second joins too; cum = 20 = all → weights 0.9, 0.1.
    TypicalRow r{"just_under_coverage_takes_next", {}, 95.0, {}};
    Add(r.workload, 18, CpuOnly(1000, 1024).Share(500));
    Add(r.workload, 2, CpuOnly(1000, 1024).Share(100));
    r.want = {T(1000, 500, 1, 0.9), T(1000, 100, 1, 0.1)};
    rows.push_back(r);
  }
  {
    // Equal counts: larger shape first — cpu, then milli per GPU, then GPU count (descending).
    // Added in ascending order so that insertion order cannot explain the result.
    TypicalRow r{"equal_counts_larger_shape_first", {}, 100.0, {}};
    Add(r.workload, 3, CpuOnly(1000, 1024).Share(300));
    Add(r.workload, 3, CpuOnly(1000, 1024).Share(800));
    Add(r.workload, 3, CpuOnly(1000, 1024).Whole(1));
    Add(r.workload, 3, CpuOnly(1000, 1024).Whole(2));
    Add(r.workload, 3, CpuOnly(2000, 1024).Share(500));
    r.want = {T(2000, 500, 1, 0.2), T(1000, 1000, 2, 0.2), T(1000, 1000, 1, 0.2),
              T(1000, 800, 1, 0.2), T(1000, 300, 1, 0.2)};
    rows.push_back(r);
  }
  {
    // A higher count beats a larger shape: 4 × (1000, 300) before 3 × (2000, 500).
    TypicalRow r{"count_before_shape", {}, 100.0, {}};
    Add(r.workload, 3, CpuOnly(2000, 1024).Share(500));
    Add(r.workload, 4, CpuOnly(1000, 1024).Share(300));
    r.want = {T(1000, 300, 1, 4.0 / 7), T(2000, 500, 1, 3.0 / 7)};
    rows.push_back(r);
  }
  {
    // Model lists are part of the shape; equal counts order by the joined list descending:
    // "B" > "A|B" > "".
    TypicalRow r{"models_part_of_shape", {}, 100.0, {}};
    Add(r.workload, 2, CpuOnly(1000, 1024).Share(500));
    Add(r.workload, 2, CpuOnly(1000, 1024).Share(500).Models({"A", "B"}));
    Add(r.workload, 2, CpuOnly(1000, 1024).Share(500).Models({"B"}));
    r.want = {T(1000, 500, 1, 1.0 / 3, {"B"}), T(1000, 500, 1, 1.0 / 3, {"A", "B"}),
              T(1000, 500, 1, 1.0 / 3)};
    rows.push_back(r);
  }
  {
    // Memory (host and GPU) is not part of a shape: one shape of 2.
    TypicalRow r{"memory_not_in_shape", {}, 95.0, {}};
    TaskRequest a = CpuOnly(1000, 1024).Share(500);
    TaskRequest b = a;
    b.memory_mib = 99999;
    b.gpu_mem_mib = 4096;
    r.workload = {a, b};
    r.want = {T(1000, 500, 1, 1.0)};
    rows.push_back(r);
  }
  {
    // CPU-only tasks are typical tasks too (milli 0, count 0).
    TypicalRow r{"cpu_only_included", {}, 95.0, {}};
    Add(r.workload, 3, CpuOnly(8000, 1024));
    Add(r.workload, 1, CpuOnly(2000, 1024));
    // 95 % of 4 = 3.8: 3 < 3.8 → both; weights 0.75, 0.25.
    r.want = {T(8000, 0, 0, 0.75), T(2000, 0, 0, 0.25)};
    rows.push_back(r);
  }
  {
    TypicalRow r{"mig_only_is_empty", {}, 95.0, {}};
    Add(r.workload, 4, CpuOnly(1000, 1024).Mig("1g.10gb"));
    rows.push_back(r);
  }
  rows.push_back(TypicalRow{"empty_workload", {}, 95.0, {}});
  return rows;
}

INSTANTIATE_TEST_SUITE_P(Fragmentation, TypicalTasksTest, testing::ValuesIn(TypicalRows()),
                         RowName());

// ---------------------------------------------------------------------------------------------
// FragModel::Bins. The state knows G1 (id 0) and G2 (id 1).

ClusterState TwoModelState() {
  ClusterState s;
  s.AddNode(Node::Make("g1", 64000, 262144, 2, "G1", 16384));
  s.AddNode(Node::Make("g2", 64000, 262144, 2, "G2", 16384));
  s.AddNode(Node::Make("cpu", 64000, 262144, 0, ""));
  return s;
}

struct BinsRow {
  const char* name;
  std::vector<TypicalTask> typical;
  const char* model;  // nullptr: a node without GPUs (model id −1)
  int64_t cpu_left;
  std::vector<int32_t> gpu_left;
  FragBins want;  // Q1, Q2, Q3, Q4, XL, XR, NoAccess
};
void PrintTo(const BinsRow& row, std::ostream* os) { *os << row.name; }

class BinsTest : public testing::TestWithParam<BinsRow> {};

TEST_P(BinsTest, Categories) {
  const BinsRow& row = GetParam();
  const ClusterState s = TwoModelState();
  const int model_id = row.model == nullptr ? -1 : s.ModelId(row.model);
  FragModel model(row.typical);
  const FragBins got = model.Bins(s, model_id, row.cpu_left, row.gpu_left);
  const char* names[] = {"Q1", "Q2", "Q3", "Q4", "XL", "XR", "NoAccess"};
  double amount = 0, total = 0;
  for (int c = 0; c < kFragCategories; ++c) {
    EXPECT_DOUBLE_EQ(got[static_cast<size_t>(c)], row.want[static_cast<size_t>(c)]) << names[c];
    total += row.want[static_cast<size_t>(c)];
    if (c != kQ3) amount += row.want[static_cast<size_t>(c)];
  }
  EXPECT_DOUBLE_EQ(FragAmount(got), amount);
  EXPECT_DOUBLE_EQ(FragTotal(got), total);
  EXPECT_DOUBLE_EQ(model.Amount(s, model_id, row.cpu_left, row.gpu_left), amount);
}

INSTANTIATE_TEST_SUITE_P(
    Fragmentation, BinsTest,
    testing::ValuesIn(std::vector<BinsRow>{
        // Task 500×1 fits (GPUs 1000 and 600 ≥ 500; cpu 1000 ≤ 4000): only the GPU too small for
        // it is fragment. Q2 = 300; Q3 = 1900 − 300 = 1600.
        {"q3_task_fits",
         {T(1000, 500, 1, 1.0)},
         "G1",
         4000,
         {1000, 300, 600},
         {0, 300, 1600, 0, 0, 0, 0}},
        // 1000×2 needs two free GPUs, one exists; cpu fine → Q2 = all 1300 idle.
        {"q2_gpu_short",
         {T(1000, 1000, 2, 1.0)},
         "G1",
         4000,
         {1000, 300},
         {0, 1300, 0, 0, 0, 0, 0}},
        // Same, and cpu 500 < 1000 too → Q1 = 1300.
        {"q1_gpu_and_cpu_short",
         {T(1000, 1000, 2, 1.0)},
         "G1",
         500,
         {1000, 300},
         {1300, 0, 0, 0, 0, 0, 0}},
        // GPU fits (1000 ≥ 500) but cpu 4000 < 8000 → Q4 = 1300.
        {"q4_cpu_short", {T(8000, 500, 1, 1.0)}, "G1", 4000, {1000, 300}, {0, 0, 0, 1300, 0, 0, 0}},
        // CPU-only task whose cpu fits: all idle GPU is fragment to it, XL = 1300.
        {"xl_cpu_only_fits",
         {T(1000, 0, 0, 1.0)},
         "G1",
         4000,
         {1000, 300},
         {0, 0, 0, 0, 1300, 0, 0}},
        // CPU-only task that does not fit (8000 > 4000): XR = 1300.
        {"xr_cpu_only_short",
         {T(8000, 0, 0, 1.0)},
         "G1",
         4000,
         {1000, 300},
         {0, 0, 0, 0, 0, 1300, 0}},
        // Task limited to G2 on a G1 node → NoAccess = 1300.
        {"no_access_disallowed_model",
         {T(1000, 500, 1, 1.0, {"G2"})},
         "G1",
         4000,
         {1000, 300},
         {0, 0, 0, 0, 0, 0, 1300}},
        // A list naming G1 gives access: as q3 (frag 300, usable 1000).
        {"access_through_list",
         {T(1000, 500, 1, 1.0, {"G2", "G1"})},
         "G1",
         4000,
         {1000, 300},
         {0, 300, 1000, 0, 0, 0, 0}},
        // A list naming only a model the cluster does not know: NoAccess.
        {"unknown_model_no_access",
         {T(1000, 500, 1, 1.0, {"G9"})},
         "G1",
         4000,
         {1000, 300},
         {0, 0, 0, 0, 0, 0, 1300}},
        // Exactly fits: left 500 = 500 and cpu 1000 = 1000 → Q3 500.
        {"boundary_fits", {T(1000, 500, 1, 1.0)}, "G1", 1000, {500}, {0, 0, 500, 0, 0, 0, 0}},
        // 1000×2 on 1000, 1000, 600 fits; the 600 is fragment: Q2 600, Q3 2000.
        {"multi_gpu_fits",
         {T(1000, 1000, 2, 1.0)},
         "G1",
         4000,
         {1000, 1000, 600},
         {0, 600, 2000, 0, 0, 0, 0}},
        // A node without GPUs: nothing idle, every bin 0.
        {"no_gpu_node",
         {T(1000, 500, 1, 1.0), T(1000, 0, 0, 1.0)},
         nullptr,
         4000,
         {},
         {0, 0, 0, 0, 0, 0, 0}},
        // Weighted mix on G1, cpu 4000, lefts 1000, 300 (idle 1300):
        //   500×1 (w 0.5) fits: Q2 += 0.5·300 = 150, Q3 += 0.5·1000 = 500;
        //   CPU-only 1000 (w 0.25): XL += 0.25·1300 = 325;
        //   1000×1 limited to G2 (w 0.25): NoAccess += 0.25·1300 = 325.
        //   Amount = 150 + 325 + 325 = 800; total 1300.
        {"weighted_mix",
         {T(1000, 500, 1, 0.5), T(1000, 0, 0, 0.25), T(1000, 1000, 1, 0.25, {"G2"})},
         "G1",
         4000,
         {1000, 300},
         {0, 150, 500, 0, 325, 0, 325}},
        // Two tasks in one category accumulate: 500×1 (w 0.5) and 1000×1 (w 0.5) on lefts 600,
        // 550: the first fits (frag 0, Q3 0.5·1150 = 575), the second does not (Q2 0.5·1150).
        {"two_tasks",
         {T(1000, 500, 1, 0.5), T(1000, 1000, 1, 0.5)},
         "G1",
         4000,
         {600, 550},
         {0, 575, 575, 0, 0, 0, 0}},
    }),
    RowName());

// NodeBins / NodeAmount read the node as it is: CPU left, each GPU's milli left, and 0 for a
// GPU in MIG mode.
TEST(FragModelTest, NodeBinsReadTheNode) {
  ClusterState s = TwoModelState();
  Node n = Node::Make("x", 4000, 65536, 3, "G1", 16384);
  n.gpus[1].milli_free = 300;
  n.gpus[2].mig_enabled = true;  // its 1000 milli are not usable: counts 0
  const int x = s.AddNode(n);
  FragModel model({T(1000, 500, 1, 0.5), T(1000, 0, 0, 0.5)});
  // 500×1 (w 0.5): fits on GPU0; frag 300 (GPU1) + 0 (GPU2) → Q2 150, Q3 0.5·1000 = 500.
  // CPU-only (w 0.5): XL 0.5·1300 = 650.
  const FragBins got = model.NodeBins(s, x);
  EXPECT_DOUBLE_EQ(got[kQ2], 150);
  EXPECT_DOUBLE_EQ(got[kQ3], 500);
  EXPECT_DOUBLE_EQ(got[kXL], 650);
  EXPECT_DOUBLE_EQ(FragTotal(got), 1300);
  EXPECT_DOUBLE_EQ(model.NodeAmount(s, x), 800);
}

// The memo is keyed on the multiset of lefts: any order gives the same value, equal to the
// unmemoised one.
TEST(FragModelTest, AmountSameForPermutedLefts) {
  const ClusterState s = TwoModelState();
  FragModel model({T(1000, 500, 1, 0.5), T(1000, 1000, 1, 0.5)});
  // 500×1: frag 300 → 150; 1000×1: fits on GPU 1000, frag 300 + 600 → 450. Amount 600.
  const std::vector<std::vector<int32_t>> perms = {
      {300, 1000, 600}, {1000, 600, 300}, {600, 300, 1000}, {1000, 300, 600}};
  for (const auto& p : perms) {
    EXPECT_DOUBLE_EQ(model.Amount(s, 0, 4000, p), 600);
    EXPECT_DOUBLE_EQ(FragAmount(model.Bins(s, 0, 4000, p)), 600);
  }
}

// Different keys are not confused by the memo: CPU left, model and lefts each change the value.
TEST(FragModelTest, AmountMemoTellsKeysApart) {
  const ClusterState s = TwoModelState();
  FragModel model({T(1000, 500, 1, 0.5), T(1000, 1000, 1, 0.5, {"G1"})});
  const std::vector<int32_t> lefts = {1000, 300};
  // G1, cpu 4000: 500×1 frag 300 → 150; 1000×1 (G1) frag 300 → 150. Amount 300.
  EXPECT_DOUBLE_EQ(model.Amount(s, 0, 4000, lefts), 300);
  // cpu 500 < 1000: both GPU-fitting but CPU-short → Q4, 0.5·1300 + 0.5·1300 = 1300.
  EXPECT_DOUBLE_EQ(model.Amount(s, 0, 500, lefts), 1300);
  // G2: 500×1 frag 150; 1000×1 limited to G1 → NoAccess 650. Amount 800.
  EXPECT_DOUBLE_EQ(model.Amount(s, 1, 4000, lefts), 800);
  // Lefts 1000, 1000: no fragment at all.
  EXPECT_DOUBLE_EQ(model.Amount(s, 0, 4000, std::vector<int32_t>{1000, 1000}), 0);
  // Asked again, the first key still gives its own value.
  EXPECT_DOUBLE_EQ(model.Amount(s, 0, 4000, lefts), 300);
}

// Over many node shapes (1..8 GPUs, several CPU and model values) the memoised Amount equals
// FragAmount(Bins(...)) computed fresh: no two keys collide.
TEST(FragModelTest, AmountMatchesBinsOverManyKeys) {
  const ClusterState s = TwoModelState();
  const std::vector<TypicalTask> typical = {T(1000, 500, 1, 0.3), T(2000, 1000, 2, 0.3, {"G1"}),
                                            T(4000, 250, 1, 0.2), T(8000, 0, 0, 0.2)};
  FragModel memo(typical);
  FragModel fresh(typical);
  std::mt19937_64 rng(7);
  const int32_t values[] = {0, 1, 100, 250, 470, 500, 999, 1000};
  const int64_t cpus[] = {0, 999, 1000, 2000, 4000, 8000, 16777215};
  for (int i = 0; i < 3000; ++i) {
    std::vector<int32_t> lefts(1 + rng() % 8);
    for (int32_t& l : lefts) l = values[rng() % 8];
    const int64_t cpu = cpus[rng() % 7];
    const int model_id = static_cast<int>(rng() % 3) - 1;
    const double want = FragAmount(fresh.Bins(s, model_id, cpu, lefts));
    ASSERT_DOUBLE_EQ(memo.Amount(s, model_id, cpu, lefts), want)
        << "case " << i << " cpu " << cpu << " model " << model_id;
  }
}

// ---------------------------------------------------------------------------------------------
// FragMeasure::kCapacity: Σ_t w_t · (idle − milli_t·k_t·min(gpu slots, cpu slots)), with gpu
// slots = Σ ⌊left/milli_t⌋ for a share, ⌊free GPUs/k_t⌋ for k_t whole GPUs, cpu slots =
// ⌊cpu_left/cpu_t⌋; a CPU-only task, or one not allowed on the node's model, counts all idle GPU.
// Each row also gives the paper's measure of the same node, computed by the same FragModel (the
// two must not be confused) and showing where they part.

struct CapacityRow {
  const char* name;
  std::vector<TypicalTask> typical;
  const char* model;  // nullptr: a node without GPUs (model id −1)
  int64_t cpu_left;
  std::vector<int32_t> gpu_left;
  double want;        // FragMeasure::kCapacity
  double want_paper;  // FragMeasure::kPaper
};
void PrintTo(const CapacityRow& row, std::ostream* os) { *os << row.name; }

class CapacityTest : public testing::TestWithParam<CapacityRow> {};

TEST_P(CapacityTest, Amount) {
  const CapacityRow& row = GetParam();
  const ClusterState s = TwoModelState();
  const int model_id = row.model == nullptr ? -1 : s.ModelId(row.model);
  FragModel model(row.typical);
  EXPECT_DOUBLE_EQ(model.Amount(s, model_id, row.cpu_left, row.gpu_left, FragMeasure::kCapacity),
                   row.want);
  EXPECT_DOUBLE_EQ(model.Amount(s, model_id, row.cpu_left, row.gpu_left, FragMeasure::kPaper),
                   row.want_paper);
  EXPECT_DOUBLE_EQ(FragAmount(model.Bins(s, model_id, row.cpu_left, row.gpu_left)), row.want_paper);
  // Asked again (now from the memo), and with the GPUs in reverse order (the same key).
  std::vector<int32_t> reversed(row.gpu_left.rbegin(), row.gpu_left.rend());
  EXPECT_DOUBLE_EQ(model.Amount(s, model_id, row.cpu_left, reversed, FragMeasure::kCapacity),
                   row.want);
  EXPECT_DOUBLE_EQ(model.Amount(s, model_id, row.cpu_left, row.gpu_left), row.want_paper);
}

INSTANTIATE_TEST_SUITE_P(
    Fragmentation, CapacityTest,
    testing::ValuesIn(std::vector<CapacityRow>{
        // Share 470 on lefts 1000, 500, 300 (idle 1800), cpu 8000 (8 slots):
        //   gpu slots ⌊1000/470⌋ + ⌊500/470⌋ + ⌊300/470⌋ = 2 + 1 + 0 = 3 ≤ 8, so usable: the free
        //   GPU whole (1000) + ⌊500/470⌋·470 (470) + 0 = 1470 → fragment 1800 − 1470 = 330.
        //   Paper: fits once, only the 300 is too small → 300.
        {"share_slots_sum", {T(1000, 470, 1, 1.0)}, "G1", 8000, {1000, 500, 300}, 330, 300},
        // The same with cpu 1999: ⌊1999/1000⌋ = 1 cpu slot → min(3, 1) = 1 → usable 470
        // → 1330. The paper's measure does not see it (one instance still fits): 300.
        {"share_cpu_bounds", {T(1000, 470, 1, 1.0)}, "G1", 1999, {1000, 500, 300}, 1330, 300},
        // cpu 2000: exactly 2 slots → min(3, 2) = 2 → 940 usable → 860.
        {"share_cpu_boundary", {T(1000, 470, 1, 1.0)}, "G1", 2000, {1000, 500, 300}, 860, 300},
        // cpu 999: no slot → all 1800; the paper's Q4 says the same.
        {"share_cpu_short", {T(1000, 470, 1, 1.0)}, "G1", 999, {1000, 500, 300}, 1800, 1800},
        // The remainder of a partly used GPU that fits a task twice: 960 − 2·470 = 20 (the paper
        // sees 0); a free GPU has no remainder: it is not fragmented, whatever it will host.
        {"share_remainder", {T(1000, 470, 1, 1.0)}, "G1", 8000, {960}, 20, 0},
        {"share_free_gpu_whole", {T(1000, 470, 1, 1.0)}, "G1", 8000, {1000}, 0, 0},
        // A task that asks no CPU is not bounded by it, even at cpu 0: as share_slots_sum.
        {"share_no_cpu_demand", {T(0, 470, 1, 1.0)}, "G1", 0, {1000, 500, 300}, 330, 300},
        // A GPU with nothing left adds neither idle milli nor slots: usable 1000 + 0 + 470 of
        // 1500 → 30; paper: the 0 is below 470 but adds 0 → 0.
        {"share_zero_left_gpu", {T(1000, 470, 1, 1.0)}, "G1", 8000, {1000, 0, 500}, 30, 0},
        // Two whole GPUs on 3 free GPUs: ⌊3/2⌋ = 1 instance → 2000 of 3000 → 1000. Paper: fits,
        // no GPU below 1000 → 0.
        {"whole_k2_three_free", {T(1000, 1000, 2, 1.0)}, "G1", 8000, {1000, 1000, 1000}, 1000, 0},
        // A GPU with 999 left is not free: 3 free of 4 → 1 instance → 3999 − 2000 = 1999; paper:
        // fits, the 999 is fragment.
        {"whole_k2_partial_not_free",
         {T(1000, 1000, 2, 1.0)},
         "G1",
         8000,
         {1000, 999, 1000, 1000},
         1999,
         999},
        // One free GPU of the two needed: no instance → all 1500 (paper: Q2, all 1500).
        {"whole_k2_one_free", {T(1000, 1000, 2, 1.0)}, "G1", 8000, {1000, 500}, 1500, 1500},
        // One whole GPU: 2 free → 2000 of 2600 → 600 (paper alike: the 600 is too small).
        {"whole_k1", {T(1000, 1000, 1, 1.0)}, "G1", 8000, {1000, 600, 1000}, 600, 600},
        // 4 free GPUs fit two 2-GPU instances but cpu 4000 feeds one (4000 each): 2000 of 4000
        // → 2000. Paper: fits once → 0.
        {"whole_cpu_bounds",
         {T(4000, 1000, 2, 1.0)},
         "G1",
         4000,
         {1000, 1000, 1000, 1000},
         2000,
         0},
        // CPU-only typical task: all idle GPU, whether its CPU fits (XL) or not (XR).
        {"cpu_only_all_idle", {T(1000, 0, 0, 1.0)}, "G1", 8000, {1000, 500, 300}, 1800, 1800},
        {"cpu_only_short_all_idle",
         {T(16000, 0, 0, 1.0)},
         "G1",
         8000,
         {1000, 500, 300},
         1800,
         1800},
        // A task limited to G2 on a G1 node: all idle (NoAccess).
        {"disallowed_model",
         {T(1000, 470, 1, 1.0, {"G2"})},
         "G1",
         8000,
         {1000, 500, 300},
         1800,
         1800},
        // A list naming G1 gives access: as share_slots_sum.
        {"allowed_through_list",
         {T(1000, 470, 1, 1.0, {"G2", "G1"})},
         "G1",
         8000,
         {1000, 500, 300},
         330,
         300},
        // Only a model the cluster does not know: all idle.
        {"unknown_model", {T(1000, 470, 1, 1.0, {"G9"})}, "G1", 8000, {1000, 500, 300}, 1800, 1800},
        // The same task on the G2 node: allowed there → 330.
        {"allowed_on_other_node",
         {T(1000, 470, 1, 1.0, {"G2"})},
         "G2",
         8000,
         {1000, 500, 300},
         330,
         300},
        // A node without GPUs: nothing idle, 0 for every task.
        {"no_gpu_node", {T(1000, 470, 1, 1.0), T(1000, 0, 0, 1.0)}, nullptr, 8000, {}, 0, 0},
        // Weights combine linearly; lefts 1000, 500, 300 (idle 1800), cpu 8000:
        //   share 470 (w 0.5): 0.5·330 = 165;   CPU-only (w 0.25): 0.25·1800 = 450;
        //   2 whole GPUs (w 0.25): 1 free → no instance: 0.25·1800 = 450.   Σ 1065.
        //   Paper: 0.5·300 + 450 + 0.25·1800 (Q2) = 1050.
        {"weights_linear",
         {T(1000, 470, 1, 0.5), T(1000, 0, 0, 0.25), T(1000, 1000, 2, 0.25)},
         "G1",
         8000,
         {1000, 500, 300},
         1065,
         1050},
        // Unequal weights, two shares: 470 (w 0.75) and 250 (w 0.25) on lefts 1000, 500, 300:
        //   470: 330 → 247.5; 250: 4 + 2 + 1 = 7 slots ≤ 8 → 1000 + 500 + 250 = 1750 of 1800
        //   → 50 → 12.5.  Σ 260.
        //   Paper: 470 → 0.75·300 = 225; 250 fits, nothing below 250 → 0.  Σ 225.
        {"weights_unequal",
         {T(1000, 470, 1, 0.75), T(1000, 250, 1, 0.25)},
         "G1",
         8000,
         {1000, 500, 300},
         260,
         225},
    }),
    RowName());

// The measure is linear in the weights: a mix equals the weighted sum of its tasks alone.
TEST(FragModelTest, CapacityLinearInWeights) {
  const ClusterState s = TwoModelState();
  const std::vector<TypicalTask> alone = {T(1000, 470, 1, 1.0), T(1000, 0, 0, 1.0),
                                          T(1000, 1000, 2, 1.0), T(2000, 250, 1, 1.0)};
  const double weights[] = {0.4, 0.1, 0.3, 0.2};
  std::vector<TypicalTask> mix;
  for (size_t i = 0; i < alone.size(); ++i) {
    mix.push_back(alone[i]);
    mix.back().weight = weights[i];
  }
  FragModel mixed(mix);
  const std::vector<std::vector<int32_t>> nodes = {
      {1000, 500, 300}, {1000, 1000, 1000, 1000}, {250, 470, 999}, {0, 0}};
  for (const std::vector<int32_t>& lefts : nodes) {
    for (int64_t cpu : {0, 1000, 2500, 8000}) {
      double want = 0;
      for (size_t i = 0; i < alone.size(); ++i) {
        FragModel one({alone[i]});
        want += weights[i] * one.Amount(s, 0, cpu, lefts, FragMeasure::kCapacity);
      }
      EXPECT_NEAR(mixed.Amount(s, 0, cpu, lefts, FragMeasure::kCapacity), want, 1e-9)
          << "cpu " << cpu << ", " << lefts.size() << " GPUs";
    }
  }
  // One point by hand: lefts 1000, 500, 300, cpu 2500:
  //   470 (cpu 2 slots, gpu 3): 1800 − 940 = 860 → 0.4·860 = 344;  CPU-only: 0.1·1800 = 180;
  //   2 whole: 1 free → 0.3·1800 = 540;  250 (cpu 2000: 1 slot, gpu 7): 1800 − 250 = 1550
  //   → 0.2·1550 = 310.  Σ 1374.
  EXPECT_NEAR(mixed.Amount(s, 0, 2500, nodes[0], FragMeasure::kCapacity), 1374, 1e-9);
}

// The memo keeps the two measures apart: the same node state asked for both, in either order,
// gives each measure its own value, and again when asked a second time.
TEST(FragModelTest, MemoKeepsTheMeasuresApart) {
  const ClusterState s = TwoModelState();
  const std::vector<TypicalTask> typical = {T(1000, 470, 1, 1.0)};
  const std::vector<int32_t> lefts = {1000, 500, 300};
  const std::vector<int32_t> permuted = {300, 1000, 500};
  // cpu 8000: paper 300 (the GPU below 470); capacity 1800 − (1000 + 470) = 330.
  // cpu 1999: paper 300 (fits once); capacity 1800 − 470 = 1330.
  {
    SCOPED_TRACE("paper first");
    FragModel model(typical);
    EXPECT_DOUBLE_EQ(model.Amount(s, 0, 8000, lefts, FragMeasure::kPaper), 300);
    EXPECT_DOUBLE_EQ(model.Amount(s, 0, 8000, lefts, FragMeasure::kCapacity), 330);
    EXPECT_DOUBLE_EQ(model.Amount(s, 0, 1999, lefts), 300);  // the default measure: kPaper
    EXPECT_DOUBLE_EQ(model.Amount(s, 0, 1999, lefts, FragMeasure::kCapacity), 1330);
    EXPECT_DOUBLE_EQ(model.Amount(s, 0, 8000, permuted, FragMeasure::kPaper), 300);
    EXPECT_DOUBLE_EQ(model.Amount(s, 0, 8000, permuted, FragMeasure::kCapacity), 330);
    EXPECT_DOUBLE_EQ(model.Amount(s, 0, 1999, permuted, FragMeasure::kCapacity), 1330);
    EXPECT_DOUBLE_EQ(model.Amount(s, 0, 1999, permuted, FragMeasure::kPaper), 300);
  }
  {
    SCOPED_TRACE("capacity first");
    FragModel model(typical);
    EXPECT_DOUBLE_EQ(model.Amount(s, 0, 8000, lefts, FragMeasure::kCapacity), 330);
    EXPECT_DOUBLE_EQ(model.Amount(s, 0, 8000, lefts, FragMeasure::kPaper), 300);
    EXPECT_DOUBLE_EQ(model.Amount(s, 0, 1999, lefts, FragMeasure::kCapacity), 1330);
    EXPECT_DOUBLE_EQ(model.Amount(s, 0, 1999, lefts), 300);
    EXPECT_DOUBLE_EQ(model.Amount(s, 0, 8000, permuted, FragMeasure::kCapacity), 330);
    EXPECT_DOUBLE_EQ(model.Amount(s, 0, 8000, permuted, FragMeasure::kPaper), 300);
    EXPECT_DOUBLE_EQ(model.Amount(s, 0, 1999, permuted, FragMeasure::kPaper), 300);
    EXPECT_DOUBLE_EQ(model.Amount(s, 0, 1999, permuted, FragMeasure::kCapacity), 1330);
  }
  // NodeAmount is the paper's measure, whatever the memo holds.
  {
    ClusterState t = TwoModelState();
    Node n = Node::Make("x", 1999, 65536, 3, "G1", 16384);
    n.gpus[1].milli_free = 500;
    n.gpus[2].milli_free = 300;
    const int x = t.AddNode(n);
    FragModel model(typical);
    EXPECT_DOUBLE_EQ(model.Amount(t, 0, 1999, lefts, FragMeasure::kCapacity), 1330);
    EXPECT_DOUBLE_EQ(model.NodeAmount(t, x), 300);
  }
}

// The capacity-aware measure straight from its definition, for comparison with the memoised one.
double CapacityReference(const ClusterState& s, const std::vector<TypicalTask>& typical,
                         int model_id, int64_t cpu_left, const std::vector<int32_t>& lefts) {
  int64_t idle = 0;
  int64_t free_gpus = 0;
  for (int32_t l : lefts) {
    idle += l;
    if (l == kMilliPerGpu) ++free_gpus;
  }
  double frag = 0;
  for (const TypicalTask& t : typical) {
    bool access = model_id >= 0 && !lefts.empty() && t.milli_per_gpu > 0;
    if (access && !t.models.empty()) {
      access = false;
      for (const std::string& m : t.models) access = access || s.ModelId(m) == model_id;
    }
    if (!access) {
      frag += t.weight * static_cast<double>(idle);
      continue;
    }
    const int64_t cpu_slots = t.cpu_milli > 0 ? cpu_left / t.cpu_milli : INT64_MAX;
    int64_t usable = 0;
    if (t.milli_per_gpu < kMilliPerGpu) {
      // Partly used GPUs: whole instances only; free GPUs count whole; CPU may bound it.
      int64_t gpu_slots = 0;
      int64_t by_gpu = 0;
      for (int32_t l : lefts) {
        gpu_slots += l / t.milli_per_gpu;
        by_gpu += l == kMilliPerGpu ? l : (l / t.milli_per_gpu) * t.milli_per_gpu;
      }
      usable = gpu_slots <= cpu_slots ? by_gpu : t.milli_per_gpu * cpu_slots;
    } else {
      usable = 1000 * t.gpu_count * std::min(free_gpus / t.gpu_count, cpu_slots);
    }
    frag += t.weight * static_cast<double>(idle - usable);
  }
  return frag;
}

// Over many node shapes, both measures asked of one memoised model, interleaved in random
// order, equal their definitions computed fresh: no key of one measure answers for the other.
TEST(FragModelTest, CapacityMatchesDefinitionOverManyKeys) {
  const ClusterState s = TwoModelState();
  const std::vector<TypicalTask> typical = {T(1000, 470, 1, 0.3), T(2000, 1000, 2, 0.3, {"G1"}),
                                            T(4000, 250, 1, 0.2), T(8000, 0, 0, 0.2)};
  FragModel memo(typical);
  FragModel fresh(typical);
  std::mt19937_64 rng(11);
  const int32_t values[] = {0, 1, 100, 250, 470, 500, 999, 1000};
  const int64_t cpus[] = {0, 999, 1000, 2000, 4000, 8000, 16777215};
  int differ = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<int32_t> lefts(1 + rng() % 8);
    for (int32_t& l : lefts) l = values[rng() % 8];
    const int64_t cpu = cpus[rng() % 7];
    const int model_id = static_cast<int>(rng() % 3) - 1;
    const double capacity = CapacityReference(s, typical, model_id, cpu, lefts);
    const double paper = FragAmount(fresh.Bins(s, model_id, cpu, lefts));
    if (capacity != paper) ++differ;
    if (rng() % 2 == 0) {
      ASSERT_NEAR(memo.Amount(s, model_id, cpu, lefts, FragMeasure::kCapacity), capacity, 1e-9)
          << "case " << i;
      ASSERT_DOUBLE_EQ(memo.Amount(s, model_id, cpu, lefts, FragMeasure::kPaper), paper)
          << "case " << i;
    } else {
      ASSERT_DOUBLE_EQ(memo.Amount(s, model_id, cpu, lefts, FragMeasure::kPaper), paper)
          << "case " << i;
      ASSERT_NEAR(memo.Amount(s, model_id, cpu, lefts, FragMeasure::kCapacity), capacity, 1e-9)
          << "case " << i;
    }
  }
  EXPECT_GT(differ, 1000) << "the keys must tell the measures apart often";
}

}  // namespace
}  // namespace gpupool::sched
