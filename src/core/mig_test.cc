// Tests for core/mig: NVIDIA's MIG placement rules per profile, mixed and stranding layouts, and
// FindMigPlacement / ApplyMigPlacement (use a free instance, create one, re-partition).
#include "core/mig.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/node.h"

namespace gpupool {
namespace {

const GpuModelInfo& Model(const std::string& name) {
  const GpuModelInfo* m = FindGpuModel(name);
  if (m == nullptr) {
    ADD_FAILURE() << "no catalog model " << name;
    static const GpuModelInfo kEmpty;
    return kEmpty;
  }
  return *m;
}

int Idx(const std::string& model, const std::string& profile) {
  const int i = Model(model).ProfileIndex(profile);
  EXPECT_GE(i, 0) << model << " has no MIG profile " << profile;
  return i;
}

// One instance of a test layout, by profile name.
struct Inst {
  std::string profile;
  int start;
  bool in_use;
};

// A GPU of `model` fresh from Node::Make, switched to MIG mode with `instances`.
Gpu MigGpu(const std::string& model, const std::vector<Inst>& instances) {
  Gpu gpu = Node::Make("n", 64000, 262144, 1, model).gpus.at(0);
  gpu.mig_enabled = true;
  for (const Inst& i : instances) {
    gpu.mig_instances.push_back(MigInstance{Idx(model, i.profile), i.start, i.in_use});
  }
  return gpu;
}

// The same GPU, not in MIG mode.
Gpu PlainGpu(const std::string& model) {
  return Node::Make("n", 64000, 262144, 1, model).gpus.at(0);
}

uint32_t Span(int start, int size) { return ((1u << size) - 1u) << start; }

int CountOf(const Gpu& gpu, int profile) {
  return static_cast<int>(
      std::count_if(gpu.mig_instances.begin(), gpu.mig_instances.end(),
                    [&](const MigInstance& m) { return m.profile == profile; }));
}

// The base 1-slice profile (1 compute, 1 memory slice, no media extensions) and, on 8-slot GPUs,
// the 1g profile with two memory slices; -1 when absent.
int FindShape(const GpuModelInfo& m, int compute, int memory) {
  for (size_t i = 0; i < m.mig_profiles.size(); ++i) {
    const MigProfile& p = m.mig_profiles[i];
    if (p.compute_slices == compute && p.memory_slices == memory &&
        p.name.find("+me") == std::string::npos) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// In-use instances covering every memory slot outside `keep`, so only `keep` is free: a 1g on
// each slot, except that on an 8-slot GPU slots 6-7 are covered by one 1g.<2x> at 6 (no 1g may
// start at 7). When 6 is kept and 7 is not, 7 stays free: no profile can start there alone.
std::vector<MigInstance> BlockAllBut(const GpuModelInfo& m, uint32_t keep) {
  const int one = FindShape(m, 1, 1);
  const int two = FindShape(m, 1, 2);
  std::vector<MigInstance> out;
  for (int t = 0; t < m.mig_memory_slots; ++t) {
    if (keep & (1u << t)) continue;
    const bool last = t == m.mig_memory_slots - 1;
    const bool pair = m.mig_memory_slots == 8 && t == 6 && !(keep & (1u << 7));
    if (pair) {
      out.push_back(MigInstance{two, 6, true});
      ++t;
    } else if (!(m.mig_memory_slots == 8 && last)) {
      out.push_back(MigInstance{one, t, true});
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Every profile against NVIDIA's "Supported MIG Profiles" tables and `nvidia-smi mig -lgipp`
// placements. 8-slot GPUs (A100, H100, H200): 1g {0..6}:1 x7, 1g+me {0..6}:1 x1, 1g.<2x>
// {0,2,4,6}:2 x4, 2g {0,2,4}:2 x3, 3g {0,4}:4 x2, 4g {0}:4 x1, 7g {0}:8 x1. A30: 1g {0..3}:1 x4,
// 1g+me x1, 2g {0,2}:2 x2, 2g+me x1, 4g {0}:4 x1.

struct ProfileRow {
  const char* name;
  const char* model;
  const char* profile;
  int compute_slices;
  int memory_slices;
  std::vector<int> starts;  // legal start slots
  int max_instances;
  int first_start;  // FindMigPlacement's choice on an empty GPU (most room kept, see mig.cc)
};
void PrintTo(const ProfileRow& row, std::ostream* os) { *os << row.name; }

const std::vector<ProfileRow>& ProfileRows() {
  static const std::vector<ProfileRow> rows = {
      // A100-80GB. First choices by SlotRoomScore (Σ compute x free legal starts, +me excluded):
      // 1g: slot 6 scores 22 (1g 6 + 1g.20gb 3 + 2g 6 + 3g@0 3 + 4g 4), slot 0 only 16, 4/5: 20.
      {"A100_80GB_1g_10gb", "A100-80GB", "1g.10gb", 1, 1, {0, 1, 2, 3, 4, 5, 6}, 7, 6},
      // +me: same slots, same room as 1g, but only one per GPU (one set of media engines).
      {"A100_80GB_1g_10gb_me", "A100-80GB", "1g.10gb+me", 1, 1, {0, 1, 2, 3, 4, 5, 6}, 1, 6},
      // 1g.20gb spans 2 slots: @6 (slots 6-7) scores 22 vs @4 19, @0 15.
      {"A100_80GB_1g_20gb", "A100-80GB", "1g.20gb", 1, 2, {0, 2, 4, 6}, 4, 6},
      // 2g never reaches slot 7: @4 scores 19 (keeps 4g and 3g@0), @0/@2 only 15.
      {"A100_80GB_2g_20gb", "A100-80GB", "2g.20gb", 2, 2, {0, 2, 4}, 3, 4},
      // 3g: @4 keeps 4g@0 (score 17) while @0 kills it (10).
      {"A100_80GB_3g_40gb", "A100-80GB", "3g.40gb", 3, 4, {0, 4}, 2, 4},
      {"A100_80GB_4g_40gb", "A100-80GB", "4g.40gb", 4, 4, {0}, 1, 0},
      {"A100_80GB_7g_80gb", "A100-80GB", "7g.80gb", 7, 8, {0}, 1, 0},
      // H100-80GB: the same geometry and names as A100-80GB.
      {"H100_80GB_1g_10gb", "H100-80GB", "1g.10gb", 1, 1, {0, 1, 2, 3, 4, 5, 6}, 7, 6},
      {"H100_80GB_1g_10gb_me", "H100-80GB", "1g.10gb+me", 1, 1, {0, 1, 2, 3, 4, 5, 6}, 1, 6},
      {"H100_80GB_1g_20gb", "H100-80GB", "1g.20gb", 1, 2, {0, 2, 4, 6}, 4, 6},
      {"H100_80GB_2g_20gb", "H100-80GB", "2g.20gb", 2, 2, {0, 2, 4}, 3, 4},
      {"H100_80GB_3g_40gb", "H100-80GB", "3g.40gb", 3, 4, {0, 4}, 2, 4},
      {"H100_80GB_4g_40gb", "H100-80GB", "4g.40gb", 4, 4, {0}, 1, 0},
      {"H100_80GB_7g_80gb", "H100-80GB", "7g.80gb", 7, 8, {0}, 1, 0},
      // A100-40GB: same geometry, half the memory per slice (5 GB), so the names halve.
      {"A100_40GB_1g_5gb", "A100-40GB", "1g.5gb", 1, 1, {0, 1, 2, 3, 4, 5, 6}, 7, 6},
      {"A100_40GB_1g_5gb_me", "A100-40GB", "1g.5gb+me", 1, 1, {0, 1, 2, 3, 4, 5, 6}, 1, 6},
      {"A100_40GB_1g_10gb", "A100-40GB", "1g.10gb", 1, 2, {0, 2, 4, 6}, 4, 6},
      {"A100_40GB_2g_10gb", "A100-40GB", "2g.10gb", 2, 2, {0, 2, 4}, 3, 4},
      {"A100_40GB_3g_20gb", "A100-40GB", "3g.20gb", 3, 4, {0, 4}, 2, 4},
      {"A100_40GB_4g_20gb", "A100-40GB", "4g.20gb", 4, 4, {0}, 1, 0},
      {"A100_40GB_7g_40gb", "A100-40GB", "7g.40gb", 7, 8, {0}, 1, 0},
      // H200-141GB: same geometry, 18 GB slices.
      {"H200_141GB_1g_18gb", "H200-141GB", "1g.18gb", 1, 1, {0, 1, 2, 3, 4, 5, 6}, 7, 6},
      {"H200_141GB_3g_71gb", "H200-141GB", "3g.71gb", 3, 4, {0, 4}, 2, 4},
      {"H200_141GB_7g_141gb", "H200-141GB", "7g.141gb", 7, 8, {0}, 1, 0},
      // A30-24GB: 4 slots, 4 compute slices, every profile 1:1. Every first choice ties (1g at
      // any slot leaves 1g 3 + 2g 2 = 5; 2g at 0 or 2 leaves 1g 2 + 2g 2 = 4): lowest slot wins.
      {"A30_24GB_1g_6gb", "A30-24GB", "1g.6gb", 1, 1, {0, 1, 2, 3}, 4, 0},
      {"A30_24GB_1g_6gb_me", "A30-24GB", "1g.6gb+me", 1, 1, {0, 1, 2, 3}, 1, 0},
      {"A30_24GB_2g_12gb", "A30-24GB", "2g.12gb", 2, 2, {0, 2}, 2, 0},
      {"A30_24GB_2g_12gb_me", "A30-24GB", "2g.12gb+me", 2, 2, {0, 2}, 1, 0},
      {"A30_24GB_4g_24gb", "A30-24GB", "4g.24gb", 4, 4, {0}, 1, 0},
  };
  return rows;
}

class MigProfileTest : public testing::TestWithParam<ProfileRow> {};

TEST_P(MigProfileTest, CatalogMatchesNvidiaTable) {
  const ProfileRow& row = GetParam();
  const MigProfile* p = Model(row.model).FindProfile(row.profile);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->compute_slices, row.compute_slices);
  EXPECT_EQ(p->memory_slices, row.memory_slices);
  EXPECT_EQ(p->starts, row.starts);
  EXPECT_EQ(p->max_instances, row.max_instances);
}

TEST_P(MigProfileTest, MigStartLegalOnEmptyGpuAcceptsExactlyTheLegalStarts) {
  const ProfileRow& row = GetParam();
  const GpuModelInfo& m = Model(row.model);
  const int p = Idx(row.model, row.profile);
  for (int s = -1; s <= m.mig_memory_slots; ++s) {
    const bool legal = std::find(row.starts.begin(), row.starts.end(), s) != row.starts.end();
    EXPECT_EQ(MigStartLegal(m, p, s, /*occupied=*/0, /*existing_of_profile=*/0), legal)
        << "start " << s;
  }
}

// Leaves only the slots of [s, s + size) free (the rest held by in-use 1g instances): the profile
// must then be created exactly at s when s is a legal start, and never at s otherwise (nothing at
// all when every other slot is blocked).
TEST_P(MigProfileTest, FindMigPlacementUsesOnlyLegalStarts) {
  const ProfileRow& row = GetParam();
  const GpuModelInfo& m = Model(row.model);
  const int p = Idx(row.model, row.profile);
  for (int s = 0; s + row.memory_slices <= m.mig_memory_slots; ++s) {
    SCOPED_TRACE("start " + std::to_string(s));
    Gpu gpu = MigGpu(row.model, {});
    gpu.mig_instances = BlockAllBut(m, Span(s, row.memory_slices));
    ASSERT_EQ(MigOccupiedSlots(m, gpu) & Span(s, row.memory_slices), 0u);
    const bool legal = std::find(row.starts.begin(), row.starts.end(), s) != row.starts.end();
    EXPECT_EQ(MigStartLegal(m, p, s, MigOccupiedSlots(m, gpu), CountOf(gpu, p)), legal);
    const std::optional<MigPlacement> got = FindMigPlacement(m, gpu, p);
    const uint32_t all = (1u << m.mig_memory_slots) - 1u;
    if (legal) {
      ASSERT_TRUE(got.has_value());
      EXPECT_EQ(got->action, MigAction::kCreate);
      EXPECT_EQ(got->profile, p);
      EXPECT_EQ(got->start, s);
      EXPECT_TRUE(got->destroy.empty());
      EXPECT_FALSE(got->enable_mig);
    } else if ((MigOccupiedSlots(m, gpu) | Span(s, row.memory_slices)) == all) {
      EXPECT_FALSE(got.has_value()) << "placed at illegal start " << got->start;
    } else if (got) {
      // Slot 7 could not be blocked (s's span ends at 6): e.g. 1g.20gb at 5 leaves 5-7 free,
      // where 1g.20gb@6 is legal. Whatever is placed must be a legal start, never s.
      EXPECT_NE(got->start, s);
      EXPECT_TRUE(std::find(row.starts.begin(), row.starts.end(), got->start) != row.starts.end())
          << "placed at illegal start " << got->start;
    }
  }
}

// Requests the profile on an empty MIG GPU until FindMigPlacement gives up: exactly
// max_instances fit (all created, never re-partitioned), on the legal starts, the first at
// first_start; then the limit alone forbids one more even on an empty layout.
TEST_P(MigProfileTest, FillEmptyGpuUpToMaxInstances) {
  const ProfileRow& row = GetParam();
  const GpuModelInfo& m = Model(row.model);
  const int p = Idx(row.model, row.profile);
  Gpu gpu = MigGpu(row.model, {});
  std::vector<int> starts;
  for (int i = 0; i <= row.max_instances + 1; ++i) {
    const std::optional<MigPlacement> got = FindMigPlacement(m, gpu, p);
    if (!got) break;
    EXPECT_EQ(got->action, MigAction::kCreate);
    EXPECT_TRUE(got->destroy.empty());
    starts.push_back(got->start);
    ApplyMigPlacement(gpu, *got);
  }
  ASSERT_EQ(static_cast<int>(starts.size()), row.max_instances);
  EXPECT_EQ(starts.front(), row.first_start);
  std::vector<int> sorted = starts;
  std::sort(sorted.begin(), sorted.end());
  if (row.max_instances == static_cast<int>(row.starts.size())) {
    EXPECT_EQ(sorted, row.starts);
  }
  EXPECT_EQ(MigFreeComputeSlices(m, gpu),
            m.mig_compute_slices - row.max_instances * row.compute_slices);
  for (int s : row.starts) {
    EXPECT_TRUE(MigStartLegal(m, p, s, 0, row.max_instances - 1)) << "start " << s;
    EXPECT_FALSE(MigStartLegal(m, p, s, 0, row.max_instances)) << "start " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(AllProfiles, MigProfileTest, testing::ValuesIn(ProfileRows()),
                         [](const testing::TestParamInfo<ProfileRow>& row_info) {
                           return std::string(row_info.param.name);
                         });

// ---------------------------------------------------------------------------------------------
// Valid mixed layouts: each instance is legal given the ones before it; the layout covers the
// expected memory slots and leaves the expected compute slices.

struct LayoutRow {
  const char* name;
  const char* model;
  std::vector<Inst> layout;  // in creation order, all in use
  uint32_t occupied;         // MigOccupiedSlots
  int free_compute;          // MigFreeComputeSlices
};
void PrintTo(const LayoutRow& row, std::ostream* os) { *os << row.name; }

class MigValidLayoutTest : public testing::TestWithParam<LayoutRow> {};

TEST_P(MigValidLayoutTest, EveryInstanceLegalInOrder) {
  const LayoutRow& row = GetParam();
  const GpuModelInfo& m = Model(row.model);
  Gpu gpu = MigGpu(row.model, {});
  for (const Inst& i : row.layout) {
    const int p = Idx(row.model, i.profile);
    EXPECT_TRUE(MigStartLegal(m, p, i.start, MigOccupiedSlots(m, gpu), CountOf(gpu, p)))
        << i.profile << "@" << i.start;
    gpu.mig_instances.push_back(MigInstance{p, i.start, i.in_use});
  }
  EXPECT_EQ(MigOccupiedSlots(m, gpu), row.occupied);
  EXPECT_EQ(MigOccupiedSlots(m, gpu, /*in_use_only=*/true), row.occupied);
  EXPECT_EQ(MigFreeComputeSlices(m, gpu), row.free_compute);
  // Whatever is still placeable is created on free, legal slots.
  for (int p = 0; p < static_cast<int>(m.mig_profiles.size()); ++p) {
    const std::optional<MigPlacement> got = FindMigPlacement(m, gpu, p);
    if (!got) continue;
    EXPECT_EQ(got->action, MigAction::kCreate) << m.mig_profiles[static_cast<size_t>(p)].name;
    EXPECT_TRUE(MigStartLegal(m, p, got->start, MigOccupiedSlots(m, gpu), CountOf(gpu, p)));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MigValidLayoutTest,
    testing::ValuesIn(std::vector<LayoutRow>{
        // 4g 0-3 + 3g 4-7: all 8 slots, 4+3 = 7 compute slices.
        {"A100_4g0_3g4", "A100-80GB", {{"4g.40gb", 0, true}, {"3g.40gb", 4, true}}, 0xFF, 0},
        {"H100_4g0_3g4", "H100-80GB", {{"4g.40gb", 0, true}, {"3g.40gb", 4, true}}, 0xFF, 0},
        // 3g + 3g: all memory taken, 7-6 = 1 compute slice stranded.
        {"A100_3g0_3g4", "A100-80GB", {{"3g.40gb", 0, true}, {"3g.40gb", 4, true}}, 0xFF, 1},
        // 2g 0-1, 2-3, 4-5 + 1g at 6: slots 0-6 (0x7F), 2+2+2+1 = 7.
        {"A100_2g0_2g2_2g4_1g6",
         "A100-80GB",
         {{"2g.20gb", 0, true}, {"2g.20gb", 2, true}, {"2g.20gb", 4, true}, {"1g.10gb", 6, true}},
         0x7F,
         0},
        // 4g 0-3 + 2g 4-5 + 1g 6: 0x7F, 4+2+1 = 7.
        {"A100_4g0_2g4_1g6",
         "A100-80GB",
         {{"4g.40gb", 0, true}, {"2g.20gb", 4, true}, {"1g.10gb", 6, true}},
         0x7F,
         0},
        // 4g + three 1g at 4, 5, 6: 0x7F, 4+3 = 7.
        {"H100_4g0_1g4_1g5_1g6",
         "H100-80GB",
         {{"4g.40gb", 0, true}, {"1g.10gb", 4, true}, {"1g.10gb", 5, true}, {"1g.10gb", 6, true}},
         0x7F,
         0},
        // 2g 0-1 + 2g 2-3 + 3g 4-7: 0xFF, 2+2+3 = 7.
        {"A100_2g0_2g2_3g4",
         "A100-80GB",
         {{"2g.20gb", 0, true}, {"2g.20gb", 2, true}, {"3g.40gb", 4, true}},
         0xFF,
         0},
        // 3g 0-3 + 2g 4-5 + 1g.20gb 6-7: 0xFF, 3+2+1 = 6, one compute slice stranded.
        {"A100_3g0_2g4_1g20gb6",
         "A100-80GB",
         {{"3g.40gb", 0, true}, {"2g.20gb", 4, true}, {"1g.20gb", 6, true}},
         0xFF,
         1},
        // 4 x 1g.20gb: all memory, only 4 of 7 compute slices (3 stranded).
        {"A100_1g20gb_x4",
         "A100-80GB",
         {{"1g.20gb", 0, true}, {"1g.20gb", 2, true}, {"1g.20gb", 4, true}, {"1g.20gb", 6, true}},
         0xFF,
         3},
        // 7 x 1g: slots 0-6, slot 7 unusable by 1g.
        {"A100_1g_x7",
         "A100-80GB",
         {{"1g.10gb", 0, true},
          {"1g.10gb", 1, true},
          {"1g.10gb", 2, true},
          {"1g.10gb", 3, true},
          {"1g.10gb", 4, true},
          {"1g.10gb", 5, true},
          {"1g.10gb", 6, true}},
         0x7F,
         0},
        // One 1g+me plus six plain 1g: 1+6 = 7 (the +me limit is per profile, not per 1g).
        {"H100_1gme0_1g_x6",
         "H100-80GB",
         {{"1g.10gb+me", 0, true},
          {"1g.10gb", 1, true},
          {"1g.10gb", 2, true},
          {"1g.10gb", 3, true},
          {"1g.10gb", 4, true},
          {"1g.10gb", 5, true},
          {"1g.10gb", 6, true}},
         0x7F,
         0},
        {"A100_7g", "A100-80GB", {{"7g.80gb", 0, true}}, 0xFF, 0},
        // A100-40GB: 3g 0-3 + 2g 4-5 + 1g 6 = 6 compute, slot 7 empty but unusable: 1 stranded.
        {"A100_40GB_3g0_2g4_1g6",
         "A100-40GB",
         {{"3g.20gb", 0, true}, {"2g.10gb", 4, true}, {"1g.5gb", 6, true}},
         0x7F,
         1},
        // A30: 2g 0-1 + 1g 2 + 1g 3 = 4 of 4.
        {"A30_2g0_1g2_1g3",
         "A30-24GB",
         {{"2g.12gb", 0, true}, {"1g.6gb", 2, true}, {"1g.6gb", 3, true}},
         0x0F,
         0},
        {"A30_2g0_2g2", "A30-24GB", {{"2g.12gb", 0, true}, {"2g.12gb", 2, true}}, 0x0F, 0},
    }),
    [](const testing::TestParamInfo<LayoutRow>& row_info) {
      return std::string(row_info.param.name);
    });

// ---------------------------------------------------------------------------------------------
// Illegal additions: MigStartLegal refuses them, and FindMigPlacement (all existing instances in
// use) either places the profile elsewhere (`find_start`) or not at all (-1).

struct IllegalRow {
  const char* name;
  const char* model;
  std::vector<Inst> existing;  // in use
  const char* profile;         // the addition
  int start;
  int find_start;  // FindMigPlacement's start for `profile`, -1: nullopt
};
void PrintTo(const IllegalRow& row, std::ostream* os) { *os << row.name; }

class MigIllegalTest : public testing::TestWithParam<IllegalRow> {};

TEST_P(MigIllegalTest, RefusedAndNotChosen) {
  const IllegalRow& row = GetParam();
  const GpuModelInfo& m = Model(row.model);
  const Gpu gpu = MigGpu(row.model, row.existing);
  const int p = Idx(row.model, row.profile);
  EXPECT_FALSE(MigStartLegal(m, p, row.start, MigOccupiedSlots(m, gpu), CountOf(gpu, p)));
  const std::optional<MigPlacement> got = FindMigPlacement(m, gpu, p);
  if (row.find_start < 0) {
    EXPECT_FALSE(got.has_value()) << "placed at " << got->start;
  } else {
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->action, MigAction::kCreate);
    EXPECT_EQ(got->start, row.find_start);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MigIllegalTest,
    testing::ValuesIn(std::vector<IllegalRow>{
        // 3g@0 overlaps 4g's 0-3; the free half 4-7 takes 3g@4.
        {"A100_3g0_over_4g0", "A100-80GB", {{"4g.40gb", 0, true}}, "3g.40gb", 0, 4},
        // 2g@2 lies inside 4g's 0-3; 2g@4 is the only free 2g start.
        {"A100_2g2_inside_4g0", "A100-80GB", {{"4g.40gb", 0, true}}, "2g.20gb", 2, 4},
        // 1g.20gb@6 (6-7) overlaps 3g@4 (4-7); 0 and 2 remain and tie on room (5 each): 0.
        {"A100_1g20gb6_over_3g4", "A100-80GB", {{"3g.40gb", 4, true}}, "1g.20gb", 6, 0},
        // 3g@4 needs slot 6, held by a 1g; 3g@0 is free.
        {"A100_3g4_over_1g6", "A100-80GB", {{"1g.10gb", 6, true}}, "3g.40gb", 4, 0},
        // Nothing coexists with 7g.
        {"A100_1g_beside_7g", "A100-80GB", {{"7g.80gb", 0, true}}, "1g.10gb", 6, -1},
        {"A100_second_4g", "A100-80GB", {{"4g.40gb", 0, true}}, "4g.40gb", 0, -1},
        // Unaligned or out-of-table starts on an empty GPU: 2g@1, 2g@6 (would need slot 7),
        // 3g@2, 1g@7, 4g@4; FindMigPlacement picks the usual empty-GPU choice instead.
        {"A100_2g_at_1", "A100-80GB", {}, "2g.20gb", 1, 4},
        {"A100_2g_at_6", "A100-80GB", {}, "2g.20gb", 6, 4},
        {"A100_3g_at_2", "A100-80GB", {}, "3g.40gb", 2, 4},
        {"H100_1g_at_7", "H100-80GB", {}, "1g.10gb", 7, 6},
        {"H100_4g_at_4", "H100-80GB", {}, "4g.40gb", 4, 0},
        // An 8th 1g: 7 exist (limit 7) and slots 0-6 are all taken.
        {"A100_eighth_1g",
         "A100-80GB",
         {{"1g.10gb", 0, true},
          {"1g.10gb", 1, true},
          {"1g.10gb", 2, true},
          {"1g.10gb", 3, true},
          {"1g.10gb", 4, true},
          {"1g.10gb", 5, true},
          {"1g.10gb", 6, true}},
         "1g.10gb",
         6,
         -1},
        // A second 1g+me even though slot 0 is free: the limit is one.
        {"H100_second_1g_me", "H100-80GB", {{"1g.10gb+me", 6, true}}, "1g.10gb+me", 0, -1},
        // A 5th 1g.20gb: the 4 fill all memory.
        {"A100_fifth_1g20gb",
         "A100-80GB",
         {{"1g.20gb", 0, true}, {"1g.20gb", 2, true}, {"1g.20gb", 4, true}, {"1g.20gb", 6, true}},
         "1g.20gb",
         0,
         -1},
        // A30: 2g@2 overlaps 1g@3; 2g@0 is free. A second 2g.12gb+me is over its limit of 1.
        {"A30_2g2_over_1g3", "A30-24GB", {{"1g.6gb", 3, true}}, "2g.12gb", 2, 0},
        {"A30_second_2g_me", "A30-24GB", {{"2g.12gb+me", 0, true}}, "2g.12gb+me", 2, -1},
    }),
    [](const testing::TestParamInfo<IllegalRow>& row_info) {
      return std::string(row_info.param.name);
    });

// ---------------------------------------------------------------------------------------------
// FindMigPlacement decision sequences on an empty GPU: each request is placed and applied (in use)
// before the next; -1 means the request gets nullopt (nothing applied).

struct SequenceRow {
  const char* name;
  const char* model;
  std::vector<std::string> requests;
  std::vector<int> starts;  // start chosen for each request, -1: nullopt
  int free_compute;         // MigFreeComputeSlices afterwards
};
void PrintTo(const SequenceRow& row, std::ostream* os) { *os << row.name; }

class MigSequenceTest : public testing::TestWithParam<SequenceRow> {};

TEST_P(MigSequenceTest, StartsChosen) {
  const SequenceRow& row = GetParam();
  ASSERT_EQ(row.requests.size(), row.starts.size());
  const GpuModelInfo& m = Model(row.model);
  Gpu gpu = MigGpu(row.model, {});
  for (size_t i = 0; i < row.requests.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i) + " " + row.requests[i]);
    const std::optional<MigPlacement> got =
        FindMigPlacement(m, gpu, Idx(row.model, row.requests[i]));
    if (row.starts[i] < 0) {
      EXPECT_FALSE(got.has_value()) << "placed at " << got->start;
      continue;
    }
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->action, MigAction::kCreate);
    EXPECT_EQ(got->start, row.starts[i]);
    ApplyMigPlacement(gpu, *got);
  }
  EXPECT_EQ(MigFreeComputeSlices(m, gpu), row.free_compute);
}

INSTANTIATE_TEST_SUITE_P(
    Sequences, MigSequenceTest,
    testing::ValuesIn(std::vector<SequenceRow>{
        // 4g only at 0; 3g@0 overlaps it, so 4. 7-4-3 = 0 left.
        {"A100_4g_then_3g", "A100-80GB", {"4g.40gb", "3g.40gb"}, {0, 4}, 0},
        // 3g prefers 4 (keeps 4g@0); the second takes 0; a third is over the limit of 2.
        // Memory is full with 1 compute slice stranded.
        {"A100_3g_3g_3g", "A100-80GB", {"3g.40gb", "3g.40gb", "3g.40gb"}, {4, 0, -1}, 1},
        // 2g@4 first (room 19). Then 0 vs 2 tie at 7 (1g 3 + 1g.20gb 2 + 2g 2): lower slot 0.
        // Third 2g at 2; the 1g's only free start is 6. 2+2+2+1 = 7.
        {"A100_2g_2g_2g_1g",
         "A100-80GB",
         {"2g.20gb", "2g.20gb", "2g.20gb", "1g.10gb"},
         {4, 0, 2, 6},
         0},
        // 4g@0, then 2g: 0 and 2 overlap the 4g, so 4; then 1g: 4-5 taken, 7 no start: 6.
        {"H100_4g_2g_1g", "H100-80GB", {"4g.40gb", "2g.20gb", "1g.10gb"}, {0, 4, 6}, 0},
        // 1g goes to 6 to keep 4g/3g@0 room; then 4g@0 still fits (slots 0-3 free).
        {"A100_1g_then_4g", "A100-80GB", {"1g.10gb", "4g.40gb"}, {6, 0}, 2},
        // After 1g@6 a 3g only fits at 0; the second 3g needs 4-7, blocked by the 1g in use:
        // 7-1-3 = 3 compute slices free, yet no second 3g.
        {"A100_1g_3g_3g", "A100-80GB", {"1g.10gb", "3g.40gb", "3g.40gb"}, {6, 0, -1}, 3},
        // 1g.20gb: 6 (room 22); then 4 (17: keeps 4g@0) over 0/2 (10); then 0 and 2 tie (5):
        // 0, then 2; a 5th has no room. 4 compute slices used, 3 stranded.
        {"A100_1g20gb_x5",
         "A100-80GB",
         {"1g.20gb", "1g.20gb", "1g.20gb", "1g.20gb", "1g.20gb"},
         {6, 4, 0, 2, -1},
         3},
        // 7g takes the whole GPU; nothing else fits afterwards.
        {"A100_7g_then_1g", "A100-80GB", {"7g.80gb", "1g.10gb"}, {0, -1}, 0},
        // A30: 2g@0 (tie with 2, lower wins); 1g at 2 or 3 tie (1 each): 2, then 3.
        {"A30_2g_1g_1g", "A30-24GB", {"2g.12gb", "1g.6gb", "1g.6gb"}, {0, 2, 3}, 0},
        // A30: a 1g at 0 leaves 2g only at 2; the second 2g has nowhere to go (0-1 blocked).
        {"A30_1g_2g_2g", "A30-24GB", {"1g.6gb", "2g.12gb", "2g.12gb"}, {0, 2, -1}, 1},
    }),
    [](const testing::TestParamInfo<SequenceRow>& row_info) {
      return std::string(row_info.param.name);
    });

// With 1g@0 in use a 1g.20gb scores 11 at 2 (1g 1,4,5,6 + 1g.20gb 4,6 + 2g@4 2 + 3g@4 3) and 11
// at 6 (1g 1-5 + 1g.20gb 2,4 + 2g 2,4 4), 8 at 4: the tie goes to the lower start, 2. Counting
// the +me profile in the score (it duplicates 1g) would make it 15 vs 16 and pick 6.
TEST(MigSlotChoiceTest, RoomTieGoesToLowerStartAndIgnoresMediaExtensions) {
  const GpuModelInfo& m = Model("A100-80GB");
  const Gpu gpu = MigGpu("A100-80GB", {{"1g.10gb", 0, true}});
  const std::optional<MigPlacement> got = FindMigPlacement(m, gpu, Idx("A100-80GB", "1g.20gb"));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->action, MigAction::kCreate);
  EXPECT_EQ(got->start, 2);
}

// ---------------------------------------------------------------------------------------------
// Stranded capacity.

// 1g@0 and 1g@4 in use: 7-2 = 5 compute slices free, but every 4g/3g/7g placement overlaps slot 0
// or 4, and in-use instances cannot be repartitioned away: the largest thing that fits is a 2g
// (only 2g@2 has both its slots free).
TEST(MigStrandedTest, TwoBusy1gAtSlots0And4StrandFiveSlices) {
  const GpuModelInfo& m = Model("A100-80GB");
  const Gpu gpu = MigGpu("A100-80GB", {{"1g.10gb", 0, true}, {"1g.10gb", 4, true}});
  EXPECT_EQ(MigFreeComputeSlices(m, gpu), 5);
  const uint32_t occ = MigOccupiedSlots(m, gpu);
  for (const char* big : {"4g.40gb", "3g.40gb", "7g.80gb"}) {
    const int p = Idx("A100-80GB", big);
    EXPECT_FALSE(FindMigPlacement(m, gpu, p).has_value()) << big;
    for (int s = 0; s < 8; ++s) EXPECT_FALSE(MigStartLegal(m, p, s, occ, 0)) << big << "@" << s;
  }
  const std::optional<MigPlacement> two = FindMigPlacement(m, gpu, Idx("A100-80GB", "2g.20gb"));
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(two->action, MigAction::kCreate);
  EXPECT_EQ(two->start, 2);
  // Every profile that is still placeable lands on a legal, free start.
  for (int p = 0; p < static_cast<int>(m.mig_profiles.size()); ++p) {
    const std::optional<MigPlacement> got = FindMigPlacement(m, gpu, p);
    if (got) {
      EXPECT_TRUE(MigStartLegal(m, p, got->start, occ, CountOf(gpu, p)));
    }
  }
}

// The same layout with the two 1g instances unused: re-partitioning may destroy them. 4g@0 must
// destroy the 1g@0 (index 0) only. 3g@0 and 3g@4 each destroy one; the tie goes to room: 3g@4
// (keeps 1g@0) leaves 1g 1,2,3 + 1g.20gb@2 + 2g@2 = 6, 3g@0 (keeps 1g@4) only 1g 5,6 +
// 1g.20gb@6 = 3, so 3g@4 destroying index 1.
TEST(MigStrandedTest, UnusedInstancesCanBeRepartitionedAway) {
  const GpuModelInfo& m = Model("A100-80GB");
  const Gpu gpu = MigGpu("A100-80GB", {{"1g.10gb", 0, false}, {"1g.10gb", 4, false}});
  const std::optional<MigPlacement> four = FindMigPlacement(m, gpu, Idx("A100-80GB", "4g.40gb"));
  ASSERT_TRUE(four.has_value());
  EXPECT_EQ(four->action, MigAction::kRepartition);
  EXPECT_EQ(four->start, 0);
  EXPECT_EQ(four->destroy, std::vector<int>{0});
  EXPECT_FALSE(four->enable_mig);
  const std::optional<MigPlacement> three = FindMigPlacement(m, gpu, Idx("A100-80GB", "3g.40gb"));
  ASSERT_TRUE(three.has_value());
  EXPECT_EQ(three->action, MigAction::kRepartition);
  EXPECT_EQ(three->start, 4);
  EXPECT_EQ(three->destroy, std::vector<int>{1});
}

// 3g@0 in use covers 4g's only placement (0-3): 4 compute slices and slots 4-7 are free, but no
// 4g can be placed until that 3g ends; a 3g still fits at 4.
TEST(MigStrandedTest, Busy3gAtSlot0BlocksThe4g) {
  const GpuModelInfo& m = Model("A100-80GB");
  const Gpu gpu = MigGpu("A100-80GB", {{"3g.40gb", 0, true}});
  EXPECT_EQ(MigFreeComputeSlices(m, gpu), 4);
  EXPECT_EQ(MigOccupiedSlots(m, gpu), 0x0Fu);
  EXPECT_FALSE(FindMigPlacement(m, gpu, Idx("A100-80GB", "4g.40gb")).has_value());
  const std::optional<MigPlacement> three = FindMigPlacement(m, gpu, Idx("A100-80GB", "3g.40gb"));
  ASSERT_TRUE(three.has_value());
  EXPECT_EQ(three->start, 4);
}

// 3g@4 in use covers 4-7, disjoint from 4g's 0-3: the 4g is created at 0 (4g.40gb + 3g.40gb is
// one of NVIDIA's valid combinations), but a second 3g and the 7g are blocked.
TEST(MigStrandedTest, Busy3gAtSlot4LeavesRoomFor4g) {
  const GpuModelInfo& m = Model("H100-80GB");
  const Gpu gpu = MigGpu("H100-80GB", {{"3g.40gb", 4, true}});
  const std::optional<MigPlacement> four = FindMigPlacement(m, gpu, Idx("H100-80GB", "4g.40gb"));
  ASSERT_TRUE(four.has_value());
  EXPECT_EQ(four->action, MigAction::kCreate);
  EXPECT_EQ(four->start, 0);
  EXPECT_FALSE(FindMigPlacement(m, gpu, Idx("H100-80GB", "7g.80gb")).has_value());
}

// 1g@6 in use blocks the 7g and 3g@4, but not the 4g at 0.
TEST(MigStrandedTest, Busy1gAtSlot6BlocksOnlyThe7gAndUpper3g) {
  const GpuModelInfo& m = Model("A100-80GB");
  const Gpu gpu = MigGpu("A100-80GB", {{"1g.10gb", 6, true}});
  EXPECT_FALSE(FindMigPlacement(m, gpu, Idx("A100-80GB", "7g.80gb")).has_value());
  const std::optional<MigPlacement> four = FindMigPlacement(m, gpu, Idx("A100-80GB", "4g.40gb"));
  ASSERT_TRUE(four.has_value());
  EXPECT_EQ(four->start, 0);
  const std::optional<MigPlacement> three = FindMigPlacement(m, gpu, Idx("A100-80GB", "3g.40gb"));
  ASSERT_TRUE(three.has_value());
  EXPECT_EQ(three->start, 0);
}

// ---------------------------------------------------------------------------------------------
// kUseFree: an unused instance of the requested profile is handed out before anything new.

TEST(MigUseFreeTest, PreCreatedInstancesAreReusedInOrderThenExhausted) {
  const GpuModelInfo& m = Model("A100-80GB");
  const int three = Idx("A100-80GB", "3g.40gb");
  Gpu gpu = MigGpu("A100-80GB", {{"3g.40gb", 4, false}, {"3g.40gb", 0, false}});
  const std::vector<MigInstance> before = gpu.mig_instances;

  std::optional<MigPlacement> got = FindMigPlacement(m, gpu, three);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->action, MigAction::kUseFree);
  EXPECT_EQ(got->instance, 0);
  EXPECT_EQ(got->start, 4);
  EXPECT_TRUE(got->destroy.empty());
  EXPECT_FALSE(got->enable_mig);
  EXPECT_EQ(ApplyMigPlacement(gpu, *got), 0);
  EXPECT_EQ(gpu.mig_instances, (std::vector<MigInstance>{{three, 4, true}, {three, 0, false}}));

  got = FindMigPlacement(m, gpu, three);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->action, MigAction::kUseFree);
  EXPECT_EQ(got->instance, 1);
  EXPECT_EQ(got->start, 0);
  EXPECT_EQ(ApplyMigPlacement(gpu, *got), 1);
  EXPECT_EQ(gpu.mig_instances, (std::vector<MigInstance>{{three, 4, true}, {three, 0, true}}));

  // Both in use, limit 2 reached, memory full.
  EXPECT_FALSE(FindMigPlacement(m, gpu, three).has_value());
  EXPECT_EQ(before.size(), gpu.mig_instances.size());
}

// An unused 1g@3 is reused although a new 1g would go to slot 6: reuse needs no layout change.
// An in-use 1g of the same profile is skipped.
TEST(MigUseFreeTest, UnusedInstancePreferredOverCreating) {
  const GpuModelInfo& m = Model("A100-80GB");
  const Gpu gpu = MigGpu("A100-80GB", {{"1g.10gb", 1, true}, {"1g.10gb", 3, false}});
  const std::optional<MigPlacement> got = FindMigPlacement(m, gpu, Idx("A100-80GB", "1g.10gb"));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->action, MigAction::kUseFree);
  EXPECT_EQ(got->instance, 1);
  EXPECT_EQ(got->start, 3);
}

// An unused instance of another profile is neither reused nor destroyed when a free slot exists:
// with 2g@0 (unused) the 1g is created. Scores: 1g@2 or @3 leave 1g 4 + 1g.20gb 2 + 2g@4 2 +
// 3g@4 3 = 11; @4/@5 8; @6 10 (kills 3g@4). First best: 2.
TEST(MigUseFreeTest, OtherProfileNotReused) {
  const GpuModelInfo& m = Model("A100-80GB");
  const Gpu gpu = MigGpu("A100-80GB", {{"2g.20gb", 0, false}});
  const std::optional<MigPlacement> got = FindMigPlacement(m, gpu, Idx("A100-80GB", "1g.10gb"));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->action, MigAction::kCreate);
  EXPECT_EQ(got->start, 2);
  EXPECT_TRUE(got->destroy.empty());
}

TEST(MigUseFreeTest, MediaExtensionInstanceReused) {
  const GpuModelInfo& m = Model("H100-80GB");
  const Gpu gpu = MigGpu("H100-80GB", {{"1g.10gb", 6, true}, {"1g.10gb+me", 0, false}});
  const std::optional<MigPlacement> got = FindMigPlacement(m, gpu, Idx("H100-80GB", "1g.10gb+me"));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->action, MigAction::kUseFree);
  EXPECT_EQ(got->instance, 1);
}

