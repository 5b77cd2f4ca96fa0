// OperationsService: what operators and the API itself use — the /metrics exposition, each
// request's handling time, health, and whether the disk has room for writes.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"

namespace gpupool::server {

// How the HTTP server's connections stand, for /metrics (api::HttpServer::connection_figures).
struct ConnectionFigures {
  int64_t open = 0;       // connections open, handed-over ones (WebSockets, tunnels) included
  int64_t anonymous = 0;  // of them, those on which no request authenticated yet
  int64_t reserved = 0;   // of them, those accepted into the reserve for agents and admins
  // Connections refused since the start: a peer address past its anonymous connections, the
  // general limit and the reserve both full, a reserved one whose first request was not an
  // agent's or an admin's, a user past its connections.
  int64_t refused_peer = 0;
  int64_t refused_full = 0;
  int64_t refused_reserve = 0;
  int64_t refused_user = 0;
};

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
