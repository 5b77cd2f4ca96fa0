// Tests for core/task: Validate() error messages, Form(), GpuMilli(), MigMilli(), QuotaMilli().
#include "core/task.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/result.h"

namespace gpupool {
namespace {

// A row edits a default TaskRequest (CPU-only, nothing set) with `edit`.
using Edit = void (*)(TaskRequest&);

TaskRequest Make(Edit edit) {
  TaskRequest r;
  edit(r);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Validate: accepted requests.

struct ValidRow {
  const char* name;
  Edit edit;
};
void PrintTo(const ValidRow& row, std::ostream* os) { *os << row.name; }

class ValidateOkTest : public testing::TestWithParam<ValidRow> {};

TEST_P(ValidateOkTest, Accepted) {
  const Status s = Validate(Make(GetParam().edit));
  EXPECT_TRUE(s.has_value()) << s.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Validate, ValidateOkTest,
    testing::ValuesIn(std::vector<ValidRow>{
        // Nothing asked: a CPU-only task with zero resources is well formed.
        {"empty", [](TaskRequest&) {}},
        {"cpu_and_memory",
         [](TaskRequest& r) {
           r.cpu_milli = 4000;
           r.memory_mib = 8192;
         }},
        // Whole GPUs: 1 and the per-task maximum 8.
        {"whole_1", [](TaskRequest& r) { r.gpu_count = 1; }},
        {"whole_8", [](TaskRequest& r) { r.gpu_count = 8; }},
        // Shares: both ends of 1..999, with and without reserved memory.
        {"share_1", [](TaskRequest& r) { r.gpu_milli = 1; }},
        {"share_999", [](TaskRequest& r) { r.gpu_milli = 999; }},
        {"share_with_memory",
         [](TaskRequest& r) {
           r.gpu_milli = 500;
           r.gpu_mem_mib = 8192;
         }},
        // MIG: a profile of some catalog model (3g.40gb: A100-80GB, H100-80GB).
        {"mig_any_model", [](TaskRequest& r) { r.mig_profile = "3g.40gb"; }},
        // Models may be given by alias: NVML's name for A100-80GB.
        {"mig_alias_model",
         [](TaskRequest& r) {
           r.mig_profile = "1g.10gb";
           r.gpu_models = {"NVIDIA A100-SXM4-80GB"};
         }},
        // One allowed model having the profile is enough.
        {"mig_one_of_models",
         [](TaskRequest& r) {
           r.mig_profile = "7g.80gb";
           r.gpu_models = {"V100-16GB", "H100-80GB"};
         }},
        {"mig_a30", [](TaskRequest& r) { r.mig_profile = "2g.12gb+me"; }},
        // Opaque trace models are allowed names.
        {"opaque_model",
         [](TaskRequest& r) {
           r.gpu_count = 1;
           r.gpu_models = {"G2", "G3"};
         }},
        {"priority_0", [](TaskRequest& r) { r.priority = 0; }},
        {"priority_1000", [](TaskRequest& r) { r.priority = 1000; }},
        // gang_size 0 or 1 without an id: not a gang.
        {"gang_size_1_no_id", [](TaskRequest& r) { r.gang_size = 1; }},
        {"gang_2",
         [](TaskRequest& r) {
           r.gang_id = "g";
           r.gang_size = 2;
         }},
        {"gang_4096",
         [](TaskRequest& r) {
           r.gang_id = "g";
           r.gang_size = 4096;
           r.gpu_count = 8;
         }},
    }),
    [](const testing::TestParamInfo<ValidRow>& row_info) {
      return std::string(row_info.param.name);
    });

// ---------------------------------------------------------------------------------------------
// Validate: rejected requests, with the exact message naming field and value.

struct InvalidRow {
  const char* name;
  Edit edit;
  const char* message;
};
void PrintTo(const InvalidRow& row, std::ostream* os) { *os << row.name; }

class ValidateErrorTest : public testing::TestWithParam<InvalidRow> {};

TEST_P(ValidateErrorTest, RejectedWithMessage) {
  const InvalidRow& row = GetParam();
  const Status s = Validate(Make(row.edit));
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.error().message, row.message);
}

INSTANTIATE_TEST_SUITE_P(
    Validate, ValidateErrorTest,
    testing::ValuesIn(std::vector<InvalidRow>{
        {"cpu_negative", [](TaskRequest& r) { r.cpu_milli = -1; },
         "cpu_milli must be >= 0, got -1"},
        {"memory_negative", [](TaskRequest& r) { r.memory_mib = -5; },
         "memory_mib must be >= 0, got -5"},
        // gpu_count 0..8.
        {"gpu_count_9", [](TaskRequest& r) { r.gpu_count = 9; },
         "gpu_count must be 0..8 per task (a gang spans nodes), got 9"},
        {"gpu_count_negative", [](TaskRequest& r) { r.gpu_count = -1; },
         "gpu_count must be 0..8 per task (a gang spans nodes), got -1"},
        // gpu_milli 1..999 (0: not a share); a whole GPU or more is not a share.
        {"gpu_milli_1200", [](TaskRequest& r) { r.gpu_milli = 1200; },
         "gpu_milli must be 1..999 for a shared GPU, got 1200"},
        {"gpu_milli_1000", [](TaskRequest& r) { r.gpu_milli = 1000; },
         "gpu_milli must be 1..999 for a shared GPU, got 1000"},
        {"gpu_milli_negative", [](TaskRequest& r) { r.gpu_milli = -3; },
         "gpu_milli must be 1..999 for a shared GPU, got -3"},
        {"gpu_mem_negative",
         [](TaskRequest& r) {
           r.gpu_milli = 500;
           r.gpu_mem_mib = -1;
         },
         "gpu_mem_mib must be >= 0, got -1"},
        // More than one form: count + share = 2, all three = 3, count + MIG = 2.
        {"two_forms_whole_share",
         [](TaskRequest& r) {
           r.gpu_count = 1;
           r.gpu_milli = 500;
         },
         "exactly one GPU form may be given (gpu_count, gpu_milli or mig_profile), got 2"},
        {"three_forms",
         [](TaskRequest& r) {
           r.gpu_count = 1;
           r.gpu_milli = 500;
           r.mig_profile = "3g.40gb";
         },
         "exactly one GPU form may be given (gpu_count, gpu_milli or mig_profile), got 3"},
        {"two_forms_whole_mig",
         [](TaskRequest& r) {
           r.gpu_count = 2;
           r.mig_profile = "1g.10gb";
         },
         "exactly one GPU form may be given (gpu_count, gpu_milli or mig_profile), got 2"},
        // Reserved GPU memory only with a share: not alone, not with whole GPUs or MIG.
        {"gpu_mem_without_share", [](TaskRequest& r) { r.gpu_mem_mib = 1024; },
         "gpu_mem_mib is only valid with gpu_milli (a shared GPU), got 1024 without gpu_milli"},
        {"gpu_mem_with_whole",
         [](TaskRequest& r) {
           r.gpu_count = 1;
           r.gpu_mem_mib = 2048;
         },
         "gpu_mem_mib is only valid with gpu_milli (a shared GPU), got 2048 without gpu_milli"},
        {"gpu_mem_with_mig",
         [](TaskRequest& r) {
           r.mig_profile = "3g.40gb";
           r.gpu_mem_mib = 4096;
         },
         "gpu_mem_mib is only valid with gpu_milli (a shared GPU), got 4096 without gpu_milli"},
        {"empty_model_name",
         [](TaskRequest& r) {
           r.gpu_count = 1;
           r.gpu_models = {"A100-80GB", ""};
         },
         "gpu_models must not contain an empty name"},
        // MIG profile unknown to every model, or to every allowed model: 3g.40gb is an
        // A100-80GB/H100-80GB profile, not A100-40GB's (3g.20gb there); V100 and opaque G2
        // have no MIG profiles at all.
        {"mig_unknown_profile", [](TaskRequest& r) { r.mig_profile = "5g.50gb"; },
         "mig_profile '5g.50gb' is not a MIG profile of any allowed GPU model"},
        {"mig_wrong_model",
         [](TaskRequest& r) {
           r.mig_profile = "3g.40gb";
           r.gpu_models = {"A100-40GB"};
         },
         "mig_profile '3g.40gb' is not a MIG profile of any allowed GPU model"},
        {"mig_non_mig_model",
         [](TaskRequest& r) {
           r.mig_profile = "3g.40gb";
           r.gpu_models = {"V100-16GB"};
         },
         "mig_profile '3g.40gb' is not a MIG profile of any allowed GPU model"},
        {"mig_opaque_model",
         [](TaskRequest& r) {
           r.mig_profile = "1g.10gb";
           r.gpu_models = {"G2"};
         },
         "mig_profile '1g.10gb' is not a MIG profile of any allowed GPU model"},
        {"priority_negative", [](TaskRequest& r) { r.priority = -1; },
         "priority must be 0..1000, got -1"},
        {"priority_1001", [](TaskRequest& r) { r.priority = 1001; },
         "priority must be 0..1000, got 1001"},
        {"gang_size_negative", [](TaskRequest& r) { r.gang_size = -1; },
         "gang_size must be 0..4096, got -1"},
        {"gang_size_4097",
         [](TaskRequest& r) {
           r.gang_id = "g";
           r.gang_size = 4097;
         },
         "gang_size must be 0..4096, got 4097"},
        {"gang_without_id", [](TaskRequest& r) { r.gang_size = 2; },
         "gang_id is required when gang_size > 1"},
        {"gang_id_size_0", [](TaskRequest& r) { r.gang_id = "g"; },
         "gang_size must be >= 2 when gang_id is set, got 0"},
        {"gang_id_size_1",
         [](TaskRequest& r) {
           r.gang_id = "g";
           r.gang_size = 1;
         },
         "gang_size must be >= 2 when gang_id is set, got 1"},
        {"members_per_node_negative",
         [](TaskRequest& r) {
           r.gang_id = "j-1";
           r.gang_size = 2;
           r.members_per_node = -1;
         },
         "members_per_node must be 0..4096, got -1"},
        {"topology_without_gang", [](TaskRequest& r) { r.topology_label = "rack"; },
         "members_per_node and topology_label apply to a gang's members only"},
    }),
    [](const testing::TestParamInfo<InvalidRow>& row_info) {
      return std::string(row_info.param.name);
    });

// ---------------------------------------------------------------------------------------------
// Form() and GpuMilli() of valid requests.

struct FormRow {
  const char* name;
  Edit edit;
  GpuForm form;
  int64_t milli;
};
void PrintTo(const FormRow& row, std::ostream* os) { *os << row.name; }

class FormTest : public testing::TestWithParam<FormRow> {};

TEST_P(FormTest, FormAndMilli) {
  const FormRow& row = GetParam();
  const TaskRequest r = Make(row.edit);
  ASSERT_TRUE(Validate(r).has_value());
  EXPECT_EQ(r.Form(), row.form);
  EXPECT_EQ(r.GpuMilli(), row.milli);
}

INSTANTIATE_TEST_SUITE_P(
    Forms, FormTest,
    testing::ValuesIn(std::vector<FormRow>{
        {"none", [](TaskRequest&) {}, GpuForm::kNone, 0},
        {"none_with_cpu", [](TaskRequest& r) { r.cpu_milli = 2000; }, GpuForm::kNone, 0},
        // Whole: 1000 per GPU.
        {"whole_1", [](TaskRequest& r) { r.gpu_count = 1; }, GpuForm::kWhole, 1000},
        {"whole_8", [](TaskRequest& r) { r.gpu_count = 8; }, GpuForm::kWhole, 8000},
        // Share: the share itself.
        {"share_250", [](TaskRequest& r) { r.gpu_milli = 250; }, GpuForm::kShare, 250},
        {"share_999_with_memory",
         [](TaskRequest& r) {
           r.gpu_milli = 999;
           r.gpu_mem_mib = 1024;
         },
         GpuForm::kShare, 999},
        // MIG: 0 here, the model is needed (MigMilli).
        {"mig", [](TaskRequest& r) { r.mig_profile = "3g.40gb"; }, GpuForm::kMig, 0},
    }),
    [](const testing::TestParamInfo<FormRow>& row_info) {
      return std::string(row_info.param.name);
    });

// ---------------------------------------------------------------------------------------------
// MigMilli: compute slices x 1000 / the model's compute slices, rounded down; 0 when unknown.

struct MigMilliRow {
  const char* name;
  const char* model;
  const char* profile;
  int64_t milli;
};
void PrintTo(const MigMilliRow& row, std::ostream* os) { *os << row.name; }

class MigMilliTest : public testing::TestWithParam<MigMilliRow> {};

TEST_P(MigMilliTest, Milli) {
  const MigMilliRow& row = GetParam();
  EXPECT_EQ(MigMilli(row.model, row.profile), row.milli);
}

INSTANTIATE_TEST_SUITE_P(MigMilli, MigMilliTest,
                         testing::ValuesIn(std::vector<MigMilliRow>{
                             {"a100_1g", "A100-80GB", "1g.10gb", 142},        // 1000/7 = 142.86
                             {"a100_1g_me", "A100-80GB", "1g.10gb+me", 142},  // same compute as 1g
                             {"a100_1g_20gb", "A100-80GB", "1g.20gb",
                              142},                                     // 1 compute slice, 2 memory
                             {"a100_2g", "A100-80GB", "2g.20gb", 285},  // 2000/7 = 285.7
                             {"a100_3g", "A100-80GB", "3g.40gb", 428},  // 3000/7 = 428.6
                             {"a100_4g", "A100-80GB", "4g.40gb", 571},  // 4000/7 = 571.4
                             {"a100_7g", "A100-80GB", "7g.80gb", 1000},  // 7/7
                             {"h100_3g", "H100-80GB", "3g.40gb", 428},
                             {"a100_40gb_3g", "A100-40GB", "3g.20gb", 428},
                             {"alias_model", "NVIDIA A100-SXM4-80GB", "3g.40gb", 428},
                             {"a30_1g", "A30-24GB", "1g.6gb", 250},    // 1/4
                             {"a30_2g", "A30-24GB", "2g.12gb", 500},   // 2/4
                             {"a30_4g", "A30-24GB", "4g.24gb", 1000},  // 4/4
                             {"profile_of_other_model", "A100-80GB", "3g.20gb", 0},
                             {"unknown_profile", "A100-80GB", "5g.50gb", 0},
                             {"non_mig_model", "V100-16GB", "1g.10gb", 0},
                             {"opaque_model", "G2", "3g.40gb", 0},
                         }),
                         [](const testing::TestParamInfo<MigMilliRow>& row_info) {
                           return std::string(row_info.param.name);
                         });

// ---------------------------------------------------------------------------------------------
// QuotaMilli / UnplacedQuotaMilli: what a task counts for against a project's GPU quota, placed
// (on a GPU of a model) and before it is placed; the two agree for every known model.

TEST(QuotaMilliTest, MigCountsItsSliceShareBeforeAndAfterPlacement) {
  TaskRequest r;
  r.mig_profile = "3g.40gb";
  EXPECT_EQ(r.GpuMilli(), 0) << "the model is unknown before placement";
  EXPECT_EQ(UnplacedQuotaMilli(r), 428);
  EXPECT_EQ(QuotaMilli(r, "A100-80GB"), 428);
  EXPECT_EQ(QuotaMilli(r, "H100-80GB"), 428);
  r.mig_profile = "2g.12gb";  // only the A30 (4 compute slices) offers it
  EXPECT_EQ(UnplacedQuotaMilli(r), 500);
  EXPECT_EQ(QuotaMilli(r, "A30-24GB"), 500);
  r.gpu_models = {"A100-80GB"};  // the profile is not offered on the allowed model
  EXPECT_EQ(UnplacedQuotaMilli(r), 0);
}

TEST(QuotaMilliTest, OtherFormsCountTheirDemandWhateverTheModel) {
  TaskRequest whole;
  whole.gpu_count = 2;
  EXPECT_EQ(UnplacedQuotaMilli(whole), 2000);
  EXPECT_EQ(QuotaMilli(whole, "A30-24GB"), 2000);
  TaskRequest share;
  share.gpu_milli = 250;
  EXPECT_EQ(UnplacedQuotaMilli(share), 250);
  EXPECT_EQ(QuotaMilli(share, ""), 250);
}

// Every profile name offered by several models has one share on all of them: the pre-placement
// count (the queue's quota pre-filter) is the placed count (the plan applier) exactly.
TEST(QuotaMilliTest, EveryProfileHasOneShareOnEveryModelThatOffersIt) {
  for (const GpuModelInfo& model : KnownGpuModels()) {
    for (const MigProfile& profile : model.mig_profiles) {
      TaskRequest r;
      r.mig_profile = profile.name;
      EXPECT_EQ(UnplacedQuotaMilli(r), QuotaMilli(r, model.name))
          << profile.name << " on " << model.name;
    }
  }
}

}  // namespace
}  // namespace gpupool
