// The fragmentation change of each way to place a task on a node, shared by the
// fragmentation-aware policies (`fgd`, `frag-exact`).
#pragma once

#include <vector>

#include "sched/fragmentation.h"
#include "sched/policy.h"

namespace gpupool::sched::policies {

struct FragOption {
  int gpu = -1;        // the GPU a share would take; -1 for whole-GPU and CPU-only tasks
  double delta = 0;    // frag before − frag after, in milli-GPU (positive: less fragmented)
  int32_t left = 0;    // milli left on `gpu` before the share (shares only)
};

// One option per distinct milli-left value among the GPUs a share fits (the lowest-index GPU of
// each value; GPUs with equal left give equal deltas); one option for whole-GPU and CPU-only tasks
// (the fully free GPUs they take are interchangeable). Empty for MIG requests.
std::vector<FragOption> FragOptions(FragModel& model, const ClusterState& state, int node,
                                    const RequestView& r);

}  // namespace gpupool::sched::policies
