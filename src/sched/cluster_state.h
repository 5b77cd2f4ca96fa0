// ClusterState: the nodes the scheduler places onto, the tasks bound to them, and the indexes
// that keep a decision from scanning every node. Pure data structure: no I/O, no clock.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/mig.h"
#include "core/node.h"
#include "core/result.h"
#include "core/task.h"

namespace gpupool::sched {

// Where a task goes on a node: the exact GPUs (and MIG slot) it gets.
struct Placement {
  int node = -1;
  std::vector<int> gpus;            // GPU indexes on the node (whole: k of them; share/MIG: one)
  int32_t milli_per_gpu = 0;        // compute share taken on each GPU in `gpus`
  int64_t gpu_mem_mib = 0;          // GPU memory reserved on each GPU (shares)
  std::optional<MigPlacement> mig;  // MIG requests: how the instance is obtained

  friend bool operator==(const Placement&, const Placement&) = default;
};

// What the filter and the cheap scores read of a node, kept compact and current so that a
// decision scans a small array instead of every node's GPU list.
struct NodeSummary {
  int64_t cpu_free_milli = 0;
  int64_t memory_free_mib = 0;
  int32_t gpu_milli_left = 0;  // Σ milli left on GPUs not in MIG mode
  int32_t max_gpu_left = 0;    // largest milli left on one GPU not in MIG mode
  int16_t free_gpus = 0;       // GPUs fully free and not in MIG mode
  int16_t gpu_count = 0;
  int64_t disk_free_gib = 0;  // Node::disk_free_gib; INT64_MAX when the node reports no disk
  bool schedulable = true;
  bool docker = false;  // Node::docker, docker_gpus
  bool docker_gpus = false;
  bool shared_storage = false;  // Node::shared_storage
  bool uniform = true;  // all GPUs of one model, none in MIG mode, no memory reserved:
                        // the summary alone decides share / whole-GPU feasibility

  friend bool operator==(const NodeSummary&, const NodeSummary&) = default;
};

// What stopping a bound task would cost its work (issue 15: snapshots), as the control plane
// knows it from the task's snapshots and the replay from its snapshot model. Times are ms on the
// clock of ScheduleOptions::now_ms. The defaults say that nothing is known: a task without this
// information loses nothing as far as the scheduler can tell, so a state where no binding has it
// preempts exactly as before snapshots existed, and none of its tasks may be moved.
struct WorkState {
  // Since when the task's work is unsaved: its latest snapshot, else the start of its current
  // run (a resumed run starts from its snapshot). 0: unknown, counted as now (nothing to lose).
  int64_t unsaved_since_ms = 0;
  // The task is snapshotted every this many ms counted from unsaved_since_ms (0: not
  // periodically): only the work since the latest of those snapshots is unsaved. Lets a caller
  // that knows the period skip updating unsaved_since_ms at every periodic snapshot.
  int64_t snapshot_every_ms = 0;
  // The task is snapshotted before it is stopped (it has a workspace to save and its node takes
  // snapshots): stopping it then loses none of its work but the time its GPUs spend on the
  // snapshot and the restore where it resumes, `snapshot_restore_ms`. Such a task may also be
  // moved (ScheduleOptions::allow_moves) when it is not a gang member.
  bool snapshot_on_stop = false;
  int64_t snapshot_restore_ms = 0;  // the expected snapshot + restore time of the task
};

// Milliseconds of the task's running time that stopping it at `now_ms` costs: the snapshot and
// restore time when it is snapshotted on stop, else the time since its latest snapshot (periodic
// ones included), else 0 when unknown.
int64_t WorkLostMs(const WorkState& work, int64_t now_ms);

// A task bound to a node.
struct Binding {
  std::string task_id;
  TaskRequest request;
  Placement placement;  // a MIG task's instance is the one at placement.mig->start
  WorkState work;       // what stopping it costs (ClusterState::SetWork)
};

// A number that names one ClusterState object among all made in the process: drawn anew when a
// state is constructed or copied (a moved-to state takes the source's number, the source gets a
// new one). With it, (instance, node, NodeVersion) always names one node content, even when two
// copies of a state diverge with the same versions, so that a policy may keep per-node caches
// across passes. The numbers never influence a decision.
class InstanceTag {
 public:
  InstanceTag() : id_(Next()) {}
  InstanceTag(const InstanceTag&) : id_(Next()) {}
  InstanceTag(InstanceTag&& other) noexcept : id_(other.id_) { other.id_ = Next(); }
  InstanceTag& operator=(const InstanceTag& other) {
    if (this != &other) id_ = Next();
    return *this;
  }
  InstanceTag& operator=(InstanceTag&& other) noexcept {
    if (this != &other) {
      id_ = other.id_;
      other.id_ = Next();
    }
    return *this;
  }
  uint64_t id() const { return id_; }

