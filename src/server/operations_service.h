// OperationsService: what operators and the API itself use — the /metrics exposition, each
// request's handling time, and health.
#pragma once

#include <cstdint>
#include <string>

namespace gpupool::server {

class OperationsService {
 public:
  virtual ~OperationsService() = default;

  // Prometheus text exposition of the server's gauges, counters and histograms.
  virtual std::string MetricsText() = 0;
  // The API reports each request's handling time; `route` is the route pattern.
  virtual void ObserveRequest(const std::string& route, int status, int64_t micros) = 0;
  virtual bool Healthy() = 0;
};

}  // namespace gpupool::server
