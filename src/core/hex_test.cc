// Tests of hex.h: known encodings in both cases, every byte decoding back through
// HexDigitValue, and what IsLowerHex accepts.
#include "core/hex.h"

#include <gtest/gtest.h>

#include <string>

namespace gpupool {
namespace {

TEST(HexTest, KnownEncodings) {
  EXPECT_EQ(HexEncode(""), "");
  EXPECT_EQ(HexEncode(std::string("\x00\x7f\x80\xff", 4)), "007f80ff");
  EXPECT_EQ(HexEncode("gpu"), "677075");
  EXPECT_EQ(HexEncode("\xab\xcd", HexCase::kUpper), "ABCD");
}

TEST(HexTest, EveryByteRoundTripsInBothCases) {
  for (const HexCase letters : {HexCase::kLower, HexCase::kUpper}) {
    for (int b = 0; b < 256; ++b) {
      const std::string hex = HexEncode(std::string(1, static_cast<char>(b)), letters);
      ASSERT_EQ(hex.size(), 2u);
      EXPECT_EQ(HexDigitValue(hex[0]) * 16 + HexDigitValue(hex[1]), b) << hex;
      EXPECT_EQ(IsLowerHex(hex), letters == HexCase::kLower || (b % 16 < 10 && b / 16 < 10)) << hex;
    }
  }
}

TEST(HexTest, DigitValuesAndOtherCharacters) {
  EXPECT_EQ(HexDigitValue('0'), 0);
  EXPECT_EQ(HexDigitValue('9'), 9);
  EXPECT_EQ(HexDigitValue('a'), 10);
  EXPECT_EQ(HexDigitValue('F'), 15);
  for (const char c : {'g', 'G', '/', ':', '@', '`', ' ', '\0'}) {
    EXPECT_EQ(HexDigitValue(c), -1) << static_cast<int>(c);
  }
}

TEST(HexTest, IsLowerHex) {
  EXPECT_TRUE(IsLowerHex(""));
  EXPECT_TRUE(IsLowerHex("0123456789abcdef"));
  EXPECT_FALSE(IsLowerHex("0123456789ABCDEF"));
  EXPECT_FALSE(IsLowerHex("12g4"));
  EXPECT_FALSE(IsLowerHex(std::string("ab\0", 3)));
}

}  // namespace
}  // namespace gpupool
