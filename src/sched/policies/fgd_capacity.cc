// `fgd-capacity`: gpupool's own policy (what `default` means). FGD's score decides first; among the
// nodes (and GPUs) FGD scores alike — its truncated sigmoid puts whole bands of them level — the
// one whose capacity-aware fragmentation (FragMeasure::kCapacity: idle GPU the typical tasks could
// not use, counting how many of them the node's GPUs and CPU could take) grows least wins, then
// the best fit. One integer, compared as (band, capacity, fit):
//   band     = ⌊100·sigmoid(Δpaper/1000)⌋                       bits 56..62
//   capacity = round(10·Δcapacity) + 2^30  (0.1-milli steps)      bits 22..52
//   fit      = ⌊250000·(1 − x)⌋, x = best-fit's leftover share    bits  0..21
// MIG requests prefer a GPU that needs no re-partitioning, then the fullest one.
#include <algorithm>
#include <cmath>

#include "core/gpu_catalog.h"
#include "core/mig.h"
#include "sched/policies/frag_delta.h"
#include "sched/policies/policies.h"

namespace gpupool::sched::policies {
namespace {

constexpr int kCapacityShift = 22;
constexpr int kBandShift = 56;
constexpr int64_t kCapacityOffset = int64_t{1} << 30;
constexpr int64_t kFitMax = (int64_t{1} << kCapacityShift) - 1;

class FgdCapacityPolicy final : public CachedBestPolicy {
 public:
  explicit FgdCapacityPolicy(const PolicyOptions& o)
      : CachedBestPolicy(o, TieBreak::kLowestIndex), model_(o.typical) {}
  std::string_view Name() const override { return "fgd-capacity"; }

 private:
  // (score, GPU) of the best option; on equal scores the tighter GPU.
  std::pair<int64_t, int> Best(const ClusterState& state, int node,
                               const RequestView& r) override {
    if (r.form == GpuForm::kMig) return {MigScore(state, node, r), -1};
    const Node& n = state.node(node);
    // Best fit's leftover share; the same for every GPU of the node.
    const double x = BestFitLeftover(n.cpu_free_milli - r.request->cpu_milli,
                                     GpuMilliLeft(n) - RequestGpuMilli(n, r));
    const int64_t fit =
        std::clamp<int64_t>(static_cast<int64_t>((1.0 - x) * 250000.0), 0, kFitMax);
    int64_t best = 0;
    int gpu = -1;
    int32_t best_left = 0;
    bool any = false;
    for (const FragOption& o : FragOptions(model_, state, node, r, /*with_capacity=*/true)) {
      const int64_t capacity = std::clamp<int64_t>(
          std::llround(o.capacity_delta * 10.0) + kCapacityOffset, 0, 2 * kCapacityOffset - 1);
      const int64_t s = (FgdScore(o.delta) << kBandShift) + (capacity << kCapacityShift) + fit;
      if (!any || s > best || (s == best && o.left < best_left)) {
        best = s;
        gpu = o.gpu;
        best_left = o.left;
        any = true;
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

std::unique_ptr<Policy> MakeFgdCapacity(const PolicyOptions& o) {
  return std::make_unique<FgdCapacityPolicy>(o);
}

}  // namespace gpupool::sched::policies
