// The FGD paper's experiment (Weng et al., ATC'23): tasks arrive one at a time in a fixed order
// onto an empty cluster, with no departures, queue or retry; a task that fits nowhere fails. After
// every arrival the allocation and the fragmentation are recorded, then binned by arrived workload
// (% of cluster GPU capacity, 0..130) exactly as the paper's scripts do.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/node.h"
#include "core/result.h"
#include "sched/fragmentation.h"
#include "sim/trace.h"

namespace gpupool::sim {

inline constexpr int kBins = 131;  // arrived workload 0..130 %
using Curve = std::array<std::optional<double>, kBins>;  // nullopt: no arrival near that bin

struct FgdRunConfig {
  std::string policy;
  uint64_t seed = 42;         // seeds the node order and the policy's random draws
  bool shuffle_nodes = true;  // meet nodes in a seeded random order, as the paper's simulator
  // Typical tasks: the most frequent request shapes covering this % of the pod list (the paper's
  // simulator uses 95).
  double typical_coverage_pct = 95.0;
};

// Where the GPU left idle at the end of a run is, and how many GPUs an offline packing of the
// same shares would need: the gap between share_gpus and share_gpus_repacked is what a better
// pairing of shares could give back (GPUs in MIG mode are left out).
struct IdleAtEnd {
  int64_t free_gpus = 0;            // GPUs with nothing bound
  int64_t partial_milli = 0;        // milli left on partly used GPUs
  int64_t share_gpus = 0;           // GPUs holding at least one share
  int64_t share_gpus_repacked = 0;  // GPUs best-fit decreasing packs the same shares into
                                    // (nodes, CPU, memory and GPU models ignored)
};

struct FgdResult {
  std::string policy;
  int64_t arrivals = 0;
  int64_t failed = 0;
  Curve alloc_pct;        // allocated milli-GPU, % of capacity
  Curve frag_amount_pct;  // fragmented idle GPU, % of capacity
  Curve frag_ratio_pct;   // fragmented idle GPU, % of idle GPU
  double elapsed_ms = 0;  // scheduling and measurement, trace loading excluded
  IdleAtEnd idle;
};

// Runs the experiment on `nodes` with the pods of `pods` arriving in `order` (indexes into pods).
// Typical tasks for fragmentation come from the whole pod list, as in the paper
// (config.typical_coverage_pct).
Result<FgdResult> RunFgdExperiment(const std::vector<Node>& nodes,
                                   const std::vector<TracePod>& pods,
                                   const std::vector<int>& order, const FgdRunConfig& config);

// The FGD protocol's arrival order for a seed: pods sorted by name, shuffled, then inflated with
// copies drawn with replacement until total requested GPU would exceed 130 % of capacity (or
// deflated by random removals when it already does). Our own generator, not Go's.
std::vector<int> MakeArrivalOrder(const std::vector<TracePod>& pods, int64_t capacity_milli,
                                  uint64_t seed);

}  // namespace gpupool::sim
