// Implementation of unix_http.h: POSIX sockets and poll(2), the response's status line and
// headers, and the body's three framings (Content-Length, chunked, until close).
#include "agent/runtime/unix_http.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <utility>

#include "agent/runtime/linux_proc.h"

namespace gpupool::agent {

namespace {

constexpr size_t kMaxHeaderBytes = 64 << 10;
constexpr size_t kMaxLineBytes = 8 << 10;  // a chunk size or trailer line
constexpr size_t kReadBytes = 64 << 10;

int64_t Deadline(std::chrono::milliseconds timeout) {
  return timeout.count() < 0 ? -1 : MonotonicMs() + timeout.count();
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

// Waits until `fd` is ready for `events`, the deadline passes (-1: none) or `cancel_fd` becomes
// readable. The error says which.
Status WaitFor(int fd, short events, int64_t deadline, int cancel_fd, const std::string& what) {
  while (true) {
    int timeout = -1;
    if (deadline >= 0) timeout = static_cast<int>(std::max<int64_t>(0, deadline - MonotonicMs()));
    pollfd pfds[2] = {{fd, events, 0}, {cancel_fd, POLLIN, 0}};
    const int n = poll(pfds, cancel_fd >= 0 ? 2 : 1, timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      return MakeError(ErrorCode::kInternal, what + ": poll: " + ErrnoText(errno));
    }
    if (cancel_fd >= 0 && pfds[1].revents) {
      return MakeError(ErrorCode::kUnavailable, what + ": cancelled");
    }
    if (n > 0 && pfds[0].revents) return {};
    if (deadline >= 0 && MonotonicMs() >= deadline) {
      return MakeError(ErrorCode::kUnavailable, what + ": timed out");
    }
  }
}

}  // namespace

// ---- the body stream ----

HttpBodyStream::HttpBodyStream(int fd, std::string what, const UnixHttpOptions& options)
    : fd_(fd), what_(std::move(what)), options_(options) {}

HttpBodyStream::~HttpBodyStream() {
  if (fd_ >= 0) close(fd_);
}

tl::unexpected<Error> HttpBodyStream::Fail(ErrorCode code, const std::string& message) const {
  return MakeError(code, what_ + ": " + message);
}

Result<bool> HttpBodyStream::Fill(int64_t deadline) {
  char chunk[kReadBytes];
  while (true) {
    const ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
      return true;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return Fail(ErrorCode::kUnavailable, "receiving: " + ErrnoText(errno));
    }
    if (Status st = WaitFor(fd_, POLLIN, deadline, options_.cancel_fd, what_); !st) {
      return tl::unexpected(st.error());
    }
  }
}

Result<std::string> HttpBodyStream::Line(int64_t deadline, std::string_view what) {
  while (true) {
    const size_t end = buffer_.find("\r\n");
    if (end != std::string::npos) {
      std::string line = buffer_.substr(0, end);
      buffer_.erase(0, end + 2);
      return line;
    }
    if (buffer_.size() > kMaxLineBytes) {
      return Fail(ErrorCode::kInternal,
                  std::string(what) + " longer than " + std::to_string(kMaxLineBytes) + " bytes");
    }
    auto more = Fill(deadline);
    if (!more) return tl::unexpected(more.error());
    if (!*more) {
      return Fail(ErrorCode::kUnavailable, "connection closed inside the " + std::string(what));
    }
  }
}

Status HttpBodyStream::ReadHeaders(int64_t deadline, bool head_request, bool upgrade) {
  while (true) {
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (buffer_.size() > kMaxHeaderBytes) {
        return Fail(ErrorCode::kInternal,
                    "response headers longer than " + std::to_string(kMaxHeaderBytes) + " bytes");
      }
      auto more = Fill(deadline);
      if (!more) return tl::unexpected(more.error());
      if (!*more) {
        return Fail(ErrorCode::kUnavailable, buffer_.empty()
                                                 ? "connection closed before a response"
                                                 : "connection closed inside the response headers");
      }
    }
    const std::string head = buffer_.substr(0, end);
    buffer_.erase(0, end + 4);
    size_t line_end = head.find("\r\n");
    const std::string status_line = head.substr(0, line_end);
    // "HTTP/1.1 200 OK"
    if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12 || status_line[8] != ' ' ||
        !std::isdigit(static_cast<unsigned char>(status_line[9])) ||
        !std::isdigit(static_cast<unsigned char>(status_line[10])) ||
        !std::isdigit(static_cast<unsigned char>(status_line[11]))) {
      return Fail(ErrorCode::kInternal, "malformed status line '" + status_line + "'");
    }
    status_ = std::stoi(status_line.substr(9, 3));
    headers_.clear();
    while (line_end != std::string::npos) {
      const size_t start = line_end + 2;
      line_end = head.find("\r\n", start);
      const std::string line = head.substr(start, line_end - start);
      const size_t colon = line.find(':');
      if (colon == std::string::npos || colon == 0) {
        return Fail(ErrorCode::kInternal, "malformed header line '" + line + "'");
      }
      headers_[Lower(line.substr(0, colon))] = Trim(std::string_view(line).substr(colon + 1));
    }
    if (upgrade && status_ == 101) {  // the connection is the caller's from here on
      done_ = true;
      return {};
    }
    if (status_ >= 100 && status_ < 200) continue;  // interim (100 Continue): the next one counts
    break;
  }

  const auto te = headers_.find("transfer-encoding");
  const auto cl = headers_.find("content-length");
  if (head_request || status_ == 204 || status_ == 304) {
    done_ = true;
  } else if (te != headers_.end() && Lower(te->second).find("chunked") != std::string::npos) {
    framing_ = Framing::kChunked;
  } else if (cl != headers_.end()) {
    const std::string& v = cl->second;
    if (v.empty() || v.size() > 18 ||
        !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return Fail(ErrorCode::kInternal, "malformed Content-Length '" + v + "'");
    }
    framing_ = Framing::kLength;
    remaining_ = std::stoll(v);
    done_ = remaining_ == 0;
  } else {
    framing_ = Framing::kUntilClose;
  }
  return {};
}