// ---------------------------------------------------------------------------------------------
// kCreate keeps every existing instance and appends the new one in use.

TEST(MigCreateTest, AppendsWithoutTouchingOthers) {
  const GpuModelInfo& m = Model("A100-80GB");
  const int four = Idx("A100-80GB", "4g.40gb");
  Gpu gpu = MigGpu("A100-80GB", {{"1g.10gb", 6, false}, {"2g.20gb", 4, true}});
  const std::vector<MigInstance> before = gpu.mig_instances;
  const std::optional<MigPlacement> got = FindMigPlacement(m, gpu, four);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->action, MigAction::kCreate);
  EXPECT_EQ(got->start, 0);
  EXPECT_EQ(ApplyMigPlacement(gpu, *got), 2);
  ASSERT_EQ(gpu.mig_instances.size(), 3u);
  EXPECT_EQ(gpu.mig_instances[0], before[0]);
  EXPECT_EQ(gpu.mig_instances[1], before[1]);
  EXPECT_EQ(gpu.mig_instances[2], (MigInstance{four, 0, true}));
  EXPECT_TRUE(gpu.mig_enabled);
}

// ---------------------------------------------------------------------------------------------
// kRepartition on a MIG GPU: exactly the unused instances overlapping the chosen start go.

// Seven unused 1g in shuffled order; a 4g needs slots 0-3, held by the 1g at 0 (index 2),
// 1 (index 4), 2 (index 6) and 3 (index 1): destroy {1, 2, 4, 6}. Applying keeps the other three in
// their order and appends the 4g in use at index 3.
TEST(MigRepartitionTest, DestroysExactlyTheOverlappingUnusedInstances) {
  const GpuModelInfo& m = Model("A100-80GB");
  const int one = Idx("A100-80GB", "1g.10gb");
  const int four = Idx("A100-80GB", "4g.40gb");
  Gpu gpu = MigGpu("A100-80GB", {{"1g.10gb", 6, false},
                                 {"1g.10gb", 3, false},
                                 {"1g.10gb", 0, false},
                                 {"1g.10gb", 5, false},
                                 {"1g.10gb", 1, false},
                                 {"1g.10gb", 4, false},
                                 {"1g.10gb", 2, false}});
  const std::optional<MigPlacement> got = FindMigPlacement(m, gpu, four);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->action, MigAction::kRepartition);
  EXPECT_EQ(got->profile, four);
  EXPECT_EQ(got->start, 0);
  EXPECT_EQ(got->destroy, (std::vector<int>{1, 2, 4, 6}));
  EXPECT_FALSE(got->enable_mig);
  EXPECT_EQ(ApplyMigPlacement(gpu, *got), 3);
  EXPECT_EQ(gpu.mig_instances,
            (std::vector<MigInstance>{
                {one, 6, false}, {one, 5, false}, {one, 4, false}, {four, 0, true}}));
}

