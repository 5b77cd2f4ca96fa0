// Unit tests of core/duration: the forms ParseDurationMs accepts and refuses, FormatDurationMs.
#include "core/duration.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace gpupool {
namespace {

TEST(ParseDurationMsTest, AcceptsUnitsLargestFirst) {
  const struct {
    const char* text;
    int64_t ms;
  } cases[] = {
      {"90s", 90'000},
      {"15m", 900'000},
      {"2h", 7'200'000},
      {"1h30m", 5'400'000},
      {"1d", 86'400'000},
      {"500ms", 500},
      {"0s", 0},
      {" 2h ", 7'200'000},
      {"1d2h3m4s5ms", 93'784'005},
      {"90m", 5'400'000},
      {"2H", 7'200'000},
      {"1m30s", 90'000},
  };
  for (const auto& c : cases) {
    Result<int64_t> ms = ParseDurationMs(c.text);
    ASSERT_TRUE(ms) << c.text << ": " << ms.error().message;
    EXPECT_EQ(*ms, c.ms) << c.text;
  }
}

TEST(ParseDurationMsTest, RefusesWithAnExample) {
  for (const char* text :
       {"", "90", "10", "2x", "5x", "h", "1h30", "1.5h", "-5m", "1e3s", "2 h", "1h 30m", "abc"}) {
    Result<int64_t> ms = ParseDurationMs(text);
    ASSERT_FALSE(ms) << text;
    EXPECT_NE(ms.error().message.find("'" + std::string(text) + "'"), std::string::npos);
    EXPECT_NE(ms.error().message.find("1h30m"), std::string::npos) << ms.error().message;
  }
}

TEST(ParseDurationMsTest, RefusesUnitsOutOfOrderOrTwice) {
  for (const char* text : {"30m1h", "1h1h", "5s1d"}) {
    Result<int64_t> ms = ParseDurationMs(text);
    ASSERT_FALSE(ms) << text;
    EXPECT_NE(ms.error().message.find("largest to smallest"), std::string::npos);
  }
}

TEST(ParseDurationMsTest, RefusesOverflow) {
  for (const char* text : {"99999999999999999999d", "9999999999999d", "106751991167d23h"}) {
    Result<int64_t> ms = ParseDurationMs(text);
    ASSERT_FALSE(ms) << text;
    EXPECT_NE(ms.error().message.find("too long"), std::string::npos) << ms.error().message;
  }
}

TEST(FormatDurationMsTest, TwoMostSignificantUnits) {
  const struct {
    int64_t ms;
    const char* text;
  } cases[] = {
      {0, "0ms"},         {450, "450ms"},       {1'000, "1s"},     {1'999, "1s"},
      {192'000, "3m12s"}, {180'000, "3m"},      {3'600'000, "1h"}, {3'723'000, "1h2m"},
      {86'400'000, "1d"}, {90'061'000, "1d1h"}, {-5'000, "-5s"},   {45'000, "45s"},
  };
  for (const auto& c : cases) EXPECT_EQ(FormatDurationMs(c.ms), c.text) << c.ms;
  EXPECT_FALSE(FormatDurationMs(std::numeric_limits<int64_t>::min()).empty());
}

TEST(FormatDurationMsTest, RoundTripsThroughParse) {
  for (const char* text : {"3m12s", "1h30m", "1d", "45s", "2d4h", "250ms"}) {
    EXPECT_EQ(FormatDurationMs(*ParseDurationMs(text)), text);
  }
}

}  // namespace
}  // namespace gpupool
