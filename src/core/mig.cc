// MIG placement: legality under NVIDIA's rules and the choice of slot (see mig.h).
#include "core/mig.h"

#include <algorithm>

namespace gpupool {
namespace {

uint32_t SpanMask(int start, int size) { return ((1u << size) - 1u) << start; }

int CountOfProfile(const Gpu& gpu, int profile, const std::vector<int>& ignore = {}) {
  int n = 0;
  for (size_t i = 0; i < gpu.mig_instances.size(); ++i) {
    if (gpu.mig_instances[i].profile == profile &&
        std::find(ignore.begin(), ignore.end(), static_cast<int>(i)) == ignore.end()) {
      ++n;
    }
  }
  return n;
}

// Room left for future instances once `occupied` is taken: Σ over profiles (media-extension
// variants excluded, they duplicate their base) of compute_slices × number of legal free starts.
// Larger profiles need aligned, contiguous slots, so a slot choice that keeps them placeable
// scores higher; e.g. on an empty A100 a 1g at slot 6 leaves 22, at slot 0 only 16.
int SlotRoomScore(const GpuModelInfo& model, uint32_t occupied) {
  int score = 0;
  for (const MigProfile& p : model.mig_profiles) {
    if (p.name.find("+me") != std::string::npos) continue;
    for (int s : p.starts) {
      if ((SpanMask(s, p.memory_slices) & occupied) == 0) score += p.compute_slices;
    }
  }
  return score;
}

}  // namespace

uint32_t MigOccupiedSlots(const GpuModelInfo& model, const Gpu& gpu, bool in_use_only) {
  uint32_t mask = 0;
  for (const MigInstance& m : gpu.mig_instances) {
    if (in_use_only && !m.in_use) continue;
    const MigProfile& p = model.mig_profiles[static_cast<size_t>(m.profile)];
    mask |= SpanMask(m.start, p.memory_slices);
  }
  return mask;
}

bool MigStartLegal(const GpuModelInfo& model, int profile, int start, uint32_t occupied,
                   int existing_of_profile) {
  if (profile < 0 || profile >= static_cast<int>(model.mig_profiles.size())) return false;
  const MigProfile& p = model.mig_profiles[static_cast<size_t>(profile)];
  if (existing_of_profile >= p.max_instances) return false;
  if (std::find(p.starts.begin(), p.starts.end(), start) == p.starts.end()) return false;
  return (SpanMask(start, p.memory_slices) & occupied) == 0;
}

std::optional<MigPlacement> FindMigPlacement(const GpuModelInfo& model, const Gpu& gpu,
                                             int profile) {
  if (profile < 0 || profile >= static_cast<int>(model.mig_profiles.size())) return std::nullopt;
  const MigProfile& p = model.mig_profiles[static_cast<size_t>(profile)];

  if (gpu.mig_enabled) {
    // 1. An existing unused instance of this profile.
    for (size_t i = 0; i < gpu.mig_instances.size(); ++i) {
      const MigInstance& m = gpu.mig_instances[i];
      if (m.profile == profile && !m.in_use) {
        return MigPlacement{MigAction::kUseFree, profile, m.start, static_cast<int>(i), {}, false};
      }
    }
    // 2. A new instance in free slots; keep the most room for later instances.
    const uint32_t occupied = MigOccupiedSlots(model, gpu);
    const int existing = CountOfProfile(gpu, profile);
    std::optional<MigPlacement> best;
    int best_room = -1;
    for (int s : p.starts) {
      if (!MigStartLegal(model, profile, s, occupied, existing)) continue;
      const int room = SlotRoomScore(model, occupied | SpanMask(s, p.memory_slices));
      if (room > best_room) {
        best_room = room;
        best = MigPlacement{MigAction::kCreate, profile, s, -1, {}, false};
      }
    }
    if (best) return best;
  } else if (!gpu.Idle()) {
    return std::nullopt;  // a GPU in use without MIG mode cannot be switched
  }

  // 3. Re-partition: destroy the unused instances that overlap a legal start (or enable MIG
  // mode on an idle GPU). Prefer the start that destroys the fewest instances, then the most room.
  const uint32_t in_use = gpu.mig_enabled ? MigOccupiedSlots(model, gpu, true) : 0;
  std::optional<MigPlacement> best;
  size_t best_destroyed = SIZE_MAX;
  int best_room = -1;
  for (int s : p.starts) {
    const uint32_t span = SpanMask(s, p.memory_slices);
    if (span & in_use) continue;
    std::vector<int> destroy;
    uint32_t kept = 0;
    for (size_t i = 0; gpu.mig_enabled && i < gpu.mig_instances.size(); ++i) {
      const MigInstance& m = gpu.mig_instances[i];
      const uint32_t mspan =
          SpanMask(m.start, model.mig_profiles[static_cast<size_t>(m.profile)].memory_slices);
      if (mspan & span) {
        destroy.push_back(static_cast<int>(i));
      } else {
        kept |= mspan;
      }
    }
    // Without MIG mode the instance list is stale: enabling MIG resets the GPU (and
    // ApplyMigPlacement clears the list), so none of it counts against the limit.
    if (gpu.mig_enabled && CountOfProfile(gpu, profile, destroy) >= p.max_instances) continue;
    const int room = SlotRoomScore(model, kept | span);
    if (destroy.size() < best_destroyed || (destroy.size() == best_destroyed && room > best_room)) {
      best_destroyed = destroy.size();
      best_room = room;
      best = MigPlacement{MigAction::kRepartition, profile, s, -1, destroy, !gpu.mig_enabled};
    }
  }
  return best;
}

int ApplyMigPlacement(Gpu& gpu, const MigPlacement& p) {
  if (p.action == MigAction::kUseFree) {
    gpu.mig_instances[static_cast<size_t>(p.instance)].in_use = true;
    return p.instance;
  }
  if (p.enable_mig) {
    gpu.mig_enabled = true;
    gpu.mig_instances.clear();
  }
  std::vector<int> destroy = p.destroy;
  std::sort(destroy.rbegin(), destroy.rend());
  for (int i : destroy) gpu.mig_instances.erase(gpu.mig_instances.begin() + i);
  gpu.mig_instances.push_back(MigInstance{p.profile, p.start, true});
  return static_cast<int>(gpu.mig_instances.size()) - 1;
}

int MigFreeComputeSlices(const GpuModelInfo& model, const Gpu& gpu) {
  int used = 0;
  for (const MigInstance& m : gpu.mig_instances) {
    used += model.mig_profiles[static_cast<size_t>(m.profile)].compute_slices;
  }
  return model.mig_compute_slices - used;
}

}  // namespace gpupool
