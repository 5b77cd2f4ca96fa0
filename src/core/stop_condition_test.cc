// Tests for core/stop_condition: what the grammar accepts and how it evaluates (operators,
// precedence, parentheses, negation, synonyms, number forms, unknown metrics), every error with
// its column, the limits, canonical text and its round trip, Explain, and StopWhenOrIdle.
#include "core/stop_condition.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace gpupool {
namespace {

StopCondition MustParse(std::string_view text) {
  Result<StopCondition> c = ParseStopCondition(text);
  EXPECT_TRUE(c) << text << ": " << c.error().message;
  return *c;
}

// ---------------------------------------------------------------------------------------------
// Evaluation.

struct EvalRow {
  const char* text;
  MetricValues values;
  bool holds;
};

TEST(StopConditionTest, EvaluatesEveryOperatorOnBothSidesOfItsBoundary) {
  const EvalRow rows[] = {
      {"x > 1", {{"x", 2}}, true},  {"x > 1", {{"x", 1}}, false},
      {"x >= 1", {{"x", 1}}, true}, {"x >= 1", {{"x", 0.5}}, false},
      {"x < 1", {{"x", 0}}, true},  {"x < 1", {{"x", 1}}, false},
      {"x <= 1", {{"x", 1}}, true}, {"x <= 1", {{"x", 1.5}}, false},
      {"x == 1", {{"x", 1}}, true}, {"x == 1", {{"x", 1.0000001}}, false},
      {"x != 1", {{"x", 2}}, true}, {"x != 1", {{"x", 1}}, false},
      {"x>1", {{"x", 2}}, true},    {" \tx\n>=\r1 ", {{"x", 1}}, true},
      {"x<=-1", {{"x", -1}}, true}, {"x!=0", {{"x", 0}}, false},
  };
  for (const EvalRow& r : rows) {
    EXPECT_EQ(MustParse(r.text).Evaluate(r.values), r.holds) << r.text;
  }
}

TEST(StopConditionTest, AndBindsTighterThanOrAndParenthesesRegroup) {
  const MetricValues a = {{"a", 1}, {"b", 0}, {"c", 1}};  // a and c hold, b does not
  const EvalRow rows[] = {
      // a || (b && c) = true; (a || b) && c = true; b && c || a = true.
      {"a > 0 || b > 0 && c > 0", a, true},
      {"b > 0 && c > 0 || a > 0", a, true},
      // With c false: a || (b && c) stays true, (a || b) && c becomes false.
      {"a > 0 || b > 0 && c > 5", a, true},
      {"(a > 0 || b > 0) && c > 5", a, false},
      {"b > 0 && (c > 0 || a > 0)", a, false},
      {"((a > 0))", a, true},
      {"a > 0 && b > 0 && c > 0", a, false},
      {"a > 0 && c > 0", a, true},
      {"b > 0 || b > 0 || c > 0", a, true},
      {"b > 0 || b > 1", a, false},
  };
  for (const EvalRow& r : rows) {
    EXPECT_EQ(MustParse(r.text).Evaluate(r.values), r.holds) << r.text;
  }
}

TEST(StopConditionTest, NegationAndWordSynonyms) {
  const MetricValues v = {{"a", 1}, {"b", 0}};
  const EvalRow rows[] = {
      {"!(a > 0)", v, false},
      {"!(b > 0)", v, true},
      {"!b > 0", v, true},  // '!' applies to the comparison: !(b > 0)
      {"!!(a > 0)", v, true},
      {"! ! ! (a > 0)", v, false},
      {"!(a > 0 && b > 0)", v, true},
      {"!a > 0 || b > 0", v, false},  // (!(a > 0)) || (b > 0)
      {"not a > 0", v, false},
      {"not(b > 0)", v, true},
      {"a > 0 and b > 0", v, false},
      {"a > 0 or b > 0", v, true},
      {"not b > 0 and a > 0 or b > 5", v, true},
  };
  for (const EvalRow& r : rows) {
    EXPECT_EQ(MustParse(r.text).Evaluate(r.values), r.holds) << r.text;
  }
}

TEST(StopConditionTest, NumbersInEveryForm) {
  const struct {
    const char* number;
    double value;
  } rows[] = {
      {"3", 3},
      {"0", 0},
      {"-0.5", -0.5},
      {"+2", 2},
      {".5", 0.5},
      {"5.", 5},
      {"0.953", 0.953},
      {"1e-3", 1e-3},
      {"1E3", 1000},
      {"2.5e+6", 2.5e6},
      {"-1.5E-2", -0.015},
      {"007", 7},
      {"1e308", 1e308},
      {"123456789012", 123456789012.0},
  };
  for (const auto& r : rows) {
    const std::string text = std::string("x == ") + r.number;
    const StopCondition c = MustParse(text);
    EXPECT_TRUE(c.Evaluate({{"x", r.value}})) << text;
    const double above = std::nextafter(r.value, std::numeric_limits<double>::infinity());
    EXPECT_FALSE(c.Evaluate({{"x", above}})) << text;
  }
}

TEST(StopConditionTest, AComparisonOnAnUnknownMetricIsNeitherTrueNorFalse) {
  const MetricValues only_a = {{"a", 1}};  // a > 0 holds, x was never reported
  const EvalRow rows[] = {
      {"x > 1", only_a, false},
      {"x <= 1", only_a, false},
      {"!(x > 1)", only_a, false},  // unknown, not true
      {"!!(x > 1)", only_a, false},
      {"x > 1 || a > 0", only_a, true},     // true || unknown
      {"x > 1 && a > 0", only_a, false},    // unknown && true
      {"!(x > 1 && a > 5)", only_a, true},  // !(unknown && false) = !false
      {"!(x > 1 || a > 0)", only_a, false},
      {"x > 1 || !(x > 1)", only_a, false},
      {"x > 1", {{"x", std::nan("")}}, false},  // a NaN value counts as not reported
      {"!(x > 1)", {{"x", std::nan("")}}, false},
      {"x > 1", {}, false},
  };
  for (const EvalRow& r : rows) {
    EXPECT_EQ(MustParse(r.text).Evaluate(r.values), r.holds) << r.text;
  }
}

TEST(StopConditionTest, NamesListsEachMetricOnceInOrder) {
  EXPECT_EQ(MustParse("val_acc > 0.95").Names(), std::vector<std::string>{"val_acc"});
  EXPECT_EQ(
      MustParse("b > 1 && (a < 2 || b == 3) || !(eval.loss_2 < 1) && gpu_idle_s >= 60").Names(),
      (std::vector<std::string>{"b", "a", "eval.loss_2", "gpu_idle_s"}));
}

// ---------------------------------------------------------------------------------------------
// Errors: each says where (the column of the offending token, 1-based) and what.

TEST(StopConditionTest, RefusesBadTextSayingWhereAndWhat) {
  const struct {
    const char* text;
    const char* message;
  } rows[] = {
      {"val_acc>abc", "stop_when: at column 9: expected a number after '>', got 'abc'"},
      {"val_acc > abc", "stop_when: at column 11: expected a number after '>', got 'abc'"},
      {"", "stop_when: at column 1: expected a metric name, '!' or '(', got the end"},
      {"   ", "stop_when: at column 4: expected a metric name, '!' or '(', got the end"},
      {"x >", "stop_when: at column 4: expected a number after '>', got the end"},
      {"x > 1 &&", "stop_when: at column 9: expected a metric name, '!' or '(', got the end"},
      {"> 1", "stop_when: at column 1: expected a metric name, '!' or '(', got '>'"},
      {"1 < x", "stop_when: at column 1: expected a metric name, '!' or '(', got '1'"},
      {"x",
       "stop_when: at column 2: expected a comparison operator (> >= < <= == !=) after "
       "'x', got the end"},
      {"x 1",
       "stop_when: at column 3: expected a comparison operator (> >= < <= == !=) after "
       "'x', got '1'"},
      {"x > y", "stop_when: at column 5: expected a number after '>', got 'y'"},
      {"x > 1 y > 2", "stop_when: at column 7: expected '&&', '||' or the end, got 'y'"},
      {"x > 1 > 2", "stop_when: at column 7: expected '&&', '||' or the end, got '>'"},
      {"x > 1)", "stop_when: at column 6: ')' without a matching '('"},
      {"(x > 1",
       "stop_when: at column 7: expected '&&', '||' or ')' to close the '(' at "
       "column 1, got the end"},
      {"!(x > 1 y",
       "stop_when: at column 9: expected '&&', '||' or ')' to close the '(' at "
       "column 2, got 'y'"},
      {"()", "stop_when: at column 2: expected a metric name, '!' or '(', got ')'"},
      {"x = 1", "stop_when: at column 3: '=' is not an operator; use '==' to compare"},
      {"x > 1 & y > 1", "stop_when: at column 7: '&' is not an operator; use '&&' (or 'and')"},
      {"x > 1 | y > 1", "stop_when: at column 7: '|' is not an operator; use '||' (or 'or')"},
      {"x > 1 && $y > 1", "stop_when: at column 10: unexpected character '$'"},
      {"x > \xc3\xa9", "stop_when: at column 5: unexpected byte 0xc3"},
      {"x > 5abc", "stop_when: at column 5: invalid number '5abc'"},
      {"x > 1.2.3", "stop_when: at column 5: invalid number '1.2.3'"},
      {"x > 1e", "stop_when: at column 5: invalid number '1e'"},
      {"x > -", "stop_when: at column 5: invalid number '-'"},
      {"x > .", "stop_when: at column 5: invalid number '.'"},
      {"x > 0x10", "stop_when: at column 5: invalid number '0x10'"},
      {"x > 1e999", "stop_when: at column 5: number '1e999' is out of range"},
      {"x > -1e999", "stop_when: at column 5: number '-1e999' is out of range"},
      {"x > inf", "stop_when: at column 5: expected a number after '>', got 'inf'"},
      {"and > 1", "stop_when: at column 1: expected a metric name, '!' or '(', got 'and'"},
      {"x > 1 AND y > 1", "stop_when: at column 7: expected '&&', '||' or the end, got 'AND'"},
      {"x => 1", "stop_when: at column 3: '=' is not an operator; use '==' to compare"},
      {"x > 0and y > 1", "stop_when: at column 5: invalid number '0and'"},  // needs a blank
  };
  for (const auto& r : rows) {
    Result<StopCondition> c = ParseStopCondition(r.text);
    ASSERT_FALSE(c) << r.text << " was accepted as " << c->ToString();
    EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument) << r.text;
    EXPECT_EQ(c.error().message, r.message) << r.text;
  }
}

