// Loopback tests of HTTPS: api/http_server with a certificate made in the test by its own CA
// (os/certificate.h) and api/client verifying it — a signed call and keep-alive over TLS; refusals
// of a server the client cannot trust (no CA, another CA, another host name); plain HTTP against
// TLS and TLS against plain HTTP failing cleanly; a WebSocket (the agent's tunnel) and a raw
// hand-over (the gateway) through TLS; a handshake that never comes closed on time; and the
// server refusing certificate files it cannot use.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>

#include "api/client.h"
#include "api/http_server.h"
#include "api/socket_testing.h"
#include "os/certificate.h"

namespace gpupool::api {
namespace {

using namespace std::chrono_literals;

std::string WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

// A CA and a server certificate it signed, as files in a temporary directory.
class Pki {
 public:
  explicit Pki(const std::vector<std::string>& server_names) {
    char templ[] = "/tmp/gpupool-tls-XXXXXX";
    dir_ = mkdtemp(templ);
    Result<os::CertificatePair> ca = os::MakeCertificate({.names = {"test CA"}, .ca = true});
    EXPECT_TRUE(ca);
    Result<os::CertificatePair> server =
        os::MakeCertificate({.names = server_names, .issuer = &*ca});
    EXPECT_TRUE(server);
    Result<os::CertificatePair> other = os::MakeCertificate({.names = {"other CA"}, .ca = true});
    EXPECT_TRUE(other);
    ca_file = WriteFile(dir_ + "/ca.pem", ca->certificate_pem);
    other_ca_file = WriteFile(dir_ + "/other-ca.pem", other->certificate_pem);
    cert_file = WriteFile(dir_ + "/cert.pem", server->certificate_pem);
    key_file = WriteFile(dir_ + "/key.pem", server->key_pem);
    other_key_file = WriteFile(dir_ + "/other-key.pem", other->key_pem);
  }
  ~Pki() { std::filesystem::remove_all(dir_); }

  std::string ca_file, other_ca_file, cert_file, key_file, other_key_file;

 private:
  std::string dir_;
};

HttpResponse Text(std::string body) {
  HttpResponse r;
  r.content_type = "text/plain";
  r.body = std::move(body);
  return r;
}

// A server whose "/echo" answers with the target and whether the request came over TLS,
// "/ws" echoes WebSocket messages and "/raw" echoes the bytes of a taken-over connection.
class EchoServer {
 public:
  explicit EchoServer(const Pki* pki) {
    HttpServerOptions options;
    options.threads = 2;
    options.anonymous_timeout = 500ms;
    // A connection is taken over only from a request read with nothing behind it.
    options.all_headers = [](std::string_view path, std::string_view) { return path == "/raw"; };
    if (pki != nullptr) {
      options.tls_cert_file = pki->cert_file;
      options.tls_key_file = pki->key_file;
    }
    server_ = std::make_unique<HttpServer>(options, [](HttpRequest req, Responder respond) {
      if (req.target == "/ws" || req.target == "/raw") {
        std::shared_ptr<Duplex> duplex =
            req.target == "/ws" ? respond.AcceptWebSocket({}) : respond.TakeOver();
        if (!duplex) return respond(Text("no hand-over"));
        std::weak_ptr<Duplex> weak = duplex;
        duplex->Start({.on_data =
                           [weak](std::string data) {
                             if (auto d = weak.lock()) d->Send("echo:" + data);
                             return true;
                           },
                       .on_end =
                           [weak] {
                             if (auto d = weak.lock()) d->End();
                           },
                       .on_sent = nullptr,
                       .on_closed = [duplex](std::string) mutable { duplex.reset(); }});
        return;
      }
      respond(Text(req.target + (req.tls ? " over TLS" : " in the clear")));
    });
    EXPECT_TRUE(server_->Start());
  }
  uint16_t port() const { return server_->port(); }
  std::string https() const { return "https://127.0.0.1:" + std::to_string(port()); }
  std::string http() const { return "http://127.0.0.1:" + std::to_string(port()); }
  HttpServer& server() { return *server_; }

