// Tests for sched/policy and sched/policies/*: each policy's score on hand-built nodes (expected
// arithmetic per row), GPU choice (default tightest fit, random, fgd, fgd-plan), node choice by
// fgd-plan's packed score, the registry (MakePolicy, names, "default") and UniformIndex.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/node.h"
#include "core/task.h"
#include "sched/cluster_state.h"
#include "sched/feasibility.h"
#include "sched/fragmentation.h"
#include "sched/policy.h"
#include "sched/test_builders.h"

namespace gpupool::sched {
namespace {

// ---------------------------------------------------------------------------------------------
// Builders (sched/test_builders.h).

// A node of 128 cores and 512 GiB, `cpu_free` milli of them free, with one GPU of `model` per
// entry of `lefts` (milli left; kMig: MIG mode).
Node MakeNode(const std::vector<int32_t>& lefts, int64_t cpu_free = 64000,
              const std::string& model = "G1") {
  const Node n = TestNode("n", static_cast<int>(lefts.size()), model, 128000, 524288);
  return WithCpuFree(WithLefts(n, lefts), cpu_free);
}

ClusterState OneNode(const Node& n) {
  ClusterState s;
  s.AddNode(n);
  return s;
}

int64_t ScoreOf(Policy& policy, const ClusterState& s, int node, const TaskRequest& r) {
  const RequestView view(s, r);
  EXPECT_EQ(CheckNode(s, node, view), Reject::kNone) << "the row's task must fit its node";
  return policy.Score(s, node, view);
}

// ---------------------------------------------------------------------------------------------
// Scores of the simple policies: one row = a node, a task, the expected integer score.

struct ScoreRow {
  const char* name;
  const char* policy;
  Node node;
  TaskRequest request;
  int64_t want;
};
void PrintTo(const ScoreRow& row, std::ostream* os) { *os << row.name; }

class ScoreTest : public testing::TestWithParam<ScoreRow> {};

TEST_P(ScoreTest, Score) {
  const ScoreRow& row = GetParam();
  const ClusterState s = OneNode(row.node);
  std::unique_ptr<Policy> p = MustMakePolicy(row.policy);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(ScoreOf(*p, s, 0, row.request), row.want);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, ScoreTest,
    testing::ValuesIn(std::vector<ScoreRow>{
        // ---- best-fit: x = 0.5·(cpu_left − cpu)/128000 + 0.5·(gpu_left − gpu)/8000,
        //      score = ⌊(1 − x)·100⌋.
        // cpu 64000, 4 free GPUs; 16000 cpu + 500 milli:
        //   x = 0.5·48000/128000 + 0.5·3500/8000 = 0.1875 + 0.21875 = 0.40625 → 59.375 → 59.
        {"best_fit_half_node", "best-fit", MakeNode({1000, 1000, 1000, 1000}, 64000),
         Share(500).Cpu(16000), 59},
        // cpu 32000, lefts 1000 + 500: x = 0.5·16000/128000 + 0.5·1000/8000 = 0.125 → 87.5 → 87
        // (truncated, not rounded).
        {"best_fit_truncates", "best-fit", MakeNode({1000, 500}, 32000), Share(500).Cpu(16000), 87},
        // Fills the node exactly: x = 0 → 100.
        {"best_fit_exact_fill", "best-fit", MakeNode({1000}, 16000), Whole(1).Cpu(16000), 100},
        // cpu 96000, 8 free; 32000 + 2 GPUs: x = 0.5·64000/128000 + 0.5·6000/8000 = 0.625 → 37.
        {"best_fit_whole_two", "best-fit", MakeNode(std::vector<int32_t>(8, 1000), 96000),
         Whole(2).Cpu(32000), 37},
        // A MIG-mode GPU leaves no milli: lefts 1000 + MIG, cpu 16000; 500 milli, no cpu:
        //   x = 0.5·16000/128000 + 0.5·500/8000 = 0.0625 + 0.03125 = 0.09375 → 90.625 → 90.
        {"best_fit_mig_gpu_not_left", "best-fit", MakeNode({1000, kMig}, 16000), Share(500), 90},
        // CPU-only: the GPU term is the idle GPU (4000): x = 0.5·0 + 0.5·4000/8000 = 0.25 → 75.
        {"best_fit_cpu_only", "best-fit", MakeNode({1000, 1000, 1000, 1000}, 16000), CpuOnly(16000),
         75},
        // ---- dot-product: dot = (cpu_left/128000)(cpu/128000) + (gpu_left/8000)(gpu/8000),
        //      score = ⌊100·(1 − dot/2)⌋.
        // 0.5·0.125 + 0.5·0.0625 = 0.09375 → 100·(1 − 0.046875) = 95.3125 → 95.
        {"dot_product_share", "dot-product", MakeNode({1000, 1000, 1000, 1000}, 64000),
         Share(500).Cpu(16000), 95},
        // Full node, full request: 1·1 + 1·1 = 2 → 0.
        {"dot_product_full", "dot-product", MakeNode(std::vector<int32_t>(8, 1000), 128000),
         Whole(8).Cpu(128000), 0},
        // 0.25·0.25 + 0.25·0.25 = 0.125 → 93.75 → 93.
        {"dot_product_whole_two", "dot-product", MakeNode({1000, 1000}, 32000), Whole(2).Cpu(32000),
         93},
        // CPU-only: 0.5·0.5 + 1·0 = 0.25 → 87.5 → 87.
        {"dot_product_cpu_only", "dot-product", MakeNode(std::vector<int32_t>(8, 1000), 64000),
         CpuOnly(64000), 87},
        // ---- gpu-packing.
        // Case 3, idle node with f free GPUs: max(33 − f, f). f = 4 → 29; 1 → 32; 8 → 25.
        {"packing_idle_4", "gpu-packing", MakeNode({1000, 1000, 1000, 1000}), Share(300), 29},
        {"packing_idle_1", "gpu-packing", MakeNode({1000}), Whole(1), 32},
        {"packing_idle_8", "gpu-packing", MakeNode(std::vector<int32_t>(8, 1000)), Share(300), 25},
        // Case 1: tightest fitting GPU is the 450: s = ⌊450·100/1000⌋ = 45 → 100 − ⌊45/10⌋ = 96.
        {"packing_partial_450", "gpu-packing", MakeNode({1000, 450, 1000, 1000}), Share(300), 96},
        // 990: s = 99 → 100 − 9 = 91.
        {"packing_partial_990", "gpu-packing", MakeNode({1000, 990, 1000, 1000}), Share(300), 91},
        // Tightest among several partial GPUs: 600 (not 700, not 1000): s = 60 → 94.
        {"packing_tightest_of_partials", "gpu-packing", MakeNode({700, 450, 600, 1000}), Share(500),
         94},
        // Case 2: the 50 is too small, the tightest fit is a free GPU → max(50 − 1, 33) = 49.
        {"packing_takes_free_gpu", "gpu-packing", MakeNode({1000, 50, 1000, 1000}), Share(300), 49},
        // Whole GPUs on a used node: u = 2 → 48; u = 3 → 47.
        {"packing_whole_2", "gpu-packing", MakeNode({1000, 0, 1000, 1000}), Whole(2), 48},
        {"packing_whole_3", "gpu-packing", MakeNode({0, 1000, 1000, 1000}), Whole(3), 47},
        // A MIG-mode GPU is never free: not idle (2 free ≠ 3 GPUs), case 2 → 49.
        {"packing_mig_gpu_not_idle", "gpu-packing", MakeNode({kMig, 1000, 1000}), Share(300), 49},
        // CPU-only tasks score 0 everywhere.
        {"packing_cpu_only", "gpu-packing", MakeNode({1000, 450}), CpuOnly(1000), 0},
        // ---- first-fit and random: every node scores 0 (the tie-break decides).
        {"first_fit_zero", "first-fit", MakeNode({1000, 450}), Share(300), 0},
        {"random_zero", "random", MakeNode({1000, 450}), Share(300), 0},
    }),
    RowName());

// ---------------------------------------------------------------------------------------------
// gpu-clustering: base = ⌊25·(8000 − gpu_left)/8000⌋; the node runs the task's tag: +75 if it is
// its only tag, else +50; it does not: +25 if it runs no GPU task, else +0.

struct Bound {
  TaskRequest request;
  std::vector<int> gpus;
};

struct ClusterRow {
  const char* name;
  int gpus;                  // G1 GPUs on the node, all free before `bound`
  std::vector<Bound> bound;  // tasks bound first, in order
  TaskRequest request;
  int64_t want;
};
void PrintTo(const ClusterRow& row, std::ostream* os) { *os << row.name; }

class ClusteringTest : public testing::TestWithParam<ClusterRow> {};

TEST_P(ClusteringTest, Score) {
  const ClusterRow& row = GetParam();
  ClusterState s = OneNode(MakeNode(std::vector<int32_t>(static_cast<size_t>(row.gpus), 1000)));
  int i = 0;
  for (const Bound& b : row.bound) {
    const int32_t milli = b.request.gpu_milli > 0 ? b.request.gpu_milli
                                                  : (b.request.gpu_count > 0 ? kMilliPerGpu : 0);
    ASSERT_TRUE(
        s.Bind("b" + std::to_string(i++), b.request, Placement{0, b.gpus, milli, 0, std::nullopt})
            .has_value());
  }
  std::unique_ptr<Policy> p = MustMakePolicy("gpu-clustering");
  EXPECT_EQ(ScoreOf(*p, s, 0, row.request), row.want);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, ClusteringTest,
    testing::ValuesIn(std::vector<ClusterRow>{
        // No task, 4 free GPUs: base ⌊25·4000/8000⌋ = 12, + 25 = 37.
        {"empty_4_gpus", 4, {}, Share(500), 37},
        // No task, 8 free GPUs: base 0 + 25 = 25.
        {"empty_8_gpus", 8, {}, Share(500), 25},
        // One share of 500: left 3500, base ⌊25·4500/8000⌋ = ⌊14.06⌋ = 14.
        // A share joins its own tag alone there: 14 + 75 = 89.
        {"same_tag_only", 4, {{Share(500), {0}}}, Share(300), 89},
        // A 1-GPU task finds another tag only: 14 + 0 = 14.
        {"other_tag_only", 4, {{Share(500), {0}}}, Whole(1), 14},
        // Share 500 + 1 whole GPU: left 2500, base ⌊25·5500/8000⌋ = ⌊17.19⌋ = 17.
        // A share (its tag among two): 17 + 50 = 67.
        {"same_tag_among_two", 4, {{Share(500), {0}}, {Whole(1), {1}}}, Share(200), 67},
        // A 2-GPU task: tag absent, tags present → 17.
        {"tag_absent_others_present", 4, {{Share(500), {0}}, {Whole(1), {1}}}, Whole(2), 17},
        // 2 whole GPUs bound; another 2-GPU task: left 2000, base ⌊25·6000/8000⌋ = 18, + 75 = 93.
        {"whole_2_joins_whole_2", 4, {{Whole(2), {0, 1}}}, Whole(2), 93},
        // Tags are by GPU count: a 1-GPU task is not a 2-GPU one → 18 + 0.
        {"whole_1_vs_whole_2", 4, {{Whole(2), {0, 1}}}, Whole(1), 18},
        // A CPU-only task carries no tag: the node counts as running no GPU task → 12 + 25.
        {"cpu_only_task_no_tag", 4, {{CpuOnly(1000), {}}}, Share(500), 37},
        // CPU-only requests score 0.
        {"cpu_only_request", 4, {{Share(500), {0}}}, CpuOnly(1000), 0},
    }),
    RowName());

// ---------------------------------------------------------------------------------------------
// fgd and fgd-plan. Typical tasks of most rows (weights 0.5 / 0.5):
//   A = 1000 cpu, 500 milli × 1;   B = 1000 cpu, 1000 milli × 1.
// Paper frag(node) = Σ_m w_m · (m fits once ? Σ{left_i < milli_m} : Σ left_i).
// Capacity frag(node) = Σ_m w_m · (Σ left_i − milli_m·k_m·min(gpu slots, ⌊cpu_left/cpu_m⌋)),
//   gpu slots = Σ ⌊left_i/milli_m⌋ for a share, ⌊free GPUs/k_m⌋ for whole GPUs.
// Δ = frag before − frag after. fgd = ⌊100·σ(Δpaper/1000)⌋ (the "band"). fgd-plan packs into one
// integer: plan (bit 62: the GPU's shares, this one included, are part of a SharePlan pattern;
// shares only), band (bits 55..61), balance = 2^16 − Δss (bits 38..54), where Δss is the change
// of Σ_g N(g)², N(g) = GPUs of the model with g milli left (0 < g < 1000; shares only, 0
// otherwise), capacity = round(10·Δcapacity) + 2^21 (bits 16..37) and fit = ⌊65535·(1 − x)⌋
// (bits 0..15), x = 0.5·(cpu_left − cpu)/128000 + 0.5·(gpu_left − gpu)/8000; the highest wins,
// on equal scores the GPU with less milli left. For a share of s on a GPU with g left,
//   Δss = (g < 1000 ? 1 − 2·N(g) : 0) + (g − s > 0 ? 2·N(g − s) + 1 : 0).
// A GPU whose used milli no binding explains (nodes built with milli_free set) counts the
// unexplained part as one share.
// Plans: TypicalAB's share is 500 → pattern 500+500; a single share typical of milli m → m
// repeated while it fits (400+400, 300+300+300); no share typical → no pattern.

std::vector<TypicalTask> TypicalAB(double wa, double wb) {
  TypicalTask a;
  a.cpu_milli = 1000;
  a.milli_per_gpu = 500;
  a.gpu_count = 1;
  a.weight = wa;
  TypicalTask b = a;
  b.milli_per_gpu = 1000;
  b.weight = wb;
  return {a, b};
}

// One typical task of weight 1: `milli` × 1 GPU (0: CPU-only) with `cpu` milli CPU.
std::vector<TypicalTask> TypicalOne(int64_t cpu, int32_t milli) {
  TypicalTask t;
  t.cpu_milli = cpu;
  t.milli_per_gpu = milli;
  t.gpu_count = milli > 0 ? 1 : 0;
  t.weight = 1.0;
  return {t};
}

// The parts of an fgd-plan score, as a row writes them.
struct PlanScore {
  int64_t plan;      // 1: the placement follows the share plan
  int64_t band;      // ⌊100·σ(Δpaper/1000)⌋
  int64_t ss;        // Δ of Σ N(g)² (lower is better), before 2^16 − Δss
  int64_t capacity;  // round(10·Δcapacity), before the 2^21 offset
  int64_t fit;       // ⌊65535·(1 − x)⌋
};
std::ostream& operator<<(std::ostream& os, const PlanScore& c) {
  return os << "{plan " << c.plan << ", band " << c.band << ", ss " << c.ss << ", capacity "
            << c.capacity << ", fit " << c.fit << "}";
}

// The integer fgd-plan returns for `c` (layout of fgd_plan.cc).
int64_t Packed(const PlanScore& c) {
  return (c.plan << 62) + (c.band << 55) + (((int64_t{1} << 16) - c.ss) << 38) +
         ((c.capacity + (int64_t{1} << 21)) << 16) + c.fit;
}

// The parts of a packed score, so that a failure says which one is off.
PlanScore Unpacked(int64_t score) {
  return {score >> 62, (score >> 55) & 127, (int64_t{1} << 16) - ((score >> 38) & 0x1FFFF),
          ((score >> 16) & 0x3FFFFF) - (int64_t{1} << 21), score & 0xFFFF};
}

// Packed() itself against integers written out, so that the rows below check the layout too:
//   1 << 62 = 0x4000000000000000; 56 << 55 = 0x1C00000000000000;
//   2^16 − (−1) = 0x10001 << 38 = 0x0040004000000000; 2500 + 2^21 = 0x2009C4 << 16 =
//   0x0000002009C40000; 57189 = 0xDF65 → 0x5C40006009C4DF65 (the row three_gpus_best_delta).
//   {0, 43, 1, −2500, 57599}: 43 << 55; 2^16 − 1 = 0xFFFF; 2^21 − 2500 = 0x1FF63C (a fall in
//   capacity lies below the offset).
TEST(FgdPlanTest, PackedLayout) {
  EXPECT_EQ(Packed({1, 56, -1, 2500, 57189}), int64_t{0x5C40006009C4DF65});
  EXPECT_EQ(Packed({0, 43, 1, -2500, 57599}),
            (int64_t{43} << 55) + (int64_t{0xFFFF} << 38) + (int64_t{0x1FF63C} << 16) + 57599);
  const PlanScore back = Unpacked(Packed({1, 43, 3, -2500, 57599}));
  EXPECT_EQ(back.plan, 1);
  EXPECT_EQ(back.band, 43);
  EXPECT_EQ(back.ss, 3);
  EXPECT_EQ(back.capacity, -2500);
  EXPECT_EQ(back.fit, 57599);
}

struct FragRow {
  const char* name;
  std::vector<TypicalTask> typical;
  Node node;
  TaskRequest request;
  int64_t fgd_score;
  std::vector<int> fgd_gpus;
  PlanScore plan_score;
  std::vector<int> plan_gpus;
};
void PrintTo(const FragRow& row, std::ostream* os) { *os << row.name; }

class FragPolicyTest : public testing::TestWithParam<FragRow> {};

TEST_P(FragPolicyTest, ScoreAndGpus) {
  const FragRow& row = GetParam();
  const ClusterState s = OneNode(row.node);
  PolicyOptions o;
  o.typical = row.typical;
  const RequestView view(s, row.request);
  ASSERT_EQ(CheckNode(s, 0, view), Reject::kNone);

  std::unique_ptr<Policy> fgd = MustMakePolicy("fgd", o);
  ASSERT_NE(fgd, nullptr);
  EXPECT_EQ(fgd->Score(s, 0, view), row.fgd_score) << "fgd";
  EXPECT_EQ(fgd->ChooseGpus(s, 0, view).gpus, row.fgd_gpus) << "fgd";

  std::unique_ptr<Policy> plan = MustMakePolicy("fgd-plan", o);
  ASSERT_NE(plan, nullptr);
  const int64_t score = plan->Score(s, 0, view);
  EXPECT_EQ(score, Packed(row.plan_score))
      << "fgd-plan: got " << Unpacked(score) << ", want " << row.plan_score;
  const Placement p = plan->ChooseGpus(s, 0, view);
  EXPECT_EQ(p.gpus, row.plan_gpus) << "fgd-plan";
  EXPECT_EQ(p.node, 0);
  // The chosen GPUs must bind.
  ClusterState copy = s;
  EXPECT_TRUE(copy.Bind("t", row.request, p).has_value());
}

INSTANTIATE_TEST_SUITE_P(
    Policies, FragPolicyTest,
    testing::ValuesIn(std::vector<FragRow>{
        // Lefts 600, 550 (1150), cpu 8000; share 100 + cpu 1000.
        //   Paper before: A fits, frag 0; B fits nowhere: 0.5·1150 = 575.        frag 575
        //     GPU0 → 500, 550: A 0; B 0.5·1050 = 525.                            Δ +50
        //     GPU1 → 600, 450: A 0.5·450 = 225; B 525 → 750.                     Δ −175
        //   Capacity before (8 cpu slots): A 1+1 = 2 slots → 1150 − 1000 = 150 → 75; B 0 free →
        //     575.                                                               frag 650
        //     GPU0 (cpu 7000): A 1+1 = 2 → 1050 − 1000 → 25; B 525 → 550.        Δ +100
        //     GPU1: A 1+0 = 1 → 1050 − 500 → 275; B 525 → 800.                   Δ −150
        //   band: GPU0 ⌊100·σ(0.05)⌋ = ⌊51.25⌋ = 51, GPU1 ⌊45.64⌋ = 45. capacity GPU0 +1000.
        //   plan: 100 is in no pattern → 0. Δss: N(600) = N(550) = 1, nothing at 500 or 450:
        //     1 − 2 + 1 = 0 on either GPU.
        //   fit: x = 0.5·7000/128000 + 0.5·1050/8000 = 0.02734375 + 0.065625 = 0.09296875
        //     → ⌊65535·0.90703125⌋ = ⌊59442.3⌋ = 59442.
        // Both take GPU0 — not the tightest GPU 1 that the default would take.
        {"share_prefers_non_tightest",
         TypicalAB(0.5, 0.5),
         MakeNode({600, 550}, 8000),
         Share(100).Cpu(1000),
         51,
         {0},
         {0, 51, 0, 1000, 59442},
         {0}},
        // Idle 1000, 1000, cpu 8000; share 500. Paper before 0 (A and B fit, nothing too small);
        //   after 500, 1000: A 0; B fits on GPU1, frag 500 → 250. Δ −250.
        // Capacity before: A 2+2 = 4 slots → 2000 usable, 0; B 2 free → 0.
        //   after 500, 1000 (cpu 7000): A 1+2 = 3 → 1500 of 1500, 0; B 1 free → 1500 − 1000 →
        //   250. Δ −250.
        // band ⌊100·σ(−0.25)⌋ = ⌊43.78⌋ = 43 (truncated: rounding would say 44); capacity −2500;
        // plan: a free GPU with 500 holds part of 500+500 → 1; Δss: 2·N(500) + 1 = 1;
        // fit: x = 0.02734375 + 0.5·1500/8000 = 0.12109375 → ⌊57599.4⌋ = 57599. Equal lefts:
        // one option, GPU 0.
        {"share_on_idle_node",
         TypicalAB(0.5, 0.5),
         MakeNode({1000, 1000}, 8000),
         Share(500).Cpu(1000),
         43,
         {0},
         {1, 43, 1, -2500, 57599},
         {0}},
        // Lefts 1000, 600, 500 (2100), cpu 8000; share 500.
        //   Paper before: A 0; B fits (GPU0), frag 1100 → 550.
        //     GPU0 → 500, 600, 500: B fits nowhere: 0.5·1600 = 800.           Δ −250 → 43
        //     GPU1 → 1000, 100, 500: A 0.5·100 = 50; B 0.5·600 = 300 → 350.   Δ +200 → 54
        //     GPU2 → 1000, 600, 0:   A 0; B 0.5·600 = 300.                     Δ +250 → 56
        //   Capacity before: A 2+1+1 = 4 → 2100 − 2000 → 50; B 1 free → 1100 → 550. frag 600
        //     GPU0: A 1+1+1 = 3 → 1600 − 1500 → 50; B 0 free → 800.           Δ −250
        //     GPU1: A 2+0+1 = 3 → 50; B 1 free → 600 → 300.                    Δ +250
        //     GPU2: A 2+1+0 = 3 → 50; B 300.                                   Δ +250
        //   plan: GPU0 {500} and GPU2 {500 (unexplained) + 500} follow 500+500; GPU1 {400 + 500}
        //     does not. Of the two, the band (56 > 43) decides: GPU2.
        //   Δss on GPU2: 1 − 2·N(500) = −1, nothing left after.
        //   fit: x = 0.02734375 + 0.5·1600/8000 = 0.12734375 → ⌊57189.5⌋ = 57189.
        {"three_gpus_best_delta",
         TypicalAB(0.5, 0.5),
         MakeNode({1000, 600, 500}, 8000),
         Share(500).Cpu(1000),
         56,
         {2},
         {1, 56, -1, 2500, 57189},
         {2}},
        // One whole GPU of 1000, 1000 (cpu 8000): after 0, 1000: paper A frag 0, B fits, 0 → Δ 0;
        // capacity A 2 slots → 1000 of 1000, B 1 free → 1000, 0 → Δ 0. band 50, capacity 0;
        // plan and Δss 0 (not a share); fit: x = 0.02734375 + 0.5·1000/8000 = 0.08984375 →
        // ⌊59647.1⌋ = 59647. The lowest-index free GPU.
        {"whole_gpu",
         TypicalAB(0.5, 0.5),
         MakeNode({1000, 1000}, 8000),
         Whole(1).Cpu(1000),
         50,
         {0},
         {0, 50, 0, 0, 59647},
         {0}},
        // CPU-only 1000 on lefts 1000, 300 (1300) with cpu 1500:
        //   Paper before: A, B fit; frag 300 each → 300. After cpu 500 < 1000: both all idle:
        //     1300. Δ −1000 → ⌊100·σ(−1)⌋ = ⌊26.89⌋ = 26.
        //   Capacity before: 1 cpu slot: A min(2+0, 1) = 1 → 1300 − 500 → 400; B min(1, 1) →
        //     1300 − 1000 → 150; 550 (the paper's measure sees 300). After: 0 cpu slots → 1300.
        //     Δ −750 → −7500.
        //   fit: x = 0.5·500/128000 + 0.5·1300/8000 = 0.001953125 + 0.08125 = 0.083203125
        //     → ⌊60082.3⌋ = 60082. No GPU.
        {"cpu_only_takes_last_cpu",
         TypicalAB(0.5, 0.5),
         MakeNode({1000, 300}, 1500),
         CpuOnly(1000),
         26,
         {},
         {0, 26, 0, -7500, 60082},
         {}},
        // Weights 1/3, 2/3 on lefts 600, 550 (cpu 8000), share 100:
        //   Paper before: B 2/3·1150 = 766.67. GPU0: B 2/3·1050 = 700 → Δ 66.67 → ⌊51.67⌋ = 51.
        //     GPU1: A 1/3·450 = 150 + 700 = 850 → Δ −83.33 → 47.
        //   Capacity before: A 1/3·150 = 50 + B 766.67 = 816.67. GPU0: A 1/3·50 + B 700 = 716.67
        //     → Δ +100 → 1000. GPU1: A 1/3·550 + 700 = 883.33 → Δ −66.67.
        //   plan, Δss and fit as in share_prefers_non_tightest: 0, 0, 59442.
        {"weights_one_third",
         TypicalAB(1.0 / 3, 2.0 / 3),
         MakeNode({600, 550}, 8000),
         Share(100).Cpu(1000),
         51,
         {0},
         {0, 51, 0, 1000, 59442},
         {0}},
        // The capacity term rounds: typical (1000 cpu, 400 milli) w 1/3 and B w 2/3; lefts 1000,
        // cpu 8000; share 100.
        //   Paper before: both fit, 0. After 900: 400 fits (0); B fits nowhere: 2/3·900 = 600.
        //     Δ −600 → ⌊100·σ(−0.6)⌋ = ⌊35.43⌋ = 35.
        //   Capacity before: 400: the free GPU counts whole → 0; B 1 free → 0.
        //     After 900: 400: 2 slots → 900 − 800 = 100 → 33.33; B 0 free → 600. 633.33.
        //     Δ −633.33 → round(−6333.3) = −6333.
        //   plan 0 (100 is in no pattern); Δss: 2·N(900) + 1 = 1.
        //   fit: x = 0.02734375 + 0.5·900/8000 = 0.08359375 → ⌊60056.7⌋ = 60056.
        {"capacity_rounds",
         [] {
           std::vector<TypicalTask> typical = TypicalAB(1.0 / 3, 2.0 / 3);
           typical[0].milli_per_gpu = 400;
           return typical;
         }(),
         MakeNode({1000}, 8000),
         Share(100).Cpu(1000),
         35,
         {0},
         {0, 35, 1, -6333, 60056},
         {0}},
        // Only a CPU-only typical task: every placement of 200 milli lowers both measures (all
        // idle GPU) by 200 → Δ +200 on every GPU: band ⌊100·σ(0.2)⌋ = 54, capacity +2000; fit
        // x = 0.02734375 + 0.5·1700/8000 = 0.13359375 → ⌊56779.9⌋ = 56779. No plan (no share
        // typical). Δss: GPU0 (free → 800) 2·N(800) + 1 = 1; GPU1 (300 → 100) and GPU2 (600 →
        // 400) 1 − 2 + 1 = 0. fgd: equal scores → lowest index 0; fgd-plan: GPU1 and GPU2 score
        // alike → the tighter GPU (1, left 300).
        {"equal_score_tie_rules",
         TypicalOne(1000, 0),
         MakeNode({1000, 300, 600}, 8000),
         Share(200).Cpu(1000),
         54,
         {0},
         {0, 54, 0, 2000, 56779},
         {1}},
        // Equal band, the balance decides (over capacity). Typical (1000 cpu, 400 milli) w 1;
        // lefts 900, 1000 (cpu 8000); share 200 (in no pattern of 400+400: plan 0).
        //   Paper: 400 fits before and after either choice, no GPU below 400 → Δ 0, band 50 both.
        //   Δss: GPU0 (900 → 700) 1 − 2·N(900) + 2·N(700) + 1 = 0; GPU1 (free → 800) 1.
        //   Capacity before: 800 of the 900 + the free 1000 whole → 1900 − 1800 = 100.
        //     GPU0 → 700, 1000: 400 + 1000 → 1700 − 1400 = 300.   Δ −200 → −2000
        //     GPU1 → 900, 800:  800 + 800  → 1700 − 1600 = 100.   Δ 0    → 0
        //   fit x = 0.02734375 + 0.5·1700/8000 → 56779 (the same for both GPUs).
        // GPU0: the partly used GPU, although its capacity change is worse.
        {"equal_band_balance_decides",
         TypicalOne(1000, 400),
         MakeNode({900, 1000}, 8000),
         Share(200).Cpu(1000),
         50,
         {0},
         {0, 50, 0, -2000, 56779},
         {0}},
        // Equal band and balance, the capacity term decides. Typical (1000 cpu, 300 milli) w 1;
        // lefts 600, 850 (cpu 8000); share 200 (plan 0: 300+300+300 has no 200).
        //   Paper: 300 fits before and after either choice, no GPU below 300 → Δ 0, band 50.
        //   Δss: GPU0 (600 → 400) 1 − 2 + 2·N(400) + 1 = 0; GPU1 (850 → 650) likewise 0.
        //   Capacity before: 600 + ⌊850/300⌋·300 = 600 → 1450 − 1200 = 250.
        //     GPU0 → 400, 850: 300 + 600 → 1250 − 900 = 350.    Δ −100 → −1000
        //     GPU1 → 600, 650: 600 + 600 → 1250 − 1200 = 50.    Δ +200 → +2000
        //   fit x = 0.02734375 + 0.5·1250/8000 = 0.10546875 → ⌊58623.1⌋ = 58623.
        // GPU1: neither the lowest index (fgd's pick) nor the tighter GPU (the default's).
        {"equal_balance_capacity_decides",
         TypicalOne(1000, 300),
         MakeNode({600, 850}, 8000),
         Share(200).Cpu(1000),
         50,
         {0},
         {0, 50, 0, 2000, 58623},
         {1}},
        // The band outranks the capacity term. Typical (1000 cpu, 300 milli) w 1; lefts 500, 900
        // (cpu 8000); share 400.
        //   Paper before: 300 fits, nothing below it: 0.
        //     GPU0 → 100, 900: 300 fits, GPU0 below it: 100.   Δ −100 → ⌊47.50⌋ = 47
        //     GPU1 → 500, 500: 0.                              Δ 0    → 50
        //   Capacity before: 1+3 = 4 slots → 1400 − 1200 = 200.
        //     GPU0 → 100, 900: 0+3 = 3 → 1000 − 900 = 100.     Δ +100 → +1000
        //     GPU1 → 500, 500: 1+1 = 2 → 1000 − 600 = 400.     Δ −200 → −2000
        //   Δss: GPU0 (500 → 100) 1 − 2 + 1 = 0; GPU1 (900 → 500) 1 − 2·N(900) + 2·N(500) + 1 = 2.
        //   fit: x = 0.02734375 + 0.5·1000/8000 = 0.08984375 → 59647.
        // GPU1 (band 50) despite its worse balance and capacity change.
        {"band_outranks_balance_and_capacity",
         TypicalOne(1000, 300),
         MakeNode({500, 900}, 8000),
         Share(400).Cpu(1000),
         50,
         {1},
         {0, 50, 2, -2000, 59647},
         {1}},
    }),
    RowName());

// ScoreNodes (batch) gives what Score gives node by node.
TEST(FragPolicyTest, ScoreNodesMatchesScore) {
  ClusterState s;
  s.AddNode(MakeNode({600, 550}, 8000));
  s.AddNode(MakeNode({1000, 1000}, 8000));
  s.AddNode(MakeNode({1000, 600, 500}, 8000));
  PolicyOptions o;
  o.typical = TypicalAB(0.5, 0.5);
  const TaskRequest r = Share(500).Cpu(1000);
  const RequestView view(s, r);
  for (const char* name : {"fgd", "fgd-plan", "best-fit", "gpu-packing"}) {
    std::unique_ptr<Policy> p = MustMakePolicy(name, o);
    const std::vector<int> nodes = {0, 1, 2};
    std::vector<int64_t> out(3);
    p->ScoreNodes(s, nodes, view, out);
    for (int n : nodes) EXPECT_EQ(out[static_cast<size_t>(n)], p->Score(s, n, view)) << name;
  }
}

// ---------------------------------------------------------------------------------------------
// fgd-plan between two nodes: the node with the highest packed score wins (the lowest index
// on equal scores), then its GPUs as ChooseGpus picks them. Every row's winner is node 1, so that
// the lowest-index tie-break cannot explain it. N(g) counts the GPUs of both nodes.

struct NodePairRow {
  const char* name;
  std::vector<TypicalTask> typical;
  Node node0, node1;
  TaskRequest request;
  PlanScore want0, want1;
  std::vector<int> gpus;  // the winner's (node 1's) GPUs
};
void PrintTo(const NodePairRow& row, std::ostream* os) { *os << row.name; }

class FgdPlanNodesTest : public testing::TestWithParam<NodePairRow> {};

TEST_P(FgdPlanNodesTest, HighestScoreWins) {
  const NodePairRow& row = GetParam();
  ClusterState s;
  s.AddNode(row.node0);
  s.AddNode(row.node1);
  PolicyOptions o;
  o.typical = row.typical;
  std::unique_ptr<Policy> p = MustMakePolicy("fgd-plan", o);
  ASSERT_NE(p, nullptr);
  const RequestView view(s, row.request);
  const std::vector<int> nodes = {0, 1};
  for (int n : nodes) ASSERT_EQ(CheckNode(s, n, view), Reject::kNone) << "node " << n;
  std::vector<int64_t> out(2);
  p->ScoreNodes(s, nodes, view, out);
  EXPECT_EQ(out[0], Packed(row.want0)) << "node 0: got " << Unpacked(out[0]);
  EXPECT_EQ(out[1], Packed(row.want1)) << "node 1: got " << Unpacked(out[1]);
  EXPECT_EQ(p->Score(s, 0, view), out[0]);
  EXPECT_EQ(p->Score(s, 1, view), out[1]);
  EXPECT_GT(out[1], out[0]) << "node 1 must win";
  const Placement placement = p->ChooseGpus(s, 1, view);
  EXPECT_EQ(placement.node, 1);
  EXPECT_EQ(placement.gpus, row.gpus);
  ClusterState copy = s;
  EXPECT_TRUE(copy.Bind("t", row.request, placement).has_value());
}

INSTANTIATE_TEST_SUITE_P(
    Policies, FgdPlanNodesTest,
    testing::ValuesIn(std::vector<NodePairRow>{
        // The plan outranks the band. TypicalAB (pattern 500+500); share 500; cpu 8000 each.
        //   Node 0, lefts 600 (an unexplained 400 used): {400, 500} is no part of 500+500 → 0.
        //     Paper before: A fits, 0; B fits nowhere, 0.5·600 = 300. After 100: A and B fit
        //     nowhere: 0.5·100 + 0.5·100 = 100. Δ +200 → band ⌊54.98⌋ = 54.
        //     Δss: 1 − 2·N(600) + 2·N(100) + 1 = 0.
        //     Capacity before: A ⌊600/500⌋ = 1 slot → 0.5·100 = 50; B 0.5·600 = 300 → 350.
        //     After (cpu 7000): A 0.5·100; B 0.5·100 → 100. Δ +250 → +2500.
        //     fit: x = 0.02734375 + 0.5·100/8000 = 0.03359375 → ⌊63333.5⌋ = 63333.
        //   Node 1, lefts 1000: {500} is part of 500+500 → 1.
        //     Paper before 0; after 500: A fits, 0; B 0.5·500 = 250. Δ −250 → 43.
        //     Δss: 2·N(500) + 1 = 1.
        //     Capacity before 0 (a free GPU counts whole); after: A 500 of 500, 0; B 250.
        //     Δ −250 → −2500. fit: x = 0.02734375 + 0.5·500/8000 = 0.05859375 → 61695.
        // Node 1: its GPU becomes half of a planned pair; node 0's would keep an unusable 100.
        {"plan_outranks_band",
         TypicalAB(0.5, 0.5),
         MakeNode({600}, 8000),
         MakeNode({1000}, 8000),
         Share(500).Cpu(1000),
         {0, 54, 0, 2500, 63333},
         {1, 43, 1, -2500, 61695},
         {0}},
        // The balance decides between nodes. Typical (1000 cpu, 400 milli) w 1 (pattern
        // 400+400; share 200: plan 0); share 200; cpu 8000 each. N(800) = 1 (node 1's GPU 1).
        //   Node 0, lefts 1000, 1000: paper Δ 0 (400 fits throughout) → 50.
        //     Δss (free → 800): 2·N(800) + 1 = 3.
        //     Capacity before: both free → 0; GPU0 → 800, 1000: 800 + 1000 → 0. Δ 0.
        //     fit: x = 0.02734375 + 0.5·1800/8000 = 0.13984375 → ⌊56370.3⌋ = 56370.
        //   Node 1, lefts 1000, 800: paper Δ 0 → 50.
        //     GPU0 (free → 800): Δss 3, capacity 0. GPU1 (800 → 600): Δss 1 − 2 + 2·N(600) + 1
        //     = 0; capacity before 1000 + 800 → 0, after 1000 + 400 of 1600 → 200: Δ −200.
        //     GPU1 wins on balance. fit: x = 0.02734375 + 0.5·1600/8000 → 57189.
        // Node 1 on GPU 1: it fills a gap that another GPU also has, instead of opening a GPU.
        {"balance_decides_between_nodes",
         TypicalOne(1000, 400),
         MakeNode({1000, 1000}, 8000),
         MakeNode({1000, 800}, 8000),
         Share(200).Cpu(1000),
         {0, 50, 3, 0, 56370},
         {0, 50, 0, -2000, 57189},
         {1}},
        // Band, balance and capacity tie, fit decides by CPU. CPU-only typical task: both
        // measures count all idle GPU, a share of 200 lowers them by 200 anywhere → band 54,
        // capacity +2000; Δss (free → 800) 1 on both.
        //   Node 0 (cpu 16000): x = 0.5·15000/128000 + 0.5·1800/8000 = 0.05859375 + 0.1125
        //     = 0.17109375 → ⌊54322.4⌋ = 54322.
        //   Node 1 (cpu 8000): x = 0.02734375 + 0.1125 = 0.13984375 → 56370.
        {"fit_decides_by_cpu_left",
         TypicalOne(1000, 0),
         MakeNode({1000, 1000}, 16000),
         MakeNode({1000, 1000}, 8000),
         Share(200).Cpu(1000),
         {0, 54, 1, 2000, 54322},
         {0, 54, 1, 2000, 56370},
         {0}},
        // Capacity outranks fit: a CPU-only task of 2000 on nodes with one free GPU; typical
        // (2000 cpu, 500 milli) w 1 (plan and Δss 0: not a share).
        //   Paper: the typical task still fits after (cpu 2000 / 6000 left) → Δ 0, band 50 both.
        //   Node 0 (cpu 4000): capacity before min(2 GPU slots, 2 cpu slots) → 1000 − 1000 = 0;
        //     after min(2, 1) → 1000 − 500 = 500. Δ −500 → −5000.
        //     fit: x = 0.5·2000/128000 + 0.5·1000/8000 = 0.0078125 + 0.0625 → ⌊60927.0⌋.
        //   Node 1 (cpu 8000): min(2, 4) → min(2, 3): 0 both. Δ 0.
        //     fit: x = 0.5·6000/128000 + 0.0625 = 0.0859375 → ⌊59903.0⌋ = 59903.
        // Node 1 although best-fit would take node 0: node 0 would strand half its GPU.
        {"capacity_outranks_fit",
         TypicalOne(2000, 500),
         MakeNode({1000}, 4000),
         MakeNode({1000}, 8000),
         CpuOnly(2000),
         {0, 50, 0, -5000, 60927},
         {0, 50, 0, 0, 59903},
         {}},
        // Band outranks balance, capacity and fit. Typical (1000 cpu, 300 milli) w 1 (pattern
        // 300+300+300; share 400: plan 0); share 400. N(500) = N(900) = 1.
        //   Node 0, lefts 500: paper 0 → after 100 the task fits nowhere: 100. Δ −100 → 47.
        //     Δss: 1 − 2·N(500) + 2·N(100) + 1 = 0.
        //     Capacity: 1 slot → 500 − 300 = 200; after 0 slots → 100. Δ +100 → +1000.
        //     fit: x = 0.02734375 + 0.5·100/8000 = 0.03359375 → 63333.
        //   Node 1, lefts 900: paper 0 → 500 fits, 0. Δ 0 → 50.
        //     Δss: 1 − 2·N(900) + 2·N(500) + 1 = 2.
        //     Capacity: 3 slots → 900 − 900 = 0; after 1 slot → 500 − 300 = 200. Δ −200.
        //     fit: x = 0.02734375 + 0.5·500/8000 = 0.05859375 → 61695.
        {"band_outranks_the_rest",
         TypicalOne(1000, 300),
         MakeNode({500}, 8000),
         MakeNode({900}, 8000),
         Share(400).Cpu(1000),
         {0, 47, 0, 1000, 63333},
         {0, 50, 2, -2000, 61695},
         {0}},
    }),
    RowName());

// Whatever fgd-plan remembers between calls, a node's score follows the cluster: after a binding
// changes a node, and for another request shape, the policy answers what a new policy computes
// from scratch. An unchanged node keeps its score while no GPU elsewhere moves to or from a
// milli-left value its options read (the balance is cluster-wide).
TEST(FgdPlanTest, ScoreFollowsTheCluster) {
  ClusterState s;
  s.AddNode(MakeNode({900, 1000}, 8000));
  s.AddNode(MakeNode({1000, 1000}, 8000));
  PolicyOptions o;
  o.typical = TypicalOne(1000, 400);
  std::unique_ptr<Policy> p = MustMakePolicy("fgd-plan", o);
  ASSERT_NE(p, nullptr);
  const TaskRequest r = Share(200).Cpu(1000);
  const TaskRequest other = Share(400).Cpu(1000);
  int64_t before0 = 0;
  int64_t before1 = 0;
  {
    const RequestView view(s, r);
    before0 = p->Score(s, 0, view);
    before1 = p->Score(s, 1, view);
    const RequestView other_view(s, other);
    EXPECT_EQ(p->Score(s, 0, other_view), MustMakePolicy("fgd-plan", o)->Score(s, 0, other_view));
    // As the row equal_band_balance_decides: GPU 0 of node 0 (900 → 700).
    const Placement placement = p->ChooseGpus(s, 0, view);
    ASSERT_EQ(placement.gpus, std::vector<int>{0});
    ASSERT_TRUE(s.Bind("a", r, placement).has_value());
  }
  const RequestView view(s, r);
  const RequestView other_view(s, other);
  std::unique_ptr<Policy> fresh = MustMakePolicy("fgd-plan", o);
  const int64_t after0 = p->Score(s, 0, view);
  EXPECT_EQ(after0, fresh->Score(s, 0, view));
  EXPECT_NE(after0, before0);  // at least the fit term moved: less CPU and GPU left
  EXPECT_EQ(p->ChooseGpus(s, 0, view).gpus, fresh->ChooseGpus(s, 0, view).gpus);
  EXPECT_EQ(p->Score(s, 0, other_view), fresh->Score(s, 0, other_view));
  // Node 1 opens a GPU to 800 left: N(800) is still 0.
  EXPECT_EQ(p->Score(s, 1, view), before1);
  std::vector<int64_t> out(2);
  p->ScoreNodes(s, std::vector<int>{0, 1}, view, out);
  EXPECT_EQ(out, (std::vector<int64_t>{after0, before1}));

  // A share of 200 on node 0's free GPU leaves it at 800: node 1, unchanged, now scores its free
  // GPUs with N(800) = 1 (Δss 3 instead of 1), as a new policy does.
  ASSERT_TRUE(s.Bind("b", r, Placement{0, {1}, 200, 1000, std::nullopt}).has_value());
  ASSERT_EQ(s.PartialGpuCount(s.GpuModelId(0, 1), 800), 1);
  const RequestView later(s, r);
  const int64_t moved = p->Score(s, 1, later);
  EXPECT_EQ(moved, MustMakePolicy("fgd-plan", o)->Score(s, 1, later));
  EXPECT_EQ(Unpacked(moved).ss, 3);
  EXPECT_EQ(Unpacked(before1).ss, 1);
}

// A node with more distinct milli-left values than the cache keeps per node (four) is scored
// afresh each time, with the same rules. CPU-only typical task: band and capacity alike for a
// share of 100 on any GPU. Lefts 1000, 900, 800, 700, 600, 500; Δss: free → 900: 2·N(900) + 1
// = 3; 900 → 800, 800 → 700, 700 → 600, 600 → 500: 1 − 2 + 2·1 + 1 = 2; 500 → 400: 1 − 2 + 1 = 0.
// GPU 5 (500 left) wins on balance.
TEST(FgdPlanTest, NodeWithManyDistinctLeftsIsScoredUncached) {
  ClusterState s;
  s.AddNode(MakeNode({1000, 900, 800, 700, 600, 500}, 8000));
  PolicyOptions o;
  o.typical = TypicalOne(1000, 0);
  std::unique_ptr<Policy> p = MustMakePolicy("fgd-plan", o);
  const TaskRequest r = Share(100).Cpu(1000);
  const RequestView view(s, r);
  const int64_t first = p->Score(s, 0, view);
  EXPECT_EQ(Unpacked(first).ss, 0);
  EXPECT_EQ(Unpacked(first).band, 52);  // ⌊100·σ(0.1)⌋ = ⌊52.50⌋
  EXPECT_EQ(p->Score(s, 0, view), first);
  EXPECT_EQ(p->ChooseGpus(s, 0, view).gpus, std::vector<int>{5});
  EXPECT_EQ(MustMakePolicy("fgd-plan", o)->Score(s, 0, view), first);
}

// fgd-plan's MIG requests: reuse an instance before creating one before re-partitioning a
// GPU, as the default placement does; the score orders the nodes the same way.
TEST(FgdPlanTest, MigPrefersTheCheapestAction) {
  const GpuModelInfo* info = FindGpuModel("A100-80GB");
  ASSERT_NE(info, nullptr);
  // Node 0: an idle GPU (re-partition); node 1: MIG mode with 3g@0 in use (create at 4);
  // node 2: MIG mode with an unused 3g@4 (reuse).
  Node repartition = MakeNode({1000}, 64000, "A100-80GB");
  Node create = repartition;
  create.gpus[0].mig_enabled = true;
  create.gpus[0].mig_instances = {MigInstance{info->ProfileIndex("3g.40gb"), 0, true}};
  Node reuse = repartition;
  reuse.gpus[0].mig_enabled = true;
  reuse.gpus[0].mig_instances = {MigInstance{info->ProfileIndex("3g.40gb"), 4, false}};
  ClusterState s;
  s.AddNode(repartition);
  s.AddNode(create);
  s.AddNode(reuse);
  std::unique_ptr<Policy> p = MustMakePolicy("fgd-plan");
  ASSERT_NE(p, nullptr);
  const TaskRequest r = Mig("3g.40gb");
  const RequestView view(s, r);
  const MigAction want[] = {MigAction::kRepartition, MigAction::kCreate, MigAction::kUseFree};
  for (int n = 0; n < 3; ++n) {
    ASSERT_EQ(CheckNode(s, n, view), Reject::kNone) << "node " << n;
    const Placement got = p->ChooseGpus(s, n, view);
    EXPECT_EQ(got.gpus, std::vector<int>{0}) << "node " << n;
    ASSERT_TRUE(got.mig.has_value()) << "node " << n;
    EXPECT_EQ(got.mig->action, want[n]) << "node " << n;
  }
  EXPECT_GT(p->Score(s, 2, view), p->Score(s, 1, view));
  EXPECT_GT(p->Score(s, 1, view), p->Score(s, 0, view));
}

// ---------------------------------------------------------------------------------------------
// Default GPU choice (first-fit, best-fit, dot-product, gpu-packing, gpu-clustering): tightest
// fitting GPU for a share (lowest index on ties), lowest-index fully free GPUs for whole GPUs.

struct ChoiceRow {
  const char* name;
  Node node;
  TaskRequest request;
  std::vector<int> want;
};
void PrintTo(const ChoiceRow& row, std::ostream* os) { *os << row.name; }

Node WithMiliOnMig(Node n, int gpu, int32_t milli) {
  n.gpus.at(static_cast<size_t>(gpu)).mig_enabled = true;
  n.gpus.at(static_cast<size_t>(gpu)).milli_free = milli;
  return n;
}

class ChoiceTest : public testing::TestWithParam<ChoiceRow> {};

TEST_P(ChoiceTest, DefaultPlacement) {
  const ChoiceRow& row = GetParam();
  const ClusterState s = OneNode(row.node);
  const RequestView view(s, row.request);
  ASSERT_EQ(CheckNode(s, 0, view), Reject::kNone);
  const Placement d = DefaultPlacement(s, 0, view);
  EXPECT_EQ(d.node, 0);
  EXPECT_EQ(d.gpus, row.want);
  if (row.request.Form() == GpuForm::kShare) {
    EXPECT_EQ(d.milli_per_gpu, row.request.gpu_milli);
    EXPECT_EQ(d.gpu_mem_mib, row.request.gpu_mem_mib);
  } else if (row.request.Form() == GpuForm::kWhole) {
    EXPECT_EQ(d.milli_per_gpu, kMilliPerGpu);
    EXPECT_EQ(d.gpu_mem_mib, 0);
  } else {
    EXPECT_EQ(d.milli_per_gpu, 0);
  }
  EXPECT_FALSE(d.mig.has_value());
  for (const char* name :
       {"first-fit", "best-fit", "dot-product", "gpu-packing", "gpu-clustering"}) {
    std::unique_ptr<Policy> p = MustMakePolicy(name);
    EXPECT_EQ(p->ChooseGpus(s, 0, view).gpus, row.want) << name;
  }
  ClusterState copy = s;
  EXPECT_TRUE(copy.Bind("t", row.request, d).has_value());
}

INSTANTIATE_TEST_SUITE_P(
    Policies, ChoiceTest,
    testing::ValuesIn(std::vector<ChoiceRow>{
        // Lefts 1000, 400, 700, 400. 300: the 400s are tightest, lowest index → 1.
        {"share_tightest_lowest_index", MakeNode({1000, 400, 700, 400}), Share(300), {1}},
        // 500: only 1000 and 700 fit → 700 (GPU 2).
        {"share_tightest_that_fits", MakeNode({1000, 400, 700, 400}), Share(500), {2}},
        {"share_only_free_fits", MakeNode({1000, 400, 700, 400}), Share(800), {0}},
        // T4s: GPU0 400 milli but 1000 MiB free, GPU1 900 milli, all memory. 300 + 2000 MiB →
        // GPU0 is tighter but lacks memory → 1.
        {"share_needs_memory",
         WithMemFree(MakeNode({400, 900}, 64000, "T4"), 0, 1000),
         Share(300).GpuMem(2000),
         {1}},
        // GPU0 in MIG mode (even with 400 milli on record) is never a share's GPU → 1.
        {"share_skips_mig_gpu", WithMiliOnMig(MakeNode({1000, 600}), 0, 400), Share(300), {1}},
        // Mixed node G2 (400), G1 (700); only G1 allowed → 1.
        {"share_allowed_model_only",
         WithModel(MakeNode({400, 700}), 0, "G2"),
         Share(300).Models({"G1"}),
         {1}},
        // Lefts 1000, 0, 1000, 1000; 2 GPUs → the two lowest free: 0, 2.
        {"whole_lowest_free", MakeNode({1000, 0, 1000, 1000}), Whole(2), {0, 2}},
        // T4 GPU0 has all milli but memory reserved: not free → 1.
        {"whole_skips_memory_reserved",
         WithMemFree(MakeNode({1000, 1000}, 64000, "T4"), 0, 100),
         Whole(1),
         {1}},
        {"whole_allowed_model_only",
         WithModel(MakeNode({1000, 1000, 1000}), 0, "G2"),
         Whole(2).Models({"G1"}),
         {1, 2}},
        {"whole_skips_mig_gpu", MakeNode({kMig, 1000}), Whole(1), {1}},
        {"cpu_only_no_gpu", MakeNode({1000}), CpuOnly(1000), {}},
    }),
    RowName());

// MIG via the default placement: cheapest action first (reuse < create < re-partition).
TEST(PolicyMigTest, CheapestActionGpu) {
  Node n = MakeNode({1000, 1000, 1000}, 64000, "A100-80GB");
  const GpuModelInfo* info = FindGpuModel("A100-80GB");
  // GPU0 idle (re-partition), GPU1 MIG mode with 3g@0 in use (create at 4), GPU2 MIG mode with
  // an unused 3g@4 (reuse).
  n.gpus[1].mig_enabled = true;
  n.gpus[1].mig_instances = {MigInstance{info->ProfileIndex("3g.40gb"), 0, true}};
  n.gpus[2].mig_enabled = true;
  n.gpus[2].mig_instances = {MigInstance{info->ProfileIndex("3g.40gb"), 4, false}};
  const ClusterState s = OneNode(n);
  const TaskRequest r = Mig("3g.40gb");
  const RequestView view(s, r);
  const Placement p = DefaultPlacement(s, 0, view);
  EXPECT_EQ(p.gpus, std::vector<int>{2});
  ASSERT_TRUE(p.mig.has_value());
  EXPECT_EQ(p.mig->action, MigAction::kUseFree);
  EXPECT_EQ(p.mig->start, 4);

  // Without GPU2, GPU1's create beats GPU0's re-partition.
  Node n2 = n;
  n2.gpus.pop_back();
  const ClusterState s2 = OneNode(n2);
  const RequestView view2(s2, r);
  const Placement p2 = DefaultPlacement(s2, 0, view2);
  EXPECT_EQ(p2.gpus, std::vector<int>{1});
  EXPECT_EQ(p2.mig->action, MigAction::kCreate);
  EXPECT_EQ(p2.mig->start, 4);
}

// Whole GPUs where the node knows its GPUs' link groups: from one group where they fit (the
// tightest), else from as few groups as can hold them; a lone GPU ignores groups.
TEST(DefaultPlacementTest, WholeGpusStayInOneLinkGroup) {
  // Groups {0,1,2,3} and {4,5,6,7}; GPUs 0 and 1 busy, so group 0 has 2 free and group 1 has 4.
  Node n = MakeNode({0, 0, 1000, 1000, 1000, 1000, 1000, 1000}, 64000, "A100-80GB");
  for (size_t i = 0; i < n.gpus.size(); ++i) n.gpus[i].link_group = static_cast<int>(i / 4);
  const ClusterState s = OneNode(n);
  const auto gpus = [&](int count) {
    const TaskRequest r = Whole(count);
    return DefaultPlacement(s, 0, RequestView(s, r)).gpus;
  };
  EXPECT_EQ(gpus(2), (std::vector<int>{2, 3})) << "the tightest group that holds them";
  EXPECT_EQ(gpus(3), (std::vector<int>{4, 5, 6})) << "not 2, 3, 4 across the groups";
  EXPECT_EQ(gpus(4), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(gpus(5), (std::vector<int>{2, 4, 5, 6, 7})) << "the fullest group first, then the next";
  EXPECT_EQ(gpus(1), (std::vector<int>{2})) << "one GPU: the lowest free, as without groups";
  // Without groups: the lowest-index free GPUs, as always.
  Node plain = n;
  for (Gpu& g : plain.gpus) g.link_group = -1;
  const ClusterState p = OneNode(plain);
  const TaskRequest three = Whole(3);
  EXPECT_EQ(DefaultPlacement(p, 0, RequestView(p, three)).gpus, (std::vector<int>{2, 3, 4}));
}

// ---------------------------------------------------------------------------------------------
// random: a uniformly random fitting GPU for a share; reproducible for a seed.

TEST(RandomPolicyTest, PicksOnlyFittingGpusUniformly) {
  // Lefts 1000, 100, 600, 0, 250, MIG: 500 fits GPUs 0 and 2 only.
  const ClusterState s = OneNode(MakeNode({1000, 100, 600, 0, 250, kMig}));
  const TaskRequest r = Share(500);
  const RequestView view(s, r);
  int hits[6] = {};
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    PolicyOptions o;
    o.seed = seed;
    std::unique_ptr<Policy> p = MustMakePolicy("random", o);
    const Placement got = p->ChooseGpus(s, 0, view);
    ASSERT_EQ(got.gpus.size(), 1u);
    ++hits[got.gpus[0]];
    // Same seed, same choice.
    std::unique_ptr<Policy> again = MustMakePolicy("random", o);
    EXPECT_EQ(again->ChooseGpus(s, 0, view).gpus, got.gpus);
  }
  EXPECT_EQ(hits[1] + hits[3] + hits[4] + hits[5], 0);
  // 400 draws of a fair coin: each side well within 200 ± 60.
  EXPECT_GT(hits[0], 140);
  EXPECT_GT(hits[2], 140);
}

TEST(RandomPolicyTest, WholeGpusAreTheLowestFree) {
  const ClusterState s = OneNode(MakeNode({0, 1000, 1000, 1000}));
  const TaskRequest r = Whole(2);
  const RequestView view(s, r);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    PolicyOptions o;
    o.seed = seed;
    EXPECT_EQ(MustMakePolicy("random", o)->ChooseGpus(s, 0, view).gpus, (std::vector<int>{1, 2}));
  }
}

// ---------------------------------------------------------------------------------------------
// Registry.

TEST(RegistryTest, NamesInRegistryOrder) {
  EXPECT_EQ(PolicyNames(),
            (std::vector<std::string>{"random", "first-fit", "best-fit", "dot-product",
                                      "gpu-packing", "gpu-clustering", "fgd", "fgd-plan"}));
}

TEST(RegistryTest, EveryNameBuildsItsPolicy) {
  for (const std::string& name : PolicyNames()) {
    std::unique_ptr<Policy> p = MustMakePolicy(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_EQ(p->Name(), name);
    // random breaks ties at random (the paper's protocol); the others take the lowest index.
    EXPECT_EQ(p->tie_break(), name == "random" ? TieBreak::kRandom : TieBreak::kLowestIndex)
        << name;
    PolicyOptions o;
    o.tie_break = name == "random" ? TieBreak::kLowestIndex : TieBreak::kRandom;
    EXPECT_EQ(MustMakePolicy(name, o)->tie_break(), *o.tie_break) << name << ": override";
  }
}

TEST(RegistryTest, DefaultResolves) {
  EXPECT_EQ(DefaultPolicyName(), "fgd-plan");
  std::unique_ptr<Policy> p = MustMakePolicy("default");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->Name(), "fgd-plan");
  const std::vector<std::string> names = PolicyNames();
  EXPECT_NE(std::find(names.begin(), names.end(), std::string(DefaultPolicyName())), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "default"), names.end());
}

