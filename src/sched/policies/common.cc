// Quantities shared by several policies (see policies.h).
#include "sched/policies/policies.h"

namespace gpupool::sched::policies {

int64_t GpuMilliLeft(const Node& n) {
  int64_t left = 0;
  for (const Gpu& g : n.gpus) left += g.mig_enabled ? 0 : g.milli_free;
  return left;
}

double BestFitLeftover(int64_t cpu_after, int64_t gpu_after) {
  double x = 0.0;
  x += static_cast<double>(cpu_after) / kMaxSpecCpuMilli * 0.5;
  x += static_cast<double>(gpu_after) / kMaxSpecGpuMilli * 0.5;
  return x;
}

int64_t RequestGpuMilli(const Node& n, const RequestView& r) {
  if (r.form == GpuForm::kMig) {
    return n.gpus.empty() ? 0 : MigMilli(n.gpus.front().model, r.request->mig_profile);
  }
  return r.request->GpuMilli();
}

}  // namespace gpupool::sched::policies
