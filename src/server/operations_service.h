// OperationsService: what operators and the API itself use — the /metrics exposition, each
// request's handling time, health, and whether the disk has room for writes.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"

namespace gpupool::server {

class OperationsService {
 public:
  virtual ~OperationsService() = default;

  // Prometheus text exposition of the server's gauges, counters and histograms.
  virtual std::string MetricsText() = 0;
  // The API reports each request's handling time; `route` is the route pattern.
  virtual void ObserveRequest(const std::string& route, int status, int64_t micros) = 0;
  virtual bool Healthy() = 0;
  // kInsufficientStorage (its message says what is free and what is kept in reserve) while the
  // data dir's file system has less free than the server keeps in reserve for its database: the
  // API then refuses a request that would change state, before anything changed (a deletion,
  // which frees space, and the agents' calls still go through).
  virtual Status CheckDiskSpace() = 0;
};

}  // namespace gpupool::server