// In-use 1g@0 blocks 3g@0; 3g@4 overlaps the unused 2g@4 (index 1) and 1g@6 (index 2), which go;
// the unused 1g@2 (index 3) does not overlap and stays. A 4g is impossible (1g@0 in use).
TEST(MigRepartitionTest, InUseInstancesAreNeverDestroyed) {
  const GpuModelInfo& m = Model("A100-80GB");
  const int one = Idx("A100-80GB", "1g.10gb");
  const int three = Idx("A100-80GB", "3g.40gb");
  Gpu gpu = MigGpu(
      "A100-80GB",
      {{"1g.10gb", 0, true}, {"2g.20gb", 4, false}, {"1g.10gb", 6, false}, {"1g.10gb", 2, false}});
  EXPECT_FALSE(FindMigPlacement(m, gpu, Idx("A100-80GB", "4g.40gb")).has_value());
  const std::optional<MigPlacement> got = FindMigPlacement(m, gpu, three);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->action, MigAction::kRepartition);
  EXPECT_EQ(got->start, 4);
  EXPECT_EQ(got->destroy, (std::vector<int>{1, 2}));
  EXPECT_EQ(ApplyMigPlacement(gpu, *got), 2);
  EXPECT_EQ(gpu.mig_instances,
            (std::vector<MigInstance>{{one, 0, true}, {one, 2, false}, {three, 4, true}}));
}

