// A running task's ports from the user's machine: `gpupool open` prints a signed link to a port
// through the gateway (the browser exchanges it for a cookie of that port's path), and
// `gpupool port-forward` listens locally and carries each connection to the task's port through
// the server (GET /v1/tasks/{id}/ports/{port}/stream, a WebSocket), like kubectl port-forward.
#include <signal.h>

#include <algorithm>
#include <charconv>
#include <iostream>
#include <memory>

#include "api/signing.h"
#include "api/url.h"
#include "cli/commands.h"
#include "cli/commands_common.h"
#include "cli/format.h"
#include "core/duration.h"
#include "core/task_ports.h"

namespace gpupool::cli {
namespace {

Result<int32_t> ParsePort(const std::string& text, const std::string& what) {
  int32_t port = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || end != text.data() + text.size() || port < 1 || port > 65535) {
    return InvalidArgument(what + " '" + text + "' is not a TCP port (1..65535)");
  }
  return port;
}

// The task, once it is known to declare `port` (a clear message before anything else); `url`
// (when given): where the gateway serves that port — its own origin, or a path on the server.
int CheckDeclared(Session& s, const std::string& id, int32_t port, std::string* url = nullptr) {
  Result<proto::TaskDetail> task = s.client().Tasks().Get(id);
  if (!task) return ApiFailure(task.error());
  if (url != nullptr) {
    const auto it = task->port_urls.find(std::to_string(port));
    *url = it == task->port_urls.end() ? GatewayBasePath(id, port) : it->second;
    if (url->starts_with("/")) *url = s.profile().endpoint + *url;
  }
  if (std::find(task->ports.begin(), task->ports.end(), port) == task->ports.end()) {
    return Failure("task " + id + " declares no port " + std::to_string(port) +
                   (task->ports.empty() ? " (submit it with --port " + std::to_string(port) + ")"
                                        : " (its ports: " + FormatPortList(task->ports) + ")"));
  }
  if (task->state != "running") {
    std::cerr << "gpupool: note: task " << id << " is " << task->state
              << "; its port answers once it runs\n";
  }
  return kExitOk;
}

struct OpenState {
  CommonFlags common;
  std::string id;
  std::string port;
  std::string ttl = "5m";
};

int RunOpen(const OpenState& f) {
  Result<std::string> id = ParseTaskId(f.id);
  if (!id) return UsageError(id.error().message);
  Result<int32_t> port = ParsePort(f.port, "port");
  if (!port) return UsageError(port.error().message);
  Result<int64_t> ttl = ParseDurationMs(f.ttl);
  if (!ttl || *ttl <= 0 || *ttl > api::kMaxGatewayLinkMs) {
    return UsageError("--ttl '" + f.ttl + "' must be a duration up to 15m");
  }
  return WithSession(f.common, [&](Session& s) {
    std::string base;
    if (int code = CheckDeclared(s, *id, *port, &base); code != kExitOk) return code;
    const Profile& p = s.profile();
    const std::string token =
        api::SignGatewayLink(p.access_key, p.secret_key, *id, *port, NowMs() + *ttl);
    const std::string url =
        base + "?" + std::string(api::kGatewayLinkParam) + "=" + api::PercentEncode(token);
    if (f.common.json) {
      PrintJson({{"url", url}, {"expires_ms", NowMs() + *ttl}});
    } else {
      std::cout << url << "\n";
      std::cerr << "gpupool: the link works for " << FormatDurationMs(*ttl)
                << "; the browser then keeps a cookie for this port\n";
    }
    return kExitOk;
  });
}

struct ForwardState {
  CommonFlags common;
  std::string id;
  std::string ports;  // PORT[:LOCAL]
  std::string address = "127.0.0.1";
};

int RunPortForward(const ForwardState& f) {
  Result<std::string> id = ParseTaskId(f.id);
  if (!id) return UsageError(id.error().message);
  const size_t colon = f.ports.find(':');
  Result<int32_t> port = ParsePort(f.ports.substr(0, colon), "port");
  if (!port) return UsageError(port.error().message);
  const std::string local_text = colon == std::string::npos ? "" : f.ports.substr(colon + 1);
  Result<int32_t> local = colon == std::string::npos ? port
                          : local_text == "0"        ? Result<int32_t>(0)
                                                     : ParsePort(local_text, "local port");
  if (!local) return UsageError(local.error().message);
  return WithSession(f.common, [&](Session& s) {
    if (int code = CheckDeclared(s, *id, *port); code != kExitOk) return code;
    // The signals are waited for below; the loop's threads must not take them.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    api::IoLoop loop(2);
    const api::WebSocketDial dial =
        s.Dial("/v1/tasks/" + *id + "/ports/" + std::to_string(*port) + "/stream");
    const std::string what = *id + ":" + std::to_string(*port);
    auto listener = api::TcpListener::Listen(
        loop, f.address, static_cast<uint16_t>(*local),
        [&loop, dial, what](std::shared_ptr<api::Duplex> connection) {
          api::DialWebSocket(
              loop, dial, [connection, what](Result<std::shared_ptr<api::Duplex>> stream) {
                if (!stream) {
                  std::cerr << "gpupool: " << what << ": " << stream.error().message << "\n";
                  return connection->Close(stream.error().message);
                }
                api::Join(connection, std::move(*stream));
              });
        });
    if (!listener) return Failure(listener.error().message);
    std::cout << "Forwarding from " << f.address << ":" << (*listener)->port() << " -> " << what
              << std::endl;
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    return kExitOk;
  });
}

}  // namespace

void AddPortCommands(CLI::App& app, int& exit_code) {
  auto open = std::make_shared<OpenState>();
  CLI::App* cmd = app.add_subcommand(
      "open", "Print a short-lived signed link to a running task's port through the gateway");
  cmd->add_option("id", open->id, "Task id (t-42, or 42)")->required()->type_name("ID");
  cmd->add_option("port", open->port, "One of the task's --port ports")
      ->required()
      ->type_name("PORT");
  cmd->add_option("--ttl", open->ttl, "How long the link works, up to 15m (default 5m)")
      ->type_name("DURATION");
  AddCommonFlags(cmd, &open->common);
  OnRun(cmd, exit_code, [open] { return RunOpen(*open); });

  auto forward = std::make_shared<ForwardState>();
  cmd = app.add_subcommand(
      "port-forward",
      "Listen on a local port and carry each connection to a running task's port through the "
      "server, until interrupted");
  cmd->add_option("id", forward->id, "Task id (t-42, or 42)")->required()->type_name("ID");
  cmd->add_option("ports", forward->ports,
                  "The task's port and the local one (default: the same; 0: any free one)")
      ->required()
      ->type_name("PORT[:LOCAL]");
  cmd->add_option("--address", forward->address,
                  "The local address to listen on (default "
                  "127.0.0.1)")
      ->type_name("IP");
  AddCommonFlags(cmd, &forward->common);
  OnRun(cmd, exit_code, [forward] { return RunPortForward(*forward); });
}

}  // namespace gpupool::cli