Result<size_t> HttpBodyStream::Read(char* out, size_t size, std::chrono::milliseconds timeout) {
  const int64_t deadline = Deadline(timeout);
  // Bytes of the body now in buffer_ (at most `limit`) to the caller.
  auto take = [&](size_t limit) {
    const size_t n = std::min({size, limit, buffer_.size()});
    std::memcpy(out, buffer_.data(), n);
    buffer_.erase(0, n);
    return n;
  };
  while (!done_ && size > 0) {
    if (framing_ == Framing::kChunked && chunk_ != ChunkState::kData) {
      if (chunk_ == ChunkState::kSize) {
        auto line = Line(deadline, "chunk size line");
        if (!line) return tl::unexpected(line.error());
        const std::string hex = Trim(std::string_view(*line).substr(0, line->find(';')));
        if (hex.empty() || hex.size() > 15 || !std::all_of(hex.begin(), hex.end(), [](char c) {
              return std::isxdigit(static_cast<unsigned char>(c));
            })) {
          return Fail(ErrorCode::kInternal, "malformed chunk size line '" + *line + "'");
        }
        remaining_ = std::stoll(hex, nullptr, 16);
        chunk_ = remaining_ == 0 ? ChunkState::kTrailers : ChunkState::kData;
      } else if (chunk_ == ChunkState::kDataEnd) {
        auto line = Line(deadline, "end of a chunk");
        if (!line) return tl::unexpected(line.error());
        if (!line->empty()) {
          return Fail(ErrorCode::kInternal, "chunk longer than its size line says");
        }
        chunk_ = ChunkState::kSize;
      } else {  // kTrailers: ignored up to the empty line
        auto line = Line(deadline, "trailer");
        if (!line) return tl::unexpected(line.error());
        if (line->empty()) {
          chunk_ = ChunkState::kDone;
          done_ = true;
        }
      }
      continue;
    }
    if (buffer_.empty()) {
      auto more = Fill(deadline);
      if (!more) return tl::unexpected(more.error());
      if (!*more) {
        if (framing_ == Framing::kUntilClose) {
          done_ = true;
          break;
        }
        return Fail(ErrorCode::kUnavailable,
                    "connection closed before the end of the body (" + std::to_string(remaining_) +
                        (framing_ == Framing::kLength ? " bytes missing)"
                                                      : " bytes of a chunk "
                                                        "missing)"));
      }
    }
    if (framing_ == Framing::kUntilClose) return take(buffer_.size());
    const size_t n = take(static_cast<size_t>(remaining_));
    remaining_ -= static_cast<int64_t>(n);
    if (remaining_ == 0) {
      if (framing_ == Framing::kLength) {
        done_ = true;
      } else {
        chunk_ = ChunkState::kDataEnd;
      }
    }
    return n;
  }
  return size_t{0};
}

Result<std::string> HttpBodyStream::ReadAll(std::chrono::milliseconds timeout) {
  const int64_t deadline = Deadline(timeout);
  std::string body;
  char chunk[kReadBytes];
  while (true) {
    const int64_t left = deadline < 0 ? -1 : std::max<int64_t>(0, deadline - MonotonicMs());
    auto n = Read(chunk, sizeof chunk, std::chrono::milliseconds(left));
    if (!n) return tl::unexpected(n.error());
    if (*n == 0) return body;
    if (body.size() + *n > options_.max_body) {
      return Fail(ErrorCode::kResourceExhausted,
                  "response body longer than " + std::to_string(options_.max_body) + " bytes");
    }
    body.append(chunk, *n);
  }
}

// ---- the client ----

