// A connection's bytes as the two Beast translation units read and write them (http_server.cc,
// client.cc, and beast_duplex.h which they share): plain TCP, or TLS over TCP (asio::ssl over
// OpenSSL), chosen when the connection is made. Private to them: include it nowhere else. Also the
// TLS contexts they build: the server's from its certificate and key files, a client's that
// verifies the server against a CA file or the system's store and checks its host name.
#pragma once

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/asio/async_result.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/role.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <boost/beast/websocket/teardown.hpp>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "core/result.h"
#include "os/openssl_init.h"

namespace gpupool::api::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

// Plain or TLS over `Next` (a tcp::socket, or a beast::tcp_stream for the client's timeouts).
// An AsyncReadStream and AsyncWriteStream, so Beast's HTTP and WebSocket code runs over it.
template <class Next>
class BasicStream {
 public:
  using executor_type = typename Next::executor_type;

  explicit BasicStream(Next next) : plain_(std::move(next)) {}
  // TLS over `next`; the handshake is the caller's (tls().async_handshake).
  BasicStream(Next next, std::shared_ptr<ssl::context> context)
      : context_(std::move(context)), tls_(std::in_place, std::move(next), *context_) {}

  bool is_tls() const { return tls_.has_value(); }
  ssl::stream<Next>& tls() { return *tls_; }
  Next& next_layer() { return tls_ ? tls_->next_layer() : *plain_; }
  tcp::socket& socket() {
    if constexpr (std::is_same_v<Next, tcp::socket>) {
      return next_layer();
    } else {
      return next_layer().socket();
    }
  }
  executor_type get_executor() { return next_layer().get_executor(); }

  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    return asio::async_initiate<Token, void(beast::error_code, size_t)>(
        [this](auto handler, const MutableBuffers& b) {
          if (tls_) {
            tls_->async_read_some(b, std::move(handler));
          } else {
            plain_->async_read_some(b, std::move(handler));
          }
        },
        token, buffers);
  }

  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return asio::async_initiate<Token, void(beast::error_code, size_t)>(
        [this](auto handler, const ConstBuffers& b) {
          if (tls_) {
            tls_->async_write_some(b, std::move(handler));
          } else {
            plain_->async_write_some(b, std::move(handler));
          }
        },
        token, buffers);
  }

  // Closes the TCP connection at once (for TLS without close_notify: the HTTP framing, not the
  // TLS close, tells a client where a response ends).
  void Close() {
    beast::error_code ignored;
    socket().shutdown(tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
  }

 private:
  std::shared_ptr<ssl::context> context_;  // TLS: the context its session was made from
  std::optional<Next> plain_;
  std::optional<ssl::stream<Next>> tls_;
};

using Stream = BasicStream<tcp::socket>;

// A WebSocket over a BasicStream closes as one over its plain or TLS stream does.
template <class Next>
void teardown(beast::role_type role, BasicStream<Next>& stream, beast::error_code& ec) {
  if (stream.is_tls()) {
    beast::teardown(role, stream.tls(), ec);
  } else {
    beast::websocket::teardown(role, stream.next_layer(), ec);
  }
}

template <class Next, class Handler>
void async_teardown(beast::role_type role, BasicStream<Next>& stream, Handler&& handler) {
  if (stream.is_tls()) {
    beast::async_teardown(role, stream.tls(), std::forward<Handler>(handler));
  } else {
    beast::websocket::async_teardown(role, stream.next_layer(), std::forward<Handler>(handler));
  }
}

// OpenSSL's reason for the last failure of `ec` (a certificate that does not verify, a protocol
// mismatch) in words, without its library prefix where it has one.
inline std::string TlsErrorText(const beast::error_code& ec) {
  if (ec.category() == asio::error::get_ssl_category()) {
    const char* reason = ERR_reason_error_string(static_cast<unsigned long>(ec.value()));
    if (reason != nullptr) return std::string("TLS: ") + reason;
  }
  if (ec == ssl::error::stream_truncated) return "TLS: the peer closed without close_notify";
  return ec.message();
}