TEST(RegistryTest, UnknownNameListsTheValidOnes) {
  Result<std::unique_ptr<Policy>> p = MakePolicy("best-fitt", PolicyOptions{});
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
  const std::string& m = p.error().message;
  EXPECT_NE(m.find("'best-fitt'"), std::string::npos) << m;
  EXPECT_NE(m.find("default"), std::string::npos) << m;
  for (const std::string& name : PolicyNames()) {
    EXPECT_NE(m.find(name), std::string::npos) << m << " lacks " << name;
  }
  EXPECT_EQ(m,
            "policy must be one of default, random, first-fit, best-fit, dot-product, "
            "gpu-packing, gpu-clustering, fgd, fgd-plan; got 'best-fitt'");
  EXPECT_FALSE(MakePolicy("", PolicyOptions{}).has_value());
  EXPECT_FALSE(MakePolicy("FGD", PolicyOptions{}).has_value());  // names are exact
}

// Replaced policies are gone: asking for one fails and names what there is instead.
TEST(RegistryTest, ReplacedPoliciesAreGone) {
  const std::vector<std::string> names = PolicyNames();
  for (const std::string gone : {"frag-exact", "fgd-capacity"}) {
    EXPECT_EQ(std::find(names.begin(), names.end(), gone), names.end()) << gone;
    Result<std::unique_ptr<Policy>> p = MakePolicy(gone, PolicyOptions{});
    ASSERT_FALSE(p.has_value()) << gone;
    EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(p.error().message,
              "policy must be one of default, random, first-fit, best-fit, dot-product, "
              "gpu-packing, gpu-clustering, fgd, fgd-plan; got '" + gone + "'");
  }
}

