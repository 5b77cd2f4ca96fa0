// EventService: live events for the console (GET /v1/events) — changes of the tasks the caller
// sees, a watched task's usage, stdout and reported metrics, the nodes' changes and usage — as
// they happen, to a sink the API writes to its client. The events are the control plane's own
// records; the API renders them as proto/events.h's wire types.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "core/records.h"
#include "core/result.h"
#include "server/caller.h"
#include "server/node_service.h"
#include "server/telemetry_service.h"

namespace gpupool::server {

// What a subscriber wants besides the changes of the tasks it sees.
struct EventInterest {
  std::string task;                  // "": none; else its usage, stdout and metrics too
  std::optional<int64_t> logs_from;  // the stdout offset to start at; nullopt: what comes next
  bool nodes = false;                // node changes and node usage
};

struct StreamStarted {
  int64_t time_ms = 0;
};
struct TaskDeletedEvent {
  std::string id;
};
struct TaskUsageEvent {
  std::string task;
  UsageSample sample;
};
struct TaskLogEvent {  // stdout bytes at `offset` of the stored stream (GET …/logs offsets)
  std::string task;
  int64_t offset = 0;
  std::string data;
};
struct TaskMetricsEvent {
  std::string task;
  ReportedMetrics metrics;
};
struct NodeUsageEvent {
  std::string node;
  NodeSample sample;
};
// Task: a task was submitted or changed (its record as the store keeps it). NodeView: a node
// registered or changed (its tasks only for admins).
using Event = std::variant<StreamStarted, Task, TaskDeletedEvent, TaskUsageEvent, TaskLogEvent,
                           TaskMetricsEvent, NodeUsageEvent, NodeView>;

// Where one subscriber's events go. Called on the event hub's own thread, one call at a time,
// with no lock of the control plane held; a call must not block for long (the API's sink
// copies into its stream's bounded buffer).
class EventSink {
 public:
  virtual ~EventSink() = default;
  // One event. False: the subscriber is gone or cannot keep up; it gets no further call.
  virtual bool Deliver(const Event& event) = 0;
  // Nothing was delivered for the keep-alive interval. False as for Deliver.
  virtual bool KeepAlive() = 0;
  // The last call: more than `limit` events waited for this subscriber (it reads too slowly).
  virtual void Overflowed(size_t limit) = 0;
};

class EventService {
 public:
  virtual ~EventService() = default;

  // Whether `caller` may watch `interest`: the watched task must be one it sees (NotFound
  // otherwise, as for GET /v1/tasks/{id}). `done` runs at once, or after a store read for a task
  // that left memory.
  virtual void CheckWatch(const Caller& caller, const EventInterest& interest, DoneStatus done) = 0;
  // From now on `sink` gets a StreamStarted, then (with interest.logs_from) the stored stdout
  // from that offset, then every event `caller` may see that `interest` names, in the order
  // they happened. Returns the subscription's id.
  virtual uint64_t Subscribe(const Caller& caller, EventInterest interest,
                             std::shared_ptr<EventSink> sink) = 0;
  // Ends a subscription: its sink gets no further call, but for what the hub's thread is handing
  // over at that moment. Unknown ids are ignored.
  virtual void Unsubscribe(uint64_t id) = 0;
};

}  // namespace gpupool::server
