// The gateway (docs/api.md "The gateway"): a running task's declared ports served at
// /t/<task>/<port>/…, and with a wildcard domain (--gateway-domain) also at an origin of each
// port's own, <port>--<task>.<domain>, HTTP and WebSocket alike, through its node's tunnel. The
// request goes to the app as it came (path kept: the app runs with the base path
// /t/<task>/<port>/, or / at its own origin), less the pool's own credentials, with
// Connection: close (each request is one stream; a WebSocket's upgrade keeps its connection),
// and the app's bytes come back untouched. Who may pass: users of the task's project, by console
// session cookie, by the cookie a signed link (gpupool open) sets, or by a signed request; a
// browser without one is sent to the console's login (at an app's own origin, told to open the
// port with a link), any other client gets 401.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "api/http_message.h"
#include "api/tunnel.h"
#include "api/tunnel_hub.h"
#include "server/services.h"

namespace gpupool::api {

// Whether `path` is the gateway's ("/t/…").
bool IsGatewayPath(std::string_view path);
// Whether `host` (a Host header) names a task's port under `origin` (a --gateway-domain's origin;
// empty: never): "<port>--<task>.<domain>".
bool IsGatewayHost(std::string_view origin, std::string_view host);

// kNotFound unless task `t` declares `port` (naming the ports it declares).
Status DeclaresPort(const Task& t, int32_t port);

// Opens a stream to `port` of task `task_id` for `caller`: the task must be one the caller sees
// (NotFound otherwise), running (kFailedPrecondition), and declare the port (kNotFound); then
// its node's tunnel is asked (kUnavailable with the agent's reason). The gateway and the
// port-forward route share it.
void OpenTaskPort(server::Services& services, TunnelHub& tunnels, const server::Caller& caller,
                  const std::string& task_id, int32_t port,
                  std::function<void(Result<std::shared_ptr<tunnel::Stream>>)> done);

// Opens an exec stream into task `task_id` for `caller` (GET /v1/tasks/{id}/exec): the same
// checks but the port's; the agent then reads the session's frames (proto/exec.h).
void OpenTaskExec(server::Services& services, TunnelHub& tunnels, const server::Caller& caller,
                  const std::string& task_id,
                  std::function<void(Result<std::shared_ptr<tunnel::Stream>>)> done);

// Opens an ssh stream into task `task_id` for `caller` (GET /v1/tasks/{id}/ssh): the exec
// checks, and a caller without an SSH key is told to add one (kFailedPrecondition); the OPEN
// carries the keys that may log in (AccountService::SshKeysOfProject) and the stream then
// carries the SSH connection's bytes to the server the agent runs for the task.
void OpenTaskSsh(server::Services& services, TunnelHub& tunnels, const server::Caller& caller,
                 const std::string& task_id,
                 std::function<void(Result<std::shared_ptr<tunnel::Stream>>)> done);

// What notes a user's interactive activity on task `task_id` (TelemetryService::NoteActivity), at
// most once a second however often it is called: for tunnel::Pipe's on_duplex_data and the
// opening of a session. `services` must outlive it.
std::function<void()> ActivityNoter(server::Services& services, const std::string& task_id);

class Gateway {
 public:
  // `services` and `tunnels` must outlive every request handed over. `origin`: the server's
  // --gateway-domain as an origin (ApiOptions::gateway_origin); empty: by path only.
  Gateway(server::Services services, TunnelHub& tunnels, std::function<int64_t()> now_ms,
          std::string origin = "");

  // Whether `request` is the gateway's: under /t/ (IsGatewayPath), or for a host of the
  // gateway's domain (IsGatewayHost).
  bool Serves(const HttpRequest& request) const;

  // Serves one request Serves said is the gateway's. Never blocks.
  void Handle(HttpRequest request, Responder respond);

 private:
  server::Services services_;
  TunnelHub& tunnels_;
  std::function<int64_t()> now_ms_;
  std::string origin_;
};

}  // namespace gpupool::api
