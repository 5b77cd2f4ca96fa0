// ClusterSnapshot: a scheduling pass's own view of a live ClusterState, kept up to date at the
// cost of what changed instead of a copy of the whole cluster per pass. Pure data structure.
#pragma once

#include <cstdint>

#include "sched/cluster_state.h"

namespace gpupool::sched {

// The state a pass plans on: Refresh() makes it equal to the live state as of the live state's
// ChangeSeq() at that moment (version()), and it sees none of the live state's later changes until
// the next Refresh. The pass may change it freely (ScheduleOnce reserves each placement in it):
// the next Refresh puts back what the pass changed along with what changed in the live state, by
// copying just those nodes (the live state's journal names them, and so does the snapshot's own).
// A pass thus costs the nodes it touched and the changes made meanwhile, not O(nodes + bindings),
// and the snapshot keeps its InstanceId, so that the policies' per-node caches stay warm from one
// pass to the next. A plan made on it is applied to the live state as before: Bind re-checks
// every placement there, so a node that changed after version() cannot be double-booked.
class ClusterSnapshot {
 public:
  // Brings the snapshot to `live`'s current content (read only; the caller holds whatever guards
  // `live`). The first refresh, or one from another live state, copies it whole. Returns the
  // number of nodes copied.
  int Refresh(const ClusterState& live);

  ClusterState& state() { return state_; }
  const ClusterState& state() const { return state_; }
  // The live state's ChangeSeq() at the last Refresh: the snapshot shows the live state's
  // changes up to it and none after (its nodes with NodeVersion > version() changed since).
  uint64_t version() const { return live_seq_; }

 private:
  ClusterState state_;
  uint64_t live_instance_ = 0;  // InstanceId of the live state refreshed from; 0: none yet
  uint64_t live_seq_ = 0;       // live.ChangeSeq() at the last Refresh
  uint64_t own_seq_ = 0;        // state_.ChangeSeq() right after the last Refresh
};

}  // namespace gpupool::sched
