// ClusterState bookkeeping: binding and releasing resources, keeping totals and indexes in step.
#include "sched/cluster_state.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <limits>

#include "core/gpu_catalog.h"

namespace gpupool::sched {

uint64_t InstanceTag::Next() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

ClusterState::ClusterState(std::vector<Node> nodes) {
  for (Node& n : nodes) AddNode(std::move(n));
}

int ClusterState::InternModel(const std::string& model) {
  for (size_t i = 0; i < model_names_.size(); ++i) {
    if (model_names_[i] == model) return static_cast<int>(i);
  }
  model_names_.push_back(model);
  by_model_.emplace_back();
  partial_counts_.emplace_back();
  return static_cast<int>(model_names_.size()) - 1;
}

int ClusterState::ModelId(const std::string& model) const {
  for (size_t i = 0; i < model_names_.size(); ++i) {
    if (model_names_[i] == model) return static_cast<int>(i);
  }
  return -1;
}

namespace {

// Whether two nodes report the same GPUs, as far as placements can tell.
bool SameGpus(const Node& a, const Node& b) {
  return std::equal(a.gpus.begin(), a.gpus.end(), b.gpus.begin(), b.gpus.end(),
                    [](const Gpu& x, const Gpu& y) {
                      return x.model == y.model && x.mem_mib == y.mem_mib && x.uuid == y.uuid;
                    });
}

void InsertSorted(std::vector<int>& v, int x) {
  auto it = std::lower_bound(v.begin(), v.end(), x);
  if (it == v.end() || *it != x) v.insert(it, x);
}

void EraseSorted(std::vector<int>& v, int x) {
  auto it = std::lower_bound(v.begin(), v.end(), x);
  if (it != v.end() && *it == x) v.erase(it);
}

}  // namespace

int ClusterState::AddNode(Node node) {
  const int index = NodeCount();
  node_by_name_.emplace(node.name, index);
  all_nodes_.push_back(index);
  node_model_.push_back(-1);
  versions_.push_back(0);
  summaries_.emplace_back();
  tasks_on_.emplace_back();
  gpu_shares_.emplace_back();
  gpu_model_.emplace_back();
  counted_left_.emplace_back();
  nodes_.push_back(std::move(node));
  IndexGpus(index);
  Touch(index);
  return index;
}

void ClusterState::IndexGpus(int node) {
  const size_t i = static_cast<size_t>(node);
  const Node& n = nodes_[i];
  std::vector<int>& models = gpu_model_[i];
  models.clear();
  for (const Gpu& g : n.gpus) {
    const int id = InternModel(g.model);
    if (std::find(models.begin(), models.end(), id) == models.end()) {
      InsertSorted(by_model_[static_cast<size_t>(id)], node);
    }
    models.push_back(id);
    total_gpu_milli_ += kMilliPerGpu;
    allocated_gpu_milli_ += kMilliPerGpu - g.milli_free;
  }
  node_model_[i] = models.empty() ? -1 : models.front();
  InsertSorted(n.gpus.empty() ? no_gpu_nodes_ : gpu_nodes_, node);
  gpu_shares_[i].assign(n.gpus.size(), {});
  counted_left_[i].assign(n.gpus.size(), 0);
}

void ClusterState::UnindexGpus(int node) {
  const size_t i = static_cast<size_t>(node);
  const Node& n = nodes_[i];
  for (size_t g = 0; g < n.gpus.size(); ++g) {
    const size_t model = static_cast<size_t>(gpu_model_[i][g]);
    if (const int32_t left = counted_left_[i][g]; left > 0) {
      --partial_counts_[model][static_cast<size_t>(left)];
    }
    EraseSorted(by_model_[model], node);
    total_gpu_milli_ -= kMilliPerGpu;
    allocated_gpu_milli_ -= kMilliPerGpu - n.gpus[g].milli_free;
  }
  EraseSorted(n.gpus.empty() ? no_gpu_nodes_ : gpu_nodes_, node);
  node_model_[i] = -1;
  gpu_model_[i].clear();
  gpu_shares_[i].clear();
  counted_left_[i].clear();
}

void ClusterState::Touch(int node) {
  versions_[static_cast<size_t>(node)] = ++change_seq_;
  journal_.emplace_back(change_seq_, node);
  if (journal_.size() > 2 * versions_.size() + 64) {
    std::erase_if(journal_, [this](const std::pair<uint64_t, int>& e) {
      return e.first != versions_[static_cast<size_t>(e.second)];
    });
  }
  const Node& n = nodes_[static_cast<size_t>(node)];
  NodeSummary& s = summaries_[static_cast<size_t>(node)];
  s = NodeSummary{};
  s.cpu_free_milli = n.cpu_free_milli;
  s.memory_free_mib = n.memory_free_mib;
  s.disk_free_gib = n.disk_gib > 0 ? n.disk_free_gib : std::numeric_limits<int64_t>::max();
  s.schedulable = n.schedulable;
  s.docker = n.docker;
  s.docker_gpus = n.docker_gpus;
  s.shared_storage = n.shared_storage;
  s.gpu_count = static_cast<int16_t>(n.gpus.size());
  // Move each GPU to the partial-GPU count of its milli left now.
  std::vector<int32_t>& counted = counted_left_[static_cast<size_t>(node)];
  for (size_t i = 0; i < n.gpus.size(); ++i) {
    const Gpu& g = n.gpus[i];
    const int32_t left =
        !g.mig_enabled && g.milli_free > 0 && g.milli_free < kMilliPerGpu ? g.milli_free : 0;
    if (left == counted[i]) continue;
    auto& counts = partial_counts_[static_cast<size_t>(gpu_model_[static_cast<size_t>(node)][i])];
    if (counted[i] > 0) --counts[static_cast<size_t>(counted[i])];
    if (left > 0) ++counts[static_cast<size_t>(left)];
    counted[i] = left;
  }
  for (const Gpu& g : n.gpus) {
    s.uniform = s.uniform && !g.mig_enabled && g.model == n.gpus.front().model &&
                g.mem_free_mib == g.mem_mib;
    if (g.mig_enabled) continue;
    s.gpu_milli_left += g.milli_free;
    s.max_gpu_left = std::max(s.max_gpu_left, g.milli_free);
    s.free_gpus += g.milli_free == kMilliPerGpu && g.mem_free_mib == g.mem_mib;
  }
  // The node's bit in each free-capacity bitset (see FreeGpuBits, ShareBits).
  const size_t word = static_cast<size_t>(node) / 64;
  const uint64_t bit = uint64_t{1} << (node % 64);
  auto set = [&](std::vector<uint64_t>& bits, bool on) {
    if (bits.size() <= word) bits.resize(word + 1, 0);
    bits[word] = on ? bits[word] | bit : bits[word] & ~bit;
  };
  for (size_t k = 0; k < free_gpu_bits_.size(); ++k) {
    set(free_gpu_bits_[k], s.free_gpus >= static_cast<int>(k) + 1);
  }
  for (size_t j = 0; j < share_bits_.size(); ++j) {
    set(share_bits_[j], s.max_gpu_left >= std::max(1, static_cast<int>(j) * kShareBitsStep));
  }
}

std::vector<int> ClusterState::NodesChangedSince(uint64_t seq) const {
  std::vector<int> changed;
  auto it =
      std::upper_bound(journal_.begin(), journal_.end(), seq,
                       [](uint64_t s, const std::pair<uint64_t, int>& e) { return s < e.first; });
  for (; it != journal_.end(); ++it) {
    // A node's latest entry is the one that carries its version: each node once.
    if (it->first == versions_[static_cast<size_t>(it->second)]) changed.push_back(it->second);
  }
  std::sort(changed.begin(), changed.end());
  return changed;
}

void ClusterState::CopyNodesFrom(const ClusterState& source, std::span<const int> nodes) {
  // First drop what this state has bound on the nodes, then take the source's: a task may have
  // moved between two of them.
  for (const int n : nodes) {
    if (n >= NodeCount()) break;
    for (const std::string& id : tasks_on_[static_cast<size_t>(n)]) {
      auto it = bindings_.find(id);
      if (it != bindings_.end() && it->second.placement.node == n) bindings_.erase(it);
    }
  }
  for (const int n : nodes) {
    const size_t i = static_cast<size_t>(n);
    while (NodeCount() <= n) AddNode(source.nodes_[static_cast<size_t>(NodeCount())]);
    if (SameGpus(nodes_[i], source.nodes_[i])) {
      nodes_[i] = source.nodes_[i];
    } else {  // its agent registered another GPU list (UpdateNode)
      UnindexGpus(n);
      nodes_[i] = source.nodes_[i];
      IndexGpus(n);
    }
    tasks_on_[i] = source.tasks_on_[i];
    gpu_shares_[i] = source.gpu_shares_[i];
    for (const std::string& id : tasks_on_[i]) {
      bindings_.insert_or_assign(id, source.bindings_.at(id));
    }
    Touch(n);  // summary, partly-used GPU counts, free-capacity bits, version
  }
  total_gpu_milli_ = source.total_gpu_milli_;
  allocated_gpu_milli_ = source.allocated_gpu_milli_;
}

void ClusterState::SetSchedulable(int node, bool schedulable) {
  nodes_[static_cast<size_t>(node)].schedulable = schedulable;
  Touch(node);
}

Status ClusterState::UpdateNode(int node, const Node& reported) {
  const size_t i = static_cast<size_t>(node);
  Node& n = nodes_[i];
  const int64_t cpu_held = n.cpu_milli - n.cpu_free_milli;
  const int64_t memory_held = n.memory_mib - n.memory_free_mib;
  if (reported.cpu_milli < cpu_held) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     n.name + ": cpu_milli " + std::to_string(reported.cpu_milli) +
                         " is less than its bound tasks hold (" + std::to_string(cpu_held) + ")");
  }
  if (reported.memory_mib < memory_held) {
    return MakeError(ErrorCode::kFailedPrecondition, n.name + ": memory_mib " +
                                                         std::to_string(reported.memory_mib) +
                                                         " is less than its bound tasks hold (" +
                                                         std::to_string(memory_held) + ")");
  }
  const bool same_gpus = SameGpus(n, reported);
  if (!same_gpus && !tasks_on_[i].empty()) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "node " + n.name + " has tasks bound; its GPU list cannot change");
  }
  n.cpu_free_milli += reported.cpu_milli - n.cpu_milli;
  n.cpu_milli = reported.cpu_milli;
  n.memory_free_mib += reported.memory_mib - n.memory_mib;
  n.memory_mib = reported.memory_mib;
  n.disk_free_gib = reported.disk_gib;
  for (const std::string& id : tasks_on_[i]) n.disk_free_gib -= bindings_.at(id).request.disk_gib;
  n.disk_gib = reported.disk_gib;
  n.docker = reported.docker;
  n.docker_gpus = reported.docker_gpus;
  n.shared_storage = reported.shared_storage;
  n.runtime_note = reported.runtime_note;
  n.ssh_host_key = reported.ssh_host_key;
  n.address = reported.address;
  if (!same_gpus) {
    UnindexGpus(node);
    n.gpus = reported.gpus;
    IndexGpus(node);
  } else {
    // The same GPUs (their bindings kept): only what the agent learned of their links changes.
    for (size_t g = 0; g < n.gpus.size(); ++g) n.gpus[g].link_group = reported.gpus[g].link_group;
  }
  Touch(node);
  return {};
}

