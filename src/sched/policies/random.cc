// `random`: a uniformly random feasible node and, for a share, a uniformly random GPU that fits
// (the FGD paper's Random baseline).
#include "sched/policies/policies.h"

namespace gpupool::sched::policies {
namespace {

class RandomPolicy final : public Policy {
 public:
  explicit RandomPolicy(const PolicyOptions& o) : Policy(o, TieBreak::kRandom) {}
  std::string_view Name() const override { return "random"; }

  // Every node ties; the random tie-break makes the choice uniform.
  int64_t Score(const ClusterState&, int, const RequestView&) override { return 0; }

  Placement ChooseGpus(const ClusterState& state, int node, const RequestView& r) override {
    Placement p = DefaultPlacement(state, node, r);
    if (r.form != GpuForm::kShare) return p;
    std::vector<int> fitting;
    const Node& n = state.node(node);
    for (size_t i = 0; i < n.gpus.size(); ++i) {
      const Gpu& g = n.gpus[i];
      if (!g.mig_enabled && g.milli_free >= r.request->gpu_milli &&
          g.mem_free_mib >= r.request->gpu_mem_mib && r.GpuUsable(state, g)) {
        fitting.push_back(static_cast<int>(i));
      }
    }
    if (!fitting.empty()) p.gpus = {fitting[UniformIndex(rng(), fitting.size())]};
    return p;
  }
};

}  // namespace

std::unique_ptr<Policy> MakeRandom(const PolicyOptions& o) {
  return std::make_unique<RandomPolicy>(o);
}

}  // namespace gpupool::sched::policies
