// Wire types of the live event stream (docs/api.md "Live events", GET /v1/events): the query, the
// payload of every event, and the table that names each event and its payload type once — the
// server frames events from it (EventFrame), the OpenAPI document lists it (the answer's
// `x-gpupool-events`) and the console's client is written against that list. Events whose payload
// already is a wire type carry that type as it is: `task` a Task (as in GET /v1/tasks), `node` a
// Node (as in GET /v1/nodes), `task_deleted` a Deleted (as DELETE /v1/tasks/{id} answers).
//
// On the wire (text/event-stream, https://html.spec.whatwg.org/#server-sent-events), each event is
//   event: <name>\n
//   data: <its payload as one line of JSON>\n
//   \n
// and a comment line `: keep-alive` comes every 15 s while nothing else does.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "proto/common.h"
#include "proto/describe.h"
#include "proto/json_codec.h"
#include "proto/nodes.h"
#include "proto/tasks.h"
#include "proto/telemetry.h"

namespace gpupool::proto {

// GET /v1/events.
struct EventsQuery {
  std::optional<std::string> task;
  std::optional<int64_t> logs_from;
  bool nodes = false;
  static constexpr std::string_view kName = "EventsQuery";
  static constexpr std::string_view kDoc = "What to stream besides the caller's tasks' changes.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task", s.task,
      {.format = Format::kIdentifier,
       .doc = "Also stream this task's log, usage and metrics events"});
    v("logs_from", s.logs_from,
      {.min = 0, .doc = "With task: the stdout offset its log events start at; default: its end"});
    v("nodes", s.nodes,
      {.doc = "Also stream node and node_usage events (callers who may list nodes)"});
  }
};

// The answer of GET /v1/events: a stream of the events below (text/event-stream), not JSON.
struct EventStream {};

struct StreamHello {
  int64_t time_ms = 0;
  static constexpr std::string_view kName = "StreamHello";
  static constexpr std::string_view kDoc = "The stream is live: events from here on will come.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("time_ms", s.time_ms, {.doc = "The server's clock when the stream started"});
  }
};

struct TaskUsageEvent {
  std::string task;
  UsageSample sample;
  static constexpr std::string_view kName = "TaskUsageEvent";
  static constexpr std::string_view kDoc = "A usage sample of the watched task, as it arrived.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task", s.task);
    v("sample", s.sample);
  }
};

struct TaskLogEvent : OutputChunk {
  std::string task;
  static constexpr std::string_view kName = "TaskLogEvent";
  static constexpr std::string_view kDoc =
      "New bytes of the watched task's stdout, contiguous from the offset the stream started at.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task", s.task);
    OutputChunk::Describe(v, static_cast<Like<Self, OutputChunk>&>(s));
  }
};

struct TaskMetricsEvent : ReportedMetrics {
  std::string task;
  static constexpr std::string_view kName = "TaskMetricsEvent";
  static constexpr std::string_view kDoc = "Metric values the watched task reported (one line).";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task", s.task);
    ReportedMetrics::Describe(v, static_cast<Like<Self, ReportedMetrics>&>(s));
  }
};

struct NodeUsageEvent {
  std::string node;
  NodeSample sample;
  static constexpr std::string_view kName = "NodeUsageEvent";
  static constexpr std::string_view kDoc = "A usage sample of a node and its GPUs, as it arrived.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("node", s.node);
    v("sample", s.sample);
  }
};

struct StreamOverflow {
  int64_t time_ms = 0;
  std::string message;
  static constexpr std::string_view kName = "StreamOverflow";
  static constexpr std::string_view kDoc =
      "The client fell too far behind: the stream ends; reconnect and re-read with the GETs.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("time_ms", s.time_ms);
    v("message", s.message, {.doc = "For people: how far behind"});
  }
};

struct EventInfo {
  std::string_view name;  // the `event:` field
  std::string_view doc;
};

// Every event: its name and its payload type (Data).
#define GPUPOOL_EVENT(NAME, DATA, ...)             \
  struct NAME {                                    \
    using Data = DATA;                             \
    static constexpr EventInfo kInfo{__VA_ARGS__}; \
  }

namespace events {

GPUPOOL_EVENT(Hello, StreamHello, "hello", "First, once: the stream is live");
GPUPOOL_EVENT(TaskChanged, Task, "task",
              "A task the caller may see was submitted or changed (state, reason, held)");
GPUPOOL_EVENT(TaskDeleted, Deleted, "task_deleted", "A task the caller may see was deleted");
GPUPOOL_EVENT(Usage, TaskUsageEvent, "usage", "With task: each usage sample of it (about 1 Hz)");
GPUPOOL_EVENT(Log, TaskLogEvent, "log", "With task: new bytes of its stdout");
GPUPOOL_EVENT(Metrics, TaskMetricsEvent, "metrics", "With task: each metric line it reported");
GPUPOOL_EVENT(NodeUsage, NodeUsageEvent, "node_usage",
              "With nodes: each usage sample of every node (about 1 Hz per node)");
GPUPOOL_EVENT(NodeChanged, NodeView, "node",
              "With nodes: a node registered or changed (status, cordon, drain, tasks)");
GPUPOOL_EVENT(Overflow, StreamOverflow, "overflow",
              "Last: the client fell behind and the stream ends");

// Every event, in the order of the reference.
using All = std::tuple<Hello, TaskChanged, TaskDeleted, Usage, Log, Metrics, NodeUsage, NodeChanged,
                       Overflow>;

}  // namespace events

#undef GPUPOOL_EVENT

// Calls f.template operator()<Event>() for every event, in order.
template <typename F>
void ForEachEvent(F&& f) {
  [&]<typename... E>(std::tuple<E...>*) {
    (f.template operator()<E>(), ...);
  }(static_cast<events::All*>(nullptr));
}

// One event as it goes on the stream: "event: <name>\ndata: <JSON>\n\n".
template <typename E>
std::string EventFrame(const typename E::Data& data) {
  std::string out = "event: ";
  out += E::kInfo.name;
  out += "\ndata: ";
  out += Dump(Encode(data));  // one line: JSON escapes line breaks inside strings
  out += "\n\n";
  return out;
}

// What keeps an idle stream alive (and lets either side notice a dead connection).
inline constexpr std::string_view kKeepAliveFrame = ": keep-alive\n\n";
inline constexpr int64_t kKeepAliveIntervalMs = 15'000;

}  // namespace gpupool::proto
