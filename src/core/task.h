// What a task asks for: CPU, memory and exactly one GPU form (none, whole GPUs, a fractional
// share of one GPU, or a MIG profile), allowed GPU models, priority and gang membership.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/node.h"
#include "core/result.h"

namespace gpupool {

enum class GpuForm {
  kNone,   // CPU-only
  kWhole,  // gpu_count whole GPUs on one node
  kShare,  // gpu_milli of one GPU plus gpu_mem_mib of its memory reserved
  kMig,    // one MIG instance of profile mig_profile
};

inline constexpr int kMaxGpusPerTask = 8;
inline constexpr int kMinPriority = 0;
inline constexpr int kMaxPriority = 1000;
inline constexpr int kMaxGangSize = 4096;

// How a gang's members use a node label that names a network domain (TaskRequest::topology_label):
// all members under one value of it, or there when one value can hold them all.
enum class Topology { kPreferred, kRequired };
std::string_view TopologyName(Topology t);
std::optional<Topology> ParseTopology(std::string_view name);

struct TaskRequest {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpu_count = 0;          // whole GPUs, 0..8 (a gang spans nodes)
  int32_t gpu_milli = 0;      // fractional share of one GPU, 1..999
  int64_t gpu_mem_mib = 0;    // GPU memory reserved with a share (0: none reserved)
  std::string mig_profile;    // e.g. "3g.40gb"
  std::vector<std::string> gpu_models;  // allowed models (canonical names); empty: any
  int priority = 0;           // higher wins; preemption only takes from strictly lower
  std::string gang_id;        // members of one gang are placed all together or not at all
  int gang_size = 0;          // 0 or 1: not a gang
  // A gang's placement rules (core/task_job.h): at most this many members on one node (0: any
  // number), and the node label whose value all members share (empty: none), required or
  // preferred.
  int members_per_node = 0;
  std::string topology_label;
  Topology topology = Topology::kPreferred;
  // Disk for the workspace, GiB: reserved on nodes that report their disk (Node::disk_gib > 0).
  // The task's disk_gib (records.h), copied here where the task's request is made or loaded.
  int64_t disk_gib = 0;
  // Runs an image: only on nodes whose docker runtime works (and, with GPUs, can give them).
  bool image = false;
  // Mounts a node-local volume that lives on this node (core/volume.h): runs there only. Set by
  // the control plane from the volume's record (empty: any node).
  std::string node{};
  // Mounts a shared volume: only on nodes with the shared storage (Node::shared_storage).
  bool shared_storage = false;
  // Nodes to place it on where one of them fits, else any (they already hold its datasets'
  // files: core/dataset.h). A preference only: never a reason not to place it. Set by the
  // control plane.
  std::vector<std::string> prefer_nodes{};

  GpuForm Form() const;
  // GPU demand in milli-GPU: 1000 per whole GPU, the share, or a MIG instance's compute-slice
  // fraction of the GPU (rounded down; needs the model, so 0 here for MIG: see MigMilli()).
  int64_t GpuMilli() const;

  friend bool operator==(const TaskRequest&, const TaskRequest&) = default;
};

// Checks a request; the error names the offending field and value.
Status Validate(const TaskRequest& r);

// Milli-GPU a MIG instance of `profile` counts for on `model` (compute slices / total × 1000).
int64_t MigMilli(const std::string& model, const std::string& profile);

// Milli-GPU the task counts for against a project's GPU quota on a GPU of `model`: a MIG
// instance's share of that model (MigMilli), otherwise GpuMilli() (the model does not matter).
int64_t QuotaMilli(const TaskRequest& r, const std::string& model);
// What the task counts for before it is placed: the least QuotaMilli over the known models it
// may run on (its gpu_models, or all). Models that offer a MIG profile of one name have the same
// compute slices (the profile's memory size names the family), so this is what the task counts
// for once placed, as QuotaMilli of its GPU's model says.
int64_t UnplacedQuotaMilli(const TaskRequest& r);

}  // namespace gpupool
