// Implementation of telemetry.h: /proc and cgroup reads, GPU samples mapped to tasks, output read
// past the acknowledged offsets, and the batch / acknowledgement JSON (docs/api.md, "Agent
// telemetry").
#include "agent/telemetry.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <sstream>
#include <utility>

#include "agent/runtime/linux_proc.h"
#include "core/base64.h"

namespace gpupool::agent {
namespace {

constexpr int kStdout = 0;
constexpr int kStderr = 1;
constexpr int kMetrics = 2;
// The streams in the order of Task::offsets (proto's names).
constexpr const std::string_view* kStreamNames = proto::kOutputStreams;

// A probe's reading on the wire: null where the probe could not measure it (< 0).
std::optional<int64_t> Measured(int64_t v) {
  if (v < 0) return std::nullopt;
  return v;
}

std::optional<int64_t> MemInfoKib(std::string_view text, std::string_view key) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ':') {
      continue;
    }
    line.remove_prefix(key.size() + 1);
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    int64_t v = 0;
    if (std::from_chars(line.data(), line.data() + line.size(), v).ec != std::errc()) {
      return std::nullopt;
    }
    return v;
  }
  return std::nullopt;
}

}  // namespace

std::optional<CpuTimes> ParseCpuTimes(std::string_view text) {
  if (text.substr(0, 4) != "cpu ") return std::nullopt;
  std::istringstream in(std::string(text.substr(4, text.find('\n') - 4)));
  uint64_t v[8] = {};
  int n = 0;
  while (n < 8 && in >> v[n]) ++n;
  if (n < 4) return std::nullopt;
  CpuTimes t;
  for (int i = 0; i < n; ++i) t.total += v[i];
  const uint64_t idle = v[3] + (n > 4 ? v[4] : 0);  // idle + iowait
  t.busy = t.total - idle;
  return t;
}

std::optional<int64_t> ParseMemInfoUsedMib(std::string_view text) {
  const auto total = MemInfoKib(text, "MemTotal");
  const auto available = MemInfoKib(text, "MemAvailable");
  if (!total || !available) return std::nullopt;
  return (*total - *available) / 1024;
}

TelemetryCollector::TelemetryCollector(std::string node, TaskRuntime& runtime, GpuProbe& probe,
                                       TelemetryOptions options)
    : node_(std::move(node)), runtime_(runtime), probe_(probe), options_(options) {}

void TelemetryCollector::Track(const std::string& task_id, int64_t bound_ms,
                               std::vector<std::string> gpu_uuids) {
  Task& t = tasks_[task_id];
  t.bound_ms = bound_ms;
  t.gpu_uuids = std::move(gpu_uuids);
}

void TelemetryCollector::Ended(const std::string& task_id, int64_t bound_ms) {
  Task& t = tasks_[task_id];
  if (t.bound_ms == 0) t.bound_ms = bound_ms;
  t.ended = true;
}

void TelemetryCollector::Sample(int64_t now_ms) {
  // The node.
  proto::NodeSample node;
  node.time_ms = now_ms;
  if (auto stat = ReadFile("/proc/stat")) {
    if (auto cpu = ParseCpuTimes(*stat)) {
      if (last_cpu_ && cpu->total > last_cpu_->total) {
        node.cpu_milli = static_cast<int64_t>((cpu->busy - last_cpu_->busy) * options_.cpu_milli /
                                              (cpu->total - last_cpu_->total));
      }
      last_cpu_ = cpu;
    }
  }
  if (auto meminfo = ReadFile("/proc/meminfo")) {
    if (auto used = ParseMemInfoUsedMib(*meminfo)) node.memory_mib = *used;
  }
  std::map<std::string, std::pair<int, int64_t>> by_uuid;    // GPU or MIG uuid -> util, mem
  std::map<std::string, std::vector<GpuProcess>> processes;  // GPU or MIG uuid -> processes
  if (auto gpus = probe_.Sample()) {
    std::vector<proto::GpuSample> list;
    int64_t util_sum = 0, util_n = 0, mem = 0;
    for (const GpuSample& g : *gpus) {
      list.push_back({g.index, Measured(g.util_pct), Measured(g.mem_used_mib)});
      by_uuid[g.uuid] = {g.util_pct, g.mem_used_mib};
      for (const MigSample& m : g.mig) by_uuid[m.uuid] = {m.util_pct, m.mem_used_mib};
      for (const GpuProcess& p : g.processes) {
        processes[p.mig_uuid.empty() ? g.uuid : p.mig_uuid].push_back(p);
      }
      if (g.util_pct >= 0) util_sum += g.util_pct, ++util_n;
      if (g.mem_used_mib >= 0) mem += g.mem_used_mib;
    }
    if (!gpus->empty()) {
      node.gpus = std::move(list);
      if (util_n > 0) node.gpu_util_pct = util_sum / util_n;
      node.gpu_mem_mib = mem;
    }
  }
  node_samples_.push_back(std::move(node));
  if (node_samples_.size() > options_.max_samples) node_samples_.erase(node_samples_.begin());

  // The running tasks.
  for (const RunningTask& rt : runtime_.Running()) {
    auto it = tasks_.find(rt.task_id);
    if (it == tasks_.end() || it->second.ended) continue;
    Task& t = it->second;
    proto::UsageSample s;
    s.time_ms = now_ms;
    if (auto ns = rt.cgroup.CpuUsageNs()) {
      if (t.last_cpu_ns >= 0 && now_ms > t.last_sample_ms && *ns >= t.last_cpu_ns) {
        s.cpu_milli = (*ns - t.last_cpu_ns) / 1000 / (now_ms - t.last_sample_ms);
      }
      t.last_cpu_ns = *ns;
      t.last_sample_ms = now_ms;
    }
    if (auto bytes = rt.cgroup.MemoryBytes()) s.memory_mib = *bytes >> 20;
    if (!t.gpu_uuids.empty()) {
      std::vector<pid_t> members = rt.cgroup.Members();
      if (members.empty()) members.push_back(rt.pid);
      const std::set<pid_t> mine(members.begin(), members.end());
      int64_t util_sum = 0, util_n = 0, mem = 0;
      for (const std::string& uuid : t.gpu_uuids) {
        const auto g = by_uuid.find(uuid);
        if (g != by_uuid.end() && g->second.first >= 0) util_sum += g->second.first, ++util_n;
        for (const GpuProcess& p : processes[uuid]) {
          if (mine.count(p.pid) && p.used_mib > 0) mem += p.used_mib;
        }
      }
      if (util_n > 0) s.gpu_util_pct = util_sum / util_n;
      s.gpu_mem_mib = mem;
    }
    t.samples.push_back(std::move(s));
    if (t.samples.size() > options_.max_samples) t.samples.erase(t.samples.begin());
  }
}

