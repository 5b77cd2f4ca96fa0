// Tests for core/gpu_catalog: model lookup by canonical name and alias, opaque models, memory and
// MIG capability of each model, and the internal consistency of every MIG profile.
#include "core/gpu_catalog.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace gpupool {
namespace {

// ---------------------------------------------------------------------------------------------
// Lookup: canonical names and aliases resolve case-insensitively; unknown names stay opaque.

struct LookupRow {
  const char* name;
  const char* input;
  const char* canonical;  // CanonicalGpuModelName(input)
  bool known;             // FindGpuModel(input) != nullptr
};
void PrintTo(const LookupRow& row, std::ostream* os) { *os << row.name; }

class GpuLookupTest : public testing::TestWithParam<LookupRow> {};

TEST_P(GpuLookupTest, Resolves) {
  const LookupRow& row = GetParam();
  EXPECT_EQ(CanonicalGpuModelName(row.input), row.canonical);
  const GpuModelInfo* m = FindGpuModel(row.input);
  if (row.known) {
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->name, row.canonical);
    // Every spelling yields the one catalog entry.
    EXPECT_EQ(m, FindGpuModel(row.canonical));
  } else {
    EXPECT_EQ(m, nullptr);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Names, GpuLookupTest,
    testing::ValuesIn(std::vector<LookupRow>{
        // Canonical names, exactly and in other cases.
        {"canonical_a100_80gb", "A100-80GB", "A100-80GB", true},
        {"canonical_lower", "a100-80gb", "A100-80GB", true},
        {"canonical_mixed_case", "h100-80Gb", "H100-80GB", true},
        {"canonical_t4", "T4", "T4", true},
        {"canonical_lower_rtx", "rtx4090", "RTX4090", true},
        // Alibaba trace names.
        {"trace_v100m16", "V100M16", "V100-16GB", true},
        {"trace_v100m16_lower", "v100m16", "V100-16GB", true},
        {"trace_v100m32", "V100M32", "V100-32GB", true},
        {"trace_p100", "P100", "P100-16GB", true},
        // NVML nvmlDeviceGetName strings.
        {"nvml_a100_sxm4_80gb", "NVIDIA A100-SXM4-80GB", "A100-80GB", true},
        {"nvml_a100_sxm4_80gb_mixed", "Nvidia A100-sxm4-80GB", "A100-80GB", true},
        {"nvml_a100_sxm4_80gb_lower", "nvidia a100-sxm4-80gb", "A100-80GB", true},
        {"nvml_a100_80gb_pcie", "NVIDIA A100 80GB PCIe", "A100-80GB", true},
        {"nvml_a100_sxm4_40gb", "NVIDIA A100-SXM4-40GB", "A100-40GB", true},
        {"nvml_a100_pcie_40gb", "NVIDIA A100-PCIE-40GB", "A100-40GB", true},
        {"nvml_h100_hbm3", "NVIDIA H100 80GB HBM3", "H100-80GB", true},
        {"nvml_h100_pcie", "NVIDIA H100 PCIe", "H100-80GB", true},
        {"nvml_h200", "NVIDIA H200", "H200-141GB", true},
        {"nvml_a30", "NVIDIA A30", "A30-24GB", true},
        {"nvml_tesla_t4", "Tesla T4", "T4", true},
        {"nvml_tesla_t4_upper", "TESLA T4", "T4", true},
        {"nvml_v100_sxm2_16gb", "Tesla V100-SXM2-16GB", "V100-16GB", true},
        {"nvml_v100_sxm2_32gb", "Tesla V100-SXM2-32GB", "V100-32GB", true},
        {"nvml_v100_pcie_16gb", "Tesla V100-PCIE-16GB", "V100-16GB", true},
        {"nvml_v100_pcie_32gb", "Tesla V100-PCIE-32GB", "V100-32GB", true},
        {"nvml_p100_pcie", "Tesla P100-PCIE-16GB", "P100-16GB", true},
        {"nvml_a10", "NVIDIA A10", "A10", true},
        {"nvml_l40s", "NVIDIA L40S", "L40S", true},
        {"nvml_rtx3090", "NVIDIA GeForce RTX 3090", "RTX3090", true},
        {"nvml_rtx4090", "NVIDIA GeForce RTX 4090", "RTX4090", true},
        // Opaque trace models and unknown names: returned unchanged (case kept), no info.
        {"opaque_g2", "G2", "G2", false},
        {"opaque_g3", "G3", "G3", false},
        {"opaque_lower_kept", "g2", "g2", false},
        {"opaque_empty", "", "", false},
        {"opaque_partial_name", "A100", "A100", false},
        {"opaque_other_vendor", "MI300X", "MI300X", false},
    }),
    [](const testing::TestParamInfo<LookupRow>& row_info) {
      return std::string(row_info.param.name);
    });

// ---------------------------------------------------------------------------------------------
// Each model: memory and MIG geometry.

struct ModelRow {
  const char* name;
  const char* model;
  int64_t mem_mib;
  int compute_slices;  // 0 when not MIG-capable
  int memory_slots;
  size_t profiles;
};
void PrintTo(const ModelRow& row, std::ostream* os) { *os << row.name; }

const std::vector<ModelRow>& ModelRows() {
  static const std::vector<ModelRow> rows = {
      // 8 memory slots / 7 compute slices; 7 profiles: 1g, 1g+me, 1g.<2x>, 2g, 3g, 4g, 7g.
      {"A100_40GB", "A100-40GB", 40960, 7, 8, 7},     // 40 GiB
      {"A100_80GB", "A100-80GB", 81920, 7, 8, 7},     // 80 GiB
      {"H100_80GB", "H100-80GB", 81920, 7, 8, 7},     // 80 GiB
      {"H200_141GB", "H200-141GB", 144384, 7, 8, 7},  // 141 GiB
      // 4 slots / 4 compute slices; 1g, 1g+me, 2g, 2g+me, 4g.
      {"A30_24GB", "A30-24GB", 24576, 4, 4, 5},  // 24 GiB
      // Not MIG-capable: memory as nvidia-smi reports it.
      {"V100_16GB", "V100-16GB", 16384, 0, 0, 0},
      {"V100_32GB", "V100-32GB", 32768, 0, 0, 0},
      {"P100_16GB", "P100-16GB", 16384, 0, 0, 0},
      {"T4", "T4", 15360, 0, 0, 0},
      {"A10", "A10", 23028, 0, 0, 0},
      {"L40S", "L40S", 46068, 0, 0, 0},
      {"RTX3090", "RTX3090", 24576, 0, 0, 0},
      {"RTX4090", "RTX4090", 24564, 0, 0, 0},
  };
  return rows;
}

class GpuModelTest : public testing::TestWithParam<ModelRow> {};

TEST_P(GpuModelTest, MemoryAndMigGeometry) {
  const ModelRow& row = GetParam();
  const GpuModelInfo* m = FindGpuModel(row.model);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->name, row.model);
  EXPECT_EQ(m->mem_mib, row.mem_mib);
  EXPECT_EQ(m->MigCapable(), row.compute_slices > 0);
  EXPECT_EQ(m->mig_compute_slices, row.compute_slices);
  EXPECT_EQ(m->mig_memory_slots, row.memory_slots);
  EXPECT_EQ(m->mig_profiles.size(), row.profiles);
}

