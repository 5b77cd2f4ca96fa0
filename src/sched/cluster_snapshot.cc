// ClusterSnapshot::Refresh (see cluster_snapshot.h): copy the nodes either side changed.
#include "sched/cluster_snapshot.h"

#include <algorithm>
#include <iterator>
#include <vector>

namespace gpupool::sched {

int ClusterSnapshot::Refresh(const ClusterState& live) {
  int copied = 0;
  if (live.InstanceId() != live_instance_) {
    state_ = live;  // a new InstanceId: caches keyed on the old one are not reused
    live_instance_ = live.InstanceId();
    copied = live.NodeCount();
  } else {
    const std::vector<int> theirs = live.NodesChangedSince(live_seq_);
    const std::vector<int> ours = state_.NodesChangedSince(own_seq_);
    std::vector<int> nodes;
    nodes.reserve(theirs.size() + ours.size());
    std::set_union(theirs.begin(), theirs.end(), ours.begin(), ours.end(),
                   std::back_inserter(nodes));
    state_.CopyNodesFrom(live, nodes);
    copied = static_cast<int>(nodes.size());
  }
  live_seq_ = live.ChangeSeq();
  own_seq_ = state_.ChangeSeq();
  return copied;
}

}  // namespace gpupool::sched
