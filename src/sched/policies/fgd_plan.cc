// `fgd-plan`: gpupool's own policy (what `default` means). FGD (Weng et al., ATC'23) judges each
// placement by how much it fragments the node for the workload's typical tasks; fgd-plan adds
// what FGD misses about fractional tasks: which of them should share a GPU. Five criteria, each
// deciding only among the options the ones before it leave tied, packed into one integer:
//   plan      the GPU follows the SharePlan after the share (share_plan.h)       bit  62
//   band      FGD's score ⌊100·sigmoid(Δpaper/1000)⌋                            bits 55..61
//   balance   −Δ of Σ_g N(g)², N(g) = GPUs of the model with g milli left        bits 38..54
//             (Csirik et al.'s Sum-of-Squares bin packing): the gap it fills is common, the
//             gap it leaves rare
//   capacity  round(10·Δcapacity) (FragMeasure::kCapacity, 0.1-milli steps)      bits 16..37
//   fit       ⌊65535·(1 − x)⌋, x = best fit's leftover share of the node          bits  0..15
// On equal scores a share takes the tighter GPU, then the lower index. Plan and balance concern
// shares only (other requests score them as constants). Balance reads cluster-wide counts, so
// the per-node cache keeps each node's options without it and adds it at every decision.
// MIG requests prefer a GPU that needs no re-partitioning, then the fullest one.
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>

#include "core/gpu_catalog.h"
#include "core/mig.h"
#include "sched/policies/frag_delta.h"
#include "sched/policies/policies.h"
#include "sched/share_plan.h"

namespace gpupool::sched::policies {
namespace {

constexpr int kPlanShift = 62;
constexpr int kBandShift = 55;
constexpr int kBalanceShift = 38;
constexpr int kCapacityShift = 16;
constexpr int64_t kBalanceMid = int64_t{1} << 16;  // balance of a placement that changes no N(g)
constexpr int64_t kBalanceMax = (int64_t{1} << 17) - 1;
constexpr int64_t kCapacityMid = int64_t{1} << 21;
constexpr int64_t kCapacityMax = (int64_t{1} << 22) - 1;
constexpr int64_t kFitMax = (int64_t{1} << 16) - 1;

// One way to place the request on a node, scored on everything but balance.
struct Option {
  int64_t fixed = 0;  // plan, band, capacity and fit in their bits
  int32_t left = 0;   // milli left on `gpu` before a share; 1000 for other requests
  int32_t gpu = -1;   // the GPU a share takes; -1 otherwise
};

// A node's options for one request shape: one per distinct milli-left a share fits (see
// FragOptions), or one for other requests. Up to kMax are cached; a node with more is scored
// afresh each time (`overflow`).
struct NodeOptions {
  static constexpr size_t kMax = 4;
  std::array<Option, kMax> options{};
  uint8_t count = 0;
  bool overflow = false;
};

class FgdPlanPolicy final : public PickPolicy {
 public:
  explicit FgdPlanPolicy(const PolicyOptions& o)
      : PickPolicy(o, TieBreak::kLowestIndex), model_(o.typical), plan_(o.typical) {}
  std::string_view Name() const override { return "fgd-plan"; }

 private:
  int Slot(const ClusterState& state, const RequestView& r) override {
    return cache_.Slot(state, r);
  }

  // (score, GPU) of the node's best option.
  std::pair<int64_t, int> Pick(const ClusterState& state, int node, const RequestView& r,
                               int slot) override {
    if (r.form == GpuForm::kMig) return {MigScore(state, node, r), -1};
    const NodeOptions& cached =
        cache_.Get(state, slot, node, [&] { return Options(state, node, r); });
    std::vector<Option> all;
    std::span<const Option> options(cached.options.data(), cached.count);
    if (cached.overflow) {
      all = AllOptions(state, node, r);
      options = all;
    }
    int64_t best = 0;
    const Option* pick = nullptr;
    for (const Option& o : options) {
      const int64_t s = o.fixed + (Balance(state, node, r, o) << kBalanceShift);
      if (pick == nullptr || s > best || (s == best && o.left < pick->left)) {
        best = s;
        pick = &o;
      }
    }
    if (pick == nullptr) return {INT64_MIN / 2, -1};
    return {best, pick->gpu};
  }

