// `gpu-clustering`: keep tasks of one GPU shape together (FGD paper's GpuClustering, simulator
// gpu_clustering_score.go). Tags: "share" for a fractional task, "k-gpu" for k whole GPUs. With
// base = ⌊25·(8000 − gpu_left)/8000⌋:
//   the node runs this task's tag: base + 75 if it is the only tag there, else base + 50;
//   it does not: base + 25 if the node runs no GPU task, else base.
// CPU-only tasks score 0 everywhere.
#include <algorithm>
#include <vector>

#include "sched/policies/policies.h"

namespace gpupool::sched::policies {
namespace {

// 0 for a share, k for k whole GPUs, -1 for tasks without a tag (CPU-only, MIG).
int Tag(const TaskRequest& r) {
  switch (r.Form()) {
    case GpuForm::kShare: return 0;
    case GpuForm::kWhole: return r.gpu_count;
    default: return -1;
  }
}

class GpuClusteringPolicy final : public Policy {
 public:
  explicit GpuClusteringPolicy(const PolicyOptions& o) : Policy(o, TieBreak::kLowestIndex) {}
  std::string_view Name() const override { return "gpu-clustering"; }

  int64_t Score(const ClusterState& state, int node, const RequestView& r) override {
    const int tag = Tag(*r.request);
    if (tag < 0) return 0;
    const Node& n = state.node(node);
    const int64_t base = 25 * (8000 - GpuMilliLeft(n)) / 8000;
    bool tags[kMaxGpusPerTask + 1] = {};
    for (const std::string& id : state.TasksOn(node)) {
      const int t = Tag(state.FindBinding(id)->request);
      if (t >= 0) tags[t] = true;
    }
    const int distinct = static_cast<int>(std::count(std::begin(tags), std::end(tags), true));
    if (tags[tag]) return base + (distinct == 1 ? 75 : 50);
    return base + (distinct == 0 ? 25 : 0);
  }
};

}  // namespace

std::unique_ptr<Policy> MakeGpuClustering(const PolicyOptions& o) {
  return std::make_unique<GpuClusteringPolicy>(o);
}

}  // namespace gpupool::sched::policies
