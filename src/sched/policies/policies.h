// Factories of the built-in policies (one file each) and the few quantities they share.
#pragma once

#include <cstdint>
#include <memory>

#include "sched/policy.h"

namespace gpupool::sched::policies {

// Normalisers of the FGD paper's simulator: the largest node it models has 128 cores and 8 GPUs.
inline constexpr double kMaxSpecCpuMilli = 128000.0;
inline constexpr double kMaxSpecGpuMilli = 8000.0;

// Σ milli left over the node's GPUs that fractional and whole-GPU tasks may use (MIG-mode GPUs
// count 0).
int64_t GpuMilliLeft(const Node& n);

// Best fit's leftover share once the task is placed, from the CPU and GPU milli left after it:
//   x = 0.5·cpu_after/128000 + 0.5·gpu_after/8000   (0: the node is exactly full)
double BestFitLeftover(int64_t cpu_after, int64_t gpu_after);

// The GPU demand of a request in milli (k × 1000, the share, or a MIG instance's slice share of
// the model of the node's first GPU).
int64_t RequestGpuMilli(const Node& n, const RequestView& r);

std::unique_ptr<Policy> MakeRandom(const PolicyOptions& options);
std::unique_ptr<Policy> MakeFirstFit(const PolicyOptions& options);
std::unique_ptr<Policy> MakeBestFit(const PolicyOptions& options);
std::unique_ptr<Policy> MakeDotProduct(const PolicyOptions& options);
std::unique_ptr<Policy> MakeGpuPacking(const PolicyOptions& options);
std::unique_ptr<Policy> MakeGpuClustering(const PolicyOptions& options);
std::unique_ptr<Policy> MakeFgd(const PolicyOptions& options);
std::unique_ptr<Policy> MakeFgdPlan(const PolicyOptions& options);

}  // namespace gpupool::sched::policies
