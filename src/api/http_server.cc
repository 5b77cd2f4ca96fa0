// The Boost.Beast HTTP/1.1 server (see http_server.h). One io_context run by N threads; each
// connection on its own strand reads requests ahead (pipelining), hands them to the handler and
// writes the responses in request order as they become ready. A streamed response (OpenStream)
// is the connection's last: its head, then chunks as the producer queues them, then the end. A
// connection handed over (a WebSocket after its handshake, or raw bytes for the gateway) leaves
// HTTP for good: its socket goes to a BeastDuplex (beast_duplex.h) on the same strand. Each
// connection holds a Seat in the Limits from its accept until its socket closes (the duplex
// holds it after a hand-over); a connection the limits refuse is answered 503 and closed at once.
// With TLS every connection is a BasicStream (beast_stream.h) that shakes hands before its first
// request is read.
#include "api/http_server.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/buffer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api/beast_duplex.h"

namespace gpupool::api {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using detail::BeastDuplex;

// The most Beast reads at once into a message's buffer (http::read's read_size limit): the room
// a buffer is given for a large body, so that it arrives in reads of this size.
constexpr size_t kBodyReadBytes = 64 * 1024;
using detail::Stream;
using Strand = asio::strand<asio::io_context::executor_type>;
using SteadyClock = std::chrono::steady_clock;

// How long a connection that is closing keeps reading (and discarding) what the client still
// sends, so that closing does not reset the connection before the client read our response.
constexpr std::chrono::milliseconds kMaxLinger{2'000};

// Lets responses from threads other than the I/O threads reach a connection only while the I/O
// threads run; Stop() closes it before stopping them.
struct Gate {
  std::shared_mutex mu;
  bool open = true;
};

// PeerGroup of a parsed address.
std::string GroupOf(const asio::ip::address& address) {
  if (address.is_v4()) return address.to_string();
  asio::ip::address_v6 v6 = address.to_v6();
  if (v6.is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, v6).to_string();
  asio::ip::address_v6::bytes_type bytes = v6.to_bytes();
  std::fill(bytes.begin() + 8, bytes.end(), 0);
  return asio::ip::address_v6(bytes).to_string() + "/64";
}

// The group of the socket's peer (see PeerGroup); empty when the peer is gone.
std::string PeerGroupOf(const tcp::socket& socket) {
  beast::error_code ec;
  const asio::ip::address address = socket.remote_endpoint(ec).address();
  return ec ? std::string() : GroupOf(address);
}

// The connection limits' counts, shared with the seats (which handed-over connections may keep
// past the server's life).
struct Limits {
  explicit Limits(const HttpServerOptions& o)
      : max_connections(o.max_connections),
        reserved_connections(o.reserved_connections),
        max_anonymous_per_peer(o.max_anonymous_per_peer),
        max_per_user(o.max_connections_per_user) {}

  const size_t max_connections;
  const size_t reserved_connections;
  const size_t max_anonymous_per_peer;
  const size_t max_per_user;
  mutable std::mutex mu;  // guards what follows
  size_t open = 0;
  size_t reserved = 0;
  size_t anonymous = 0;
  std::unordered_map<std::string, size_t> anonymous_by_peer;
  std::unordered_map<std::string, size_t> by_user;  // connections counted against each user
  int64_t refused_peer = 0;
  int64_t refused_user = 0;
  int64_t refused_full = 0;
  int64_t refused_reserve = 0;
};

// One connection's place in the limits: taken at accept, given back when its socket closes.
class Seat {
 public:
  enum class Admission { kGeneral, kReserved, kRefusedPeer, kRefusedFull };

  // Takes a place for a new anonymous connection from `peer`, if the limits allow.
  static std::pair<Admission, std::shared_ptr<Seat>> Take(const std::shared_ptr<Limits>& limits,
                                                          std::string peer) {
    Limits& l = *limits;
    std::lock_guard lock(l.mu);
    size_t& from_peer = l.anonymous_by_peer[peer];
    if (l.max_anonymous_per_peer > 0 && from_peer >= l.max_anonymous_per_peer) {
      ++l.refused_peer;
      return {Admission::kRefusedPeer, nullptr};
    }
    const bool reserved = l.max_connections > 0 && l.open - l.reserved >= l.max_connections;
    if (reserved && l.reserved >= l.reserved_connections) {
      if (from_peer == 0) l.anonymous_by_peer.erase(peer);
      ++l.refused_full;
      return {Admission::kRefusedFull, nullptr};
    }
    ++from_peer;
    ++l.open;
    ++l.anonymous;
    if (reserved) ++l.reserved;
    return {reserved ? Admission::kReserved : Admission::kGeneral,
            std::shared_ptr<Seat>(new Seat(limits, std::move(peer), reserved))};
  }

  ~Seat() {
    std::lock_guard lock(limits_->mu);
    LeaveAnonymous();
    LeaveUser();
    --limits_->open;
    if (reserved_) --limits_->reserved;
  }
  Seat(const Seat&) = delete;
  Seat& operator=(const Seat&) = delete;

  bool reserved() const { return reserved_; }
  // A request on the connection authenticated `user`: the connection no longer counts against
  // its peer, and now counts against the user (once, for the last user it admitted), unless
  // `privileged`. False when the user has max_per_user connections open already: this one then
  // counts against nobody, and is refused.
  bool Authenticated(const std::string& user, bool privileged) {
    std::lock_guard lock(limits_->mu);
    LeaveAnonymous();
    if (privileged || limits_->max_per_user == 0 || (user_ && *user_ == user)) return true;
    LeaveUser();
    const auto it = limits_->by_user.try_emplace(user, 0).first;
    if (it->second >= limits_->max_per_user) {
      ++limits_->refused_user;
      return false;
    }
    ++it->second;
    user_ = user;
    return true;
  }
  // A reserved connection is closed for not authenticating as an agent or admin.
  void RefusedFromReserve() {
    std::lock_guard lock(limits_->mu);
    ++limits_->refused_reserve;
  }

 private:
  Seat(std::shared_ptr<Limits> limits, std::string peer, bool reserved)
      : limits_(std::move(limits)), peer_(std::move(peer)), reserved_(reserved) {}

  void LeaveAnonymous() {  // under limits_->mu
    if (!anonymous_) return;
    anonymous_ = false;
    --limits_->anonymous;
    auto it = limits_->anonymous_by_peer.find(peer_);
    if (it != limits_->anonymous_by_peer.end() && --it->second == 0) {
      limits_->anonymous_by_peer.erase(it);
    }
  }

  void LeaveUser() {  // under limits_->mu
    if (!user_) return;
    auto it = limits_->by_user.find(*user_);
    if (it != limits_->by_user.end() && --it->second == 0) limits_->by_user.erase(it);
    user_.reset();
  }

  const std::shared_ptr<Limits> limits_;
  const std::string peer_;
  const bool reserved_;
  bool anonymous_ = true;            // under limits_->mu
  std::optional<std::string> user_;  // under limits_->mu: the user it counts against
};

// What a refused connection is sent before it is closed: a whole 503 in one write.
std::string RefusalText(std::string_view why) {
  const HttpResponse r = ErrorResponse(ErrorCode::kUnavailable, why);
  std::string text = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: " + r.content_type +
                     "\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
                     std::to_string(r.body.size()) + "\r\n\r\n";
  return text + r.body;
}

class Connection;

// Everything the server's connections share.
struct ServerCore {
  ServerCore(HttpServerOptions opts, Handler h)
      : options(std::move(opts)),
        handler(std::move(h)),
        acceptor(asio::make_strand(ioc)),
        accept_retry(acceptor.get_executor()),
        limits(std::make_shared<Limits>(options)),
        refused_peer_text(RefusalText(
            "too many connections from this address that have not authenticated (at most " +
            std::to_string(options.max_anonymous_per_peer) + "); retry later")),
        refused_full_text(RefusalText("the server is at its connection limit (" +
                                      std::to_string(options.max_connections) +
                                      " and its reserve for agents and admins); retry later")) {}

  void DoAccept();
  void OnAccept(beast::error_code ec, tcp::socket socket);
  void Remove(Connection* connection);
  // A connection handed over (Stop closes it).
  void HandedOver(const std::shared_ptr<BeastDuplex>& duplex);

  HttpServerOptions options;
  Handler handler;
  asio::io_context ioc;
  tcp::acceptor acceptor;
  asio::steady_timer accept_retry;  // after an accept error such as running out of descriptors
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
  std::atomic<bool> stopping{false};
  uint16_t bound_port = 0;
  const std::shared_ptr<Limits> limits;
  std::shared_ptr<asio::ssl::context> tls;  // HTTPS: set by Start
  const std::string refused_peer_text;
  const std::string refused_full_text;

  mutable std::mutex mu;  // guards what follows
  std::condition_variable drained;
  std::unordered_map<Connection*, std::shared_ptr<Connection>> connections;
  std::vector<std::weak_ptr<BeastDuplex>> handed_over;
  size_t handed_over_pruned_at = 16;  // prune the expired ones when the list doubles
  bool started = false;
  bool stopped = false;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, ServerCore& server, std::shared_ptr<Seat> seat)
      : socket_(server.tls ? Stream(std::move(socket), server.tls) : Stream(std::move(socket))),
        strand_(*socket_.get_executor().target<Strand>()),
        timer_(strand_),
        server_(server),
        options_(server.options),
        seat_(std::move(seat)),
        reserved_(seat_->reserved()) {}

  const Strand& strand() const { return strand_; }

  void Start() {
    asio::dispatch(strand_, [self = shared_from_this()] {
      if (self->socket_.is_tls()) return self->Handshake();
      self->StartRead();
    });
  }

  // Graceful close (server stopping): no more requests are read; those read are answered; open
  // streams end (what their producers queued still goes).
  void Shutdown() {
    if (closed_) return;
    stopping_ = true;
    read_closed_ = true;
    for (Slot& slot : queue_) {
      if (slot.stream) slot.stream->Finish();
    }
    if (streaming_) FlushStream();
    if (queue_.empty() && !writing_) Close();
  }

  // Closes at once; only after the I/O threads have stopped (or on the strand).
  void ForceClose() { Close(); }

  class OpenStream;

  // The handler's response for request number `seq` (with `stream`: the head of a streamed
  // one). On the strand.
  void Deliver(uint64_t seq, HttpResponse response, std::shared_ptr<OpenStream> stream = nullptr) {
    if (closed_ || seq < first_seq_ || seq - first_seq_ >= queue_.size() ||
        queue_[seq - first_seq_].ready) {
      if (stream) stream->Over();
      return;
    }
    Slot& slot = queue_[seq - first_seq_];
    slot.ready = true;
    slot.response = std::move(response);
    slot.stream = std::move(stream);
    if (slot.stream && stopping_) slot.stream->Finish();
    MaybeWrite();
  }

  // How a connection is handed over.
  enum class Mode { kHttp, kWebSocket, kRaw };

  // The handler hands the connection over to `duplex` at request `seq` (once the responses
  // before it are written). On the strand.
  void DeliverTakeover(uint64_t seq, Mode mode,
                       std::vector<std::pair<std::string, std::string>> headers,
                       std::shared_ptr<BeastDuplex> duplex) {
    if (closed_ || stopping_ || seq < first_seq_ || seq - first_seq_ >= queue_.size() ||
        queue_[seq - first_seq_].ready) {
      return duplex->Abort("the connection is gone");
    }
    Slot& slot = queue_[seq - first_seq_];
    slot.ready = true;
    slot.takeover = mode;
    slot.response.headers = std::move(headers);
    slot.duplex = std::move(duplex);
    MaybeWrite();
  }

 private:
  struct Slot {
    unsigned version = 11;
    bool ready = false;
    HttpResponse response;
    bool head = false;  // the answer to a HEAD: its headers (Content-Length too), no body
    std::shared_ptr<OpenStream> stream;  // a streamed response: `response` is its head
    bool exclusive = false;              // nothing is read behind it until it is answered
    Mode takeover = Mode::kHttp;  // handed over: `response.headers` go with a WebSocket's 101
    std::shared_ptr<BeastDuplex> duplex;                        // ... to this
    std::shared_ptr<http::request<http::string_body>> upgrade;  // a WebSocket handshake
  };

  // TLS: the handshake, within the time an anonymous request head has, then the first read.
  void Handshake() {
    handshaking_ = true;
    idle_since_ = SteadyClock::now();
    UpdateDeadline();
    socket_.tls().async_handshake(asio::ssl::stream_base::server,
                                  [self = shared_from_this()](beast::error_code ec) {
                                    self->handshaking_ = false;
                                    if (self->closed_) return;
                                    if (ec) return self->Close();
                                    self->StartRead();
                                  });
  }

  void StartRead() {
    if (closed_ || reading_ || read_closed_ || exclusive_pending_) return;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(options_.max_header_bytes));
    parser_->body_limit(options_.max_body_bytes);
    reading_ = true;
    head_read_ = false;
    if (queue_.empty()) idle_since_ = SteadyClock::now();
    UpdateDeadline();
    // The head first (an anonymous connection has less time for it), then the body.
    http::async_read_header(socket_, buffer_, *parser_,
                            beast::bind_front_handler(&Connection::OnHead, shared_from_this()));
  }