TEST(StopConditionTest, RefusesANameLongerThan64Characters) {
  const std::string name64(64, 'n');
  EXPECT_TRUE(ParseStopCondition(name64 + " > 1"));
  Result<StopCondition> c = ParseStopCondition("x > 1 || " + name64 + "n > 1");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message,
            "stop_when: at column 10: metric name '" + name64 + "n' is longer than 64 characters");
}

TEST(StopConditionTest, RefusesMoreThan1024Characters) {
  // "x > 1 || x > 1 || …": 9 characters per extra alternative.
  std::string text = "x > 1";
  while (text.size() + 9 <= kMaxStopWhenLength) text += " || x > 1";
  text += std::string(kMaxStopWhenLength - text.size(), ' ');
  ASSERT_EQ(text.size(), 1024u);
  EXPECT_TRUE(ParseStopCondition(text));
  Result<StopCondition> c = ParseStopCondition(text + " ");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message, "stop_when: longer than 1024 characters (1025)");
}

TEST(StopConditionTest, RefusesTextWhoseCanonicalFormIsLongerThan1024Characters) {
  // "x>1||" is 5 characters, its canonical form "x > 1 || " 9: 200 of them fit as typed only.
  std::string text = "x>1";
  for (int i = 0; i < 200; ++i) text += "||x>1";
  ASSERT_LE(text.size(), kMaxStopWhenLength);
  Result<StopCondition> c = ParseStopCondition(text);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message,
            "stop_when: longer than 1024 characters once written as 1805 in canonical form");
}

