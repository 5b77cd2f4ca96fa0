// Unit tests of the CLI's text helpers: times, money, sizes, tables (format.h).
#include "cli/format.h"

#include <gtest/gtest.h>

#include <limits>

namespace gpupool::cli {
namespace {

constexpr int64_t kNow = 1714564800000;  // 2024-05-01T12:00:00Z

TEST(FormatAgeTest, CoarseAndNeverNegative) {
  EXPECT_EQ(FormatAge(0, kNow), "-");
  EXPECT_EQ(FormatAge(kNow - 192'500, kNow), "3m12s");
  EXPECT_EQ(FormatAge(kNow - 300, kNow), "0s");
  EXPECT_EQ(FormatAge(kNow + 5'000, kNow), "0s");  // clock skew
}

TEST(FormatTimeTest, IsoUtc) {
  EXPECT_EQ(FormatTime(0), "-");
  EXPECT_EQ(FormatTime(kNow), "2024-05-01T12:00:00Z");
  EXPECT_EQ(FormatTime(kNow + 999), "2024-05-01T12:00:00Z");
  EXPECT_EQ(FormatTime(1709251199000), "2024-02-29T23:59:59Z");
  EXPECT_EQ(FormatTime(-1000), "1969-12-31T23:59:59Z");
  EXPECT_EQ(FormatTime(1), "1970-01-01T00:00:00Z");
}

TEST(ParseTimeTest, Forms) {
  const struct {
    const char* text;
    int64_t ms;
  } cases[] = {
      {"now", kNow},
      {"NOW", kNow},
      {"-7d", kNow - 7 * 86'400'000},
      {"+1h", kNow + 3'600'000},
      {"2024-05-01", 1714521600000},
      {"2024-05-01T12:00:00Z", kNow},
      {"2024-05-01T12:00:00", kNow},
      {"2024-05-01 12:00", kNow},
      {"2000-01-01", 946684800000},
      {"2024-02-29T23:59:59Z", 1709251199000},
      {"1714564800000", kNow},
  };
  for (const auto& c : cases) {
    Result<int64_t> ms = ParseTime(c.text, kNow);
    ASSERT_TRUE(ms) << c.text << ": " << ms.error().message;
    EXPECT_EQ(*ms, c.ms) << c.text;
  }
}

TEST(ParseTimeTest, Refuses) {
  for (const char* text :
       {"", "yesterday", "2024-02-30", "2023-02-29", "2024-13-01", "2024-05-01T24:00", "2024-5-1",
        "-x", "+", "2024-05-01Tnoon", "2024-05-01T12:00:00+02:00"}) {
    Result<int64_t> ms = ParseTime(text, kNow);
    ASSERT_FALSE(ms) << text;
    EXPECT_NE(ms.error().message.find("invalid time"), std::string::npos);
  }
  EXPECT_FALSE(ParseTime("-100000d", kNow));  // before the epoch
}

TEST(ParseTimeTest, RoundTripsFormatTime) {
  for (int64_t ms : {int64_t{946684800000}, kNow, int64_t{1709251199000}}) {
    EXPECT_EQ(*ParseTime(FormatTime(ms), kNow), ms);
  }
}

TEST(MoneyTest, FormatsMicrosWithSixDecimals) {
  EXPECT_EQ(FormatMoney(0), "0.000000");
  EXPECT_EQ(FormatMoney(12'345'678), "12.345678");
  EXPECT_EQ(FormatMoney(1), "0.000001");
  EXPECT_EQ(FormatMoney(-500'000), "-0.500000");
  EXPECT_EQ(FormatMoney(100'000'000), "100.000000");
  EXPECT_EQ(FormatMoney(std::numeric_limits<int64_t>::min()), "-9223372036854.775808");
}

TEST(MoneyTest, ParsesUnitsToMicros) {
  EXPECT_EQ(*ParseMoney("100"), 100'000'000);
  EXPECT_EQ(*ParseMoney("12.5"), 12'500'000);
  EXPECT_EQ(*ParseMoney("0.000001"), 1);
  EXPECT_EQ(*ParseMoney("12.345678"), 12'345'678);
  EXPECT_EQ(*ParseMoney(FormatMoney(987'654'321)), 987'654'321);
  for (const char* bad : {"", "-1", "abc", "1.", ".5", "1,5", "1.2.3", "1e6"}) {
    EXPECT_FALSE(ParseMoney(bad)) << bad;
  }
  Result<int64_t> precise = ParseMoney("1.1234567");
  ASSERT_FALSE(precise);
  EXPECT_NE(precise.error().message.find("six decimals"), std::string::npos);
  EXPECT_FALSE(ParseMoney("99999999999999"));  // overflows micros
}

TEST(SizeTest, ParsesMibWithUnits) {
  EXPECT_EQ(*ParseMib("16384"), 16384);
  EXPECT_EQ(*ParseMib("512Mi"), 512);
  EXPECT_EQ(*ParseMib("16Gi"), 16384);
  EXPECT_EQ(*ParseMib("16GiB"), 16384);
  EXPECT_EQ(*ParseMib("1Ti"), 1024 * 1024);
  EXPECT_EQ(*ParseMib("16G"), 16384);  // binary units, as docker's
  EXPECT_EQ(*ParseMib("16GB"), 16384);
  EXPECT_EQ(*ParseMib("512m"), 512);
  EXPECT_EQ(*ParseMib("2T"), 2 * 1024 * 1024);
  for (const char* bad : {"", "16X", "1.5Gi", "-1", "Gi", "16 KB", "16Gx"}) {
    EXPECT_FALSE(ParseMib(bad)) << bad;
  }
  EXPECT_EQ(ParseMib("16X").error().message,
            "invalid size '16X': use MiB (16384) or a number with a unit (512M, 16G, 1T; also "
            "Mi/MiB/MB, Gi/GiB/GB, Ti/TiB/TB, all binary)");
  EXPECT_EQ(*ParseGib("50"), 50);
  EXPECT_EQ(*ParseGib("50G"), 50);
  EXPECT_EQ(*ParseGib("1025M"), 2);
  EXPECT_FALSE(ParseGib("50 gigs"));
  EXPECT_EQ(FormatMib(0), "0");
  EXPECT_EQ(FormatMib(512), "512Mi");
  EXPECT_EQ(FormatMib(16384), "16Gi");
  EXPECT_EQ(FormatMib(1536), "1536Mi");
  EXPECT_EQ(FormatMib(2 * 1024 * 1024), "2Ti");
}

TEST(MilliTest, FormatsAndParses) {
  EXPECT_EQ(FormatMilli(2000), "2");
  EXPECT_EQ(FormatMilli(500), "0.5");
  EXPECT_EQ(FormatMilli(1250), "1.25");
  EXPECT_EQ(FormatMilli(1), "0.001");
  EXPECT_EQ(FormatMilli(-1500), "-1.5");
  EXPECT_EQ(*ParseMilli("2"), 2000);
  EXPECT_EQ(*ParseMilli("0.5"), 500);
  EXPECT_EQ(*ParseMilli("1.125"), 1125);
  for (const char* bad : {"", "0.1234", "-1", "x", "1."}) EXPECT_FALSE(ParseMilli(bad)) << bad;
}

TEST(ParseIntegerTest, RangeInMessage) {
  EXPECT_EQ(*ParseInteger("--gpus", "4", 1, 8), 4);
  EXPECT_EQ(*ParseInteger("--gpus", " 4 ", 1, 8), 4);
  Result<int64_t> big = ParseInteger("--gpus", "9", 1, 8);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().message, "--gpus must be an integer in 1..8, got '9'");
  Result<int64_t> text = ParseInteger("--cpu", "two", 0, std::numeric_limits<int64_t>::max());
  ASSERT_FALSE(text);
  EXPECT_EQ(text.error().message, "--cpu must be an integer >= 0, got 'two'");
  EXPECT_FALSE(ParseInteger("--gpus", "1.5", 1, 8));
  EXPECT_FALSE(ParseInteger("--gpus", "", 1, 8));
  EXPECT_FALSE(ParseInteger("--x", "99999999999999999999", 0, std::numeric_limits<int64_t>::max()));
}

TEST(FormatGpuRequestTest, OneCellPerForm) {
  EXPECT_EQ(FormatGpuRequest(0, 0, 0, ""), "-");
  EXPECT_EQ(FormatGpuRequest(2, 0, 0, ""), "2");
  EXPECT_EQ(FormatGpuRequest(0, 500, 0, ""), "0.5");
  EXPECT_EQ(FormatGpuRequest(0, 250, 8192, ""), "0.25+8Gi");
  EXPECT_EQ(FormatGpuRequest(0, 0, 0, "3g.40gb"), "3g.40gb");
}

TEST(ListTest, SplitsAndTrims) {
  EXPECT_EQ(SplitList("a,b, c"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(SplitList("a"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(SplitList("a,,b"), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(JoinList({"a", "b", "c"}), "a,b,c");
  EXPECT_EQ(JoinList({"a", "b"}, ", "), "a, b");
  EXPECT_EQ(JoinList({}), "");
  EXPECT_EQ(FewOf({}), "-");
  EXPECT_EQ(FewOf({"t-1", "t-2", "t-3"}), "t-1,t-2,t-3");
  EXPECT_EQ(FewOf({"t-1", "t-2", "t-3", "t-4", "t-5"}), "t-1,t-2,t-3,+2");
}

TEST(CheckIdentifierTest, NamesWhat) {
  EXPECT_TRUE(CheckIdentifier("task id", "t-42"));
  Status bad = CheckIdentifier("task id", "t 42");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("task id must be"), std::string::npos);
  EXPECT_FALSE(CheckIdentifier("task id", ""));
  EXPECT_FALSE(CheckIdentifier("task id", "../x/y"));
}

TEST(ShellJoinTest, QuotesWhatNeedsIt) {
  EXPECT_EQ(ShellJoin({"python", "train.py", "--lr=0.1"}), "python train.py --lr=0.1");
  EXPECT_EQ(ShellJoin({"sh", "-c", "echo hi"}), "sh -c 'echo hi'");
  EXPECT_EQ(ShellJoin({"it's"}), "'it'\\''s'");
  EXPECT_EQ(ShellJoin({""}), "''");
}

TEST(TableTest, AlignsColumnsWithoutTrailingBlanks) {
  Table t({"ID", "NAME", "GPUS"});
  t.AlignRight(2);
  t.AddRow({"t-1", "train", "2"});
  t.AddRow({"t-10", "x", "0.25+8Gi"});
  t.AddRow({"t-2"});  // missing cells are blank
  EXPECT_EQ(t.Render(),
            "ID    NAME       GPUS\n"
            "t-1   train         2\n"
            "t-10  x      0.25+8Gi\n"
            "t-2\n");
  EXPECT_EQ(t.rows(), 3u);
}

TEST(TableTest, CountsUtf8CodePoints) {
  Table t({"A", "B"});
  t.AddRow({"ünï", "x"});
  t.AddRow({"abcd", "y"});
  EXPECT_EQ(t.Render(),
            "A     B\n"
            "ünï   x\n"
            "abcd  y\n");
  EXPECT_EQ(DisplayWidth("ünï…"), 4u);
}

// Issue 11 finding 5: a task named "\x1b[2J\x1b[31mPWNED" or "a\nb\r\nX: 1" was printed raw.
TEST(EscapeControlsTest, MakesEveryControlCharacterVisible) {
  EXPECT_EQ(EscapeControls("\x1b[2J\x1b[31mPWNED"), "\\x1b[2J\\x1b[31mPWNED");
  EXPECT_EQ(EscapeControls("a\nb\r\nX: 1"), "a\\nb\\x0d\\nX: 1");
  EXPECT_EQ(EscapeControls(std::string("n\0ul\x7f\t", 6)), "n\\x00ul\\x7f\\t");
  EXPECT_EQ(EscapeControls("csi \xc2\x9b" "2J"), "csi \\u009b2J");
  EXPECT_EQ(EscapeControls("größe 日本 ✓"), "größe 日本 ✓");
  Table t({"NAME"});
  t.AddRow({"a\nX"});
  EXPECT_EQ(t.Render(), "NAME\na\\nX\n");
  Details d;
  d.Add("Name", "\x1b]0;x\x07");
  EXPECT_EQ(d.Render().find('\x1b'), std::string::npos);
}

TEST(DetailsTest, PadsKeysAndSkipsEmptyValues) {
  Details d;
  d.Add("ID", "t-1");
  d.Add("Empty", "");
  d.Add("Queue position", "3");
  EXPECT_EQ(d.Render(),
            "ID:             t-1\n"
            "Queue position: 3\n");
}

TEST(FormatTest, MetricValuesPrintWithoutANeedlessFraction) {
  EXPECT_EQ(FormatNumber(6.0), "6");
  EXPECT_EQ(FormatNumber(-3.0), "-3");
  EXPECT_EQ(FormatNumber(0.953), "0.953");
  EXPECT_EQ(FormatNumber(1e-7), "1e-07");
  EXPECT_EQ(FormatNumber(1e20), "1e+20");
}

TEST(FormatTest, PricesAreCurrencyPerHour) {
  EXPECT_EQ(*ParsePricePerHour("1.58/h"), 1'580'000);
  EXPECT_EQ(*ParsePricePerHour("2.5/hour"), 2'500'000);
  EXPECT_EQ(*ParsePricePerHour("3"), 3'000'000);
  EXPECT_EQ(*ParsePricePerHour("0/H"), 0);
  EXPECT_EQ(ParsePricePerHour("1.5/s").error().message,
            "invalid price '1.5/s': use an amount per hour with at most six decimals, like 2.5/h");
  EXPECT_FALSE(ParsePricePerHour("/h"));
}

TEST(FormatTest, TaskIdsMayBeBareNumbers) {
  EXPECT_EQ(*ParseTaskId("t-42"), "t-42");
  EXPECT_EQ(*ParseTaskId("42"), "t-42");
  EXPECT_EQ(*ParseTaskId("my.task"), "my.task");
  EXPECT_FALSE(ParseTaskId(""));
  EXPECT_FALSE(ParseTaskId("t 1"));
}

TEST(FormatTest, TheExitStatusOfAWaitedTask) {
  EXPECT_EQ(TaskExitStatus("succeeded", 0), 0);
  EXPECT_EQ(TaskExitStatus("failed", 3), 3);
  EXPECT_EQ(TaskExitStatus("failed", -1), 1);
  EXPECT_EQ(TaskExitStatus("failed", 300), 1);
  EXPECT_EQ(TaskExitStatus("stopped", 0), 1);
  EXPECT_EQ(TaskExitStatus("lost", 0), 1);
}

}  // namespace
}  // namespace gpupool::cli