  void OnHead(beast::error_code ec, size_t bytes) {
    if (ec || closed_ || lingering_ || streaming_ || parser_->is_done()) return OnRead(ec, bytes);
    head_read_ = true;
    UpdateDeadline();
    // Beast reads as much as the buffer has room for (at most 64 KiB): a body in a buffer of a
    // few hundred bytes would take thousands of reads (a 1 MiB upload chunk: 6 ms instead of 1).
    if (const auto length = parser_->content_length(); length && *length > kBodyReadBytes / 4) {
      buffer_.reserve(buffer_.size() + kBodyReadBytes);
    }
    http::async_read(socket_, buffer_, *parser_,
                     beast::bind_front_handler(&Connection::OnRead, shared_from_this()));
  }

  // On the strand: a request on this connection authenticated (ResponseChannel::Authenticated,
  // which counted it against its user, or refused it: `admitted`).
  void OnAuthenticated(bool privileged, bool admitted) {
    if (closed_) return;
    anonymous_ = false;
    if (privileged) privileged_ = true;
    if (!admitted) refused_user_ = true;
  }

  // A reserved connection is kept only for an agent or admin: true when this one is not (it is
  // closed after its first answer, which the handler made a refusal).
  bool RefusedFromReserve() const { return reserved_ && !privileged_; }

