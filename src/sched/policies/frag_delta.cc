// FragOptions: the node's fragment amount before the task and after each candidate placement,
// both from FragModel's memo; the shape slots of NodeCache (see frag_delta.h).
#include "sched/policies/frag_delta.h"

#include <algorithm>
#include <cmath>

namespace gpupool::sched::policies {

int64_t FgdScore(double delta) {
  return static_cast<int64_t>(1.0 / (1.0 + std::exp(-(delta / 1000.0))) * 100.0);
}

std::vector<FragOption> FragOptions(FragModel& model, const ClusterState& state, int node,
                                    const RequestView& r, bool with_capacity) {
  std::vector<FragOption> out;
  if (r.form == GpuForm::kMig) return out;
  const Node& n = state.node(node);
  const int model_id = state.NodeModelId(node);
  int32_t left[64];
  const size_t gpus = std::min<size_t>(n.gpus.size(), 64);
  for (size_t i = 0; i < gpus; ++i) left[i] = n.gpus[i].mig_enabled ? 0 : n.gpus[i].milli_free;
  const std::span<const int32_t> lefts(left, gpus);
  const int64_t cpu_after = n.cpu_free_milli - r.request->cpu_milli;
  const double before = model.Amount(state, model_id, n.cpu_free_milli, lefts);
  const double capacity_before =
      with_capacity
          ? model.Amount(state, model_id, n.cpu_free_milli, lefts, FragMeasure::kCapacity)
          : 0;
  // The option for the node as `left` and `cpu_after` describe it after the placement.
  auto option = [&](int gpu, int32_t gpu_left_before) {
    FragOption o{gpu, before - model.Amount(state, model_id, cpu_after, lefts), gpu_left_before,
                 0};
    if (with_capacity) {
      o.capacity_delta =
          capacity_before - model.Amount(state, model_id, cpu_after, lefts, FragMeasure::kCapacity);
    }
    return o;
  };

  if (r.form == GpuForm::kShare) {
    const int32_t milli = r.request->gpu_milli;
    for (size_t i = 0; i < gpus; ++i) {
      if (left[i] < milli || n.gpus[i].mem_free_mib < r.request->gpu_mem_mib ||
          !r.GpuUsable(state, n.gpus[i])) {
        continue;
      }
      const bool seen = std::any_of(out.begin(), out.end(),
                                    [&](const FragOption& o) { return o.left == left[i]; });
      if (seen) continue;
      const int32_t saved = left[i];
      left[i] -= milli;
      out.push_back(option(static_cast<int>(i), saved));
      left[i] = saved;
    }
    return out;
  }
  if (r.form == GpuForm::kWhole) {
    int need = r.request->gpu_count;
    for (size_t i = 0; i < gpus && need > 0; ++i) {
      if (left[i] == kMilliPerGpu && r.GpuUsable(state, n.gpus[i])) {
        left[i] = 0;
        --need;
      }
    }
  }
  out.push_back(option(-1, 0));
  return out;
}

Placement PickPolicy::ChooseGpus(const ClusterState& state, int node, const RequestView& r) {
  Placement p = DefaultPlacement(state, node, r);
  if (r.form == GpuForm::kShare) p.gpus = {Pick(state, node, r, Slot(state, r)).second};
  return p;
}

int ShapeSlots::Assign(const ClusterState& state, const RequestView& r, bool& fresh,
                       bool& reset) {
  fresh = false;
  reset = false;
  if (r.form == GpuForm::kMig) return -1;
  if (instance_ != state.InstanceId() || model_count_ != state.ModelCount()) {
    *this = ShapeSlots();
    instance_ = state.InstanceId();
    model_count_ = state.ModelCount();
    reset = true;
  }
  ++tick_;
  const TaskRequest& q = *r.request;
  ShapeKey key{
      static_cast<int>(r.form), q.cpu_milli, q.gpu_milli, q.gpu_count, q.gpu_mem_mib, q.gpu_models};
  int slot;
  if (auto it = slot_of_.find(key); it != slot_of_.end()) {
    slot = it->second;
  } else if (static_cast<int>(shape_of_.size()) < kMaxShapes) {
    slot = static_cast<int>(shape_of_.size());
    shape_of_.push_back(key);
    last_used_.push_back(0);
    slot_of_.emplace(std::move(key), slot);
    fresh = true;
  } else {
    // Full: the least recently used shape gives its slot up, with all of its entries.
    slot = static_cast<int>(std::min_element(last_used_.begin(), last_used_.end()) -
                            last_used_.begin());
    slot_of_.erase(shape_of_[static_cast<size_t>(slot)]);
    shape_of_[static_cast<size_t>(slot)] = key;
    slot_of_.emplace(std::move(key), slot);
    fresh = true;
  }
  last_used_[static_cast<size_t>(slot)] = tick_;
  return slot;
}

}  // namespace gpupool::sched::policies
