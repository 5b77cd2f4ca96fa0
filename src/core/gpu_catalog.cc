// The built-in GPU catalog. MIG profiles, placements and instance limits are taken from the
// NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles" (tables for A30 24GB,
// A100-SXM4-40GB, A100-SXM4-80GB, H100-SXM5-80GB and H200-SXM5-141GB) and its "Placement" column:
// on the 8-slot GPUs 1g profiles start at 0..6 (size 1), 1g.<2x>gb and 2g at 0,2,4(,6) (size 2),
// 3g at 0,4 and 4g at 0 (size 4), 7g at 0 (size 8); on A30 1g at 0..3, 2g at 0,2, 4g at 0.
#include "core/gpu_catalog.h"

#include <algorithm>
#include <cctype>

namespace gpupool {
namespace {

// Profiles of an 8-memory-slot, 7-compute-slice GPU (A100, H100, H200), given the memory of one
// memory slice and the profile names NVIDIA uses for that model, smallest first.
struct EightSlotNames {
  const char* g1;       // 1g, one memory slice
  const char* g1_me;    // 1g + media extensions
  const char* g1_x2;    // 1g with two memory slices
  const char* g2;
  const char* g3;
  const char* g4;
  const char* g7;
};

std::vector<MigProfile> EightSlotProfiles(int64_t slice_mib, const EightSlotNames& n) {
  return {
      {n.g1, 1, 1, {0, 1, 2, 3, 4, 5, 6}, 7, slice_mib},
      {n.g1_me, 1, 1, {0, 1, 2, 3, 4, 5, 6}, 1, slice_mib},
      {n.g1_x2, 1, 2, {0, 2, 4, 6}, 4, 2 * slice_mib},
      {n.g2, 2, 2, {0, 2, 4}, 3, 2 * slice_mib},
      {n.g3, 3, 4, {0, 4}, 2, 4 * slice_mib},
      {n.g4, 4, 4, {0}, 1, 4 * slice_mib},
      {n.g7, 7, 8, {0}, 1, 8 * slice_mib},
  };
}

GpuModelInfo Plain(const char* name, int64_t mem_mib) { return GpuModelInfo{name, mem_mib, 0, 0, {}}; }

GpuModelInfo EightSlot(const char* name, int64_t mem_mib, const EightSlotNames& names) {
  return GpuModelInfo{name, mem_mib, 7, 8, EightSlotProfiles(mem_mib / 8, names)};
}

const std::vector<GpuModelInfo>& Catalog() {
  static const std::vector<GpuModelInfo> catalog = [] {
    std::vector<GpuModelInfo> c;
    c.push_back(EightSlot("A100-40GB", 40960,
                          {"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb",
                           "7g.40gb"}));
    c.push_back(EightSlot("A100-80GB", 81920,
                          {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb",
                           "7g.80gb"}));
    c.push_back(EightSlot("H100-80GB", 81920,
                          {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb",
                           "7g.80gb"}));
    c.push_back(EightSlot("H200-141GB", 144384,
                          {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb",
                           "7g.141gb"}));
    // A30: 4 memory slots, 4 compute slices.
    const int64_t a30_slice = 24576 / 4;
    c.push_back(GpuModelInfo{"A30-24GB", 24576, 4, 4,
                             {
                                 {"1g.6gb", 1, 1, {0, 1, 2, 3}, 4, a30_slice},
                                 {"1g.6gb+me", 1, 1, {0, 1, 2, 3}, 1, a30_slice},
                                 {"2g.12gb", 2, 2, {0, 2}, 2, 2 * a30_slice},
                                 {"2g.12gb+me", 2, 2, {0, 2}, 1, 2 * a30_slice},
                                 {"4g.24gb", 4, 4, {0}, 1, 4 * a30_slice},
                             }});
    c.push_back(Plain("V100-16GB", 16384));
    c.push_back(Plain("V100-32GB", 32768));
    c.push_back(Plain("P100-16GB", 16384));
    c.push_back(Plain("T4", 15360));
    c.push_back(Plain("A10", 23028));
    c.push_back(Plain("L40S", 46068));
    c.push_back(Plain("RTX3090", 24576));
    c.push_back(Plain("RTX4090", 24564));
    return c;
  }();
  return catalog;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return out;
}

struct Alias {
  const char* alias;  // lower case
  const char* canonical;
};

// Names seen in traces and in NVML's nvmlDeviceGetName, mapped to the catalog's names.
constexpr Alias kAliases[] = {
    {"v100m16", "V100-16GB"},
    {"v100m32", "V100-32GB"},
    {"tesla v100-sxm2-16gb", "V100-16GB"},
    {"tesla v100-sxm2-32gb", "V100-32GB"},
    {"tesla v100-pcie-16gb", "V100-16GB"},
    {"tesla v100-pcie-32gb", "V100-32GB"},
    {"p100", "P100-16GB"},
    {"tesla p100-pcie-16gb", "P100-16GB"},
    {"tesla t4", "T4"},
    {"nvidia a10", "A10"},
    {"nvidia l40s", "L40S"},
    {"nvidia geforce rtx 3090", "RTX3090"},
    {"nvidia geforce rtx 4090", "RTX4090"},
    {"nvidia a100-sxm4-40gb", "A100-40GB"},
    {"nvidia a100-pcie-40gb", "A100-40GB"},
    {"nvidia a100-sxm4-80gb", "A100-80GB"},
    {"nvidia a100 80gb pcie", "A100-80GB"},
    {"nvidia h100 80gb hbm3", "H100-80GB"},
    {"nvidia h100 pcie", "H100-80GB"},
    {"nvidia h200", "H200-141GB"},
    {"nvidia a30", "A30-24GB"},
};

}  // namespace

const MigProfile* GpuModelInfo::FindProfile(std::string_view profile_name) const {
  int i = ProfileIndex(profile_name);
  return i < 0 ? nullptr : &mig_profiles[static_cast<size_t>(i)];
}

int GpuModelInfo::ProfileIndex(std::string_view profile_name) const {
  for (size_t i = 0; i < mig_profiles.size(); ++i) {
    if (mig_profiles[i].name == profile_name) return static_cast<int>(i);
  }
  return -1;
}

std::string CanonicalGpuModelName(std::string_view name) {
  const std::string lower = Lower(name);
  for (const GpuModelInfo& m : Catalog()) {
    if (Lower(m.name) == lower) return m.name;
  }
  for (const Alias& a : kAliases) {
    if (lower == a.alias) return a.canonical;
  }
  return std::string(name);
}

const GpuModelInfo* FindGpuModel(std::string_view name) {
  const std::string canonical = CanonicalGpuModelName(name);
  for (const GpuModelInfo& m : Catalog()) {
    if (m.name == canonical) return &m;
  }
  return nullptr;
}

std::span<const GpuModelInfo> KnownGpuModels() { return Catalog(); }

}  // namespace gpupool
