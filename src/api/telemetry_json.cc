// Implementation of telemetry_json.h.
#include "api/telemetry_json.h"

#include <utility>

#include "api/metric_line.h"
#include "core/base64.h"

namespace gpupool::api {
namespace {

using server::OutputStream;

constexpr size_t kMaxSamples = 1000;
constexpr size_t kMaxTasks = 1000;
constexpr size_t kMaxGpus = 64;

// A gauge as JSON: null when unknown.
Json Gauge(int64_t v) { return v < 0 ? Json(nullptr) : Json(v); }

// An optional gauge of `sample`: absent or null is unknown.
void ReadGauge(const Json& sample, FieldReader& r, std::string_view name, int64_t* out) {
  *out = server::kUnknown;
  const auto it = sample.find(name);
  if (it == sample.end() || it->is_null()) return;
  r.Int(name, out, false, -1);
}

Result<server::UsageSample> ParseUsage(const Json& j, const std::string& at,
                                       std::initializer_list<std::string_view> extra) {
  if (!j.is_object()) return InvalidArgument(at + " must be an object, got " + j.type_name());
  FieldReader r(j, at + ".");
  std::vector<std::string_view> allowed = {"time_ms", "cpu_milli", "memory_mib", "gpu_util_pct",
                                           "gpu_mem_mib"};
  allowed.insert(allowed.end(), extra.begin(), extra.end());
  for (const auto& [key, value] : j.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return InvalidArgument("unknown field '" + at + "." + key + "'");
    }
  }
  server::UsageSample s;
  r.Int("time_ms", &s.time_ms, true, 1);
  ReadGauge(j, r, "cpu_milli", &s.values[server::usage::kCpuMilli]);
  ReadGauge(j, r, "memory_mib", &s.values[server::usage::kMemoryMib]);
  ReadGauge(j, r, "gpu_util_pct", &s.values[server::usage::kGpuUtilPct]);
  ReadGauge(j, r, "gpu_mem_mib", &s.values[server::usage::kGpuMemMib]);
  if (!r.ok()) return tl::unexpected(r.error());
  if (s.values[server::usage::kGpuUtilPct] > 100) {
    return InvalidArgument(at + ".gpu_util_pct must be 0..100, got " +
                           std::to_string(s.values[server::usage::kGpuUtilPct]));
  }
  return s;
}

// The metric lines of a chunk of the metrics stream: each complete line (and, when the output is
// complete, a last line without its newline) parsed, with where it ends in the stream.
std::vector<server::ReportedPoint> ParseReported(const server::OutputChunk& chunk, bool complete) {
  std::vector<server::ReportedPoint> out;
  size_t start = 0;
  while (start < chunk.data.size()) {
    size_t end = chunk.data.find('\n', start);
    if (end == std::string::npos) {
      if (!complete) break;
      end = chunk.data.size();
    }
    auto point = ParseMetricLine(std::string_view(chunk.data).substr(start, end - start));
    const int64_t end_offset =
        chunk.offset + static_cast<int64_t>(std::min(end + 1, chunk.data.size()));
    if (point && !point->values.empty()) {
      out.push_back(server::ReportedPoint{end_offset, std::move(point->values)});
    }
    start = end + 1;
  }
  return out;
}

Json UsageJson(const server::UsageSample& s) {
  return {{"time_ms", s.time_ms},
          {"cpu_milli", Gauge(s.values[server::usage::kCpuMilli])},
          {"memory_mib", Gauge(s.values[server::usage::kMemoryMib])},
          {"gpu_util_pct", Gauge(s.values[server::usage::kGpuUtilPct])},
          {"gpu_mem_mib", Gauge(s.values[server::usage::kGpuMemMib])}};
}

Json NodeSampleJson(const server::NodeSample& s) {
  Json j = UsageJson(s.usage);
  Json gpus = Json::array();
  for (size_t i = 0; i < s.gpus.size(); ++i) {
    gpus.push_back({{"index", i},
                    {"util_pct", Gauge(s.gpus[i].values[server::gpu_usage::kUtilPct])},
                    {"mem_used_mib", Gauge(s.gpus[i].values[server::gpu_usage::kMemMib])}});
  }
  j["gpus"] = std::move(gpus);
  return j;
}

template <size_t N>
Json PointJson(const server::HistoryPoint<N>& p, const char* const (&names)[N]) {
  Json mean = Json::object();
  Json max = Json::object();
  for (size_t g = 0; g < N; ++g) {
    mean[names[g]] = Gauge(p.mean[g]);
    max[names[g]] = Gauge(p.max[g]);
  }
  return {{"time_ms", p.time_ms}, {"samples", p.samples}, {"mean", mean}, {"max", max}};
}

constexpr const char* kUsageNames[] = {"cpu_milli", "memory_mib", "gpu_util_pct", "gpu_mem_mib"};
constexpr const char* kGpuNames[] = {"util_pct", "mem_used_mib"};

const char* ResolutionName(server::Resolution r) {
  return r == server::Resolution::kRaw ? "raw" : "1m";
}

Json ValuesJson(const MetricValues& values) {
  Json j = Json::object();
  for (const auto& [name, v] : values) j[name] = v;
  return j;
}

}  // namespace