 private:
  std::unique_ptr<HttpServer> server_;
};

TEST(Tls, ASignedCallGoesOverTlsAndKeepsItsConnection) {
  Pki pki({"localhost", "127.0.0.1"});
  EchoServer server(&pki);
  Client client(server.https(), "AK", "SK", {.ca_file = pki.ca_file});
  Result<ClientResponse> first = client.Call("GET", "/echo");
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->status, 200);
  EXPECT_EQ(first->body, "/echo over TLS");
  Result<ClientResponse> second = client.Call("GET", "/echo?again");
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(second->body, "/echo?again over TLS");
  EXPECT_TRUE(client.last_call_reused_connection());
  // The name in the certificate, not only its address.
  Client by_name("https://localhost:" + std::to_string(server.port()), "", "",
                 {.ca_file = pki.ca_file});
  Result<ClientResponse> named = by_name.Call("GET", "/echo");
  ASSERT_TRUE(named) << named.error().message;
  EXPECT_EQ(named->body, "/echo over TLS");
}

TEST(Tls, AServerTheClientCannotTrustIsRefused) {
  Pki pki({"localhost", "127.0.0.1"});
  EchoServer server(&pki);
  // The system's store does not hold the test's CA; nor does another CA vouch for it.
  const std::string no_system_store = "SSL_CERT_FILE";
  ::setenv(no_system_store.c_str(), pki.other_ca_file.c_str(), 1);
  for (const std::string& ca : {std::string(), pki.other_ca_file}) {
    Client client(server.https(), "", "", {.ca_file = ca});
    Result<ClientResponse> r = client.Call("GET", "/echo");
    ASSERT_FALSE(r) << "ca_file '" << ca << "'";
    EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
    EXPECT_NE(r.error().message.find("TLS handshake"), std::string::npos) << r.error().message;
    const std::string& m = r.error().message;
    EXPECT_NE(m.find("the server's certificate is not trusted (unable to get local issuer "
                     "certificate, checked against " +
                     (ca.empty() ? "the system's certificate store" : "the CA file " + ca) +
                     "): give the CA that signed it as GPUPOOL_CA_FILE"),
              std::string::npos)
        << m;
  }
  ::unsetenv(no_system_store.c_str());
  // A CA file that is not there is the caller's mistake, said as such.
  Client missing(server.https(), "", "", {.ca_file = "/nonexistent/ca.pem"});
  Result<ClientResponse> r = missing.Call("GET", "/echo");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("/nonexistent/ca.pem"), std::string::npos);
}

TEST(Tls, ACertificateForAnotherHostIsRefused) {
  Pki pki({"gpupool.test"});  // neither localhost nor 127.0.0.1
  EchoServer server(&pki);
  Client client(server.https(), "", "", {.ca_file = pki.ca_file});
  Result<ClientResponse> r = client.Call("GET", "/echo");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("the server's certificate does not name this host (IP "
                                   "address mismatch)"),
            std::string::npos)
      << r.error().message;
}

TEST(Tls, PlainHttpAndTlsDoNotMixAndTheServerGoesOn) {
  Pki pki({"127.0.0.1"});
  EchoServer tls_server(&pki);
  EchoServer plain_server(nullptr);
  // Plain HTTP to the TLS port: the handshake fails and the connection closes.
  Client plain_to_tls(tls_server.http(), "", "", {.timeout = 5s});
  Result<ClientResponse> r = plain_to_tls.Call("GET", "/echo");
  EXPECT_FALSE(r && r->status == 200);
  // TLS to a plain port: the client's handshake fails.
  Client tls_to_plain(plain_server.https(), "", "", {.timeout = 5s, .ca_file = pki.ca_file});
  r = tls_to_plain.Call("GET", "/echo");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("TLS handshake"), std::string::npos) << r.error().message;
  // Both servers still answer their own kind.
  Client good(tls_server.https(), "", "", {.ca_file = pki.ca_file});
  ASSERT_TRUE(good.Call("GET", "/echo"));
  Client plain(plain_server.http(), "", "");
  Result<ClientResponse> clear = plain.Call("GET", "/echo");
  ASSERT_TRUE(clear);
  EXPECT_EQ(clear->body, "/echo in the clear");
}