// Unused 1g at 0, 5, 6: 3g@0 destroys one instance, 3g@4 two; fewest destroyed wins.
TEST(MigRepartitionTest, FewestDestroyedWins) {
  const GpuModelInfo& m = Model("A100-80GB");
  const Gpu gpu =
      MigGpu("A100-80GB", {{"1g.10gb", 0, false}, {"1g.10gb", 5, false}, {"1g.10gb", 6, false}});
  const std::optional<MigPlacement> got = FindMigPlacement(m, gpu, Idx("A100-80GB", "3g.40gb"));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->action, MigAction::kRepartition);
  EXPECT_EQ(got->start, 0);
  EXPECT_EQ(got->destroy, std::vector<int>{0});
}

// The +me limit also holds under re-partitioning: one in use, every other slot held by unused
// plain 1g instances that could be destroyed: still nullopt.
TEST(MigRepartitionTest, InstanceLimitStillApplies) {
  const GpuModelInfo& m = Model("A100-80GB");
  const Gpu gpu = MigGpu("A100-80GB", {{"1g.10gb+me", 0, true},
                                       {"1g.10gb", 1, false},
                                       {"1g.10gb", 2, false},
                                       {"1g.10gb", 3, false},
                                       {"1g.10gb", 4, false},
                                       {"1g.10gb", 5, false},
                                       {"1g.10gb", 6, false}});
  EXPECT_FALSE(FindMigPlacement(m, gpu, Idx("A100-80GB", "1g.10gb+me")).has_value());
}