// Why a client's handshake failed, for a person: an untrusted certificate says what the check
// found (X509's reason), what it was checked against and how to trust it; else TlsErrorText.
inline std::string ClientHandshakeErrorText(SSL* ssl, const beast::error_code& ec,
                                            const std::string& ca_file) {
  if (ec.category() != asio::error::get_ssl_category() ||
      ERR_GET_REASON(static_cast<unsigned long>(ec.value())) != SSL_R_CERTIFICATE_VERIFY_FAILED) {
    return TlsErrorText(ec);
  }
  const long result = SSL_get_verify_result(ssl);
  const std::string against =
      ca_file.empty() ? "the system's certificate store" : "the CA file " + ca_file;
  if (result == X509_V_ERR_HOSTNAME_MISMATCH || result == X509_V_ERR_IP_ADDRESS_MISMATCH) {
    return std::string("the server's certificate does not name this host (") +
           X509_verify_cert_error_string(result) +
           "): connect with a name the certificate carries, or give the server a certificate "
           "for this one";
  }
  return std::string("the server's certificate is not trusted (") +
         X509_verify_cert_error_string(result) + ", checked against " + against +
         "): give the CA that signed it as GPUPOOL_CA_FILE, a profile's ca_file (gpupool login "
         "--ca-file) or the agent's --ca-file (a server started with --tls-self-signed: its "
         "DATA_DIR/tls/cert.pem)";
}

// The options of both sides' contexts: TLS 1.2 and later only.
inline constexpr ssl::context::options kTls12AndLater =
    ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
    ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1;

// The server's TLS context: TLS 1.2 and later, the certificate chain and private key of PEM
// files. kInvalidArgument naming the file when one cannot be read or they do not match.
inline Result<std::shared_ptr<ssl::context>> ServerTlsContext(const std::string& cert_file,
                                                              const std::string& key_file) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  beast::error_code ec;
  context->set_options(kTls12AndLater | ssl::context::single_dh_use, ec);
  context->use_certificate_chain_file(cert_file, ec);
  if (ec) {
    return InvalidArgument("TLS certificate '" + cert_file +
                           "' cannot be used: " + TlsErrorText(ec));
  }
  context->use_private_key_file(key_file, ssl::context::pem, ec);
  // OpenSSL 3 checks the pair while loading the key (X509_R_KEY_VALUES_MISMATCH), older ones
  // only in SSL_CTX_check_private_key.
  const bool mismatched =
      ec && ec.category() == asio::error::get_ssl_category() &&
      ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH;
  if (ec && !mismatched) {
    return InvalidArgument("TLS key '" + key_file + "' cannot be used: " + TlsErrorText(ec));
  }
  if (mismatched || SSL_CTX_check_private_key(context->native_handle()) != 1) {
    return InvalidArgument("TLS key '" + key_file + "' does not belong to the certificate '" +
                           cert_file + "'");
  }
  return context;
}

// A client's TLS context: TLS 1.2 and later, the server verified against the PEM certificates
// of `ca_file`, or the system's store when it is empty (which honours SSL_CERT_FILE and
// SSL_CERT_DIR). kInvalidArgument naming the file when it cannot be read.
inline Result<std::shared_ptr<ssl::context>> ClientTlsContext(const std::string& ca_file) {
  os::LoadDeferredOpenSslConfig();
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  beast::error_code ec;
  context->set_options(kTls12AndLater, ec);
  context->set_verify_mode(ssl::verify_peer, ec);
  if (ca_file.empty()) {
    context->set_default_verify_paths(ec);
    if (ec)
      return InvalidArgument("the system's certificate store cannot be read: " + ec.message());
  } else {
    context->load_verify_file(ca_file, ec);
    if (ec) return InvalidArgument("CA file '" + ca_file + "' cannot be used: " + TlsErrorText(ec));
  }
  return context;
}

// Prepares a client's TLS stream for `host`: the name it sends (SNI, for names only) and the one
// the server's certificate must carry (a DNS name, or an IP address in its subjectAltName).
template <class Next>
Status PrepareClientTls(ssl::stream<Next>& tls, const std::string& host) {
  beast::error_code not_an_address;
  (void)asio::ip::make_address(host, not_an_address);
  SSL* ssl = tls.native_handle();
  // OpenSSL's own check of the name (or address) during verification, so that a mismatch is
  // its own verify result (X509_V_ERR_HOSTNAME_MISMATCH, _IP_ADDRESS_MISMATCH).
  const bool checked = not_an_address
                           ? SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 &&
                                 SSL_set1_host(ssl, host.c_str()) == 1
                           : X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) == 1;
  if (!checked)
    return InvalidArgument("host '" + host + "' cannot be checked against a certificate");
  return {};
}

}  // namespace gpupool::api::detail