int ClusterState::FindNode(const std::string& name) const {
  auto it = node_by_name_.find(name);
  return it == node_by_name_.end() ? -1 : it->second;
}

const Binding* ClusterState::FindBinding(const std::string& task_id) const {
  auto it = bindings_.find(task_id);
  return it == bindings_.end() ? nullptr : &it->second;
}

Status ClusterState::CheckPlacement(const TaskRequest& request, const Placement& p) const {
  if (p.node < 0 || p.node >= NodeCount()) {
    return InvalidArgument("placement node " + std::to_string(p.node) + " does not exist");
  }
  const Node& n = node(p.node);
  if (n.cpu_free_milli < request.cpu_milli) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     n.name + ": cpu_milli " + std::to_string(request.cpu_milli) + " requested, " +
                         std::to_string(n.cpu_free_milli) + " free");
  }
  if (n.memory_free_mib < request.memory_mib) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     n.name + ": memory_mib " + std::to_string(request.memory_mib) +
                         " requested, " + std::to_string(n.memory_free_mib) + " free");
  }
  if (n.disk_gib > 0 && n.disk_free_gib < request.disk_gib) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     n.name + ": disk_gib " + std::to_string(request.disk_gib) + " requested, " +
                         std::to_string(n.disk_free_gib) + " free");
  }
  if (!request.node.empty() && request.node != n.name) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     n.name + ": the task runs on node " + request.node + " only (its volume's)");
  }
  if (request.shared_storage && !n.shared_storage) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     n.name + ": no shared storage for a task with a shared volume");
  }
  if (request.image && (!n.docker || (!p.gpus.empty() && !n.docker_gpus))) {
    return MakeError(
        ErrorCode::kFailedPrecondition,
        n.name + ": " +
            (n.docker ? "no NVIDIA container runtime for its GPUs" : "no docker runtime") +
            " for a task with an image");
  }
  for (int gi : p.gpus) {
    if (gi < 0 || gi >= static_cast<int>(n.gpus.size())) {
      return InvalidArgument(n.name + ": gpu index " + std::to_string(gi) + " does not exist");
    }
    const Gpu& g = n.gpus[static_cast<size_t>(gi)];
    if (!request.gpu_models.empty() &&
        std::find(request.gpu_models.begin(), request.gpu_models.end(), g.model) ==
            request.gpu_models.end()) {
      return MakeError(
          ErrorCode::kFailedPrecondition,
          n.name + ": gpu " + std::to_string(gi) + " is a " + g.model + ", not an allowed model");
    }
    if (p.mig) {
      const GpuModelInfo* info = FindGpuModel(g.model);
      if (info == nullptr) {
        return MakeError(ErrorCode::kFailedPrecondition,
                         n.name + ": gpu " + std::to_string(gi) + " (" + g.model + ") has no MIG");
      }
      auto fresh = FindMigPlacement(*info, g, p.mig->profile);
      if (!fresh || fresh->action != p.mig->action || fresh->start != p.mig->start) {
        return MakeError(ErrorCode::kFailedPrecondition,
                         n.name + ": gpu " + std::to_string(gi) + " has no room for MIG profile " +
                             request.mig_profile + " at slot " + std::to_string(p.mig->start));
      }
      continue;
    }
    if (g.mig_enabled) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       n.name + ": gpu " + std::to_string(gi) + " is in MIG mode");
    }
    if (g.milli_free < p.milli_per_gpu) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       n.name + ": gpu " + std::to_string(gi) + " has " +
                           std::to_string(g.milli_free) + " milli free, " +
                           std::to_string(p.milli_per_gpu) + " needed");
    }
    if (g.mem_free_mib < p.gpu_mem_mib) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       n.name + ": gpu " + std::to_string(gi) + " has " +
                           std::to_string(g.mem_free_mib) + " MiB free, " +
                           std::to_string(p.gpu_mem_mib) + " needed");
    }
  }
  std::vector<int> sorted = p.gpus;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return InvalidArgument(n.name + ": placement names a gpu twice");
  }
  return {};
}

