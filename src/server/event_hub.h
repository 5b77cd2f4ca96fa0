// EventHub: the subscribers of the live events (event_service.h) and the one thread that feeds
// them. Publishers — the Controller's Commit, its telemetry ingest, the task output's appends —
// only copy the event once into a shared record and queue a pointer to it for each subscriber
// that may see it (under the hub's own lock, a leaf: nothing is taken while it is held); the
// hub's thread hands the queued events to the sinks with no lock held. So no publisher ever
// writes to a socket or waits for a reader, and with nobody subscribed a publish is one atomic
// load. Each subscriber's queue is bounded: past the limit it gets Overflowed and is dropped.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "server/event_service.h"

namespace gpupool::server {

struct EventHubOptions {
  size_t max_queued = 4096;  // events waiting per subscriber; past it: Overflowed
  std::chrono::milliseconds keep_alive{15'000};
  // A stdout catch-up (logs_from) is read in pieces of this size.
  int64_t log_read_bytes = 64 * 1024;
};

class EventHub {
 public:
  // Who sees a task (the Controller's MayView).
  using MayView = std::function<bool(const Caller&, const Task&)>;
  // Up to `max_bytes` of a task's stored stdout from `offset` ("" past its end); may block (file
  // I/O), and runs on the hub's thread.
  using ReadStdout = std::function<Result<std::string>(const std::string& task, int64_t offset,
                                                       int64_t max_bytes)>;

  EventHub(EventHubOptions options, MayView may_view, ReadStdout read_stdout);
  ~EventHub();  // Stop()
  EventHub(const EventHub&) = delete;
  EventHub& operator=(const EventHub&) = delete;

  // Ends the thread; sinks get no further call. Idempotent.
  void Stop();

  uint64_t Subscribe(const Caller& caller, EventInterest interest, std::shared_ptr<EventSink> sink,
                     int64_t now_ms);
  void Unsubscribe(uint64_t id);

  // Whether anyone subscribes: publishers test it before they copy anything.
  bool Active() const { return subscribers_.load(std::memory_order_relaxed) > 0; }

  // Each of these copies what it publishes only when a subscriber wants it.
  void PublishTask(const Task& task);
  void PublishTaskDeleted(const std::string& id, const std::string& project_id);
  void PublishNode(const NodeView& node);  // with its tasks; non-admins get it without
  void PublishUsage(const std::string& task, const UsageSample& sample);
  void PublishMetrics(const std::string& task, const ReportedMetrics& metrics);
  void PublishNodeUsage(const std::string& node, const NodeSample& sample);
  // Stdout bytes stored at `offset` of the task's stream.
  void PublishStdout(const std::string& task, int64_t offset, std::string_view data);

 private:
  using Clock = std::chrono::steady_clock;
  struct Subscriber {
    uint64_t id = 0;
    Caller caller;
    EventInterest interest;
    std::shared_ptr<EventSink> sink;
    // Under mu_:
    std::vector<std::shared_ptr<const Event>> queue;
    bool overflowed = false;
    // The hub's thread only:
    int64_t log_next = -1;  // the next stdout offset to send; -1: the first chunk's
    bool catch_up = false;  // read the stored stdout from log_next first
    Clock::time_point last_sent;
  };

  void EraseLocked(uint64_t id);
  // Queues `event` for `s` (requires mu_).
  void QueueLocked(Subscriber& s, const std::shared_ptr<const Event>& event);
  // Queues an event made by `make` (once) for every subscriber `wants` (takes mu_).
  void Publish(const std::function<bool(const Subscriber&)>& wants,
               const std::function<Event()>& make);
  void Run();
  // Hands `events` to the subscriber's sink; false: drop it.
  bool Deliver(Subscriber& s, const std::vector<std::shared_ptr<const Event>>& events,
               bool overflowed, Clock::time_point now);
  // The watched task's stdout: sends what `e` adds past log_next (reading a gap from the store).
  bool DeliverStdout(Subscriber& s, const TaskLogEvent& e);
  // Sends stored stdout from log_next up to `until` (or its end); false: the sink refused.
  bool CatchUp(Subscriber& s, int64_t until);

  const EventHubOptions options_;
  const MayView may_view_;
  const ReadStdout read_stdout_;
  std::atomic<size_t> subscribers_{0};

  std::mutex mu_;  // a leaf: guards what follows
  std::condition_variable cv_;
  std::map<uint64_t, std::shared_ptr<Subscriber>> subs_;
  uint64_t next_id_ = 1;
  bool work_ = false;  // a queue has events (or an overflow) to hand over
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gpupool::server