UnixHttpClient::UnixHttpClient(std::string socket_path, UnixHttpOptions options)
    : socket_path_(std::move(socket_path)), options_(options) {}

std::pair<UniqueFd, std::string> HttpBodyStream::TakeConnection() {
  UniqueFd fd(std::exchange(fd_, -1));
  if (fd.ok()) fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  return {std::move(fd), std::exchange(buffer_, std::string())};
}

Result<std::unique_ptr<HttpBodyStream>> UnixHttpClient::Open(std::string_view method,
                                                             const std::string& target,
                                                             std::string_view body,
                                                             std::string_view content_type) const {
  return Send(method, target, body, content_type, false);
}

Result<std::unique_ptr<HttpBodyStream>> UnixHttpClient::OpenWithFile(
    std::string_view method, const std::string& target, int fd, int64_t size,
    std::string_view content_type) const {
  return Send(method, target, {}, content_type, false, fd, size);
}

Result<std::unique_ptr<HttpBodyStream>> UnixHttpClient::Upgrade(
    std::string_view method, const std::string& target, std::string_view body,
    std::string_view content_type) const {
  return Send(method, target, body, content_type, true);
}

Result<std::unique_ptr<HttpBodyStream>> UnixHttpClient::Send(
    std::string_view method, const std::string& target, std::string_view body,
    std::string_view content_type, bool upgrade, int body_fd, int64_t body_size) const {
  const int64_t deadline = Deadline(options_.timeout);
  const std::string what = std::string(method) + " " + target + " on " + socket_path_;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path_.empty() || socket_path_.size() >= sizeof addr.sun_path) {
    return MakeError(ErrorCode::kInvalidArgument, what + ": the socket path must be 1.." +
                                                      std::to_string(sizeof addr.sun_path - 1) +
                                                      " characters");
  }
  std::memcpy(addr.sun_path, socket_path_.data(), socket_path_.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return MakeError(ErrorCode::kInternal, what + ": socket: " + ErrnoText(errno));
  // Owns fd from here on.
  std::unique_ptr<HttpBodyStream> stream(new HttpBodyStream(fd, what, options_));
  // A unix connect does not wait for the server (it fails with EAGAIN on a full backlog).
  int rc;
  do {
    rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    return MakeError(ErrorCode::kUnavailable, what + ": connect: " + ErrnoText(errno));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);

  std::string request =
      std::string(method) + " " + target +
      " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: gpupool-agent\r\n" +
      (upgrade ? "Connection: Upgrade\r\nUpgrade: tcp\r\n" : "Connection: close\r\n");
  const int64_t length = static_cast<int64_t>(body.size()) + (body_fd >= 0 ? body_size : 0);
  if (length > 0 || method == "POST" || method == "PUT") {
    request += "Content-Type: " + std::string(content_type) + "\r\n";
    request += "Content-Length: " + std::to_string(length) + "\r\n";
  }
  request += "\r\n";
  request.append(body);
  auto send_all = [&](std::string_view data) -> Status {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (Status st = WaitFor(fd, POLLOUT, deadline, options_.cancel_fd, what); !st) return st;
        continue;
      }
      return MakeError(ErrorCode::kUnavailable, what + ": sending: " + ErrnoText(errno));
    }
    return {};
  };
  if (Status st = send_all(request); !st) return tl::unexpected(st.error());
  if (body_fd >= 0) {
    constexpr size_t kPiece = 1 << 20;
    std::string piece(static_cast<size_t>(std::min<int64_t>(body_size, kPiece)), '\0');
    for (int64_t at = 0; at < body_size;) {
      const ssize_t n = pread(body_fd, piece.data(),
                              static_cast<size_t>(std::min<int64_t>(body_size - at, kPiece)), at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return MakeError(ErrorCode::kInternal, what + ": reading the body: " +
                                                   (n == 0 ? "it ended early" : ErrnoText(errno)));
      }
      if (Status st = send_all(std::string_view(piece.data(), static_cast<size_t>(n))); !st) {
        return tl::unexpected(st.error());
      }
      at += n;
    }
  }
  if (Status st = stream->ReadHeaders(deadline, method == "HEAD", upgrade); !st) {
    return tl::unexpected(st.error());
  }
  return stream;
}

Result<HttpResponse> UnixHttpClient::Call(std::string_view method, const std::string& target,
                                          std::string_view body,
                                          std::string_view content_type) const {
  const int64_t started = MonotonicMs();
  auto stream = Open(method, target, body, content_type);
  if (!stream) return tl::unexpected(stream.error());
  const int64_t left =
      options_.timeout.count() < 0
          ? -1
          : std::max<int64_t>(0, options_.timeout.count() - (MonotonicMs() - started));
  auto text = (*stream)->ReadAll(std::chrono::milliseconds(left));
  if (!text) return tl::unexpected(text.error());
  return HttpResponse{(*stream)->status(), (*stream)->headers(), std::move(*text)};
}

}  // namespace gpupool::agent
