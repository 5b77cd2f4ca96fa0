// The signed HTTP client (see client.h): Boost.Beast over one keep-alive TCP connection, plain or
// TLS (beast_stream.h), each operation run to completion on a private io_context so that it can
// time out. And the client's Duplexes (WebSocket, TCP dialed or accepted) on an IoLoop's threads
// (beast_duplex.h).
#include "api/client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <charconv>
#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "api/beast_duplex.h"
#include "api/http_message.h"
#include "api/signing.h"
#include "proto/common.h"
#include "proto/json_codec.h"

namespace gpupool::api {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using detail::BeastDuplex;
using detail::Strand;
using detail::Stream;

tl::unexpected<Error> Unavailable(std::string message) {
  return MakeError(ErrorCode::kUnavailable, std::move(message));
}

// A Retry-After of delay-seconds in milliseconds; 0 for anything else (an HTTP date, which the
// API never sends).
int64_t RetryAfterMs(std::string_view value) {
  int64_t seconds = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (ec != std::errc() || end != value.data() + value.size() || seconds < 0 ||
      seconds > int64_t{1} << 40) {
    return 0;
  }
  return seconds * 1000;
}

struct Endpoint {
  std::string host;
  std::string port;
  bool tls = false;  // https
};

Result<Endpoint> ParseEndpoint(std::string_view endpoint) {
  const std::string quoted = "'" + std::string(endpoint) + "'";
  Endpoint e;
  std::string_view rest;
  if (endpoint.rfind("https://", 0) == 0) {
    e.tls = true;
    rest = endpoint.substr(8);
  } else if (endpoint.rfind("http://", 0) == 0) {
    rest = endpoint.substr(7);
  } else {
    return InvalidArgument("endpoint " + quoted +
                           " must look like http://host:port or https://host:port");
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) {
    return InvalidArgument("endpoint " + quoted + " must not have a path");
  }
  std::string_view port_part;
  if (!rest.empty() && rest.front() == '[') {  // [IPv6]:port
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) {
      return InvalidArgument("endpoint " + quoted + " has an unterminated IPv6 address");
    }
    e.host = std::string(rest.substr(1, close - 1));
    port_part = rest.substr(close + 1);
  } else {
    const size_t colon = rest.find(':');
    e.host = std::string(rest.substr(0, colon));
    port_part = colon == std::string_view::npos ? std::string_view() : rest.substr(colon);
  }
  if (!port_part.empty()) {
    if (port_part.front() != ':' || port_part.size() < 2 || port_part.size() > 6) {
      return InvalidArgument("endpoint " + quoted + " has a malformed port");
    }
    port_part.remove_prefix(1);
    for (char c : port_part) {
      if (c < '0' || c > '9')
        return InvalidArgument("endpoint " + quoted + " has a malformed port");
    }
    if (std::stoi(std::string(port_part)) > 65535) {
      return InvalidArgument("endpoint " + quoted + " has a port above 65535");
    }
    e.port = std::string(port_part);
  } else {
    e.port = e.tls ? "443" : "80";
  }
  if (e.host.empty()) return InvalidArgument("endpoint " + quoted + " has no host");
  return e;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct Client::Impl {
  Impl(std::string endpoint_text, std::string key, std::string secret, ClientOptions opts)
      : text(std::move(endpoint_text)),
        endpoint(ParseEndpoint(text)),
        access_key(std::move(key)),
        secret_key(std::move(secret)),
        options(opts) {}

  // Runs the io_context until the operation just started has completed.
  void Run() {
    ioc.restart();
    ioc.run();
  }

  void Disconnect() {
    if (stream) stream->Close();
    stream.reset();
    connected = false;
    buffer.clear();
  }

  Status Connect() {
    if (endpoint->tls && !tls_context) {
      Result<std::shared_ptr<asio::ssl::context>> context =
          detail::ClientTlsContext(options.ca_file);
      if (!context) return tl::unexpected(context.error());
      tls_context = std::move(*context);
    }
    beast::error_code ec;
    tcp::resolver resolver(ioc);
    const auto results = resolver.resolve(endpoint->host, endpoint->port, ec);
    if (ec) return Unavailable("cannot resolve " + text + ": " + ec.message());
    beast::tcp_stream tcp(ioc);
    tcp.expires_after(options.timeout);
    tcp.async_connect(results, [&ec](beast::error_code e, const tcp::endpoint&) { ec = e; });
    Run();
    if (ec) return Unavailable("cannot connect to " + text + ": " + ErrorText(ec));
    tcp.socket().set_option(tcp::no_delay(true), ec);
    if (!endpoint->tls) {
      stream.emplace(std::move(tcp));
    } else {
      stream.emplace(std::move(tcp), tls_context);
      if (Status s = detail::PrepareClientTls(stream->tls(), endpoint->host); !s) {
        Disconnect();
        return s;
      }
      stream->next_layer().expires_after(options.timeout);
      stream->tls().async_handshake(asio::ssl::stream_base::client,
                                    [&ec](beast::error_code e) { ec = e; });
      Run();
      if (ec) {
        const std::string why = ec == beast::error::timeout
                                    ? ErrorText(ec)
                                    : detail::ClientHandshakeErrorText(
                                          stream->tls().native_handle(), ec, options.ca_file);
        Disconnect();
        return Unavailable("TLS handshake with " + text + " failed: " + why);
      }
    }
    connected = true;
    buffer.clear();
    return {};
  }

  std::string ErrorText(const beast::error_code& ec) const {
    if (ec == beast::error::timeout) {
      return "timed out after " + std::to_string(options.timeout.count()) + " ms";
    }
    return detail::TlsErrorText(ec);
  }

  // One write and read on the open connection. `retry` is set when the failure looks like a
  // connection the server closed while it sat idle (nothing of a response arrived).
  static constexpr size_t kReadBytes = 64 * 1024;

  Result<ClientResponse> Exchange(const http::request<http::string_body>& request, bool* retry) {
    *retry = false;
    beast::error_code ec;
    stream->next_layer().expires_after(options.timeout);
    http::async_write(*stream, request, [&ec](beast::error_code e, size_t) { ec = e; });
    Run();
    if (ec) {
      *retry = ec != beast::error::timeout;
      Disconnect();
      return Unavailable("sending to " + text + " failed: " + ErrorText(ec));
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(options.max_response_bytes);
    // Beast reads as much as the buffer has room for, at most 64 KiB: a large body read into a
    // buffer of a few hundred bytes takes thousands of reads (1 MiB: 8 ms instead of 1).
    if (buffer.capacity() < kReadBytes) buffer.reserve(kReadBytes);
    stream->next_layer().expires_after(options.timeout);
    http::async_read(*stream, buffer, parser, [&ec](beast::error_code e, size_t) { ec = e; });
    Run();
    if (ec) {
      *retry = ec == http::error::end_of_stream || ec == asio::error::connection_reset ||
               ec == asio::error::eof || ec == asio::error::broken_pipe ||
               ec == asio::ssl::error::stream_truncated;
      Disconnect();
      return Unavailable("reading the response from " + text + " failed: " + ErrorText(ec));
    }
    http::response<http::string_body> response = parser.release();
    ClientResponse out;
    out.status = static_cast<int>(response.result_int());
    if (const auto it = response.find(http::field::content_type); it != response.end()) {
      out.content_type = std::string(it->value());
    }
    if (const auto it = response.find(http::field::retry_after); it != response.end()) {
      out.retry_after_ms = RetryAfterMs(it->value());
    }
    out.body = std::move(response.body());
    if (!response.keep_alive()) Disconnect();
    return out;
  }

  Result<ClientResponse> Call(std::string_view method, std::string_view target,
                              std::string_view body) {
    if (!endpoint) return tl::unexpected(endpoint.error());
    if (target.empty() || target.front() != '/' ||
        target.find_first_of(" \t\r\n") != std::string_view::npos) {
      return InvalidArgument("path '" + std::string(target) +
                             "' must start with '/' and contain no spaces or line breaks");
    }
    if (method.empty() || method.find_first_of(" \t\r\n") != std::string_view::npos) {
      return InvalidArgument("HTTP method '" + std::string(method) + "' is malformed");
    }
    http::request<http::string_body> request;
    const http::verb verb = http::string_to_verb(method);
    if (verb == http::verb::unknown) {
      request.method_string(method);
    } else {
      request.method(verb);
    }
    request.target(target);
    request.version(11);
    request.set(http::field::host, endpoint->host + ":" + endpoint->port);
    request.set(http::field::user_agent, "gpupool-client");
    if (!body.empty()) request.set(http::field::content_type, "application/json");
    if (!access_key.empty()) {
      Result<std::string> authorization =
          SignRequest(access_key, secret_key, method, target, body, NowMs(), NewNonce());
      if (!authorization) return tl::unexpected(authorization.error());
      request.set(http::field::authorization, *authorization);
    }
    request.body() = std::string(body);
    request.prepare_payload();

    // A kept-alive connection may have been closed by the server while idle; the request is
    // sent again once, on a new connection, with the same signature: a server that did see it
    // rejects the copy as a replayed nonce instead of acting twice.
    for (int attempt = 0; attempt < 2; ++attempt) {
      reused = connected;
      if (!connected) {
        if (Status s = Connect(); !s) return tl::unexpected(s.error());
      }
      bool retry = false;
      Result<ClientResponse> response = Exchange(request, &retry);
      if (response || !retry || !reused) return response;
    }
    return Unavailable("connection to " + text + " closed twice in a row");
  }

  std::string text;
  Result<Endpoint> endpoint;
  std::string access_key;
  std::string secret_key;
  ClientOptions options;
  asio::io_context ioc;
  std::shared_ptr<asio::ssl::context> tls_context;  // https: made at the first connection
  std::optional<detail::BasicStream<beast::tcp_stream>> stream;  // while connected
  beast::flat_buffer buffer;
  bool connected = false;
  bool reused = false;
};

Client::Client(std::string endpoint, std::string access_key, std::string secret_key,
               ClientOptions options)
    : impl_(std::make_unique<Impl>(std::move(endpoint), std::move(access_key),
                                   std::move(secret_key), options)) {}

Client::~Client() = default;

std::unique_ptr<Client> Client::Sibling() const {
  return std::make_unique<Client>(impl_->text, impl_->access_key, impl_->secret_key,
                                  impl_->options);
}

bool Client::last_call_reused_connection() const { return impl_->reused; }

Result<ClientResponse> Client::Call(std::string_view method, std::string_view path_with_query,
                                    std::string_view body) {
  std::chrono::milliseconds waited{0};
  while (true) {
    Result<ClientResponse> response = impl_->Call(method, path_with_query, body);
    if (!response || (response->status != 429 && response->status != 503) ||
        response->retry_after_ms <= 0) {
      return response;
    }
    const std::chrono::milliseconds wait{response->retry_after_ms};
    if (waited + wait > impl_->options.throttled_wait) return response;
    std::this_thread::sleep_for(wait);
    waited += wait;
  }
}

Result<nlohmann::json> Client::CallJson(std::string_view method, std::string_view path_with_query,
                                        std::string_view body) {
  Result<ClientResponse> response = Call(method, path_with_query, body);
  if (!response) return tl::unexpected(response.error());
  if (response->status < 200 || response->status >= 300) {
    return tl::unexpected(ResponseError(*response));
  }
  if (response->body.empty()) return nlohmann::json();
  nlohmann::json parsed =
      nlohmann::json::parse(response->body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return MakeError(ErrorCode::kInternal, "the server answered " +
                                               std::to_string(response->status) +
                                               " with a body that is not JSON");
  }
  return parsed;
}

Error ResponseError(const ClientResponse& response) {
  Error error{ErrorCodeOfHttpStatus(response.status).value_or(ErrorCode::kInternal),
              "the server answered HTTP " + std::to_string(response.status)};
  Result<proto::ErrorBody> body = proto::DecodeBody<proto::ErrorBody>(
      response.body, /*required=*/true, proto::UnknownFields::kIgnore);
  if (body && !body->error.message.empty()) {
    if (auto c = ParseErrorCodeName(body->error.code)) error.code = *c;
    error.message = body->error.message;
  }
  error.retry_after_ms = response.retry_after_ms;
  return error;
}

// --- the client's duplexes ---

struct IoLoop::Impl {
  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work{
      ioc.get_executor()};
  std::vector<std::thread> threads;
};

IoLoop::IoLoop(int threads) : impl_(std::make_unique<Impl>()) {
  for (int i = 0; i < std::max(1, threads); ++i) {
    impl_->threads.emplace_back([impl = impl_.get()] { impl->ioc.run(); });
  }
}

IoLoop::~IoLoop() {
  impl_->work.reset();
  impl_->ioc.stop();
  for (std::thread& t : impl_->threads) t.join();
}

namespace {

// One dial in progress, on its own strand.
struct DialOp {
  explicit DialOp(asio::io_context& ioc)
      : strand(asio::make_strand(ioc)), resolver(strand), stream(strand), timer(strand) {}
  Strand strand;
  tcp::resolver resolver;
  beast::tcp_stream stream;
  asio::steady_timer timer;  // the TLS handshake's limit
  bool timed_out = false;    // the timer closed the connection
  std::optional<websocket::stream<Stream>> ws;
  websocket::response_type response;
  Dialed done;
};

// Resolves and connects `op->stream` to host:port, then `next` (on the strand).
void Connect(const std::shared_ptr<DialOp>& op, const std::string& host, const std::string& port,
             std::chrono::milliseconds timeout, std::function<void()> next) {
  const std::string where = host + ":" + port;
  op->resolver.async_resolve(
      host, port,
      [op, where, timeout, next = std::move(next)](beast::error_code ec,
                                                   tcp::resolver::results_type results) {
        if (ec) return op->done(Unavailable("cannot resolve " + where + ": " + ec.message()));
        op->stream.expires_after(timeout);
        op->stream.async_connect(results, [op, where, timeout, next](beast::error_code connect_ec,
                                                                     const tcp::endpoint&) {
          if (connect_ec) {
            return op->done(
                Unavailable("cannot connect to " + where + ": " +
                            (connect_ec == beast::error::timeout
                                 ? "timed out after " + std::to_string(timeout.count()) + " ms"
                                 : connect_ec.message())));
          }
          op->stream.expires_never();
          beast::error_code ignored;
          op->stream.socket().set_option(tcp::no_delay(true), ignored);
          next();
        });
      });
}

}  // namespace

namespace {

// The WebSocket handshake on `op->ws`, connected (and through TLS for https).
void UpgradeToWebSocket(const std::shared_ptr<DialOp>& op, const std::string& host,
                        const WebSocketDial& dial, const std::string& authorization) {
  websocket::stream_base::timeout timeouts = detail::WebSocketTimeouts();
  timeouts.handshake_timeout = dial.timeout;
  op->ws->set_option(timeouts);
  op->ws->set_option(
      websocket::stream_base::decorator([authorization](websocket::request_type& request) {
        request.set(http::field::user_agent, "gpupool-client");
        if (!authorization.empty()) request.set(http::field::authorization, authorization);
      }));
  op->ws->async_handshake(op->response, host, dial.path_with_query,
                          [op, host, text = dial.text](beast::error_code ec) {
                            if (ec == websocket::error::upgrade_declined) {
                              ClientResponse refused;
                              refused.status = static_cast<int>(op->response.result_int());
                              if (const auto it = op->response.find(http::field::content_type);
                                  it != op->response.end()) {
                                refused.content_type = std::string(it->value());
                              }
                              if (const auto it = op->response.find(http::field::retry_after);
                                  it != op->response.end()) {
                                refused.retry_after_ms = RetryAfterMs(it->value());
                              }
                              refused.body = op->response.body();
                              return op->done(tl::unexpected(ResponseError(refused)));
                            }
                            if (ec) {
                              return op->done(Unavailable("WebSocket handshake with " + host +
                                                          " failed: " + detail::TlsErrorText(ec)));
                            }
                            auto duplex = std::make_shared<BeastDuplex>(op->strand);
                            duplex->AttachWebSocket(std::move(*op->ws), text);
                            op->done(std::shared_ptr<Duplex>(std::move(duplex)));
                          });
}

}  // namespace

void DialWebSocket(IoLoop& loop, WebSocketDial dial, Dialed done) {
  Result<Endpoint> endpoint = ParseEndpoint(dial.endpoint);
  if (!endpoint) return done(tl::unexpected(endpoint.error()));
  std::shared_ptr<asio::ssl::context> tls;
  if (endpoint->tls) {
    Result<std::shared_ptr<asio::ssl::context>> context = detail::ClientTlsContext(dial.ca_file);
    if (!context) return done(tl::unexpected(context.error()));
    tls = std::move(*context);
  }
  std::string authorization;
  if (!dial.access_key.empty()) {
    Result<std::string> signed_header = SignRequest(dial.access_key, dial.secret_key, "GET",
                                                    dial.path_with_query, "", NowMs(), NewNonce());
    if (!signed_header) return done(tl::unexpected(signed_header.error()));
    authorization = std::move(*signed_header);
  }
  auto op = std::make_shared<DialOp>(loop.impl().ioc);
  op->done = std::move(done);
  const std::string host = endpoint->host + ":" + endpoint->port;
  Connect(op, endpoint->host, endpoint->port, dial.timeout,
          [op, host, name = endpoint->host, tls = std::move(tls), dial = std::move(dial),
           authorization = std::move(authorization)] {
            if (!tls) {
              op->ws.emplace(Stream(op->stream.release_socket()));
              return UpgradeToWebSocket(op, host, dial, authorization);
            }
            op->ws.emplace(Stream(op->stream.release_socket(), tls));
            Stream& stream = op->ws->next_layer();
            if (Status s = detail::PrepareClientTls(stream.tls(), name); !s) {
              stream.Close();
              return op->done(tl::unexpected(s.error()));
            }
            // The handshake's limit: past it the connection is closed under the handshake.
            op->timer.expires_after(dial.timeout);
            op->timer.async_wait([op](beast::error_code ec) {
              if (ec) return;
              op->timed_out = true;
              op->ws->next_layer().Close();
            });
            stream.tls().async_handshake(
                asio::ssl::stream_base::client,
                [op, host, dial, authorization](beast::error_code ec) {
                  op->timer.cancel();
                  if (ec) {
                    const std::string why =
                        op->timed_out
                            ? "timed out after " + std::to_string(dial.timeout.count()) + " ms"
                            : detail::ClientHandshakeErrorText(
                                  op->ws->next_layer().tls().native_handle(), ec, dial.ca_file);
                    op->ws->next_layer().Close();
                    return op->done(Unavailable("TLS handshake with " + host + " failed: " + why));
                  }
                  UpgradeToWebSocket(op, host, dial, authorization);
                });
          });
}

Result<std::shared_ptr<Duplex>> DialWebSocket(IoLoop& loop, WebSocketDial dial) {
  std::promise<Result<std::shared_ptr<Duplex>>> answer;
  DialWebSocket(loop, std::move(dial),
                [&answer](Result<std::shared_ptr<Duplex>> r) { answer.set_value(std::move(r)); });
  return answer.get_future().get();
}

void DialTcp(IoLoop& loop, std::string host, uint16_t port, std::chrono::milliseconds timeout,
             Dialed done) {
  auto op = std::make_shared<DialOp>(loop.impl().ioc);
  op->done = std::move(done);
  Connect(op, host, std::to_string(port), timeout, [op] {
    auto duplex = std::make_shared<BeastDuplex>(op->strand);
    duplex->AttachRaw(Stream(op->stream.release_socket()), "");
    op->done(std::shared_ptr<Duplex>(std::move(duplex)));
  });
}

struct TcpListener::Impl : std::enable_shared_from_this<TcpListener::Impl> {
  explicit Impl(asio::io_context& io) : ioc(io), acceptor(asio::make_strand(io)) {}

  void Accept() {
    acceptor.async_accept(asio::make_strand(ioc),
                          [self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
                            if (ec == asio::error::operation_aborted || !self->acceptor.is_open())
                              return;
                            if (!ec) {
                              beast::error_code ignored;
                              socket.set_option(tcp::no_delay(true), ignored);
                              Strand strand = *socket.get_executor().target<Strand>();
                              auto duplex = std::make_shared<BeastDuplex>(strand);
                              asio::post(strand, [duplex, s = std::move(socket)]() mutable {
                                duplex->AttachRaw(Stream(std::move(s)), "");
                              });
                              self->on_accept(duplex);
                            }
                            self->Accept();
                          });
  }

  asio::io_context& ioc;
  tcp::acceptor acceptor;
  std::function<void(std::shared_ptr<Duplex>)> on_accept;
  uint16_t port = 0;
};

TcpListener::TcpListener(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<TcpListener>> TcpListener::Listen(
    IoLoop& loop, const std::string& host, uint16_t port,
    std::function<void(std::shared_ptr<Duplex>)> on_accept) {
  auto impl = std::make_shared<Impl>(loop.impl().ioc);
  impl->on_accept = std::move(on_accept);
  const std::string where = host + ":" + std::to_string(port);
  beast::error_code ec;
  const asio::ip::address address = asio::ip::make_address(host, ec);
  if (ec) return InvalidArgument("listen address '" + host + "' is not an IP address");
  const tcp::endpoint endpoint(address, port);
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Unavailable("cannot listen on " + where + ": " + ec.message());
  impl->port = impl->acceptor.local_endpoint(ec).port();
  asio::post(impl->acceptor.get_executor(), [impl] { impl->Accept(); });
  return std::make_unique<TcpListener>(std::move(impl));
}

TcpListener::~TcpListener() {
  asio::post(impl_->acceptor.get_executor(), [impl = impl_] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
  });
}

uint16_t TcpListener::port() const { return impl_->port; }

}  // namespace gpupool::api
