// The tunnel's multiplexer (see tunnel.h). One mutex per session guards the streams' sending and
// receiving state; each stream's events reach its handlers through a queue of its own that one
// thread at a time drains without any lock held, so handlers may call back into the stream.
#include "api/tunnel.h"

#include <algorithm>
#include <deque>
#include <utility>
#include <vector>

#include "api/tunnel_frame.h"

namespace gpupool::api::tunnel {

namespace {

// One thing for a stream's handlers.
struct Event {
  enum Kind { kData, kEnd, kReset, kWritable, kFinal } kind = kData;
  std::string bytes;  // kData: the bytes; kReset: the reason
};

// A stream's events on their way to its handlers. Its own lock: Post (under the session's lock)
// only queues; Drain (never under it) delivers.
class Receiver {
 public:
  void SetHandlers(StreamHandlers handlers) {
    {
      std::lock_guard lock(mu_);
      if (has_handlers_ || done_) return;
      handlers_ = std::make_shared<StreamHandlers>(std::move(handlers));
      has_handlers_ = true;
    }
    Drain();
  }

  void Post(Event event) {
    std::lock_guard lock(mu_);
    if (done_) return;
    queue_.push_back(std::move(event));
  }

  // The stream ended on this side's word (Reset, Refuse): nothing more is delivered.
  void Silence() {
    std::lock_guard lock(mu_);
    done_ = true;
    queue_.clear();
    if (!delivering_) handlers_.reset();
  }

  void Drain() {
    std::unique_lock lock(mu_);
    if (delivering_ || !has_handlers_) return;
    delivering_ = true;
    while (!queue_.empty() && handlers_) {
      Event event = std::move(queue_.front());
      queue_.pop_front();
      std::shared_ptr<StreamHandlers> h = handlers_;
      const bool last = event.kind == Event::kReset || event.kind == Event::kFinal;
      if (last) {
        done_ = true;
        queue_.clear();
      }
      lock.unlock();
      switch (event.kind) {
        case Event::kData:
          if (h->on_data) h->on_data(std::move(event.bytes));
          break;
        case Event::kEnd:
          if (h->on_end) h->on_end();
          break;
        case Event::kReset:
          if (h->on_reset) h->on_reset(std::move(event.bytes));
          break;
        case Event::kWritable:
          if (h->on_writable) h->on_writable();
          break;
        case Event::kFinal:
          break;
      }
      h.reset();
      lock.lock();
    }
    // The handlers go with the stream's last event (they may hold what holds the stream).
    if (done_) handlers_.reset();
    delivering_ = false;
  }

