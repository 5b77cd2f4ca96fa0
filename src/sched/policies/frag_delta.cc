// FragOptions: the node's fragment amount before the task and after each candidate placement,
// both from FragModel's memo (see frag_delta.h).
#include "sched/policies/frag_delta.h"

#include <algorithm>

namespace gpupool::sched::policies {

std::vector<FragOption> FragOptions(FragModel& model, const ClusterState& state, int node,
                                    const RequestView& r) {
  std::vector<FragOption> out;
  if (r.form == GpuForm::kMig) return out;
  const Node& n = state.node(node);
  const int model_id = state.NodeModelId(node);
  int32_t left[64];
  const size_t gpus = std::min<size_t>(n.gpus.size(), 64);
  for (size_t i = 0; i < gpus; ++i) left[i] = n.gpus[i].mig_enabled ? 0 : n.gpus[i].milli_free;
  const std::span<const int32_t> lefts(left, gpus);
  const int64_t cpu_after = n.cpu_free_milli - r.request->cpu_milli;
  const double before = model.Amount(state, model_id, n.cpu_free_milli, lefts);

  if (r.form == GpuForm::kShare) {
    const int32_t milli = r.request->gpu_milli;
    for (size_t i = 0; i < gpus; ++i) {
      if (left[i] < milli || n.gpus[i].mem_free_mib < r.request->gpu_mem_mib ||
          !r.GpuUsable(state, n.gpus[i])) {
        continue;
      }
      const bool seen = std::any_of(out.begin(), out.end(),
                                    [&](const FragOption& o) { return o.left == left[i]; });
      if (seen) continue;
      const int32_t saved = left[i];
      left[i] -= milli;
      const double after = model.Amount(state, model_id, cpu_after, lefts);
      left[i] = saved;
      out.push_back(FragOption{static_cast<int>(i), before - after, saved});
    }
    return out;
  }
  if (r.form == GpuForm::kWhole) {
    int need = r.request->gpu_count;
    for (size_t i = 0; i < gpus && need > 0; ++i) {
      if (left[i] == kMilliPerGpu && r.GpuUsable(state, n.gpus[i])) {
        left[i] = 0;
        --need;
      }
    }
  }
  out.push_back(FragOption{-1, before - model.Amount(state, model_id, cpu_after, lefts), 0});
  return out;
}

}  // namespace gpupool::sched::policies
