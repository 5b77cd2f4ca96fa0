// `best-fit`: the node left with the least CPU and GPU once the task is placed (FGD paper's
// BestFit, simulator best_fit_score.go):
//   x = 0.5·(cpu_left − cpu)/128000 + 0.5·(gpu_left − gpu)/8000,  score = ⌊(1 − x)·100⌋
// The simulator then min-max normalises scores to 0..100, which keeps the same top set.
#include "sched/policies/policies.h"

namespace gpupool::sched::policies {
namespace {

// The formula above on (cpu_left − cpu, gpu_left − gpu); one definition for both entry points so
// that they round identically.
int64_t BestFitScore(int64_t cpu_after, int64_t gpu_after) {
  return static_cast<int64_t>((1.0 - BestFitLeftover(cpu_after, gpu_after)) * 100.0);
}

class BestFitPolicy final : public Policy {
 public:
  explicit BestFitPolicy(const PolicyOptions& o) : Policy(o, TieBreak::kLowestIndex) {}
  std::string_view Name() const override { return "best-fit"; }

  int64_t Score(const ClusterState& state, int node, const RequestView& r) override {
    const Node& n = state.node(node);
    return BestFitScore(n.cpu_free_milli - r.request->cpu_milli,
                        GpuMilliLeft(n) - RequestGpuMilli(n, r));
  }

  // The same scores from the node summaries (cpu_free_milli = the node's free CPU,
  // gpu_milli_left = GpuMilliLeft), so that scoring a large cluster reads one small array
  // instead of every node's GPU list. A MIG request's demand depends on each node's GPU model:
  // those go through Score.
  void ScoreNodes(const ClusterState& state, std::span<const int> nodes, const RequestView& r,
                  std::span<int64_t> out) override {
    if (r.form == GpuForm::kMig) return Policy::ScoreNodes(state, nodes, r, out);
    const int64_t cpu = r.request->cpu_milli;
    const int64_t gpu = r.request->GpuMilli();
    if (cpu <= -kFastLimit || cpu >= kFastLimit || gpu <= -kFastLimit || gpu >= kFastLimit) {
      return Policy::ScoreNodes(state, nodes, r, out);
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      const NodeSummary& s = state.summary(nodes[i]);
      out[i] = FastBestFitScore(s.cpu_free_milli - cpu, int64_t{s.gpu_milli_left} - gpu);
    }
  }

 private:
  // BestFitScore without its two divisions, same result. In exact arithmetic
  //   (1 − x)·100 = (256000 − a − 16·b) / 2560 = k / 2560,   a = cpu_after, b = gpu_after,
  // and the cast truncates toward zero as C++ integer division does. When 2560 does not divide k
  // the exact value is at least 1/2560 (4e-4) from an integer, while for |a|, |b| < 2⁴¹ the
  // double evaluation is within 1e-5 of it (six roundings, each at most 2⁻⁵³ of a value below
  // 2³⁵): both truncate to k / 2560. On a multiple of 2560, or out of range, the double formula
  // decides. ScoreNodes checks the request's cpu and gpu against ±kFastLimit once; then
  // |b| < 2⁴⁰ + 2³¹ (gpu_milli_left is an int32 ≥ 0) and only `a` is checked here.
  static constexpr int64_t kFastLimit = int64_t{1} << 40;
  static int64_t FastBestFitScore(int64_t a, int64_t b) {
    const int64_t k = 256000 - a - 16 * b;
    if (a > -kFastLimit && a < kFastLimit && k % 2560 != 0) return k / 2560;
    return BestFitScore(a, b);
  }
};

}  // namespace

std::unique_ptr<Policy> MakeBestFit(const PolicyOptions& o) {
  return std::make_unique<BestFitPolicy>(o);
}

}  // namespace gpupool::sched::policies
