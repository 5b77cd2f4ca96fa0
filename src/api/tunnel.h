// The tunnel's multiplexer (docs/api.md "The tunnel"): many byte streams over one message
// channel between the server and a node's agent, each with its own credit window, so a stream
// whose reader is slow holds up only itself. Transport-agnostic: a Session is handed each
// message received (OnMessage) and sends through a function (in practice a WebSocket Duplex);
// tunnel_hub.h (server) and agent/tunnel_agent.h (agent) put one on each end. Pipe joins a
// stream to a Duplex (a TCP connection, a browser's connection, a CLI's WebSocket).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "api/duplex.h"
#include "core/result.h"

namespace gpupool::api::tunnel {

// The credit each side grants a new stream before it has read anything, in bytes.
inline constexpr uint32_t kInitialWindow = 1 << 20;
// Stream::Saturated: what a writer may queue past the credit before it should wait for
// on_writable.
inline constexpr size_t kBacklogHighWater = 256 * 1024;

// What a stream tells its reader. Called one at a time per stream, in order, never under the
// session's lock; they must not block.
struct StreamHandlers {
  // Bytes from the peer. Call Stream::Consumed once they are passed on, to grant more.
  std::function<void(std::string bytes)> on_data;
  // The peer sends no more (END).
  std::function<void()> on_end;
  // The stream is over without a clean end: the peer's RESET, or the tunnel dropped. Last.
  std::function<void(std::string reason)> on_reset;
  // The backlog fell below half of kBacklogHighWater after Saturated() was true.
  std::function<void()> on_writable;
};

class Session;

// One stream. Thread-safe; a shared_ptr keeps it usable after the session is gone (its calls
// then do nothing).
class Stream {
 public:
  uint32_t id() const { return id_; }
  // Whether the stream is still open on this end (neither finished both ways, reset nor closed
  // with its tunnel). Once false, never true again.
  bool Live() const;

  // Starts delivering to `handlers` (what arrived before is delivered first). Once.
  void SetHandlers(StreamHandlers handlers);
  // Queues bytes for the peer; they go as its credit allows. False, nothing queued, when the
  // stream is over or this side ended it.
  bool Write(std::string bytes);
  // Bytes written and not yet sent for want of credit.
  size_t Backlog() const;
  // Whether a writer should wait for on_writable before writing more.
  bool Saturated() const;
  // `bytes` of what on_data delivered are passed on: the peer may send that much more.
  void Consumed(size_t bytes);
  // Half-close: END after what is queued.
  void End();
  // Aborts the stream (RESET with `reason`); its handlers hear nothing more.
  void Reset(std::string reason);

  // For the agent, on a stream the peer opened: OPENED (the target is reached) or REFUSED.
  void Accept();
  void Refuse(std::string reason);

  Stream(std::weak_ptr<Session> session, uint32_t id) : session_(std::move(session)), id_(id) {}

 private:
  const std::weak_ptr<Session> session_;
  const uint32_t id_;
};

// One end of a tunnel.
class Session : public std::enable_shared_from_this<Session> {
 public:
  // Sends one message to the peer (called under the session's lock, in order; must not block
  // or call back into the session).
  using SendFn = std::function<void(std::string message)>;
  // A stream the peer opened, with its OPEN payload. The acceptor calls Accept or Refuse (now
  // or later, from any thread). Called without the lock, from OnMessage's thread.
  using OnOpen = std::function<void(std::shared_ptr<Stream> stream, std::string payload)>;
  using Opened = std::function<void(Result<std::shared_ptr<Stream>>)>;

  // `odd_ids`: the ids of the streams this end opens are odd (the server) or even (the agent).
  static std::shared_ptr<Session> Create(SendFn send, bool odd_ids, OnOpen on_open = {});
  ~Session();

  // Opens a stream to the peer: `done` gets it once the peer answers OPENED, or the REFUSED
  // reason as kUnavailable, or kUnavailable when the session is closed (by then or later).
  void Open(std::string payload, Opened done);

  // One message from the peer. An error is a protocol violation: the caller closes the tunnel.
  Status OnMessage(std::string_view message);

  // The tunnel is gone: every stream is reset with `reason`, every open waiting fails. Later
  // calls do nothing.
  void Close(std::string reason);

  // Streams open now (opening, open or half-closed).
  size_t stream_count() const;

 private:
  friend class Stream;
  struct State;  // one stream's
  Session(SendFn send, bool odd_ids, OnOpen on_open);

  // Sends the DATA the credit allows, then END when due; fires on_writable. Under mu_.
  void Pump(State& s);
  void Forget(uint32_t id);  // under mu_
  State* Find(uint32_t id);  // under mu_

  mutable std::mutex mu_;
  SendFn send_;
  OnOpen on_open_;
  uint32_t next_id_;
  bool closed_ = false;
  std::string close_reason_;
  std::unordered_map<uint32_t, std::unique_ptr<State>> streams_;
};

// Joins `stream` and `duplex`: the stream's bytes go to the duplex and the duplex's to the
// stream, each paced by the other's back-pressure (the stream's credit, the duplex's on_sent);
// the end of one side's sending ends the other's, and an abort on one side aborts the other.
// Sets both's handlers (and starts the duplex). `on_duplex_data`, when set, is called at each
// chunk the duplex delivers (the user's side of a session: its interactive activity).
void Pipe(std::shared_ptr<Stream> stream, std::shared_ptr<Duplex> duplex,
          std::function<void()> on_duplex_data = {});

}  // namespace gpupool::api::tunnel
