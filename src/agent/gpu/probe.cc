// OpenProbe: the simulated → NVML → no-GPU choice, and the banner that reports it.
#include "agent/gpu/probe.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "agent/gpu/nvml_probe.h"
#include "agent/gpu/simulated_probe.h"

namespace gpupool::agent {
namespace {

// A node without GPUs: discovers none, samples none, refuses MIG changes.
class NoGpuProbe final : public GpuProbe {
 public:
  std::string_view Kind() const override { return "none"; }
  Result<std::vector<Gpu>> Discover() override { return std::vector<Gpu>{}; }
  Result<std::vector<GpuSample>> Sample() override { return std::vector<GpuSample>{}; }
  Result<std::string> MigInstanceUuid(int gpu_index, int) override {
    return NotFound("gpu index " + std::to_string(gpu_index) + " out of range (0 GPUs)");
  }
  void SetLoad(const std::string&, int, int, int64_t) override {}
  void ClearLoad(int) override {}
  Status ApplyMigLayout(int gpu_index, bool, const std::vector<MigInstance>&) override {
    return InvalidArgument("gpu index " + std::to_string(gpu_index) + " out of range (0 GPUs)");
  }
};

}  // namespace

std::string SummarizeGpus(const std::vector<Gpu>& gpus) {
  struct Group {
    std::string model;
    int count = 0;
    int mig = 0;
  };
  std::vector<Group> groups;
  for (const Gpu& g : gpus) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const Group& x) { return x.model == g.model; });
    if (it == groups.end()) it = groups.insert(groups.end(), Group{g.model, 0, 0});
    ++it->count;
    if (g.mig_enabled) ++it->mig;
  }
  std::string out;
  for (const Group& x : groups) {
    if (!out.empty()) out += ", ";
    out += std::to_string(x.count) + "× " + x.model;
    if (x.mig > 0) out += " (" + std::to_string(x.mig) + " in MIG mode)";
  }
  return out.empty() ? "no GPUs" : out;
}

Result<std::unique_ptr<GpuProbe>> OpenProbe(const std::string& simulate_spec,
                                            const std::string& seed, std::string* banner,
                                            const std::string& nvml_library) {
  std::string ignored;
  std::string& text = banner != nullptr ? *banner : ignored;
  if (!simulate_spec.empty()) {
    Result<std::unique_ptr<SimulatedProbe>> sim = SimulatedProbe::Parse(simulate_spec, seed);
    if (!sim) return tl::unexpected(sim.error());
    Result<std::vector<Gpu>> gpus = (*sim)->Discover();
    text = "simulated GPUs: " + SummarizeGpus(gpus ? *gpus : std::vector<Gpu>{});
    return std::unique_ptr<GpuProbe>(std::move(*sim));
  }
  std::string why_not;
  std::unique_ptr<GpuProbe> nvml = NvmlProbe::Open(&why_not, nvml_library);
  if (nvml != nullptr) {
    Result<std::vector<Gpu>> gpus = nvml->Discover();
    text = "NVIDIA GPUs: " + SummarizeGpus(gpus ? *gpus : std::vector<Gpu>{});
    const std::string driver = static_cast<NvmlProbe*>(nvml.get())->DriverVersion();
    if (!driver.empty()) text += " (driver " + driver + ")";
    return nvml;
  }
  text = "no NVIDIA GPUs found (" + why_not +
         "); this node offers CPU only — pass --simulate-gpus to simulate some";
  return std::unique_ptr<GpuProbe>(std::make_unique<NoGpuProbe>());
}

}  // namespace gpupool::agent