// A GPU not in MIG mode: when idle it can be switched (kRepartition, enable_mig) and gets the
// same start as an empty MIG GPU. A stale instance list left from an earlier MIG period is
// ignored (enabling MIG resets the GPU) and dropped when applied; in particular a stale instance
// of the requested profile must not count against its limit (4g/7g: limit 1).
struct EnableRow {
  const char* name;
  const char* model;
  const char* profile;
  int start;
};
void PrintTo(const EnableRow& row, std::ostream* os) { *os << row.name; }

class MigEnableTest : public testing::TestWithParam<EnableRow> {};

TEST_P(MigEnableTest, IdleNonMigGpuIsSwitchedToMig) {
  const EnableRow& row = GetParam();
  const GpuModelInfo& m = Model(row.model);
  const int p = Idx(row.model, row.profile);
  Gpu gpu = PlainGpu(row.model);
  ASSERT_FALSE(gpu.mig_enabled);
  ASSERT_TRUE(gpu.Idle());
  gpu.mig_instances = {MigInstance{p, row.start, false}};  // stale, ignored while MIG is off
  const std::optional<MigPlacement> got = FindMigPlacement(m, gpu, p);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->action, MigAction::kRepartition);
  EXPECT_TRUE(got->enable_mig);
  EXPECT_TRUE(got->destroy.empty());
  EXPECT_EQ(got->profile, p);
  EXPECT_EQ(got->start, row.start);
  EXPECT_EQ(ApplyMigPlacement(gpu, *got), 0);
  EXPECT_TRUE(gpu.mig_enabled);
  EXPECT_EQ(gpu.mig_instances, (std::vector<MigInstance>{{p, row.start, true}}));
}

