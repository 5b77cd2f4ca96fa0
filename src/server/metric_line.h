// The lines of a task's metrics file: the task appends JSON objects, one per line
// ({"step": 1200, "val_acc": 0.953}); the agent ships the file as the task's metrics stream and
// the control plane turns each complete line into metric values, on which it evaluates the
// task's stop condition (core/stop_condition.h). Pure. It uses proto's strict JSON object parser
// (core has no JSON parser: it depends on nothing but the standard library).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/stop_condition.h"
#include "server/telemetry_service.h"

namespace gpupool::server {

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

// One line of a metrics chunk, parsed; `end_offset` is where the line ends in the metrics stream
// of the run (so a line shipped twice counts once).
struct ReportedPoint {
  int64_t end_offset = 0;
  MetricValues values;
};

// The lines of a chunk of the metrics stream with values: each complete line (and, when the
// output is `complete`, a last line without its newline), with where it ends in the stream.
// Lines that do not parse or have no usable field are skipped.
std::vector<ReportedPoint> ParseMetricLines(const OutputChunk& chunk, bool complete);

}  // namespace gpupool::server
