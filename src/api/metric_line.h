// One line of a task's metrics file: the task appends JSON objects, one per line
// ({"step": 1200, "val_acc": 0.953}); the agent ships the file's lines and the API turns each
// into metric values for the server, which evaluates the task's stop condition
// (core/stop_condition.h) on the latest ones. Pure: the caller splits the lines and skips the
// bad ones. It lives in api/ because it needs a JSON parser (core may depend on nothing but the
// standard library) and reuses proto's strict object parser.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/result.h"
#include "core/stop_condition.h"

namespace gpupool::api {

inline constexpr size_t kMaxMetricLineBytes = 64 * 1024;
inline constexpr size_t kMaxMetricsPerLine = 64;

struct MetricPoint {
  MetricValues values;  // the line's usable fields
  int ignored = 0;      // fields left out: strings, nulls, arrays, objects, bad names, past 64
};

// Parses one line (without its newline; a trailing '\r' is fine). A field becomes a value when
// its name passes IsMetricName (at most 64 characters of [A-Za-z0-9_.], not starting with a
// digit or '.') and its value is a number (integer or floating point) or a boolean (1 or 0);
// other fields are ignored and counted, as are usable fields past the first 64 in name order.
// Errors (kInvalidArgument, "metrics line is …"): a line longer than 64 KiB, blank, invalid
// JSON (with the column; NaN and Infinity are not JSON), a number beyond double's range, a key
// twice in one object, nesting deeper than 32, or not an object.
Result<MetricPoint> ParseMetricLine(std::string_view line);

}  // namespace gpupool::api
