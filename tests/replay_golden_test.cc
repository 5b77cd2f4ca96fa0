// Golden replay: the small hand-written trace under tests/data/replay (3 nodes, 20 pods with
// times, qos and explicit priorities) replayed with best-fit; every task's start and end and the
// summary must match tests/data/replay/expected.txt.
//
// How a few rows of expected.txt follow from the rules (nodes: node-a 32 cores, 2 V100-32GB;
// node-b 64 cores, 4 T4; node-c 16 cores, no GPU; best-fit scores ⌊(1 − x)·100⌋ with
// x = 0.5·(cpu_free − cpu)/128000 + 0.5·(gpu_milli_left − gpu_milli)/8000, ties to the lower
// index; qos LS = 200, Burstable = 100, BE = 0 unless the priority column says
// otherwise):
//
// - p01 (LS, 1 GPU, 8 cores) arrives at 0 on the empty cluster. node-a: x = 0.5·24000/128000 +
//   0.5·1000/8000 = 0.15625 → 84; node-b: x = 0.5·56000/128000 + 0.5·3000/8000 = 0.40625 → 59.
//   It starts at 0 on node-a and is never evicted (only p12, priority 500, evicts LS tasks, and
//   only on node-b, the one node with the 4 GPUs it needs), so it ends at 0 + (100 − 0) = 100:
//   `p01 0 0 0 100 0`.
// - p06 (Burstable, 1 GPU, gpu_spec V100M32: node-a only) arrives at 30. node-a holds p01 (LS)
//   on GPU 0 and p02 (BE, 500 milli) on GPU 1, so no GPU is whole: p06 preempts the one
//   lower-priority task there, p02, and takes GPU 1 at 30; it runs 90 − 30 = 60 s, to 90:
//   `p06 30 30 30 90 0`. p02 goes back to the queue and, in the second pass of the same
//   instant, to node-b's free GPU 3 (p04 holds GPUs 0–1, p05 GPU 2): its first preemption.
// - p10 (LS, 2 GPUs) arrives at 70 with no two GPUs free. On node-a only p06 (100) is below
//   it, and evicting it frees one GPU: not enough. On node-b the lower tasks are p02 (bound at
//   30) and p04 (BE, 2 GPUs, bound at 10); released most recent first, p02 then p04 make room,
//   and giving back what is not needed returns p02 (GPU 3 is not among the two taken). So p04
//   is the one victim, p10 starts at 70 on GPUs 0–1: p10's first start 70, p04's first
//   preemption (p04 restarts at 250 when p10, itself evicted at 90 by p12 and restarted at 150,
//   leaves; and runs its full 200 s again: ends at 450).
// - p07 asks 8 GPUs; no node has more than 4: rejected on arrival, never started.
// - p08 was deleted the second it was created, so each run lasts 1 s: evicted by p05 at 90 in
//   the instant it started, it runs again from 150 to 151.
// - Summary: 7 preemptions (p02 at 30, p04 at 70, p05 p10 p02 p11 by p12 at 90, p08 by p05 at
//   90). Delays of the 19 started tasks: twelve 0 and 40, 50, 51, 131, 140, 201, 370 (p09, a
//   2-GPU BE task that waits until node-a empties at 430): mean 983/19 = 51.74, p50 = 10th = 0,
//   p99 = ⌈18.81⌉ = 19th = 370; makespan 430 + 100 = 530 (p09's end).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/replay.h"
#include "sim/trace.h"

namespace gpupool::sim {
namespace {

const std::string kDataDir = std::string(GPUPOOL_SOURCE_DIR) + "/tests/data/replay/";

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != '#') out.push_back(line);
  }
  return out;
}

struct Golden {
  std::vector<ReplayTask> tasks;
  ReplayResult result;
};

Golden Replay(bool full_passes) {
  Golden g;
  auto nodes = LoadNodesCsv(kDataDir + "nodes.csv");
  EXPECT_TRUE(nodes.has_value()) << nodes.error().message;
  auto pods = LoadPodsCsv(kDataDir + "pods.csv");
  EXPECT_TRUE(pods.has_value()) << pods.error().message;
  if (!nodes || !pods) return g;
  auto tasks = ReplayTasksFromTrace(*pods);
  EXPECT_TRUE(tasks.has_value()) << tasks.error().message;
  if (!tasks) return g;
  g.tasks = *tasks;
  ReplayConfig config;
  config.policy = "best-fit";
  config.full_passes = full_passes;
  auto r = RunReplay(*nodes, g.tasks, config);
  EXPECT_TRUE(r.has_value()) << r.error().message;
  if (r) g.result = *r;
  return g;
}

