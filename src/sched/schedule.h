// ScheduleOnce: one scheduling pass over a queue. Filter → score → reserve the exact GPUs / MIG
// slot → gang permit (all members or none) → preemption (the cheapest set of lower-priority
// victims, with the reason). The same function serves the server's loop and the simulator.
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/task.h"
#include "sched/cluster_state.h"
#include "sched/policy.h"

namespace gpupool::sched {

struct QueuedTask {
  std::string id;
  TaskRequest request;
};

struct Assignment {
  std::string task_id;
  Placement placement;                // placement.mig->action kRepartition: a proposed re-partition
  std::vector<std::string> preempted;  // victims that must be stopped before this task starts
};

struct Preemption {
  std::string victim_id;
  std::string for_task;
  std::string reason;  // "preempted by t9 (priority 10 > 0) to fit on node-3"
};

struct PendingTask {
  std::string task_id;
  std::string reason;                              // one line for people
  std::vector<std::pair<std::string, int>> nodes;  // (why a node rejected it, how many nodes)
};

struct Plan {
  std::vector<Assignment> assignments;
  std::vector<Preemption> preemptions;
  std::vector<PendingTask> pending;
};

struct ScheduleOptions {
  bool allow_preemption = true;
};

// Decides placements for `queue` in order against `state`, and reserves each one in `state` as
// it goes (victims of preemption are released from it), so that on return `state` is the cluster
// as the plan leaves it. Pass a copy to keep the original. Deterministic for a given policy state.
Plan ScheduleOnce(ClusterState& state, std::span<const QueuedTask> queue, Policy& policy,
                  const ScheduleOptions& options = {});

}  // namespace gpupool::sched
