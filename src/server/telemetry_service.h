// TelemetryService: what agents ship (usage sampled at 1 Hz, their tasks' output, the metric
// lines tasks append to $GPUPOOL_METRICS_FILE) and what users read of it (logs, usage and
// reported-metric histories, the `gpupool top` overview).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/records.h"
#include "core/result.h"
#include "core/stop_condition.h"
#include "server/caller.h"
#include "server/metric_history.h"

namespace gpupool::server {

// Usage over the second before time_ms, gauges in usage:: order (cpu_milli, memory_mib,
// gpu_util_pct, gpu_mem_mib; kUnknown where not measured): a task's (its cgroup, its GPUs) or a
// node's (the machine, all its GPUs).
using UsageSample = Sample<usage::kGauges>;
using UsagePoint = HistoryPoint<usage::kGauges>;
using GpuSample = Sample<gpu_usage::kGauges>;
using GpuPoint = HistoryPoint<gpu_usage::kGauges>;

struct NodeSample {
  UsageSample usage;
  std::vector<GpuSample> gpus;  // by GPU index (each with the node sample's time)
};

// What a task writes that the pool keeps: its stdout, its stderr, and the metric lines it appends
// to $GPUPOOL_METRICS_FILE.
enum class OutputStream { kStdout, kStderr, kMetrics };

inline std::string_view OutputStreamName(OutputStream s) {
  switch (s) {
    case OutputStream::kStdout:
      return "stdout";
    case OutputStream::kStderr:
      return "stderr";
    case OutputStream::kMetrics:
      return "metrics";
  }
  return "stdout";
}

inline std::optional<OutputStream> ParseOutputStream(std::string_view name) {
  for (OutputStream s : {OutputStream::kStdout, OutputStream::kStderr, OutputStream::kMetrics}) {
    if (OutputStreamName(s) == name) return s;
  }
  return std::nullopt;
}

// Bytes of a stored output stream.
struct OutputSlice {
  int64_t offset = 0;  // where `data` starts
  std::string data;
  int64_t next_offset = 0;  // offset + data.size(): where to continue
  int64_t size = 0;         // bytes stored for the stream
  bool truncated = false;   // the stream reached its size limit; later bytes were dropped
};

// Bytes of one of a task's output streams, starting at `offset` of the stream as this run wrote
// it.
struct OutputChunk {
  OutputStream stream = OutputStream::kStdout;
  int64_t offset = 0;
  std::string data;
};

struct TaskTelemetry {
  std::string task_id;
  int64_t bound_ms = 0;  // the binding it is about (another binding's telemetry is refused)
  std::vector<UsageSample> samples;
  std::vector<OutputChunk> output;
  bool output_complete = false;  // the task ended and every byte of its output has been shipped
};

// One batch from an agent.
struct NodeTelemetry {
  std::string node;
  std::vector<NodeSample> samples;
  std::vector<TaskTelemetry> tasks;
};

// How much of each output stream of the task's run the server holds: the agent continues there.
struct OutputOffsets {
  std::string task_id;
  int64_t stdout_bytes = 0;
  int64_t stderr_bytes = 0;
  int64_t metrics_bytes = 0;
  bool refused = false;  // not this node's task (any more): stop shipping it
};

struct LogRequest {
  OutputStream stream = OutputStream::kStdout;
  int64_t offset = 0;
  int64_t tail_lines = -1;  // ≥ 0: start at the last N lines instead of `offset`
  int64_t max_bytes = 1 << 20;
  int64_t wait_ms = 0;  // > 0: wait up to this long for bytes past `offset` (follow)
};

struct LogSlice {
  std::string task_id;
  OutputSlice slice;
  // Nothing more will come: the task ended and its agent shipped the last bytes (or it ended
  // long enough ago that nothing more is expected).
  bool complete = false;
};

// Metric values the task reported, as received.
struct ReportedMetrics {
  int64_t time_ms = 0;
  MetricValues values;
};

struct TaskMetrics {
  std::string task_id;
  Resolution resolution = Resolution::kRaw;
  std::vector<UsagePoint> usage;
  std::vector<ReportedMetrics> reported;  // the last ones received, oldest first
  MetricValues latest;                    // each reported metric's latest value, and the built-ins
};

struct NodeMetrics {
  std::string node;
  Resolution resolution = Resolution::kRaw;
  std::vector<UsagePoint> usage;
  std::vector<std::vector<GpuPoint>> gpus;  // by GPU index
};

// The latest usage of what the caller may see, for `gpupool top`.
struct UsageOverview {
  struct NodeRow {
    NodeInfo info;
    std::optional<NodeSample> latest;
  };
  struct TaskRow {
    Task task;
    std::optional<UsageSample> latest;
    MetricValues reported;  // the latest value of each metric the task reported
  };
  // The queue of the caller's projects: pending tasks not held, and the one waiting longest
  // (by when it entered the queue: submitted, released or re-queued).
  struct Queue {
    int64_t waiting = 0;
    int64_t held = 0;
    std::string oldest_id;  // empty when none waits
    int64_t oldest_since_ms = 0;
  };
  std::vector<NodeRow> nodes;
  std::vector<TaskRow> tasks;  // running tasks
  Queue queue;
};

class TelemetryService {
 public:
  virtual ~TelemetryService() = default;

  // An agent's batch (its node's tasks only): usage into the histories, output appended, the
  // complete lines of each metrics chunk parsed (metric_line.h) and stop conditions checked.
  // Answers how much output the server holds. The output files are written, and read below, on
  // the blocking-work executor: kUnavailable when its queue is full.
  virtual void PushTelemetry(const Caller& caller, NodeTelemetry batch,
                             Done<std::vector<OutputOffsets>> done) = 0;
  // A task's output from an offset or its last lines; with wait_ms, waits for new bytes.
  virtual void ReadTaskLog(const Caller& caller, const std::string& id, LogRequest request,
                           Done<LogSlice> done) = 0;
  // Sampled usage in [from_ms, to_ms], and the metrics the task reported. The history is kept in
  // memory only while the task is (a task that finished long ago has none; see TaskService).
  virtual void GetTaskMetrics(const Caller& caller, const std::string& id, int64_t from_ms,
                              int64_t to_ms, Resolution resolution, Done<TaskMetrics> done) = 0;
  virtual Result<NodeMetrics> GetNodeMetrics(const Caller& caller, const std::string& name,
                                             int64_t from_ms, int64_t to_ms,
                                             Resolution resolution) = 0;
  virtual Result<UsageOverview> GetUsage(const Caller& caller) = 0;
  // A user's interactive activity on running task `id` now (docs/api.md "Stop conditions"): the
  // built-in interactive_idle_s starts again from 0. The gateway, port-forward and exec call it
  // for the user's side of their traffic; in memory only.
  virtual void NoteActivity(const std::string& id) = 0;
};

}  // namespace gpupool::server
