// The GPU catalog: known GPU models, their memory, and for MIG-capable models the MIG profiles
// with NVIDIA's placement rules. Unknown models (e.g. the Alibaba trace's G2, G3) are opaque names.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool {

// A MIG profile of one GPU model, e.g. "3g.40gb" on A100-80GB.
//
// Placement follows NVIDIA's model of a MIG-capable GPU as `memory_slots` memory slices (8 on
// A100/H100/H200, 4 on A30). An instance of this profile starting at slot s occupies memory slices
// [s, s + memory_slices). It may only start at one of `starts`; at most `max_instances` of it may
// exist on one GPU (this is what limits the "+me" media-extension profiles to one).
struct MigProfile {
  std::string name;            // "1g.10gb", "1g.10gb+me", "7g.80gb"
  int compute_slices = 0;      // the "Ng" part: SM slices of `GpuModelInfo::mig_compute_slices`
  int memory_slices = 0;       // memory slices occupied (also the placement size)
  std::vector<int> starts;     // legal start slots
  int max_instances = 0;
  int64_t mem_mib = 0;         // memory of one instance
};

struct GpuModelInfo {
  std::string name;            // canonical name, e.g. "A100-80GB"
  int64_t mem_mib = 0;
  int mig_compute_slices = 0;  // 7 (A100/H100/H200), 4 (A30), 0 when not MIG-capable
  int mig_memory_slots = 0;    // 8 or 4; 0 when not MIG-capable
  std::vector<MigProfile> mig_profiles;

  bool MigCapable() const { return !mig_profiles.empty(); }
  // The profile named `name`, or nullptr.
  const MigProfile* FindProfile(std::string_view profile_name) const;
  // Index of the profile in mig_profiles, or -1.
  int ProfileIndex(std::string_view profile_name) const;
};

// The catalog is process-wide and immutable. Lookup accepts canonical names and common aliases
// ("V100M16", "NVIDIA A100-SXM4-80GB", "Tesla T4"), case-insensitively. An unknown name is an
// opaque model: FindGpuModel returns nullptr and the name is used as it is.
const GpuModelInfo* FindGpuModel(std::string_view name);

// Canonical name for a model name (aliases resolved, opaque names returned unchanged).
std::string CanonicalGpuModelName(std::string_view name);

// All known models, in catalog order.
std::span<const GpuModelInfo> KnownGpuModels();

}  // namespace gpupool
