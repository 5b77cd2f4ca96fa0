// The signed HTTP client (see client.h): Boost.Beast over one keep-alive TCP connection, each
// operation run to completion on a private io_context so that it can time out.
#include "api/client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "api/http_message.h"
#include "api/signing.h"
#include "proto/common.h"
#include "proto/json_codec.h"

namespace gpupool::api {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

tl::unexpected<Error> Unavailable(std::string message) {
  return MakeError(ErrorCode::kUnavailable, std::move(message));
}

struct Endpoint {
  std::string host;
  std::string port;
};

Result<Endpoint> ParseEndpoint(std::string_view endpoint) {
  const std::string quoted = "'" + std::string(endpoint) + "'";
  constexpr std::string_view kScheme = "http://";
  if (endpoint.rfind("https://", 0) == 0) {
    return InvalidArgument("endpoint " + quoted +
                           ": https is not supported by this client; use http://host:port");
  }
  if (endpoint.rfind(kScheme, 0) != 0) {
    return InvalidArgument("endpoint " + quoted + " must look like http://host:port");
  }
  std::string_view rest = endpoint.substr(kScheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) {
    return InvalidArgument("endpoint " + quoted + " must not have a path");
  }
  Endpoint e;
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
    e.port = "80";
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
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.close();
    connected = false;
    buffer.clear();
  }

  Status Connect() {
    beast::error_code ec;
    tcp::resolver resolver(ioc);
    const auto results = resolver.resolve(endpoint->host, endpoint->port, ec);
    if (ec) return Unavailable("cannot resolve " + text + ": " + ec.message());
    stream.expires_after(options.timeout);
    stream.async_connect(results, [&ec](beast::error_code e, const tcp::endpoint&) { ec = e; });
    Run();
    if (ec) {
      Disconnect();
      return Unavailable("cannot connect to " + text + ": " + ErrorText(ec));
    }
    stream.socket().set_option(tcp::no_delay(true), ec);
    connected = true;
    buffer.clear();
    return {};
  }

  std::string ErrorText(const beast::error_code& ec) const {
    if (ec == beast::error::timeout) {
      return "timed out after " + std::to_string(options.timeout.count()) + " ms";
    }
    return ec.message();
  }

  // One write and read on the open connection. `retry` is set when the failure looks like a
  // connection the server closed while it sat idle (nothing of a response arrived).
  Result<ClientResponse> Exchange(const http::request<http::string_body>& request, bool* retry) {
    *retry = false;
    beast::error_code ec;
    stream.expires_after(options.timeout);
    http::async_write(stream, request, [&ec](beast::error_code e, size_t) { ec = e; });
    Run();
    if (ec) {
      *retry = ec != beast::error::timeout;
      Disconnect();
      return Unavailable("sending to " + text + " failed: " + ErrorText(ec));
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(options.max_response_bytes);
    stream.expires_after(options.timeout);
    http::async_read(stream, buffer, parser, [&ec](beast::error_code e, size_t) { ec = e; });
    Run();
    if (ec) {
      *retry = ec == http::error::end_of_stream || ec == asio::error::connection_reset ||
               ec == asio::error::eof || ec == asio::error::broken_pipe;
      Disconnect();
      return Unavailable("reading the response from " + text + " failed: " + ErrorText(ec));
    }
    http::response<http::string_body> response = parser.release();
    ClientResponse out;
    out.status = static_cast<int>(response.result_int());
    if (const auto it = response.find(http::field::content_type); it != response.end()) {
      out.content_type = std::string(it->value());
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
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;
  bool connected = false;
  bool reused = false;
};

Client::Client(std::string endpoint, std::string access_key, std::string secret_key,
               ClientOptions options)
    : impl_(std::make_unique<Impl>(std::move(endpoint), std::move(access_key),
                                   std::move(secret_key), options)) {}

Client::~Client() = default;

bool Client::last_call_reused_connection() const { return impl_->reused; }

Result<ClientResponse> Client::Call(std::string_view method, std::string_view path_with_query,
                                    std::string_view body) {
  return impl_->Call(method, path_with_query, body);
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
  return error;
}

}  // namespace gpupool::api
