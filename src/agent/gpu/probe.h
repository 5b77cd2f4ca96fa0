// Chooses the node agent's GPU probe: simulated GPUs when asked for, else NVML, else a probe
// with no GPUs (a CPU-only node), with a one-line banner saying which and why.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/gpu/gpu_probe.h"
#include "core/result.h"

namespace gpupool::agent {

// `simulate_spec` non-empty: a SimulatedProbe (see SimulatedProbe::Parse; its errors are
// returned) with `seed` in its uuids. Otherwise NVML (`nvml_library`, for tests) when it loads
// and sees a GPU; otherwise a probe of Kind() "none" with no GPUs. `banner` (when given) gets
// what was chosen, e.g. "simulated GPUs: 4× A100-80GB, 2× T4" or "no NVIDIA GPUs found
// (libnvidia-ml.so.1: …); this node offers CPU only — pass --simulate-gpus to simulate some".
Result<std::unique_ptr<GpuProbe>> OpenProbe(const std::string& simulate_spec,
                                            const std::string& seed, std::string* banner,
                                            const std::string& nvml_library = "libnvidia-ml.so.1");

// "4× A100-80GB (2 in MIG mode), 2× T4": GPUs grouped by model in order of first appearance.
std::string SummarizeGpus(const std::vector<Gpu>& gpus);

}  // namespace gpupool::agent