INSTANTIATE_TEST_SUITE_P(Models, GpuModelTest, testing::ValuesIn(ModelRows()),
                         [](const testing::TestParamInfo<ModelRow>& row_info) {
                           return std::string(row_info.param.name);
                         });

// The table above covers the whole catalog, in catalog order.
TEST(GpuCatalogTest, KnownModelsAreExactlyTheTable) {
  const auto known = KnownGpuModels();
  ASSERT_EQ(known.size(), ModelRows().size());
  for (size_t i = 0; i < known.size(); ++i) EXPECT_EQ(known[i].name, ModelRows()[i].model);
}

// ---------------------------------------------------------------------------------------------
// Every MIG profile of every MIG-capable model is self-consistent.

// "3g.40gb+me" -> 3 compute slices, 40 GB.
void ParseProfileName(const std::string& name, int* compute, int* gb) {
  *compute = std::stoi(name.substr(0, name.find('g')));
  const size_t dot = name.find('.');
  *gb = std::stoi(name.substr(dot + 1, name.find("gb") - dot - 1));
}

TEST(GpuCatalogTest, EveryMigProfileIsConsistent) {
  int checked = 0;
  for (const GpuModelInfo& m : KnownGpuModels()) {
    if (!m.MigCapable()) continue;
    const int64_t slice_mib = m.mem_mib / m.mig_memory_slots;
    for (const MigProfile& p : m.mig_profiles) {
      SCOPED_TRACE(m.name + " " + p.name);
      ++checked;
      // Memory: memory slices x (model memory / slots), e.g. A100-80GB 3g.40gb: 4 x 10240.
      EXPECT_EQ(p.mem_mib, p.memory_slices * slice_mib);
      // The name's "Ng" is the compute slices, its "NNgb" the memory in GB within 1 GB
      // (H200 3g.71gb: 4 x 18048 MiB = 70.5 GiB).
      int compute = 0;
      int gb = 0;
      ParseProfileName(p.name, &compute, &gb);
      EXPECT_EQ(p.compute_slices, compute);
      EXPECT_LE(std::abs(static_cast<double>(p.mem_mib) / 1024.0 - gb), 1.0);
      EXPECT_GE(p.compute_slices, 1);
      EXPECT_LE(p.compute_slices, m.mig_compute_slices);
      EXPECT_GE(p.memory_slices, 1);
      EXPECT_LE(p.memory_slices, m.mig_memory_slots);
      // Starts are aligned to the size and stay inside the GPU; at most one instance per start.
      ASSERT_FALSE(p.starts.empty());
      for (int s : p.starts) {
        EXPECT_EQ(s % p.memory_slices, 0) << "start " << s;
        EXPECT_LE(s + p.memory_slices, m.mig_memory_slots) << "start " << s;
      }
      EXPECT_GE(p.max_instances, 1);
      EXPECT_LE(p.max_instances, static_cast<int>(p.starts.size()));
      // max_instances x compute never exceeds the GPU's compute slices.
      EXPECT_LE(p.max_instances * p.compute_slices, m.mig_compute_slices);
      // Lookup helpers agree with the table.
      const int idx = m.ProfileIndex(p.name);
      ASSERT_GE(idx, 0);
      EXPECT_EQ(&m.mig_profiles[static_cast<size_t>(idx)], &p);
      EXPECT_EQ(m.FindProfile(p.name), &p);
      // A media-extension profile is its base profile limited to one instance.
      const size_t me = p.name.find("+me");
      if (me != std::string::npos) {
        const MigProfile* base = m.FindProfile(p.name.substr(0, me));
        ASSERT_NE(base, nullptr);
        EXPECT_EQ(p.max_instances, 1);
        EXPECT_EQ(p.compute_slices, base->compute_slices);
        EXPECT_EQ(p.memory_slices, base->memory_slices);
        EXPECT_EQ(p.starts, base->starts);
        EXPECT_EQ(p.mem_mib, base->mem_mib);
      }
    }
  }
  // 4 eight-slot models x 7 + A30 x 5.
  EXPECT_EQ(checked, 33);
}