  void OnRead(beast::error_code ec, size_t /*bytes*/) {
    reading_ = false;
    if (closed_ || ec == asio::error::operation_aborted) return;
    if (lingering_ || streaming_) {
      // Behind a stream nothing more is answered: what the client sends is discarded, and its
      // end (or a broken connection) ends the stream.
      if (ec) return Close();
      return Drain();
    }
    if (ec) {
      read_closed_ = true;
      if (ec == http::error::body_limit) {
        return Enqueue(11, ErrorResponse(413, ErrorCodeName(ErrorCode::kInvalidArgument),
                                         "request body exceeds " +
                                             std::to_string(options_.max_body_bytes) + " bytes"));
      }
      if (ec == http::error::header_limit) {
        return Enqueue(11, ErrorResponse(431, ErrorCodeName(ErrorCode::kInvalidArgument),
                                         "request header exceeds " +
                                             std::to_string(options_.max_header_bytes) + " bytes"));
      }
      if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
          ec != http::error::end_of_stream && ec != http::error::partial_message) {
        return Enqueue(11, ErrorResponse(400, ErrorCodeName(ErrorCode::kInvalidArgument),
                                         "malformed HTTP request: " + ec.message()));
      }
      // The client closed its side (or the connection broke): answer what was read, then close.
      if (ec == http::error::end_of_stream && (writing_ || !queue_.empty())) return;
      return Close();
    }
    if (stopping_) return FinishIfDone();

    // An idle connection keeps a small buffer, not the last body's.
    if (buffer_.size() == 0 && buffer_.capacity() > kBodyReadBytes / 4) buffer_.shrink_to_fit();
    http::request<http::string_body> message = parser_->release();
    HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    request.tls = socket_.is_tls();
    if (const auto it = message.find(http::field::authorization); it != message.end()) {
      request.authorization = std::string(it->value());
    }
    if (const auto it = message.find(http::field::content_type); it != message.end()) {
      request.content_type = std::string(it->value());
    }
    const auto [first_cookie, end_cookie] = message.equal_range(http::field::cookie);
    for (auto it = first_cookie; it != end_cookie; ++it) {
      if (!request.cookie.empty()) request.cookie += "; ";
      request.cookie += it->value();
    }
    if (const auto it = message.find("X-CSRF-Token"); it != message.end()) {
      request.csrf_token = std::string(it->value());
    }
    if (const auto it = message.find(http::field::accept_encoding); it != message.end()) {
      request.accept_encoding = std::string(it->value());
    }
    if (const auto it = message.find(http::field::host); it != message.end()) {
      request.host = std::string(it->value());
    }
    request.websocket_upgrade = websocket::is_upgrade(message);
    request.reserved = RefusedFromReserve();
    const bool all_headers =
        options_.all_headers && options_.all_headers(request.Path(), request.host);
    if (all_headers) {
      for (const auto& field : message) {
        request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
      }
    }
    request.body = std::move(message.body());
    if (!message.keep_alive()) read_closed_ = true;

