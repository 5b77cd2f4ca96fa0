// Tests of the unix-socket HTTP client against a fake server in the test: the request it sends,
// the three body framings (chunked bodies arriving a byte at a time), streaming reads, interim
// responses, and every failure named: no socket, malformed or truncated answers, a body too
// long, a server that never answers (timeout) and cancellation from another thread.
#include "agent/runtime/unix_http.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpupool::agent {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return;  // the client went away
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// Serves one connection at a time on a unix socket: reads each request (headers and a
// Content-Length body) and hands it to `respond`, which writes the answer on the connection.
class FakeServer {
 public:
  using Respond = std::function<void(int fd, const std::string& request)>;

  explicit FakeServer(Respond respond) : respond_(std::move(respond)) {
    std::string tmpl = (fs::temp_directory_path() / "gpupool-http-XXXXXX").string();
    EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/api.sock";
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(listen_fd_, 8), 0);
    stop_fd_ = eventfd(0, EFD_CLOEXEC);
    thread_ = std::thread([this] { Serve(); });
  }

  ~FakeServer() {
    const uint64_t one = 1;
    EXPECT_EQ(write(stop_fd_, &one, sizeof one), 8);
    thread_.join();
    close(listen_fd_);
    close(stop_fd_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  const std::string& path() const { return path_; }
  std::vector<std::string> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  void Serve() {
    while (true) {
      pollfd pfds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
      if (poll(pfds, 2, -1) < 0 || pfds[1].revents) return;
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::string request;
      char buf[4096];
      size_t want = std::string::npos;
      while (want == std::string::npos || request.size() < want) {
        const ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
        const size_t end = request.find("\r\n\r\n");
        if (want == std::string::npos && end != std::string::npos) {
          size_t length = 0;
          const size_t cl = request.find("Content-Length: ");
          if (cl != std::string::npos && cl < end) length = std::stoul(request.substr(cl + 16));
          want = end + 4 + length;
        }
      }
      {
        std::lock_guard lock(mu_);
        requests_.push_back(request);
      }
      respond_(fd, request);
      close(fd);
    }
  }

  Respond respond_;
  std::string dir_, path_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;
  std::mutex mu_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

FakeServer::Respond Answer(std::string raw) {
  return [raw](int fd, const std::string&) { WriteAll(fd, raw); };
}

TEST(UnixHttp, SendsTheRequestAndReadsAContentLengthAnswer) {
  FakeServer server(
      Answer("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 12\r\n"
             "\r\n{\"Id\":\"abc\"}"));
  UnixHttpClient client(server.path());
  auto r = client.Call("POST", "/v1.41/containers/create?name=t-1", R"({"Image":"x"})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->headers["content-type"], "application/json");
  EXPECT_EQ(r->body, R"({"Id":"abc"})");
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  const std::string& q = requests[0];
  EXPECT_EQ(q.rfind("POST /v1.41/containers/create?name=t-1 HTTP/1.1\r\n", 0), 0u) << q;
  EXPECT_NE(q.find("\r\nContent-Type: application/json\r\n"), std::string::npos) << q;
  EXPECT_NE(q.find("\r\nContent-Length: 13\r\n"), std::string::npos) << q;
  EXPECT_NE(q.find("\r\nConnection: close\r\n"), std::string::npos) << q;
  EXPECT_EQ(q.substr(q.size() - 17), "\r\n\r\n{\"Image\":\"x\"}");
}

TEST(UnixHttp, DecodesAChunkedBodyArrivingAByteAtATime) {
  const std::string raw =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4\r\nWiki\r\n5;name=value\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nTrailer: x\r\n\r\n";
  FakeServer server([&](int fd, const std::string&) {
    for (char c : raw) WriteAll(fd, std::string_view(&c, 1));
  });
  auto r = UnixHttpClient(server.path()).Call("GET", "/logs");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "Wikipedia in\r\n\r\nchunks.");
}

TEST(UnixHttp, ReadsABodyUntilTheConnectionClosesAndSkipsInterimAnswers) {
  FakeServer server(
      Answer("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\nX-A:  b \r\n\r\nhello"));
  auto r = UnixHttpClient(server.path()).Call("GET", "/_ping");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers["x-a"], "b");
  EXPECT_EQ(r->body, "hello");
}

TEST(UnixHttp, NoContentHasNoBody) {
  FakeServer server(Answer("HTTP/1.1 204 No Content\r\n\r\n"));
  auto r = UnixHttpClient(server.path()).Call("POST", "/containers/x/start");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->body, "");
}