 private:
  std::mutex mu_;
  std::shared_ptr<StreamHandlers> handlers_;
  bool has_handlers_ = false;
  bool delivering_ = false;
  bool done_ = false;
  std::deque<Event> queue_;
};

// The receivers a call posted to, drained once the session's lock is released.
using DrainList = std::vector<std::shared_ptr<Receiver>>;

void DrainAll(const DrainList& list) {
  for (const auto& r : list) r->Drain();
}

}  // namespace

struct Session::State {
  enum class Phase { kOpening, kAccepting, kOpen } phase = Phase::kOpen;
  std::shared_ptr<Stream> stream;
  std::shared_ptr<Receiver> receiver = std::make_shared<Receiver>();
  Opened opened;  // kOpening: who waits for OPENED
  // Sending.
  std::deque<std::string> outbox;
  size_t out_offset = 0;  // bytes of outbox.front() already sent
  size_t backlog = 0;
  uint64_t credit = kInitialWindow;
  bool end_queued = false;
  bool end_sent = false;
  bool want_writable = false;
  // Receiving.
  uint64_t peer_allowed = kInitialWindow;  // what the peer may still send
  uint64_t unacked = 0;                    // consumed, not yet granted back
  bool peer_ended = false;
};

std::shared_ptr<Session> Session::Create(SendFn send, bool odd_ids, OnOpen on_open) {
  return std::shared_ptr<Session>(new Session(std::move(send), odd_ids, std::move(on_open)));
}

Session::Session(SendFn send, bool odd_ids, OnOpen on_open)
    : send_(std::move(send)), on_open_(std::move(on_open)), next_id_(odd_ids ? 1 : 2) {}

Session::~Session() = default;

size_t Session::stream_count() const {
  std::lock_guard lock(mu_);
  return streams_.size();
}

Session::State* Session::Find(uint32_t id) {
  const auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second.get();
}

void Session::Forget(uint32_t id) { streams_.erase(id); }

void Session::Pump(State& s) {
  if (s.phase != State::Phase::kOpen) return;
  while (s.credit > 0 && !s.outbox.empty()) {
    std::string& front = s.outbox.front();
    const size_t n = std::min<uint64_t>(
        {s.credit, static_cast<uint64_t>(kMaxDataPayload), front.size() - s.out_offset});
    send_(EncodeFrame(FrameType::kData, s.stream->id(),
                      std::string_view(front).substr(s.out_offset, n)));
    s.credit -= n;
    s.backlog -= n;
    s.out_offset += n;
    if (s.out_offset == front.size()) {
      s.outbox.pop_front();
      s.out_offset = 0;
    }
  }
  if (s.outbox.empty() && s.end_queued && !s.end_sent) {
    send_(EncodeFrame(FrameType::kEnd, s.stream->id()));
    s.end_sent = true;
  }
  if (s.want_writable && s.backlog < kBacklogHighWater / 2) {
    s.want_writable = false;
    s.receiver->Post({Event::kWritable, {}});
  }
}

void Session::Open(std::string payload, Opened done) {
  std::unique_lock lock(mu_);
  if (closed_) {
    const std::string reason = close_reason_;
    lock.unlock();
    done(MakeError(ErrorCode::kUnavailable, "the tunnel is closed: " + reason));
    return;
  }
  const uint32_t id = next_id_;
  next_id_ += 2;
  auto state = std::make_unique<State>();
  state->phase = State::Phase::kOpening;
  state->opened = std::move(done);
  state->stream = std::make_shared<Stream>(weak_from_this(), id);
  streams_.emplace(id, std::move(state));
  send_(EncodeFrame(FrameType::kOpen, id, payload));
}

Status Session::OnMessage(std::string_view message) {
  Result<Frame> decoded = DecodeFrame(message);
  if (!decoded) return tl::unexpected(decoded.error());
  Frame& frame = *decoded;
  const uint32_t id = frame.stream;
  DrainList drain;
  std::unique_lock lock(mu_);
  if (closed_) return {};
  State* s = Find(id);
  const auto violation = [&](std::string what) -> Status {
    return MakeError(ErrorCode::kInvalidArgument,
                     "tunnel stream " + std::to_string(id) + ": " + what);
  };
  switch (frame.type) {
    case FrameType::kOpen: {
      if ((id % 2) == (next_id_ % 2))
        return violation("the peer opened a stream of this end's ids");
      if (s) return violation("opened twice");
      if (!on_open_) {
        send_(EncodeFrame(FrameType::kRefused, id, "this end accepts no streams"));
        return {};
      }
      auto state = std::make_unique<State>();
      state->phase = State::Phase::kAccepting;
      state->stream = std::make_shared<Stream>(weak_from_this(), id);
      std::shared_ptr<Stream> stream = state->stream;
      streams_.emplace(id, std::move(state));
      OnOpen on_open = on_open_;
      lock.unlock();
      on_open(std::move(stream), std::move(frame.payload));
      return {};
    }
    case FrameType::kOpened:
    case FrameType::kRefused: {
      if (!s) return {};  // reset meanwhile
      if (s->phase != State::Phase::kOpening) return violation("answered an open twice");
      Opened opened = std::move(s->opened);
      std::shared_ptr<Stream> stream = s->stream;
      if (frame.type == FrameType::kRefused) {
        Forget(id);
        lock.unlock();
        opened(
            MakeError(ErrorCode::kUnavailable, frame.payload.empty() ? "refused" : frame.payload));
        return {};
      }
      s->phase = State::Phase::kOpen;
      Pump(*s);
      std::shared_ptr<Receiver> receiver = s->receiver;
      lock.unlock();
      opened(std::move(stream));
      receiver->Drain();
      return {};
    }
    case FrameType::kData: {
      if (!s) return {};  // data in flight when this end reset the stream
      if (s->phase != State::Phase::kOpen) return violation("data before the stream is open");
      if (s->peer_ended) return violation("data after END");
      if (frame.payload.size() > s->peer_allowed) {
        send_(EncodeFrame(FrameType::kReset, id, "the peer sent past its window"));
        s->receiver->Post({Event::kReset, "the peer sent past its window"});
        drain.push_back(s->receiver);
        Forget(id);
        break;
      }
      s->peer_allowed -= frame.payload.size();
      s->receiver->Post({Event::kData, std::move(frame.payload)});
      drain.push_back(s->receiver);
      break;
    }
    case FrameType::kWindow: {
      if (!s) return {};
      s->credit += WindowIncrement(frame);
      Pump(*s);
      drain.push_back(s->receiver);
      break;
    }
    case FrameType::kEnd: {
      if (!s) return {};
      if (s->peer_ended) return violation("END twice");
      s->peer_ended = true;
      s->receiver->Post({Event::kEnd, {}});
      drain.push_back(s->receiver);
      if (s->end_sent) {
        s->receiver->Post({Event::kFinal, {}});
        Forget(id);
      }
      break;
    }
    case FrameType::kReset: {
      if (!s) return {};
      if (s->phase == State::Phase::kOpening) {
        // A reset instead of an answer: the open failed.
        Opened opened = std::move(s->opened);
        Forget(id);
        lock.unlock();
        opened(MakeError(ErrorCode::kUnavailable, frame.payload));
        return {};
      }
      s->receiver->Post(
          {Event::kReset, frame.payload.empty() ? "reset by the peer" : frame.payload});
      drain.push_back(s->receiver);
      Forget(id);
      break;
    }
  }
  lock.unlock();
  DrainAll(drain);
  return {};
}

void Session::Close(std::string reason) {
  std::vector<Opened> failed;
  DrainList drain;
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    close_reason_ = reason;
    for (auto& [id, s] : streams_) {
      if (s->phase == State::Phase::kOpening) {
        failed.push_back(std::move(s->opened));
      } else {
        s->receiver->Post({Event::kReset, reason});
        drain.push_back(s->receiver);
      }
    }
    streams_.clear();
  }
  for (Opened& done : failed) {
    done(MakeError(ErrorCode::kUnavailable, "the tunnel closed: " + reason));
  }
  DrainAll(drain);
}

