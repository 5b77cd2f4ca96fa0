// A task's declared TCP ports (gpupool submit --port; docs/api.md "The gateway"): their rules,
// their stored form, and the gateway's path and the environment variables each port gives the
// task. Pure string rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpupool {

inline constexpr size_t kMaxTaskPorts = 16;

// 1..65535 each, at most kMaxTaskPorts, no port twice. kInvalidArgument names the field "ports"
// and the offending value.
Status ValidateTaskPorts(const std::vector<int32_t>& ports);

// "8888,6006" ("" for none), and back; the parse refuses what ValidateTaskPorts refuses.
std::string FormatPortList(const std::vector<int32_t>& ports);
Result<std::vector<int32_t>> ParsePortList(std::string_view text);

// The gateway's path of a task's port, with the trailing slash: "/t/t-1/8888/". The app serves
// below it (its base path).
std::string GatewayBasePath(std::string_view task_id, int32_t port);

// Where the gateway serves a task's port: with a wildcard domain (--gateway-domain; `origin`
// "<scheme>://<domain>[:<p>]") an origin of the port's own, "<scheme>://<port>--<task>.<domain>
// [:<p>]/", where the app serves at "/"; without (`origin` empty) GatewayBasePath, on the
// server's own origin.
std::string GatewayPortUrl(std::string_view origin, std::string_view task_id, int32_t port);

// The task and port a request's Host header names under `origin`'s domain
// ("8888--t-1.apps.example.com", with any port or none, any case); nullopt when it names none
// (or `origin` is empty).
struct GatewayHost {
  std::string task;
  int32_t port = 0;
};
std::optional<GatewayHost> ParseGatewayHost(std::string_view origin, std::string_view host);

// The origin "<scheme>://<domain>[:<p>]" of --gateway-domain DOMAIN[:PORT] on a server with or
// without TLS; kInvalidArgument naming the flag when DOMAIN is no DNS name of two labels or
// more, or PORT no port.
Result<std::string> GatewayOrigin(std::string_view domain, bool tls);

}  // namespace gpupool
