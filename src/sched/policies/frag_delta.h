// The fragmentation change of each way to place a task on a node, shared by the
// fragmentation-aware policies (`fgd`, `fgd-capacity`), and a per-node cache of their results.
#pragma once

#include <climits>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "sched/fragmentation.h"
#include "sched/policy.h"

namespace gpupool::sched::policies {

struct FragOption {
  int gpu = -1;        // the GPU a share would take; -1 for whole-GPU and CPU-only tasks
  double delta = 0;    // frag before − frag after, in milli-GPU (positive: less fragmented)
  int32_t left = 0;    // milli left on `gpu` before the share (shares only)
  double capacity_delta = 0;  // the same for FragMeasure::kCapacity (when asked for)
};

// One option per distinct milli-left value among the GPUs a share fits (the lowest-index GPU of
// each value; GPUs with equal left give equal deltas); one option for whole-GPU and CPU-only tasks
// (the fully free GPUs they take are interchangeable). Empty for MIG requests. Capacity deltas
// are computed only `with_capacity`.
std::vector<FragOption> FragOptions(FragModel& model, const ClusterState& state, int node,
                                    const RequestView& r, bool with_capacity = false);

// FGD's score of a fragmentation change: ⌊100 · sigmoid(delta / 1000)⌋ (0..100).
int64_t FgdScore(double delta);

// Remembers a policy's (score, GPU) per node and request shape while the node is unchanged, so
// that a decision recomputes only the nodes changed since the last request of the same shape
// instead of the fragmentation of every node. A hit returns exactly what recomputing would.
//
// Keys: the ClusterState object (InstanceId; another state, or a change of its GPU model table,
// empties the cache), the request's shape (everything of the request that FragOptions reads:
// form, CPU, share, GPU count, GPU memory, allowed models; MIG requests are not cached) and the
// node's NodeVersion. At most kMaxShapes shapes are kept, the least recently used one goes first
// (openb's `default` trace has 91 request shapes; most of its tasks are of its 30 most frequent).
// Memory: 24 bytes × nodes × shapes in use, at most 1.5 KiB per node.
class NodeScoreCache {
 public:
  static constexpr int kMaxShapes = 64;

  struct Entry {
    uint64_t version = 0;  // NodeVersion the entry was computed at; 0: empty (versions start at 1)
    int64_t score = 0;
    int32_t gpu = -1;
  };

  // Prepares a lookup for request `r` on `state`: the request's shape slot, or -1 when the
  // request is not cached.
  int Slot(const ClusterState& state, const RequestView& r);

  // compute() — a policy's (score, GPU) for `node` — or the entry remembered from when the node
  // last had this version; `slot` from Slot() on the same state (-1: always compute).
  template <typename Compute>
  std::pair<int64_t, int> Get(const ClusterState& state, int slot, int node, Compute&& compute) {
    if (slot < 0) return compute();
    Entry& e = At(slot, node);
    const uint64_t version = state.NodeVersion(node);
    if (e.version == version) return {e.score, e.gpu};
    const std::pair<int64_t, int> best = compute();
    e = {version, best.first, best.second};
    return best;
  }

  // The entry of `node` in `slot` (from Slot() on the same state); valid only when its version is
  // the node's NodeVersion.
  Entry& At(int slot, int node) {
    return columns_[static_cast<size_t>(slot)][static_cast<size_t>(node)];
  }

 private:
  // (form, cpu_milli, gpu_milli, gpu_count, gpu_mem_mib, gpu_models)
  using ShapeKey = std::tuple<int, int64_t, int32_t, int, int64_t, std::vector<std::string>>;

  uint64_t instance_ = 0;  // InstanceId of the state the entries belong to; 0: none
  int model_count_ = 0;
  uint64_t tick_ = 0;                        // counts Slot() calls, for least-recently-used
  std::map<ShapeKey, int> slot_of_;          // shape → slot
  std::vector<ShapeKey> shape_of_;           // slot → shape
  std::vector<uint64_t> last_used_;          // slot → tick of its last use
  std::vector<std::vector<Entry>> columns_;  // slot → entry per node
};

// A policy whose node score and GPU choice both come from Best(), cached per node and request
// shape in a NodeScoreCache (`fgd`, `fgd-capacity`). MIG requests are not cached.
class CachedBestPolicy : public Policy {
 public:
  using Policy::Policy;

  int64_t Score(const ClusterState& state, int node, const RequestView& r) override {
    return CachedBest(state, node, r, cache_.Slot(state, r)).first;
  }
  void ScoreNodes(const ClusterState& state, std::span<const int> nodes, const RequestView& r,
                  std::span<int64_t> out) override {
    const int slot = cache_.Slot(state, r);
    for (size_t i = 0; i < nodes.size(); ++i) out[i] = CachedBest(state, nodes[i], r, slot).first;
  }
  // The default placement, with a share on the GPU Best() chose.
  Placement ChooseGpus(const ClusterState& state, int node, const RequestView& r) override;

 protected:
  // (score, GPU) of placing `r` on `node`: the GPU a share takes, -1 otherwise.
  virtual std::pair<int64_t, int> Best(const ClusterState& state, int node,
                                       const RequestView& r) = 0;

 private:
  std::pair<int64_t, int> CachedBest(const ClusterState& state, int node, const RequestView& r,
                                     int slot) {
    return cache_.Get(state, slot, node, [&] { return Best(state, node, r); });
  }

  NodeScoreCache cache_;
};

}  // namespace gpupool::sched::policies