int64_t ApplyToNode(Node& n, const Binding& b, int sign) {
  n.cpu_free_milli -= sign * b.request.cpu_milli;
  n.memory_free_mib -= sign * b.request.memory_mib;
  n.disk_free_gib -= sign * b.request.disk_gib;
  for (int gi : b.placement.gpus) {
    Gpu& g = n.gpus[static_cast<size_t>(gi)];
    if (b.placement.mig) {
      for (MigInstance& m : g.mig_instances) {
        if (m.start == b.placement.mig->start) m.in_use = sign > 0;
      }
    } else {
      g.milli_free -= sign * b.placement.milli_per_gpu;
      g.mem_free_mib -= sign * b.placement.gpu_mem_mib;
    }
  }
  return BindingGpuMilli(n, b);
}

int64_t BindingGpuMilli(const Node& n, const Binding& b) {
  int64_t gpu_milli = 0;
  for (int gi : b.placement.gpus) {
    gpu_milli += b.placement.mig
                     ? MigMilli(n.gpus[static_cast<size_t>(gi)].model, b.request.mig_profile)
                     : b.placement.milli_per_gpu;
  }
  return gpu_milli;
}

int64_t WorkLostMs(const WorkState& work, int64_t now_ms) {
  if (work.snapshot_on_stop) return work.snapshot_restore_ms;
  if (work.unsaved_since_ms <= 0 || now_ms <= work.unsaved_since_ms) return 0;
  const int64_t unsaved = now_ms - work.unsaved_since_ms;
  return work.snapshot_every_ms > 0 ? unsaved % work.snapshot_every_ms : unsaved;
}