 private:
  static uint64_t Next();  // a process-wide counter (atomic: states may live on several threads)
  uint64_t id_;
};

// Takes (sign +1) or gives back (sign −1) on `node` the CPU, memory, GPU share and MIG instance
// that `b` holds; returns the milli-GPU the binding counts for. ClusterState's bookkeeping and the
// preemption search's what-if on a node copy both use it.
int64_t ApplyToNode(Node& node, const Binding& b, int sign);

// The milli-GPU `b` counts for on `node` (the node it is bound to): 1000 per whole GPU, its
// share, or its MIG instance's compute fraction of the GPU's model (MigMilli). What ApplyToNode
// returns, and the weight of a task's time in the preemption and move costs of ScheduleOnce.
int64_t BindingGpuMilli(const Node& node, const Binding& b);

class ClusterState {
 public:
  ClusterState() = default;
  explicit ClusterState(std::vector<Node> nodes);

  // Adds a node (all of its resources as given; nothing bound). Returns its index.
  int AddNode(Node node);
  // Replaces a node's cordon flag.
  void SetSchedulable(int node, bool schedulable);
  // Takes what a known node's agent reports on registering again: its CPU and memory, its GPUs,
  // its workspaces' disk, its docker runtime and its SSH host key (`reported`'s cpu_milli,
  // memory_mib, gpus, disk_gib, docker, docker_gpus, runtime_note, ssh_host_key). What its bound
  // tasks reserve stays reserved. CPU or memory below what they hold is refused, and so is another
  // GPU list (count, models, memory, uuids) while a task is bound: kFailedPrecondition, nothing
  // changed. An idle node takes the new GPU list whole. Disk is a measurement: less than the
  // tasks reserve leaves none free.
  Status UpdateNode(int node, const Node& reported);

  int NodeCount() const { return static_cast<int>(nodes_.size()); }
  const Node& node(int i) const { return nodes_[static_cast<size_t>(i)]; }
  std::span<const Node> nodes() const { return nodes_; }
  // Index of the node named `name`, or -1.
  int FindNode(const std::string& name) const;

  const NodeSummary& summary(int i) const { return summaries_[static_cast<size_t>(i)]; }

  // The state's change number when node i last changed: every change to a node (adding it
  // included) draws the next number of one counter per state, ChangeSeq(), so versions only grow
  // and NodeVersion(i) > s says that node i changed after change s. Lets policies cache per-node
  // work (with InstanceId: the versions of two states, or of a state and its copy, are not
  // comparable).
  uint64_t NodeVersion(int i) const { return versions_[static_cast<size_t>(i)]; }
  // The number of the latest change (0: none yet).
  uint64_t ChangeSeq() const { return change_seq_; }
  // The nodes that changed after change `seq` (NodeVersion > seq), ascending. Costs what changed,
  // not the node count: a journal of changes, compacted as it grows, remembers them.
  std::vector<int> NodesChangedSince(uint64_t seq) const;
  // Makes this state's content — nodes, bindings, shares, indexes and totals, not its versions or
  // InstanceId — equal to `source`'s, copying only `nodes` (ascending; those past NodeCount() are
  // added, in order). Precondition: every other node of this state is as in `source`, and this
  // state's nodes were added in the order `source`'s were (ClusterSnapshot ensures both). The
  // copied nodes get new versions of this state.
  void CopyNodesFrom(const ClusterState& source, std::span<const int> nodes);
  // Names this state object (see InstanceTag).
  uint64_t InstanceId() const { return instance_.id(); }

  // Small integer id of a GPU model name (interned on first use); -1 for a node without GPUs.
  int ModelId(const std::string& model) const;
  // Model id of the node's first GPU (-1 without GPUs).
  int NodeModelId(int node) const { return node_model_[static_cast<size_t>(node)]; }
  int ModelCount() const { return static_cast<int>(model_names_.size()); }
  const std::string& ModelName(int id) const { return model_names_[static_cast<size_t>(id)]; }
  // Nodes holding at least one GPU of model `id`, ascending.
  std::span<const int> NodesOfModel(int id) const { return by_model_[static_cast<size_t>(id)]; }
  // 0, 1, …, NodeCount() − 1: lets a scan over every node share the code of the index scans.
  std::span<const int> AllNodes() const { return all_nodes_; }
  std::span<const int> NodesWithoutGpus() const { return no_gpu_nodes_; }
  std::span<const int> NodesWithGpus() const { return gpu_nodes_; }

  // Free-capacity indexes, as bitsets over node indexes (bit n % 64 of word n / 64), so that a
  // GPU request visits only the nodes that may have room for it, in index order:
  //   FreeGpuBits(k):     nodes with at least k fully free GPUs (summary free_gpus ≥ k);
  //   ShareBits(milli):   nodes with a GPU of at least max(1, ⌊milli/100⌋·100) milli left
  //                       (summary max_gpu_left), a superset of those with one of `milli` ≥ 1.
  // k is clamped to 1..8 and milli to 1..1000, which only makes the bitsets larger.
  static constexpr int kShareBitsStep = 100;
  std::span<const uint64_t> FreeGpuBits(int k) const {
    return free_gpu_bits_[static_cast<size_t>(std::clamp(k, 1, kMaxGpusPerTask) - 1)];
  }
  std::span<const uint64_t> ShareBits(int32_t milli) const {
    return share_bits_[static_cast<size_t>(
        std::clamp(milli / kShareBitsStep, 0, kMilliPerGpu / kShareBitsStep))];
  }

