// The HTTP/1.1 server (Boost.Beast, kept out of this header), plain or over TLS: keep-alive,
// pipelined requests answered in order, bounded header and body sizes, an idle/slow-client timeout,
// asynchronous handlers that may answer later from any thread, streamed responses (chunked, written
// as they come, bounded per stream), connections handed over as WebSockets or raw bytes (Duplex),
// and a graceful Stop() that also ends open streams and closes handed-over connections. Connections
// are limited per peer address and in all, with a reserve for the callers the handler vouches
// for (agents and admins), and anonymous ones get a short timeout for each request head.
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
#include "server/operations_service.h"

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

  // Connection limits. A connection is anonymous until a request on it authenticates (the
  // handler calls Responder::Authenticated); handed-over connections keep their place until
  // they close. 0: no limit.
  // Connections open in all. Past it, up to `reserved_connections` more are accepted, each
  // for one request that must authenticate as an agent or admin (HttpRequest::reserved) to keep
  // it; past both, a new connection gets a 503 and is closed.
  size_t max_connections = 0;
  size_t reserved_connections = 0;
  // Anonymous connections one peer (PeerGroup) may have open; past it a new one gets a 503 and
  // is closed. Authenticated connections do not count (many agents behind one NAT).
  size_t max_anonymous_per_peer = 0;
  // Connections on which a request authenticated one user (ResponseChannel::Authenticated; a
  // task's token is a user of its own) that may be open at once; agents and admins are not
  // held to it. Past it the request is refused and its connection closed, so that one tenant
  // cannot take the places the others need.
  size_t max_connections_per_user = 0;
  // An anonymous connection must deliver each request head within this long of being idle
  // (slowloris); the body then has read_timeout, as authenticated connections have throughout.
  // A TLS connection's handshake has this long too.
  std::chrono::milliseconds anonymous_timeout{5'000};

  // HTTPS: every connection speaks TLS (1.2 or later) with the certificate chain and private key
  // of these PEM files; both empty: plain HTTP. Start() fails naming a file it cannot use.
  std::string tls_cert_file{};
  std::string tls_key_file{};
};

// What a peer's connections are counted under: an IPv4 address (an IPv4-mapped IPv6 one in its
// IPv4 form), or an IPv6 address's /64 ("2001:db8:1:2::/64"), the block one host or subscriber
// is given, so that a peer choosing among its 2^64 addresses is still one. Text that is no
// address is returned as it is.
std::string PeerGroup(std::string_view address);

// Connection limits that leave room for the rest of what a process with `descriptor_limit`
// (RLIMIT_NOFILE) open files opens — its database, task files and output, pipes: three quarters
// of what is left after 256 descriptors for the general limit and 1/16 of that, at least 16, for
// the reserve, general at most 16,384 (each connection also costs memory).
struct ConnectionLimits {
  size_t max_connections = 0;
  size_t reserved_connections = 0;
};
ConnectionLimits ConnectionLimitsFor(uint64_t descriptor_limit);

class HttpServer {
 public:
  // `handler` is called on an I/O thread for each request; it must not block. It answers through
  // the Responder, at once or later from any thread.
  HttpServer(HttpServerOptions options, Handler handler);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the I/O threads. kUnavailable when the address cannot be bound,
  // kInvalidArgument when the TLS certificate or key cannot be used.
  Status Start();
  // The bound port (after Start).
  uint16_t port() const;
  // HTTP connections open now (not the handed-over ones), for tests that wait for a close.
  size_t connection_count() const;
  // The limits' figures (for /metrics): connections open by kind, refusals by reason.
  server::ConnectionFigures connection_figures() const;
  // Stops accepting, lets requests in flight be answered (up to shutdown_grace), closes idle
  // connections, then stops the threads. Idempotent; must not be called from a handler.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupool::api