TEST(StopConditionTest, RefusesNestingDeeperThan32) {
  const auto nested = [](int parens, int nots) {
    return std::string(nots, '!') + std::string(parens, '(') + "x > 1" + std::string(parens, ')');
  };
  EXPECT_TRUE(ParseStopCondition(nested(32, 0)));
  EXPECT_TRUE(ParseStopCondition(nested(0, 32)));
  EXPECT_TRUE(ParseStopCondition(nested(17, 16)));  // the last "!(" is one level
  // '!(' counts once: 32 of them are 32 levels.
  std::string not_paren;
  for (int i = 0; i < 32; ++i) not_paren += "!(";
  not_paren += "x > 1" + std::string(32, ')');
  EXPECT_TRUE(ParseStopCondition(not_paren));

  const struct {
    std::string text;
    int column;  // of the '(' or '!' one level too deep
  } rows[] = {
      {nested(33, 0), 33},
      {nested(0, 33), 33},
      {nested(18, 16), 34},  // the last '!' and the first '(' are one level together
      {"!(" + not_paren + ")", 65},
  };
  for (const auto& r : rows) {
    Result<StopCondition> c = ParseStopCondition(r.text);
    ASSERT_FALSE(c) << r.text;
    EXPECT_EQ(c.error().message, "stop_when: at column " + std::to_string(r.column) +
                                     ": nested deeper than 32 levels of '(' and '!'")
        << r.text;
  }
}

