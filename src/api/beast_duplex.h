// The Duplex (duplex.h) over a Boost.Beast connection — a WebSocket of binary messages or raw
// bytes, over plain TCP or TLS (beast_stream.h) — shared by the two Beast translation units: the
// HTTP server's handed-over connections (http_server.cc) and the client's dialed ones (client.cc).
// Private to them: include it nowhere else. Every call of the Duplex interface is posted to the
// connection's strand; the handlers run there. Sends made before the socket is attached (a server's
// WebSocket waiting for the responses pipelined ahead of it) wait in the outbox.
#pragma once

#include <algorithm>
#include <atomic>
#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/beast_stream.h"
#include "api/duplex.h"

namespace gpupool::api::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using Strand = asio::strand<asio::io_context::executor_type>;

// A WebSocket's largest message (the tunnel's frames are at most 64 KiB and a header).
inline constexpr size_t kMaxWebSocketMessage = 1 << 20;
// What a raw connection reads at most at once.
inline constexpr size_t kRawReadBytes = 64 * 1024;
// A WebSocket's write buffer: a whole tunnel message (64 KiB of DATA and its header) at once.
inline constexpr size_t kWriteBufferBytes = 80 * 1024;

// Handshake and idle limits of every WebSocket: a quiet one is pinged at half the idle time and
// closed when the peer does not answer.
inline websocket::stream_base::timeout WebSocketTimeouts() {
  websocket::stream_base::timeout timeouts{};
  timeouts.handshake_timeout = std::chrono::seconds(30);
  timeouts.idle_timeout = std::chrono::seconds(30);
  timeouts.keep_alive_pings = true;
  return timeouts;
}

class BeastDuplex final : public Duplex, public std::enable_shared_from_this<BeastDuplex> {
 public:
  using Headers = std::vector<std::pair<std::string, std::string>>;

  explicit BeastDuplex(Strand strand) : strand_(std::move(strand)) {}

  // --- Duplex (any thread) ---
  void Start(DuplexHandlers handlers) override {
    Post([h = std::move(handlers)](BeastDuplex& d) mutable { d.DoStart(std::move(h)); });
  }
  bool Send(std::string data) override {
    if (done_flag_.load() || end_flag_.load()) return false;
    Post([data = std::move(data)](BeastDuplex& d) mutable { d.DoSend(std::move(data)); });
    return true;
  }
  void Resume() override {
    Post([](BeastDuplex& d) { d.DoResume(); });
  }
  void End() override {
    end_flag_.store(true);
    Post([](BeastDuplex& d) { d.DoEnd(); });
  }
  void Close(std::string why) override {
    Post([why = std::move(why)](BeastDuplex& d) mutable { d.Fail(std::move(why)); });
  }

  // --- attaching a connection (on the strand) ---

  // Raw bytes; `first`: what was read past the request already.
  void AttachRaw(Stream stream, std::string first) {
    if (done_) return stream.Close();
    raw_.emplace(std::move(stream));
    beast::error_code ignored;
    raw_->socket().non_blocking(true, ignored);
    first_ = std::move(first);
    Opened();
  }

  // The server's side of a WebSocket handshake (`request`), with `headers` on its 101.
  void AcceptWebSocket(Stream stream,
                       std::shared_ptr<beast::http::request<beast::http::string_body>> request,
                       Headers headers) {
    if (done_) return stream.Close();
    ws_.emplace(std::move(stream));
    Configure();
    ws_->set_option(websocket::stream_base::decorator(
        [headers = std::move(headers)](websocket::response_type& response) {
          for (const auto& [name, value] : headers) {
            // A line break in a header would split the response.
            if (name.find_first_of("\r\n:") == std::string::npos &&
                value.find_first_of("\r\n") == std::string::npos) {
              response.set(name, value);
            }
          }
        }));
    ws_->async_accept(*request, [self = shared_from_this(), request](beast::error_code ec) {
      if (self->done_) return;
      if (ec) return self->Fail("the WebSocket handshake failed: " + ec.message());
      self->Opened();
    });
  }

