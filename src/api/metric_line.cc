// Parsing of one metrics-file line into metric values (see metric_line.h).
#include "api/metric_line.h"

#include <string>

#include "proto/json_codec.h"

namespace gpupool::api {

Result<MetricPoint> ParseMetricLine(std::string_view line) {
  if (line.size() > kMaxMetricLineBytes) {
    return InvalidArgument("metrics line is longer than " + std::to_string(kMaxMetricLineBytes) +
                           " bytes (" + std::to_string(line.size()) + ")");
  }
  Result<proto::Json> object = proto::ParseJsonObject(line, /*required=*/true, "metrics line");
  if (!object) return tl::unexpected(object.error());
  MetricPoint point;
  for (const auto& [name, value] : object->items()) {
    const bool usable = IsMetricName(name) && (value.is_number() || value.is_boolean()) &&
                        point.values.size() < kMaxMetricsPerLine;
    if (!usable) {
      ++point.ignored;
      continue;
    }
    // JSON has no NaN or infinity, and the parser refuses numbers beyond double's range.
    point.values.emplace(
        name, value.is_boolean() ? (value.get<bool>() ? 1.0 : 0.0) : value.get<double>());
  }
  return point;
}

}  // namespace gpupool::api
