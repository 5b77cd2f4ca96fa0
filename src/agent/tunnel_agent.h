// The agent's end of its node's tunnel (docs/api.md "The tunnel"): TunnelClient dials the server
// (GET /v1/agent/nodes/{name}/tunnel, a WebSocket signed like every agent call), keeps it open and
// dials again with the agent's backoff (retry.h) when it drops; the streams the server opens over
// it go to a TunnelDispatcher, which hands each to the handler registered for its kind
// (proto::TunnelOpen::kind) and resets a task's streams when the task ends. PortHandler is the
// `port` kind: a TCP connection to the task's port. Other kinds (exec, ssh) register their own
// handler; the tunnel's code does not change for them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/client.h"
#include "api/tunnel.h"
#include "core/result.h"
#include "proto/tunnel.h"

namespace gpupool::agent {

// A handler of one kind: it gets the OPEN (already decoded) and the stream, and must Accept or
// Refuse the stream, now or later (from any thread). It runs on the tunnel's I/O thread: it must
// not block (dial asynchronously, or hand the work to a thread of its own).
using TunnelHandler =
    std::function<void(const proto::TunnelOpen& open, std::shared_ptr<api::tunnel::Stream> stream)>;

class TunnelDispatcher {
 public:
  // Registers the handler of `kind` (before the tunnel runs; a second one replaces the first).
  void Register(const std::string& kind, TunnelHandler handler);
  // One OPEN from the server: decoded (a malformed one is refused, naming the field) and handed
  // to its kind's handler (none: refused, naming the kinds there are).
  void Dispatch(std::shared_ptr<api::tunnel::Stream> stream, const std::string& payload);
  // The task ended: its streams are reset ("task <id> ended").
  void TaskEnded(const std::string& task);
  // Streams of `task` dispatched and still live on this end (tunnel::Stream::Live).
  size_t stream_count(const std::string& task);

 private:
  std::mutex mu_;
  std::map<std::string, TunnelHandler> handlers_;
  std::map<std::string, std::vector<std::weak_ptr<api::tunnel::Stream>>> by_task_;
};

// Where the agent reaches a task's port: 127.0.0.1 for a process task, the container's address
// for a docker task. The resolver checks the task runs here and that the port is its own.
struct PortTarget {
  std::string host;
  uint16_t port = 0;
};
using PortResolver = std::function<Result<PortTarget>(const std::string& task, int32_t port)>;

// The `port` kind: refuses with the resolver's reason, or dials the target (on `loop`) and joins
// the stream to the connection (api::tunnel::Pipe); a failed dial is refused with its reason.
TunnelHandler PortHandler(api::IoLoop& loop, PortResolver resolve);

struct TunnelClientOptions {
  std::string endpoint;  // the server, "http://host:port" or "https://host:port"
  std::string ca_file;   // https: as api::ClientOptions::ca_file
  std::string access_key;
  std::string secret_key;
  std::string node;
  std::function<void(const std::string&)> log;    // lines for the agent's log
  std::chrono::milliseconds dial_timeout{5'000};  // also how long Stop may wait
};

class TunnelClient {
 public:
  // Starts the dialing thread; `loop` runs the tunnel's WebSocket (it must outlive the client).
  TunnelClient(TunnelClientOptions options, api::IoLoop& loop,
               std::shared_ptr<TunnelDispatcher> dispatcher);
  ~TunnelClient();  // Stop()
  TunnelClient(const TunnelClient&) = delete;
  TunnelClient& operator=(const TunnelClient&) = delete;

  // Closes the tunnel (its streams are reset) and ends the thread. Idempotent.
  void Stop();
  // Whether the tunnel is up now.
  bool connected() const;
  // How many times the tunnel has come up.
  int connections() const;

 private:
  void Run();

  const TunnelClientOptions options_;
  api::IoLoop& loop_;
  const std::shared_ptr<TunnelDispatcher> dispatcher_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool connected_ = false;
  int connections_ = 0;
  std::shared_ptr<api::Duplex> websocket_;  // the tunnel's, while up
  std::thread thread_;
};

}  // namespace gpupool::agent