Result<server::NodeTelemetry> ParseNodeTelemetry(const Json& body, const std::string& node) {
  server::NodeTelemetry batch;
  batch.node = node;
  FieldReader r(body);
  r.Allow({"samples", "tasks"});
  const Json* samples = r.Array("samples");
  const Json* tasks = r.Array("tasks");
  if (!r.ok()) return tl::unexpected(r.error());
  if (samples != nullptr) {
    if (samples->size() > kMaxSamples) {
      return InvalidArgument("samples has more than " + std::to_string(kMaxSamples) + " items");
    }
    for (size_t i = 0; i < samples->size(); ++i) {
      const std::string at = "samples[" + std::to_string(i) + "]";
      auto usage = ParseUsage((*samples)[i], at, {"gpus"});
      if (!usage) return tl::unexpected(usage.error());
      server::NodeSample s;
      s.usage = *usage;
      const auto gpus = (*samples)[i].find("gpus");
      if (gpus != (*samples)[i].end() && !gpus->is_null()) {
        if (!gpus->is_array() || gpus->size() > kMaxGpus) {
          return InvalidArgument(at + ".gpus must be an array of at most 64 GPUs");
        }
        for (size_t g = 0; g < gpus->size(); ++g) {
          const std::string gat = at + ".gpus[" + std::to_string(g) + "]";
          if (!(*gpus)[g].is_object()) return InvalidArgument(gat + " must be an object");
          FieldReader gr((*gpus)[g], gat + ".");
          gr.Allow({"index", "util_pct", "mem_used_mib"});
          int index = -1;
          server::GpuSample gs;
          gs.time_ms = s.usage.time_ms;
          gr.Int("index", &index, true, 0, static_cast<int64_t>(kMaxGpus) - 1);
          ReadGauge((*gpus)[g], gr, "util_pct", &gs.values[server::gpu_usage::kUtilPct]);
          ReadGauge((*gpus)[g], gr, "mem_used_mib", &gs.values[server::gpu_usage::kMemMib]);
          if (!gr.ok()) return tl::unexpected(gr.error());
          if (index != static_cast<int>(g)) {
            return InvalidArgument(gat + ".index must be " + std::to_string(g) +
                                   " (GPUs in index order), got " + std::to_string(index));
          }
          s.gpus.push_back(gs);
        }
      }
      batch.samples.push_back(std::move(s));
    }
  }
  if (tasks == nullptr) return batch;
  if (tasks->size() > kMaxTasks) {
    return InvalidArgument("tasks has more than " + std::to_string(kMaxTasks) + " items");
  }
  for (size_t i = 0; i < tasks->size(); ++i) {
    const std::string at = "tasks[" + std::to_string(i) + "]";
    const Json& tj = (*tasks)[i];
    if (!tj.is_object()) return InvalidArgument(at + " must be an object, got " + tj.type_name());
    FieldReader tr(tj, at + ".");
    tr.Allow({"task_id", "bound_ms", "samples", "output", "complete"});
    server::TaskTelemetry t;
    tr.Identifier("task_id", &t.task_id, true);
    tr.Int("bound_ms", &t.bound_ms, false, 0);
    tr.Bool("complete", &t.output_complete);
    const Json* task_samples = tr.Array("samples");
    const Json* output = tr.Array("output");
    if (!tr.ok()) return tl::unexpected(tr.error());
    if (task_samples != nullptr) {
      if (task_samples->size() > kMaxSamples) {
        return InvalidArgument(at + ".samples has more than " + std::to_string(kMaxSamples) +
                               " items");
      }
      for (size_t k = 0; k < task_samples->size(); ++k) {
        auto usage = ParseUsage((*task_samples)[k], at + ".samples[" + std::to_string(k) + "]", {});
        if (!usage) return tl::unexpected(usage.error());
        t.samples.push_back(*usage);
      }
    }
    if (output != nullptr) {
      if (output->size() > 3) return InvalidArgument(at + ".output has more than 3 chunks");
      for (size_t k = 0; k < output->size(); ++k) {
        const std::string oat = at + ".output[" + std::to_string(k) + "]";
        if (!(*output)[k].is_object()) return InvalidArgument(oat + " must be an object");
        FieldReader orr((*output)[k], oat + ".");
        orr.Allow({"stream", "offset", "data_b64"});
        std::string stream, data;
        server::OutputChunk chunk;
        orr.String("stream", &stream, true, 16);
        orr.Int("offset", &chunk.offset, true, 0);
        orr.String("data_b64", &data, true, 8 << 20);
        if (!orr.ok()) return tl::unexpected(orr.error());
        const auto s = server::ParseOutputStream(stream);
        if (!s) {
          return InvalidArgument(oat + ".stream must be stdout, stderr or metrics, got '" + stream +
                                 "'");
        }
        chunk.stream = *s;
        auto decoded = Base64Decode(data);
        if (!decoded) return InvalidArgument(oat + ".data_b64 is not valid base64");
        chunk.data = std::move(*decoded);
        if (chunk.stream == OutputStream::kMetrics) {
          t.reported = ParseReported(chunk, t.output_complete);
        }
        t.output.push_back(std::move(chunk));
      }
    }
    batch.tasks.push_back(std::move(t));
  }
  return batch;
}