INSTANTIATE_TEST_SUITE_P(
    NonMig, MigEnableTest,
    testing::ValuesIn(std::vector<EnableRow>{
        // Same choices as on an empty MIG GPU (see the profile table): 1g 6, 3g 4, 4g/7g 0.
        {"A100_1g", "A100-80GB", "1g.10gb", 6},
        {"A100_3g", "A100-80GB", "3g.40gb", 4},
        {"H100_4g", "H100-80GB", "4g.40gb", 0},
        {"H100_7g", "H100-80GB", "7g.80gb", 0},
        {"A30_2g", "A30-24GB", "2g.12gb", 0},
    }),
    [](const testing::TestParamInfo<EnableRow>& row_info) {
      return std::string(row_info.param.name);
    });

// A busy GPU not in MIG mode cannot be reset into MIG mode.
struct BusyRow {
  const char* name;
  int32_t milli_free;
  int64_t mem_used_mib;  // memory reserved by shared tasks
};
void PrintTo(const BusyRow& row, std::ostream* os) { *os << row.name; }

class MigBusyTest : public testing::TestWithParam<BusyRow> {};

TEST_P(MigBusyTest, BusyNonMigGpuGetsNothing) {
  const BusyRow& row = GetParam();
  const GpuModelInfo& m = Model("A100-80GB");
  Gpu gpu = PlainGpu("A100-80GB");
  gpu.milli_free = row.milli_free;
  gpu.mem_free_mib -= row.mem_used_mib;
  ASSERT_FALSE(gpu.Idle());
  for (int p = 0; p < static_cast<int>(m.mig_profiles.size()); ++p) {
    EXPECT_FALSE(FindMigPlacement(m, gpu, p).has_value())
        << m.mig_profiles[static_cast<size_t>(p)].name;
  }
  EXPECT_FALSE(gpu.mig_enabled);
}

