// The REST API: every operation of proto/operations.h (docs/api.md, docs/openapi.json) mapped
// onto the control plane's services (server/services.h) — authentication (AuthService), strict
// decoding of path, query and body into the operation's wire types, the call, the typed answer,
// and the request's latency reported to OperationsService::ObserveRequest. Plain structs in and
// out; the HTTP server is separate.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/http_message.h"
#include "server/services.h"

namespace gpupool::api {

class TunnelHub;

struct ApiOptions {
  // Milliseconds since the Unix epoch; the system clock when empty (tests pin it).
  std::function<int64_t()> now_ms;
  // Answers the GET and HEAD requests outside the API (/v1/…, /healthz, /metrics): the web
  // console's files (console/console.h). Empty: they are 404 like any unknown path.
  std::function<HttpResponse(const HttpRequest&)> console{};
  // The origin of --gateway-domain (core/task_ports.h GatewayOrigin): tasks' ports are also
  // served by host name, each at an origin of its own. Empty: by path only.
  std::string gateway_origin{};
};

class Api {
 public:
  // The services must outlive the Api and every callback it has been handed.
  explicit Api(server::Services services, ApiOptions options = {});
  ~Api();
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  // Answers one request through `respond`, at once (reads from memory, errors) or when a
  // service calls back (writes, reads of history, files). Never blocks.
  void Handle(HttpRequest request, Responder respond);

  // A Handler for HttpServer that forwards to Handle; the Api must outlive the server.
  Handler AsHandler();

  // The nodes' tunnels (tunnel_hub.h), through which the routes reach into tasks.
  TunnelHub& tunnels();

  // Every (method, pattern) the router serves, in registration order (what the OpenAPI
  // document must cover).
  static std::vector<std::pair<std::string, std::string>> RouteTable();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupool::api
