// The REST API: every operation of proto/operations.h (docs/api.md, docs/openapi.json) mapped
// onto server::ControlPlane — authentication, strict decoding of path, query and body into the
// operation's wire types, the call, the typed answer, and the request's latency reported to
// ControlPlane::ObserveRequest. Plain structs in and out; the HTTP server is separate.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/http_message.h"
#include "server/control_plane.h"
#include "server/task_files.h"

namespace gpupool::api {

struct ApiOptions {
  // Milliseconds since the Unix epoch; the system clock when empty (tests pin it).
  std::function<int64_t()> now_ms;
  // The tasks' files (the /v1/tasks/{id}/files and /uploads routes); null: those routes answer
  // 503. Must outlive the Api and every callback it has been handed.
  server::TaskFiles* task_files = nullptr;
};

class Api {
 public:
  // `control_plane` must outlive the Api and every callback it has been handed.
  explicit Api(server::ControlPlane& control_plane, ApiOptions options = {});
  ~Api();
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  // Answers one request through `respond`, at once (reads, errors) or when the control plane
  // calls back (writes). Never blocks.
  void Handle(HttpRequest request, Responder respond);

  // A Handler for HttpServer that forwards to Handle; the Api must outlive the server.
  Handler AsHandler();

  // Every (method, pattern) the router serves, in registration order (what the OpenAPI
  // document must cover).
  static std::vector<std::pair<std::string, std::string>> RouteTable();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupool::api