    const uint64_t seq = first_seq_ + queue_.size();
    Slot slot;
    slot.version = message.version();
    slot.head = message.method() == http::verb::head;
    // Nothing is read behind a reserved connection's first request: it may be its last.
    slot.exclusive = all_headers || request.websocket_upgrade || request.reserved;
    const bool exclusive = slot.exclusive;
    const bool upgrade = request.websocket_upgrade;
    if (upgrade)
      slot.upgrade = std::make_shared<http::request<http::string_body>>(std::move(message));
    exclusive_pending_ = exclusive;
    queue_.push_back(std::move(slot));
    server_.handler(std::move(request),
                    Responder(std::make_shared<PendingResponse>(
                        weak_from_this(), seat_, server_.gate, seq, upgrade, exclusive)));
    if (!exclusive && queue_.size() < options_.max_pipelined) StartRead();
    UpdateDeadline();
  }

  // A response the server itself makes (413, 431, 400) after the requests already queued.
  void Enqueue(unsigned version, HttpResponse response) {
    Slot slot;
    slot.version = version;
    slot.ready = true;
    slot.response = std::move(response);
    queue_.push_back(std::move(slot));
    MaybeWrite();
  }

  // The status line and headers of `r` on `message`.
  template <typename Message>
  static void SetHead(Message& message, unsigned version, const HttpResponse& r) {
    message.version(version);
    message.result(static_cast<unsigned>(r.status));
    if (!r.content_type.empty()) message.set(http::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) {
      // Handlers are trusted, but a line break in a header would split the response.
      if (name.find_first_of("\r\n:") != std::string::npos ||
          value.find_first_of("\r\n") != std::string::npos) {
        continue;
      }
      message.set(name, value);
    }
  }

  void MaybeWrite() {
    if (writing_ || closed_ || queue_.empty() || !queue_.front().ready) return;
    Slot& slot = queue_.front();
    if (slot.stream) return WriteStreamHead(slot);
    if (slot.takeover != Mode::kHttp) return StartTakeover(slot);
    HttpResponse& r = slot.response;
    out_ = {};
    SetHead(out_, slot.version, r);
    out_.body() = std::move(r.body);
    if (RefusedFromReserve() && !read_closed_for_reserve_) {
      read_closed_for_reserve_ = true;
      seat_->RefusedFromReserve();
      read_closed_ = true;
    }
    if (refused_user_) read_closed_ = true;  // its answer is the refusal
    close_after_ = read_closed_ && queue_.size() == 1;
    out_.keep_alive(!close_after_);
    out_.prepare_payload();
    if (slot.head) out_.body().clear();  // after prepare_payload: the Content-Length stays
    writing_ = true;
    write_started_ = SteadyClock::now();
    UpdateDeadline();
    http::async_write(socket_, out_,
                      beast::bind_front_handler(&Connection::OnWrite, shared_from_this()));
  }

  void OnWrite(beast::error_code ec, size_t /*bytes*/) {
    writing_ = false;
    if (closed_) return;
    if (ec) return Close();
    if (queue_.front().exclusive) exclusive_pending_ = false;
    queue_.pop_front();
    ++first_seq_;
    if (close_after_) return LingerClose();
    if (queue_.empty()) {
      if (read_closed_) return Close();
      idle_since_ = SteadyClock::now();
    }
    if (queue_.size() < options_.max_pipelined) StartRead();
    MaybeWrite();
    UpdateDeadline();
  }

  // A stream's head: chunked (HTTP/1.1) or ended by the close (HTTP/1.0), never kept alive.
  // From here on no request is read; the client's end is watched for (Drain).
  void WriteStreamHead(Slot& slot) {
    stream_ = slot.stream;
    streaming_ = true;
    read_closed_ = true;
    chunked_ = slot.version >= 11;
    stream_head_.emplace();
    SetHead(*stream_head_, slot.version, slot.response);
    stream_head_->keep_alive(false);
    if (chunked_) stream_head_->chunked(true);
    stream_serializer_.emplace(*stream_head_);
    writing_ = true;
    write_started_ = SteadyClock::now();
    UpdateDeadline();
    if (!reading_) Drain();
    http::async_write_header(
        socket_, *stream_serializer_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnStreamWrite(ec); });
  }

  // Writes what the stream's producer queued (one chunk), or its end.
  void FlushStream() {
    if (closed_ || !streaming_ || writing_) return;
    bool ended = false;
    std::string bytes = stream_->Take(&ended);
    if (bytes.empty() && !ended) return;
    stream_written_ = bytes.size();
    stream_out_.clear();
    if (chunked_ && !bytes.empty()) {
      char size[24];
      std::snprintf(size, sizeof(size), "%zx\r\n", bytes.size());
      stream_out_ = size;
      stream_out_ += bytes;
      stream_out_ += "\r\n";
    } else {
      stream_out_ = std::move(bytes);
    }
    if (ended) {
      if (chunked_) stream_out_ += "0\r\n\r\n";
      stream_done_ = true;
    }
    writing_ = true;
    write_started_ = SteadyClock::now();
    UpdateDeadline();
    asio::async_write(
        socket_, asio::buffer(stream_out_),
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnStreamWrite(ec); });
  }

  void OnStreamWrite(beast::error_code ec) {
    writing_ = false;
    if (closed_) return;
    if (ec) return Close();
    stream_->Written(stream_written_);
    stream_written_ = 0;
    if (stream_done_) return LingerClose();
    FlushStream();
    UpdateDeadline();
  }

  void FinishIfDone() {
    if (queue_.empty() && !writing_) Close();
  }

  // Half-closes and discards what the client still sends until it closes or kMaxLinger passes.
  void LingerClose() {
    if (closed_ || lingering_) return;
    lingering_ = true;
    beast::error_code ignored;
    socket_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    linger_deadline_ =
        SteadyClock::now() + std::min<std::chrono::milliseconds>(kMaxLinger, options_.read_timeout);
    UpdateDeadline();
    if (!reading_) Drain();  // else OnRead continues the drain
  }

  void Drain() {
    buffer_.clear();
    reading_ = true;
    socket_.async_read_some(buffer_.prepare(16 * 1024),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              self->reading_ = false;
                              if (self->closed_ || ec) return self->Close();
                              self->Drain();
                            });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    socket_.Close();
    timer_.cancel();
    // Streams end with the connection: their producers are told.
    for (Slot& slot : queue_) {
      if (slot.stream) slot.stream->Over();
      if (slot.duplex) slot.duplex->Abort("the connection closed before it was handed over");
    }
    queue_.clear();
    stream_.reset();
    seat_.reset();
    server_.Remove(this);
  }

  // The deadline follows the state: a write in progress, or an idle (or slowly arriving)
  // request with nothing outstanding, or the linger. None while handlers are working, nor while
  // a stream waits for its producer (a live stream may be quiet for long).
  void UpdateDeadline() {
    SteadyClock::time_point d = SteadyClock::time_point::max();
    if (lingering_) {
      d = linger_deadline_;
    } else if (handshaking_) {
      d = idle_since_ + std::min(options_.anonymous_timeout, options_.read_timeout);
    } else if (writing_) {
      d = write_started_ + options_.read_timeout;
    } else if (reading_ && queue_.empty()) {
      d = idle_since_ + (anonymous_ && !head_read_
                             ? std::min(options_.anonymous_timeout, options_.read_timeout)
                             : options_.read_timeout);
    }
    deadline_ = d;
    // Re-arm only when the deadline moves earlier; a later one is picked up when the timer
    // fires, so a busy connection does not touch the timer per request.
    if (d < timer_expiry_) ArmTimer(d);
  }

  void ArmTimer(SteadyClock::time_point at) {
    timer_expiry_ = at;
    timer_.expires_at(at);
    timer_.async_wait(beast::bind_front_handler(&Connection::OnTimer, shared_from_this()));
  }

  void OnTimer(beast::error_code ec) {
    if (ec == asio::error::operation_aborted || closed_) return;
    if (deadline_ <= SteadyClock::now()) return Close();
    ArmTimer(deadline_);
  }

  // The slot at the front hands the connection over: HTTP ends here, the socket goes to the
  // duplex (on this strand), and the connection is done.
  void StartTakeover(Slot& slot) {
    std::shared_ptr<BeastDuplex> duplex = std::move(slot.duplex);
    if (RefusedFromReserve()) {
      seat_->RefusedFromReserve();
      duplex->Abort("a connection past the limit is kept for agents and admins only");
      return Close();
    }
    server_.HandedOver(duplex);
    duplex->Hold(std::move(seat_));  // the duplex's socket keeps the place
    if (slot.takeover == Mode::kRaw) {
      std::string first = beast::buffers_to_string(buffer_.data());
      buffer_.clear();
      duplex->AttachRaw(std::move(socket_), std::move(first));
    } else {
      duplex->AcceptWebSocket(std::move(socket_), std::move(slot.upgrade),
                              std::move(slot.response.headers));
    }
    queue_.clear();
    Close();
  }

  // The channel behind one request's Responder.
  class PendingResponse final : public ResponseChannel {
   public:
    PendingResponse(std::weak_ptr<Connection> connection, std::weak_ptr<Seat> seat,
                    std::shared_ptr<Gate> gate, uint64_t seq, bool upgrade, bool exclusive)
        : connection_(std::move(connection)),
          seat_(std::move(seat)),
          gate_(std::move(gate)),
          seq_(seq),
          upgrade_(upgrade),
          exclusive_(exclusive) {}

    ~PendingResponse() override {
      if (!sent_.load(std::memory_order_relaxed)) {
        Send(ErrorResponse(500, ErrorCodeName(ErrorCode::kInternal),
                           "the request was dropped without an answer"));
      }
    }

    void Send(HttpResponse response) override {
      if (sent_.exchange(true)) return;
      std::shared_lock lock(gate_->mu);
      if (!gate_->open) return;
      std::shared_ptr<Connection> c = connection_.lock();
      if (!c) return;  // the client went away
      if (c->strand_.running_in_this_thread()) {
        c->Deliver(seq_, std::move(response));
        return;
      }
      asio::post(c->strand_, [c, seq = seq_, r = std::move(response)]() mutable {
        c->Deliver(seq, std::move(r));
      });
    }

    std::shared_ptr<ResponseStream> Stream(HttpResponse head) override {
      if (sent_.exchange(true)) return nullptr;
      std::shared_lock lock(gate_->mu);
      if (!gate_->open) return nullptr;
      std::shared_ptr<Connection> c = connection_.lock();
      if (!c) return nullptr;  // the client went away
      auto stream = std::make_shared<OpenStream>(
          connection_, gate_, c->options_.max_stream_buffer_bytes, std::move(head.body));
      if (c->strand_.running_in_this_thread()) {
        c->Deliver(seq_, std::move(head), stream);
      } else {
        asio::post(c->strand_, [c, seq = seq_, h = std::move(head), stream]() mutable {
          c->Deliver(seq, std::move(h), std::move(stream));
        });
      }
      return stream;
    }

    std::shared_ptr<Duplex> AcceptWebSocket(
        std::vector<std::pair<std::string, std::string>> headers) override {
      if (!upgrade_) return nullptr;
      return HandOver(Mode::kWebSocket, std::move(headers));
    }

    // Only a request read with nothing behind it (HttpServerOptions::all_headers) may be: a
    // read of the next request would be in flight on the socket being handed over.
    std::shared_ptr<Duplex> TakeOver() override {
      if (!exclusive_) return nullptr;
      return HandOver(Mode::kRaw, {});
    }

    Status Authenticated(std::string_view user, bool privileged) override {
      std::shared_lock lock(gate_->mu);
      if (!gate_->open) return {};
      std::shared_ptr<Connection> c = connection_.lock();
      if (!c) return {};
      // The seat's counts have their own lock: the user is admitted (or not) here and now.
      const std::shared_ptr<Seat> seat = seat_.lock();
      const bool admitted = seat == nullptr || seat->Authenticated(std::string(user), privileged);
      // Posted before the answer is, so the strand sees it first.
      if (c->strand_.running_in_this_thread()) {
        c->OnAuthenticated(privileged, admitted);
      } else {
        asio::post(c->strand_,
                   [c, privileged, admitted] { c->OnAuthenticated(privileged, admitted); });
      }
      if (admitted) return {};
      Error refused{ErrorCode::kUnavailable,
                    "user " + std::string(user) +
                        " has as many connections open as one user may (" +
                        std::to_string(c->options_.max_connections_per_user) +
                        "); close some, or retry later",
                    1000};
      return tl::unexpected(std::move(refused));
    }

   private:
    std::shared_ptr<Duplex> HandOver(Mode mode,
                                     std::vector<std::pair<std::string, std::string>> headers) {
      if (sent_.exchange(true)) return nullptr;
      std::shared_lock lock(gate_->mu);
      if (!gate_->open) return nullptr;
      std::shared_ptr<Connection> c = connection_.lock();
      if (!c) return nullptr;  // the client went away
      auto duplex = std::make_shared<BeastDuplex>(c->strand_);
      asio::post(c->strand_, [c, seq = seq_, mode, h = std::move(headers), duplex]() mutable {
        c->DeliverTakeover(seq, mode, std::move(h), std::move(duplex));
      });
      return duplex;
    }

    std::weak_ptr<Connection> connection_;
    std::weak_ptr<Seat> seat_;  // the connection's, while it has it
    std::shared_ptr<Gate> gate_;
    uint64_t seq_;
    bool upgrade_;
    bool exclusive_;
    std::atomic<bool> sent_{false};
  };

 public:
  // A streamed response: the producer's side (any thread) queues bytes under the stream's own
  // lock and posts one flush to the connection's strand; the strand takes what is queued and
  // writes it. Queued and not yet written bytes are bounded by `limit`.
  class OpenStream final : public ResponseStream {
   public:
    OpenStream(std::weak_ptr<Connection> connection, std::shared_ptr<Gate> gate, size_t limit,
               std::string first)
        : connection_(std::move(connection)),
          gate_(std::move(gate)),
          limit_(limit),
          pending_(std::move(first)),
          queued_(pending_.size()) {}

    bool Write(std::string bytes) override {
      std::unique_lock lock(mu_);
      if (ended_ || finished_ || queued_ + bytes.size() > limit_) return false;
      queued_ += bytes.size();
      pending_ += bytes;
      Kick(lock);
      return true;
    }

    void End(std::string last) override {
      std::unique_lock lock(mu_);
      if (ended_ || finished_) return;
      ended_ = true;
      queued_ += last.size();
      pending_ += last;
      Kick(lock);
    }

    void OnClosed(std::function<void()> on_closed) override {
      {
        std::lock_guard lock(mu_);
        if (!finished_) {
          on_closed_ = std::move(on_closed);
          return;
        }
        if (ended_) return;
      }
      on_closed();
    }

    // On the strand: what is queued (cleared), and whether the stream ends after it.
    std::string Take(bool* ended) {
      std::lock_guard lock(mu_);
      flush_posted_ = false;
      *ended = ended_ || finished_;
      return std::exchange(pending_, {});
    }
    // On the strand: `n` bytes taken were written.
    void Written(size_t n) {
      std::lock_guard lock(mu_);
      queued_ -= n;
    }
    // The server ends the stream (Stop): no more writes; what is queued still goes.
    void Finish() { MarkFinished(); }
    // The connection is gone: nothing more goes.
    void Over() { MarkFinished(); }

   private:
    void MarkFinished() {
      std::function<void()> tell;
      {
        std::lock_guard lock(mu_);
        if (finished_) return;
        finished_ = true;
        if (!ended_) tell = std::move(on_closed_);
        on_closed_ = nullptr;
      }
      if (tell) tell();
    }

    // Posts one flush to the strand unless one is on its way (the strand takes everything
    // queued by then).
    void Kick(std::unique_lock<std::mutex>& lock) {
      if (flush_posted_) return;
      flush_posted_ = true;
      lock.unlock();
      std::shared_lock gate(gate_->mu);
      if (!gate_->open) return;
      if (std::shared_ptr<Connection> c = connection_.lock()) {
        asio::post(c->strand_, [c] { c->FlushStream(); });
      }
    }

    const std::weak_ptr<Connection> connection_;
    const std::shared_ptr<Gate> gate_;
    const size_t limit_;
    std::mutex mu_;  // guards what follows
    std::string pending_;
    size_t queued_ = 0;  // pending_ and the chunk being written
    bool flush_posted_ = false;
    bool ended_ = false;     // the producer's End
    bool finished_ = false;  // the server's end: Stop, or the connection gone
    std::function<void()> on_closed_;
  };

 private:
  Stream socket_;
  Strand strand_;
  asio::steady_timer timer_;
  ServerCore& server_;
  const HttpServerOptions& options_;
  std::shared_ptr<Seat> seat_;            // until the socket closes or goes to a duplex
  const bool reserved_;                   // accepted past the general limit
  bool privileged_ = false;               // a request authenticated an agent or admin
  bool anonymous_ = true;                 // no request authenticated yet
  bool head_read_ = false;                // the request being read has its head
  bool read_closed_for_reserve_ = false;  // refused from the reserve (counted once)
  bool refused_user_ = false;             // its user had all its connections open
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> out_;
  std::shared_ptr<OpenStream> stream_;  // the stream being written (the last response)
  std::optional<http::response<http::empty_body>> stream_head_;
  std::optional<http::response_serializer<http::empty_body>> stream_serializer_;
  std::string stream_out_;     // the chunk being written
  size_t stream_written_ = 0;  // the producer's bytes in it
  std::deque<Slot> queue_;     // requests read and not yet answered, in order
  uint64_t first_seq_ = 0;     // number of queue_.front()
  bool handshaking_ = false;   // TLS: the handshake is under way
  bool reading_ = false;
  bool writing_ = false;
  bool read_closed_ = false;  // no more requests will be read
  bool close_after_ = false;  // the response being written is the last
  bool stopping_ = false;
  bool lingering_ = false;
  bool streaming_ = false;    // the front response is a stream: its head is written or sent
  bool chunked_ = false;      // the stream's body is chunked (HTTP/1.1; else ended by the close)
  bool stream_done_ = false;  // the stream's end is written or being written
  bool closed_ = false;
  bool exclusive_pending_ = false;  // an exclusive request is queued: read nothing behind it
  SteadyClock::time_point idle_since_{};
  SteadyClock::time_point write_started_{};
  SteadyClock::time_point linger_deadline_{};
  SteadyClock::time_point deadline_ = SteadyClock::time_point::max();
  SteadyClock::time_point timer_expiry_ = SteadyClock::time_point::max();
};