TEST(UnixHttp, StreamsABodyAsItComes) {
  std::promise<void> go;
  std::shared_future<void> go_future = go.get_future().share();
  FakeServer server([&](int fd, const std::string&) {
    WriteAll(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n");
    go_future.wait();
    WriteAll(fd, "6\r\nsecond\r\n0\r\n\r\n");
  });
  auto stream = UnixHttpClient(server.path()).Open("GET", "/containers/x/logs?follow=1");
  ASSERT_TRUE(stream) << stream.error().message;
  EXPECT_EQ((*stream)->status(), 200);
  char buf[64];
  auto n = (*stream)->Read(buf, sizeof buf, milliseconds(5000));
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(std::string(buf, *n), "first");
  // Nothing more until the server sends it: a short wait times out, naming the request.
  n = (*stream)->Read(buf, sizeof buf, milliseconds(50));
  ASSERT_FALSE(n);
  EXPECT_EQ(n.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(n.error().message.find("GET /containers/x/logs?follow=1 on " + server.path()),
            std::string::npos)
      << n.error().message;
  EXPECT_NE(n.error().message.find("timed out"), std::string::npos) << n.error().message;
  go.set_value();
  n = (*stream)->Read(buf, sizeof buf, milliseconds(-1));
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(std::string(buf, *n), "second");
  n = (*stream)->Read(buf, sizeof buf, milliseconds(-1));
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 0u);  // the end
}

TEST(UnixHttp, MalformedOrTruncatedAnswersAreErrorsNamingWhatIsWrong) {
  struct Case {
    std::string name;
    std::string raw;
    ErrorCode code;
    std::string mentions;
  };
  const std::vector<Case> cases = {
      {"nothing", "", ErrorCode::kUnavailable, "connection closed before a response"},
      {"cut headers", "HTTP/1.1 200 OK\r\nContent-Le", ErrorCode::kUnavailable,
       "connection closed inside the response headers"},
      {"bad status line", "HTTP/1.1 2x0 OK\r\n\r\n", ErrorCode::kInternal,
       "malformed status line 'HTTP/1.1 2x0 OK'"},
      {"not http", "SSH-2.0-OpenSSH\r\n\r\n", ErrorCode::kInternal, "malformed status line"},
      {"bad header", "HTTP/1.1 200 OK\r\nno colon\r\n\r\n", ErrorCode::kInternal,
       "malformed header line 'no colon'"},
      {"bad length", "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", ErrorCode::kInternal,
       "malformed Content-Length '1x'"},
      {"short body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", ErrorCode::kUnavailable,
       "connection closed before the end of the body (7 bytes missing)"},
      {"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n",
       ErrorCode::kInternal, "malformed chunk size line 'zz'"},
      {"chunk too long", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n",
       ErrorCode::kInternal, "chunk longer than its size line says"},
      {"cut chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nabc",
       ErrorCode::kUnavailable, "6 bytes of a chunk missing"},
      {"no last chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
       ErrorCode::kUnavailable, "connection closed inside the chunk size line"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FakeServer server(Answer(c.raw));
    auto r = UnixHttpClient(server.path()).Call("GET", "/version");
    ASSERT_FALSE(r) << r->body;
    EXPECT_EQ(r.error().code, c.code);
    EXPECT_NE(r.error().message.find(c.mentions), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("GET /version on " + server.path()), std::string::npos)
        << r.error().message;
  }
}

TEST(UnixHttp, RefusesABodyLongerThanItsLimit) {
  FakeServer server(
      Answer("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'x')));
  UnixHttpOptions o;
  o.max_body = 64;
  auto r = UnixHttpClient(server.path(), o).Call("GET", "/images/json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(r.error().message.find("longer than 64 bytes"), std::string::npos) << r.error().message;
}

TEST(UnixHttp, NoServerIsUnavailableNamingTheSocket) {
  const std::string path = (fs::temp_directory_path() / "gpupool-no-such-dir/docker.sock").string();
  auto r = UnixHttpClient(path).Call("GET", "/_ping");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("GET /_ping on " + path + ": connect: "), std::string::npos)
      << r.error().message;

  auto long_path = UnixHttpClient(std::string(200, 'a')).Call("GET", "/_ping");
  ASSERT_FALSE(long_path);
  EXPECT_EQ(long_path.error().code, ErrorCode::kInvalidArgument);
}

TEST(UnixHttp, AServerThatNeverAnswersTimesOut) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  FakeServer server([&](int, const std::string&) { released.wait(); });
  UnixHttpOptions o;
  o.timeout = milliseconds(100);
  const auto start = std::chrono::steady_clock::now();
  auto r = UnixHttpClient(server.path(), o).Call("GET", "/containers/json");
  const auto took = std::chrono::steady_clock::now() - start;
  release.set_value();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("timed out"), std::string::npos) << r.error().message;
  EXPECT_GE(took, milliseconds(90));  // the deadline counts whole milliseconds
  EXPECT_LT(took, milliseconds(5000));
}

TEST(UnixHttp, ACancelledCallEndsAtOnce) {
  std::promise<void> got_request;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  FakeServer server([&](int, const std::string&) {
    got_request.set_value();
    released.wait();
  });
  const int cancel = eventfd(0, EFD_CLOEXEC);
  UnixHttpOptions o;
  o.timeout = milliseconds(-1);  // only cancellation ends it
  o.cancel_fd = cancel;
  std::thread canceller([&] {
    got_request.get_future().wait();
    const uint64_t one = 1;
    EXPECT_EQ(write(cancel, &one, sizeof one), 8);
  });
  auto r = UnixHttpClient(server.path(), o).Call("GET", "/containers/x/wait");
  canceller.join();
  release.set_value();
  close(cancel);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("cancelled"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace gpupool::agent