// ---------------------------------------------------------------------------------------------
// Canonical text.

TEST(StopConditionTest, ToStringIsCanonicalAndRoundTrips) {
  const struct {
    const char* text;
    const char* canonical;
  } rows[] = {
      {"val_acc>0.95", "val_acc > 0.95"},
      {"  x>=1&&y<2 ", "x >= 1 && y < 2"},
      {"a > 1 and b > 2 or not c == 3", "a > 1 && b > 2 || !(c == 3)"},
      {"(a > 1 || b > 2) && c != 3", "(a > 1 || b > 2) && c != 3"},
      {"a > 1 || (b > 2 && c > 3)", "a > 1 || b > 2 && c > 3"},
      {"(a > 1 || (b > 2 || c > 3))", "a > 1 || b > 2 || c > 3"},
      {"a > 1 && (b > 2 && (c > 3))", "a > 1 && b > 2 && c > 3"},
      {"((x > 1))", "x > 1"},
      {"!x > 1", "!(x > 1)"},
      {"!!x>1", "!(!(x > 1))"},
      {"!(a > 1 || b > 2)", "!(a > 1 || b > 2)"},
      {"x > 1e-3", "x > 0.001"},
      {"x > 1E3", "x > 1000"},
      {"x > +2.50", "x > 2.5"},
      {"x > 1e20", "x > 1e+20"},
      {"x > -.5", "x > -0.5"},
      {"x > 0.1", "x > 0.1"},
      {"x == 123456789012", "x == 123456789012"},
      {"eval.top_5 <= 5e-324", "eval.top_5 <= 5e-324"},
  };
  const MetricValues probes[] = {{}, {{"a", 2}, {"b", 0}, {"c", 3}}, {{"x", 2}, {"y", 1}}};
  for (const auto& r : rows) {
    const StopCondition c = MustParse(r.text);
    EXPECT_EQ(c.ToString(), r.canonical) << r.text;
    const StopCondition again = MustParse(c.ToString());
    EXPECT_EQ(again.ToString(), c.ToString()) << r.text;
    EXPECT_EQ(again.Names(), c.Names()) << r.text;
    for (const MetricValues& v : probes) EXPECT_EQ(again.Evaluate(v), c.Evaluate(v)) << r.text;
  }
}

TEST(StopConditionTest, EveryNumberSurvivesTheRoundTripExactly) {
  for (double v :
       {0.1, 1.0 / 3, 2.0 / 3 * 1e-7, 123456.789, 9007199254740993.0,
        std::numeric_limits<double>::max(), std::numeric_limits<double>::denorm_min(), -2.5e-300}) {
    char typed[64];
    std::snprintf(typed, sizeof(typed), "x == %.17g", v);
    const StopCondition again = MustParse(MustParse(typed).ToString());
    EXPECT_TRUE(again.Evaluate({{"x", v}})) << typed << " → " << again.ToString();
    EXPECT_FALSE(again.Evaluate({{"x", std::nextafter(v, 0.0)}})) << typed;
  }
}

TEST(StopConditionTest, DeepestAcceptedConditionsRoundTrip) {
  // The canonical form never nests deeper than what was typed.
  std::string nots = std::string(32, '!') + "x > 1";
  std::string mixed;
  for (int i = 0; i < 16; ++i) mixed += "!(a > 1 && (b > 1 || ";
  mixed += "c > 1" + std::string(32, ')');
  for (const std::string& text : {nots, mixed}) {
    const StopCondition c = MustParse(text);
    EXPECT_EQ(MustParse(c.ToString()).ToString(), c.ToString());
  }
}

// ---------------------------------------------------------------------------------------------
// Explain.

