// Node construction helpers and GPU predicates.
#include "core/node.h"

#include <algorithm>

#include "core/gpu_catalog.h"

namespace gpupool {

bool Gpu::Idle() const {
  return milli_free == kMilliPerGpu && mem_free_mib == mem_mib &&
         std::none_of(mig_instances.begin(), mig_instances.end(),
                      [](const MigInstance& m) { return m.in_use; });
}

Node Node::Make(std::string name, int64_t cpu_milli, int64_t memory_mib, int gpu_count,
                const std::string& model, int64_t gpu_mem_mib) {
  Node n;
  n.name = std::move(name);
  n.cpu_milli = n.cpu_free_milli = cpu_milli;
  n.memory_mib = n.memory_free_mib = memory_mib;
  const GpuModelInfo* info = FindGpuModel(model);
  const std::string canonical = CanonicalGpuModelName(model);
  const int64_t mem = gpu_mem_mib > 0 ? gpu_mem_mib : (info ? info->mem_mib : 0);
  for (int i = 0; i < gpu_count; ++i) {
    Gpu g;
    g.model = canonical;
    g.uuid = "GPU-" + n.name + "-" + std::to_string(i);
    g.mem_mib = g.mem_free_mib = mem;
    n.gpus.push_back(std::move(g));
  }
  return n;
}

}  // namespace gpupool
