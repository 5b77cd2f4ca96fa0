// NvmlProbe: real NVIDIA GPUs through NVML, loaded at run time with dlopen("libnvidia-ml.so.1"),
// so the agent runs (CPU only) where there is no driver. Also the pure mappings from NVML's
// product and MIG profile names to the GPU catalog's, unit-tested without a GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "agent/gpu/gpu_probe.h"
#include "core/gpu_catalog.h"

namespace gpupool::agent {

inline constexpr const char kNvmlLibrary[] = "libnvidia-ml.so.1";

// The catalog's canonical name for an NVML product name ("NVIDIA A100-SXM4-80GB" → "A100-80GB",
// "NVIDIA H100 80GB HBM3" → "H100-80GB", "Tesla T4" → "T4"), or `nvml_name` itself (an opaque
// model) when no catalog model fits. `mem_mib` (total memory as NVML reports it; 0 = unknown)
// must then be within 10 % of the catalog model's memory, which keeps e.g. "NVIDIA H100 NVL"
// (94 GB) from being taken for an H100-80GB.
std::string CatalogModelForNvmlName(std::string_view nvml_name, int64_t mem_mib = 0);

// Index into `model.mig_profiles` of an NVML GPU instance profile id (NVML_GPU_INSTANCE_PROFILE_*)
// whose placement covers `memory_slices` memory slices (0 = unknown), or -1.
int CatalogMigProfileForNvml(const GpuModelInfo& model, unsigned int nvml_profile_id,
                             unsigned int memory_slices);

// Index into `model.mig_profiles` from a MIG device's NVML name, which ends in the profile
// ("NVIDIA A100-SXM4-80GB MIG 3g.40gb"), or -1.
int CatalogMigProfileForMigDeviceName(const GpuModelInfo& model, std::string_view nvml_name);

class NvmlProbe final : public GpuProbe {
 public:
  // nullptr, with the reason in *why_not (when given), if `library` cannot be loaded, lacks a
  // required symbol, nvmlInit_v2 fails, or there is no GPU. `library` is for tests.
  static std::unique_ptr<GpuProbe> Open(std::string* why_not,
                                        const std::string& library = kNvmlLibrary);

  ~NvmlProbe() override;
  NvmlProbe(const NvmlProbe&) = delete;
  NvmlProbe& operator=(const NvmlProbe&) = delete;

  std::string_view Kind() const override { return "nvml"; }
  Result<std::vector<Gpu>> Discover() override;
  Result<std::vector<GpuSample>> Sample() override;
  Result<std::string> MigInstanceUuid(int gpu_index, int start) override;
  void SetLoad(const std::string&, int, int, int64_t) override {}
  void ClearLoad(int) override {}
  // kFailedPrecondition: re-partitioning is done with nvidia-smi by the operator for now.
  Status ApplyMigLayout(int gpu_index, bool mig_enabled,
                        const std::vector<MigInstance>& instances) override;

  // The driver version ("550.54.15"), or empty when NVML does not say.
  std::string DriverVersion() const;

 private:
  struct Impl;
  explicit NvmlProbe(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupool::agent
