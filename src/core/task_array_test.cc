// Tests of the --array grammar (core/task_array.h): the forms Slurm users type, the canonical
// text, and a message for each malformed spec.
#include "core/task_array.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

std::vector<int64_t> Range(int64_t first, int64_t last, int64_t step = 1) {
  std::vector<int64_t> v;
  for (int64_t i = first; i <= last; i += step) v.push_back(i);
  return v;
}

TEST(ArraySpecTest, ParsesTheFormsSlurmAccepts) {
  struct Case {
    std::string text;
    std::vector<int64_t> indexes;
    int32_t limit;
    std::string canonical;
  };
  const std::vector<Case> cases = {
      {"0-99", Range(0, 99), 0, "0-99"},
      {"0-99%10", Range(0, 99), 10, "0-99%10"},
      {"1,3,5-9", {1, 3, 5, 6, 7, 8, 9}, 0, "1,3,5-9"},
      {"7", {7}, 0, "7"},
      {"0-20:5", {0, 5, 10, 15, 20}, 0, "0,5,10,15,20"},
      {" 3,1,2,2 ", {1, 2, 3}, 0, "1-3"},
      {"0-9999%1", Range(0, 9999), 1, "0-9999%1"},
      {"999999", {999999}, 0, "999999"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    Result<ArraySpec> spec = ParseArraySpec(c.text);
    ASSERT_TRUE(spec) << spec.error().message;
    EXPECT_EQ(spec->indexes, c.indexes);
    EXPECT_EQ(spec->limit, c.limit);
    EXPECT_EQ(ArraySpecText(*spec), c.canonical);
    Result<ArraySpec> again = ParseArraySpec(ArraySpecText(*spec));
    ASSERT_TRUE(again);
    EXPECT_EQ(*again, *spec) << "the canonical text parses to the same spec";
  }
}

TEST(ArraySpecTest, RefusesMalformedSpecsSayingWhy) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "is empty"},
      {"5-1", "'5-1': the range ends below its start"},
      {"1,,2", "has an empty item"},
      {"1,", "has an empty item"},
      {"a-b", "must be an integer in 0..999999"},
      {"-3", "must be an integer in 0..999999"},
      {"1000000", "must be an integer in 0..999999"},
      {"0-9%0", "the limit after % must be an integer in 1..10000"},
      {"0-9%", "the limit after % must be an integer in 1..10000"},
      {"0-9%x", "the limit after % must be an integer in 1..10000"},
      {"0-9:0", "the step after : must be ≥ 1"},
      {"4:2", "a step needs a range"},
      {"1.5", "must be an integer"},
      {"0-10000", "has more than 10000 indexes, the most one array may have"},
      {"0-999999", "has more than 10000 indexes"},
  };
  for (const auto& [text, want] : cases) {
    SCOPED_TRACE(text);
    Result<ArraySpec> spec = ParseArraySpec(text);
    ASSERT_FALSE(spec);
    EXPECT_EQ(spec.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(spec.error().message.find(want), std::string::npos) << spec.error().message;
  }
}

TEST(ArraySpecTest, ArrayIdsAreNamedAfterTheFirstSeq) {
  EXPECT_EQ(ArrayId(7), "a-7");
  EXPECT_TRUE(IsArrayId("a-7"));
  EXPECT_FALSE(IsArrayId("a-"));
  EXPECT_FALSE(IsArrayId("a-0"));
  EXPECT_FALSE(IsArrayId("t-7"));
  EXPECT_FALSE(IsArrayId("a-7x"));
}

}  // namespace
}  // namespace gpupool