  // Reserves the resources of `placement` for `task_id`, with what stopping it would cost
  // (`work`; default: unknown). Fails (no change) when the task is already bound or the placement
  // does not fit the node's current free resources.
  Status Bind(const std::string& task_id, const TaskRequest& request, const Placement& placement,
              const WorkState& work = {});
  // Replaces what stopping bound task `task_id` would cost (a snapshot taken, a run resumed).
  // The node counts as changed (a new NodeVersion), so that a ClusterSnapshot's refresh copies
  // it. kNotFound when the task is not bound.
  Status SetWork(const std::string& task_id, const WorkState& work);
  // Releases everything `task_id` holds; its MIG instance stays, unused.
  Status Unbind(const std::string& task_id);
  // Puts GPU `gpu` of `node` into the given MIG mode and layout (to undo a tentative
  // re-partition, or to take the layout an agent reports). Refused when an instance in use now
  // would be dropped or no longer in use.
  Status SetMigLayout(int node, int gpu, bool mig_enabled, std::vector<MigInstance> instances);
  const Binding* FindBinding(const std::string& task_id) const;
  // Ids of the tasks bound to `node`, in bind order.
  const std::vector<std::string>& TasksOn(int node) const {
    return tasks_on_[static_cast<size_t>(node)];
  }

  // Milli of each share (a fractional task's part of one GPU) bound to GPU `gpu` of `node`,
  // largest first.
  std::span<const int32_t> GpuShares(int node, int gpu) const {
    return gpu_shares_[static_cast<size_t>(node)][static_cast<size_t>(gpu)];
  }
  // Model id of GPU `gpu` of `node`.
  int GpuModelId(int node, int gpu) const {
    return gpu_model_[static_cast<size_t>(node)][static_cast<size_t>(gpu)];
  }
  // How many GPUs of model `model` (not in MIG mode) have exactly `left` milli free, for a partly
  // used GPU (0 < left < 1000); 0 for any other `left`.
  int64_t PartialGpuCount(int model, int32_t left) const {
    if (left <= 0 || left >= kMilliPerGpu || model < 0 ||
        static_cast<size_t>(model) >= partial_counts_.size()) {
      return 0;
    }
    return partial_counts_[static_cast<size_t>(model)][static_cast<size_t>(left)];
  }

  // Cluster totals in milli-GPU (whole GPUs; MIG-mode GPUs count by bound instances' slices).
  int64_t TotalGpuMilli() const { return total_gpu_milli_; }
  int64_t AllocatedGpuMilli() const { return allocated_gpu_milli_; }

  // Whether `placement` fits node's current free resources; the error says what is short.
  Status CheckPlacement(const TaskRequest& request, const Placement& placement) const;

 private:
  int InternModel(const std::string& model);
  // Enter node's GPUs in the model index, the lists of nodes with and without GPUs, the per-GPU
  // tables and the totals; and take them out again (before its GPU list is replaced).
  void IndexGpus(int node);
  void UnindexGpus(int node);
  void Touch(int node);  // bumps the version and recomputes the summary
  // Adds (reserve) or gives back the resources of `b` and updates the per-node task list.
  void Account(const Binding& b, bool reserve);

  InstanceTag instance_;
  std::vector<Node> nodes_;
  std::vector<uint64_t> versions_;
  uint64_t change_seq_ = 0;
  // (change number, node) of each Touch, in change order; an entry whose number is not its node's
  // version any more is dropped when the journal outgrows twice the node count.
  std::vector<std::pair<uint64_t, int>> journal_;
  std::vector<NodeSummary> summaries_;
  std::vector<int> node_model_;
  std::vector<std::string> model_names_;
  std::vector<std::vector<int>> by_model_;
  std::vector<int> all_nodes_;
  std::vector<int> no_gpu_nodes_;
  std::vector<int> gpu_nodes_;
  std::unordered_map<std::string, int> node_by_name_;
  std::unordered_map<std::string, Binding> bindings_;
  std::vector<std::vector<std::string>> tasks_on_;
  // gpu_shares_[node][gpu]: see GpuShares.
  std::vector<std::vector<std::vector<int32_t>>> gpu_shares_;
  // gpu_model_[node][gpu]: the GPU's model id; counted_left_[node][gpu]: the milli left the GPU
  // is counted under in partial_counts_[model] (0 when not counted: full, free or MIG).
  std::vector<std::vector<int>> gpu_model_;
  std::vector<std::vector<int32_t>> counted_left_;
  std::vector<std::array<int32_t, kMilliPerGpu>> partial_counts_;
  std::array<std::vector<uint64_t>, kMaxGpusPerTask> free_gpu_bits_;
  // share_bits_[j]: max_gpu_left ≥ max(1, j·100), j = 0..10.
  std::array<std::vector<uint64_t>, kMilliPerGpu / kShareBitsStep + 1> share_bits_;
  int64_t total_gpu_milli_ = 0;
  int64_t allocated_gpu_milli_ = 0;
};

}  // namespace gpupool::sched
