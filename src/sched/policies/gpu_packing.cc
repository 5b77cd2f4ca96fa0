// `gpu-packing`: fill partly used GPUs first, then partly used nodes, then idle nodes (FGD
// paper's GpuPacking, simulator gpu_packing_score.go). Integer arithmetic:
//   idle node (no GPU in use), f free GPUs:           max(33 − f, f)
//   the task would take u > 0 fully free GPUs:       max(50 − u, 33)
//   else, s = Σ over the GPUs it takes of ⌊left·100/1000⌋:  max(100 − ⌊s/10⌋, 50)
// GPUs are taken tightest first (stable sort by milli left). CPU-only tasks score 0 everywhere.
#include <algorithm>
#include <numeric>

#include "sched/policies/policies.h"

namespace gpupool::sched::policies {
namespace {

class GpuPackingPolicy final : public Policy {
 public:
  explicit GpuPackingPolicy(const PolicyOptions& o) : Policy(o, TieBreak::kLowestIndex) {}
  std::string_view Name() const override { return "gpu-packing"; }

  int64_t Score(const ClusterState& state, int node, const RequestView& r) override {
    if (r.form != GpuForm::kShare && r.form != GpuForm::kWhole) return 0;
    const Node& n = state.node(node);
    const int64_t milli = r.form == GpuForm::kShare ? r.request->gpu_milli : kMilliPerGpu;
    const int count = r.form == GpuForm::kShare ? 1 : r.request->gpu_count;
    int64_t free = 0;
    for (const Gpu& g : n.gpus) free += !g.mig_enabled && g.milli_free == kMilliPerGpu;
    if (free == static_cast<int64_t>(n.gpus.size())) return std::max<int64_t>(33 - free, free);
    std::vector<int> order(n.gpus.size());
    std::iota(order.begin(), order.end(), 0);
    auto left = [&](int i) {
      const Gpu& g = n.gpus[static_cast<size_t>(i)];
      return g.mig_enabled ? 0 : g.milli_free;
    };
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return left(a) < left(b); });
    int taken = 0;
    int64_t used_free = 0;
    int64_t s = 0;
    for (int i : order) {
      if (taken == count) break;
      if (milli <= left(i) && r.GpuUsable(state, n.gpus[static_cast<size_t>(i)])) {
        ++taken;
        used_free += left(i) == kMilliPerGpu;
        s += int64_t{left(i)} * 100 / kMilliPerGpu;
      }
    }
    if (taken < count) return 0;
    if (used_free > 0) return std::max<int64_t>(50 - used_free, 33);
    return std::max<int64_t>(100 - s / 10, 50);
  }
};

}  // namespace

std::unique_ptr<Policy> MakeGpuPacking(const PolicyOptions& o) {
  return std::make_unique<GpuPackingPolicy>(o);
}

}  // namespace gpupool::sched::policies
