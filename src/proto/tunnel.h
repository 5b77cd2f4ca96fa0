// Wire types of the tunnel (docs/api.md "The tunnel"): the OPEN frame's payload, which names the
// task and the target a stream goes to, and the marker of the routes whose answer is a WebSocket.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "proto/describe.h"

namespace gpupool::proto {

// What the server asks a node's agent to connect a new stream to. `kind` picks the agent's
// handler (agent/tunnel_agent.h); each kind reads the fields it needs.
struct TunnelOpen {
  std::string task;
  std::string kind;
  int32_t port = 0;
  std::vector<std::string> keys;

  static constexpr std::string_view kName = "TunnelOpen";
  static constexpr std::string_view kDoc =
      "The payload of a tunnel OPEN frame: the task and the target of the new stream.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task", s.task,
      {.required = true, .max_bytes = 128, .format = Format::kIdentifier, .doc = "The task"});
    v("kind", s.kind,
      {.required = true,
       .max_bytes = 32,
       .doc = "The target's kind: port (a TCP port of the task), exec (a command in it), files "
              "(its workspace's files), ssh (an SSH server for it)"});
    v("port", s.port, {.min = 0, .max = 65535, .doc = "kind port: the task's TCP port"});
    v("keys", s.keys,
      {.max_bytes = 16 * 1024,
       .max_items = 4096,
       .doc = "kind ssh: the public keys (TYPE BASE64) that may log in: those of the task's "
              "project's members and of the caller"});
  }
};

// The answer of the routes that switch to a WebSocket (101 Switching Protocols): binary messages,
// not JSON.
struct WebSocketStream {};

}  // namespace gpupool::proto
