// `dot-product`: prefer the node whose free (CPU, GPU) vector is least aligned with the request
// (FGD paper's DotProd, simulator dot_product_score.go with dimension merge and max norm):
//   dot = (cpu_left/128000)(cpu/128000) + (gpu_left/8000)(gpu/8000),  score = ⌊100·(1 − dot/2)⌋
#include "sched/policies/policies.h"

namespace gpupool::sched::policies {
namespace {

// The formula above; one definition for both entry points so that they round identically.
int64_t DotScore(int64_t cpu_left, int64_t gpu_left, int64_t cpu, int64_t gpu) {
  const double node_cpu = static_cast<double>(cpu_left) / kMaxSpecCpuMilli;
  const double node_gpu = static_cast<double>(gpu_left) / kMaxSpecGpuMilli;
  const double task_cpu = static_cast<double>(cpu) / kMaxSpecCpuMilli;
  const double task_gpu = static_cast<double>(gpu) / kMaxSpecGpuMilli;
  const double dot = node_cpu * task_cpu + node_gpu * task_gpu;
  return static_cast<int64_t>(100.0 * (1.0 - dot / 2.0));
}

class DotProductPolicy final : public Policy {
 public:
  explicit DotProductPolicy(const PolicyOptions& o) : Policy(o, TieBreak::kLowestIndex) {}
  std::string_view Name() const override { return "dot-product"; }

  int64_t Score(const ClusterState& state, int node, const RequestView& r) override {
    const Node& n = state.node(node);
    return DotScore(n.cpu_free_milli, GpuMilliLeft(n), r.request->cpu_milli,
                    RequestGpuMilli(n, r));
  }

  // The same scores from the node summaries (see best_fit.cc); MIG requests go through Score.
  void ScoreNodes(const ClusterState& state, std::span<const int> nodes, const RequestView& r,
                  std::span<int64_t> out) override {
    if (r.form == GpuForm::kMig) return Policy::ScoreNodes(state, nodes, r, out);
    const int64_t cpu = r.request->cpu_milli;
    const int64_t gpu = r.request->GpuMilli();
    for (size_t i = 0; i < nodes.size(); ++i) {
      const NodeSummary& s = state.summary(nodes[i]);
      out[i] = DotScore(s.cpu_free_milli, s.gpu_milli_left, cpu, gpu);
    }
  }
};

}  // namespace

std::unique_ptr<Policy> MakeDotProduct(const PolicyOptions& o) {
  return std::make_unique<DotProductPolicy>(o);
}

}  // namespace gpupool::sched::policies
