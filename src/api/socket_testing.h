// What the tests of the HTTP server and of a real server process share to look below the client:
// a blocking loopback socket (raw requests, responses read as they arrive, from another loopback
// address if asked), a signed GET as raw text, and the Server-Sent Events of a streamed answer
// (GET /v1/events) read off it.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "api/signing.h"
#include "core/result.h"

namespace gpupool::api::testing {

// A blocking TCP socket to the server, for what the client would hide.
class RawSocket {
 public:
  // `receive_buffer` > 0: SO_RCVBUF, set before connecting (a small window for a slow reader).
  // `from`: the loopback address to connect from (another peer than 127.0.0.1, e.g. 127.0.0.2).
  explicit RawSocket(uint16_t port, int receive_buffer = 0, const char* from = nullptr) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (receive_buffer > 0) {
      setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    if (from != nullptr) {
      sockaddr_in local{};
      local.sin_family = AF_INET;
      inet_pton(AF_INET, from, &local.sin_addr);
      if (bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) return;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval tv{10, 0};  // a failing test must not hang
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawSocket() { close(fd_); }
  bool connected() const { return connected_; }

  void Write(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  // The next complete response (head and Content-Length body), or nullopt on EOF or timeout.
  std::optional<std::string> ReadResponse() {
    while (true) {
      const size_t head_end = buffer_.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        size_t length = 0;
        const size_t cl = buffer_.find("Content-Length: ");
        if (cl != std::string::npos && cl < head_end) length = std::stoul(buffer_.substr(cl + 16));
        if (buffer_.size() >= head_end + 4 + length) {
          std::string response = buffer_.substr(0, head_end + 4 + length);
          buffer_.erase(0, head_end + 4 + length);
          return response;
        }
      }
      char chunk[4096];
      const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  // What arrived up to and including the first `needle` (removed from what is buffered), or
  // nullopt on EOF or timeout first.
  std::optional<std::string> ReadUntil(const std::string& needle) {
    while (true) {
      if (const size_t at = buffer_.find(needle); at != std::string::npos) {
        std::string out = buffer_.substr(0, at + needle.size());
        buffer_.erase(0, at + needle.size());
        return out;
      }
      char chunk[4096];
      const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  // Everything until the server closes; nullopt on a timeout first.
  std::optional<std::string> ReadToEof() {
    while (true) {
      char chunk[65536];
      const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
      if (n == 0) return std::exchange(buffer_, {});
      if (n < 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  // True when the server closed the connection (EOF) before the receive timeout.
  bool ReadsEof() {
    char c;
    return recv(fd_, &c, 1, 0) == 0;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

// A signed GET of `target` as raw text (a stream never ends: the client would wait for it).
inline std::string SignedGet(const std::string& target, const std::string& key,
                             const std::string& secret) {
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  Result<std::string> auth = SignRequest(key, secret, "GET", target, "", now, NewNonce());
  EXPECT_TRUE(auth) << auth.error().message;
  return "GET " + target + " HTTP/1.1\r\nHost: test\r\nAuthorization: " + auth.value_or("") +
         "\r\n\r\n";
}

struct StreamEvent {
  std::string name;
  std::string data;  // one line of JSON
};

// The next Server-Sent Event off a chunked stream (each event is within one chunk: the chunk
// framing around it is skipped); nullopt at the end or on a timeout.
inline std::optional<StreamEvent> NextEvent(RawSocket& sock) {
  while (true) {
    std::optional<std::string> piece = sock.ReadUntil("\n\n");
    if (!piece) return std::nullopt;
    const size_t event = piece->rfind("event: ");
    if (event == std::string::npos) continue;  // a comment (keep-alive)
    const size_t data = piece->find("\ndata: ", event);
    EXPECT_NE(data, std::string::npos) << *piece;
    if (data == std::string::npos) return std::nullopt;
    const std::string line = piece->substr(data + 7, piece->size() - 2 - (data + 7));
    EXPECT_EQ(line.find('\n'), std::string::npos) << "one line of JSON";
    return StreamEvent{piece->substr(event + 7, data - event - 7), line};
  }
}

}  // namespace gpupool::api::testing
