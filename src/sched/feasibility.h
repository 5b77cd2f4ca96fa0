// Filter stage: whether a task fits a node at all, and if not, why (one counted reason per node,
// so a pending task can say "312 nodes: no GPU with 470 milli free; 9: wrong GPU model").
#pragma once

#include <array>
#include <string>
#include <vector>

#include "core/task.h"
#include "sched/cluster_state.h"

namespace gpupool::sched {

enum class Reject : uint8_t {
  kNone = 0,     // fits
  kCordoned,
  kNoGpu,        // the node has no GPU at all
  kWrongModel,   // none of its GPUs is an allowed model
  kCpu,
  kMemory,
  kGpuShare,     // no single GPU with enough milli (and memory) free
  kWholeGpus,    // fewer fully free GPUs than asked
  kMig,          // no MIG-capable GPU with room for the profile, even by re-partitioning
  kCount,
};

// Per-request facts computed once and reused for every node.
struct RequestView {
  const TaskRequest* request = nullptr;
  GpuForm form = GpuForm::kNone;
  std::vector<bool> model_allowed;  // by ClusterState model id; empty: any model

  RequestView(const ClusterState& state, const TaskRequest& r);
  bool ModelAllowed(int model_id) const {
    return model_allowed.empty() ||
           (model_id >= 0 && model_id < static_cast<int>(model_allowed.size()) &&
            model_allowed[static_cast<size_t>(model_id)]);
  }
  bool GpuUsable(const ClusterState& state, const Gpu& g) const;
};

// Whether `view`'s task fits node `n` now (kNone) or the first reason it does not.
Reject CheckNode(const ClusterState& state, int n, const RequestView& view);

// Counts of rejections by reason, and their human summary for one request.
struct RejectCounts {
  std::array<int, static_cast<size_t>(Reject::kCount)> counts{};
  void Add(Reject r) { ++counts[static_cast<size_t>(r)]; }
  // "312 nodes: no GPU with 470 milli free; 9 nodes: wrong GPU model", most frequent first.
  std::string Summary(const TaskRequest& r) const;
  // (reason text, node count) pairs, most frequent first.
  std::vector<std::pair<std::string, int>> Reasons(const TaskRequest& r) const;
};

std::string RejectText(Reject reason, const TaskRequest& r);

}  // namespace gpupool::sched
