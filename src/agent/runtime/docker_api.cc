// Implementation of docker_api.h.
#include "agent/runtime/docker_api.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "api/url.h"

namespace gpupool::agent::docker {

using nlohmann::json;

namespace {

constexpr size_t kFrameHeader = 8;
constexpr int64_t kNsPerSecond = 1'000'000'000;

// Days from 1970-01-01 to the given date of the proleptic Gregorian calendar.
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;                                   // [0, 399]
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;  // [0, 365]
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           // [0, 146096]
  return era * 146097 + doe - 719468;
}

// `n` digits at text[pos], or -1.
int64_t Digits(std::string_view text, size_t pos, size_t n) {
  if (pos + n > text.size()) return -1;
  int64_t v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return -1;
    v = v * 10 + (text[i] - '0');
  }
  return v;
}

std::string Message(const std::string& body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    return j["message"].get<std::string>();
  }
  std::string text = body;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text.size() > 300 ? text.substr(0, 300) + "…" : text;
}

}  // namespace

json CreateBody(const LaunchSpec& spec, const ContainerSetup& setup) {
  json env = json::array();
  const std::string cudashim =
      setup.host_cudashim.empty() ? "" : std::string(kTaskFilesDir) + "/" + kCudashimName;
  auto vars = TaskVariables(spec, kWorkspace, kMetricsFile, cudashim);
  vars.try_emplace("HOME", kWorkspace);
  for (const auto& [k, v] : vars) env.push_back(k + "=" + v);
  std::string visible;
  for (const std::string& u : spec.gpu_uuids) visible += (visible.empty() ? "" : ",") + u;
  env.push_back("NVIDIA_VISIBLE_DEVICES=" + (visible.empty() ? std::string("void") : visible));

  json host = {
      {"Mounts",
       {{{"Type", "bind"}, {"Source", setup.host_workspace}, {"Target", kWorkspace}},
        {{"Type", "bind"}, {"Source", setup.host_metrics}, {"Target", kMetricsFile}},
        {{"Type", "bind"}, {"Source", setup.host_checkpoint}, {"Target", kCheckpointDir}}}},
      {"Init", true},
      {"NetworkMode", setup.network_mode},
      {"RestartPolicy", {{"Name", "no"}}},
      {"LogConfig", {{"Type", "json-file"}, {"Config", json::object()}}},
  };
  // Volumes over their mount points in the workspace (runc resolves a target inside the
  // container's root, so a link the task made there cannot lead out of it).
  for (const LaunchSpec::VolumeBind& v : spec.volumes) {
    host["Mounts"].push_back(
        {{"Type", "bind"}, {"Source", v.host}, {"Target", v.target}, {"ReadOnly", v.read_only}});
  }
  if (!cudashim.empty()) {
    host["Mounts"].push_back({{"Type", "bind"},
                              {"Source", setup.host_cudashim},
                              {"Target", cudashim},
                              {"ReadOnly", true}});
  }
  if (spec.memory_mib > 0) {
    host["Memory"] = spec.memory_mib << 20;
    host["MemorySwap"] = spec.memory_mib << 20;
  }
  if (spec.cpu_milli > 0) host["NanoCpus"] = spec.cpu_milli * 1'000'000;
  if (spec.pids_max > 0) host["PidsLimit"] = spec.pids_max;
  if (!spec.gpu_uuids.empty() && setup.gpu_devices) {
    host["DeviceRequests"] = json::array({{{"Driver", "nvidia"},
                                           {"DeviceIDs", spec.gpu_uuids},
                                           {"Capabilities", json::array({{"gpu"}})}}});
  }
  json body = {
      {"Image", spec.image},
      {"Env", std::move(env)},
      {"WorkingDir", kWorkspace},
      {"Labels", {{kTaskLabel, spec.task_id}, {kAgentLabel, setup.instance}}},
      {"AttachStdin", false},
      {"AttachStdout", false},
      {"AttachStderr", false},
      {"OpenStdin", false},
      {"Tty", false},
      {"HostConfig", std::move(host)},
  };
  if (!spec.command.empty()) body["Cmd"] = spec.command;
  return body;
}

std::string ContainerName(const std::string& instance, const std::string& task_id) {
  return "gpupool-" + instance + "-" + task_id;
}