void ClusterState::Account(const Binding& b, bool reserve) {
  const int sign = reserve ? 1 : -1;
  allocated_gpu_milli_ +=
      sign * ApplyToNode(nodes_[static_cast<size_t>(b.placement.node)], b, sign);
  auto& on = tasks_on_[static_cast<size_t>(b.placement.node)];
  if (reserve) {
    on.push_back(b.task_id);
  } else {
    on.erase(std::find(on.begin(), on.end(), b.task_id));
  }
  if (b.request.Form() == GpuForm::kShare && b.placement.gpus.size() == 1) {
    std::vector<int32_t>& shares = gpu_shares_[static_cast<size_t>(b.placement.node)]
                                              [static_cast<size_t>(b.placement.gpus[0])];
    const int32_t milli = b.placement.milli_per_gpu;
    if (reserve) {
      shares.insert(std::upper_bound(shares.begin(), shares.end(), milli, std::greater<>()), milli);
    } else {
      shares.erase(std::find(shares.begin(), shares.end(), milli));
    }
  }
  Touch(b.placement.node);
}

Status ClusterState::SetMigLayout(int node, int gpu, bool mig_enabled,
                                  std::vector<MigInstance> instances) {
  Gpu& g = nodes_[static_cast<size_t>(node)].gpus[static_cast<size_t>(gpu)];
  for (const MigInstance& now : g.mig_instances) {
    if (!now.in_use) continue;
    const bool kept =
        mig_enabled && std::find(instances.begin(), instances.end(), now) != instances.end();
    if (!kept) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       nodes_[static_cast<size_t>(node)].name + ": gpu " + std::to_string(gpu) +
                           " has a MIG instance in use at slot " + std::to_string(now.start) +
                           " that the new layout drops");
    }
  }
  g.mig_enabled = mig_enabled;
  g.mig_instances = std::move(instances);
  Touch(node);
  return {};
}

Status ClusterState::Bind(const std::string& task_id, const TaskRequest& request,
                          const Placement& p, const WorkState& work) {
  if (bindings_.count(task_id)) {
    return MakeError(ErrorCode::kAlreadyExists, "task " + task_id + " is already bound");
  }
  if (auto ok = CheckPlacement(request, p); !ok) return ok;
  if (p.mig) {
    ApplyMigPlacement(nodes_[static_cast<size_t>(p.node)].gpus[static_cast<size_t>(p.gpus[0])],
                      *p.mig);
  }
  Binding b{task_id, request, p, work};
  Account(b, true);
  bindings_.emplace(task_id, std::move(b));
  return {};
}

Status ClusterState::SetWork(const std::string& task_id, const WorkState& work) {
  auto it = bindings_.find(task_id);
  if (it == bindings_.end()) return NotFound("task " + task_id + " is not bound");
  it->second.work = work;
  Touch(it->second.placement.node);
  return {};
}

Status ClusterState::Unbind(const std::string& task_id) {
  auto it = bindings_.find(task_id);
  if (it == bindings_.end()) return NotFound("task " + task_id + " is not bound");
  Account(it->second, false);
  bindings_.erase(it);
  return {};
}

}  // namespace gpupool::sched