TEST(ReplayGolden, MatchesExpectedStartsAndSummary) {
  const Golden g = Replay(false);
  std::ifstream in(kDataDir + "expected.txt");
  ASSERT_TRUE(in) << "cannot open " << kDataDir << "expected.txt";
  std::stringstream expected;
  expected << in.rdbuf();
  const std::string actual = ReplayTasksText(g.tasks, g.result) + ReplaySummaryText(g.result);
  const std::vector<std::string> want = Lines(expected.str());
  const std::vector<std::string> got = Lines(actual);
  for (size_t i = 0; i < std::max(want.size(), got.size()); ++i) {
    EXPECT_EQ(i < got.size() ? got[i] : "<missing>", i < want.size() ? want[i] : "<extra>")
        << "line " << i + 1 << " (comments skipped)";
  }
  if (want != got) ADD_FAILURE() << "whole output:\n" << actual;
}

TEST(ReplayGolden, RowsReasonedInTheHeaderComment) {
  const Golden g = Replay(false);
  auto row = [&](const std::string& name) -> const TaskRecord& {
    for (size_t i = 0; i < g.tasks.size(); ++i) {
      if (g.tasks[i].name == name) return g.result.per_task.at(i);
    }
    static const TaskRecord kNone;
    ADD_FAILURE() << "no task " << name;
    return kNone;
  };
  EXPECT_EQ(row("p01").node, 0);  // node-a: score 84 against node-b's 59
  EXPECT_EQ(row("p01").first_start_s, 0);
  EXPECT_EQ(row("p01").end_s, 100);
  EXPECT_EQ(row("p06").first_start_s, 30);
  EXPECT_EQ(row("p06").node, 0);
  EXPECT_EQ(row("p06").end_s, 90);
  EXPECT_EQ(row("p02").preemptions, 2);
  EXPECT_EQ(row("p10").first_start_s, 70);
  EXPECT_EQ(row("p04").preemptions, 1);
  EXPECT_EQ(row("p04").start_s, 250);
  EXPECT_EQ(row("p04").end_s, 450);
  EXPECT_EQ(row("p07").outcome, TaskOutcome::kRejected);
  EXPECT_EQ(row("p09").first_start_s, 430);
  EXPECT_EQ(g.result.preemptions, 7);
  EXPECT_EQ(g.result.rejected, 1);
  EXPECT_EQ(g.result.makespan_s, 530);
  EXPECT_EQ(g.result.delay.p99_s, 370);
}

TEST(ReplayGolden, PrioritiesComeFromQosUnlessThePriorityColumnIsSet) {
  auto pods = LoadPodsCsv(kDataDir + "pods.csv");
  ASSERT_TRUE(pods.has_value()) << pods.error().message;
  auto priority = [&](const std::string& name) {
    for (const TracePod& p : *pods) {
      if (p.name == name) return p.priority;
    }
    ADD_FAILURE() << "no pod " << name;
    return -1;
  };
  EXPECT_EQ(priority("p01"), 200);  // LS
  EXPECT_EQ(priority("p06"), 100);  // Burstable
  EXPECT_EQ(priority("p02"), 0);    // BE
  EXPECT_EQ(priority("p12"), 500);  // BE, priority column 500
  EXPECT_EQ(priority("p19"), 0);    // LS, priority column 0
  for (const TracePod& p : *pods) EXPECT_EQ(p.request.priority, 0) << p.name;  // FGD sees none
}

TEST(ReplayGolden, WholeQueuePassesAgree) {
  const Golden fast = Replay(false);
  const Golden full = Replay(true);
  EXPECT_EQ(ReplayTasksText(fast.tasks, fast.result), ReplayTasksText(full.tasks, full.result));
  EXPECT_LT(fast.result.tries, full.result.tries);
}

}  // namespace
}  // namespace gpupool::sim
