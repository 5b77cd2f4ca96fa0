// Wire types of telemetry (docs/api.md "Telemetry"): the batch an agent ships (usage sampled at
// 1 Hz, task output as base64 at the offsets it continues from), the server's answer, and what
// users read back — logs, metric histories and the usage overview of `gpupool top`.
// Gauges are null (or left out) where not measured.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "proto/common.h"
#include "proto/describe.h"

namespace gpupool::proto {

inline constexpr size_t kMaxTelemetrySamples = 1000;
inline constexpr size_t kMaxTelemetryTasks = 1000;
inline constexpr size_t kMaxOutputChunkBytes = 8 << 20;  // base64 text of one chunk

// Usage over the second before time_ms: a task's (its cgroup, its GPUs) or a node's.
struct UsageSample {
  int64_t time_ms = 0;
  std::optional<int64_t> cpu_milli;
  std::optional<int64_t> memory_mib;
  std::optional<int64_t> gpu_util_pct;
  std::optional<int64_t> gpu_mem_mib;
  static constexpr std::string_view kName = "UsageSample";
  static constexpr std::string_view kDoc = "Usage over the second before time_ms.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("time_ms", s.time_ms, {.required = true, .min = 1});
    v("cpu_milli", s.cpu_milli, {.nullable = true, .min = 0});
    v("memory_mib", s.memory_mib, {.nullable = true, .min = 0});
    v("gpu_util_pct", s.gpu_util_pct, {.nullable = true, .min = 0, .max = 100});
    v("gpu_mem_mib", s.gpu_mem_mib, {.nullable = true, .min = 0});
  }
};

struct GpuSample {
  int32_t index = 0;
  std::optional<int64_t> util_pct;
  std::optional<int64_t> mem_used_mib;
  static constexpr std::string_view kName = "GpuSample";
  static constexpr std::string_view kDoc = "One GPU's usage in a node sample.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("index", s.index, {.required = true, .min = 0, .max = 63, .doc = "In index order"});
    v("util_pct", s.util_pct, {.nullable = true, .min = 0, .max = 100});
    v("mem_used_mib", s.mem_used_mib, {.nullable = true, .min = 0});
  }
};

struct NodeSample : UsageSample {
  std::vector<GpuSample> gpus;
  static constexpr std::string_view kName = "NodeSample";
  static constexpr std::string_view kDoc = "A node's usage and each of its GPUs'.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    UsageSample::Describe(v, static_cast<Like<Self, UsageSample>&>(s));
    v("gpus", s.gpus, {.max_items = 64});
  }
};

struct OutputChunk {
  std::string stream;
  int64_t offset = 0;
  std::string data_b64;
  static constexpr std::string_view kName = "OutputChunk";
  static constexpr std::string_view kDoc = "Bytes of a task's output stream from an offset.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("stream", s.stream, {.required = true, .one_of = kOutputStreams});
    v("offset", s.offset, {.required = true, .min = 0, .doc = "Of this run's stream"});
    v("data_b64", s.data_b64,
      {.required = true, .max_bytes = kMaxOutputChunkBytes, .format = Format::kBase64});
  }
};

struct TaskTelemetry {
  std::string task_id;
  int64_t bound_ms = 0;
  std::vector<UsageSample> samples;
  std::vector<OutputChunk> output;
  bool complete = false;
  static constexpr std::string_view kName = "TaskTelemetry";
  static constexpr std::string_view kDoc = "One task's part of an agent's batch.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task_id", s.task_id, {.required = true, .format = Format::kIdentifier});
    v("bound_ms", s.bound_ms, {.min = 0, .doc = "The binding it is about"});
    v("samples", s.samples, {.max_items = kMaxTelemetrySamples});
    v("output", s.output, {.max_items = 3, .doc = "At most one chunk per stream"});
    v("complete", s.complete, {.doc = "The task ended and every byte was shipped"});
  }
};

// POST /v1/agent/nodes/{name}/telemetry.
struct TelemetryBatch {
  std::vector<NodeSample> samples;
  std::vector<TaskTelemetry> tasks;
  static constexpr std::string_view kName = "TelemetryBatch";
  static constexpr std::string_view kDoc =
      "What an agent ships: its node's and tasks' usage and output.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("samples", s.samples, {.max_items = kMaxTelemetrySamples});
    v("tasks", s.tasks, {.max_items = kMaxTelemetryTasks});
  }
};

