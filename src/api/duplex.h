// A two-way byte channel that never blocks its caller: a WebSocket (messages) or a TCP
// connection (chunks), on the server (an upgraded or taken-over HTTP connection,
// http_server.h) or on the client (client.h's DialWebSocket, DialTcp). The tunnel's streams are
// joined to duplexes (tunnel.h's Pipe). No Beast types here.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace gpupool::api {

struct DuplexHandlers {
  // A message (WebSocket) or a chunk (TCP) from the peer. Return false to pause reading until
  // Resume(). On the duplex's I/O thread; must not block.
  std::function<bool(std::string data)> on_data;
  // The peer sends no more (its close frame, or EOF); writing still works.
  std::function<void()> on_end;
  // `bytes` of what was sent have been written to the peer's connection (the sender's credit).
  std::function<void(size_t bytes)> on_sent;
  // Once, last: both directions are done (`why` empty) or the channel broke or was closed
  // (`why` says how). Nothing is called after it.
  std::function<void(std::string why)> on_closed;
};

class Duplex {
 public:
  virtual ~Duplex() = default;
  // Starts reading and delivering. Once; sends may come before it.
  virtual void Start(DuplexHandlers handlers) = 0;
  // Queues `data` (one WebSocket message: binary unless the duplex was made for text). False,
  // and nothing queued, once the duplex is closed or ended. Any thread.
  virtual bool Send(std::string data) = 0;
  // Reads again after on_data returned false. Any thread.
  virtual void Resume() = 0;
  // After what is queued: a WebSocket's close frame, a TCP connection's half-close. Any thread.
  virtual void End() = 0;
  // Aborts now (queued data may be lost); on_closed follows with `why`. Any thread.
  virtual void Close(std::string why) = 0;
};

// Joins two duplexes: each one's data goes to the other, reading paused while more than 1 MiB
// sent to the other is not yet written by it; one's end ends the other's sending, an abort
// closes the other. Starts both.
void Join(std::shared_ptr<Duplex> a, std::shared_ptr<Duplex> b);

}  // namespace gpupool::api
