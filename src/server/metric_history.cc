// The usage history's two series types, compiled once here, and the resolution names (see
// metric_history.h).
#include "server/metric_history.h"

#include <string>

namespace gpupool::server {

template class MetricSeries<usage::kGauges>;
template class MetricSeries<gpu_usage::kGauges>;

Result<Resolution> ParseResolution(std::string_view text) {
  if (text == "raw") return Resolution::kRaw;
  if (text == "1m") return Resolution::kMinute;
  return InvalidArgument("resolution must be raw or 1m, got '" + std::string(text) + "'");
}

}  // namespace gpupool::server
