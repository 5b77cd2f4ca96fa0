// Tests for SimulatedProbe: the --simulate-gpus grammar (valid and refused specs), discovery
// against the catalog, MIG layouts through ApplyMigLayout, loads driving the samples, uuids per
// seed, and concurrent use from two threads.
#include "agent/gpu/simulated_probe.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/gpu_catalog.h"

namespace gpupool::agent {
namespace {

std::unique_ptr<SimulatedProbe> MustParse(const std::string& spec, const std::string& seed = "n1") {
  Result<std::unique_ptr<SimulatedProbe>> p = SimulatedProbe::Parse(spec, seed);
  EXPECT_TRUE(p.has_value()) << spec << ": " << (p ? "" : p.error().message);
  return p ? std::move(*p) : nullptr;
}

std::vector<Gpu> MustDiscover(GpuProbe& probe) {
  Result<std::vector<Gpu>> gpus = probe.Discover();
  EXPECT_TRUE(gpus.has_value());
  return gpus ? *gpus : std::vector<Gpu>{};
}

std::vector<GpuSample> MustSample(GpuProbe& probe) {
  Result<std::vector<GpuSample>> s = probe.Sample();
  EXPECT_TRUE(s.has_value());
  return s ? *s : std::vector<GpuSample>{};
}

int Profile(const std::string& model, const std::string& profile) {
  const GpuModelInfo* m = FindGpuModel(model);
  return m == nullptr ? -1 : m->ProfileIndex(profile);
}

// "3g.40gb@0 3g.40gb@4": a GPU's MIG layout, for compact comparisons.
std::string Layout(const Gpu& gpu) {
  const GpuModelInfo* m = FindGpuModel(gpu.model);
  std::string out;
  for (const MigInstance& i : gpu.mig_instances) {
    if (!out.empty()) out += " ";
    out += m->mig_profiles[static_cast<size_t>(i.profile)].name + "@" + std::to_string(i.start);
  }
  return out;
}

struct ParseCase {
  std::string name;
  std::string spec;
  // On success: one "MODEL[ mig][: layout]" string per GPU.
  std::vector<std::string> gpus;
  std::string error;  // non-empty: the parse must fail with a message containing this
};

std::string Describe(const Gpu& g) {
  std::string s = g.model;
  if (g.mig_enabled) s += " mig";
  if (!g.mig_instances.empty()) s += ": " + Layout(g);
  return s;
}

class ParseTest : public testing::TestWithParam<ParseCase> {};

TEST_P(ParseTest, ParsesOrRefuses) {
  const ParseCase& c = GetParam();
  Result<std::unique_ptr<SimulatedProbe>> p = SimulatedProbe::Parse(c.spec, "n1");
  if (!c.error.empty()) {
    ASSERT_FALSE(p.has_value()) << c.spec;
    EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(p.error().message.find(c.error), std::string::npos)
        << "message: " << p.error().message << "\nexpected to contain: " << c.error;
    return;
  }
  ASSERT_TRUE(p.has_value()) << p.error().message;
  std::vector<std::string> got;
  for (const Gpu& g : MustDiscover(**p)) got.push_back(Describe(g));
  EXPECT_EQ(got, c.gpus);
  EXPECT_EQ((*p)->GpuCount(), static_cast<int>(c.gpus.size()));
  EXPECT_EQ((*p)->Kind(), "simulated");
}

INSTANTIATE_TEST_SUITE_P(
    Specs, ParseTest,
    testing::Values(
        ParseCase{"two_models",
                  "A100-80GB:4,T4:2",
                  {"A100-80GB", "A100-80GB", "A100-80GB", "A100-80GB", "T4", "T4"},
                  ""},
        ParseCase{"aliases_case_and_spaces",
                  " t4 : 1 , Tesla T4:1,h100-80gb:1",
                  {"T4", "T4", "H100-80GB"},
                  ""},
        ParseCase{"mig_mode_without_instances",
                  "A100-80GB:2:mig",
                  {"A100-80GB mig", "A100-80GB mig"},
                  ""},
        ParseCase{"mig_layout_first_legal_starts",
                  "A100-80GB:1:mig=3g.40gb+3g.40gb",
                  {"A100-80GB mig: 3g.40gb@0 3g.40gb@4"},
                  ""},
        ParseCase{"mig_layout_small_profiles",
                  "A100-80GB:1:mig=2g.20gb+1g.10gb+me+1g.10gb",
                  {"A100-80GB mig: 2g.20gb@0 1g.10gb+me@2 1g.10gb@3"},
                  ""},
        ParseCase{"mig_layout_a30",
                  "A30-24GB:1:mig=2g.12gb+1g.6gb+1g.6gb",
                  {"A30-24GB mig: 2g.12gb@0 1g.6gb@2 1g.6gb@3"},
                  ""},
        ParseCase{"mixed_mig_and_plain",
                  "H100-80GB:1:mig=7g.80gb,H100-80GB:1",
                  {"H100-80GB mig: 7g.80gb@0", "H100-80GB"},
                  ""},
        ParseCase{"unknown_model",
                  "X100:2",
                  {},
                  "'X100:2': unknown GPU model X100 (known: A100-40GB, A100-80GB"},
        ParseCase{"missing_count", "T4", {}, "'T4': expected MODEL:COUNT"},
        ParseCase{"count_not_a_number", "T4:x", {}, "'T4:x': count 'x' must be an integer"},
        ParseCase{"count_zero", "T4:0", {}, "count '0' must be an integer from 1 to 64"},
        ParseCase{"count_too_large", "T4:65", {}, "count '65'"},
        ParseCase{"negative_count", "T4:-1", {}, "count '-1'"},
        ParseCase{"empty_spec", "  ", {}, "empty GPU spec"},
        ParseCase{"empty_item", "T4:1,,T4:1", {}, "empty item"},
        ParseCase{"trailing_comma", "T4:1,", {}, "empty item"},
        ParseCase{"too_many_parts", "A100-80GB:1:mig:links=1:x", {}, "expected MODEL:COUNT"},
        ParseCase{"links_zero", "T4:2:links=0", {}, "links '0' must be an integer from 1 to 64"},
        ParseCase{"unknown_option", "A100-80GB:1:migg", {}, "unknown option 'migg'"},
        ParseCase{"mig_on_plain_model", "T4:1:mig", {}, "'T4:1:mig': T4 is not MIG-capable"},
        ParseCase{"unknown_profile",
                  "A100-80GB:1:mig=5g.50gb",
                  {},
                  "A100-80GB has no MIG profile 5g.50gb (profiles: 1g.10gb"},
        ParseCase{
            "profile_of_other_model", "A100-80GB:1:mig=3g.20gb", {}, "has no MIG profile 3g.20gb"},
        ParseCase{
            "no_room", "A100-80GB:1:mig=7g.80gb+1g.10gb", {}, "no room for 1g.10gb (instance 2)"},
        ParseCase{"media_extension_limit",
                  "A100-80GB:1:mig=1g.10gb+me+1g.10gb+me",
                  {},
                  "no room for 1g.10gb+me (instance 2)"},
        ParseCase{"empty_layout", "A100-80GB:1:mig=", {}, "empty MIG profile"},
        ParseCase{
            "too_many_gpus", "T4:64,T4:64,T4:64,T4:64,T4:1", {}, "more than 256 simulated GPUs"}),
    [](const testing::TestParamInfo<ParseCase>& row) { return row.param.name; });

TEST(SimulatedProbe, DiscoveryMatchesTheCatalog) {
  auto probe = MustParse("A100-80GB:2,T4:1,H200-141GB:1:mig=3g.71gb", "node1");
  ASSERT_NE(probe, nullptr);
  const std::vector<Gpu> gpus = MustDiscover(*probe);
  ASSERT_EQ(gpus.size(), 4u);
  for (size_t i = 0; i < gpus.size(); ++i) {
    const GpuModelInfo* m = FindGpuModel(gpus[i].model);
    ASSERT_NE(m, nullptr) << gpus[i].model;
    EXPECT_EQ(gpus[i].mem_mib, m->mem_mib);
    EXPECT_EQ(gpus[i].mem_free_mib, m->mem_mib);
    EXPECT_EQ(gpus[i].milli_free, kMilliPerGpu);
    EXPECT_TRUE(gpus[i].Idle());
    EXPECT_EQ(gpus[i].uuid, "GPU-sim-node1-" + std::to_string(i));
  }
  EXPECT_EQ(gpus[3].mig_instances,
            (std::vector<MigInstance>{{Profile("H200-141GB", "3g.71gb"), 0, false}}));
  Result<std::string> mig = probe->MigInstanceUuid(3, 0);
  ASSERT_TRUE(mig.has_value());
  EXPECT_EQ(*mig, "MIG-sim-node1-3-0-3g.71gb");
  EXPECT_EQ(probe->MigInstanceUuid(3, 4).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(probe->MigInstanceUuid(9, 0).error().code, ErrorCode::kNotFound);

  // With no load everything is idle and each MIG instance is listed.
  const std::vector<GpuSample> s = MustSample(*probe);
  ASSERT_EQ(s.size(), 4u);
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].index, static_cast<int>(i));
    EXPECT_EQ(s[i].uuid, gpus[i].uuid);
    EXPECT_EQ(s[i].util_pct, 0);
    EXPECT_EQ(s[i].mem_used_mib, 0);
    EXPECT_TRUE(s[i].processes.empty());
  }
  EXPECT_EQ(s[3].mig, (std::vector<MigSample>{{"MIG-sim-node1-3-0-3g.71gb", 0, 0, 0}}));
}

