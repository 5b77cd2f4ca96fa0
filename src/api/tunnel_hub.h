// The server's end of the nodes' tunnels (docs/api.md "The tunnel"): each node's agent keeps one
// WebSocket to GET /v1/agent/nodes/{name}/tunnel, which the hub holds as a tunnel::Session; the
// routes that reach into a task (the gateway, port-forward, exec, ssh) open their streams
// through it. A node's newer tunnel replaces its older one; a tunnel that drops resets its
// streams.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "api/duplex.h"
#include "api/tunnel.h"
#include "core/result.h"
#include "proto/tunnel.h"

namespace gpupool::api {

class TunnelHub {
 public:
  TunnelHub();
  ~TunnelHub();  // closes every tunnel
  TunnelHub(const TunnelHub&) = delete;
  TunnelHub& operator=(const TunnelHub&) = delete;

  // `node`'s agent connected: `websocket` (accepted, not started) becomes the node's tunnel,
  // and an earlier one of the node is closed.
  void Attach(const std::string& node, std::shared_ptr<Duplex> websocket);

  // Opens a stream to `target` through `node`'s tunnel. `done` (from any thread, possibly at
  // once) gets the stream once the agent accepted it, or kUnavailable: the node has no tunnel,
  // the tunnel dropped, or the agent refused (its reason).
  void Open(const std::string& node, const proto::TunnelOpen& target, tunnel::Session::Opened done);

  bool Connected(const std::string& node) const;
  // Waits until `node` has a tunnel (tests, benchmarks); false after `timeout`.
  bool AwaitConnected(const std::string& node, std::chrono::milliseconds timeout) const;
  // Streams open over every tunnel.
  size_t stream_count() const;

 private:
  struct Core;
  std::shared_ptr<Core> core_;
};

}  // namespace gpupool::api