Status FrameDecoder::Feed(std::string_view bytes, std::vector<Frame>* out) {
  buffer_.append(bytes);
  size_t pos = 0;
  while (buffer_.size() - pos >= kFrameHeader) {
    const auto* h = reinterpret_cast<const unsigned char*>(buffer_.data() + pos);
    if (h[0] > 3 || h[1] != 0 || h[2] != 0 || h[3] != 0) {
      char hex[3 * kFrameHeader + 1] = {};
      for (size_t i = 0; i < kFrameHeader; ++i) {
        std::snprintf(hex + 3 * i, 4, "%02x ", h[i]);
      }
      return MakeError(ErrorCode::kInternal,
                       "log stream: bytes " + std::string(hex, 3 * kFrameHeader - 1) +
                           " are not a frame header (a TTY container's stream?)");
    }
    const size_t size = (size_t{h[4]} << 24) | (size_t{h[5]} << 16) | (size_t{h[6]} << 8) | h[7];
    if (buffer_.size() - pos - kFrameHeader < size) break;
    out->push_back({h[0], buffer_.substr(pos + kFrameHeader, size)});
    pos += kFrameHeader + size;
  }
  buffer_.erase(0, pos);
  return {};
}

Result<int64_t> ParseTimeNs(std::string_view text) {
  auto bad = [&](const char* why) {
    return InvalidArgument("time '" + std::string(text) + "': " + why);
  };
  // YYYY-MM-DDTHH:MM:SS
  const int64_t year = Digits(text, 0, 4), month = Digits(text, 5, 2), day = Digits(text, 8, 2);
  const int64_t hour = Digits(text, 11, 2), minute = Digits(text, 14, 2);
  const int64_t second = Digits(text, 17, 2);
  if (year < 0 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0 || text[4] != '-' ||
      text[7] != '-' || (text[10] != 'T' && text[10] != 't') || text[13] != ':' ||
      text[16] != ':') {
    return bad("not RFC 3339 (YYYY-MM-DDTHH:MM:SS)");
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return bad("a field is out of range");
  }
  size_t pos = 19;
  int64_t fraction = 0;
  if (pos < text.size() && text[pos] == '.') {
    size_t digits = 0;
    ++pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      if (digits < 9) fraction = fraction * 10 + (text[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return bad("no digits after '.'");
    for (size_t d = digits; d < 9; ++d) fraction *= 10;
  }
  int64_t offset_s = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int64_t oh = Digits(text, pos + 1, 2), om = Digits(text, pos + 4, 2);
    if (oh < 0 || om < 0 || text[pos + 3] != ':') return bad("malformed zone offset");
    offset_s = (text[pos] == '-' ? -1 : 1) * (oh * 3600 + om * 60);
    pos += 6;
  } else {
    return bad("no zone ('Z' or ±hh:mm)");
  }
  if (pos != text.size()) return bad("trailing characters");
  if (year < 1970) return int64_t{0};
  const int64_t seconds =
      DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  if (seconds < 0) return int64_t{0};
  return seconds * kNsPerSecond + fraction;
}

std::string SinceAfter(int64_t ns) {
  const int64_t next = ns + 1;
  char out[48];
  std::snprintf(out, sizeof out, "%lld.%09lld", static_cast<long long>(next / kNsPerSecond),
                static_cast<long long>(next % kNsPerSecond));
  return out;
}

Result<LogEntry> SplitTimestamp(std::string_view payload) {
  const size_t space = payload.find(' ');
  if (space == std::string_view::npos) {
    return InvalidArgument("log entry without a timestamp: '" + std::string(payload.substr(0, 60)) +
                           "'");
  }
  auto ns = ParseTimeNs(payload.substr(0, space));
  if (!ns) return tl::unexpected(ns.error());
  return LogEntry{*ns, payload.substr(space + 1)};
}

std::string PullQuery(const std::string& image) {
  const size_t slash = image.rfind('/');
  const std::string_view last =
      std::string_view(image).substr(slash == std::string::npos ? 0 : slash + 1);
  const bool named = image.find('@') != std::string::npos || last.find(':') != std::string::npos;
  return "fromImage=" + api::PercentEncode(image) + (named ? "" : "&tag=latest");
}

std::optional<std::string> ProgressError(std::string_view progress) {
  size_t start = 0;
  while (start < progress.size()) {
    size_t end = progress.find('\n', start);
    if (end == std::string_view::npos) end = progress.size();
    const json j = json::parse(progress.substr(start, end - start), nullptr, false);
    if (j.is_object() && j.contains("error")) {
      return j["error"].is_string() ? j["error"].get<std::string>() : j["error"].dump();
    }
    start = end + 1;
  }
  return std::nullopt;
}

Result<ContainerState> ParseInspect(std::string_view body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return MakeError(ErrorCode::kInternal, "container inspect: not JSON");
  return ParseInspect(j);
}

bool IsRunning(const ContainerState& s) {
  return s.running || s.status == "paused" || s.status == "restarting";
}

Result<ContainerState> ParseInspect(const json& body) {
  try {
    if (!body.is_object()) return InvalidArgument("container inspect: not a JSON object");
    ContainerState s;
    const json& st = body.at("State");
    s.status = st.value("Status", std::string());
    s.running = st.value("Running", false);
    s.pid = st.value("Pid", 0);
    s.exit_code = st.value("ExitCode", 0);
    s.oom_killed = st.value("OOMKilled", false);
    s.error = st.value("Error", std::string());
    for (auto [field, out] :
         {std::pair{"StartedAt", &s.started_ns}, std::pair{"FinishedAt", &s.finished_ns}}) {
      const std::string text = st.value(field, std::string());
      if (text.empty()) continue;
      auto ns = ParseTimeNs(text);
      if (!ns)
        return InvalidArgument("container inspect: State." + std::string(field) + ": " +
                               ns.error().message);
      *out = *ns;
    }
    if (const auto h = body.find("HostConfig"); h != body.end() && h->is_object()) {
      s.memory_bytes = h->value("Memory", int64_t{0});
    }
    if (const auto n = body.find("NetworkSettings"); n != body.end() && n->is_object()) {
      s.ip_address = n->value("IPAddress", std::string());
      // A user-defined network's address is only under Networks.
      if (const auto nets = n->find("Networks");
          s.ip_address.empty() && nets != n->end() && nets->is_object()) {
        for (const auto& [name, net] : nets->items()) {
          if (net.is_object() && !net.value("IPAddress", std::string()).empty()) {
            s.ip_address = net.value("IPAddress", std::string());
            break;
          }
        }
      }
    }
    return s;
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("container inspect: ") + e.what());
  }
}