// Profile memory per model, e.g. A100-80GB: 10240 MiB slices.
struct ProfileMemRow {
  const char* name;
  const char* model;
  const char* profile;
  int64_t mem_mib;
};
void PrintTo(const ProfileMemRow& row, std::ostream* os) { *os << row.name; }

class GpuProfileMemTest : public testing::TestWithParam<ProfileMemRow> {};

TEST_P(GpuProfileMemTest, Memory) {
  const ProfileMemRow& row = GetParam();
  const MigProfile* p = FindGpuModel(row.model)->FindProfile(row.profile);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->mem_mib, row.mem_mib);
}

INSTANTIATE_TEST_SUITE_P(Profiles, GpuProfileMemTest,
                         testing::ValuesIn(std::vector<ProfileMemRow>{
                             {"A100_80GB_1g_10gb", "A100-80GB", "1g.10gb", 10240},    // 1 x 81920/8
                             {"A100_80GB_1g_20gb", "A100-80GB", "1g.20gb", 20480},    // 2 slices
                             {"A100_80GB_3g_40gb", "A100-80GB", "3g.40gb", 40960},    // 4 slices
                             {"A100_80GB_7g_80gb", "A100-80GB", "7g.80gb", 81920},    // all 8
                             {"A100_40GB_1g_5gb", "A100-40GB", "1g.5gb", 5120},       // 1 x 40960/8
                             {"A100_40GB_4g_20gb", "A100-40GB", "4g.20gb", 20480},    // 4 slices
                             {"H100_80GB_2g_20gb", "H100-80GB", "2g.20gb", 20480},    // 2 x 10240
                             {"H200_141GB_1g_18gb", "H200-141GB", "1g.18gb", 18048},  // 144384/8
                             {"A30_24GB_2g_12gb", "A30-24GB", "2g.12gb", 12288},      // 2 x 24576/4
                             {"A30_24GB_4g_24gb", "A30-24GB", "4g.24gb", 24576},      // all 4
                         }),
                         [](const testing::TestParamInfo<ProfileMemRow>& row_info) {
                           return std::string(row_info.param.name);
                         });

// Profile names belong to one model: A100-40GB's 3g.20gb is not an A100-80GB profile.
TEST(GpuCatalogTest, UnknownProfileNames) {
  const GpuModelInfo* a100 = FindGpuModel("A100-80GB");
  ASSERT_NE(a100, nullptr);
  for (const char* name : {"3g.20gb", "5g.50gb", "", "3g", "7g.80gb+me"}) {
    EXPECT_EQ(a100->ProfileIndex(name), -1) << name;
    EXPECT_EQ(a100->FindProfile(name), nullptr) << name;
  }
  const GpuModelInfo* t4 = FindGpuModel("T4");
  ASSERT_NE(t4, nullptr);
  EXPECT_EQ(t4->ProfileIndex("1g.10gb"), -1);
}

}  // namespace
}  // namespace gpupool
