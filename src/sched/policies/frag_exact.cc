// `frag-exact`: gpupool's own policy (what `default` means). Like FGD it places a task where the
// node's fragmentation grows least, but it ranks the exact change instead of FGD's truncated
// sigmoid, so that nodes FGD sees as tied are told apart by how much they fragment:
//   score = round((frag_before − frag_after) · 1000)      (micro-GPU units, integer)
// Ties go to the lowest node index (deterministic). MIG requests prefer a GPU that needs no
// re-partitioning, then the fullest one.
#include <cmath>

#include "core/gpu_catalog.h"
#include "core/mig.h"
#include "sched/policies/frag_delta.h"
#include "sched/policies/policies.h"

namespace gpupool::sched::policies {
namespace {

class FragExactPolicy final : public Policy {
 public:
  explicit FragExactPolicy(const PolicyOptions& o)
      : Policy(o, TieBreak::kLowestIndex), model_(o.typical) {}
  std::string_view Name() const override { return "frag-exact"; }

  int64_t Score(const ClusterState& state, int node, const RequestView& r) override {
    if (r.form == GpuForm::kMig) return MigScore(state, node, r);
    return Best(state, node, r).first;
  }

  Placement ChooseGpus(const ClusterState& state, int node, const RequestView& r) override {
    Placement p = DefaultPlacement(state, node, r);
    if (r.form == GpuForm::kShare) p.gpus = {Best(state, node, r).second};
    return p;
  }

 private:
  std::pair<int64_t, int> Best(const ClusterState& state, int node, const RequestView& r) {
    int64_t best = 0;
    int gpu = -1;
    int32_t best_left = 0;
    for (const FragOption& o : FragOptions(model_, state, node, r)) {
      const int64_t s = std::llround(o.delta * 1000.0);
      // Equal change: the tighter GPU keeps larger holes whole for larger tasks.
      if (gpu < 0 || s > best || (s == best && o.left < best_left)) {
        best = s;
        gpu = o.gpu;
        best_left = o.left;
      }
    }
    return {best, gpu};
  }

  // −(1000 · action + free compute slices) of the best GPU: reuse before create before
  // re-partition, then pack onto the fullest MIG GPU.
  static int64_t MigScore(const ClusterState& state, int node, const RequestView& r) {
    const Placement p = DefaultPlacement(state, node, r);
    if (p.gpus.empty() || !p.mig) return INT64_MIN / 2;
    const Gpu& g = state.node(node).gpus[static_cast<size_t>(p.gpus[0])];
    const GpuModelInfo* info = FindGpuModel(g.model);
    return -(1000 * static_cast<int64_t>(p.mig->action) + MigFreeComputeSlices(*info, g));
  }

  FragModel model_;
};

}  // namespace

std::unique_ptr<Policy> MakeFragExact(const PolicyOptions& o) {
  return std::make_unique<FragExactPolicy>(o);
}

}  // namespace gpupool::sched::policies