INSTANTIATE_TEST_SUITE_P(NonMig, MigBusyTest,
                         testing::ValuesIn(std::vector<BusyRow>{
                             {"share_999_left", 999, 0},  // 1 milli given to a task: no longer idle
                             {"share_half_left", 500, 0},
                             {"whole_gpu_taken", 0, 0},
                             {"memory_reserved", 1000,
                              1024},  // full share free but memory reserved
                         }),
                         [](const testing::TestParamInfo<BusyRow>& row_info) {
                           return std::string(row_info.param.name);
                         });

// ---------------------------------------------------------------------------------------------
// Bad inputs and helpers.

TEST(MigInputTest, ProfileOutOfRange) {
  const GpuModelInfo& m = Model("A100-80GB");
  const Gpu gpu = MigGpu("A100-80GB", {});
  const int n = static_cast<int>(m.mig_profiles.size());
  for (int p : {-1, n, n + 5}) {
    EXPECT_FALSE(MigStartLegal(m, p, 0, 0, 0)) << p;
    EXPECT_FALSE(FindMigPlacement(m, gpu, p).has_value()) << p;
  }
}

TEST(MigInputTest, NonMigCapableModelPlacesNothing) {
  const GpuModelInfo& m = Model("V100-16GB");
  EXPECT_FALSE(FindMigPlacement(m, PlainGpu("V100-16GB"), 0).has_value());
  EXPECT_FALSE(MigStartLegal(m, 0, 0, 0, 0));
}