ExitReport ExitFromState(const std::string& task_id, const ContainerState& s, bool stop_requested,
                         int64_t now_ms) {
  ExitReport r;
  r.task_id = task_id;
  r.started_ms = s.started_ns / 1'000'000;
  // Docker may record the end a few microseconds before the start of a task that exits at once.
  r.finished_ms = s.finished_ns > 0 ? std::max(r.started_ms, s.finished_ns / 1'000'000) : now_ms;
  r.finish_exact = s.finished_ns > 0;
  if (s.status == "created" || s.started_ns == 0) {
    r.kind = ExitKind::kLost;
    r.started_ms = 0;
    r.reason = "lost: its container was created but never started" +
               (s.error.empty() ? std::string() : " (" + s.error + ")");
    return r;
  }
  r.exit_code = s.exit_code;
  if (stop_requested) {
    r.kind = ExitKind::kStopped;
  } else if (s.oom_killed) {
    r.kind = ExitKind::kOomKilled;
  } else {
    r.kind = ExitKind::kExited;
  }
  r.reason = ExitReason(r, s.memory_bytes >> 20);
  if (r.kind == ExitKind::kExited && !s.error.empty()) r.reason += " (" + s.error + ")";
  return r;
}

Error ResponseError(const std::string& what, const HttpResponse& response) {
  ErrorCode code = ErrorCode::kInternal;
  switch (response.status) {
    case 400:
      code = ErrorCode::kInvalidArgument;
      break;
    case 404:
      code = ErrorCode::kNotFound;
      break;
    case 409:
      code = ErrorCode::kAlreadyExists;
      break;
    default:
      break;
  }
  return Error{code, what + ": docker answered HTTP " + std::to_string(response.status) + ": " +
                         Message(response.body)};
}

}  // namespace gpupool::agent::docker