TEST(Tls, AWebSocketRunsThroughTls) {
  Pki pki({"127.0.0.1"});
  EchoServer server(&pki);
  IoLoop loop;
  Result<std::shared_ptr<Duplex>> ws = DialWebSocket(
      loop, {.endpoint = server.https(), .path_with_query = "/ws", .ca_file = pki.ca_file});
  ASSERT_TRUE(ws) << ws.error().message;
  std::promise<std::string> echoed;
  std::promise<void> closed;
  (*ws)->Start({.on_data =
                    [&echoed](std::string data) {
                      echoed.set_value(std::move(data));
                      return true;
                    },
                .on_end = nullptr,
                .on_sent = nullptr,
                .on_closed = [&closed](std::string) { closed.set_value(); }});
  (*ws)->Send("hello");
  std::future<std::string> got = echoed.get_future();
  ASSERT_EQ(got.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(got.get(), "echo:hello");
  (*ws)->End();
  EXPECT_EQ(closed.get_future().wait_for(10s), std::future_status::ready);
  // Without the CA the dial is refused as untrusted.
  Result<std::shared_ptr<Duplex>> untrusted = DialWebSocket(
      loop, {.endpoint = server.https(), .path_with_query = "/ws", .ca_file = pki.other_ca_file});
  ASSERT_FALSE(untrusted);
  EXPECT_NE(untrusted.error().message.find("certificate is not trusted"), std::string::npos)
      << untrusted.error().message;
}

// A blocking TLS client over OpenSSL alone, for the bytes of a taken-over connection.
class TlsSocket {
 public:
  TlsSocket(uint16_t port, const std::string& ca_file) {
    context_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(context_, ca_file.c_str(), nullptr);
    SSL_CTX_set_verify(context_, SSL_VERIFY_PEER, nullptr);
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return;
    ssl_ = SSL_new(context_);
    SSL_set_fd(ssl_, fd_);
    SSL_set1_host(ssl_, "127.0.0.1");
    connected_ = SSL_connect(ssl_) == 1;
  }
  ~TlsSocket() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    close(fd_);
    SSL_CTX_free(context_);
  }
  bool connected() const { return connected_; }
  void Write(const std::string& data) {
    ASSERT_EQ(SSL_write(ssl_, data.data(), static_cast<int>(data.size())),
              static_cast<int>(data.size()));
  }
  // Reads until `wanted` bytes or the end.
  std::string Read(size_t wanted) {
    std::string out;
    char buffer[4096];
    while (out.size() < wanted) {
      const int n = SSL_read(ssl_, buffer, sizeof(buffer));
      if (n <= 0) break;
      out.append(buffer, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  SSL_CTX* context_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  bool connected_ = false;
};

TEST(Tls, ATakenOverConnectionCarriesItsBytesThroughTls) {
  Pki pki({"127.0.0.1"});
  EchoServer server(&pki);
  TlsSocket socket(server.port(), pki.ca_file);
  ASSERT_TRUE(socket.connected());
  // The request that hands the connection over, with the first bytes behind it.
  socket.Write("GET /raw HTTP/1.1\r\nHost: t\r\n\r\nping");
  EXPECT_EQ(socket.Read(9), "echo:ping");
  socket.Write("pong");
  EXPECT_EQ(socket.Read(9), "echo:pong");
}

TEST(Tls, AHandshakeThatNeverComesIsClosedOnTime) {
  Pki pki({"127.0.0.1"});
  EchoServer server(&pki);  // anonymous_timeout 500 ms
  testing::RawSocket idle(server.port());
  ASSERT_TRUE(idle.connected());
  const auto start = std::chrono::steady_clock::now();
  // Nothing is sent; the server closes the connection (the read sees its end).
  EXPECT_TRUE(idle.ReadsEof());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(Tls, StartRefusesCertificateFilesItCannotUse) {
  Pki pki({"127.0.0.1"});
  const auto start = [](std::string cert, std::string key) {
    HttpServerOptions options;
    options.tls_cert_file = std::move(cert);
    options.tls_key_file = std::move(key);
    HttpServer server(options, [](HttpRequest, Responder respond) { respond(Text("")); });
    return server.Start();
  };
  Status missing = start("/nonexistent/cert.pem", pki.key_file);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(missing.error().message.find("/nonexistent/cert.pem"), std::string::npos);
  Status mismatched = start(pki.cert_file, pki.other_key_file);
  ASSERT_FALSE(mismatched);
  EXPECT_NE(mismatched.error().message.find("does not belong"), std::string::npos)
      << mismatched.error().message;
  Status half = start(pki.cert_file, "");
  ASSERT_FALSE(half);
  EXPECT_EQ(half.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(start(pki.cert_file, pki.key_file));
}

}  // namespace
}  // namespace gpupool::api