  // A client's WebSocket whose handshake is done; `text`: its messages are text, not binary.
  void AttachWebSocket(websocket::stream<Stream> ws, bool text) {
    ws_.emplace(std::move(ws));
    Configure();
    ws_->text(text);
    Opened();
  }

  // Closes now (the server stops, the connection is gone before it was attached).
  void Abort(std::string why) { Fail(std::move(why)); }

  // Keeps `seat` (the server's count of the connection) until the socket closes. On the strand.
  void Hold(std::shared_ptr<void> seat) {
    if (!done_) seat_ = std::move(seat);
  }

 private:
  template <typename F>
  void Post(F f) {
    asio::post(strand_, [self = shared_from_this(), f = std::move(f)]() mutable { f(*self); });
  }

  void Configure() {
    ws_->read_message_max(kMaxWebSocketMessage);
    ws_->binary(true);
    ws_->set_option(WebSocketTimeouts());
    // A message goes as one frame, and a client's (masked, so copied) in one write: Beast's
    // default 4 KiB buffer made sixteen system calls of each 64 KiB tunnel message.
    ws_->auto_fragment(false);
    ws_->write_buffer_bytes(kWriteBufferBytes);
  }

  void Opened() {
    open_ = true;
    Read();
    Write();
  }

  void DoStart(DuplexHandlers handlers) {
    if (done_) {
      if (handlers.on_closed) handlers.on_closed(why_);
      return;
    }
    handlers_ = std::move(handlers);
    started_ = true;
    Read();
  }

  void DoSend(std::string data) {
    if (done_ || end_asked_) return;
    outbox_.push_back(std::move(data));
    Write();
  }

  void DoResume() {
    if (!paused_) {
      resume_asked_ = true;  // on_data's "pause" crossed this resume
      return;
    }
    paused_ = false;
    Read();
  }

  void DoEnd() {
    end_asked_ = true;
    Write();
  }

