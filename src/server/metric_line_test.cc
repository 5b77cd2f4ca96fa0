// Tests for server/metric_line: which fields of a metrics line become values, which are ignored,
// and which lines are refused.
#include "server/metric_line.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpupool::server {
namespace {

TEST(ParseMetricLineTest, NumbersAndBooleansBecomeValues) {
  const struct {
    const char* line;
    MetricValues values;
    int ignored;
  } rows[] = {
      {R"({"step": 1200, "val_acc": 0.953})", {{"step", 1200}, {"val_acc", 0.953}}, 0},
      {R"({"loss":-1.5e-3,"big":18446744073709551615,"neg":-9007199254740993})",
       {{"loss", -1.5e-3}, {"big", 18446744073709551615.0}, {"neg", -9007199254740992.0}},
       0},
      {R"({"done": true, "diverged": false})", {{"done", 1}, {"diverged", 0}}, 0},
      {R"({"eval.top_5": 0.9, "_x": 0, "A1": 1e300})",
       {{"eval.top_5", 0.9}, {"_x", 0}, {"A1", 1e300}},
       0},
      {"  {\"a\": 1}\r", {{"a", 1}}, 0},  // blanks and a CRLF line end
      {"{}", {}, 0},
      // Strings, nulls, arrays and objects are ignored, as are names the grammar cannot use.
      {R"({"step": 3, "phase": "eval", "lr": null, "hist": [1, 2], "sub": {"a": 1}})",
       {{"step", 3}},
       4},
      {R"({"1x": 1, "val-acc": 2, "": 3, "and": 4, "not": 5, "a b": 6, "ok": 7})", {{"ok", 7}}, 6},
  };
  for (const auto& r : rows) {
    Result<MetricPoint> p = ParseMetricLine(r.line);
    ASSERT_TRUE(p) << r.line << ": " << p.error().message;
    EXPECT_EQ(p->values, r.values) << r.line;
    EXPECT_EQ(p->ignored, r.ignored) << r.line;
  }
}

TEST(ParseMetricLineTest, NamesLongerThan64AreIgnored) {
  const std::string name64(64, 'n');
  Result<MetricPoint> p = ParseMetricLine("{\"" + name64 + "\": 1, \"" + name64 + "n\": 2}");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->values, (MetricValues{{name64, 1}}));
  EXPECT_EQ(p->ignored, 1);
}

TEST(ParseMetricLineTest, KeepsTheFirst64UsableFieldsInNameOrder) {
  std::string line = "{\"note\": \"x\"";
  for (int i = 0; i < 70; ++i)
    line += ", \"m" + std::to_string(100 + i) + "\": " + std::to_string(i);
  line += "}";
  Result<MetricPoint> p = ParseMetricLine(line);
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->values.size(), kMaxMetricsPerLine);
  EXPECT_EQ(p->values.begin()->first, "m100");
  EXPECT_EQ(p->values.rbegin()->first, "m163");
  EXPECT_EQ(p->ignored, 1 + 6);
}

TEST(ParseMetricLineTest, RefusesLinesThatAreNotOneJsonObject) {
  const struct {
    std::string line;
    const char* message;  // contained in the error
  } rows[] = {
      {"", "metrics line is empty; expected a JSON object"},
      {"   ", "metrics line is empty; expected a JSON object"},
      {"step=3", "metrics line is not valid JSON: parse error at line 1, column 1"},
      {R"({"a": 1)", "metrics line is not valid JSON: parse error at line 1, column 8"},
      {R"({"a": 1} {"b": 2})", "metrics line is not valid JSON: parse error at line 1, column 10"},
      {R"({"loss": NaN})", "metrics line is not valid JSON: parse error at line 1, column 10"},
      {R"({"loss": Infinity})", "metrics line is not valid JSON: parse error"},
      {R"({"loss": 1e999})", "metrics line is not valid JSON: number overflow parsing '1e999'"},
      {R"({"loss": -1e999})", "metrics line is not valid JSON: number overflow parsing '-1e999'"},
      {R"({"a": 1, "a": 2})", "metrics line has the key 'a' twice in one object"},
      {R"([1, 2])", "metrics line must be a JSON object, got array"},
      {"42", "metrics line must be a JSON object, got number"},
      {R"("step")", "metrics line must be a JSON object, got string"},
      {"{\"a\":" + std::string(40, '[') + std::string(40, ']') + "}",
       "metrics line nests deeper than 32 levels"},
  };
  for (const auto& r : rows) {
    Result<MetricPoint> p = ParseMetricLine(r.line);
    ASSERT_FALSE(p) << r.line;
    EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(p.error().message.find(r.message), std::string::npos)
        << r.line << ": " << p.error().message;
  }
}

TEST(ParseMetricLineTest, RefusesLinesLongerThan64KiB) {
  const std::string pad(kMaxMetricLineBytes - 8, ' ');  // {"a": 1} is 8 bytes
  EXPECT_TRUE(ParseMetricLine("{\"a\": 1}" + pad));
  Result<MetricPoint> p = ParseMetricLine("{\"a\": 1} " + pad);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message, "metrics line is longer than 65536 bytes (65537)");
}

TEST(ParseMetricLinesTest, TakesTheCompleteLinesWithWhereEachEnds) {
  const std::string step1 = "{\"step\": 1, \"loss\": 0.5}\n";
  const std::string bad = "not json\n";
  const std::string no_values = "{\"note\": \"text only\"}\n";
  const std::string step2 = "{\"step\": 2}\n";
  const std::string partial = "{\"step\": 3}";  // its newline not written yet
  const OutputChunk running{OutputStream::kMetrics, 100, step1 + bad + no_values + step2 + partial};
  // The bad line and the one without values skipped, the one being written left for later.
  const std::vector<ReportedPoint> got = ParseMetricLines(running, /*complete=*/false);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].end_offset, 100 + static_cast<int64_t>(step1.size()));
  EXPECT_EQ(got[0].values, (MetricValues{{"loss", 0.5}, {"step", 1}}));
  EXPECT_EQ(got[1].end_offset, 100 + static_cast<int64_t>(step1.size() + bad.size() +
                                                          no_values.size() + step2.size()));
  EXPECT_EQ(got[1].values, (MetricValues{{"step", 2}}));

  const std::string last = "{\"acc\": 1}";  // the end of a task that ended
  const OutputChunk ended{OutputStream::kMetrics, 0, step2 + last};
  const std::vector<ReportedPoint> all = ParseMetricLines(ended, /*complete=*/true);
  ASSERT_EQ(all.size(), 2u) << "complete: the last line needs no newline";
  EXPECT_EQ(all[0].end_offset, static_cast<int64_t>(step2.size()));
  EXPECT_EQ(all[1].end_offset, static_cast<int64_t>(step2.size() + last.size()));
  EXPECT_EQ(all[1].values, (MetricValues{{"acc", 1}}));
  EXPECT_EQ(ParseMetricLines(ended, /*complete=*/false).size(), 1u);
}

}  // namespace
}  // namespace gpupool::server
