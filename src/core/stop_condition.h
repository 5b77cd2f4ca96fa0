// Stop conditions: a task's `stop_when` text ("val_acc > 0.95 && step >= 1000"), parsed once at
// submission (a bad one is refused there, with the column) and evaluated whenever new metric
// values arrive; the server stops the task gracefully the first time it holds. Pure: no I/O, no
// clock. The values come from the task's own metrics file (JSON lines, agent/metric_line.h) and
// from the server, which provides the built-in metrics below.
//
// Grammar (whitespace — blanks, tabs, newlines — is free between tokens):
//
//   expr       := or
//   or         := and (('||' | 'or') and)*
//   and        := unary (('&&' | 'and') unary)*          && binds tighter than ||
//   unary      := ('!' | 'not') unary | '(' expr ')' | comparison
//   comparison := name op number
//   op         := '>' | '>=' | '<' | '<=' | '==' | '!='
//   name       := [A-Za-z_][A-Za-z0-9_.]*   at most 64 characters; and, or, not are reserved
//   number     := [+-]? (digits ['.' digits*] | '.' digits) [('e'|'E') [+-]? digits]
//                 e.g. 3, -0.5, .5, 1e-3, 2.5E+6 (finite doubles only)
//
// The synonyms and, or, not are lower case. Limits: at most 1024 characters, and at most 32
// levels of nesting, each '(' and each '!' counting one ('!(' counts one together).
//
// Unknown metrics. A comparison on a name that has not been reported (or whose value is NaN) is
// neither true nor false but unknown, and unknown propagates as in SQL: !unknown is unknown,
// false && unknown is false, true || unknown is true, anything else with unknown is unknown. The
// condition holds only when it is true. So `!(loss > 0.1)` does not stop a task that has not yet
// reported `loss`, and `val_acc > 0.95 || idle_s >= 1800` holds as soon as either side does.
// Comparisons are exact on doubles (`step == 1000` is fine; `loss == 0.1` rarely is).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpupool {

// The latest reported value of each metric, by name.
using MetricValues = std::map<std::string, double, std::less<>>;

inline constexpr size_t kMaxStopWhenLength = 1024;
inline constexpr int kMaxStopWhenDepth = 32;
inline constexpr size_t kMaxMetricNameLength = 64;

// Built-in metrics: the server provides them for every running task, and its values replace a
// task's own values of the same names.
inline constexpr std::string_view kGpuUtilMetric = "gpu_util";    // GPU utilisation %, latest
inline constexpr std::string_view kGpuIdleMetric = "gpu_idle_s";  // s its GPUs have been idle
inline constexpr std::string_view kRuntimeMetric = "runtime_s";   // s since the task started
// s since the user's latest interactive activity on the task (gateway, port-forward, exec input),
// or since it started
inline constexpr std::string_view kInteractiveIdleMetric = "interactive_idle_s";
// s both its GPUs and its interactive sessions have been idle: min(gpu_idle_s, interactive_idle_s)
inline constexpr std::string_view kIdleMetric = "idle_s";

// True for a name the grammar accepts: [A-Za-z_][A-Za-z0-9_.]*, 1..64 characters, not one of
// the words and, or, not. Metric files use the same rule for their field names.
bool IsMetricName(std::string_view name);

struct StopConditionNode;  // the parsed expression (stop_condition.cc)

// A parsed stop condition. Immutable; copies are cheap and share the parsed expression.
class StopCondition {
 public:
  // True when the condition holds for `latest` (see "Unknown metrics" above).
  bool Evaluate(const MetricValues& latest) const;

  // The metric names the condition reads, each once, in order of first appearance.
  const std::vector<std::string>& Names() const { return names_; }

  // Canonical text: && || ! for the synonyms, one blank around operators, numbers in their
  // shortest exact form, parentheses only where needed ("!(...)" always has them), nested
  // groups of the same operator flattened. Parses back to the same condition and the same text.
  std::string ToString() const;

  // Why the condition holds, for the task's stop reason: the part of it that is true under
  // `latest` (the first true side of each ||, both sides of each &&, a whole !(...)) in canonical
  // text, then the values of the metrics that part reads:
  //   "val_acc > 0.95 (val_acc = 0.953)"
  //   "step >= 1000 && loss < 0.1 (step = 1200, loss = 0.08)"
  // When the condition does not hold: the whole condition with the values it reads, "not
  // reported" for those missing: "val_acc > 0.95 (val_acc not reported)".
  std::string Explain(const MetricValues& latest) const;

 private:
  friend Result<StopCondition> ParseStopCondition(std::string_view text);
  friend Result<std::string> StopWhenOrIdle(std::string_view stop_when, int64_t idle_ms);
  explicit StopCondition(std::shared_ptr<const StopConditionNode> root);

  std::shared_ptr<const StopConditionNode> root_;
  std::vector<std::string> names_;
};

// Parses a condition per the grammar above. Errors are kInvalidArgument and say where and what:
//   "stop_when: at column 9: expected a number after '>', got 'abc'"
//   "stop_when: at column 1: expected a metric name, '!' or '(', got the end"
// (columns count bytes from 1; "the end" is one past the last character).
Result<StopCondition> ParseStopCondition(std::string_view text);

// The canonical text of "`stop_when` OR idle for `idle_ms`" (its GPUs and its interactive
// sessions both), for the CLI's --stop-when-idle: "idle_s >= 1800" when `stop_when` is empty,
// else e.g. "val_acc > 0.95 || idle_s >= 1800". A bad `stop_when` is refused as by ParseStopCondition
// (its columns are those of `stop_when` itself), idle_ms must be > 0, and the result must fit in
// 1024 characters.
Result<std::string> StopWhenOrIdle(std::string_view stop_when, int64_t idle_ms);

}  // namespace gpupool
