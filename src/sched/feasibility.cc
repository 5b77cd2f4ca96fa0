// Filter stage implementation (see feasibility.h).
#include "sched/feasibility.h"

#include <algorithm>
#include <bit>

#include "core/gpu_catalog.h"
#include "core/mig.h"

namespace gpupool::sched {

RequestView::RequestView(const ClusterState& state, const TaskRequest& r)
    : request(&r), form(r.Form()) {
  if (!r.node.empty()) only_node = state.FindNode(r.node);
  for (const std::string& name : r.prefer_nodes) {
    if (const int n = state.FindNode(name); n >= 0) preferred.push_back(n);
  }
  std::sort(preferred.begin(), preferred.end());
  if (r.gpu_models.empty()) return;
  model_allowed.assign(static_cast<size_t>(state.ModelCount()), false);
  for (const std::string& m : r.gpu_models) {
    const int id = state.ModelId(m);
    if (id >= 0) model_allowed[static_cast<size_t>(id)] = true;
  }
}

bool RequestView::GpuUsable(const ClusterState& state, const Gpu& g) const {
  if (model_allowed.empty()) return true;
  return ModelAllowed(state.ModelId(g.model));
}

Reject CheckNodeFull(const ClusterState& state, int n, const RequestView& view) {
  const NodeSummary& sum = state.summary(n);
  const TaskRequest& r = *view.request;
  if (!sum.schedulable) return Reject::kCordoned;
  if (view.only_node != RequestView::kAnyNode && view.only_node != n) return Reject::kOtherNode;
  if (r.shared_storage && !sum.shared_storage) return Reject::kNoSharedStorage;
  if (r.image && !sum.docker) return Reject::kNoDocker;
  if (view.form != GpuForm::kNone) {
    if (sum.gpu_count == 0) return Reject::kNoGpu;
    if (!view.model_allowed.empty()) {
      if (sum.uniform) {
        if (!view.ModelAllowed(state.NodeModelId(n))) return Reject::kWrongModel;
      } else {
        bool any = false;
        for (const Gpu& g : state.node(n).gpus) any = any || view.GpuUsable(state, g);
        if (!any) return Reject::kWrongModel;
      }
    }
    if (r.image && !sum.docker_gpus) return Reject::kNoDockerGpus;
  }
  if (sum.cpu_free_milli < r.cpu_milli) return Reject::kCpu;
  if (sum.memory_free_mib < r.memory_mib) return Reject::kMemory;
  if (sum.disk_free_gib < r.disk_gib) return Reject::kDisk;
  const Node& node = state.node(n);
  switch (view.form) {
    case GpuForm::kNone:
      return Reject::kNone;
    case GpuForm::kShare:
      if (sum.max_gpu_left < r.gpu_milli) return Reject::kGpuShare;
      if (sum.uniform && r.gpu_mem_mib == 0) return Reject::kNone;
      for (const Gpu& g : node.gpus) {
        if (!g.mig_enabled && g.milli_free >= r.gpu_milli && g.mem_free_mib >= r.gpu_mem_mib &&
            view.GpuUsable(state, g)) {
          return Reject::kNone;
        }
      }
      return Reject::kGpuShare;
    case GpuForm::kWhole: {
      if (sum.free_gpus < r.gpu_count) return Reject::kWholeGpus;
      if (sum.uniform) return Reject::kNone;
      int free = 0;
      for (const Gpu& g : node.gpus) {
        free += !g.mig_enabled && g.milli_free == kMilliPerGpu && g.mem_free_mib == g.mem_mib &&
                view.GpuUsable(state, g);
      }
      return free >= r.gpu_count ? Reject::kNone : Reject::kWholeGpus;
    }
    case GpuForm::kMig:
      for (const Gpu& g : node.gpus) {
        if (!view.GpuUsable(state, g)) continue;
        const GpuModelInfo* info = FindGpuModel(g.model);
        if (info == nullptr) continue;
        const int profile = info->ProfileIndex(r.mig_profile);
        if (profile >= 0 && FindMigPlacement(*info, g, profile)) return Reject::kNone;
      }
      return Reject::kMig;
  }
  return Reject::kNone;
}

size_t SummaryFilter::FilterAll(const ClusterState& state, const RequestView& view,
                                int* out) const {
  // Branch-free: every visited node is written, the count moves only past those that fit. A copy
  // of the filter in a local keeps its thresholds in registers (stores to `out` could alias it).
  const SummaryFilter f = *this;
  size_t count = 0;
  std::span<const uint64_t> bits;
  switch (view.form) {
    case GpuForm::kShare:
      bits = state.ShareBits(view.request->gpu_milli);
      break;
    case GpuForm::kWhole:
      bits = state.FreeGpuBits(view.request->gpu_count);
      break;
    default:
      for (const int n : state.AllNodes()) {
        out[count] = n;
        count += f.Fits(state, n, view);
      }
      return count;
  }
  for (size_t w = 0; w < bits.size(); ++w) {
    for (uint64_t word = bits[w]; word != 0; word &= word - 1) {  // each set bit, lowest first
      const int n = static_cast<int>(w * 64) + std::countr_zero(word);
      out[count] = n;
      count += f.Fits(state, n, view);
    }
  }
  return count;
}

std::string RejectText(Reject reason, const TaskRequest& r) {
  switch (reason) {
    case Reject::kNone: return "fits";
    case Reject::kCordoned: return "cordoned";
    case Reject::kNoDocker:
      return "no docker runtime";
    case Reject::kNoDockerGpus:
      return "no NVIDIA container runtime for GPU tasks with an image";
    case Reject::kDisk:
      return "less than " + std::to_string(r.disk_gib) + " GiB disk free";
    case Reject::kNoGpu: return "no GPU";
    case Reject::kWrongModel: return "wrong GPU model";
    case Reject::kCpu: return "less than " + std::to_string(r.cpu_milli) + " cpu milli free";
    case Reject::kMemory: return "less than " + std::to_string(r.memory_mib) + " MiB memory free";
    case Reject::kGpuShare:
      return "no GPU with " + std::to_string(r.gpu_milli) + " milli" +
             (r.gpu_mem_mib > 0 ? " and " + std::to_string(r.gpu_mem_mib) + " MiB" : "") +
             " free";
    case Reject::kWholeGpus:
      return "fewer than " + std::to_string(r.gpu_count) + " free GPUs";
    case Reject::kMig: return "no room for MIG " + r.mig_profile;
    case Reject::kOtherNode:
      return "not node " + r.node + ", where its volume is";
    case Reject::kNoSharedStorage:
      return "no shared storage (agent --shared-storage)";
    case Reject::kCount: break;
  }
  return "unknown";
}

std::vector<std::pair<std::string, int>> RejectCounts::Reasons(const TaskRequest& r) const {
  std::vector<std::pair<std::string, int>> out;
  for (size_t i = 1; i < counts.size(); ++i) {
    if (counts[i] > 0) out.emplace_back(RejectText(static_cast<Reject>(i), r), counts[i]);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

std::string RejectCounts::Summary(const TaskRequest& r) const {
  std::string s;
  for (const auto& [text, count] : Reasons(r)) {
    if (!s.empty()) s += "; ";
    s += std::to_string(count) + (count == 1 ? " node: " : " nodes: ") + text;
  }
  return s.empty() ? "no nodes" : s;
}

}  // namespace gpupool::sched
