// Tests for NvmlProbe: Open without libnvidia-ml (no crash, a reason), the NVML product and MIG
// profile names → catalog mappings with real NVML names, and the probe against fake_nvml.cc (MIG
// instances with and without privileges, processes, the _v2 fallback, init failures).
#include "agent/gpu/nvml_probe.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cctype>
#include <memory>
#include <string>
#include <vector>

#include "core/gpu_catalog.h"

namespace gpupool::agent {
namespace {

TEST(NvmlProbe, OpenWithoutTheLibraryReturnsNullAndSaysWhy) {
  std::string why;
  std::unique_ptr<GpuProbe> probe = NvmlProbe::Open(&why, "/nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(probe, nullptr);
  EXPECT_NE(why.find("libnvidia-ml.so.1"), std::string::npos) << why;
  EXPECT_EQ(NvmlProbe::Open(nullptr, "/nonexistent/libnvidia-ml.so.1"), nullptr);
}

TEST(NvmlProbe, OpenTheSystemLibraryNeverCrashes) {
  std::string why;
  std::unique_ptr<GpuProbe> probe = NvmlProbe::Open(&why);
  if (probe == nullptr) {  // this machine has no NVIDIA driver (CI)
    EXPECT_NE(why.find(kNvmlLibrary), std::string::npos) << why;
    return;
  }
  EXPECT_EQ(probe->Kind(), "nvml");
  Result<std::vector<Gpu>> gpus = probe->Discover();
  ASSERT_TRUE(gpus.has_value()) << gpus.error().message;
  EXPECT_FALSE(gpus->empty());
  Result<std::vector<GpuSample>> samples = probe->Sample();
  ASSERT_TRUE(samples.has_value());
  EXPECT_EQ(samples->size(), gpus->size());
}

struct NameCase {
  std::string nvml_name;
  int64_t mem_mib;  // as NVML reports it; 0 = not given
  std::string model;
};

class NvmlNameTest : public testing::TestWithParam<NameCase> {};

TEST_P(NvmlNameTest, MapsToTheCatalog) {
  const NameCase& c = GetParam();
  EXPECT_EQ(CatalogModelForNvmlName(c.nvml_name, c.mem_mib), c.model)
      << c.nvml_name << " with " << c.mem_mib << " MiB";
}

INSTANTIATE_TEST_SUITE_P(
    RealNames, NvmlNameTest,
    testing::Values(
        NameCase{"NVIDIA A100-SXM4-80GB", 81920, "A100-80GB"},
        NameCase{"NVIDIA A100-SXM4-40GB", 40960, "A100-40GB"},
        NameCase{"NVIDIA A100-PCIE-40GB", 40960, "A100-40GB"},
        NameCase{"NVIDIA A100 80GB PCIe", 81920, "A100-80GB"},
        NameCase{"NVIDIA A100-SXM-80GB", 0, "A100-80GB"},
        NameCase{"NVIDIA H100 80GB HBM3", 81559, "H100-80GB"},
        NameCase{"NVIDIA H100 PCIe", 81559, "H100-80GB"},
        NameCase{"NVIDIA H100 NVL", 95830, "NVIDIA H100 NVL"},  // 94 GB: not the catalog's
        NameCase{"NVIDIA H200", 143771, "H200-141GB"},
        NameCase{"NVIDIA H200 NVL", 143771, "H200-141GB"},
        NameCase{"NVIDIA A30", 24576, "A30-24GB"}, NameCase{"Tesla T4", 15360, "T4"},
        NameCase{"NVIDIA T4", 15360, "T4"}, NameCase{"NVIDIA A10", 23028, "A10"},
        NameCase{"NVIDIA A10G", 23028, "NVIDIA A10G"}, NameCase{"NVIDIA L40S", 46068, "L40S"},
        NameCase{"NVIDIA L40", 46068, "NVIDIA L40"},
        NameCase{"Tesla V100-SXM2-16GB", 16160, "V100-16GB"},
        NameCase{"Tesla V100-SXM2-32GB", 32768, "V100-32GB"},
        NameCase{"Tesla V100-PCIE-32GB", 32510, "V100-32GB"},
        NameCase{"Tesla V100S-PCIE-32GB", 32510, "Tesla V100S-PCIE-32GB"},
        NameCase{"Tesla P100-PCIE-16GB", 16280, "P100-16GB"},
        NameCase{"Tesla P100-PCIE-12GB", 12198, "Tesla P100-PCIE-12GB"},
        NameCase{"NVIDIA GeForce RTX 3090", 24576, "RTX3090"},
        NameCase{"NVIDIA GeForce RTX 3090 Ti", 24564, "NVIDIA GeForce RTX 3090 Ti"},
        NameCase{"NVIDIA GeForce RTX 4090", 24564, "RTX4090"},
        NameCase{"NVIDIA GeForce RTX 4090 D", 24564, "NVIDIA GeForce RTX 4090 D"},
        NameCase{"NVIDIA GeForce RTX 4090 Laptop GPU", 16376, "NVIDIA GeForce RTX 4090 Laptop GPU"},
        NameCase{"NVIDIA GH200 480GB", 97871, "NVIDIA GH200 480GB"},
        NameCase{"NVIDIA A800-SXM4-80GB", 81920, "NVIDIA A800-SXM4-80GB"},
        NameCase{"NVIDIA RTX A6000", 49140, "NVIDIA RTX A6000"},
        // The memory NVML reports decides between models the name does not.
        NameCase{"NVIDIA A100", 40960, "A100-40GB"}, NameCase{"NVIDIA A100", 81920, "A100-80GB"},
        NameCase{"NVIDIA A100", 0, "NVIDIA A100"},  // ambiguous: opaque
        // Catalog names and aliases pass through; surrounding spaces are dropped.
        NameCase{"A100-80GB", 0, "A100-80GB"}, NameCase{"  Tesla T4 ", 0, "T4"}),
    [](const testing::TestParamInfo<NameCase>& row) {
      std::string n;
      for (char ch : row.param.nvml_name + "_" + std::to_string(row.param.mem_mib)) {
        n.push_back(std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_');
      }
      return n;
    });

struct ProfileCase {
  std::string model;
  unsigned int nvml_profile_id;
  unsigned int memory_slices;
  std::string profile;  // empty: no catalog profile
};

class NvmlProfileTest : public testing::TestWithParam<ProfileCase> {};

TEST_P(NvmlProfileTest, MapsToTheCatalog) {
  const ProfileCase& c = GetParam();
  const GpuModelInfo* model = FindGpuModel(c.model);
  ASSERT_NE(model, nullptr);
  const int got = CatalogMigProfileForNvml(*model, c.nvml_profile_id, c.memory_slices);
  EXPECT_EQ(got, c.profile.empty() ? -1 : model->ProfileIndex(c.profile))
      << c.model << " profile id " << c.nvml_profile_id << " size " << c.memory_slices;
}

INSTANTIATE_TEST_SUITE_P(
    ProfileIds, NvmlProfileTest,
    testing::Values(
        ProfileCase{"A100-80GB", 0, 1, "1g.10gb"}, ProfileCase{"A100-80GB", 0, 0, "1g.10gb"},
        ProfileCase{"A100-80GB", 7, 1, "1g.10gb+me"}, ProfileCase{"A100-80GB", 9, 2, "1g.20gb"},
        ProfileCase{"A100-80GB", 9, 0, "1g.20gb"}, ProfileCase{"A100-80GB", 1, 2, "2g.20gb"},
        ProfileCase{"A100-80GB", 2, 4, "3g.40gb"}, ProfileCase{"A100-80GB", 3, 4, "4g.40gb"},
        ProfileCase{"A100-80GB", 4, 8, "7g.80gb"}, ProfileCase{"A100-40GB", 0, 1, "1g.5gb"},
        ProfileCase{"H100-80GB", 9, 2, "1g.20gb"}, ProfileCase{"H200-141GB", 2, 4, "3g.71gb"},
        ProfileCase{"A30-24GB", 0, 1, "1g.6gb"}, ProfileCase{"A30-24GB", 8, 2, "2g.12gb+me"},
        ProfileCase{"A30-24GB", 3, 4, "4g.24gb"},
        ProfileCase{"A30-24GB", 4, 8, ""},     // no 7g on an A30
        ProfileCase{"A100-80GB", 5, 8, ""},    // 8-slice profile: not in catalog
        ProfileCase{"A100-80GB", 42, 1, ""},   // unknown id
        ProfileCase{"A100-80GB", 2, 2, ""}));  // size contradicts the profile

TEST(NvmlProbe, MigProfileFromMigDeviceName) {
  const GpuModelInfo* a100 = FindGpuModel("A100-80GB");
  ASSERT_NE(a100, nullptr);
  EXPECT_EQ(CatalogMigProfileForMigDeviceName(*a100, "NVIDIA A100-SXM4-80GB MIG 3g.40gb"),
            a100->ProfileIndex("3g.40gb"));
  EXPECT_EQ(CatalogMigProfileForMigDeviceName(*a100, "NVIDIA A100-SXM4-80GB MIG 1c.3g.40gb"),
            a100->ProfileIndex("3g.40gb"));
  EXPECT_EQ(CatalogMigProfileForMigDeviceName(*a100, "NVIDIA A100-SXM4-80GB MIG 1g.10gb+me"),
            a100->ProfileIndex("1g.10gb+me"));
  EXPECT_EQ(CatalogMigProfileForMigDeviceName(*a100, "NVIDIA A100-SXM4-80GB"), -1);
}

// The fake libnvidia-ml: loaded once more here so that its controls can be reached and its
// state outlives each probe.
class FakeNvmlTest : public testing::Test {
 protected:
  void SetUp() override { Load(FAKE_NVML_LIBRARY); }
  void TearDown() override {
    if (lib_ != nullptr) dlclose(lib_);
  }

  void Load(const char* path) {
    if (lib_ != nullptr) dlclose(lib_);
    lib_ = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    Call<void (*)(int)>("FakeNvmlSetDeviceCount")(3);
    Call<void (*)(int)>("FakeNvmlSetInitResult")(0);
    Call<void (*)(int)>("FakeNvmlSetPrivileged")(1);
    Call<void (*)(unsigned int)>("FakeNvmlSetExtraT4Processes")(0);
    Call<void (*)(int)>("FakeNvmlSetLinks")(0);
  }

  template <typename Fn>
  Fn Call(const char* name) {
    void* p = dlsym(lib_, name);
    EXPECT_NE(p, nullptr) << name;
    return reinterpret_cast<Fn>(p);
  }

  int OpenSessions() { return Call<int (*)()>("FakeNvmlOpenSessions")(); }

  void* lib_ = nullptr;
};

TEST_F(FakeNvmlTest, DiscoversModelsMemoryAndMigInstances) {
  std::string why;
  std::unique_ptr<GpuProbe> probe = NvmlProbe::Open(&why, FAKE_NVML_LIBRARY);
  ASSERT_NE(probe, nullptr) << why;
  EXPECT_EQ(probe->Kind(), "nvml");
  EXPECT_EQ(static_cast<NvmlProbe*>(probe.get())->DriverVersion(), "550.54.15");
  Result<std::vector<Gpu>> gpus = probe->Discover();
  ASSERT_TRUE(gpus.has_value()) << gpus.error().message;
  ASSERT_EQ(gpus->size(), 2u);  // the third device refuses to open and is left out
  const GpuModelInfo* a100 = FindGpuModel("A100-80GB");
  const Gpu& g0 = (*gpus)[0];
  EXPECT_EQ(g0.model, "A100-80GB");
  EXPECT_EQ(g0.uuid, "GPU-fake-a100");
  EXPECT_EQ(g0.mem_mib, 81920);
  EXPECT_EQ(g0.mem_free_mib, 81920);
  EXPECT_TRUE(g0.mig_enabled);
  // GI 2 has two compute instances (two MIG devices) but is one instance.
  EXPECT_EQ(g0.mig_instances, (std::vector<MigInstance>{
                                  {a100->ProfileIndex("1g.10gb"), 0, false},
                                  {a100->ProfileIndex("1g.20gb"), 2, false},
                                  {a100->ProfileIndex("3g.40gb"), 4, false},
                              }));
  const Gpu& g1 = (*gpus)[1];
  EXPECT_EQ(g1.model, "T4");
  EXPECT_EQ(g1.mem_mib, 15360);
  EXPECT_FALSE(g1.mig_enabled);
  EXPECT_TRUE(g1.mig_instances.empty());

  EXPECT_EQ(*probe->MigInstanceUuid(0, 4), "MIG-fake-gi1");
  EXPECT_EQ(*probe->MigInstanceUuid(0, 0), "MIG-fake-gi2-ci0");
  EXPECT_EQ(probe->MigInstanceUuid(0, 6).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(probe->MigInstanceUuid(1, 0).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(probe->MigInstanceUuid(7, 0).error().code, ErrorCode::kNotFound);

  Status st = probe->ApplyMigLayout(0, false, {});
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(st.error().message, "MIG re-partitioning through NVML is not supported by this build");
  probe->SetLoad("GPU-fake-t4", 1, 50, 50);  // ignored: real GPUs measure themselves
  probe->ClearLoad(1);

  EXPECT_EQ(OpenSessions(), 1);
  probe.reset();
  EXPECT_EQ(OpenSessions(), 0);  // nvmlShutdown on destruction
}

// Link groups: NVLink joins GPUs into one group; without NVLink, one PCIe switch does; a driver
// that answers neither leaves them unknown (-1).
TEST_F(FakeNvmlTest, LinkGroupsComeFromNvlinkElsePcieTopology) {
  const auto groups = [&](int mode) {
    Call<void (*)(int)>("FakeNvmlSetLinks")(mode);
    std::string why;
    std::unique_ptr<GpuProbe> probe = NvmlProbe::Open(&why, FAKE_NVML_LIBRARY);
    EXPECT_NE(probe, nullptr) << why;
    std::vector<int> out;
    if (probe == nullptr) return out;
    Result<std::vector<Gpu>> gpus = probe->Discover();
    EXPECT_TRUE(gpus.has_value());
    for (const Gpu& g : gpus.value_or(std::vector<Gpu>{})) out.push_back(g.link_group);
    return out;
  };
  EXPECT_EQ(groups(0), (std::vector<int>{-1, -1})) << "not answered: not known";
  EXPECT_EQ(groups(1), (std::vector<int>{0, 0})) << "NVLink between them";
  EXPECT_EQ(groups(2), (std::vector<int>{0, 0})) << "one PCIe switch";
  EXPECT_EQ(groups(3), (std::vector<int>{0, 1})) << "neither: a group each";
}

TEST_F(FakeNvmlTest, SamplesUtilisationMemoryAndProcesses) {
  std::string why;
  std::unique_ptr<GpuProbe> probe = NvmlProbe::Open(&why, FAKE_NVML_LIBRARY);
  ASSERT_NE(probe, nullptr) << why;
  Result<std::vector<GpuSample>> s = probe->Sample();
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->size(), 2u);
  const GpuSample& a100 = (*s)[0];
  EXPECT_EQ(a100.index, 0);
  EXPECT_EQ(a100.uuid, "GPU-fake-a100");
  EXPECT_EQ(a100.util_pct, -1);  // not reported in MIG mode
  EXPECT_EQ(a100.mem_used_mib, 5000);
  // Processes come from the MIG devices (the parent refuses unprivileged callers).
  EXPECT_EQ(a100.processes,
            (std::vector<GpuProcess>{{100, 4096, "MIG-fake-gi1"}, {101, 512, "MIG-fake-gi2-ci0"}}));
  EXPECT_EQ(a100.mig, (std::vector<MigSample>{{"MIG-fake-gi2-ci0", 0, -1, 512},
                                              {"MIG-fake-gi3", 2, -1, 0},
                                              {"MIG-fake-gi1", 4, -1, 4096}}));
  const GpuSample& t4 = (*s)[1];
  EXPECT_EQ(t4.util_pct, 37);
  EXPECT_EQ(t4.mem_used_mib, 1536);
  EXPECT_EQ(t4.processes, (std::vector<GpuProcess>{{200, 1024, ""}, {201, -1, ""}}));
  EXPECT_TRUE(t4.mig.empty());

  // More processes than the first buffer holds: the probe grows it and retries.
  Call<void (*)(unsigned int)>("FakeNvmlSetExtraT4Processes")(100);
  s = probe->Sample();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ((*s)[1].processes.size(), 102u);
  EXPECT_EQ((*s)[1].processes.back(), (GpuProcess{399, 1, ""}));
}

TEST_F(FakeNvmlTest, WithoutPrivilegesInfersMigStartsFromNames) {
  Call<void (*)(int)>("FakeNvmlSetPrivileged")(0);
  std::string why;
  std::unique_ptr<GpuProbe> probe = NvmlProbe::Open(&why, FAKE_NVML_LIBRARY);
  ASSERT_NE(probe, nullptr) << why;
  Result<std::vector<Gpu>> gpus = probe->Discover();
  ASSERT_TRUE(gpus.has_value());
  // Profiles from the MIG device names; starts: the first legal one, in MIG device order.
  const GpuModelInfo* a100 = FindGpuModel("A100-80GB");
  EXPECT_EQ((*gpus)[0].mig_instances, (std::vector<MigInstance>{
                                          {a100->ProfileIndex("3g.40gb"), 0, false},
                                          {a100->ProfileIndex("1g.10gb"), 4, false},
                                          {a100->ProfileIndex("1g.20gb"), 6, false},
                                      }));
}

TEST_F(FakeNvmlTest, FallsBackToV2ProcessesOnOlderDrivers) {
  Load(FAKE_NVML_V2_LIBRARY);
  ASSERT_EQ(dlsym(lib_, "nvmlDeviceGetComputeRunningProcesses_v3"), nullptr);
  std::string why;
  std::unique_ptr<GpuProbe> probe = NvmlProbe::Open(&why, FAKE_NVML_V2_LIBRARY);
  ASSERT_NE(probe, nullptr) << why;
  Result<std::vector<GpuSample>> s = probe->Sample();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ((*s)[1].processes, (std::vector<GpuProcess>{{200, 1024, ""}, {201, -1, ""}}));
}

TEST_F(FakeNvmlTest, InitFailureOrNoDeviceIsNoNvml) {
  Call<void (*)(int)>("FakeNvmlSetInitResult")(9);  // NVML_ERROR_DRIVER_NOT_LOADED
  std::string why;
  EXPECT_EQ(NvmlProbe::Open(&why, FAKE_NVML_LIBRARY), nullptr);
  EXPECT_NE(why.find("nvmlInit_v2: NVML error 9 (Driver Not Loaded)"), std::string::npos) << why;

  Call<void (*)(int)>("FakeNvmlSetInitResult")(0);
  Call<void (*)(int)>("FakeNvmlSetDeviceCount")(0);
  EXPECT_EQ(NvmlProbe::Open(&why, FAKE_NVML_LIBRARY), nullptr);
  EXPECT_NE(why.find("NVML reports no GPU"), std::string::npos) << why;
  EXPECT_EQ(OpenSessions(), 0);  // shut down again
}

}  // namespace
}  // namespace gpupool::agent
