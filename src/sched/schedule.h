// ScheduleOnce: one scheduling pass over a queue. Filter → score → reserve the exact GPUs / MIG
// slot → gang permit (all members or none) → preemption (the cheapest set of lower-priority
// victims by the work they would lose, with the reason) → moves (snapshot-able tasks moved to
// other nodes to make room, when enabled). The same function serves the server's loop and the
// simulator.
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
  Placement placement;  // placement.mig->action kRepartition: a proposed re-partition
  std::vector<std::string> preempted;  // victims that must be stopped before this task starts
  std::vector<std::string> moved;      // tasks of the plan's `moves` that must have left its node
                                       // (snapshotted and stopped) before this task starts
};

struct Preemption {
  std::string victim_id;
  std::string for_task;
  // "p0 (priority 0) preempted by t9 (priority 10) to fit on node-3", then what it loses when the
  // state knows (WorkState): "; 340 GPU-s of work since its last snapshot", or "; snapshotted
  // first: 4 GPU-s to snapshot and restore".
  std::string reason;
};

// A running task moved to make room for a waiting one (ScheduleOptions::allow_moves): the control
// plane snapshots it, stops it on `from_node` and resumes it from that snapshot at `to`, which the
// plan reserves; the task it makes room for starts once every move for it has left.
struct Move {
  std::string task_id;
  int from_node = -1;
  Placement to;  // where it resumes: node and GPUs
  std::string for_task;
  // "t4 moved from node-3 to node-7 to make room for t9; 6 GPU-s to snapshot and restore"
  std::string reason;
};

struct PendingTask {
  std::string task_id;
  std::string reason;                              // one line for people
  std::vector<std::pair<std::string, int>> nodes;  // (why a node rejected it, how many nodes)
};

struct Plan {
  std::vector<Assignment> assignments;
  std::vector<Preemption> preemptions;
  std::vector<Move> moves;
  std::vector<PendingTask> pending;
};

struct ScheduleOptions {
  bool allow_preemption = true;
  // The current time, ms on the clock of the bindings' WorkState: what a victim's unsaved work is
  // measured to. 0 when the caller gives none: then no victim counts as losing unsaved work.
  int64_t now_ms = 0;
  // Move instead of kill: a task (not a gang member) that fits nowhere, even by preemption, may
  // take a node once some of its tasks move elsewhere. Only tasks snapshotted on stop
  // (WorkState::snapshot_on_stop), not in a gang and of priority at most the waiting task's may
  // move, each to a node where it fits now (not the node it leaves); the cheapest set is chosen:
  // the least GPU time spent on their snapshots and restores (Σ GPU milli × snapshot_restore_ms),
  // then the fewest tasks, then the least GPU, then the lowest node.
  bool allow_moves = false;
  // With allow_moves, tasks of a higher priority than the waiting task's may move too: a move
  // costs a task its snapshot and restore, not its work, so the rule that guards preemption need
  // not guard it.
  bool move_any_priority = false;
};

// Decides placements for `queue` in order against `state`, and reserves each one in `state` as
// it goes (victims of preemption are released from it, moved tasks bound at their destination),
// so that on return `state` is the cluster as the plan leaves it. Pass a copy to keep the
// original. Deterministic for a given policy state.
Plan ScheduleOnce(ClusterState& state, std::span<const QueuedTask> queue, Policy& policy,
                  const ScheduleOptions& options = {});

}  // namespace gpupool::sched