TEST(StopConditionTest, ExplainShowsThePartThatHoldsAndItsValues) {
  const struct {
    const char* text;
    MetricValues values;
    const char* explanation;
  } rows[] = {
      {"val_acc > 0.95", {{"val_acc", 0.953}, {"step", 1200}}, "val_acc > 0.95 (val_acc = 0.953)"},
      {"loss < 0.1 || gpu_idle_s >= 1800",
       {{"gpu_idle_s", 1805}},
       "gpu_idle_s >= 1800 (gpu_idle_s = 1805)"},
      {"step >= 1000 && loss < 0.1",
       {{"step", 1200}, {"loss", 0.08}},
       "step >= 1000 && loss < 0.1 (step = 1200, loss = 0.08)"},
      {"(a > 1 || b > 1) && c > 1",
       {{"a", 0}, {"b", 2}, {"c", 2}},
       "b > 1 && c > 1 (b = 2, c = 2)"},
      {"x > 5 || a > 1 && (b > 1 || c > 1)",
       {{"a", 2}, {"b", 2}, {"c", 2}},
       "a > 1 && b > 1 (a = 2, b = 2)"},
      {"!(loss > 1) || x > 1", {{"loss", 0.5}}, "!(loss > 1) (loss = 0.5)"},
      // Not holding: the whole condition and what is known.
      {"val_acc > 0.95", {{"val_acc", 0.9}}, "val_acc > 0.95 (val_acc = 0.9)"},
      {"val_acc > 0.95 && step > 10",
       {{"step", 20}},
       "val_acc > 0.95 && step > 10 (val_acc not reported, step = 20)"},
  };
  for (const auto& r : rows) {
    EXPECT_EQ(MustParse(r.text).Explain(r.values), r.explanation) << r.text;
  }
}

// ---------------------------------------------------------------------------------------------
// Names, and the idle condition of --stop-when-idle.

TEST(StopConditionTest, IsMetricNameFollowsTheGrammar) {
  for (const char* name : {"x", "_", "val_acc", "eval.top_5", "A1", "gpu_idle_s", "andx", "Or"}) {
    EXPECT_TRUE(IsMetricName(name)) << name;
  }
  EXPECT_TRUE(IsMetricName(std::string(64, 'a')));
  for (const char* name : {"", "1x", ".x", "val-acc", "val acc", "é", "and", "or", "not"}) {
    EXPECT_FALSE(IsMetricName(name)) << name;
  }
  EXPECT_FALSE(IsMetricName(std::string(65, 'a')));
}

TEST(StopConditionTest, StopWhenOrIdleAddsTheIdleConditionAsAnAlternative) {
  const struct {
    const char* stop_when;
    int64_t idle_ms;
    const char* combined;
  } rows[] = {
      {"", 1'800'000, "idle_s >= 1800"},
      {"", 500, "idle_s >= 0.5"},
      {"val_acc > 0.95", 1'800'000, "val_acc > 0.95 || idle_s >= 1800"},
      {"a>1 or b>1", 90'000, "a > 1 || b > 1 || idle_s >= 90"},
      {"a>1 and b>1", 60'000, "a > 1 && b > 1 || idle_s >= 60"},
      {"!(a>1)", 5'400'000, "!(a > 1) || idle_s >= 5400"},
  };
  for (const auto& r : rows) {
    Result<std::string> text = StopWhenOrIdle(r.stop_when, r.idle_ms);
    ASSERT_TRUE(text) << r.stop_when << ": " << text.error().message;
    EXPECT_EQ(*text, r.combined);
    const StopCondition c = MustParse(*text);
    EXPECT_EQ(c.ToString(), *text);
    const double idle_s = static_cast<double>(r.idle_ms) / 1000;
    EXPECT_TRUE(c.Evaluate({{"idle_s", idle_s}})) << *text;
    EXPECT_FALSE(c.Evaluate({{"idle_s", idle_s - 0.001}})) << *text;
  }
}

TEST(StopConditionTest, StopWhenOrIdleRefusesBadInput) {
  const struct {
    std::string stop_when;
    int64_t idle_ms;
    std::string message;
  } rows[] = {
      {"", 0, "idle time must be longer than 0, got 0 ms"},
      {"x > 1", -5, "idle time must be longer than 0, got -5 ms"},
      // Columns are those of the condition as the user typed it.
      {"val_acc>abc", 1000, "stop_when: at column 9: expected a number after '>', got 'abc'"},
      {"   ", 1000, "stop_when: at column 4: expected a metric name, '!' or '(', got the end"},
  };
  for (const auto& r : rows) {
    Result<std::string> text = StopWhenOrIdle(r.stop_when, r.idle_ms);
    ASSERT_FALSE(text) << r.stop_when;
    EXPECT_EQ(text.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(text.error().message, r.message);
  }
  // A condition that fits alone but not with " || idle_s >= 60" (16 characters) added.
  std::string text = "x > 1";
  while (text.size() + 9 <= kMaxStopWhenLength - 10) text += " || x > 1";
  ASSERT_TRUE(ParseStopCondition(text));
  Result<std::string> too_long = StopWhenOrIdle(text, 60'000);
  ASSERT_FALSE(too_long);
  EXPECT_EQ(too_long.error().message,
            "stop_when: longer than 1024 characters with the idle condition added (" +
                std::to_string(text.size() + 16) + ")");
}

}  // namespace
}  // namespace gpupool
