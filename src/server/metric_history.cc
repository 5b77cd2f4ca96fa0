// The usage history's two series types, compiled once here (see metric_history.h).
#include "server/metric_history.h"

#include <string>

namespace gpupool::server {

template class MetricSeries<usage::kGauges>;
template class MetricSeries<gpu_usage::kGauges>;

}  // namespace gpupool::server
