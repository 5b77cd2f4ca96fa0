// Plain HTTP request/response structs shared by the server, the router and the routes (no Beast
// types here), the Responder a handler answers through (possibly later, from another thread, or
// with a stream written as it comes, or by taking the connection over: a WebSocket, or raw bytes
// for the gateway), and the one mapping between ErrorCode and HTTP status.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/duplex.h"
#include "core/result.h"

namespace gpupool::api {

struct HttpRequest {
  std::string method;         // "GET", "POST", … as sent
  std::string target;         // path and query as sent: "/v1/tasks?limit=10"
  std::string authorization;  // the Authorization header, empty when absent
  std::string content_type;   // the Content-Type header, empty when absent
  std::string body;
  // The headers a console session and the console's files need (empty when absent):
  std::string cookie{};            // Cookie (several are joined with "; ")
  std::string csrf_token{};        // X-CSRF-Token
  std::string accept_encoding{};   // Accept-Encoding
  std::string host{};              // Host
  bool websocket_upgrade = false;  // a WebSocket handshake (Upgrade: websocket)
  bool tls = false;                // it came over TLS (cookies set in its answer are Secure)
  // The connection was accepted past the server's general connection limit, into the reserve
  // kept for agents and admins (HttpServerOptions::reserved_connections): the handler serves the
  // request only if it authenticates as one of them, says so (Responder::Authenticated), and
  // refuses it otherwise; the server closes the connection after the answer unless it did.
  bool reserved = false;
  // Every header as sent, in order: only for the requests HttpServerOptions::all_headers picks
  // (the gateway passes them on).
  std::vector<std::pair<std::string, std::string>> headers{};

  // The path part of `target` (before '?'), still percent-encoded.
  std::string_view Path() const;
  // The raw query string after '?' (empty when there is none).
  std::string_view RawQuery() const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
};

// A response whose body is written as it comes (Server-Sent Events): the head goes at once, then
// each Write as it is queued, then the end; the connection closes after it, so requests a client
// pipelined behind a stream are not answered. Every call is safe from any thread and never
// blocks (a Write copies into the stream's buffer and returns).
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  // Queues `bytes`. False, and nothing queued, once the stream is over (ended, the client went
  // away, the server stops) or when what is queued and not yet written would grow past the
  // server's bound (HttpServerOptions::max_stream_buffer_bytes: a client that does not read):
  // the producer then ends the stream, with a last word if it likes.
  virtual bool Write(std::string bytes) = 0;
  // Sends what is queued, then `last` (even past the bound), then the end of the body, and
  // closes the connection. Only the first call counts; writes after it are refused.
  virtual void End(std::string last = {}) = 0;
  // `on_closed` runs once when the stream is over without the producer's End: the client closed
  // or broke the connection, a write failed or timed out, or the server stops. It runs on an
  // I/O thread (so it must not block), or at once when the stream is already over.
  virtual void OnClosed(std::function<void()> on_closed) = 0;
};

// Where a handler's response goes. The server implements it; tests implement it to capture.
class ResponseChannel {
 public:
  virtual ~ResponseChannel() = default;
  // Called at most once per request, from any thread.
  virtual void Send(HttpResponse response) = 0;
  // Instead of Send: answers with `head`'s status, type and headers and a body that follows
  // through the stream (`head.body`, if any, first). Null when the request can no longer be
  // answered (the client went away, the server stops, or it was answered already).
  virtual std::shared_ptr<ResponseStream> Stream(HttpResponse head) = 0;
  // Instead of Send: completes the request's WebSocket handshake (with `headers` added to the
  // 101) and turns the connection into a Duplex of binary messages. Null when the request is no
  // WebSocket handshake or can no longer be answered.
  virtual std::shared_ptr<Duplex> AcceptWebSocket(
      std::vector<std::pair<std::string, std::string>> /*headers*/) {
    return nullptr;
  }
  // Instead of Send: hands the connection over as raw bytes (what the client sent past the
  // request comes first); the HTTP server writes nothing more of its own. Null when it can no
  // longer be answered, or when the request was not read with nothing behind it
  // (HttpServerOptions::all_headers).
  virtual std::shared_ptr<Duplex> TakeOver() { return nullptr; }
  // Before the answer: the request authenticated `user` (`privileged`: an agent or an admin).
  // The connection is then no longer anonymous for the server's limits (its own idle timeout,
  // the per-peer count), one in the reserve is kept when privileged, and it counts against the
  // user's connections. An error (kUnavailable, with a retry_after) when the user has all the
  // connections it may have open: the answer must then be a refusal, after which the connection
  // is closed. From any thread.
  virtual Status Authenticated(std::string_view /*user*/, bool /*privileged*/) { return {}; }
};

// Cheap to copy; every copy answers the same request. Call it exactly once; later calls are
// ignored (the channel decides). A request whose responders are all dropped unanswered gets a
// 500 from the server's channel.
class Responder {
 public:
  Responder() = default;
  explicit Responder(std::shared_ptr<ResponseChannel> channel) : channel_(std::move(channel)) {}
  void operator()(HttpResponse response) const {
    if (channel_) channel_->Send(std::move(response));
  }
  // Answers with a stream (ResponseChannel::Stream); null when it cannot.
  std::shared_ptr<ResponseStream> Stream(HttpResponse head) const {
    return channel_ ? channel_->Stream(std::move(head)) : nullptr;
  }
  // ResponseChannel::AcceptWebSocket, TakeOver.
  std::shared_ptr<Duplex> AcceptWebSocket(
      std::vector<std::pair<std::string, std::string>> headers = {}) const {
    return channel_ ? channel_->AcceptWebSocket(std::move(headers)) : nullptr;
  }
  std::shared_ptr<Duplex> TakeOver() const { return channel_ ? channel_->TakeOver() : nullptr; }
  // ResponseChannel::Authenticated.
  Status Authenticated(std::string_view user, bool privileged) const {
    return channel_ ? channel_->Authenticated(user, privileged) : Status{};
  }

 private:
  std::shared_ptr<ResponseChannel> channel_;
};

// A request handler. It must not block: work that waits (a durable write) answers through the
// responder later.
using Handler = std::function<void(HttpRequest, Responder)>;

// The one mapping of error codes to HTTP statuses (see docs/api.md).
int HttpStatusOf(ErrorCode code);
// The reverse, for clients: the error code an HTTP status stands for (2xx: nullopt).
std::optional<ErrorCode> ErrorCodeOfHttpStatus(int status);
// Parses an ErrorCodeName ("not_found"); nullopt for anything else.
std::optional<ErrorCode> ParseErrorCodeName(std::string_view name);

// {"error":{"code":"<code name>","message":"<message>"}} with the status HttpStatusOf(code).
HttpResponse ErrorResponse(ErrorCode code, std::string_view message);
// The same, with Retry-After (whole seconds, rounded up) when the error says when to retry.
HttpResponse ErrorResponse(const Error& error);
// Error::retry_after_ms as a Retry-After value: whole seconds, rounded up, at least 1.
std::string RetryAfterSeconds(int64_t retry_after_ms);
// An error response with an explicit status (413, 405, …) and the code name given.
HttpResponse ErrorResponse(int status, std::string_view code_name, std::string_view message);

}  // namespace gpupool::api
