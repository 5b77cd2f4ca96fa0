// Tests for core/text: TrimBlanks and EqualsIgnoringCase.
#include "core/text.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(TrimBlanks, OnlySpacesAndTabsAtTheEnds) {
  EXPECT_EQ(TrimBlanks(" \t gzip;q=0 \t"), "gzip;q=0");
  EXPECT_EQ(TrimBlanks("a b"), "a b");
  EXPECT_EQ(TrimBlanks(" \t "), "");
  EXPECT_EQ(TrimBlanks("x\n"), "x\n") << "not a blank";
}

TEST(EqualsIgnoringCase, AsciiLettersOnly) {
  EXPECT_TRUE(EqualsIgnoringCase("GZip", "gzip"));
  EXPECT_TRUE(EqualsIgnoringCase(".PNG", ".png"));
  EXPECT_FALSE(EqualsIgnoringCase("gzip", "gzi"));
  EXPECT_FALSE(EqualsIgnoringCase("[", "{")) << "'[' is not an upper-case '{'";
}

}  // namespace
}  // namespace gpupool
