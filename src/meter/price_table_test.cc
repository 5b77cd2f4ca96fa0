// Tests for meter/price_table: Validate() messages, version lookup by time, the "gpu:*" fallback,
// model aliases, duplicate versions and Create().
#include "meter/price_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace gpupool::meter {
namespace {

// ---------------------------------------------------------------------------------------------
// Validate.

struct ValidateRow {
  const char* name;
  Price price;
  const char* error;  // nullptr: accepted; else a substring of the message
};
void PrintTo(const ValidateRow& row, std::ostream* os) { *os << row.name; }

class ValidateTest : public testing::TestWithParam<ValidateRow> {};

TEST_P(ValidateTest, Checks) {
  const ValidateRow& row = GetParam();
  const Status s = Validate(row.price);
  if (row.error == nullptr) {
    EXPECT_TRUE(s.has_value()) << s.error().message;
  } else {
    ASSERT_FALSE(s.has_value());
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(s.error().message.find(row.error), std::string::npos) << s.error().message;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Price, ValidateTest,
    testing::ValuesIn(std::vector<ValidateRow>{
        {"cpu", {"cpu", 36'000, 0}, nullptr},
        {"memory", {"memory", 3'600, 0}, nullptr},
        {"gpu_fallback", {"gpu:*", 2'000'000, 0}, nullptr},
        {"gpu_known", {"gpu:A100-80GB", 3'600'000, 0}, nullptr},
        {"gpu_alias", {"gpu:NVIDIA A100-SXM4-80GB", 3'600'000, 0}, nullptr},
        {"gpu_opaque", {"gpu:G2", 1'000'000, 0}, nullptr},
        {"free", {"cpu", 0, 0}, nullptr},  // 0 is a price: free from here on
        {"unknown_resource", {"disk", 1, 0}, "resource must be"},
        {"empty_resource", {"", 1, 0}, "got ''"},
        {"gpu_without_model", {"gpu:", 1, 0}, "got 'gpu:'"},
        {"gpu_plain", {"gpu", 1, 0}, "got 'gpu'"},
        {"upper_case_cpu", {"CPU", 1, 0}, "got 'CPU'"},
        {"model_with_spaces_around", {"gpu: A100-80GB", 1, 0}, "surrounding spaces"},
        {"model_with_control_char", {"gpu:A100\n", 1, 0}, "control characters"},
        {"negative_rate", {"cpu", -1, 0}, "micros_per_hour must be >= 0, got -1"},
        {"negative_effective", {"cpu", 1, -5}, "effective_ms must be >= 0, got -5"},
    }),
    [](const testing::TestParamInfo<ValidateRow>& row_info) {
      return std::string(row_info.param.name);
    });

// ---------------------------------------------------------------------------------------------
// Lookup by time.

struct RateRow {
  const char* name;
  const char* resource;  // looked up with RateAt, or with GpuRateAt when it starts "model:"
  int64_t time_ms;
  int64_t rate;
};
void PrintTo(const RateRow& row, std::ostream* os) { *os << row.name; }

// cpu: 10 from t=1000, 20 from t=5000, 0 (free) from t=9000. memory: never priced.
// gpu:*: 100 from t=0. gpu:A100-80GB (given by an alias): 300 from t=2000, then 350 from 4000.
// gpu:H100-80GB: given twice at t=0, 500 then 600 (the later one wins).
const std::vector<Price>& Prices() {
  static const std::vector<Price> prices = {
      {"cpu", 20, 5000},
      {"cpu", 10, 1000},
      {"cpu", 0, 9000},
      {"gpu:*", 100, 0},
      {"gpu:NVIDIA A100-SXM4-80GB", 300, 2000},
      {"gpu:A100-80GB", 350, 4000},
      {"gpu:H100-80GB", 500, 0},
      {"gpu:H100-80GB", 600, 0},
  };
  return prices;
}

class RateTest : public testing::TestWithParam<RateRow> {};

TEST_P(RateTest, InForce) {
  const PriceTable table(Prices());
  const RateRow& row = GetParam();
  const std::string resource = row.resource;
  if (resource.starts_with("model:")) {
    EXPECT_EQ(table.GpuRateAt(resource.substr(6), row.time_ms), row.rate);
  } else {
    EXPECT_EQ(table.RateAt(resource, row.time_ms), row.rate);
  }
}

INSTANTIATE_TEST_SUITE_P(Versions, RateTest,
                         testing::ValuesIn(std::vector<RateRow>{
                             {"cpu_before_first_version", "cpu", 999, 0},
                             {"cpu_at_first_version", "cpu", 1000,
                              10},  // a version applies from its effective_ms on
                             {"cpu_between", "cpu", 4999, 10},
                             {"cpu_second_version", "cpu", 5000, 20},
                             {"cpu_made_free", "cpu", 9000, 0},
                             {"cpu_long_after", "cpu", 1'000'000'000'000, 0},
                             {"memory_never_priced", "memory", 5000, 0},
                             {"unknown_resource", "disk", 5000, 0},
                             // A100: the fallback until its own price starts, then its own; the
                             // alias and the canonical name are one history.
                             {"a100_before_own_price", "model:A100-80GB", 1999, 100},
                             {"a100_own_price", "model:A100-80GB", 2000, 300},
                             {"a100_own_price_by_alias", "model:nvidia a100-sxm4-80gb", 3000, 300},
                             {"a100_second_version", "model:A100-80GB", 4000, 350},
                             {"a100_resource_by_alias", "gpu:NVIDIA A100-SXM4-80GB", 4000, 350},
                             {"h100_duplicate_last_wins", "model:H100-80GB", 0, 600},
                             {"opaque_model_fallback", "model:G2", 10, 100},
                             {"empty_model_fallback", "model:", 10, 100},
                             {"fallback_by_name", "gpu:*", 10, 100},
                         }),
                         [](const testing::TestParamInfo<RateRow>& row_info) {
                           return std::string(row_info.param.name);
                         });

TEST(PriceTable, EmptyTableChargesNothing) {
  const PriceTable table;
  EXPECT_TRUE(table.Empty());
  EXPECT_EQ(table.RateAt("cpu", 0), 0);
  EXPECT_EQ(table.GpuRateAt("A100-80GB", 0), 0);
}

TEST(PriceTable, ChangesAfterListsEachChangeOnceInOrder) {
  const PriceTable table(Prices());
  // cpu changes at 1000, 5000, 9000; gpu:* at 0; A100 at 2000, 4000.
  EXPECT_EQ(table.ChangesAfter({"cpu", "gpu:*", "gpu:A100-80GB"}, 0),
            (std::vector<int64_t>{1000, 2000, 4000, 5000, 9000}));
  EXPECT_EQ(table.ChangesAfter({"cpu", "cpu"}, 1000), (std::vector<int64_t>{5000, 9000}));
  EXPECT_EQ(table.ChangesAfter({"memory"}, 0), std::vector<int64_t>{});
}

TEST(PriceTable, ConstructorLeavesOutInvalidPrices) {
  const PriceTable table({{"cpu", 10, 0}, {"cpu", -50, 100}, {"disk", 5, 0}});
  EXPECT_EQ(table.RateAt("cpu", 200), 10);  // the negative version never takes effect
  EXPECT_EQ(table.RateAt("disk", 200), 0);
}

TEST(PriceTable, CreateNamesTheInvalidPrice) {
  EXPECT_TRUE(PriceTable::Create(Prices()).has_value());
  const Result<PriceTable> bad = PriceTable::Create({{"cpu", 10, 0}, {"cpu", -50, 100}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message, "prices[1]: micros_per_hour must be >= 0, got -50");
}

}  // namespace
}  // namespace gpupool::meter