// 2g@0 unused (slots 0-1) + 1g@6 in use (slot 6): all = 0b0100'0011, in use only = 0b0100'0000.
// Free compute counts unused instances as taken: 7 - 2 - 1 = 4.
TEST(MigHelpersTest, OccupiedSlotsAndFreeComputeSlices) {
  const GpuModelInfo& m = Model("A100-80GB");
  const Gpu gpu = MigGpu("A100-80GB", {{"2g.20gb", 0, false}, {"1g.10gb", 6, true}});
  EXPECT_EQ(MigOccupiedSlots(m, gpu), 0x43u);
  EXPECT_EQ(MigOccupiedSlots(m, gpu, /*in_use_only=*/true), 0x40u);
  EXPECT_EQ(MigFreeComputeSlices(m, gpu), 4);
  EXPECT_EQ(MigFreeComputeSlices(m, MigGpu("A100-80GB", {})), 7);
  EXPECT_EQ(MigFreeComputeSlices(Model("A30-24GB"), MigGpu("A30-24GB", {})), 4);
}

// ApplyMigPlacement with a hand-made re-partition whose destroy list is not sorted: indexes refer
// to the list before any removal, so {3, 0} removes the first and last of four.
TEST(MigApplyTest, RepartitionDestroyListInAnyOrder) {
  const int one = Idx("A100-80GB", "1g.10gb");
  const int two = Idx("A100-80GB", "2g.20gb");
  Gpu gpu = MigGpu(
      "A100-80GB",
      {{"1g.10gb", 0, false}, {"1g.10gb", 2, true}, {"1g.10gb", 3, true}, {"1g.10gb", 1, false}});
  MigPlacement p;
  p.action = MigAction::kRepartition;
  p.profile = two;
  p.start = 0;
  p.destroy = {3, 0};
  EXPECT_EQ(ApplyMigPlacement(gpu, p), 2);
  EXPECT_EQ(gpu.mig_instances,
            (std::vector<MigInstance>{{one, 2, true}, {one, 3, true}, {two, 0, true}}));
}

}  // namespace
}  // namespace gpupool
