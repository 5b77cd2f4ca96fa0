// `fgd`: Fragmentation Gradient Descent (Weng et al., ATC'23; simulator fgd_score.go). Places a
// task where the node's fragmentation (fragmentation.h) grows least:
//   score = ⌊100 · sigmoid((frag_before − frag_after) / 1000)⌋
// For a share the GPU with the highest score wins (lowest index on ties). The truncation makes
// whole bands of nodes tie (any change under 40 milli scores 50); ties go to the first node in
// node order, which is what reproduces the paper's published results (see docs/benchmarks.md).
#include "sched/policies/frag_delta.h"
#include "sched/policies/policies.h"

namespace gpupool::sched::policies {
namespace {

class FgdPolicy final : public CachedBestPolicy {
 public:
  explicit FgdPolicy(const PolicyOptions& o)
      : CachedBestPolicy(o, TieBreak::kLowestIndex), model_(o.typical) {}
  std::string_view Name() const override { return "fgd"; }

 private:
  // (score, GPU) of the best option; the first (lowest-index) GPU among equal scores.
  std::pair<int64_t, int> Best(const ClusterState& state, int node,
                               const RequestView& r) override {
    int64_t best = 0;
    int gpu = -1;
    bool any = false;
    for (const FragOption& o : FragOptions(model_, state, node, r)) {
      const int64_t s = FgdScore(o.delta);
      if (!any || s > best || (s == best && o.gpu < gpu)) {
        best = s;
        gpu = o.gpu;
        any = true;
      }
    }
    return {best, gpu};
  }

  FragModel model_;
};

}  // namespace

std::unique_ptr<Policy> MakeFgd(const PolicyOptions& o) { return std::make_unique<FgdPolicy>(o); }

}  // namespace gpupool::sched::policies