// --- Stream ---

void Stream::SetHandlers(StreamHandlers handlers) {
  std::shared_ptr<Session> session = session_.lock();
  if (!session) {
    if (handlers.on_reset) handlers.on_reset("the tunnel is gone");
    return;
  }
  std::shared_ptr<Receiver> receiver;
  {
    std::lock_guard lock(session->mu_);
    if (Session::State* s = session->Find(id_)) receiver = s->receiver;
  }
  if (!receiver) {
    // Over before anyone listened: the session no longer knows how it ended.
    if (handlers.on_reset) handlers.on_reset("the stream is over");
    return;
  }
  receiver->SetHandlers(std::move(handlers));
}

bool Stream::Write(std::string bytes) {
  std::shared_ptr<Session> session = session_.lock();
  if (!session) return false;
  DrainList drain;
  {
    std::lock_guard lock(session->mu_);
    Session::State* s = session->Find(id_);
    if (!s || s->end_queued) return false;
    if (bytes.empty()) return true;
    s->backlog += bytes.size();
    s->outbox.push_back(std::move(bytes));
    session->Pump(*s);
    drain.push_back(s->receiver);
  }
  DrainAll(drain);
  return true;
}

size_t Stream::Backlog() const {
  std::shared_ptr<Session> session = session_.lock();
  if (!session) return 0;
  std::lock_guard lock(session->mu_);
  const Session::State* s = session->Find(id_);
  return s ? s->backlog : 0;
}

bool Stream::Saturated() const {
  std::shared_ptr<Session> session = session_.lock();
  if (!session) return false;
  std::lock_guard lock(session->mu_);
  Session::State* s = session->Find(id_);
  if (!s || s->backlog < kBacklogHighWater) return false;
  s->want_writable = true;
  return true;
}