  void Read() {
    if (!open_ || !started_ || done_ || paused_ || reading_ || peer_ended_) return;
    if (!first_.empty()) {
      std::string first = std::move(first_);
      first_.clear();
      return Delivered(std::move(first));
    }
    reading_ = true;
    if (ws_) {
      ws_->async_read(buffer_, [self = shared_from_this()](beast::error_code ec, size_t) {
        self->reading_ = false;
        if (self->done_) return;
        if (ec == websocket::error::closed) return self->PeerEnded();
        if (ec) return self->Fail("the WebSocket broke: " + ec.message());
        std::string message = beast::buffers_to_string(self->buffer_.data());
        self->buffer_.consume(self->buffer_.size());
        self->Delivered(std::move(message));
      });
      return;
    }
    if (raw_->is_tls()) {
      // TLS: what arrives must pass through the session, so the read holds a buffer.
      raw_in_.resize(kRawReadBytes);
      raw_->async_read_some(asio::buffer(raw_in_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->reading_ = false;
                              if (self->done_) return;
                              if (ec == asio::error::eof || ec == ssl::error::stream_truncated) {
                                return self->PeerEnded();
                              }
                              if (ec)
                                return self->Fail("the connection broke: " + TlsErrorText(ec));
                              std::string data = std::move(self->raw_in_);
                              self->raw_in_.clear();
                              data.resize(n);
                              self->Delivered(std::move(data));
                            });
      return;
    }
    // Raw: wait until there is something, then read what is there (so an idle connection holds
    // no buffer).
    raw_->socket().async_wait(
        tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
          self->reading_ = false;
          if (self->done_) return;
          if (ec) return self->Fail("the connection broke: " + ec.message());
          tcp::socket& socket = self->raw_->socket();
          beast::error_code available_ec;
          const size_t available = socket.available(available_ec);
          std::string data(std::clamp<size_t>(available, 1, kRawReadBytes), '\0');
          beast::error_code read_ec;
          const size_t n = socket.read_some(asio::buffer(data), read_ec);
          if (read_ec == asio::error::eof) return self->PeerEnded();
          if (read_ec == asio::error::would_block || read_ec == asio::error::try_again) {
            return self->Read();
          }
          if (read_ec) return self->Fail("the connection broke: " + read_ec.message());
          data.resize(n);
          self->Delivered(std::move(data));
        });
  }

  void Delivered(std::string data) {
    const bool more = handlers_.on_data(std::move(data));
    if (done_) return;
    if (!more && !resume_asked_) {
      paused_ = true;
      return;
    }
    resume_asked_ = false;
    Read();
  }

  void PeerEnded() {
    peer_ended_ = true;
    if (handlers_.on_end) handlers_.on_end();
    // A WebSocket's close handshake ends both directions.
    if (end_done_ || ws_) Finish("");
  }

  void Write() {
    if (!open_ || done_ || writing_ || end_done_) return;
    if (outbox_.empty()) {
      if (!end_asked_) return;
      end_done_ = true;
      if (raw_) {
        // TLS has no half-close that leaves the other direction readable: the end is the
        // connection's, once what was sent is written.
        if (raw_->is_tls()) return Finish("");
        beast::error_code ignored;
        raw_->socket().shutdown(tcp::socket::shutdown_send, ignored);
        if (peer_ended_) Finish("");
        return;
      }
      writing_ = true;
      ws_->async_close(websocket::close_code::normal,
                       [self = shared_from_this()](beast::error_code ec) {
                         self->writing_ = false;
                         if (self->done_) return;
                         if (ec) return self->Fail("closing the WebSocket failed: " + ec.message());
                         if (self->peer_ended_) self->Finish("");
                       });
      return;
    }
    out_ = std::move(outbox_.front());
    outbox_.pop_front();
    writing_ = true;
    auto done = [self = shared_from_this()](beast::error_code ec, size_t) {
      self->writing_ = false;
      if (self->done_) return;
      if (ec) return self->Fail("writing to the connection failed: " + ec.message());
      const size_t n = self->out_.size();
      self->out_.clear();
      if (self->handlers_.on_sent) self->handlers_.on_sent(n);
      self->Write();
    };
    if (ws_) {
      ws_->async_write(asio::buffer(out_), std::move(done));
    } else {
      asio::async_write(*raw_, asio::buffer(out_), std::move(done));
    }
  }

  void Fail(std::string why) { Finish(why.empty() ? "closed" : std::move(why)); }

  // Closes the socket and tells the user, once (`why` empty: both directions ended cleanly),
  // then lets go of its handlers (which may hold what holds this duplex).
  void Finish(std::string why) {
    if (done_) return;
    done_ = true;
    done_flag_.store(true);
    why_ = why.empty() ? "closed" : why;
    if (ws_) ws_->next_layer().Close();
    if (raw_) raw_->Close();
    outbox_.clear();
    seat_.reset();
    DuplexHandlers handlers = std::move(handlers_);
    handlers_ = {};
    if (started_ && handlers.on_closed) handlers.on_closed(std::move(why));
  }

  Strand strand_;
  std::optional<Stream> raw_;
  std::optional<websocket::stream<Stream>> ws_;
  std::string raw_in_;  // raw over TLS: the read under way
  beast::flat_buffer buffer_;
  DuplexHandlers handlers_;
  std::deque<std::string> outbox_;  // sends not yet written
  std::string out_;                 // the one being written
  std::string first_;               // raw: bytes read before the hand-over
  std::string why_;
  std::shared_ptr<void> seat_;  // Hold
  std::atomic<bool> done_flag_{false};
  std::atomic<bool> end_flag_{false};
  bool open_ = false;     // attached (a WebSocket's handshake done)
  bool started_ = false;  // the user's Start came
  bool reading_ = false;
  bool writing_ = false;
  bool done_ = false;
  bool paused_ = false;
  bool resume_asked_ = false;
  bool end_asked_ = false;
  bool end_done_ = false;
  bool peer_ended_ = false;
};

}  // namespace gpupool::api::detail
