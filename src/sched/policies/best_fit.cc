// `best-fit`: the node left with the least CPU and GPU once the task is placed (FGD paper's
// BestFit, simulator best_fit_score.go):
//   x = 0.5·(cpu_left − cpu)/128000 + 0.5·(gpu_left − gpu)/8000,  score = ⌊(1 − x)·100⌋
// The simulator then min-max normalises scores to 0..100, which keeps the same top set.
#include "sched/policies/policies.h"

namespace gpupool::sched::policies {
namespace {

class BestFitPolicy final : public Policy {
 public:
  explicit BestFitPolicy(const PolicyOptions& o) : Policy(o, TieBreak::kLowestIndex) {}
  std::string_view Name() const override { return "best-fit"; }

  int64_t Score(const ClusterState& state, int node, const RequestView& r) override {
    const Node& n = state.node(node);
    double x = 0.0;
    x += static_cast<double>(n.cpu_free_milli - r.request->cpu_milli) / kMaxSpecCpuMilli * 0.5;
    x += static_cast<double>(GpuMilliLeft(n) - RequestGpuMilli(n, r)) / kMaxSpecGpuMilli * 0.5;
    return static_cast<int64_t>((1.0 - x) * 100.0);
  }
};

}  // namespace

std::unique_ptr<Policy> MakeBestFit(const PolicyOptions& o) {
  return std::make_unique<BestFitPolicy>(o);
}

}  // namespace gpupool::sched::policies