void ServerCore::DoAccept() {
  acceptor.async_accept(asio::make_strand(ioc),
                        beast::bind_front_handler(&ServerCore::OnAccept, this));
}

void ServerCore::OnAccept(beast::error_code ec, tcp::socket socket) {
  if (stopping.load() || ec == asio::error::operation_aborted || !acceptor.is_open()) return;
  if (ec) {
    // Out of descriptors or memory: try again shortly instead of spinning.
    accept_retry.expires_after(std::chrono::milliseconds(100));
    accept_retry.async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec && !stopping.load()) DoAccept();
    });
    return;
  }
  beast::error_code ignored;
  auto [admission, seat] = Seat::Take(limits, PeerGroupOf(socket));
  if (!seat) {
    // One write that cannot block (a fresh connection's send buffer is empty; a client that
    // advertises no window gets nothing), then the descriptor is given back at once. A TLS
    // client could not read a plain answer: it sees the connection closed.
    const std::string& text =
        admission == Seat::Admission::kRefusedPeer ? refused_peer_text : refused_full_text;
    socket.non_blocking(true, ignored);
    if (!tls) socket.write_some(asio::buffer(text), ignored);
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    return DoAccept();
  }
  socket.set_option(tcp::no_delay(true), ignored);
  auto connection = std::make_shared<Connection>(std::move(socket), *this, std::move(seat));
  {
    std::lock_guard lock(mu);
    connections.emplace(connection.get(), connection);
  }
  connection->Start();
  DoAccept();
}

