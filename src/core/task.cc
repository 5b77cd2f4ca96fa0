// Task request validation and derived quantities.
#include "core/task.h"

#include <algorithm>
#include <optional>
#include <string>

#include "core/gpu_catalog.h"

namespace gpupool {

GpuForm TaskRequest::Form() const {
  if (!mig_profile.empty()) return GpuForm::kMig;
  if (gpu_milli > 0) return GpuForm::kShare;
  if (gpu_count > 0) return GpuForm::kWhole;
  return GpuForm::kNone;
}

int64_t TaskRequest::GpuMilli() const {
  switch (Form()) {
    case GpuForm::kWhole: return int64_t{gpu_count} * kMilliPerGpu;
    case GpuForm::kShare: return gpu_milli;
    case GpuForm::kMig:
    case GpuForm::kNone: return 0;
  }
  return 0;
}

int64_t MigMilli(const std::string& model, const std::string& profile) {
  const GpuModelInfo* info = FindGpuModel(model);
  if (info == nullptr || info->mig_compute_slices == 0) return 0;
  const MigProfile* p = info->FindProfile(profile);
  if (p == nullptr) return 0;
  return int64_t{p->compute_slices} * kMilliPerGpu / info->mig_compute_slices;
}

int64_t QuotaMilli(const TaskRequest& r, const std::string& model) {
  return r.Form() == GpuForm::kMig ? MigMilli(model, r.mig_profile) : r.GpuMilli();
}

int64_t UnplacedQuotaMilli(const TaskRequest& r) {
  if (r.Form() != GpuForm::kMig) return r.GpuMilli();
  std::optional<int64_t> least;
  for (const GpuModelInfo& model : KnownGpuModels()) {
    if (model.FindProfile(r.mig_profile) == nullptr) continue;
    if (!r.gpu_models.empty() &&
        std::find(r.gpu_models.begin(), r.gpu_models.end(), model.name) == r.gpu_models.end()) {
      continue;
    }
    const int64_t milli = QuotaMilli(r, model.name);
    least = least ? std::min(*least, milli) : milli;
  }
  return least.value_or(0);
}

std::string_view TopologyName(Topology t) {
  return t == Topology::kRequired ? "required" : "preferred";
}

std::optional<Topology> ParseTopology(std::string_view name) {
  if (name == "required") return Topology::kRequired;
  if (name == "preferred") return Topology::kPreferred;
  return std::nullopt;
}

Status Validate(const TaskRequest& r) {
  if (r.cpu_milli < 0) {
    return InvalidArgument("cpu_milli must be >= 0, got " + std::to_string(r.cpu_milli));
  }
  if (r.memory_mib < 0) {
    return InvalidArgument("memory_mib must be >= 0, got " + std::to_string(r.memory_mib));
  }
  if (r.gpu_count < 0 || r.gpu_count > kMaxGpusPerTask) {
    return InvalidArgument("gpu_count must be 0..8 per task (a gang spans nodes), got " +
                           std::to_string(r.gpu_count));
  }
  if (r.gpu_milli < 0 || r.gpu_milli >= kMilliPerGpu) {
    return InvalidArgument("gpu_milli must be 1..999 for a shared GPU, got " +
                           std::to_string(r.gpu_milli));
  }
  if (r.gpu_mem_mib < 0) {
    return InvalidArgument("gpu_mem_mib must be >= 0, got " + std::to_string(r.gpu_mem_mib));
  }
  if (r.disk_gib < 0) {
    return InvalidArgument("disk_gib must be >= 0, got " + std::to_string(r.disk_gib));
  }
  const int forms = (r.gpu_count > 0) + (r.gpu_milli > 0) + (!r.mig_profile.empty());
  if (forms > 1) {
    return InvalidArgument(
        "exactly one GPU form may be given (gpu_count, gpu_milli or mig_profile), got " +
        std::to_string(forms));
  }
  if (r.gpu_mem_mib > 0 && r.gpu_milli == 0) {
    return InvalidArgument("gpu_mem_mib is only valid with gpu_milli (a shared GPU), got " +
                           std::to_string(r.gpu_mem_mib) + " without gpu_milli");
  }
  for (const std::string& m : r.gpu_models) {
    if (m.empty()) return InvalidArgument("gpu_models must not contain an empty name");
  }
  if (!r.mig_profile.empty()) {
    bool found = false;
    if (r.gpu_models.empty()) {
      for (const GpuModelInfo& m : KnownGpuModels()) found = found || m.FindProfile(r.mig_profile);
    } else {
      for (const std::string& name : r.gpu_models) {
        const GpuModelInfo* m = FindGpuModel(name);
        found = found || (m != nullptr && m->FindProfile(r.mig_profile) != nullptr);
      }
    }
    if (!found) {
      return InvalidArgument("mig_profile '" + r.mig_profile +
                             "' is not a MIG profile of any allowed GPU model");
    }
  }
  if (r.priority < kMinPriority || r.priority > kMaxPriority) {
    return InvalidArgument("priority must be 0..1000, got " + std::to_string(r.priority));
  }
  if (r.gang_size < 0 || r.gang_size > kMaxGangSize) {
    return InvalidArgument("gang_size must be 0..4096, got " + std::to_string(r.gang_size));
  }
  if (r.gang_size > 1 && r.gang_id.empty()) {
    return InvalidArgument("gang_id is required when gang_size > 1");
  }
  if (!r.gang_id.empty() && r.gang_size < 2) {
    return InvalidArgument("gang_size must be >= 2 when gang_id is set, got " +
                           std::to_string(r.gang_size));
  }
  if (r.members_per_node < 0 || r.members_per_node > kMaxGangSize) {
    return InvalidArgument("members_per_node must be 0..4096, got " +
                           std::to_string(r.members_per_node));
  }
  if (r.gang_id.empty() && (r.members_per_node != 0 || !r.topology_label.empty())) {
    return InvalidArgument("members_per_node and topology_label apply to a gang's members only");
  }
  return {};
}

}  // namespace gpupool
