// The fragmentation change of each way to place a task on a node, shared by the
// fragmentation-aware policies (`fgd`, `fgd-plan`), and a per-node cache of their results.
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

// Remembers a policy's per-node result (a Value) per request shape while the node is unchanged,
// so that a decision recomputes only the nodes changed since the last request of the same shape
// instead of the fragmentation of every node. A hit returns exactly what recomputing would.
//
// Keys: the ClusterState object (InstanceId; another state, or a change of its GPU model table,
// empties the cache), the request's shape (everything of the request that FragOptions reads:
// form, CPU, share, GPU count, GPU memory, allowed models; MIG requests are not cached) and the
// node's NodeVersion. At most kMaxShapes shapes are kept, the least recently used one goes first
// (openb's `default` trace has 91 request shapes; most of its tasks are of its 30 most frequent).
// ShapeSlots keeps the shape → slot table; NodeCache adds one column of entries per slot.
class ShapeSlots {
 public:
  static constexpr int kMaxShapes = 64;

 protected:
  // The request's slot and whether the slot was (re)assigned to it, so that its column must be
  // emptied; -1 for requests that are not cached. `reset` is set when the whole cache must be
  // emptied (another state).
  int Assign(const ClusterState& state, const RequestView& r, bool& fresh, bool& reset);

 private:
  // (form, cpu_milli, gpu_milli, gpu_count, gpu_mem_mib, gpu_models)
  using ShapeKey = std::tuple<int, int64_t, int32_t, int, int64_t, std::vector<std::string>>;

  uint64_t instance_ = 0;  // InstanceId of the state the entries belong to; 0: none
  int model_count_ = 0;
  uint64_t tick_ = 0;                // counts Assign() calls, for least-recently-used
  std::map<ShapeKey, int> slot_of_;  // shape → slot
  std::vector<ShapeKey> shape_of_;   // slot → shape
  std::vector<uint64_t> last_used_;  // slot → tick of its last use
};

template <typename Value>
class NodeCache : public ShapeSlots {
 public:
  // Prepares a lookup for request `r` on `state`: the request's shape slot, or -1 when the
  // request is not cached.
  int Slot(const ClusterState& state, const RequestView& r) {
    bool fresh = false;
    bool reset = false;
    const int slot = Assign(state, r, fresh, reset);
    if (reset) columns_.clear();
    if (slot < 0) return slot;
    if (columns_.size() <= static_cast<size_t>(slot)) columns_.resize(static_cast<size_t>(slot) + 1);
    std::vector<Entry>& column = columns_[static_cast<size_t>(slot)];
    if (fresh) std::fill(column.begin(), column.end(), Entry{});
    if (column.size() < static_cast<size_t>(state.NodeCount())) {
      column.resize(static_cast<size_t>(state.NodeCount()));
    }
    return slot;
  }

  // compute() — the policy's Value for `node` — or the one remembered from when the node last
  // had this version; `slot` from Slot() on the same state (-1: always compute). The reference
  // is valid until the next Get.
  template <typename Compute>
  const Value& Get(const ClusterState& state, int slot, int node, Compute&& compute) {
    if (slot < 0) {
      uncached_ = compute();
      return uncached_;
    }
    Entry& e = columns_[static_cast<size_t>(slot)][static_cast<size_t>(node)];
    const uint64_t version = state.NodeVersion(node);
    if (e.version != version) e = {version, compute()};
    return e.value;
  }

 private:
  struct Entry {
    uint64_t version = 0;  // NodeVersion the value was computed at; 0: empty (versions start at 1)
    Value value{};
  };
  std::vector<std::vector<Entry>> columns_;  // slot → entry per node
  Value uncached_{};                         // the last value of an uncached request
};

// A policy whose node score and GPU choice both come from Pick(), given the request's cache slot
// (prepared once per decision by Slot()): `fgd` and `fgd-plan`.
class PickPolicy : public Policy {
 public:
  using Policy::Policy;

  int64_t Score(const ClusterState& state, int node, const RequestView& r) override {
    return Pick(state, node, r, Slot(state, r)).first;
  }
  void ScoreNodes(const ClusterState& state, std::span<const int> nodes, const RequestView& r,
                  std::span<int64_t> out) override {
    const int slot = Slot(state, r);
    for (size_t i = 0; i < nodes.size(); ++i) out[i] = Pick(state, nodes[i], r, slot).first;
  }
  // The default placement, with a share on the GPU Pick() chose.
  Placement ChooseGpus(const ClusterState& state, int node, const RequestView& r) override;

 protected:
  // The request's slot in the policy's NodeCache (-1: not cached).
  virtual int Slot(const ClusterState& state, const RequestView& r) = 0;
  // (score, GPU) of placing `r` on `node`: the GPU a share takes, -1 otherwise.
  virtual std::pair<int64_t, int> Pick(const ClusterState& state, int node, const RequestView& r,
                                       int slot) = 0;
};

// A PickPolicy whose (score, GPU) per node comes from Best(), cached per node and request shape in
// a NodeCache (`fgd`). MIG requests are not cached.
class CachedBestPolicy : public PickPolicy {
 public:
  using PickPolicy::PickPolicy;

 protected:
  // (score, GPU) of placing `r` on `node`, computed afresh.
  virtual std::pair<int64_t, int> Best(const ClusterState& state, int node,
                                       const RequestView& r) = 0;

 private:
  int Slot(const ClusterState& state, const RequestView& r) final { return cache_.Slot(state, r); }
  std::pair<int64_t, int> Pick(const ClusterState& state, int node, const RequestView& r,
                               int slot) final {
    return cache_.Get(state, slot, node, [&] { return Best(state, node, r); });
  }

  NodeCache<std::pair<int64_t, int>> cache_;
};

}  // namespace gpupool::sched::policies