// ---------------------------------------------------------------------------------------------
// UniformIndex.

struct UniformRow {
  const char* name;
  uint64_t n;
};
void PrintTo(const UniformRow& row, std::ostream* os) { *os << row.name; }

class UniformIndexTest : public testing::TestWithParam<UniformRow> {};

TEST_P(UniformIndexTest, InRangeAndDeterministic) {
  const uint64_t n = GetParam().n;
  std::mt19937_64 a(42), b(42);
  for (int i = 0; i < 2000; ++i) {
    const uint64_t x = UniformIndex(a, n);
    ASSERT_LT(x, n);
    ASSERT_EQ(UniformIndex(b, n), x);
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, UniformIndexTest,
                         testing::ValuesIn(std::vector<UniformRow>{
                             {"one", 1},
                             {"two", 2},
                             {"three", 3},
                             {"seven", 7},
                             {"thousand", 1000},
                             {"power_of_two", uint64_t{1} << 40},
                             {"huge", (uint64_t{1} << 63) + 1},
                         }),
                         RowName());

TEST(UniformIndexTest, RoughlyUniform) {
  std::mt19937_64 rng(5);
  int counts[3] = {};
  for (int i = 0; i < 30000; ++i) ++counts[UniformIndex(rng, 3)];
  for (int c : counts) {
    EXPECT_GT(c, 9400);  // expected 10000, σ ≈ 82
    EXPECT_LT(c, 10600);
  }
}

// For n = 2^63 + 1, UINT64_MAX mod n = 2^63 − 2, so accepted draws are exactly those < n and the
// result is the draw itself: the first raw draw below n, larger ones rejected (not folded by %).
TEST(UniformIndexTest, RejectsTheTopOfTheRange) {
  const uint64_t n = (uint64_t{1} << 63) + 1;
  std::mt19937_64 raw(9), rng(9);
  int rejected = 0;
  for (int i = 0; i < 200; ++i) {
    uint64_t want = raw();
    while (want >= n) {
      ++rejected;
      want = raw();
    }
    ASSERT_EQ(UniformIndex(rng, n), want) << "draw " << i;
  }
  EXPECT_GT(rejected, 50);  // about half of the raw draws are ≥ n
}

// Seeds drive the generator: equal seeds equal streams, different seeds differ.
TEST(PolicySeedTest, RngSeededFromOptions) {
  PolicyOptions o;
  o.seed = 123;
  std::unique_ptr<Policy> a = MustMakePolicy("random", o);
  std::unique_ptr<Policy> b = MustMakePolicy("random", o);
  o.seed = 124;
  std::unique_ptr<Policy> c = MustMakePolicy("random", o);
  const uint64_t x = a->rng()();
  EXPECT_EQ(b->rng()(), x);
  EXPECT_NE(c->rng()(), x);
  EXPECT_EQ(x, std::mt19937_64(123)());
}

}  // namespace
}  // namespace gpupool::sched