TEST(SimulatedProbe, LinksGroupConsecutiveGpusNumberedAcrossItems) {
  auto probe = MustParse("A100-80GB:8:links=4,T4:3:links=2,T4:1", "n1");
  Result<std::vector<Gpu>> gpus = probe->Discover();
  ASSERT_TRUE(gpus.has_value());
  std::vector<int> groups;
  for (const Gpu& g : *gpus) groups.push_back(g.link_group);
  EXPECT_EQ(groups, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, -1}));
  auto mig = MustParse("A100-80GB:2:links=2:mig", "n1");
  ASSERT_TRUE(mig->Discover().has_value());
  EXPECT_EQ((*mig->Discover())[1].link_group, 0);
  EXPECT_TRUE((*mig->Discover())[1].mig_enabled);
}

TEST(SimulatedProbe, SeedsGiveDistinctUuids) {
  auto a = MustParse("T4:2,A100-80GB:1:mig=7g.80gb", "node-a");
  auto b = MustParse("T4:2,A100-80GB:1:mig=7g.80gb", "node-b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const std::vector<Gpu> ga = MustDiscover(*a);
  const std::vector<Gpu> gb = MustDiscover(*b);
  ASSERT_EQ(ga.size(), gb.size());
  for (size_t i = 0; i < ga.size(); ++i) {
    EXPECT_NE(ga[i].uuid, gb[i].uuid);
    EXPECT_EQ(ga[i].uuid, "GPU-sim-node-a-" + std::to_string(i));
  }
  EXPECT_NE(*a->MigInstanceUuid(2, 0), *b->MigInstanceUuid(2, 0));
  // The same seed gives the same uuids (deterministic); odd characters are replaced.
  EXPECT_EQ(MustDiscover(*MustParse("T4:1", "node-a"))[0].uuid, ga[0].uuid);
  EXPECT_EQ(MustDiscover(*MustParse("T4:1", "my host:1"))[0].uuid, "GPU-sim-my-host-1-0");
  EXPECT_EQ(MustDiscover(*MustParse("T4:1", ""))[0].uuid, "GPU-sim-local-0");
}

TEST(SimulatedProbe, LoadsDriveUtilisationAndMemory) {
  auto probe = MustParse("T4:2");
  ASSERT_NE(probe, nullptr);
  const std::string gpu0 = MustDiscover(*probe)[0].uuid;
  probe->SetLoad(gpu0, 11, 30, 1000);
  probe->SetLoad(gpu0, 12, 45, 2000);
  std::vector<GpuSample> s = MustSample(*probe);
  EXPECT_EQ(s[0].util_pct, 75);
  EXPECT_EQ(s[0].mem_used_mib, 3000);
  EXPECT_EQ(s[0].processes, (std::vector<GpuProcess>{{11, 1000, ""}, {12, 2000, ""}}));
  EXPECT_EQ(s[1].util_pct, 0);  // the other GPU is untouched
  EXPECT_TRUE(s[1].processes.empty());

  // Setting the same (uuid, pid) replaces the load; ClearLoad removes a process.
  probe->SetLoad(gpu0, 11, 10, 500);
  s = MustSample(*probe);
  EXPECT_EQ(s[0].util_pct, 55);
  EXPECT_EQ(s[0].mem_used_mib, 2500);
  probe->ClearLoad(12);
  s = MustSample(*probe);
  EXPECT_EQ(s[0].util_pct, 10);
  EXPECT_EQ(s[0].processes, (std::vector<GpuProcess>{{11, 500, ""}}));

  // Utilisation is capped at 100, memory at the GPU's; out-of-range inputs are clamped.
  probe->SetLoad(gpu0, 13, 95, 20000);
  probe->SetLoad(gpu0, 14, 250, -5);
  s = MustSample(*probe);
  EXPECT_EQ(s[0].util_pct, 100);
  EXPECT_EQ(s[0].mem_used_mib, 15360);
  EXPECT_EQ(s[0].processes.back(), (GpuProcess{14, 0, ""}));

  // A uuid the probe does not know counts nowhere.
  probe->SetLoad("GPU-elsewhere", 15, 50, 50);
  s = MustSample(*probe);
  EXPECT_EQ(s[1].util_pct, 0);
  for (const GpuSample& g : s) {
    for (const GpuProcess& p : g.processes) EXPECT_NE(p.pid, 15);
  }

  // A process on two GPUs shows on both and ClearLoad removes it from both.
  const std::string gpu1 = MustDiscover(*probe)[1].uuid;
  probe->SetLoad(gpu1, 11, 20, 100);
  s = MustSample(*probe);
  EXPECT_EQ(s[1].processes, (std::vector<GpuProcess>{{11, 100, ""}}));
  probe->ClearLoad(11);
  s = MustSample(*probe);
  EXPECT_TRUE(s[1].processes.empty());
  EXPECT_EQ(s[1].util_pct, 0);
}

TEST(SimulatedProbe, MigLoadsCountPerInstanceAndByComputeShare) {
  auto probe = MustParse("A100-80GB:1:mig=3g.40gb+2g.20gb+1g.10gb", "n1");
  ASSERT_NE(probe, nullptr);
  EXPECT_EQ(Layout(MustDiscover(*probe)[0]), "3g.40gb@0 2g.20gb@4 1g.10gb@6");
  const std::string three_g = *probe->MigInstanceUuid(0, 0);
  const std::string one_g = *probe->MigInstanceUuid(0, 6);
  probe->SetLoad(three_g, 21, 100, 30000);
  probe->SetLoad(one_g, 22, 60, 50000);  // more than the instance's 10240 MiB
  std::vector<GpuSample> s = MustSample(*probe);
  ASSERT_EQ(s[0].mig.size(), 3u);
  EXPECT_EQ(s[0].mig[0], (MigSample{three_g, 0, 100, 30000}));
  EXPECT_EQ(s[0].mig[1].util_pct, 0);
  EXPECT_EQ(s[0].mig[2], (MigSample{one_g, 6, 60, 10240}));
  // 100 % of 3 of 7 compute slices + 60 % of 1 of 7: (300 + 60) / 7 = 51.4 → 51.
  EXPECT_EQ(s[0].util_pct, 51);
  EXPECT_EQ(s[0].mem_used_mib, 30000 + 10240);
  EXPECT_EQ(s[0].processes, (std::vector<GpuProcess>{{21, 30000, three_g}, {22, 50000, one_g}}));

  // Two processes on one instance: its utilisation is capped at 100.
  probe->SetLoad(one_g, 23, 70, 0);
  s = MustSample(*probe);
  EXPECT_EQ(s[0].mig[2].util_pct, 100);
  EXPECT_EQ(s[0].util_pct, 57);  // (300 + 100) / 7 = 57.1
}

struct LayoutCase {
  std::string name;
  std::string spec;  // the probe's starting point
  bool mig_enabled;
  std::vector<std::pair<std::string, int>> instances;  // profile name, start
  std::string error;                                   // empty: accepted
};

class ApplyMigLayoutTest : public testing::TestWithParam<LayoutCase> {};

TEST_P(ApplyMigLayoutTest, AcceptsLegalLayoutsOnly) {
  const LayoutCase& c = GetParam();
  auto probe = MustParse(c.spec);
  ASSERT_NE(probe, nullptr);
  const std::string model = MustDiscover(*probe)[0].model;
  std::vector<MigInstance> instances;
  for (const auto& [profile, start] : c.instances) {
    const int idx = profile == "bogus" ? 99 : Profile(model, profile);
    instances.push_back(MigInstance{idx, start, false});
  }
  const std::vector<Gpu> before = MustDiscover(*probe);
  Status st = probe->ApplyMigLayout(0, c.mig_enabled, instances);
  if (!c.error.empty()) {
    ASSERT_FALSE(st.has_value());
    EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(st.error().message.find(c.error), std::string::npos)
        << "message: " << st.error().message << "\nexpected to contain: " << c.error;
    EXPECT_EQ(MustDiscover(*probe), before);  // nothing changed
    return;
  }
  ASSERT_TRUE(st.has_value()) << st.error().message;
  const Gpu after = MustDiscover(*probe)[0];
  EXPECT_EQ(after.mig_enabled, c.mig_enabled);
  ASSERT_EQ(after.mig_instances.size(), instances.size());
  for (const MigInstance& m : instances) {
    EXPECT_TRUE(probe->MigInstanceUuid(0, m.start).has_value());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ApplyMigLayoutTest,
    testing::Values(
        LayoutCase{
            "enable_with_instances", "A100-80GB:1", true, {{"4g.40gb", 0}, {"3g.40gb", 4}}, ""},
        LayoutCase{"enable_empty", "A100-80GB:1", true, {}, ""},
        LayoutCase{"disable", "A100-80GB:1:mig=7g.80gb", false, {}, ""},
        LayoutCase{"seven_small",
                   "A100-80GB:1:mig",
                   true,
                   {{"1g.10gb", 0},
                    {"1g.10gb", 1},
                    {"1g.10gb", 2},
                    {"1g.10gb", 3},
                    {"1g.10gb", 4},
                    {"1g.10gb", 5},
                    {"1g.10gb", 6}},
                   ""},
        LayoutCase{"illegal_start",
                   "A100-80GB:1",
                   true,
                   {{"3g.40gb", 2}},
                   "instance 1 (3g.40gb at slot 2): 3g.40gb may only start at slot 0, 4"},
        LayoutCase{"overlap",
                   "A100-80GB:1",
                   true,
                   {{"4g.40gb", 0}, {"2g.20gb", 2}},
                   "instance 2 (2g.20gb at slot 2) overlaps instance 1 (4g.40gb at slot 0)"},
        LayoutCase{"too_many_of_a_profile",
                   "A100-80GB:1",
                   true,
                   {{"1g.10gb+me", 0}, {"1g.10gb+me", 1}},
                   "at most 1 1g.10gb+me per GPU"},
        LayoutCase{"eighth_slot_unusable",
                   "A100-80GB:1",
                   true,
                   {{"1g.10gb", 7}},
                   "may only start at slot 0, 1, 2, 3, 4, 5, 6"},
        LayoutCase{"bad_profile_index",
                   "A100-80GB:1",
                   true,
                   {{"bogus", 0}},
                   "profile index 99 out of range"},
        LayoutCase{"instances_with_mig_off",
                   "A100-80GB:1",
                   false,
                   {{"7g.80gb", 0}},
                   "MIG instances given with MIG mode off"},
        LayoutCase{"plain_model", "T4:1", true, {}, "GPU 0 (T4) is not MIG-capable"}),
    [](const testing::TestParamInfo<LayoutCase>& row) { return row.param.name; });

TEST(SimulatedProbe, ApplyMigLayoutRefusesBadIndexAndBusyInstances) {
  auto probe = MustParse("A100-80GB:1:mig=3g.40gb+3g.40gb,T4:1");
  ASSERT_NE(probe, nullptr);
  EXPECT_EQ(probe->ApplyMigLayout(5, false, {}).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(probe->ApplyMigLayout(-1, false, {}).error().code, ErrorCode::kInvalidArgument);

  const int g3 = Profile("A100-80GB", "3g.40gb");
  const int g1 = Profile("A100-80GB", "1g.10gb");
  const std::string busy = *probe->MigInstanceUuid(0, 4);
  probe->SetLoad(busy, 77, 50, 100);

  // Destroying the busy instance is refused; so is leaving MIG mode.
  Status st = probe->ApplyMigLayout(0, true, {{g3, 0, false}});
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(st.error().message.find("3g.40gb at slot 4 (" + busy + ") runs processes (pid 77)"),
            std::string::npos)
      << st.error().message;
  st = probe->ApplyMigLayout(0, false, {});
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(st.error().message.find("turning MIG mode off needs an idle GPU"), std::string::npos);

  // Re-partitioning the idle half while the busy one keeps running is fine, and keeps its uuid.
  ASSERT_TRUE(probe->ApplyMigLayout(0, true, {{g1, 0, false}, {g1, 1, false}, {g3, 4, false}}));
  EXPECT_EQ(*probe->MigInstanceUuid(0, 4), busy);
  EXPECT_EQ(Layout(MustDiscover(*probe)[0]), "1g.10gb@0 1g.10gb@1 3g.40gb@4");
  EXPECT_EQ(MustSample(*probe)[0].mig.size(), 3u);
  EXPECT_EQ(MustSample(*probe)[0].mig[2].util_pct, 50);

  // Once the process is gone, MIG mode can be turned off; the old MIG uuid then counts nowhere.
  probe->ClearLoad(77);
  ASSERT_TRUE(probe->ApplyMigLayout(0, false, {}));
  probe->SetLoad(busy, 78, 50, 100);
  EXPECT_EQ(MustSample(*probe)[0].util_pct, 0);
  EXPECT_TRUE(MustSample(*probe)[0].mig.empty());
  probe->ClearLoad(78);

  // A process on a plain GPU blocks turning MIG mode on.
  const std::string a100 = MustDiscover(*probe)[0].uuid;
  probe->SetLoad(a100, 79, 10, 10);
  st = probe->ApplyMigLayout(0, true, {});
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kFailedPrecondition);
}

TEST(SimulatedProbe, IsSafeToShareBetweenTwoThreads) {
  auto probe = MustParse("A100-80GB:4:mig=3g.40gb+3g.40gb,T4:4");
  ASSERT_NE(probe, nullptr);
  std::vector<std::string> uuids;
  for (const Gpu& g : MustDiscover(*probe)) uuids.push_back(g.uuid);
  for (int i = 0; i < 4; ++i) uuids.push_back(*probe->MigInstanceUuid(i, 4));
  std::atomic<bool> done{false};
  std::atomic<int> samples{0};
  std::thread sampler([&] {
    while (!done.load()) {
      Result<std::vector<GpuSample>> s = probe->Sample();
      ASSERT_TRUE(s.has_value());
      ASSERT_EQ(s->size(), 8u);
      for (const GpuSample& g : *s) {
        ASSERT_GE(g.util_pct, 0);
        ASSERT_LE(g.util_pct, 100);
      }
      ASSERT_TRUE(probe->Discover().has_value());
      samples.fetch_add(1);
    }
  });
  const int g3 = Profile("A100-80GB", "3g.40gb");
  for (int round = 0; round < 2000; ++round) {
    const int pid = 1000 + round % 50;
    probe->SetLoad(uuids[static_cast<size_t>(round) % uuids.size()], pid, round % 101, round);
    if (round % 7 == 0) probe->ClearLoad(pid);
    if (round % 100 == 0) {
      // Re-partition GPU 0's first half back and forth (idle: loads only hit slot 4 there).
      const bool small = (round / 100) % 2 == 0;
      std::vector<MigInstance> layout = {{g3, 4, false}};
      if (!small) layout.push_back({g3, 0, false});
      ASSERT_TRUE(probe->ApplyMigLayout(0, true, layout)) << round;
    }
  }
  while (samples.load() < 10) std::this_thread::yield();
  done.store(true);
  sampler.join();
  for (int pid = 1000; pid < 1050; ++pid) probe->ClearLoad(pid);
  for (const GpuSample& g : MustSample(*probe)) {
    EXPECT_EQ(g.util_pct, 0);
    EXPECT_TRUE(g.processes.empty());
  }
}

}  // namespace
}  // namespace gpupool::agent
