// Parsing of metrics-file lines into metric values (see metric_line.h).
#include "server/metric_line.h"

#include <algorithm>
#include <string>
#include <utility>

#include "proto/json_codec.h"

namespace gpupool::server {

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

std::vector<ReportedPoint> ParseMetricLines(const OutputChunk& chunk, bool complete) {
  std::vector<ReportedPoint> out;
  size_t start = 0;
  while (start < chunk.data.size()) {
    size_t end = chunk.data.find('\n', start);
    if (end == std::string::npos) {
      if (!complete) break;
      end = chunk.data.size();
    }
    auto point = ParseMetricLine(std::string_view(chunk.data).substr(start, end - start));
    const int64_t end_offset =
        chunk.offset + static_cast<int64_t>(std::min(end + 1, chunk.data.size()));
    if (point && !point->values.empty()) {
      out.push_back(ReportedPoint{end_offset, std::move(point->values)});
    }
    start = end + 1;
  }
  return out;
}

}  // namespace gpupool::server
