// SimulatedProbe: GPUs that exist only in the agent (`--simulate-gpus 'A100-80GB:4,T4:2'`), for
// development and tests. They behave like NvmlProbe's: catalog models and memory, MIG layouts
// under NVIDIA's placement rules, and utilisation and memory driven by the loads the runtime sets.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agent/gpu/gpu_probe.h"
#include "core/gpu_catalog.h"

namespace gpupool::agent {

class SimulatedProbe final : public GpuProbe {
 public:
  // Most simulated GPUs in one probe.
  static constexpr int kMaxGpus = 256;

  // `spec`: comma-separated items `MODEL:COUNT[:mig[=PROFILE+PROFILE…]][:links=K]`, e.g.
  //   "A100-80GB:4,T4:2"            4 A100-80GB and 2 T4, MIG off
  //   "A100-80GB:2:mig"             MIG mode on, no instances
  //   "A100-80GB:1:mig=3g.40gb+3g.40gb"  instances placed at their first legal start, in order
  //   "A100-80GB:8:links=4"         two NVLink groups of four (Gpu::link_group 0 and 1; groups
  //                                 are numbered across the items); without links: not known
  // MODEL is a catalog name or alias (case-insensitive); unknown models are refused (their memory
  // is unknown). `seed` (the node name, say) goes into the uuids, "GPU-sim-<seed>-<index>" and
  // "MIG-sim-<seed>-<index>-<start>-<profile>", so that two simulated agents on one machine do
  // not collide; characters other than letters, digits, '-' and '_' become '-'.
  // Errors are kInvalidArgument and name the bad item.
  static Result<std::unique_ptr<SimulatedProbe>> Parse(std::string_view spec,
                                                       std::string_view seed = "");

  std::string_view Kind() const override { return "simulated"; }
  Result<std::vector<Gpu>> Discover() override;
  // Per MIG instance: Σ of its loads' utilisation (capped at 100) and memory (capped at the
  // instance's). Per GPU: Σ of the loads on the whole GPU plus, for utilisation, each instance's
  // weighted by its share of the compute slices (a busy 1g of 7 is 14 %), for memory each
  // instance's; utilisation capped at 100, memory at the GPU's.
  Result<std::vector<GpuSample>> Sample() override;
  Result<std::string> MigInstanceUuid(int gpu_index, int start) override;
  void SetLoad(const std::string& gpu_or_mig_uuid, int pid, int util_pct, int64_t mem_mib) override;
  void ClearLoad(int pid) override;
  Status ApplyMigLayout(int gpu_index, bool mig_enabled,
                        const std::vector<MigInstance>& instances) override;

  int GpuCount() const;

 private:
  struct SimGpu {
    const GpuModelInfo* model = nullptr;
    Gpu gpu;                             // in_use always false
    std::vector<std::string> mig_uuids;  // parallel to gpu.mig_instances
  };
  struct Load {
    std::string uuid;
    int pid = 0;
    int util_pct = 0;
    int64_t mem_mib = 0;
  };

  explicit SimulatedProbe(std::string seed) : seed_(std::move(seed)) {}
  std::string MigUuid(int gpu_index, const MigInstance& m) const;
  void SetInstances(int gpu_index, bool mig_enabled, std::vector<MigInstance> instances);
  void Reindex();

  const std::string seed_;
  mutable std::mutex mu_;
  std::vector<SimGpu> gpus_;
  std::vector<Load> loads_;
  // uuid → (GPU index, MIG instance index or -1 for the whole GPU).
  std::unordered_map<std::string, std::pair<int, int>> where_;
};

}  // namespace gpupool::agent