struct OutputOffsets {
  std::string task_id;
  int64_t stdout = 0;
  int64_t stderr = 0;
  int64_t metrics = 0;
  bool refused = false;
  static constexpr std::string_view kName = "OutputOffsets";
  static constexpr std::string_view kDoc = "How much of each stream the server holds.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task_id", s.task_id);
    v("stdout", s.stdout);
    v("stderr", s.stderr);
    v("metrics", s.metrics);
    v("refused", s.refused, {.doc = "Not this node's task (any more): stop shipping it"});
  }
};

struct TelemetryAck {
  std::vector<OutputOffsets> tasks;
  static constexpr std::string_view kName = "TelemetryAck";
  static constexpr std::string_view kDoc = "Where each task's next batch continues.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("tasks", s.tasks);
  }
};

inline constexpr int64_t kMaxLogBytes = 4 << 20;
inline constexpr int64_t kMaxLogWaitMs = 30'000;

struct LogQuery {
  std::string stream = "stdout";
  std::optional<int64_t> offset;
  std::optional<int64_t> tail;
  int64_t max_bytes = 1 << 20;
  int64_t wait_ms = 0;
  static constexpr std::string_view kName = "LogQuery";
  static constexpr std::string_view kDoc = "Which bytes of a task's output to read.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("stream", s.stream, {.one_of = kOutputStreams});
    v("offset", s.offset, {.min = 0, .doc = "Where to start"});
    v("tail", s.tail, {.min = 0, .max = 1'000'000, .doc = "Start at the last N lines instead"});
    v("max_bytes", s.max_bytes, {.min = 1, .max = kMaxLogBytes});
    v("wait_ms", s.wait_ms, {.min = 0, .max = kMaxLogWaitMs, .doc = "Follow: wait for bytes"});
  }
};

struct LogSlice {
  std::string task_id;
  std::string stream;
  int64_t offset = 0;
  int64_t next_offset = 0;
  int64_t size = 0;
  std::string data_b64;
  bool truncated = false;
  bool complete = false;
  static constexpr std::string_view kName = "LogSlice";
  static constexpr std::string_view kDoc = "Bytes of a task's output stream.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task_id", s.task_id);
    v("stream", s.stream, {.one_of = kOutputStreams});
    v("offset", s.offset, {.doc = "Where data starts"});
    v("next_offset", s.next_offset, {.doc = "Where to continue"});
    v("size", s.size, {.doc = "Bytes stored for the stream"});
    v("data_b64", s.data_b64, {.format = Format::kBase64});
    v("truncated", s.truncated, {.doc = "The stream reached its size limit"});
    v("complete", s.complete, {.doc = "Nothing more will come"});
  }
};

struct HistoryQuery {
  std::optional<int64_t> from_ms;
  std::optional<int64_t> to_ms;
  std::string resolution = "raw";
  static constexpr std::string_view kName = "HistoryQuery";
  static constexpr std::string_view kDoc = "A span of a usage history.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("from_ms", s.from_ms, {.min = 0, .doc = "Default: 5 minutes (raw) or 24 hours (1m) ago"});
    v("to_ms", s.to_ms, {.min = 0, .doc = "Default: now"});
    v("resolution", s.resolution, {.one_of = kResolutions});
  }
};

struct UsageGauges {
  std::optional<int64_t> cpu_milli;
  std::optional<int64_t> memory_mib;
  std::optional<int64_t> gpu_util_pct;
  std::optional<int64_t> gpu_mem_mib;
  static constexpr std::string_view kName = "UsageGauges";
  static constexpr std::string_view kDoc = "Usage gauges; null where not measured.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("cpu_milli", s.cpu_milli, {.nullable = true});
    v("memory_mib", s.memory_mib, {.nullable = true});
    v("gpu_util_pct", s.gpu_util_pct, {.nullable = true});
    v("gpu_mem_mib", s.gpu_mem_mib, {.nullable = true});
  }
};

struct GpuGauges {
  std::optional<int64_t> util_pct;
  std::optional<int64_t> mem_used_mib;
  static constexpr std::string_view kName = "GpuGauges";
  static constexpr std::string_view kDoc = "A GPU's gauges; null where not measured.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("util_pct", s.util_pct, {.nullable = true});
    v("mem_used_mib", s.mem_used_mib, {.nullable = true});
  }
};

