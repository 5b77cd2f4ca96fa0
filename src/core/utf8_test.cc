// Tests of utf8.h: the boundaries of each sequence length, and every way a sequence can be
// ill-formed (stray continuation, truncation, overlong forms, surrogates, past U+10FFFF).
#include "core/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace gpupool {
namespace {

struct Utf8Row {
  const char* name;
  std::string text;
  bool valid;
  size_t first_length;  // Utf8SequenceLength(text, 0)
};

class Utf8Test : public testing::TestWithParam<Utf8Row> {};

TEST_P(Utf8Test, ValidityAndFirstSequence) {
  const Utf8Row& row = GetParam();
  EXPECT_EQ(IsValidUtf8(row.text), row.valid);
  EXPECT_EQ(Utf8SequenceLength(row.text, 0), row.first_length);
}

INSTANTIATE_TEST_SUITE_P(
    Sequences, Utf8Test,
    testing::Values(Utf8Row{"Ascii", "a/b.txt", true, 1},
                    Utf8Row{"Nul", std::string("\0", 1), true, 1},
                    Utf8Row{"LastAscii", "\x7f", true, 1},
                    Utf8Row{"FirstTwoByte", "\xc2\x80", true, 2},           // U+0080
                    Utf8Row{"LastTwoByte", "\xdf\xbf", true, 2},            // U+07FF
                    Utf8Row{"FirstThreeByte", "\xe0\xa0\x80", true, 3},     // U+0800
                    Utf8Row{"BeforeSurrogates", "\xed\x9f\xbf", true, 3},   // U+D7FF
                    Utf8Row{"AfterSurrogates", "\xee\x80\x80", true, 3},    // U+E000
                    Utf8Row{"FirstFourByte", "\xf0\x90\x80\x80", true, 4},  // U+10000
                    Utf8Row{"LastCodePoint", "\xf4\x8f\xbf\xbf", true, 4},  // U+10FFFF
                    Utf8Row{"Mixed", "gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80", true, 1},
                    Utf8Row{"StrayContinuation", "\x80", false, 0},
                    Utf8Row{"InvalidLeadF8", "\xf8\x88\x80\x80\x80", false, 0},
                    Utf8Row{"InvalidLeadFF", "\xff", false, 0},
                    Utf8Row{"TruncatedTwo", "\xc3", false, 0},
                    Utf8Row{"TruncatedFour", "\xf0\x9f\x98", false, 0},
                    Utf8Row{"ContinuationMissing", "\xe2\x28\xa1", false, 0},
                    Utf8Row{"OverlongSlash", "\xc0\xaf", false, 0},
                    Utf8Row{"OverlongNul", "\xc0\x80", false, 0},
                    Utf8Row{"OverlongThree", "\xe0\x9f\xbf", false, 0},
                    Utf8Row{"OverlongFour", "\xf0\x8f\xbf\xbf", false, 0},
                    Utf8Row{"FirstSurrogate", "\xed\xa0\x80", false, 0},  // U+D800
                    Utf8Row{"LastSurrogate", "\xed\xbf\xbf", false, 0},   // U+DFFF
                    Utf8Row{"PastLastCodePoint", "\xf4\x90\x80\x80", false, 0},
                    Utf8Row{"BadAfterGood", "ok\xc3", false, 1}),
    [](const testing::TestParamInfo<Utf8Row>& row) { return std::string(row.param.name); });

TEST(Utf8Test, EmptyTextIsValid) { EXPECT_TRUE(IsValidUtf8("")); }

TEST(Utf8Test, ControlCharactersAreC0DelAndC1) {
  EXPECT_EQ(ControlCharacterLength(std::string_view("\0", 1), 0), 1u);
  EXPECT_EQ(ControlCharacterLength("\x1b[", 0), 1u);
  EXPECT_EQ(ControlCharacterLength("\x7f", 0), 1u);
  EXPECT_EQ(ControlCharacterLength("\xc2\x9b", 0), 2u);  // U+009B, CSI
  EXPECT_EQ(ControlCharacterLength("\xc2\xa0", 0), 0u);  // U+00A0, no-break space
  EXPECT_EQ(ControlCharacterLength("\xc2", 0), 0u);      // truncated: not a control character
  EXPECT_EQ(ControlCharacterLength(" ~", 0), 0u);
  EXPECT_EQ(ControlCharacterLength("日", 0), 0u);
}

TEST(Utf8Test, SequenceLengthAtAnOffset) {
  const std::string text = "a\xc3\xbc\xe2\x82\xac";
  EXPECT_EQ(Utf8SequenceLength(text, 1), 2u);
  EXPECT_EQ(Utf8SequenceLength(text, 3), 3u);
  EXPECT_EQ(Utf8SequenceLength(text, 2), 0u);  // a continuation byte starts nothing
}

}  // namespace
}  // namespace gpupool
