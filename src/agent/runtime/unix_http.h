// A small HTTP/1.1 client over a unix socket, what the Docker Engine API speaks: one connection
// per request (Connection: close), bodies of any content type, responses framed by
// Content-Length, chunked transfer coding or the end of the connection, a streaming body reader
// (followed logs), deadlines, and cancellation from another thread through a descriptor.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "core/result.h"
#include "core/unique_fd.h"

namespace gpupool::agent {

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

struct UnixHttpOptions {
  // Connecting, sending the request and receiving the response headers; for Call also the body.
  std::chrono::milliseconds timeout{30'000};
  // When readable, every wait ends at once with kUnavailable "cancelled" (an eventfd the owner
  // writes when shutting down). -1: none.
  int cancel_fd = -1;
  size_t max_body = size_t{64} << 20;  // Call and ReadAll refuse a longer body
};

// The body of a response being received. Not thread-safe; one reader.
class HttpBodyStream {
 public:
  ~HttpBodyStream();
  HttpBodyStream(const HttpBodyStream&) = delete;
  HttpBodyStream& operator=(const HttpBodyStream&) = delete;

  int status() const { return status_; }
  const std::map<std::string, std::string>& headers() const { return headers_; }

  // Up to `size` bytes of the (de-chunked) body, waiting at most `timeout` for some (negative:
  // no limit, only cancellation). 0: the body is complete. Errors: kUnavailable (timeout,
  // cancelled, connection lost before the body's end), kInternal (malformed framing).
  Result<size_t> Read(char* out, size_t size, std::chrono::milliseconds timeout);
  // The rest of the body, each wait at most `timeout`; refused beyond max_body bytes.
  Result<std::string> ReadAll(std::chrono::milliseconds timeout);
  // After a 101 Switching Protocols (UnixHttpClient::Upgrade): the connection itself, blocking,
  // and what of it already arrived. The stream is then empty.
  std::pair<UniqueFd, std::string> TakeConnection();

 private:
  friend class UnixHttpClient;
  enum class Framing { kLength, kChunked, kUntilClose };
  enum class ChunkState { kSize, kData, kDataEnd, kTrailers, kDone };

  HttpBodyStream(int fd, std::string what, const UnixHttpOptions& options);
  // Reads more raw bytes into buffer_; false at the end of the connection.
  Result<bool> Fill(int64_t deadline_mono_ms);
  // Takes one CRLF-terminated line from buffer_ (waiting for it), without the CRLF.
  Result<std::string> Line(int64_t deadline_mono_ms, std::string_view what);
  Status ReadHeaders(int64_t deadline_mono_ms, bool head_request, bool upgrade = false);
  tl::unexpected<Error> Fail(ErrorCode code, const std::string& message) const;

  int fd_ = -1;
  std::string what_;  // "GET /v1.41/_ping on /var/run/docker.sock": for errors
  UnixHttpOptions options_;
  int status_ = 0;
  std::map<std::string, std::string> headers_;
  std::string buffer_;  // received, not yet consumed
  Framing framing_ = Framing::kUntilClose;
  int64_t remaining_ = 0;  // kLength: body bytes left; kChunked: bytes left of this chunk
  ChunkState chunk_ = ChunkState::kSize;
  bool done_ = false;
};

class UnixHttpClient {
 public:
  explicit UnixHttpClient(std::string socket_path, UnixHttpOptions options = {});

  // The whole exchange. A non-2xx status is not an error here: the caller reads it.
  Result<HttpResponse> Call(std::string_view method, const std::string& target,
                            std::string_view body = {},
                            std::string_view content_type = "application/json") const;
  // Sends the request and returns once the response headers are in; the body is read from the
  // stream as it comes.
  Result<std::unique_ptr<HttpBodyStream>> Open(
      std::string_view method, const std::string& target, std::string_view body = {},
      std::string_view content_type = "application/json") const;

  // Open, the body the `size` bytes of file `fd` from its start, sent as they are read (an image
  // archive: never whole in memory). The timeout covers sending them too.
  Result<std::unique_ptr<HttpBodyStream>> OpenWithFile(
      std::string_view method, const std::string& target, int fd, int64_t size,
      std::string_view content_type = "application/x-tar") const;

  // A request that asks to take the connection over (Connection: Upgrade, Upgrade: tcp: what
  // Docker's exec and attach answer with 101 and then a raw stream). A status other than 101
  // comes back with its body readable as usual.
  Result<std::unique_ptr<HttpBodyStream>> Upgrade(
      std::string_view method, const std::string& target, std::string_view body = {},
      std::string_view content_type = "application/json") const;

  const UnixHttpOptions& options() const { return options_; }

 private:
  Result<std::unique_ptr<HttpBodyStream>> Send(std::string_view method, const std::string& target,
                                               std::string_view body, std::string_view content_type,
                                               bool upgrade, int body_fd = -1,
                                               int64_t body_size = 0) const;

  std::string socket_path_;
  UnixHttpOptions options_;
};

}  // namespace gpupool::agent
