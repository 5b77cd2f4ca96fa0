// `dot-product`: prefer the node whose free (CPU, GPU) vector is least aligned with the request
// (FGD paper's DotProd, simulator dot_product_score.go with dimension merge and max norm):
//   dot = (cpu_left/128000)(cpu/128000) + (gpu_left/8000)(gpu/8000),  score = ⌊100·(1 − dot/2)⌋
#include "sched/policies/policies.h"

namespace gpupool::sched::policies {
namespace {

class DotProductPolicy final : public Policy {
 public:
  explicit DotProductPolicy(const PolicyOptions& o) : Policy(o, TieBreak::kLowestIndex) {}
  std::string_view Name() const override { return "dot-product"; }

  int64_t Score(const ClusterState& state, int node, const RequestView& r) override {
    const Node& n = state.node(node);
    const double node_cpu = static_cast<double>(n.cpu_free_milli) / kMaxSpecCpuMilli;
    const double node_gpu = static_cast<double>(GpuMilliLeft(n)) / kMaxSpecGpuMilli;
    const double task_cpu = static_cast<double>(r.request->cpu_milli) / kMaxSpecCpuMilli;
    const double task_gpu = static_cast<double>(RequestGpuMilli(n, r)) / kMaxSpecGpuMilli;
    const double dot = node_cpu * task_cpu + node_gpu * task_gpu;
    return static_cast<int64_t>(100.0 * (1.0 - dot / 2.0));
  }
};

}  // namespace

std::unique_ptr<Policy> MakeDotProduct(const PolicyOptions& o) {
  return std::make_unique<DotProductPolicy>(o);
}

}  // namespace gpupool::sched::policies