template <typename Gauges>
struct HistoryPoint {
  int64_t time_ms = 0;
  int64_t samples = 0;
  Gauges mean;
  Gauges max;
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("time_ms", s.time_ms, {.doc = "The end of the interval"});
    v("samples", s.samples, {.doc = "How many samples it aggregates"});
    v("mean", s.mean);
    v("max", s.max);
  }
};

struct UsagePoint : HistoryPoint<UsageGauges> {
  static constexpr std::string_view kName = "UsagePoint";
  static constexpr std::string_view kDoc = "Usage over an interval: mean and max.";
};

struct GpuPoint : HistoryPoint<GpuGauges> {
  static constexpr std::string_view kName = "GpuPoint";
  static constexpr std::string_view kDoc = "A GPU's usage over an interval: mean and max.";
};

struct ReportedMetrics {
  int64_t time_ms = 0;
  std::map<std::string, double> values;
  static constexpr std::string_view kName = "ReportedMetrics";
  static constexpr std::string_view kDoc = "Metric values a task reported, as received.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("time_ms", s.time_ms);
    v("values", s.values);
  }
};

struct TaskMetrics {
  std::string task_id;
  std::string resolution;
  std::vector<UsagePoint> usage;
  std::vector<ReportedMetrics> reported;
  std::map<std::string, double> latest;
  static constexpr std::string_view kName = "TaskMetrics";
  static constexpr std::string_view kDoc = "A task's sampled usage and the metrics it reported.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task_id", s.task_id);
    v("resolution", s.resolution, {.one_of = kResolutions});
    v("usage", s.usage);
    v("reported", s.reported, {.doc = "The last ones received, oldest first"});
    v("latest", s.latest, {.doc = "Each metric's latest value, and the built-ins"});
  }
};

struct NodeMetrics {
  std::string node;
  std::string resolution;
  std::vector<UsagePoint> usage;
  std::vector<std::vector<GpuPoint>> gpus;
  static constexpr std::string_view kName = "NodeMetrics";
  static constexpr std::string_view kDoc = "A node's sampled usage and each GPU's.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("node", s.node);
    v("resolution", s.resolution, {.one_of = kResolutions});
    v("usage", s.usage);
    v("gpus", s.gpus, {.doc = "By GPU index"});
  }
};

struct NodeUsage {
  std::string name;
  std::string status;
  int64_t gpus = 0;
  std::optional<NodeSample> latest;
  static constexpr std::string_view kName = "NodeUsage";
  static constexpr std::string_view kDoc = "A node's latest usage.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("name", s.name);
    v("status", s.status, {.one_of = kNodeStatuses});
    v("gpus", s.gpus, {.doc = "How many GPUs it has"});
    v("latest", s.latest, {.nullable = true});
  }
};

struct TaskUsageRow {
  std::string id;
  std::string name;
  std::string project;
  std::string node;
  std::vector<int32_t> gpus;
  std::optional<UsageSample> latest;
  std::map<std::string, double> reported;
  static constexpr std::string_view kName = "TaskUsageRow";
  static constexpr std::string_view kDoc = "A running task's latest usage and metrics.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("id", s.id);
    v("name", s.name);
    v("project", s.project);
    v("node", s.node);
    v("gpus", s.gpus);
    v("latest", s.latest, {.nullable = true});
    v("reported", s.reported, {.doc = "The latest value of each metric it reported"});
  }
};

struct QueueSummary {
  int64_t waiting = 0;
  int64_t held = 0;
  std::optional<std::string> oldest_task;
  std::optional<int64_t> oldest_since_ms;
  static constexpr std::string_view kName = "QueueSummary";
  static constexpr std::string_view kDoc = "The queue of the caller's projects.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("waiting", s.waiting, {.doc = "Pending tasks not held"});
    v("held", s.held, {.doc = "Pending tasks held (not queued until released)"});
    v("oldest_task", s.oldest_task, {.nullable = true, .doc = "The one waiting longest"});
    v("oldest_since_ms", s.oldest_since_ms,
      {.nullable = true, .doc = "When it entered the queue (submitted, released or re-queued)"});
  }
};

struct UsageOverview {
  std::vector<NodeUsage> nodes;
  std::vector<TaskUsageRow> tasks;
  QueueSummary queue;
  static constexpr std::string_view kName = "UsageOverview";
  static constexpr std::string_view kDoc = "The latest usage of what the caller may see.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("nodes", s.nodes);
    v("tasks", s.tasks, {.doc = "Running tasks"});
    v("queue", s.queue);
  }
};

}  // namespace gpupool::proto