  NodeOptions Options(const ClusterState& state, int node, const RequestView& r) {
    NodeOptions out;
    const std::vector<Option> all = AllOptions(state, node, r);
    if (all.size() > NodeOptions::kMax) {
      out.overflow = true;
      return out;
    }
    std::copy(all.begin(), all.end(), out.options.begin());
    out.count = static_cast<uint8_t>(all.size());
    return out;
  }

  std::vector<Option> AllOptions(const ClusterState& state, int node, const RequestView& r) {
    const Node& n = state.node(node);
    const double x = BestFitLeftover(n.cpu_free_milli - r.request->cpu_milli,
                                     GpuMilliLeft(n) - RequestGpuMilli(n, r));
    const int64_t fit = std::clamp<int64_t>(static_cast<int64_t>((1.0 - x) * 65535.0), 0, kFitMax);
    std::vector<Option> out;
    for (const FragOption& f : FragOptions(model_, state, node, r, /*with_capacity=*/true)) {
      const int64_t capacity = std::clamp<int64_t>(
          std::llround(f.capacity_delta * 10.0) + kCapacityMid, 0, kCapacityMax);
      Option o;
      o.left = r.form == GpuForm::kShare ? f.left : kMilliPerGpu;
      o.gpu = f.gpu;
      int64_t plan = 0;
      if (r.form == GpuForm::kShare) {
        // GPUs with the same milli left fragment alike but may hold different shares: take the
        // first that follows the plan with this one, else the first.
        for (size_t g = static_cast<size_t>(f.gpu); g < n.gpus.size(); ++g) {
          const Gpu& gpu = n.gpus[g];
          if (gpu.mig_enabled || gpu.milli_free != f.left ||
              gpu.mem_free_mib < r.request->gpu_mem_mib || !r.GpuUsable(state, gpu)) {
            continue;
          }
          if (plan_.FollowsWith(Holding(state, node, static_cast<int>(g)),
                                r.request->gpu_milli)) {
            o.gpu = static_cast<int>(g);
            plan = 1;
            break;
          }
        }
      }
      o.fixed = (plan << kPlanShift) + (FgdScore(f.delta) << kBandShift) +
                (capacity << kCapacityShift) + fit;
      out.push_back(o);
    }
    return out;
  }

  // What GPU `gpu` of `node` holds, largest first: its shares, and the milli used that no
  // binding explains (a node registered partly used) as one more.
  static std::vector<int32_t> Holding(const ClusterState& state, int node, int gpu) {
    const std::span<const int32_t> shares = state.GpuShares(node, gpu);
    std::vector<int32_t> out(shares.begin(), shares.end());
    int32_t used = kMilliPerGpu - state.node(node).gpus[static_cast<size_t>(gpu)].milli_free;
    for (int32_t m : shares) used -= m;
    if (used > 0) out.insert(std::upper_bound(out.begin(), out.end(), used, std::greater<>()), used);
    return out;
  }

  // Sum-of-squares balance of a share taking `o.gpu` (kBalanceMid − the change of Σ N(g)²,
  // clamped); kBalanceMid for other requests.
  static int64_t Balance(const ClusterState& state, int node, const RequestView& r,
                         const Option& o) {
    if (r.form != GpuForm::kShare || o.gpu < 0) return kBalanceMid;
    const int model = state.GpuModelId(node, o.gpu);
    const int32_t after = o.left - r.request->gpu_milli;
    int64_t delta = 0;
    if (o.left < kMilliPerGpu) delta += 1 - 2 * state.PartialGpuCount(model, o.left);
    if (after > 0) delta += 2 * state.PartialGpuCount(model, after) + 1;
    return std::clamp<int64_t>(kBalanceMid - delta, 0, kBalanceMax);
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
  SharePlan plan_;
  NodeCache<NodeOptions> cache_;
};

}  // namespace

std::unique_ptr<Policy> MakeFgdPlan(const PolicyOptions& o) {
  return std::make_unique<FgdPlanPolicy>(o);
}

}  // namespace gpupool::sched::policies
