// Synthetic distributed jobs for the replay (`gpupool sim replay --jobs`): gangs of whole-GPU
// members added to a trace that has none (openb), and rack labels on the trace's nodes for their
// topology rules. Pure: no I/O, no clock, no random draws.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/node.h"
#include "core/result.h"
#include "core/task.h"
#include "sim/replay.h"

namespace gpupool::sim {

inline constexpr int64_t kMaxSyntheticJobs = 1000000;

// The synthetic jobs: how many, and what every member of each asks for and does.
struct JobMix {
  int64_t count = 0;            // jobs, 0..kMaxSyntheticJobs
  int members = 4;              // members per job (its gang_size), 2..kMaxGangSize
  int gpus = 8;                 // whole GPUs per member, 1..kMaxGpusPerTask
  int64_t cpu_milli = 0;        // per member
  int64_t memory_mib = 0;       // per member
  int64_t runtime_s = 1;        // of each run of the job (every member's), >= 1
  int priority = kMinPriority;  // kMinPriority..kMaxPriority
  int members_per_node = 1;     // at most this many members on one node; 0: any number
  std::string topology_label;   // the node label all members share; empty: none
  Topology topology = Topology::kPreferred;
};

// A member of a job of `gpus` whole GPUs as the trace has them: the medians (nearest rank,
// NearestRank p50) of the CPU, of the memory and of the runtime of the tasks that ask exactly
// `gpus` whole GPUs, each median taken alone; job members are left out.
struct JobShape {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t runtime_s = 0;
  int64_t tasks = 0;  // how many tasks the medians are over
};

// Error when no task asks `gpus` whole GPUs.
Result<JobShape> MedianWholeGpuShape(const std::vector<ReplayTask>& tasks, int gpus);

// The `mix.count` jobs to add to `tasks`. Job k (0-based) is gang "job-<k>", k zero-padded to
// the digits of count − 1, of members "job-<k>-<m>" (m = 0..members − 1), each with `mix`'s
// request, runtime and priority. It arrives at first + ⌊(2k + 1)·span / (2·count)⌋: the middle
// of the k-th of `count` equal slices of [first, first + span], where first is the earliest
// arrival of `tasks` and span the time from it to the latest (both 0 when `tasks` is empty).
// Members are listed job by job, in member order. Errors name the field of `mix` that is out of
// range, or a member name that a task of `tasks` has already.
Result<std::vector<ReplayTask>> SyntheticJobs(const std::vector<ReplayTask>& tasks,
                                              const JobMix& mix);

// Labels the nodes `label`=r0..r<racks − 1> in contiguous blocks of the list, as servers fill
// racks in order: node i of n is in rack ⌊i·racks / n⌋, so the racks' sizes differ by one at
// most. Replaces a label of that name. Error when racks is not 1..n.
Status LabelRacks(std::vector<Node>& nodes, int racks, const std::string& label = "rack");

}  // namespace gpupool::sim