Json ToJson(const std::vector<server::OutputOffsets>& offsets) {
  Json tasks = Json::array();
  for (const server::OutputOffsets& o : offsets) {
    tasks.push_back({{"task_id", o.task_id},
                     {"stdout", o.stdout_bytes},
                     {"stderr", o.stderr_bytes},
                     {"metrics", o.metrics_bytes},
                     {"refused", o.refused}});
  }
  return {{"tasks", std::move(tasks)}};
}

Json ToJson(const server::LogSlice& s, server::OutputStream stream) {
  return {{"task_id", s.task_id},           {"stream", server::OutputStreamName(stream)},
          {"offset", s.slice.offset},       {"next_offset", s.slice.next_offset},
          {"size", s.slice.size},           {"data_b64", Base64Encode(s.slice.data)},
          {"truncated", s.slice.truncated}, {"complete", s.complete}};
}

Json ToJson(const server::TaskMetrics& m) {
  Json usage = Json::array();
  for (const server::UsagePoint& p : m.usage) usage.push_back(PointJson(p, kUsageNames));
  Json reported = Json::array();
  for (const server::ReportedMetrics& r : m.reported) {
    reported.push_back({{"time_ms", r.time_ms}, {"values", ValuesJson(r.values)}});
  }
  return {{"task_id", m.task_id},
          {"resolution", ResolutionName(m.resolution)},
          {"usage", std::move(usage)},
          {"reported", std::move(reported)},
          {"latest", ValuesJson(m.latest)}};
}

Json ToJson(const server::NodeMetrics& m) {
  Json usage = Json::array();
  for (const server::UsagePoint& p : m.usage) usage.push_back(PointJson(p, kUsageNames));
  Json gpus = Json::array();
  for (const auto& series : m.gpus) {
    Json points = Json::array();
    for (const server::GpuPoint& p : series) points.push_back(PointJson(p, kGpuNames));
    gpus.push_back(std::move(points));
  }
  return {{"node", m.node},
          {"resolution", ResolutionName(m.resolution)},
          {"usage", std::move(usage)},
          {"gpus", std::move(gpus)}};
}

Json ToJson(const server::UsageOverview& o) {
  Json nodes = Json::array();
  for (const auto& row : o.nodes) {
    nodes.push_back({{"name", row.info.node.name},
                     {"status", NodeStatusName(row.info.status)},
                     {"gpus", row.info.node.gpus.size()},
                     {"latest", row.latest ? NodeSampleJson(*row.latest) : Json(nullptr)}});
  }
  Json tasks = Json::array();
  for (const auto& row : o.tasks) {
    const Task& t = row.task;
    tasks.push_back({{"id", t.id},
                     {"name", t.name},
                     {"project", t.project_id},
                     {"node", t.placement ? t.placement->node : ""},
                     {"gpus", t.placement ? t.placement->gpus : std::vector<int>{}},
                     {"latest", row.latest ? UsageJson(*row.latest) : Json(nullptr)},
                     {"reported", ValuesJson(row.reported)}});
  }
  return {{"nodes", std::move(nodes)}, {"tasks", std::move(tasks)}};
}

}  // namespace gpupool::api