std::string TelemetryCollector::ReadMetrics(const std::string& task_id, int64_t offset,
                                            bool ended) const {
  const std::string path = runtime_.MetricsPath(task_id);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return "";
  std::string out(static_cast<size_t>(options_.max_chunk_bytes), '\0');
  const ssize_t n = ::pread(fd, out.data(), out.size(), offset);
  ::close(fd);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  if (!ended) {
    // A line still being written waits for its newline (unless it alone fills a chunk).
    const size_t last = out.rfind('\n');
    if (last != std::string::npos) {
      out.resize(last + 1);
    } else if (out.size() < static_cast<size_t>(options_.max_chunk_bytes)) {
      out.clear();
    }
  }
  return out;
}

std::optional<proto::TelemetryBatch> TelemetryCollector::NextBatch(int64_t now_ms) {
  std::vector<proto::TaskTelemetry> tasks;
  bool urgent = false;  // output or an end to tell: send now
  int64_t budget = options_.max_batch_output_bytes;
  for (auto& [id, t] : tasks_) {
    proto::TaskTelemetry entry;
    entry.task_id = id;
    entry.bound_ms = t.bound_ms;
    std::vector<proto::OutputChunk> output;
    bool all_read = true;
    for (int s : {kStdout, kStderr, kMetrics}) {
      std::string data;
      int64_t offset = t.offsets[s];
      if (budget < options_.max_chunk_bytes) {
        all_read = false;  // the next batch takes it
        continue;
      }
      if (s == kMetrics) {
        data = ReadMetrics(id, offset, t.ended);
      } else if (auto chunk =
                     runtime_.ReadLog(id, s == kStdout ? LogStream::kStdout : LogStream::kStderr,
                                      offset, options_.max_chunk_bytes)) {
        data = std::move(chunk->data);
        offset = chunk->offset;  // later than asked when rotation dropped bytes
      }
      if (static_cast<int64_t>(data.size()) >= options_.max_chunk_bytes) all_read = false;
      if (data.empty()) continue;
      budget -= static_cast<int64_t>(data.size());
      output.push_back({std::string(kStreamNames[s]), offset, Base64Encode(data)});
    }
    const bool complete = t.ended && all_read;
    if (!output.empty() || (complete && !t.complete_sent)) urgent = true;
    if (output.empty() && t.samples.empty() && !complete) continue;
    entry.output = std::move(output);
    entry.samples = std::move(t.samples);
    entry.complete = complete;
    t.samples.clear();
    t.complete_sent = complete;
    tasks.push_back(std::move(entry));
  }
  if (!urgent && now_ms - last_ship_ms_ < options_.ship_interval_ms) {
    // Nothing worth a request yet: the samples stay for the next batch.
    for (proto::TaskTelemetry& entry : tasks) {
      Task& t = tasks_[entry.task_id];
      for (proto::UsageSample& s : entry.samples) t.samples.push_back(std::move(s));
      t.complete_sent = false;
    }
    return std::nullopt;
  }
  if (tasks.empty() && node_samples_.empty()) return std::nullopt;
  last_ship_ms_ = now_ms;
  proto::TelemetryBatch batch{std::move(node_samples_), std::move(tasks)};
  node_samples_.clear();
  return batch;
}

std::vector<std::string> TelemetryCollector::Acknowledge(const proto::TelemetryAck& answer) {
  std::vector<std::string> done;
  for (const proto::OutputOffsets& a : answer.tasks) {
    auto it = tasks_.find(a.task_id);
    if (it == tasks_.end()) continue;
    Task& t = it->second;
    if (a.refused) {
      done.push_back(a.task_id);
      tasks_.erase(it);
      continue;
    }
    t.offsets[kStdout] = a.stdout;
    t.offsets[kStderr] = a.stderr;
    t.offsets[kMetrics] = a.metrics;
    if (t.complete_sent) {
      done.push_back(a.task_id);
      tasks_.erase(it);
    }
  }
  return done;
}

}  // namespace gpupool::agent