void Stream::Consumed(size_t bytes) {
  std::shared_ptr<Session> session = session_.lock();
  if (!session || bytes == 0) return;
  std::lock_guard lock(session->mu_);
  Session::State* s = session->Find(id_);
  if (!s || s->peer_ended) return;
  s->unacked += bytes;
  // Grants go in batches of a quarter window, so small reads do not each cost a frame.
  if (s->unacked >= kInitialWindow / 4 || s->peer_allowed < kInitialWindow / 4) {
    const auto grant = static_cast<uint32_t>(std::min<uint64_t>(s->unacked, UINT32_MAX));
    session->send_(EncodeWindow(id_, grant));
    s->peer_allowed += grant;
    s->unacked -= grant;
  }
}

bool Stream::Live() const {
  std::shared_ptr<Session> session = session_.lock();
  if (!session) return false;
  std::lock_guard lock(session->mu_);
  return session->Find(id_) != nullptr;
}

void Stream::End() {
  std::shared_ptr<Session> session = session_.lock();
  if (!session) return;
  DrainList drain;
  {
    std::lock_guard lock(session->mu_);
    Session::State* s = session->Find(id_);
    if (!s || s->end_queued) return;
    s->end_queued = true;
    session->Pump(*s);
    drain.push_back(s->receiver);
    if (s->end_sent && s->peer_ended) {
      s->receiver->Post({Event::kFinal, {}});
      session->Forget(id_);
    }
  }
  DrainAll(drain);
}

void Stream::Reset(std::string reason) {
  std::shared_ptr<Session> session = session_.lock();
  if (!session) return;
  std::lock_guard lock(session->mu_);
  Session::State* s = session->Find(id_);
  if (!s) return;
  if (!session->closed_) session->send_(EncodeFrame(FrameType::kReset, id_, reason));
  s->receiver->Silence();
  session->Forget(id_);
}

void Stream::Accept() {
  std::shared_ptr<Session> session = session_.lock();
  if (!session) return;
  DrainList drain;
  {
    std::lock_guard lock(session->mu_);
    Session::State* s = session->Find(id_);
    if (!s || s->phase != Session::State::Phase::kAccepting) return;
    s->phase = Session::State::Phase::kOpen;
    session->send_(EncodeFrame(FrameType::kOpened, id_));
    session->Pump(*s);
    drain.push_back(s->receiver);
  }
  DrainAll(drain);
}

void Stream::Refuse(std::string reason) {
  std::shared_ptr<Session> session = session_.lock();
  if (!session) return;
  std::lock_guard lock(session->mu_);
  Session::State* s = session->Find(id_);
  if (!s || s->phase != Session::State::Phase::kAccepting) return;
  session->send_(EncodeFrame(FrameType::kRefused, id_, reason));
  s->receiver->Silence();
  session->Forget(id_);
}

// --- Pipe ---

void Pipe(std::shared_ptr<Stream> stream, std::shared_ptr<Duplex> duplex,
          std::function<void()> on_duplex_data) {
  StreamHandlers from_stream;
  from_stream.on_data = [duplex](std::string bytes) { duplex->Send(std::move(bytes)); };
  from_stream.on_end = [duplex] { duplex->End(); };
  from_stream.on_reset = [duplex](std::string reason) { duplex->Close(std::move(reason)); };
  from_stream.on_writable = [duplex] { duplex->Resume(); };
  DuplexHandlers from_duplex;
  from_duplex.on_data = [stream, on_duplex_data = std::move(on_duplex_data)](std::string bytes) {
    if (on_duplex_data) on_duplex_data();
    if (!stream->Write(std::move(bytes))) return false;  // over: its reset closes the duplex
    return !stream->Saturated();
  };
  from_duplex.on_end = [stream] { stream->End(); };
  from_duplex.on_sent = [stream](size_t bytes) { stream->Consumed(bytes); };
  from_duplex.on_closed = [stream](std::string why) {
    if (!why.empty()) stream->Reset(std::move(why));
  };
  stream->SetHandlers(std::move(from_stream));
  duplex->Start(std::move(from_duplex));
}

}  // namespace gpupool::api::tunnel
