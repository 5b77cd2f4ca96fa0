// ParseLimits: one value for every device, one per ordinal, unset, and every malformed form
// (which refuses everything rather than running unlimited).
#include "cudashim/limits.h"

#include <gtest/gtest.h>

namespace gpupool::cudashim {
namespace {

TEST(Limits, UnsetEnforcesNothing) {
  const Limits limits = ParseLimits(nullptr);
  EXPECT_FALSE(limits.enforced);
  EXPECT_TRUE(limits.error.empty());
}

TEST(Limits, OneValueHoldsForEveryDevice) {
  const Limits limits = ParseLimits("4294967296");
  EXPECT_TRUE(limits.enforced);
  EXPECT_TRUE(limits.error.empty());
  EXPECT_EQ(limits.bytes[0], 4294967296u);
  EXPECT_EQ(limits.bytes[kMaxDevices - 1], 4294967296u);
}

TEST(Limits, AListGivesEachOrdinalItsOwnAndLaterOnesNothing) {
  const Limits limits = ParseLimits("1024,0,18446744073709551615");
  EXPECT_TRUE(limits.error.empty()) << limits.error;
  EXPECT_EQ(limits.bytes[0], 1024u);
  EXPECT_EQ(limits.bytes[1], 0u);
  EXPECT_EQ(limits.bytes[2], 18446744073709551615u);
  EXPECT_EQ(limits.bytes[3], 0u);
}

TEST(Limits, MalformedValuesRefuseEverything) {
  for (const char* bad : {"", "12abc", "-1", "+5", " 5", "5 ", "1,,2", "1,", ",1", "4Gi", "1.5",
                          "18446744073709551616", "99999999999999999999999"}) {
    const Limits limits = ParseLimits(bad);
    EXPECT_TRUE(limits.enforced) << bad;
    EXPECT_NE(limits.error.find("GPUPOOL_GPU_MEM_LIMIT_BYTES='"), std::string::npos) << bad;
    EXPECT_NE(limits.error.find("every GPU allocation is refused"), std::string::npos) << bad;
    for (uint64_t b : limits.bytes) EXPECT_EQ(b, 0u) << bad;
  }
}

TEST(Limits, MoreDevicesThanItCountsAreRefused) {
  std::string many;
  for (int i = 0; i <= kMaxDevices; ++i) many += i == 0 ? "1" : ",1";
  const Limits limits = ParseLimits(many.c_str());
  EXPECT_NE(limits.error.find("more than 64 devices"), std::string::npos);
  EXPECT_EQ(limits.bytes[0], 0u);
}

TEST(Limits, TheErrorShowsNoControlCharacters) {
  const Limits limits = ParseLimits("1\n\x1b[2J");
  EXPECT_EQ(limits.error.find('\n'), std::string::npos);
  EXPECT_EQ(limits.error.find('\x1b'), std::string::npos);
}

}  // namespace
}  // namespace gpupool::cudashim
