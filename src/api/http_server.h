// The HTTP/1.1 server (Boost.Beast, kept out of this header): keep-alive, pipelined requests
// answered in order, bounded header and body sizes, an idle/slow-client timeout, asynchronous
// handlers that may answer later from any thread, streamed responses (chunked, written as they
// come, bounded per stream), connections handed over as WebSockets or raw bytes (Duplex), and a
// graceful Stop() that also ends open streams and closes handed-over connections.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "api/http_message.h"
#include "core/result.h"

namespace gpupool::api {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: an ephemeral port (see HttpServer::port())
  int threads = 0;    // I/O threads; 0: std::thread::hardware_concurrency()
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 1 << 20;  // larger bodies get 413
  // A connection with no request outstanding (or a request arriving too slowly, or a response
  // the client does not read) is closed after this long.
  std::chrono::milliseconds read_timeout{30'000};
  // Stop() waits this long for in-flight requests to be answered.
  std::chrono::milliseconds shutdown_grace{10'000};
  size_t max_pipelined = 16;  // requests read ahead of their responses, per connection
  // What a streamed response (ResponseStream) may hold queued and not yet written to its client;
  // a Write past it is refused.
  size_t max_stream_buffer_bytes = 1 << 20;
  // Requests (by path and Host) that get every header in HttpRequest::headers. Such a request,
  // and any WebSocket handshake, is read with nothing behind it: the connection may be handed
  // over (TakeOver, AcceptWebSocket), so no further request is read ahead of its answer.
  std::function<bool(std::string_view path, std::string_view host)> all_headers{};
};

class HttpServer {
 public:
  // `handler` is called on an I/O thread for each request; it must not block. It answers through
  // the Responder, at once or later from any thread.
  HttpServer(HttpServerOptions options, Handler handler);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the I/O threads. kUnavailable when the address cannot be bound.
  Status Start();
  // The bound port (after Start).
  uint16_t port() const;
  // Connections open now (for a gauge, and for tests that wait for an idle close).
  size_t connection_count() const;
  // Stops accepting, lets requests in flight be answered (up to shutdown_grace), closes idle
  // connections, then stops the threads. Idempotent; must not be called from a handler.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupool::api