void ServerCore::HandedOver(const std::shared_ptr<BeastDuplex>& duplex) {
  std::lock_guard lock(mu);
  if (handed_over.size() >= handed_over_pruned_at) {
    std::erase_if(handed_over, [](const std::weak_ptr<BeastDuplex>& d) { return d.expired(); });
    handed_over_pruned_at = std::max<size_t>(16, 2 * handed_over.size());
  }
  handed_over.push_back(duplex);
}

void ServerCore::Remove(Connection* connection) {
  std::lock_guard lock(mu);
  connections.erase(connection);
  if (connections.empty()) drained.notify_all();
}

}  // namespace

struct HttpServer::Impl {
  Impl(HttpServerOptions options, Handler handler) : core(std::move(options), std::move(handler)) {}
  ServerCore core;
};

HttpServer::HttpServer(HttpServerOptions options, Handler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {}

HttpServer::~HttpServer() { Stop(); }

uint16_t HttpServer::port() const { return impl_->core.bound_port; }

size_t HttpServer::connection_count() const {
  std::lock_guard lock(impl_->core.mu);
  return impl_->core.connections.size();
}

server::ConnectionFigures HttpServer::connection_figures() const {
  const Limits& l = *impl_->core.limits;
  std::lock_guard lock(l.mu);
  return {.open = static_cast<int64_t>(l.open),
          .anonymous = static_cast<int64_t>(l.anonymous),
          .reserved = static_cast<int64_t>(l.reserved),
          .refused_peer = l.refused_peer,
          .refused_full = l.refused_full,
          .refused_reserve = l.refused_reserve,
          .refused_user = l.refused_user};
}

std::string PeerGroup(std::string_view address) {
  beast::error_code ec;
  const asio::ip::address parsed = asio::ip::make_address(std::string(address), ec);
  return ec ? std::string(address) : GroupOf(parsed);
}

ConnectionLimits ConnectionLimitsFor(uint64_t descriptor_limit) {
  constexpr uint64_t kOthers = 256;  // the database, task files and output, pipes, logs
  constexpr uint64_t kMost = 16'384;
  const uint64_t left =
      descriptor_limit > 2 * kOthers ? descriptor_limit - kOthers : descriptor_limit / 2;
  const uint64_t general = std::min<uint64_t>(kMost, left * 3 / 4);
  return {.max_connections = static_cast<size_t>(general),
          .reserved_connections = static_cast<size_t>(std::max<uint64_t>(16, general / 16))};
}

Status HttpServer::Start() {
  ServerCore& core = impl_->core;
  {
    std::lock_guard lock(core.mu);
    if (core.started) return MakeError(ErrorCode::kFailedPrecondition, "server already started");
  }
  const std::string where = core.options.host + ":" + std::to_string(core.options.port);
  if (!core.options.tls_cert_file.empty() || !core.options.tls_key_file.empty()) {
    if (core.options.tls_cert_file.empty() || core.options.tls_key_file.empty()) {
      return InvalidArgument("TLS needs both a certificate and a key file");
    }
    Result<std::shared_ptr<asio::ssl::context>> tls =
        detail::ServerTlsContext(core.options.tls_cert_file, core.options.tls_key_file);
    if (!tls) return tl::unexpected(tls.error());
    core.tls = std::move(*tls);
  }
  beast::error_code ec;
  tcp::resolver resolver(core.ioc);
  const auto endpoints = resolver.resolve(core.options.host, std::to_string(core.options.port),
                                          tcp::resolver::passive, ec);
  if (ec || endpoints.empty()) {
    return MakeError(ErrorCode::kUnavailable,
                     "cannot resolve listen address " + where + ": " + ec.message());
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  core.acceptor.open(endpoint.protocol(), ec);
  if (!ec) core.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) core.acceptor.bind(endpoint, ec);
  if (!ec) core.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    beast::error_code ignored;
    core.acceptor.close(ignored);
    return MakeError(ErrorCode::kUnavailable, "cannot listen on " + where + ": " + ec.message());
  }
  core.bound_port = core.acceptor.local_endpoint(ec).port();
  {
    std::lock_guard lock(core.mu);
    core.started = true;
  }
  asio::post(core.acceptor.get_executor(), [&core] { core.DoAccept(); });
  core.work.emplace(core.ioc.get_executor());
  int threads = core.options.threads;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 0; i < threads; ++i) {
    core.threads.emplace_back([&core] {
      while (true) {
        try {
          core.ioc.run();
          return;
        } catch (const std::exception& e) {
          // A handler threw; the connection it served is lost, the server goes on.
          std::fprintf(stderr, "gpupool http server: handler threw: %s\n", e.what());
        }
      }
    });
  }
  return {};
}

