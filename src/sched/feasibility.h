// Filter stage: whether a task fits a node at all, and if not, why (one counted reason per node,
// so a pending task can say "312 nodes: no GPU with 470 milli free; 9: wrong GPU model").
#pragma once

#include <array>
#include <span>
#include <string>
#include <vector>

#include "core/task.h"
#include "sched/cluster_state.h"

namespace gpupool::sched {

enum class Reject : uint8_t {
  kNone = 0,  // fits
  kCordoned,
  kNoDocker,      // a task with an image; the node's docker runtime does not work
  kNoGpu,         // the node has no GPU at all
  kWrongModel,    // none of its GPUs is an allowed model
  kNoDockerGpus,  // an image with GPUs; the node's docker cannot give them (no NVIDIA runtime)
  kCpu,
  kMemory,
  kDisk,             // less disk free than the task's disk_gib
  kGpuShare,         // no single GPU with enough milli (and memory) free
  kWholeGpus,        // fewer fully free GPUs than asked
  kMig,              // no MIG-capable GPU with room for the profile, even by re-partitioning
  kOtherNode,        // the task runs on one node only (TaskRequest::node), not this one
  kNoSharedStorage,  // a task with a shared volume; the node has no shared storage
  kCount,
};

// Per-request facts computed once and reused for every node.
struct RequestView {
  const TaskRequest* request = nullptr;
  GpuForm form = GpuForm::kNone;
  std::vector<bool> model_allowed;  // by ClusterState model id; empty: any model
  // The one node the task may run on (TaskRequest::node; -1 when that node is not in the
  // cluster), or kAnyNode.
  static constexpr int kAnyNode = -2;
  int only_node = kAnyNode;
  // TaskRequest::prefer_nodes that are in the cluster, ascending.
  std::vector<int> preferred;

  RequestView(const ClusterState& state, const TaskRequest& r);
  bool ModelAllowed(int model_id) const {
    return model_allowed.empty() ||
           (model_id >= 0 && model_id < static_cast<int>(model_allowed.size()) &&
            model_allowed[static_cast<size_t>(model_id)]);
  }
  bool GpuUsable(const ClusterState& state, const Gpu& g) const;
};

// Whether `view`'s task fits node `n` now (kNone) or the first reason it does not, reading every
// GPU where the summary cannot decide.
Reject CheckNodeFull(const ClusterState& state, int n, const RequestView& view);

// Same answer as CheckNodeFull. Inline because a decision calls it once per node of the cluster:
// the common cases (no model constraint, a node whose summary decides) read only the node's
// NodeSummary; every other case goes to CheckNodeFull, which repeats these checks in this order.
inline Reject CheckNode(const ClusterState& state, int n, const RequestView& view) {
  const NodeSummary& sum = state.summary(n);
  const TaskRequest& r = *view.request;
  if (!sum.schedulable) return Reject::kCordoned;
  if (view.only_node != RequestView::kAnyNode && view.only_node != n) return Reject::kOtherNode;
  if (r.shared_storage && !sum.shared_storage) return Reject::kNoSharedStorage;
  if (r.image && !sum.docker) return Reject::kNoDocker;
  if (view.form != GpuForm::kNone) {
    if (sum.gpu_count == 0) return Reject::kNoGpu;
    if (!view.model_allowed.empty()) return CheckNodeFull(state, n, view);
    if (r.image && !sum.docker_gpus) return Reject::kNoDockerGpus;
  }
  if (sum.cpu_free_milli < r.cpu_milli) return Reject::kCpu;
  if (sum.memory_free_mib < r.memory_mib) return Reject::kMemory;
  if (sum.disk_free_gib < r.disk_gib) return Reject::kDisk;
  switch (view.form) {
    case GpuForm::kNone:
      return Reject::kNone;
    case GpuForm::kShare:
      if (sum.max_gpu_left < r.gpu_milli) return Reject::kGpuShare;
      if (sum.uniform && r.gpu_mem_mib == 0) return Reject::kNone;
      break;
    case GpuForm::kWhole:
      if (sum.free_gpus < r.gpu_count) return Reject::kWholeGpus;
      if (sum.uniform) return Reject::kNone;
      break;
    case GpuForm::kMig:
      break;
  }
  return CheckNodeFull(state, n, view);
}

// The filter of one request as thresholds on NodeSummary fields, for a scan over many nodes.
// Applies to requests without a model constraint that are not MIG (usable()); Fits(n) then equals
// CheckNode(n) == kNone. The summary test is branch-free: on a large cluster whether a node fits is
// close to a coin toss, and a branch per condition costs more in mispredictions than the test.
// A node that passes it but that the summary cannot decide (a GPU memory request, a non-uniform
// node) is confirmed by CheckNodeFull. Every summary rejection is one CheckNodeFull makes too.
class SummaryFilter {
 public:
  explicit SummaryFilter(const RequestView& view) {
    const TaskRequest& r = *view.request;
    // A task held to one node or to shared storage is rare: CheckNode decides for it.
    usable_ = view.model_allowed.empty() && view.form != GpuForm::kMig &&
              view.only_node == RequestView::kAnyNode && !r.shared_storage;
    cpu_milli_ = r.cpu_milli;
    memory_mib_ = r.memory_mib;
    disk_gib_ = r.disk_gib;
    image_ = r.image;
    image_gpus_ = r.image && view.form != GpuForm::kNone;
    // No test of gpu_count > 0 (CheckNode's kNoGpu): a share needs max_gpu_left ≥ gpu_milli ≥ 1
    // and whole GPUs need free_gpus ≥ gpu_count ≥ 1, which a node without GPUs never passes.
    if (view.form == GpuForm::kShare) {
      min_max_left_ = r.gpu_milli;
      // Only the GPUs' own memory can tell a memory request; else a non-uniform node's list.
      confirm_[0] = true;
      confirm_[1] = r.gpu_mem_mib > 0;
    } else if (view.form == GpuForm::kWhole) {
      min_free_gpus_ = r.gpu_count;
      confirm_[0] = true;  // a non-uniform node: its GPU list decides
    }
  }

