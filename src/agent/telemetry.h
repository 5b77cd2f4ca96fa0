// The agent's telemetry: usage sampled at 1 Hz (the node: CPU, memory, each GPU; each task: CPU
// and memory from its cgroup, utilisation and memory of its GPUs) and each task's output
// (stdout, stderr, its metrics file) read past what the server acknowledged — put together as
// the batches of POST /v1/agent/nodes/{name}/telemetry. The server answers with how much of each
// stream it holds; the collector continues from there, so nothing is lost or sent twice across
// retries and agent restarts. Used by the agent's control thread only (not thread-safe).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/gpu/gpu_probe.h"
#include "agent/runtime/task_runtime.h"
#include "core/result.h"
#include "proto/telemetry.h"

namespace gpupool::agent {

// Busy and total jiffies of the first line of /proc/stat ("cpu  user nice system idle iowait
// irq softirq steal …"); nullopt when it does not parse.
struct CpuTimes {
  uint64_t busy = 0;
  uint64_t total = 0;
};
std::optional<CpuTimes> ParseCpuTimes(std::string_view text);
// MemTotal − MemAvailable of /proc/meminfo, in MiB; nullopt when either is missing.
std::optional<int64_t> ParseMemInfoUsedMib(std::string_view text);

struct TelemetryOptions {
  int64_t cpu_milli = 0;             // the node's CPU capacity (milli-cores), to scale /proc/stat
  int64_t ship_interval_ms = 5'000;  // samples travel at least this often; output at once
  int64_t max_chunk_bytes = 64 * 1024;          // per stream and batch
  int64_t max_batch_output_bytes = 512 * 1024;  // all tasks' output in one batch (the request,
                                                // base64, stays under the server's 1 MiB limit)
  size_t max_samples = 600;  // kept while the server cannot be reached (older ones dropped)
};

class TelemetryCollector {
 public:
  TelemetryCollector(std::string node, TaskRuntime& runtime, GpuProbe& probe,
                     TelemetryOptions options);

  // Starts following a task (launched or adopted): `gpu_uuids` are the GPUs or MIG instances it
  // uses, `bound_ms` its binding (0: unknown).
  void Track(const std::string& task_id, int64_t bound_ms, std::vector<std::string> gpu_uuids);
  // Its process ended: the rest of its output is shipped, then the server is told it is complete.
  // A task not tracked yet (it ended while the agent was away) is tracked from here.
  void Ended(const std::string& task_id, int64_t bound_ms);
  bool Tracking(const std::string& task_id) const { return tasks_.count(task_id) > 0; }

  // Samples the node and every running tracked task (call at about 1 Hz).
  void Sample(int64_t now_ms);

  // The next batch: the samples taken since the last batch and the output past what the server
  // holds; nullopt when there is nothing to send yet (no new output, no task to complete, and
  // samples younger than ship_interval_ms). The samples move into the batch.
  std::optional<proto::TelemetryBatch> NextBatch(int64_t now_ms);

  // The server's answer to the last batch (how much of each stream it holds, or that a task was
  // refused). Returns the tasks whose output is now all on the server (ended and complete, or
  // refused): they are no longer tracked.
  std::vector<std::string> Acknowledge(const proto::TelemetryAck& answer);

 private:
  struct Task {
    int64_t bound_ms = 0;
    std::vector<std::string> gpu_uuids;
    int64_t offsets[3] = {0, 0, 0};  // stdout, stderr, metrics: what the server holds
    bool ended = false;
    bool complete_sent = false;  // the last batch said "complete"
    int64_t last_cpu_ns = -1;
    int64_t last_sample_ms = 0;
    std::vector<proto::UsageSample> samples;
  };

  // Bytes of the task's metrics file from `offset`, at most max_chunk_bytes; complete lines only
  // unless the task ended.
  std::string ReadMetrics(const std::string& task_id, int64_t offset, bool ended) const;

  const std::string node_;
  TaskRuntime& runtime_;
  GpuProbe& probe_;
  const TelemetryOptions options_;
  std::map<std::string, Task> tasks_;
  std::vector<proto::NodeSample> node_samples_;
  std::optional<CpuTimes> last_cpu_;
  int64_t last_ship_ms_ = 0;
};

}  // namespace gpupool::agent