void HttpServer::Stop() {
  ServerCore& core = impl_->core;
  {
    std::lock_guard lock(core.mu);
    if (!core.started || core.stopped) return;
    core.stopped = true;
  }
  core.stopping.store(true);

  // 1. Stop accepting.
  std::promise<void> acceptor_closed;
  asio::post(core.acceptor.get_executor(), [&core, &acceptor_closed] {
    beast::error_code ignored;
    core.acceptor.close(ignored);
    core.accept_retry.cancel();
    acceptor_closed.set_value();
  });
  acceptor_closed.get_future().wait();

  // 2. Idle connections close now; busy ones after their last response.
  std::vector<std::shared_ptr<Connection>> connections;
  {
    std::lock_guard lock(core.mu);
    for (const auto& [ptr, connection] : core.connections) connections.push_back(connection);
  }
  for (auto& connection : connections) {
    asio::post(connection->strand(), [connection] { connection->Shutdown(); });
  }
  connections.clear();
  std::vector<std::weak_ptr<BeastDuplex>> handed_over;
  {
    std::lock_guard lock(core.mu);
    handed_over = core.handed_over;
  }
  for (const auto& weak : handed_over) {
    if (std::shared_ptr<BeastDuplex> duplex = weak.lock()) duplex->Close("the server stops");
  }
  {
    std::unique_lock lock(core.mu);
    core.drained.wait_for(lock, core.options.shutdown_grace,
                          [&core] { return core.connections.empty(); });
  }

  // 3. Late responses go nowhere from here on; stop the threads.
  {
    std::unique_lock lock(core.gate->mu);
    core.gate->open = false;
  }
  core.work.reset();
  core.ioc.stop();
  for (std::thread& t : core.threads) t.join();
  core.threads.clear();
  // Connections that outlived the grace period: close them now (no I/O thread runs any more).
  {
    std::lock_guard lock(core.mu);
    for (const auto& [ptr, connection] : core.connections) connections.push_back(connection);
  }
  for (auto& connection : connections) connection->ForceClose();
  // Handed-over connections whose close had not run: closed now (no I/O thread runs any more).
  for (const auto& weak : handed_over) {
    if (std::shared_ptr<BeastDuplex> duplex = weak.lock()) duplex->Abort("the server stops");
  }
  std::lock_guard lock(core.mu);
  core.connections.clear();
  core.handed_over.clear();
}

}  // namespace gpupool::api
