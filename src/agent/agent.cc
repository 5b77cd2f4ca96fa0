// Implementation of agent.h: the protocol pieces (assignments, registration, launch plans, exit
// reports), the threads (heartbeat, long-poll, control, telemetry), reconciliation, and the steps
// the task runners (task_runner.h) take through the server's client and the runtime.
#include "agent/agent.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "agent/dataset_cache.h"
#include "agent/exec_session.h"
#include "agent/gpu/probe.h"
#include "agent/identity.h"
#include "agent/node_address.h"
#include "agent/port_target.h"
#include "agent/process_checkpoint.h"
#include "agent/programs.h"
#include "agent/retry.h"
#include "agent/runtime/linux_proc.h"
#include "agent/snapshotter.h"
#include "agent/ssh_session.h"
#include "agent/task_runner.h"
#include "agent/workspace_sync.h"
#include "api/client.h"
#include "api/resources.h"
#include "core/gpu_catalog.h"
#include "core/snapshot.h"
#include "core/task_path.h"
#include "core/task_ports.h"
#include "core/unique_fd.h"
#include "core/volume.h"
#include "os/files.h"
#include "os/sha256.h"

namespace gpupool::agent {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kStopGrace{10'000};    // SIGTERM → SIGKILL for tasks the server dropped
constexpr milliseconds kControlTick{1'000};   // the control loop reconciles at least this often
constexpr milliseconds kShutdownWait{1'500};  // for a heartbeat or report in flight at Stop
constexpr milliseconds kStepTimeout{15'000};  // a runner's or telemetry's call to the server
constexpr milliseconds kThrottledWait{300'000};  // the most a runner's request waits out throttling
constexpr int kTransferStreams = 4;           // connections a snapshot's chunks move over at once
// The dataset versions a heartbeat names at most (proto::NodeHeartbeat), the most recently used.
constexpr size_t kMaxHeldDatasets = 4096;
constexpr size_t kHeartbeatThread = 0;        // indexes of Agent::network_
constexpr size_t kPollThread = 1;
constexpr size_t kTelemetryThread = 2;
constexpr size_t kNetworkThreads = 3;
constexpr int64_t kSampleIntervalMs = 1'000;  // usage sampling: 1 Hz

void LogLine(const std::string& line) {
  const std::string text = "gpupool agent: " + line + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
}

tl::unexpected<Error> FailedPrecondition(std::string message) {
  return MakeError(ErrorCode::kFailedPrecondition, std::move(message));
}

bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

// Typed reads of the server's JSON that never throw: false when present with another type.
bool ReadString(const json& j, const char* key, std::string* out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_string()) return false;
  *out = it->get<std::string>();
  return true;
}

template <typename T>
bool ReadInt(const json& j, const char* key, T* out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_number_integer()) return false;
  *out = static_cast<T>(it->get<int64_t>());
  return true;
}

std::string Join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

bool WantsLaunch(TaskState s) { return s == TaskState::kScheduled || s == TaskState::kStarting; }

// The number of a checkpoint signal's name (proto::kCheckpointSignals; "" and unknown: SIGUSR1).
int CheckpointSignalNumber(std::string_view name) {
  static const std::pair<std::string_view, int> kSignals[] = {
      {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}, {"SIGHUP", SIGHUP},
      {"SIGINT", SIGINT},   {"SIGQUIT", SIGQUIT}, {"SIGALRM", SIGALRM},
      {"SIGTERM", SIGTERM}, {"SIGURG", SIGURG},   {"SIGWINCH", SIGWINCH}};
  for (const auto& [n, sig] : kSignals) {
    if (n == name) return sig;
  }
  return SIGUSR1;
}

// The decimal number a small file the task wrote holds (surrounding blanks and a newline
// allowed); nullopt when it is missing, not a regular file, or holds anything else. Never
// through a link the task made.
std::optional<int64_t> ReadSmallNumber(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!fd.ok() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  char text[32] = {};
  const ssize_t n = ::read(fd.get(), text, sizeof text - 1);
  std::string_view s(text, n > 0 ? static_cast<size_t>(n) : 0);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || value <= 0) {
    return std::nullopt;
  }
  return value;
}

// An image id as Docker prints it short: "sha256:" and 12 hex digits.
std::string ShortId(const std::string& image_id) { return image_id.substr(0, 19); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Protocol pieces

Result<Assignments> DesiredState(const proto::Assignments& answer) {
  Assignments a;
  a.node = answer.node;
  a.version = answer.version;
  for (size_t i = 0; i < answer.tasks.size(); ++i) {
    const proto::Task& t = answer.tasks[i];
    const std::string at = "assignments: tasks[" + std::to_string(i) + "]";
    if (t.id.empty()) return InvalidArgument(at + ".id is missing");
    const std::optional<TaskState> state = ParseTaskState(t.state);
    if (!state) return InvalidArgument(at + ".state '" + t.state + "' is not a task state");
    DesiredTask d;
    d.id = t.id;
    d.state = *state;
    d.image = t.image;
    d.command = t.command;
    d.ports = t.ports;
    d.gateway_origin = answer.gateway_origin;
    d.cpu_milli = t.cpu_milli;
    d.memory_mib = t.memory_mib;
    d.disk_gib = t.disk_gib;
    d.bound_ms = t.bound_ms;
    d.restartable = t.restartable;
    d.run = t.run;
    d.snapshot_every_ms = t.snapshot_every_ms;
    d.checkpoint_signal = t.checkpoint_signal;
    d.checkpoint_timeout_ms = t.checkpoint_timeout_ms;
    if (auto r = answer.restores.find(t.id); r != answer.restores.end()) d.restore = r->second;
    for (const proto::VolumeMountSpec& m : t.volumes) {
      if (m.volume_id.empty()) return InvalidArgument(at + ": a volume without its volume_id");
      const auto v = answer.volumes.find(m.volume_id);
      d.volumes.push_back({m.volume_id, m.volume, m.path, m.read_only, m.shared,
                           v != answer.volumes.end() ? v->second.size_bytes : 0});
    }
    for (const proto::DatasetMountSpec& m : t.datasets) {
      if (m.dataset_id.empty() || !os::IsSha256Hex(m.manifest)) {
        return InvalidArgument(at + ": dataset '" + m.dataset +
                               "' without its dataset_id or its version's manifest");
      }
      if (Result<std::string> path = VolumeMountPath(m.path); !path || *path != m.path) {
        return InvalidArgument(at + ": dataset '" + m.dataset + "' at '" + m.path +
                               "', which is not below " + kTaskHome);
      }
      d.datasets.push_back({m.dataset_id, m.dataset, m.version, m.path, m.project, m.manifest});
    }
    if (auto token = answer.task_tokens.find(t.id); token != answer.task_tokens.end()) {
      d.env["GPUPOOL_TASK_TOKEN"] = token->second;
    }
    if (!t.array_id.empty()) {
      d.env["GPUPOOL_ARRAY_ID"] = t.array_id;
      d.env["GPUPOOL_ARRAY_INDEX"] = std::to_string(t.array_index);
    }
    if (auto r = answer.rendezvous.find(t.id); r != answer.rendezvous.end()) {
      d.job_member = true;
      const int gpus = t.gpu_count > 0 ? t.gpu_count : (t.mig_profile.empty() ? 0 : 1);
      d.env.merge(RendezvousEnv(r->second, gpus));
    }
    if (t.placement) {
      const proto::Placement& p = *t.placement;
      d.has_placement = true;
      d.gpus.assign(p.gpus.begin(), p.gpus.end());
      d.milli_per_gpu = p.milli_per_gpu;
      d.gpu_mem_mib = p.gpu_mem_mib;
      d.mig_profile = p.mig_profile.value_or("");
      d.mig_start = p.mig_start.value_or(-1);
    }
    a.tasks.push_back(std::move(d));
  }
  for (const auto& [id, order] : answer.snapshots) {
    if (!ParseSnapshotTrigger(order.trigger)) {
      return InvalidArgument("assignments: snapshots[" + id + "].trigger '" + order.trigger +
                             "' is not a snapshot trigger");
    }
    a.snapshots.emplace(id, order);
  }
  for (const std::string& id : answer.remove_volumes) {
    if (!IsVolumeId(id)) {
      return InvalidArgument("assignments: remove_volumes: '" + id + "' is not a volume id");
    }
    a.remove_volumes.push_back(id);
  }
  return a;
}

std::map<std::string, std::string> RendezvousEnv(const proto::Rendezvous& r, int gpus) {
  const std::string rank = std::to_string(r.member_index);
  const std::string world = std::to_string(r.members);
  const std::string port = std::to_string(r.master_port);
  return {
      {"MASTER_ADDR", r.master_addr},
      {"MASTER_PORT", port},
      {"WORLD_SIZE", world},
      {"RANK", rank},
      {"NODE_RANK", rank},
      {"LOCAL_RANK", "0"},
      {"LOCAL_WORLD_SIZE", "1"},
      {"PET_NNODES", world},
      {"PET_NODE_RANK", rank},
      {"PET_MASTER_ADDR", r.master_addr},
      {"PET_MASTER_PORT", port},
      {"PET_NPROC_PER_NODE", std::to_string(std::max(gpus, 1))},
      {"GPUPOOL_JOB_ID", r.job_id},
      {"GPUPOOL_MEMBER_INDEX", rank},
      {"GPUPOOL_MEMBER_HOSTS", Join(r.member_hosts, ",")},
  };
}

proto::NodeRegistration Registration(const std::string& name, int64_t cpu_milli, int64_t memory_mib,
                                     int64_t disk_gib, const std::vector<Gpu>& gpus) {
  proto::NodeRegistration r;
  r.name = name;
  r.cpu_milli = cpu_milli;
  r.memory_mib = memory_mib;
  r.disk_gib = disk_gib;
  for (const Gpu& g : gpus) {
    proto::GpuSpec gpu;
    gpu.model = g.model;
    gpu.uuid = g.uuid;
    gpu.mem_mib = g.mem_mib;
    gpu.mig_enabled = g.mig_enabled;
    gpu.link_group = g.link_group;
    const GpuModelInfo* model = FindGpuModel(g.model);
    for (const MigInstance& m : g.mig_instances) {
      if (model == nullptr || m.profile < 0 ||
          m.profile >= static_cast<int>(model->mig_profiles.size())) {
        continue;
      }
      gpu.mig_instances.push_back(
          {model->mig_profiles[static_cast<size_t>(m.profile)].name, m.start});
    }
    r.gpus.push_back(std::move(gpu));
  }
  return r;
}

Result<LaunchPlan> PlanLaunch(const DesiredTask& task, GpuProbe& probe,
                              const std::vector<Gpu>& gpus, const std::string& server_url) {
  LaunchPlan plan;
  LaunchSpec& spec = plan.spec;
  spec.task_id = task.id;
  spec.checkpoint_signal = task.checkpoint_signal;
  if (task.command.empty() && task.image.empty()) {
    return InvalidArgument("task " + task.id + " has no command");
  }
  spec.image = task.image;
  spec.command = task.command;
  spec.cpu_milli = task.cpu_milli;
  spec.memory_mib = task.memory_mib;
  spec.env = task.env;
  spec.restartable = task.restartable;
  for (int32_t port : task.ports) {
    const bool by_host = !task.gateway_origin.empty();
    const std::string url = GatewayPortUrl(task.gateway_origin, task.id, port);
    spec.env["GPUPOOL_BASE_PATH_" + std::to_string(port)] = by_host ? "/" : url;
    spec.env["GPUPOOL_URL_" + std::to_string(port)] = by_host ? url : server_url + url;
  }
  if (task.gpus.empty() && task.mig_profile.empty()) return plan;

  auto gpu_at = [&](int index) -> Result<const Gpu*> {
    if (index < 0 || index >= static_cast<int>(gpus.size())) {
      return FailedPrecondition("placement names GPU " + std::to_string(index) +
                                "; this node has " + std::to_string(gpus.size()));
    }
    return &gpus[static_cast<size_t>(index)];
  };
  if (!task.mig_profile.empty()) {
    if (task.gpus.size() != 1) {
      return FailedPrecondition("MIG placement must name one GPU, got " +
                                std::to_string(task.gpus.size()));
    }
    auto gpu = gpu_at(task.gpus[0]);
    if (!gpu) return tl::unexpected(gpu.error());
    auto uuid = probe.MigInstanceUuid(task.gpus[0], task.mig_start);
    if (!uuid) {
      return FailedPrecondition("no MIG instance " + task.mig_profile + " at slot " +
                                std::to_string(task.mig_start) + " on GPU " +
                                std::to_string(task.gpus[0]) + ": " + uuid.error().message);
    }
    int64_t mem = 0;
    if (const GpuModelInfo* model = FindGpuModel((*gpu)->model)) {
      if (const MigProfile* p = model->FindProfile(task.mig_profile)) mem = p->mem_mib;
    }
    spec.gpu_uuids.push_back(*uuid);
    plan.loads.push_back({*uuid, 100, mem});
    return plan;
  }
  const bool share = task.milli_per_gpu > 0 && task.milli_per_gpu < kMilliPerGpu;
  for (int index : task.gpus) {
    auto gpu = gpu_at(index);
    if (!gpu) return tl::unexpected(gpu.error());
    if ((*gpu)->mig_enabled) {
      return FailedPrecondition("GPU " + std::to_string(index) +
                                " is in MIG mode; only MIG instances can be given out");
    }
    spec.gpu_uuids.push_back((*gpu)->uuid);
    plan.loads.push_back({(*gpu)->uuid, share ? std::max(1, task.milli_per_gpu / 10) : 100,
                          task.gpu_mem_mib > 0 ? task.gpu_mem_mib : (*gpu)->mem_mib});
  }
  spec.gpu_milli_per_gpu = share ? task.milli_per_gpu : 0;
  spec.gpu_mem_mib = task.gpu_mem_mib;
  return plan;
}

Status EnsureMigInstance(GpuProbe& probe, int gpu_index, const std::string& profile, int start,
                         const std::set<std::string>& busy_uuids, bool* changed) {
  *changed = false;
  auto gpus = probe.Discover();
  if (!gpus) return tl::unexpected(gpus.error());
  if (gpu_index < 0 || gpu_index >= static_cast<int>(gpus->size())) {
    return FailedPrecondition("placement names GPU " + std::to_string(gpu_index) +
                              "; this node has " + std::to_string(gpus->size()));
  }
  const Gpu& g = (*gpus)[static_cast<size_t>(gpu_index)];
  const std::string where = "GPU " + std::to_string(gpu_index) + " (" + g.model + ")";
  const GpuModelInfo* model = FindGpuModel(g.model);
  if (model == nullptr || !model->MigCapable()) {
    return FailedPrecondition(where + " is not MIG-capable");
  }
  const int pi = model->ProfileIndex(profile);
  if (pi < 0) return InvalidArgument("'" + profile + "' is not a MIG profile of " + g.model);
  if (g.mig_enabled) {
    for (const MigInstance& m : g.mig_instances) {
      if (m.start == start && m.profile == pi) return {};
    }
  } else if (busy_uuids.count(g.uuid)) {
    return FailedPrecondition(where + " runs a task; it cannot be switched to MIG mode");
  }
  const MigProfile& p = model->mig_profiles[static_cast<size_t>(pi)];
  const int lo = start;
  const int hi = start + p.memory_slices;
  std::vector<MigInstance> layout;
  if (g.mig_enabled) {
    for (const MigInstance& m : g.mig_instances) {
      const MigProfile& q = model->mig_profiles[static_cast<size_t>(m.profile)];
      if (m.start < hi && lo < m.start + q.memory_slices) {
        auto uuid = probe.MigInstanceUuid(gpu_index, m.start);
        if (uuid && busy_uuids.count(*uuid)) {
          return FailedPrecondition(where + ": MIG instance " + q.name + " at slot " +
                                    std::to_string(m.start) + " runs a task; " + profile +
                                    " cannot be created at slot " + std::to_string(start));
        }
        continue;  // replaced
      }
      layout.push_back(MigInstance{m.profile, m.start, false});
    }
  }
  layout.push_back(MigInstance{pi, start, false});
  std::sort(layout.begin(), layout.end(),
            [](const MigInstance& a, const MigInstance& b) { return a.start < b.start; });
  if (Status st = probe.ApplyMigLayout(gpu_index, true, layout); !st) {
    return MakeError(st.error().code, "cannot create MIG instance " + profile + " at slot " +
                                          std::to_string(start) + " on " + where + ": " +
                                          st.error().message);
  }
  *changed = true;
  return {};
}

proto::TaskReport EndReport(const ExitReport& r, int64_t bound_ms) {
  std::string state = "failed";
  int exit_code = r.exit_code;
  std::string reason = r.reason;
  switch (r.kind) {
    case ExitKind::kExited:
      if (r.exit_code == 0) state = "succeeded";
      break;
    case ExitKind::kSignaled:
      exit_code = r.signal > 0 ? 128 + r.signal : -1;
      break;
    case ExitKind::kOomKilled:
      exit_code = r.exit_code >= 0 ? r.exit_code : 137;  // SIGKILL, as a shell would say
      break;
    case ExitKind::kStopped:
      state = "stopped";
      reason = "stopped on the node";
      break;
    case ExitKind::kLost:
      reason = "lost by the agent: " +
               (r.reason.rfind("lost: ", 0) == 0 ? r.reason.substr(6) : r.reason);
      break;
    case ExitKind::kUnknown:
      break;
  }
  if (reason.empty()) reason = std::string(ExitKindName(r.kind));
  proto::TaskReport report;
  report.state = state;
  report.time_ms = r.finished_ms;
  report.reason = reason;
  if (exit_code != -1 || state == "failed") report.exit_code = exit_code;
  report.bound_ms = bound_ms;
  return report;
}

int64_t DetectCpuMilli() {
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  return std::max<int64_t>(1, cores) * 1000;
}

int64_t DetectDiskGib(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.f_bavail * st.f_frsize >> 30);
}

Result<std::string> FindCudashim(const std::string& given, const std::string& exe) {
  if (!given.empty()) {
    std::error_code ec;
    if (access(given.c_str(), R_OK) != 0 || !fs::is_regular_file(given, ec)) {
      return MakeError(ErrorCode::kNotFound, "--cudashim " + given + ": no readable file there");
    }
    return fs::absolute(given).string();
  }
  const fs::path dir = fs::path(exe).parent_path();
  for (const char* place : {"../lib/gpupool", "../cudashim"}) {
    const fs::path candidate = (dir / place / kCudashimName).lexically_normal();
    if (access(candidate.c_str(), R_OK) == 0) return candidate.string();
  }
  return std::string();
}

milliseconds TaskLease(milliseconds node_timeout, milliseconds heartbeat_interval) {
  return std::max(milliseconds(1),
                  std::min(node_timeout / 2, node_timeout - 2 * heartbeat_interval));
}

int64_t DetectMemoryMib() {
  const std::optional<std::string> text = ReadFile("/proc/meminfo");
  if (!text) return 0;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemTotal:", 0) != 0) continue;
    const long long kib = std::strtoll(line.c_str() + 9, nullptr, 10);
    return kib / 1024;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// The state the agent's threads share. The network threads touch only this (and their own
// client), so that one still waiting on the server at Stop can be left to finish on its own.

struct Agent::Shared {
  std::string endpoint, access_key, secret_key, node, ca_file;
  milliseconds heartbeat_interval{2000};
  int64_t wait_ms = 25000;
  // Told the server's node timeout by each heartbeat's answer (the heartbeat thread's).
  std::function<void(milliseconds)> on_node_timeout;
  // Told the send time of each heartbeat the server acknowledged (the heartbeat thread's).
  std::function<void(std::chrono::steady_clock::time_point)> on_heard;
  // The node's dataset versions, named in each heartbeat (the scheduler prefers this node for
  // tasks that mount them).
  std::shared_ptr<DatasetCache> datasets;

  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::vector<bool> thread_done;
  proto::NodeRegistration registration;  // what POST /v1/agent/nodes sends
  bool need_register = false;
  std::optional<Assignments> fresh;                      // long-poll → control
  bool exits_pending = false;                            // runtime → control
  bool runner_events = false;                            // task runners → control
  std::optional<proto::TelemetryBatch> telemetry_batch;  // control → telemetry: to deliver
  std::optional<proto::TelemetryAck> telemetry_answer;   // telemetry → control: the answer

  // Waits `d` or until stop; true when stopping.
  bool WaitOrStop(milliseconds d) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, d, [&] { return stop; });
  }
  bool Stopping() {
    std::lock_guard lock(mu);
    return stop;
  }
  void Done(size_t thread) {
    {
      std::lock_guard lock(mu);
      thread_done[thread] = true;
    }
    cv.notify_all();
  }

  api::ClientOptions Timeout(milliseconds t) const {
    api::ClientOptions o;
    o.timeout = t;
    o.ca_file = ca_file;
    return o;
  }

  // POST /v1/agent/nodes with the current registration.
  Status Register(api::Client& client) {
    proto::NodeRegistration body;
    {
      std::lock_guard lock(mu);
      body = registration;
    }
    auto r = client.Agent().Register(body);
    if (!r) return tl::unexpected(r.error());
    std::lock_guard lock(mu);
    need_register = false;
    return {};
  }

  static void HeartbeatLoop(std::shared_ptr<Shared> s, size_t self);
  static void PollLoop(std::shared_ptr<Shared> s, size_t self);
  static void TelemetryLoop(std::shared_ptr<Shared> s, size_t self);
};

void Agent::Shared::HeartbeatLoop(std::shared_ptr<Shared> s, size_t self) {
  {
    api::Client client(
        s->endpoint, s->access_key, s->secret_key,
        s->Timeout(std::max<milliseconds>(milliseconds(5000), 2 * s->heartbeat_interval)));
    ProblemLog problems(LogLine);
    // The first at once: its answer carries the node timeout that the tasks' lease derives from.
    for (bool first = true; first || !s->WaitOrStop(s->heartbeat_interval); first = false) {
      if (s->Stopping()) break;
      const auto sent = std::chrono::steady_clock::now();
      proto::NodeHeartbeat beat;
      beat.datasets = s->datasets->Held(kMaxHeldDatasets);
      auto r = client.Agent().Heartbeat(s->node, beat);
      if (!r && r.error().code != ErrorCode::kNotFound) {
        problems.Fail(std::string(ErrorCodeName(r.error().code)),
                      (RetryLater(r.error()) ? "heartbeat failed: " + r.error().message
                                             : "heartbeat refused: " + Refusal(r.error())));
      } else if (!r) {
        LogLine("the server does not know node " + s->node + ": registering again");
        if (Status st = s->Register(client); !st) {
          problems.Fail("register", "registration failed: " + st.error().message);
        } else {
          LogLine("registered node " + s->node + " again");
          problems.Recover("heartbeats reach the server again");
        }
      } else {
        problems.Recover("heartbeats reach the server again");
        if (r->node_timeout_ms > 0) s->on_node_timeout(milliseconds(r->node_timeout_ms));
        s->on_heard(sent);
      }
    }
  }
  s->Done(self);
}

void Agent::Shared::PollLoop(std::shared_ptr<Shared> s, size_t self) {
  {
    api::Client client(s->endpoint, s->access_key, s->secret_key,
                       s->Timeout(milliseconds(s->wait_ms + 15'000)));
    int64_t after = 0;
    Backoff backoff;
    ProblemLog problems(LogLine);
    auto problem = [&](const std::string& kind, const std::string& what) {
      problems.Fail(kind, what);
      return s->WaitOrStop(backoff.Next());
    };
    while (!s->Stopping()) {
      bool need_register;
      {
        std::lock_guard lock(s->mu);
        need_register = s->need_register;
      }
      if (need_register) {
        if (Status st = s->Register(client); !st) {
          if (problem("register", "registration failed (retrying): " + st.error().message)) {
            break;
          }
          continue;
        }
        LogLine("registered node " + s->node);
      }
      auto r = client.Agent().Watch(s->node, {after, s->wait_ms});
      if (!r && r.error().code == ErrorCode::kNotFound) {
        {
          std::lock_guard lock(s->mu);
          s->need_register = true;
        }
        if (problem("not_found", "assignments: " + r.error().message + ": registering again")) {
          break;
        }
        continue;
      }
      if (!r) {
        if (problem(std::string(ErrorCodeName(r.error().code)),
                    "assignments (retrying): " + r.error().message)) {
          break;
        }
        continue;
      }
      auto a = DesiredState(*r);
      if (!a) {
        if (problem("parse", a.error().message)) break;
        continue;
      }
      problems.Recover("connected to the server again");
      backoff.Reset();
      after = a->version;
      {
        std::lock_guard lock(s->mu);
        s->fresh = std::move(*a);
      }
      s->cv.notify_all();
    }
  }
  s->Done(self);
}

void Agent::Shared::TelemetryLoop(std::shared_ptr<Shared> s, size_t self) {
  {
    api::Client client(s->endpoint, s->access_key, s->secret_key, s->Timeout(kStepTimeout));
    Backoff backoff;
    ProblemLog problems(LogLine);
    while (true) {
      proto::TelemetryBatch batch;
      {
        std::unique_lock lock(s->mu);
        s->cv.wait(lock, [&] { return s->stop || s->telemetry_batch.has_value(); });
        if (s->stop) break;
        batch = *s->telemetry_batch;
      }
      auto r = client.Agent().Telemetry(s->node, batch);
      proto::TelemetryAck answer;
      if (r) {
        answer = std::move(*r);
        problems.Recover("telemetry reaches the server again");
        backoff.Reset();
      } else {
        // Retried as it is: the batch names offsets, so a retry stores nothing twice. A refusal
        // (4xx) is logged once; the output is read again for the next batch.
        const ErrorCode code = r.error().code;
        const bool refused = !RetryLater(r.error()) && code != ErrorCode::kNotFound;
        problems.Fail(std::string(ErrorCodeName(code)),
                      (refused ? "telemetry refused: " + Refusal(r.error())
                               : "telemetry failed (retrying): " + r.error().message));
        if (s->WaitOrStop(backoff.Next())) break;
        if (!refused) continue;
      }
      {
        std::lock_guard lock(s->mu);
        s->telemetry_batch.reset();
        s->telemetry_answer = std::move(answer);
      }
      s->cv.notify_all();
    }
  }
  s->Done(self);
}

// ---------------------------------------------------------------------------------------------
// The agent

// A task this agent owns: its runner, and what the control loop knows of it.
struct Agent::Owned {
  std::unique_ptr<TaskRunner> runner;
  int64_t bound_ms = 0;  // 0: unknown (adopted without a binding file)
  bool running = false;  // in the runtime: launched, or adopted
  pid_t pid = 0;
  int64_t started_ms = 0;
  std::vector<GpuLoad> loads;  // planned at launch; on the probe while it runs
  std::string where;           // the launch plan's GPUs, for the log
  bool running_reported = false;
  bool dropped = false;     // the server no longer wants it: stopped, its end is not reported
  bool ended = false;       // its end was handed to the runner
  std::string stop_reason;  // the agent stopped it (its disk): the reason its report gives
  int32_t run = 0;          // the server's run of it (0: not known yet)
  std::string checkpoint_signal;  // its checkpoint settings, for a snapshot once it is dropped
  int64_t checkpoint_timeout_ms = 0;
  std::string image;  // the task's image (a saved one is over it): what a snapshot saves over
  int64_t snapshot_request = 0;      // the last user's snapshot request handed to the runner
  bool stop_after_snapshot = false;  // dropped: stopped once its last snapshot is taken
  std::vector<std::string> datasets;  // the manifests of the dataset versions it mounts
};

// The runners' steps: each call its own signed client (runners call from their own threads).
class Agent::Steps : public TaskSteps {
 public:
  // Removes a deleted volume's directories (those that exist) and tells the server.
  Status RemoveVolume(const std::string& id, const std::vector<std::string>& dirs) {
    for (const std::string& dir : dirs) {
      std::error_code ec;
      fs::remove_all(dir, ec);
      if (ec) return MakeError(ErrorCode::kInternal, "cannot remove " + dir + ": " + ec.message());
    }
    api::Client client = Client();
    Result<proto::Empty> told = client.Agent().VolumeRemoved(id);
    if (!told) return tl::unexpected(told.error());
    return {};
  }

  Steps(const AgentOptions& o, std::shared_ptr<RuntimeRouter> runtime,
        std::shared_ptr<DatasetCache> datasets)
      : endpoint_(o.endpoint),
        ca_file_(o.ca_file),
        access_key_(o.access_key),
        secret_key_(o.secret_key),
        node_(o.node_name),
        inputs_root_(o.data_dir + "/inputs"),
        images_root_(o.data_dir + "/images"),
        cache_(o.data_dir + "/chunks"),
        cache_bytes_(o.chunk_cache_bytes),
        runtime_(std::move(runtime)),
        datasets_(std::move(datasets)) {}

  DatasetCache& datasets() { return *datasets_; }

  Result<FetchedInputs> FetchInputs(const std::string& task_id,
                                    const Cancelled& cancelled) override {
    api::Client client = Client();
    return FetchTaskInputs(client, task_id, inputs_root_, cancelled);
  }
  Result<RunningTask> Launch(const LaunchSpec& spec) override { return runtime_->Launch(spec); }
  Result<std::string> MountDataset(const std::string& task_id, const DatasetMount& mount,
                                   const Cancelled& cancelled) override {
    api::Client client = Client();
    const auto started = std::chrono::steady_clock::now();
    Result<Materialized> m = datasets_->Materialize(client, mount, kTransferStreams, cancelled);
    TrimCache();
    if (!m) return tl::unexpected(m.error());
    if (m->built) {
      LogLine(task_id + ": dataset " + mount.name + "@" + std::to_string(mount.version) + " (" +
              mount.manifest.substr(0, 12) + ") materialized on this node: " +
              std::to_string(m->files) + " file(s), " + std::to_string(m->bytes) + " bytes; " +
              std::to_string(m->linked_files) + " file(s) (" + std::to_string(m->linked_bytes) +
              " bytes) linked from other versions, " + std::to_string(m->fetched_chunks) +
              " chunk(s) (" + std::to_string(m->fetched_bytes) + " bytes) fetched in " +
              std::to_string(std::chrono::duration_cast<milliseconds>(
                                 std::chrono::steady_clock::now() - started)
                                 .count()) +
              " ms");
      Result<std::vector<std::string>> evicted = datasets_->Evict();
      if (!evicted) {
        LogLine("dataset cache not trimmed: " + evicted.error().message);
      } else if (!evicted->empty()) {
        LogLine("dataset cache: evicted " + std::to_string(evicted->size()) +
                " version(s) no task mounts, the least recently used: " + Join(*evicted, ", "));
      }
    }
    return m->dir;
  }
  Result<FetchedInputs> Restore(const std::string& task_id, const proto::SnapshotRef& ref,
                                const std::string& into, CaptureState& state,
                                const Cancelled& cancelled) override {
    FetchedInputs staged;
    staged.dir = into.empty() ? inputs_root_ + "/" + task_id : into;
    if (into.empty()) {
      std::error_code ec;
      fs::remove_all(staged.dir, ec);  // what an interrupted restore left
      fs::create_directories(inputs_root_, ec);
    }
    api::Client client = Client();
    Result<Restored> restored =
        RestoreWorkspace(client, ChunkSource::Task(task_id), ref.manifest, cache_, staged.dir,
                         !into.empty(), kTransferStreams, cancelled);
    Status ready = restored ? Status() : Status(tl::unexpected(restored.error()));
    if (ready && !ref.image.empty()) {  // the run runs in the image saved with it
      ready = restored->image && restored->image->id == ref.image
                  ? EnsureSavedImage(client, task_id, *restored->image, cancelled)
                  : Status(MakeError(ErrorCode::kInternal,
                                     "its manifest holds no saved image " + ShortId(ref.image)));
    }
    TrimCache();
    if (!ready) return tl::unexpected(ready.error());
    state.index = std::move(restored->index);
    state.image.reset();
    if (!ref.image.empty()) state.image = std::move(restored->image);  // kept by its snapshots
    staged.files = static_cast<int>(restored->files);
    staged.bytes = restored->bytes;
    return staged;
  }
  Result<proto::Snapshot> Snapshot(const std::string& task_id, const SnapshotJob& job,
                                   CaptureState& state, const Cancelled& cancelled) override {
    const auto started = std::chrono::steady_clock::now();
    const bool cooperated = Checkpoint(task_id, job);
    // A task stopped already (a last snapshot tried again) changes no file: nothing to freeze.
    const bool running = runtime_->RunningTaskOf(task_id).has_value();
    Result<Capture> capture = CaptureWorkspace(
        runtime_->Workspace(task_id), state.index, cache_, [&](bool frozen) -> Status {
          return running ? runtime_->Freeze(task_id, frozen) : Status();
        });
    if (!capture) return tl::unexpected(capture.error());
    state.index = capture->index;
    if (job.save_image) {
      // Right after the workspace: Docker pauses the container while it commits it.
      Result<proto::ManifestImage> saved = SaveImage(task_id, job);
      if (!saved) return tl::unexpected(saved.error());
      state.image = std::move(*saved);
    }
    capture->manifest.image = state.image;
    if (Status sealed = SealCapture(*capture, cache_); !sealed) {
      return tl::unexpected(sealed.error());
    }
    api::Client client = Client();
    Result<Uploaded> up =
        UploadCapture(client, task_id, *capture, cache_, kTransferStreams, cancelled);
    if (!up) return tl::unexpected(up.error());
    // Taken off this node: its record lets the server run it elsewhere, so the task stops here
    // first (its grace as any stop's) — never running on two nodes at once.
    if (IsLastSnapshotTrigger(job.trigger)) StopAndWait(task_id);
    proto::SnapshotCommit commit;
    commit.run = job.run;
    commit.trigger = SnapshotTriggerName(job.trigger);
    commit.request = job.request;
    commit.consistency =
        ConsistencyName(cooperated ? Consistency::kApplication : Consistency::kCrash);
    commit.manifest = capture->manifest_sha256;
    commit.files = capture->files;
    commit.bytes = capture->bytes;
    commit.new_bytes = up->bytes;
    commit.taken_ms = capture->taken_ms;
    commit.frozen_ms = capture->frozen_ms;
    commit.duration_ms =
        std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - started)
            .count();
    if (state.image) {
      commit.image = proto::SnapshotImage{state.image->id, state.image->base,
                                          state.image->archive.size, job.save_image};
    }
    Result<proto::Snapshot> committed = client.Agent().CommitSnapshot(task_id, commit);
    TrimCache();
    return committed;
  }
  Status FailSnapshot(const std::string& task_id, const SnapshotJob& job,
                      const std::string& error) override {
    api::Client client = Client();
    proto::SnapshotFailure f;
    f.run = job.run;
    f.trigger = SnapshotTriggerName(job.trigger);
    f.request = job.request;
    f.error = error;
    auto r = client.Agent().FailSnapshot(task_id, f);
    if (!r) return tl::unexpected(r.error());
    return {};
  }
  Result<SavedOutputs> SaveOutputs(const std::string& task_id, const std::string& workspace,
                                   const Cancelled& cancelled) override {
    api::Client client = Client();
    return SaveTaskOutputs(client, task_id, workspace, node_, cancelled);
  }
  Status Report(const std::string& task_id, const proto::TaskReport& report) override {
    api::Client client = Client();
    auto r = client.Agent().Report(task_id, report);
    if (!r) return tl::unexpected(r.error());
    return {};
  }
  void Log(const std::string& line) override { LogLine(line); }

 private:
  // The runners' steps: bulk transfers of inputs, snapshots and datasets, whose thousands of
  // chunk requests may outrun the node key's burst — a throttled one waits and goes again.
  api::Client Client() const {
    api::ClientOptions o;
    o.timeout = kStepTimeout;
    o.ca_file = ca_file_;
    o.throttled_wait = kThrottledWait;
    return api::Client(endpoint_, access_key_, secret_key_, o);
  }

  // The checkpoint protocol (task_runtime.h kCheckpointDirName): when the task said it handles
  // the signal, a new request number, the signal, and a wait for the task's answer. Whether it
  // answered in time (the snapshot is then application-consistent).
  bool Checkpoint(const std::string& task_id, const SnapshotJob& job) {
    const std::string dir = runtime_->TaskDir(task_id) + "/" + kCheckpointDirName;
    const std::optional<int64_t> pid = ReadSmallNumber(dir + "/" + kCheckpointReady);
    if (!pid) return false;  // it never said it handles the signal (or named no process)
    const int sig = CheckpointSignalNumber(job.checkpoint_signal);
    const std::string request = std::to_string(next_checkpoint_++);
    if (Status s =
            os::WriteFileAtomically(dir + "/" + kCheckpointRequest, request + "\n", {.mode = 0644});
        !s) {
      LogLine("checkpoint of " + task_id + " not asked for: " + s.error().message);
      return false;
    }
    if (Status s = runtime_->Signal(task_id, static_cast<pid_t>(*pid), sig); !s) {
      LogLine("checkpoint of " + task_id + " not asked for: " + s.error().message);
      return false;
    }
    const auto deadline = std::chrono::steady_clock::now() +
                          milliseconds(job.checkpoint_timeout_ms > 0 ? job.checkpoint_timeout_ms
                                                                     : kDefaultCheckpointTimeoutMs);
    const std::string done = dir + "/" + kCheckpointDone;
    while (std::chrono::steady_clock::now() < deadline) {
      if (ReadSmallNumber(done) == std::stoll(request)) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    LogLine("checkpoint of " + task_id + " not answered within its timeout: crash-consistent");
    return false;
  }

  // Stops the task (SIGTERM, SIGKILL after kStopGrace) and waits until the runtime saw it end.
  void StopAndWait(const std::string& task_id) {
    if (!runtime_->RunningTaskOf(task_id)) return;
    if (Status s = runtime_->Stop(task_id, kStopGrace); !s) {
      LogLine("cannot stop " + task_id +
              " before its last snapshot is recorded: " + s.error().message);
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + kStopGrace + milliseconds(5'000);
    while (runtime_->RunningTaskOf(task_id) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    LogLine(task_id + (runtime_->RunningTaskOf(task_id) ? ": still running" : ": stopped") +
            " before its last snapshot is recorded");
  }

  // A scratch file for an image's archive under images_root_, gone once closed.
  Result<UniqueFd> ScratchFile() const {
    std::error_code ec;
    fs::create_directories(images_root_, ec);
    UniqueFd fd(::open(images_root_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    if (!fd.ok()) {
      return MakeError(ErrorCode::kInternal,
                       "cannot make a scratch file in " + images_root_ + ": " + ErrnoText(errno));
    }
    return fd;
  }

  // The task's container saved as an image over the task's own (job.image), its archive chunked
  // into the cache.
  Result<proto::ManifestImage> SaveImage(const std::string& task_id, const SnapshotJob& job) {
    DockerRuntime* docker = runtime_->docker();
    if (docker == nullptr) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "its container cannot be saved: " + runtime_->docker_unavailable());
    }
    Result<UniqueFd> file = ScratchFile();
    if (!file) return tl::unexpected(file.error());
    Result<docker::LoadArchive> archive = docker->SaveImage(
        task_id, job.image, file->get(),
        "gpupool snapshot of task " + task_id + " (run " + std::to_string(job.run) + ")");
    if (!archive) return tl::unexpected(archive.error());
    Result<proto::ManifestFile> chunked = ChunkIntoCache(file->get(), "image.tar", cache_);
    if (!chunked) return tl::unexpected(chunked.error());
    LogLine(task_id + ": its container saved as image " + ShortId(archive->id) + " (" +
            std::to_string(archive->bytes) + " bytes over " + job.image + ")");
    return proto::ManifestImage{archive->id, job.image, std::move(*chunked)};
  }

  // A saved image present in Docker: when it is not, its archive is restored from the chunks
  // and loaded (over its base, pulled when missing).
  Status EnsureSavedImage(api::Client& client, const std::string& task_id,
                          const proto::ManifestImage& image, const Cancelled& cancelled) {
    DockerRuntime* docker = runtime_->docker();
    if (docker == nullptr) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "its saved image cannot be loaded: " + runtime_->docker_unavailable());
    }
    Result<bool> here = docker->HasImage(image.id);
    if (!here) return tl::unexpected(here.error());
    if (*here) return {};
    const std::string dir = images_root_ + "/" + task_id;
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::create_directories(dir, ec);
    Result<Restored> archive = RestoreFiles(client, ChunkSource::Task(task_id), {image.archive},
                                            cache_, dir, kTransferStreams, cancelled);
    Status loaded = archive ? Status() : Status(tl::unexpected(archive.error()));
    if (loaded) {
      UniqueFd fd(::open((dir + "/" + image.archive.path).c_str(), O_RDONLY | O_CLOEXEC));
      loaded = fd.ok() ? docker->LoadImage(image.id, image.base, fd.get(), image.archive.size)
                       : Status(MakeError(ErrorCode::kInternal,
                                          "cannot open the image's archive: " + ErrnoText(errno)));
    }
    fs::remove_all(dir, ec);
    if (!loaded) {
      return MakeError(loaded.error().code,
                       "its saved image " + ShortId(image.id) + ": " + loaded.error().message);
    }
    LogLine(task_id + ": loaded its saved image " + ShortId(image.id));
    return {};
  }

  // Keeps the chunk cache within its size (AgentOptions::chunk_cache_bytes).
  void TrimCache() {
    Result<int64_t> freed = cache_.Trim(cache_bytes_);
    if (!freed) LogLine("chunk cache not trimmed: " + freed.error().message);
  }

  const std::string endpoint_, ca_file_, access_key_, secret_key_, node_, inputs_root_,
      images_root_;
  const os::ChunkDir cache_;
  const int64_t cache_bytes_;
  const std::shared_ptr<RuntimeRouter> runtime_;
  const std::shared_ptr<DatasetCache> datasets_;
  // Checkpoint requests are numbered from the wall clock at start: never reused after a restart.
  std::atomic<int64_t> next_checkpoint_{
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count()};
};

namespace {

std::vector<std::string> LoadUuids(const std::vector<GpuLoad>& loads) {
  std::vector<std::string> out;
  for (const GpuLoad& l : loads) out.push_back(l.uuid);
  return out;
}

// data_dir/bindings/<id>.json: what the runtime does not keep but a restarted agent needs.
json BindingJson(int64_t bound_ms, const std::vector<GpuLoad>& loads) {
  json l = json::array();
  for (const GpuLoad& x : loads) {
    l.push_back({{"uuid", x.uuid}, {"util_pct", x.util_pct}, {"mem_mib", x.mem_mib}});
  }
  return {{"bound_ms", bound_ms}, {"loads", std::move(l)}};
}

void ReadBinding(const std::string& path, int64_t* bound_ms, std::vector<GpuLoad>* loads) {
  const std::optional<std::string> text = ReadFile(path);
  if (!text) return;
  const json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  ReadInt(j, "bound_ms", bound_ms);
  const auto l = j.find("loads");
  if (l == j.end() || !l->is_array()) return;
  for (const json& x : *l) {
    if (!x.is_object()) continue;
    GpuLoad load;
    if (ReadString(x, "uuid", &load.uuid) && ReadInt(x, "util_pct", &load.util_pct) &&
        ReadInt(x, "mem_mib", &load.mem_mib) && !load.uuid.empty()) {
      loads->push_back(load);
    }
  }
}

// FNV-1a of `text`, 8 hex digits: stable across builds and restarts (the cgroup it names must
// stay the same for a re-adopted task's siblings).
std::string StableHashHex(const std::string& text) {
  uint32_t h = 2166136261u;
  for (unsigned char c : text) h = (h ^ c) * 16777619u;
  char out[9];
  std::snprintf(out, sizeof(out), "%08x", h);
  return out;
}

}  // namespace

Agent::Agent(AgentOptions options, std::unique_ptr<GpuProbe> probe, std::vector<Gpu> gpus,
             std::shared_ptr<Shared> shared)
    : options_(std::move(options)),
      probe_(std::move(probe)),
      gpus_(std::move(gpus)),
      shared_(std::move(shared)) {}

Result<std::unique_ptr<Agent>> Agent::Start(AgentOptions o, std::string* banner) {
  if (o.endpoint.empty()) return InvalidArgument("the server endpoint is empty");
  if (o.access_key.empty() != o.secret_key.empty()) {
    return InvalidArgument("an access key and its secret key go together; give both or neither");
  }
  if (o.node_name.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
      return InvalidArgument("cannot read the host name; name the node explicitly");
    }
    o.node_name = host;
  }
  if (!ValidName(o.node_name)) {
    return InvalidArgument("node name '" + o.node_name +
                           "' must be 1..128 characters of A-Z a-z 0-9 - _ .");
  }
  if (o.data_dir.empty()) o.data_dir = os::DefaultDataDir("gpupool-agent");
  if (o.cpu_milli < 0 || o.memory_mib < 0) {
    return InvalidArgument("cpu_milli and memory_mib must not be negative");
  }
  if (o.cpu_milli == 0) o.cpu_milli = DetectCpuMilli();
  if (o.memory_mib == 0) o.memory_mib = DetectMemoryMib();
  if (o.memory_mib <= 0) {
    return InvalidArgument("cannot read MemTotal from /proc/meminfo; give the memory explicitly");
  }
  if (o.heartbeat_interval.count() <= 0) return InvalidArgument("heartbeat interval must be > 0");
  if (o.wait_ms < 100 || o.wait_ms > 30'000) {
    return InvalidArgument("wait_ms must be 100..30000, got " + std::to_string(o.wait_ms));
  }

  std::string probe_banner;
  auto probe = OpenProbe(o.simulate_gpus, o.node_name, &probe_banner, o.nvml_library);
  if (!probe) return tl::unexpected(probe.error());
  auto gpus = (*probe)->Discover();
  if (!gpus) return tl::unexpected(gpus.error());

  std::error_code ec;
  const bool existed = fs::exists(o.data_dir, ec);
  fs::create_directories(o.data_dir, ec);
  if (ec) {
    return MakeError(ErrorCode::kInternal,
                     "cannot create data dir " + o.data_dir + ": " + ec.message());
  }
  if (!existed) ::chmod(o.data_dir.c_str(), 0711);  // task uids walk through it
  // Runners stage inputs in data_dir/inputs/<id>; what an earlier agent left there is stale.
  fs::remove_all(o.data_dir + "/inputs", ec);
  fs::create_directories(o.data_dir + "/bindings", ec);
  if (ec) {
    return MakeError(ErrorCode::kInternal,
                     "cannot create " + o.data_dir + "/bindings: " + ec.message());
  }
  std::string ca_pem;
  if (!o.ca_file.empty()) {
    std::ifstream in(o.ca_file);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in || text.str().find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      return InvalidArgument("CA file '" + o.ca_file +
                             "' cannot be read or holds no PEM certificate");
    }
    ca_pem = text.str();
  }
  // Without an admin's key the agent uses its node's own credentials: kept from its first join,
  // or obtained now with the join token.
  std::string identity_line;
  if (o.access_key.empty()) {
    auto identity =
        LoadOrJoin(o.endpoint, o.ca_file, o.join_token, o.node_name, o.data_dir, &identity_line);
    if (!identity) return tl::unexpected(identity.error());
    o.access_key = identity->access_key;
    o.secret_key = identity->secret_key;
  }
  o.join_token.clear();  // needed for the first join only

  auto shared = std::make_shared<Shared>();
  shared->endpoint = o.endpoint;
  shared->ca_file = o.ca_file;
  shared->access_key = o.access_key;
  shared->secret_key = o.secret_key;
  shared->node = o.node_name;
  shared->heartbeat_interval = o.heartbeat_interval;
  shared->wait_ms = o.wait_ms;
  if (o.disk_gib == 0) o.disk_gib = DetectDiskGib(o.data_dir);
  shared->registration = Registration(o.node_name, o.cpu_milli, o.memory_mib, o.disk_gib, *gpus);
  // Where the other members of a distributed job reach this node's tasks.
  std::string address_note;
  if (o.advertise_addr.empty()) {
    if (Result<std::string> toward = LocalAddressToward(o.endpoint)) {
      o.advertise_addr = *toward;
      address_note = " (the route toward the server; --advertise-addr to set it)";
    } else {
      address_note =
          " unknown (" + toward.error().message + "): jobs' members name it by " + o.node_name;
    }
  }
  shared->registration.address = o.advertise_addr;
  if (!o.shared_storage.empty()) {
    std::error_code shared_ec;
    if (!fs::is_directory(o.shared_storage, shared_ec)) {
      return InvalidArgument("--shared-storage " + o.shared_storage + " is not a directory");
    }
    fs::create_directories(o.shared_storage + "/volumes", shared_ec);
    if (shared_ec) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "cannot create " + o.shared_storage + "/volumes: " + shared_ec.message());
    }
    shared->registration.shared_storage = true;
  }
  const std::string interface = o.advertise_addr.empty() ? "" : InterfaceOf(o.advertise_addr);

  // Simulated GPUs are no devices: their containers get the environment alone, and nothing
  // allocates memory on them to hold to a share.
  const bool real_gpus = o.simulate_gpus.empty() && !gpus->empty();
  GpuMemoryShares shares{.enforce = real_gpus, .cudashim = {}};
  if (real_gpus) {
    std::error_code exe_ec;
    auto cudashim = FindCudashim(o.cudashim, fs::read_symlink("/proc/self/exe", exe_ec).string());
    if (!cudashim) return tl::unexpected(cudashim.error());
    shares.cudashim = *cudashim;
    LogLine(shares.cudashim.empty()
                ? std::string("GPU-memory shares: no ") + kCudashimName +
                      " beside the agent (--cudashim PATH): tasks holding a share of a GPU "
                      "are refused here"
                : "GPU-memory shares: held by " + shares.cudashim + ", preloaded into their tasks");
  }
  RuntimeOptions ro;
  ro.own_uid = o.runtime_own_uid;
  ro.gpu_memory = shares;
  // One group per agent (node name and data dir), so that agents on one machine — simulated
  // nodes, or two pools — never share a task's cgroup: task ids are per server, and a shared
  // group would mix their limits and OOM counters.
  if (o.node_name.size() <= 100) {
    ro.cgroup_name = "gpupool-" + o.node_name + "-" + StableHashHex(fs::absolute(o.data_dir));
  }
  ro.on_exit = [weak = std::weak_ptr<Shared>(shared)] {
    if (auto s = weak.lock()) {
      {
        std::lock_guard lock(s->mu);
        s->exits_pending = true;
      }
      s->cv.notify_all();
    }
  };
  ro.on_warning = LogLine;
  DockerOptions docker;
  docker.on_warning = LogLine;
  docker.socket = o.docker_socket;
  docker.network_mode = o.docker_network;
  docker.log_max_bytes = ro.log_max_bytes;
  docker.log_keep = ro.log_keep;
  docker.gpu_devices = real_gpus;
  docker.gpu_memory = shares;
  auto runtime = RuntimeRouter::Open(o.data_dir + "/runtime", std::move(ro), o.data_dir + "/docker",
                                     std::move(docker));
  if (!runtime) return tl::unexpected(runtime.error());
  // What the scheduler needs to know of docker here: image tasks go only where it works, and
  // image tasks with GPUs only where it can give them.
  {
    proto::NodeRegistration& r = shared->registration;
    const DockerRuntime* d = (*runtime)->docker();
    r.docker = d != nullptr;
    r.docker_gpus = d != nullptr && (!real_gpus || d->nvidia());
    if (d == nullptr) {
      r.runtime_note = "docker runtime unavailable: " + (*runtime)->docker_unavailable();
    } else if (!r.docker_gpus) {
      r.runtime_note = d->description() +
                       "; no NVIDIA container runtime, so tasks with an image and GPUs cannot "
                       "run here";
    } else {
      r.runtime_note = d->description() + (!gpus->empty() && !real_gpus
                                               ? "; simulated GPUs: containers get their "
                                                 "environment alone"
                                               : "");
    }
    if (shares.enforce && shares.cudashim.empty()) {
      r.runtime_note += std::string("; no ") + kCudashimName +
                        ", so tasks holding a share of a GPU's memory fail here";
    }
    // Transparent process checkpointing (process_checkpoint.h): a label where it would work,
    // else why not; snapshots hold workspaces either way.
    const ProcessCheckpointSupport criu = DetectProcessCheckpoint(real_gpus, FindProgram);
    if (criu.available) {
      r.labels[kProcessCheckpointLabel] = "criu";
    } else {
      r.runtime_note += "; process checkpointing unavailable: " + criu.why;
    }
    if (r.runtime_note.size() > 1024) r.runtime_note.resize(1024);
  }
  // SSH into tasks: a server per connection, as the task's own user.
  std::shared_ptr<const SshServer> ssh;
  std::string ssh_unavailable;
  if (!(*runtime)->process().own_uids()) {
    ssh_unavailable = "tasks run under the agent's own uid here (SSH needs an agent run as root)";
  } else if (Result<SshServer> prepared = PrepareSshServer(o.data_dir + "/ssh"); !prepared) {
    ssh_unavailable = prepared.error().message;
  } else {
    ssh = std::make_shared<const SshServer>(std::move(*prepared));
    shared->registration.ssh_host_key = ssh->public_key;
  }

  std::unique_ptr<Agent> agent(
      new Agent(std::move(o), std::move(*probe), std::move(*gpus), shared));
  agent->runtime_ = std::move(*runtime);
  agent->ca_pem_ = std::move(ca_pem);
  agent->interface_ = interface;
  auto datasets = DatasetCache::Open(
      agent->options_.data_dir + "/datasets", os::ChunkDir(agent->options_.data_dir + "/chunks"),
      agent->options_.dataset_cache_bytes, agent->options_.chunk_cache_bytes);
  if (!datasets) return tl::unexpected(datasets.error());
  shared->datasets = std::move(*datasets);
  agent->steps_ = std::make_shared<Steps>(agent->options_, agent->runtime_, shared->datasets);
  const AgentOptions& opt = agent->options_;
  TelemetryOptions to;
  to.cpu_milli = DetectCpuMilli();
  agent->telemetry_ =
      std::make_unique<TelemetryCollector>(opt.node_name, *agent->runtime_, *agent->probe_, to);
  agent->disk_watch_ = std::make_unique<DiskWatch>(opt.disk_check_interval);

  // Adopt before anything can launch: a task a previous agent started is never started twice.
  auto adopted = agent->runtime_->Adopt();
  if (!adopted) return tl::unexpected(adopted.error());
  agent->TakeAdopted(*adopted);

  {
    api::Client client(opt.endpoint, opt.access_key, opt.secret_key,
                       shared->Timeout(milliseconds(15'000)));
    if (Status st = shared->Register(client); !st) {
      if (st.error().code != ErrorCode::kUnavailable) {
        return MakeError(st.error().code, "registering node " + opt.node_name + " at " +
                                              opt.endpoint + ": " + st.error().message);
      }
      shared->need_register = true;
      LogLine("cannot reach " + opt.endpoint + " (" + st.error().message +
              "); registering in the background");
    }
  }

  if (banner != nullptr) {
    std::ostringstream b;
    b << "gpupool agent: node " << opt.node_name << ": " << probe_banner << "; " << opt.cpu_milli
      << " milli-CPU, " << opt.memory_mib << " MiB memory, " << opt.disk_gib << " GiB disk\n"
      << "gpupool agent: server " << opt.endpoint << ", data dir " << opt.data_dir
      << "; tasks run under "
      << (agent->runtime_->process().own_uids() ? "their own uids" : "the agent's uid")
      << ", cgroups " << agent->runtime_->process().cgroups().Describe() << "; "
      << (agent->runtime_->process().task_view()
              ? std::string("each in a mount namespace of its own with its workspace at ") +
                    kTaskHome + " and a private /tmp"
              : "no mount namespaces (" + agent->runtime_->process().task_view_unavailable() +
                    "): tasks see their workspace at its path on this host")
      << "\n"
      << "gpupool agent: tasks with an image: "
      << (agent->runtime_->docker() != nullptr
              ? shared->registration.runtime_note
              : "docker runtime unavailable (" + agent->runtime_->docker_unavailable() +
                    "); the server places none here until the agent is restarted with docker "
                    "running");
    b << "\ngpupool agent: address for distributed jobs: " << opt.advertise_addr << address_note
      << (interface.empty() ? "" : ", interface " + interface);
    b << "\ngpupool agent: volumes: node-local in " << opt.data_dir << "/volumes, "
      << (opt.shared_storage.empty()
              ? std::string("no shared storage (--shared-storage): tasks with shared volumes "
                            "are not placed here")
              : "shared in " + opt.shared_storage + "/volumes");
    b << "\ngpupool agent: datasets: in " << opt.data_dir << "/datasets, up to "
      << (opt.dataset_cache_bytes >> 30) << " GiB (" << shared->datasets->Held(SIZE_MAX).size()
      << " version(s) here)";
    b << "\ngpupool agent: ssh into tasks: "
      << (ssh != nullptr ? ssh->dropbear + ", host key " + ssh->fingerprint
                         : "off (" + ssh_unavailable + ")");
    if (!identity_line.empty()) b << "\ngpupool agent: " << identity_line;
    if (!adopted->running.empty() || !adopted->ended.empty()) {
      b << "\ngpupool agent: adopted " << adopted->running.size() << " running task(s); "
        << adopted->ended.size() << " ended while the agent was away";
    }
    *banner = b.str();
  }

  // Each task's supervisor kills it when the agent has been gone for its lease: strictly before
  // the server, which has heard from the agent at most a heartbeat interval before it went,
  // declares the node lost and runs the task elsewhere.
  shared->on_node_timeout = [weak = std::weak_ptr<RuntimeRouter>(agent->runtime_),
                             interval = opt.heartbeat_interval](milliseconds timeout) {
    const auto router = weak.lock();  // a heartbeat thread left running past Stop: nothing to do
    if (router == nullptr) return;
    const milliseconds lease = TaskLease(timeout, interval);
    if (lease == router->lease()) return;
    router->SetLease(lease);
    LogLine("tasks' lease: " + std::to_string(lease.count()) +
            " ms (the server's node timeout is " + std::to_string(timeout.count()) +
            " ms, heartbeats every " + std::to_string(interval.count()) + " ms)");
  };
  // A restartable task's lease runs from the last heartbeat the server acknowledged, so that a
  // network cut ends it before the server runs it elsewhere (RuntimeRouter::ServerHeard).
  shared->on_heard = [weak = std::weak_ptr<RuntimeRouter>(agent->runtime_)](
                         std::chrono::steady_clock::time_point sent) {
    if (const auto router = weak.lock()) router->ServerHeard(sent);
  };
  shared->thread_done.assign(kNetworkThreads, false);
  agent->network_.resize(kNetworkThreads);
  agent->network_[kHeartbeatThread] = std::thread(&Shared::HeartbeatLoop, shared, kHeartbeatThread);
  agent->network_[kPollThread] = std::thread(&Shared::PollLoop, shared, kPollThread);
  agent->network_[kTelemetryThread] = std::thread(&Shared::TelemetryLoop, shared, kTelemetryThread);
  agent->control_ = std::thread([a = agent.get()] { a->ControlLoop(); });

  // The tunnel: the server's streams into this node's tasks.
  agent->tunnel_io_ = std::make_unique<api::IoLoop>(2);
  agent->tunnels_ = std::make_shared<TunnelDispatcher>();
  agent->tunnels_->Register(
      "port", PortHandler(*agent->tunnel_io_,
                          [runtime = agent->runtime_](const std::string& task, int32_t port) {
                            return ResolveTaskPort(*runtime, task, port);
                          }));
  agent->tunnels_->Register(
      "exec", ExecHandler(
                  [runtime = agent->runtime_](const std::string& task) -> Status {
                    if (auto t = runtime->RunningTaskOf(task); !t) return tl::unexpected(t.error());
                    return {};
                  },
                  [runtime = agent->runtime_](const std::string& task, const ExecSpec& spec) {
                    return runtime->Exec(task, spec);
                  }));
  agent->live_files_ =
      std::make_shared<LiveFiles>([runtime = agent->runtime_, mounts = agent->live_mounts_](
                                      const std::string& task) -> Result<LiveWorkspace> {
        Result<RunningTask> t = runtime->RunningTaskOf(task);
        if (!t) return tl::unexpected(t.error());
        LiveWorkspace where{t->workspace, runtime->TaskDir(task) + "/uploads", {}};
        std::lock_guard lock(mounts->mu);
        if (const auto it = mounts->of.find(task); it != mounts->of.end())
          where.mounts = it->second;
        return where;
      });
  agent->tunnels_->Register("files", LiveFilesHandler(agent->live_files_));
  agent->tunnels_->Register(
      "ssh", SshHandler(
                 ssh, ssh_unavailable,
                 [runtime = agent->runtime_](const std::string& task) -> Status {
                   Result<RunningTask> t = runtime->RunningTaskOf(task);
                   if (!t) return tl::unexpected(t.error());
                   if (!t->container.empty()) {
                     return MakeError(ErrorCode::kFailedPrecondition,
                                      "task " + task +
                                          " runs in a container: SSH logs into "
                                          "process tasks only (gpupool shell " +
                                          task + " opens a shell in it)");
                   }
                   if (!t->own_uid) {
                     return MakeError(ErrorCode::kFailedPrecondition,
                                      "task " + task +
                                          " runs under the agent's own uid: SSH "
                                          "logs into tasks under uids of their own");
                   }
                   return {};
                 },
                 [runtime = agent->runtime_](const std::string& task, const ExecSpec& spec) {
                   return runtime->Exec(task, spec);
                 },
                 LogLine));
  TunnelClientOptions tunnel_options;
  tunnel_options.endpoint = opt.endpoint;
  tunnel_options.ca_file = opt.ca_file;
  tunnel_options.access_key = opt.access_key;
  tunnel_options.secret_key = opt.secret_key;
  tunnel_options.node = opt.node_name;
  tunnel_options.log = LogLine;
  agent->tunnel_ =
      std::make_unique<TunnelClient>(tunnel_options, *agent->tunnel_io_, agent->tunnels_);
  return agent;
}

Agent::~Agent() { Stop(); }

void Agent::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (tunnel_) tunnel_->Stop();  // its streams are reset; the tasks run on
  {
    std::lock_guard lock(shared_->mu);
    shared_->stop = true;
  }
  shared_->cv.notify_all();
  if (control_.joinable()) control_.join();
  if (remover_.joinable()) remover_.join();
  // Runners stop at their next step; one sending a report (or in a launch) gets the same moment
  // as the heartbeat. The long-poll is not waited for (it may hold its request for wait_ms, and
  // abandoning a GET loses nothing).
  const auto deadline = std::chrono::steady_clock::now() + kShutdownWait;
  for (auto& [id, o] : owned_) o->runner->Cancel();
  size_t undelivered = 0;
  for (auto& [id, o] : owned_) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    o->runner->Release(std::max(left, milliseconds(0)));
    if (o->runner->reports_pending()) ++undelivered;
  }
  std::unique_lock lock(shared_->mu);
  shared_->cv.wait_until(lock, deadline, [&] {
    return shared_->thread_done.empty() || shared_->thread_done[kHeartbeatThread];
  });
  for (size_t i = 0; i < network_.size(); ++i) {
    if (shared_->thread_done[i]) {
      network_[i].join();
    } else {
      network_[i].detach();  // a request in flight; it ends on its own and touches only shared_
    }
  }
  network_.clear();
  lock.unlock();
  if (undelivered > 0) {
    Log(std::to_string(undelivered) +
        " task(s) with reports not delivered; the next agent on this data dir reports them again");
  }
}

std::string Agent::BindingPath(const std::string& task_id) const {
  return options_.data_dir + "/bindings/" + task_id + ".json";
}

void Agent::Log(const std::string& line) const { LogLine(line); }

Agent::Owned& Agent::Own(const std::string& task_id, int64_t bound_ms) {
  auto o = std::make_unique<Owned>();
  o->bound_ms = bound_ms;
  o->runner = std::make_unique<TaskRunner>(task_id, bound_ms, steps_,
                                           [weak = std::weak_ptr<Shared>(shared_)] {
                                             if (auto s = weak.lock()) {
                                               {
                                                 std::lock_guard lock(s->mu);
                                                 s->runner_events = true;
                                               }
                                               s->cv.notify_all();
                                             }
                                           });
  Owned& ref = *o;
  owned_[task_id] = std::move(o);
  return ref;
}

void Agent::TakeAdopted(const AdoptResult& adopted) {
  for (const RunningTask& rt : adopted.running) {
    if (owned_.count(rt.task_id)) continue;  // ours already
    int64_t bound_ms = 0;
    std::vector<GpuLoad> loads;
    ReadBinding(BindingPath(rt.task_id), &bound_ms, &loads);
    Owned& o = Own(rt.task_id, bound_ms);
    o.runner->Adopt();
    o.running = true;
    o.pid = rt.pid;
    o.started_ms = rt.started_ms;
    o.loads = std::move(loads);
    for (const GpuLoad& l : o.loads) probe_->SetLoad(l.uuid, rt.pid, l.util_pct, l.mem_mib);
    telemetry_->Track(rt.task_id, o.bound_ms, LoadUuids(o.loads));
    Log("adopted " + rt.task_id + " pid " + std::to_string(rt.pid) + " (running since " +
        std::to_string(rt.started_ms) + ")");
  }
  for (const ExitReport& r : adopted.ended) {
    Log(r.task_id + " ended while the agent was away: " + r.reason);
    adopted_exits_.push_back(r);
  }
}

void Agent::ControlLoop() {
  Shared& s = *shared_;
  while (true) {
    std::optional<Assignments> fresh;
    {
      std::unique_lock lock(s.mu);
      s.cv.wait_for(lock, kControlTick, [&] {
        return s.stop || s.fresh.has_value() || s.exits_pending || s.runner_events ||
               s.telemetry_answer.has_value();
      });
      if (s.stop) return;
      fresh.swap(s.fresh);
      s.exits_pending = false;
      s.runner_events = false;
    }
    TakeRunnerEvents();
    TelemetryStep();
    if (fresh) {
      desired_ = std::move(*fresh);
      have_desired_ = true;
    }
    if (!have_desired_) continue;  // ends wait for the server's view: were they wanted?
    for (const ExitReport& r : std::exchange(adopted_exits_, {})) HandleExit(r);
    for (const ExitReport& r : runtime_->Reap()) HandleExit(r);
    Reconcile();
    EnforceDisk();
    RemoveVolumes();
    if (fresh && !in_sync_) {
      in_sync_ = true;
      size_t running = 0;
      for (const auto& [id, o] : owned_) running += o->running ? 1 : 0;
      Log("in sync with the server: " + std::to_string(desired_.tasks.size()) +
          " task(s) bound to node " + options_.node_name + ", " + std::to_string(running) +
          " running here");
    }
  }
}

void Agent::TakeRunnerEvents() {
  bool adopt = false;
  for (auto it = owned_.begin(); it != owned_.end();) {
    const std::string& id = it->first;
    Owned& o = *it->second;
    bool done = false;
    bool duplicate = false;  // the runtime refused the launch: it has a record of the task
    for (RunnerEvent& e : o.runner->TakeEvents()) {
      switch (e.kind) {
        case RunnerEvent::Kind::kLaunched:
          OnLaunched(id, o, e.running);
          break;
        case RunnerEvent::Kind::kLaunchFailed:
          o.ended = true;              // its runner reports the failure
          finished_[id] = o.bound_ms;  // not launched again for this binding
          break;
        case RunnerEvent::Kind::kAlreadyExists:
          duplicate = adopt = true;
          break;
        case RunnerEvent::Kind::kSnapshotted:
          // Only its last snapshot's end stops it: a user's or a periodic one in flight when
          // the stop came ends first.
          if (o.stop_after_snapshot && o.running && IsLastSnapshotTrigger(e.trigger)) {
            o.stop_after_snapshot = false;
            StopTask(id, o, "its last snapshot is taken; the server no longer wants it here");
          }
          break;
        case RunnerEvent::Kind::kDone:
          done = true;
          break;
      }
    }
    if (!done) {
      ++it;
      continue;
    }
    // Its final report was delivered (or there was none): its record goes once its output is
    // on the server too. A launch the runtime refused as a duplicate keeps the runtime's record,
    // which is adopted below.
    const std::string task_id = id;
    it = owned_.erase(it);
    if (!duplicate) RetireTask(task_id);
  }
  if (adopt) {
    if (auto adopted = runtime_->Adopt()) TakeAdopted(*adopted);
  }
}

void Agent::OnLaunched(const std::string& id, Owned& o, const RunningTask& rt) {
  o.running = !o.ended;  // an exit reaped before this event: ended already
  o.pid = rt.pid;
  o.started_ms = rt.started_ms;
  o.running_reported = true;  // the runner sends it
  const std::string binding = BindingJson(o.bound_ms, o.loads).dump();
  if (Status saved = os::WriteFileAtomically(BindingPath(id), binding); !saved) {
    Log(saved.error().message);
  }
  Log("launched " + id + (rt.container.empty() ? "" : " container " + rt.container.substr(0, 12)) +
      " pid " + std::to_string(rt.pid) + " on " + o.where);
  if (!o.running) return;
  for (const GpuLoad& l : o.loads) probe_->SetLoad(l.uuid, rt.pid, l.util_pct, l.mem_mib);
  telemetry_->Track(id, o.bound_ms, LoadUuids(o.loads));
  if (o.dropped) StopTask(id, o, "the server no longer wants it here");
}

void Agent::StopTask(const std::string& id, const Owned& o, const std::string& why) {
  if (Status st = runtime_->Stop(id, kStopGrace); !st) {
    Log("cannot stop " + id + ": " + st.error().message);
    return;
  }
  Log("stopping " + id + " pid " + std::to_string(o.pid) + ": " + why);
}

void Agent::EnforceDisk() {
  for (const DesiredTask& d : desired_.tasks) {
    const auto it = owned_.find(d.id);
    if (d.disk_gib <= 0 || it == owned_.end() || !it->second->running || it->second->dropped ||
        !disk_watched_.insert(d.id).second) {
      continue;
    }
    // The process runtime's private /tmp counts too (docker tasks have none there: 0), and the
    // unfinished uploads into its workspace (live_files.h).
    disk_watch_->Watch(d.id,
                       {runtime_->Workspace(d.id), runtime_->TaskDir(d.id) + "/tmp",
                        runtime_->TaskDir(d.id) + "/uploads"},
                       d.disk_gib);
  }
  for (const DesiredTask& d : desired_.tasks) {
    const auto it = owned_.find(d.id);
    if (it == owned_.end() || !it->second->running || it->second->dropped) continue;
    if (d.volumes.empty() && d.datasets.empty()) continue;
    std::vector<LiveMount> mounts;
    for (const DatasetMount& m : d.datasets) {  // its version's files, read-only
      mounts.push_back({m.dataset_id, "dataset " + m.name,
                        m.path.substr(std::string_view(kTaskHome).size() + 1),
                        steps_->datasets().FilesDir(m.manifest), true});
    }
    for (const DesiredVolume& v : d.volumes) {
      const std::string dir = VolumeDir(v.id, v.shared);
      if (dir.empty()) continue;  // not launched here: a shared volume without shared storage
      mounts.push_back({v.id, "volume " + v.name,
                        v.path.substr(std::string_view(kTaskHome).size() + 1), dir, v.read_only});
      // A read-only mount cannot grow by this task's hand.
      if (v.size_bytes <= 0 || v.read_only) continue;
      auto [size, fresh] = volume_watched_.try_emplace(d.id + "/" + v.id, v.size_bytes);
      if (!fresh && size->second == v.size_bytes) continue;
      size->second = v.size_bytes;  // a resize: watched against its new size
      disk_watch_->WatchVolume(d.id, v.name, dir, v.size_bytes);
    }
    std::lock_guard lock(live_mounts_->mu);
    live_mounts_->of[d.id] = std::move(mounts);
  }
  for (DiskWatch::Exceeded& x : disk_watch_->TakeExceeded()) {
    const auto it = owned_.find(x.task_id);
    if (it == owned_.end() || !it->second->running) continue;
    it->second->stop_reason = x.reason;
    StopTask(x.task_id, *it->second, x.reason);
  }
}

std::string Agent::VolumeDir(const std::string& id, bool shared) const {
  if (!shared) return options_.data_dir + "/volumes/" + id;
  return options_.shared_storage.empty() ? "" : options_.shared_storage + "/volumes/" + id;
}

void Agent::RemoveVolumes() {
  const auto now = std::chrono::steady_clock::now();
  if (desired_.remove_volumes.empty() || removing_->load() ||
      now - removed_at_ < std::chrono::seconds(10)) {
    return;
  }
  if (remover_.joinable()) remover_.join();  // done with the last ones
  removed_at_ = now;
  removing_->store(true);
  std::vector<std::pair<std::string, std::vector<std::string>>> work;
  for (const std::string& id : desired_.remove_volumes) {
    // The server lists a node-local volume for its node only and a shared one for nodes with the
    // shared storage; ids are never reused, so both places may be cleared.
    std::vector<std::string> dirs = {VolumeDir(id, false), VolumeUploadsDir(VolumeDir(id, false))};
    if (!options_.shared_storage.empty()) {
      dirs.push_back(VolumeDir(id, true));
      dirs.push_back(VolumeUploadsDir(VolumeDir(id, true)));
    }
    work.emplace_back(id, std::move(dirs));
  }
  remover_ = std::thread([this, work = std::move(work), removing = removing_] {
    for (const auto& [id, dirs] : work) {
      Status removed = steps_->RemoveVolume(id, dirs);
      Log(removed ? "removed the files of deleted volume " + id
                  : "cannot remove deleted volume " + id + ": " + removed.error().message +
                        " (tried again in 10 s)");
    }
    removing->store(false);
  });
}

void Agent::RemoveTask(const std::string& task_id) {
  if (Status st = runtime_->Remove(task_id); !st && st.error().code != ErrorCode::kNotFound) {
    Log("cannot remove " + task_id + ": " + st.error().message);
  }
  std::error_code ec;
  fs::remove(BindingPath(task_id), ec);
}

void Agent::RetireTask(const std::string& task_id) {
  if (telemetry_->Tracking(task_id)) {
    retiring_.insert(task_id);
  } else {
    RemoveTask(task_id);
  }
}

void Agent::TelemetryStep() {
  Shared& s = *shared_;
  std::optional<proto::TelemetryAck> answer;
  bool busy;
  {
    std::lock_guard lock(s.mu);
    answer.swap(s.telemetry_answer);
    busy = s.telemetry_batch.has_value();
  }
  if (answer) {
    for (const std::string& id : telemetry_->Acknowledge(*answer)) {
      if (retiring_.erase(id)) RemoveTask(id);
    }
  }
  const int64_t mono = MonotonicMs();
  if (mono - last_sample_mono_ms_ >= kSampleIntervalMs) {
    last_sample_mono_ms_ = mono;
    telemetry_->Sample(WallMs());
  }
  if (busy) return;
  if (std::optional<proto::TelemetryBatch> batch = telemetry_->NextBatch(WallMs())) {
    {
      std::lock_guard lock(s.mu);
      s.telemetry_batch = std::move(*batch);
    }
    s.cv.notify_all();
  }
}

void Agent::HandleExit(const ExitReport& r) {
  const std::string& id = r.task_id;
  if (tunnels_) tunnels_->TaskEnded(id);
  if (live_files_) live_files_->Forget(id);
  auto it = owned_.find(id);
  Owned* o = it != owned_.end() ? it->second.get() : nullptr;
  int64_t bound_ms = 0;
  bool dropped = false;
  if (o != nullptr) {
    if (o->running) probe_->ClearLoad(o->pid);
    bound_ms = o->bound_ms;
    dropped = o->dropped;
  } else {
    // Ended while the agent was away, or before this agent knew of it: a runner for its end.
    std::vector<GpuLoad> ignored;
    ReadBinding(BindingPath(id), &bound_ms, &ignored);
    o = &Own(id, bound_ms);
    o->runner->Adopt();
  }
  o->running = false;
  o->ended = true;
  disk_watch_->Forget(id);
  disk_watched_.erase(id);
  {
    std::lock_guard lock(live_mounts_->mu);
    live_mounts_->of.erase(id);
  }
  std::erase_if(volume_watched_,
                [&](const auto& entry) { return entry.first.starts_with(id + "/"); });
  const DesiredTask* d = nullptr;
  for (const DesiredTask& t : desired_.tasks) {
    if (t.id == id) d = &t;
  }
  const bool other_binding =
      d != nullptr && bound_ms > 0 && d->bound_ms > 0 && bound_ms != d->bound_ms;
  telemetry_->Ended(id, bound_ms);
  if (other_binding) {
    Log(id + " ended (" + r.reason + "); the server bound it anew: not reported");
    o->runner->End(std::nullopt, "");
    return;
  }
  if (dropped || d == nullptr) {
    // The server ended this run itself (a stop, a stop condition, a drain, …): its outputs are
    // still saved, without a report.
    Log(id + " ended (" + r.reason + "); the server no longer wants it here: not reported");
    o->runner->End(std::nullopt, runtime_->Workspace(id));
    return;
  }
  // The server refuses a report for another binding of the task (e.g. from a node it lost).
  proto::TaskReport body = EndReport(r, d->bound_ms);
  if (r.kind == ExitKind::kStopped && !o->stop_reason.empty()) body.reason = o->stop_reason;
  Log(id + " ended: " + body.reason + " → " + body.state);
  finished_[id] = d->bound_ms;
  o->runner->End(std::move(body), runtime_->Workspace(id));
}

std::set<std::string> Agent::BusyUuids() const {
  std::set<std::string> busy;
  for (const auto& [id, o] : owned_) {
    if (o->ended) continue;
    for (const GpuLoad& l : o->loads) busy.insert(l.uuid);  // launching or running
  }
  return busy;
}

void Agent::Reconcile() {
  std::map<std::string, const DesiredTask*> want;
  for (const DesiredTask& d : desired_.tasks) want[d.id] = &d;

  // The dataset versions that tasks here mount, or are about to: never evicted.
  std::set<std::string> mounted;
  for (const DesiredTask& d : desired_.tasks) {
    for (const DatasetMount& m : d.datasets) mounted.insert(m.manifest);
    if (auto it = owned_.find(d.id); it != owned_.end()) {  // adopted ones learn theirs here
      it->second->datasets.clear();
      for (const DatasetMount& m : d.datasets) it->second->datasets.push_back(m.manifest);
    }
  }
  for (const auto& [id, o] : owned_) mounted.insert(o->datasets.begin(), o->datasets.end());
  steps_->datasets().SetInUse(std::move(mounted));

  // Owned but no longer wanted (stopped, preempted, lost, deleted, or bound anew): stopped now,
  // or once its launch is through.
  for (auto& [id, o] : owned_) {
    if (o->dropped || o->ended) continue;
    const auto it = want.find(id);
    const bool other_binding = it != want.end() && o->bound_ms > 0 && it->second->bound_ms > 0 &&
                               o->bound_ms != it->second->bound_ms;
    if (it != want.end() && !other_binding) continue;
    o->dropped = true;
    const std::string why =
        other_binding ? "the server bound it anew" : "the server no longer wants it here";
    // Taken off this node by a stop, preemption or drain: its last snapshot first, then stopped.
    const auto order = desired_.snapshots.find(id);
    if (o->running && order != desired_.snapshots.end() && o->run > 0 &&
        order->second.run == o->run) {
      const std::optional<SnapshotTrigger> trigger = ParseSnapshotTrigger(order->second.trigger);
      if (trigger && IsLastSnapshotTrigger(*trigger)) {
        o->stop_after_snapshot = true;
        o->runner->Snapshot(SnapshotJob{o->run, *trigger, order->second.request,
                                        o->checkpoint_signal, o->checkpoint_timeout_ms, o->image,
                                        order->second.image && !o->image.empty()});
        Log(id + ": " + why + "; its last snapshot first (" + order->second.trigger + ")");
        continue;
      }
    }
    if (o->running) {
      StopTask(id, *o, why);
    } else {
      Log(id + ": " + why + "; stopped once its launch is through");
    }
  }
  for (auto it = finished_.begin(); it != finished_.end();) {
    const auto d = want.find(it->first);
    const bool same = d != want.end() && (it->second == 0 || d->second->bound_ms == 0 ||
                                          it->second == d->second->bound_ms);
    it = same ? std::next(it) : finished_.erase(it);
  }

  for (const DesiredTask& d : desired_.tasks) {
    if (auto it = owned_.find(d.id); it != owned_.end()) {
      Owned& o = *it->second;
      // An earlier binding still stopping, a launch under way, an end being reported: the
      // runner is busy with this task; a new binding waits for it.
      if (o.dropped || o.ended || !o.running) continue;
      if (o.bound_ms == 0 && d.bound_ms > 0) {
        o.bound_ms = d.bound_ms;
        const std::string binding = BindingJson(o.bound_ms, o.loads).dump();
        if (Status saved = os::WriteFileAtomically(BindingPath(d.id), binding); !saved) {
          Log(saved.error().message);
        }
      }
      if (d.state == TaskState::kRunning) o.running_reported = true;
      o.run = d.run;
      o.checkpoint_signal = d.checkpoint_signal;
      o.checkpoint_timeout_ms = d.checkpoint_timeout_ms;
      o.image = d.image;
      const SnapshotJob job{
          d.run,  SnapshotTrigger::kPeriodic, 0, d.checkpoint_signal, d.checkpoint_timeout_ms,
          d.image};
      o.runner->SetPeriodic(d.snapshot_every_ms, job);
      if (auto order = desired_.snapshots.find(d.id); order != desired_.snapshots.end() &&
                                                      order->second.run == d.run &&
                                                      order->second.request > o.snapshot_request) {
        o.snapshot_request = order->second.request;
        SnapshotJob asked = job;
        asked.trigger = SnapshotTrigger::kManual;
        asked.request = order->second.request;
        asked.save_image = order->second.image && !d.image.empty();
        o.runner->Snapshot(asked);
      }
      if (!o.running_reported && WantsLaunch(d.state)) {
        // Adopted after the agent stopped between launching it and reporting it.
        o.running_reported = true;
        o.runner->Report(RunningReport(o.started_ms, o.bound_ms));
      }
      continue;
    }
    if (finished_.count(d.id)) continue;
    if (WantsLaunch(d.state)) {
      LaunchTask(d);
    } else if (d.state == TaskState::kRunning) {
      const std::string reason = "lost by the agent: " + d.id + " is not running on node " +
                                 options_.node_name + " and the agent has no record of it";
      Log(reason + " → failed");
      ReportFailed(d, -1, reason);
    }
  }
}

void Agent::ReportFailed(const DesiredTask& d, int exit_code, const std::string& reason) {
  finished_[d.id] = d.bound_ms;  // not launched again for this binding
  Owned& o = Own(d.id, d.bound_ms);
  o.ended = true;
  o.runner->End(FailedReport(exit_code, reason, WallMs(), d.bound_ms), "");
}

void Agent::LaunchTask(const DesiredTask& d) {
  auto fail = [&](const Error& e) {
    Log("cannot launch " + d.id + ": " + e.message + " → failed");
    ReportFailed(d, kLaunchFailedCode, e.message);
  };
  if (!d.mig_profile.empty() && d.gpus.size() == 1 && (!d.command.empty() || !d.image.empty())) {
    bool changed = false;
    if (Status st = EnsureMigInstance(*probe_, d.gpus[0], d.mig_profile, d.mig_start, BusyUuids(),
                                      &changed);
        !st) {
      return fail(st.error());
    }
    if (changed) {
      if (auto gpus = probe_->Discover()) gpus_ = std::move(*gpus);
      Log("re-partitioned GPU " + std::to_string(d.gpus[0]) + ": created MIG instance " +
          d.mig_profile + " at slot " + std::to_string(d.mig_start) + " for " + d.id);
      std::lock_guard lock(shared_->mu);
      shared_->registration.gpus = Registration(options_.node_name, options_.cpu_milli,
                                                options_.memory_mib, options_.disk_gib, gpus_)
                                       .gpus;
    }
  }
  auto plan = PlanLaunch(d, *probe_, gpus_, options_.endpoint);
  if (!plan) return fail(plan.error());
  for (const DesiredVolume& v : d.volumes) {
    const std::string dir = VolumeDir(v.id, v.shared);
    if (dir.empty()) {
      return fail(MakeError(ErrorCode::kFailedPrecondition,
                            "volume " + v.name + " is shared and node " + options_.node_name +
                                " has no shared storage (gpupool agent --shared-storage)")
                      .value());
    }
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      return fail(MakeError(ErrorCode::kInternal,
                            "cannot create volume " + v.name + " at " + dir + ": " + ec.message())
                      .value());
    }
    plan->spec.volumes.push_back({dir, v.path, v.read_only});
  }
  if (d.job_member) {
    plan->spec.host_network = true;
    if (!interface_.empty()) {
      plan->spec.env.try_emplace("NCCL_SOCKET_IFNAME", interface_);
      plan->spec.env.try_emplace("GLOO_SOCKET_IFNAME", interface_);
    }
  }
  // Where the task's own token is good (the SDK's Monitor inside the task reads this).
  if (plan->spec.env.count("GPUPOOL_TASK_TOKEN")) {
    plan->spec.env["GPUPOOL_ENDPOINT"] = options_.endpoint;
    // The CA's text rather than its path: the file is the agent's and need not be in the task's
    // view (its own uid, a container).
    if (!ca_pem_.empty()) plan->spec.env["GPUPOOL_CA_PEM"] = ca_pem_;
  }
  // The runner fetches the files uploaded while the task was pending (they become its
  // workspace), launches it and reports it running; OnLaunched hears of it.
  Owned& o = Own(d.id, d.bound_ms);
  o.run = d.run;
  o.checkpoint_signal = d.checkpoint_signal;
  o.checkpoint_timeout_ms = d.checkpoint_timeout_ms;
  o.image = d.image;
  for (const DatasetMount& m : d.datasets) o.datasets.push_back(m.manifest);
  o.loads = plan->loads;
  o.where = plan->spec.gpu_uuids.empty() ? "CPU only" : Join(plan->spec.gpu_uuids, ",");
  if (plan->spec.gpu_milli_per_gpu > 0) {
    o.where += " (" + std::to_string(plan->spec.gpu_milli_per_gpu) + " milli)";
  }
  std::optional<RestoreJob> restore;
  if (d.restore) {
    // Its first run starts from another task's snapshot with its own uploads over it; a later
    // run from its own snapshot, which holds all its files.
    restore = RestoreJob{*d.restore, d.run <= 1};
    Log(d.id + ": run " + std::to_string(d.run) + " restores its workspace from snapshot " +
        d.restore->id +
        (d.restore->image.empty()
             ? ""
             : " and runs in the image saved with it, " + ShortId(d.restore->image)));
    // The restore makes that image present (Steps::Restore) before the launch.
    if (!d.restore->image.empty()) plan->spec.image = d.restore->image;
  }
  o.runner->Launch(std::move(plan->spec), std::move(restore), d.datasets);
}

}  // namespace gpupool::agent