  bool usable() const { return usable_; }

  bool Fits(const ClusterState& state, int n, const RequestView& view) const {
    const NodeSummary& s = state.summary(n);
    // `&` instead of `&&`: every operand is cheap and evaluating all of them avoids branches.
    bool ok = s.schedulable & (s.cpu_free_milli >= cpu_milli_) &
              (s.memory_free_mib >= memory_mib_) & (s.max_gpu_left >= min_max_left_) &
              (s.free_gpus >= min_free_gpus_) & (s.disk_free_gib >= disk_gib_) &
              (s.docker | !image_) & (s.docker_gpus | !image_gpus_);
    if (ok & confirm_[s.uniform]) [[unlikely]] {
      ok = CheckNodeFull(state, n, view) == Reject::kNone;
    }
    return ok;
  }

  // Writes to `out` the nodes of the cluster that fit, ascending; returns how many. `out` has room
  // for every node that may host the request's form (NodeCount() for a CPU-only task, the nodes
  // with GPUs for the others). A share or whole-GPU request visits only the nodes of its
  // free-capacity bitset (ClusterState::ShareBits, FreeGpuBits), a superset of those that fit.
  // Out of line so that the loop keeps its few variables in registers.
  size_t FilterAll(const ClusterState& state, const RequestView& view, int* out) const;

 private:
  bool usable_ = false;
  int64_t cpu_milli_ = 0;
  int64_t memory_mib_ = 0;
  int64_t disk_gib_ = 0;
  bool image_ = false;                // needs docker
  bool image_gpus_ = false;           // needs docker that can give GPUs
  int32_t min_max_left_ = 0;          // a share: one GPU with this much milli left
  int32_t min_free_gpus_ = 0;         // whole GPUs: this many fully free
  bool confirm_[2] = {false, false};  // by NodeSummary::uniform: a pass needs CheckNodeFull
};

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
