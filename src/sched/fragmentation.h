// GPU fragmentation as defined by the FGD paper (Weng et al., ATC'23) and its simulator
// (pkg/utils/frag.go): the idle GPU capacity of a node that the workload's typical tasks could not
// use there, weighted by how often each typical task occurs.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/task.h"
#include "sched/cluster_state.h"

namespace gpupool::sched {

// One request shape of the workload and its normalised frequency.
struct TypicalTask {
  int64_t cpu_milli = 0;
  int32_t milli_per_gpu = 0;        // 1..1000; 0 for CPU-only
  int gpu_count = 0;                // 1 for a share, k for k whole GPUs, 0 for CPU-only
  std::vector<std::string> models;  // allowed models; empty: any
  double weight = 0;                // frequency, normalised over the typical set (Σ = 1)
};

// The most frequent request shapes that together cover `coverage_pct` % of `workload`, with
// frequencies renormalised to sum to 1 (GetTypicalPods). A shape is (cpu_milli, milli per GPU,
// GPU count, allowed models); memory is not part of it. MIG requests are left out.
std::vector<TypicalTask> TypicalTasks(std::span<const TaskRequest> workload,
                                      double coverage_pct = 95.0);

// Fragment categories of one (node, typical task) pair, in the paper's order.
enum FragCategory { kQ1 = 0, kQ2, kQ3, kQ4, kXL, kXR, kNoAccess, kFragCategories };
using FragBins = std::array<double, kFragCategories>;

// Σ of all categories except Q3 (the part that typical tasks can use), in category order.
double FragAmount(const FragBins& bins);
// Σ of all categories (≈ the idle GPU milli).
double FragTotal(const FragBins& bins);

// Which measure FragModel::Amount computes.
enum class FragMeasure {
  // The FGD paper's: for a typical task that fits the node (one instance: enough GPU on as many
  // GPUs as it asks, enough CPU), the milli left on the GPUs too small for it; for one that does
  // not fit, all the node's idle GPU milli.
  kPaper,
  // Capacity-aware: the idle GPU milli that a typical task could not use even if it came again
  // and again. With s instances fitting the GPUs (Σ ⌊left/milli⌋ for a share, ⌊free GPUs/k⌋ for k
  // whole GPUs) and c fitting the CPU (⌊cpu_left/cpu⌋): when c < s it uses milli·k·c; otherwise a
  // share uses ⌊left/milli⌋·milli of each partly used GPU and all of each free one, and k whole
  // GPUs use 1000·k·s. The rest is fragment. It sees what the paper's measure does not: GPUs a
  // node cannot feed with CPU, and the remainders (1000 − 2·470 = 60) of a partly used GPU.
  kCapacity,
};

// Computes fragmentation against a fixed typical-task set, memoised by node state.
class FragModel {
 public:
  explicit FragModel(std::vector<TypicalTask> typical);

  // Fragment bins of a node of GPU model `model` (a ClusterState model name) with `cpu_left`
  // milli CPU and `gpu_left` milli left per GPU.
  FragBins Bins(const ClusterState& state, int model_id, int64_t cpu_left,
                std::span<const int32_t> gpu_left);
  // FragAmount(Bins(...)) for kPaper, the capacity-aware fragment for kCapacity; memoised on
  // (measure, model, cpu_left, multiset of gpu_left).
  double Amount(const ClusterState& state, int model_id, int64_t cpu_left,
                std::span<const int32_t> gpu_left, FragMeasure measure = FragMeasure::kPaper);
  // Of node `n` as it is now.
  FragBins NodeBins(const ClusterState& state, int n);
  double NodeAmount(const ClusterState& state, int n);

  const std::vector<TypicalTask>& typical() const { return typical_; }

 private:
  // Recomputes access_ when the state's model table changed (cheap check, inline: it runs on
  // every Amount).
  void SyncModels(const ClusterState& state) {
    if (synced_models_ != state.ModelCount() || access_.size() != typical_.size()) Resync(state);
  }
  void Resync(const ClusterState& state);
  double CapacityAmount(int model_id, int64_t cpu_left, std::span<const int32_t> gpu_left) const;

  std::vector<TypicalTask> typical_;
  // access_[t][model_id]: typical task t may use GPUs of that model.
  std::vector<std::vector<bool>> access_;
  int synced_models_ = 0;
  struct Key {
    uint64_t a, b;
    bool operator==(const Key&) const = default;
  };
  // The memo: an open-addressing hash table (linear probing, power-of-two size, at most half
  // full). A fragmentation-aware decision looks it up for every node and candidate GPU; a probe
  // of one flat array is several times cheaper than std::unordered_map's bucket, node and modulo
  // by a prime. A slot is in use when its key has kUsedBit (never set in a Key's b: b holds 55
  // bits).
  struct MemoSlot {
    Key key{0, 0};
    double value = 0;
  };
  static constexpr uint64_t kUsedBit = uint64_t{1} << 63;
  const double* MemoFind(const Key& key) const;
  void MemoInsert(const Key& key, double value);
  std::vector<MemoSlot> memo_;
  size_t memo_count_ = 0;
};

}  // namespace gpupool::sched
