// Implementation of task_runtime.h: spec validation, the task's variables and environment, exit
// kinds and reasons, the task directory's files and logs — what ProcessRuntime and DockerRuntime
// share.
#include "agent/runtime/task_runtime.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>

#include "agent/runtime/linux_proc.h"
#include "core/volume.h"

namespace gpupool::agent {

namespace fs = std::filesystem;

namespace {

constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";
constexpr const char* kReservedEnv[] = {
    "GPUPOOL_TASK_ID",
    "GPUPOOL_WORKSPACE",
    "GPUPOOL_METRICS_FILE",
    "GPUPOOL_CHECKPOINT_DIR",
    "GPUPOOL_CHECKPOINT_SIGNAL",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
    "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
    "GPUPOOL_GPU_MEM_LIMIT_BYTES",  // the interposer's limit
    "NVIDIA_VISIBLE_DEVICES",       // the container toolkit's GPU selection
};

}  // namespace

Status ValidTaskId(const std::string& id) {
  if (id.empty() || id.size() > 128 || id[0] == '.') {
    return InvalidArgument("task_id '" + id +
                           "': must be 1..128 characters and not start with '.'");
  }
  for (char c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return InvalidArgument("task_id '" + id + "': only letters, digits, '-', '_' and '.'");
    }
  }
  return {};
}

Status ValidateLaunchSpec(const LaunchSpec& s) {
  if (auto st = ValidTaskId(s.task_id); !st) return st;
  const std::string who = "task " + s.task_id + ": ";
  for (char c : s.image) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '\0') {
      return InvalidArgument(who + "image '" + s.image + "' holds a space or NUL byte");
    }
  }
  if ((s.image.empty() && s.command.empty()) || (!s.command.empty() && s.command[0].empty())) {
    return InvalidArgument(who + "command is empty");
  }
  for (const std::string& a : s.command) {
    if (a.find('\0') != std::string::npos) {
      return InvalidArgument(who + "command holds a NUL byte");
    }
  }
  for (const auto& [k, v] : s.env) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos ||
        v.find('\0') != std::string::npos) {
      return InvalidArgument(who + "env name '" + k + "' is not a valid variable name");
    }
    for (const char* r : kReservedEnv) {
      if (k == r) return InvalidArgument(who + "env " + k + " is set by the runtime");
    }
  }
  if (s.cpu_milli < 0) return InvalidArgument(who + "cpu_milli " + std::to_string(s.cpu_milli));
  if (s.memory_mib < 0) {
    return InvalidArgument(who + "memory_mib " + std::to_string(s.memory_mib));
  }
  if (s.pids_max < 0) return InvalidArgument(who + "pids_max " + std::to_string(s.pids_max));
  if (s.gpu_milli_per_gpu < 0 || s.gpu_milli_per_gpu > 1000) {
    return InvalidArgument(who + "gpu_milli_per_gpu " + std::to_string(s.gpu_milli_per_gpu) +
                           " is outside 0..1000");
  }
  if (s.gpu_mem_mib < 0) {
    return InvalidArgument(who + "gpu_mem_mib " + std::to_string(s.gpu_mem_mib));
  }
  std::vector<VolumeMount> mounts;
  for (const LaunchSpec::VolumeBind& v : s.volumes) {
    if (!v.host.starts_with('/')) {
      return InvalidArgument(who + "volume directory '" + v.host + "' is not absolute");
    }
    mounts.push_back({.volume_id = v.host,
                      .name = "v-" + std::to_string(mounts.size()),
                      .path = v.target,
                      .read_only = v.read_only});
  }
  if (Status ok = ValidateVolumeMounts(mounts); !ok) {
    return InvalidArgument(who + ok.error().message);
  }
  for (const std::string& u : s.gpu_uuids) {
    if (u.empty() || u.find(',') != std::string::npos || u.find('\0') != std::string::npos) {
      return InvalidArgument(who + "gpu uuid '" + u + "' is empty or holds a comma");
    }
  }
  return {};
}

bool HoldsGpuMemoryShare(const LaunchSpec& spec) {
  return !spec.gpu_uuids.empty() && spec.gpu_milli_per_gpu > 0 && spec.gpu_milli_per_gpu < 1000 &&
         spec.gpu_mem_mib > 0;
}

Status CheckGpuMemoryShare(const LaunchSpec& spec, const GpuMemoryShares& shares) {
  if (!shares.enforce || !shares.cudashim.empty() || !HoldsGpuMemoryShare(spec)) return {};
  return MakeError(
      ErrorCode::kFailedPrecondition,
      "task " + spec.task_id + " holds a share of its GPUs with " +
      std::to_string(spec.gpu_mem_mib) + " MiB of GPU memory, and this node cannot hold it to " +
      "that: the agent found no " + kCudashimName +
      " (it looks beside its binary; give the library with --cudashim PATH)");
}

std::map<std::string, std::string> TaskVariables(const LaunchSpec& spec,
                                                 const std::string& workspace,
                                                 const std::string& metrics_file,
                                                 const std::string& cudashim) {
  std::map<std::string, std::string> env = spec.env;
  env["GPUPOOL_TASK_ID"] = spec.task_id;
  env["GPUPOOL_WORKSPACE"] = workspace;
  env["GPUPOOL_METRICS_FILE"] = metrics_file;
  env["GPUPOOL_CHECKPOINT_DIR"] =
      metrics_file.substr(0, metrics_file.rfind('/') + 1) + kCheckpointDirName;
  env["GPUPOOL_CHECKPOINT_SIGNAL"] =
      spec.checkpoint_signal.empty() ? "SIGUSR1" : spec.checkpoint_signal;
  std::string visible;
  for (const std::string& u : spec.gpu_uuids) visible += (visible.empty() ? "" : ",") + u;
  env["CUDA_VISIBLE_DEVICES"] = visible;
  if (!spec.gpu_uuids.empty() && spec.gpu_milli_per_gpu > 0 && spec.gpu_milli_per_gpu < 1000) {
    env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] =
        std::to_string(std::max(1, (spec.gpu_milli_per_gpu + 9) / 10));
  }
  if (!spec.gpu_uuids.empty() && spec.gpu_mem_mib > 0) {
    std::string limit;
    for (size_t i = 0; i < spec.gpu_uuids.size(); ++i) {
      limit += (i ? "," : "") + std::to_string(i) + "=" + std::to_string(spec.gpu_mem_mib) + "M";
    }
    env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = limit;
  }
  if (!cudashim.empty() && HoldsGpuMemoryShare(spec)) {
    env["GPUPOOL_GPU_MEM_LIMIT_BYTES"] = std::to_string(spec.gpu_mem_mib << 20);
    const auto own = spec.env.find("LD_PRELOAD");
    env["LD_PRELOAD"] =
        own == spec.env.end() || own->second.empty() ? cudashim : cudashim + ":" + own->second;
  }
  return env;
}

std::map<std::string, std::string> TaskEnvironment(const LaunchSpec& spec,
                                                   const std::string& workspace,
                                                   const std::string& metrics_file,
                                                   const std::string& cudashim) {
  std::map<std::string, std::string> env = {
      {"PATH", kDefaultPath}, {"HOME", workspace}, {"LANG", "C.UTF-8"}};
  for (auto& [k, v] : TaskVariables(spec, workspace, metrics_file, cudashim)) {
    env[k] = std::move(v);
  }
  return env;
}

namespace {

// `db` (passwd or group lines, "name:x:id:…") without the lines naming kTaskUser or holding `id`
// as their third field, then `own`.
std::string WithOwnEntry(std::string_view db, uint32_t id, const std::string& own) {
  std::string out;
  const std::string number = std::to_string(id);
  size_t start = 0;
  while (start < db.size()) {
    size_t end = db.find('\n', start);
    if (end == std::string_view::npos) end = db.size();
    const std::string_view line = db.substr(start, end - start);
    start = end + 1;
    std::vector<std::string_view> fields;
    for (size_t f = 0; fields.size() < 3;) {
      const size_t colon = line.find(':', f);
      fields.push_back(line.substr(f, colon == std::string_view::npos ? line.npos : colon - f));
      if (colon == std::string_view::npos) break;
      f = colon + 1;
    }
    if (line.empty() || fields[0] == kTaskUser || (fields.size() == 3 && fields[2] == number)) {
      continue;
    }
    out.append(line).push_back('\n');
  }
  return out + own + "\n";
}

}  // namespace

std::string TaskPasswd(std::string_view passwd, uid_t uid, gid_t gid) {
  return WithOwnEntry(passwd, uid,
                      std::string(kTaskUser) + ":x:" + std::to_string(uid) + ":" +
                          std::to_string(gid) + ":gpupool task:" + kTaskHome + ":/bin/sh");
}

std::string TaskGroup(std::string_view group, gid_t gid) {
  return WithOwnEntry(group, gid, std::string(kTaskUser) + ":x:" + std::to_string(gid) + ":");
}

std::string_view LogStreamName(LogStream stream) {
  return stream == LogStream::kStdout ? "stdout" : "stderr";
}

std::string_view ExitKindName(ExitKind k) {
  switch (k) {
    case ExitKind::kExited:
      return "exited";
    case ExitKind::kSignaled:
      return "signaled";
    case ExitKind::kOomKilled:
      return "oom-killed";
    case ExitKind::kStopped:
      return "stopped";
    case ExitKind::kLost:
      return "lost";
    case ExitKind::kUnknown:
      return "unknown";
  }
  return "unknown";
}

std::optional<ExitKind> ParseExitKind(std::string_view name) {
  for (ExitKind k : {ExitKind::kExited, ExitKind::kSignaled, ExitKind::kOomKilled,
                     ExitKind::kStopped, ExitKind::kLost, ExitKind::kUnknown}) {
    if (ExitKindName(k) == name) return k;
  }
  return std::nullopt;
}

std::string ExitReason(const ExitReport& r, int64_t memory_mib) {
  switch (r.kind) {
    case ExitKind::kExited:
      return "exited with code " + std::to_string(r.exit_code);
    case ExitKind::kSignaled:
      return "killed by signal " + std::to_string(r.signal);
    case ExitKind::kOomKilled:
      return "oom-killed: memory limit " + std::to_string(memory_mib) + " MiB";
    case ExitKind::kStopped:
      return "stopped";
    case ExitKind::kLost:
      return "lost";
    case ExitKind::kUnknown:
      return "exited (status unknown: the task was adopted after an agent restart)";
  }
  return "ended";
}

// ---- task files ----

Result<TaskFiles> TaskFiles::Open(const std::string& root_dir) {
  if (root_dir.empty()) return InvalidArgument("root_dir is empty");
  std::error_code ec;
  const std::string root = fs::absolute(root_dir, ec).lexically_normal().string();
  const bool existed = fs::exists(root, ec);
  fs::create_directories(root, ec);
  if (ec) {
    return MakeError(ErrorCode::kInternal, "cannot create root_dir " + root + ": " + ec.message());
  }
  if (!existed) chmod(root.c_str(), 0711);
  const std::string tasks = root + "/tasks";
  if (mkdir(tasks.c_str(), 0711) != 0 && errno != EEXIST) {
    return MakeError(ErrorCode::kInternal, "cannot create " + tasks + ": " + ErrnoText(errno));
  }
  chmod(tasks.c_str(), 0711);
  return TaskFiles(root);
}

std::string TaskFiles::LogPath(const std::string& id, LogStream stream) const {
  return TaskDir(id) + "/" + std::string(LogStreamName(stream)) + ".log";
}

Status TaskFiles::Create(const std::string& id, const std::string& workspace_from) const {
  const std::string dir = TaskDir(id);
  const std::string ws = Workspace(id);
  const std::string metrics = MetricsPath(id);
  auto fail = [&](const std::string& what, int err) {
    return MakeError(ErrorCode::kInternal, "task " + id + ": " + what + ": " + ErrnoText(err));
  };
  if (mkdir(dir.c_str(), 0711) != 0) {
    if (errno == EEXIST) {
      return MakeError(ErrorCode::kAlreadyExists, "task " + id + ": " + dir + " exists");
    }
    return fail("cannot create " + dir, errno);
  }
  chmod(dir.c_str(), 0711);
  if (workspace_from.empty()) {
    if (mkdir(ws.c_str(), 0700) != 0) return fail("cannot create " + ws, errno);
  } else if (rename(workspace_from.c_str(), ws.c_str()) != 0 || chmod(ws.c_str(), 0700) != 0) {
    return fail("cannot move " + workspace_from + " to " + ws, errno);
  }
  const int fd = open(metrics.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return fail("cannot create " + metrics, errno);
  close(fd);
  const std::string checkpoint = CheckpointDir(id);
  if (mkdir(checkpoint.c_str(), 0700) != 0) return fail("cannot create " + checkpoint, errno);
  return {};
}

Result<RotatingLog> TaskFiles::OpenLog(const std::string& id, LogStream stream, int64_t max_bytes,
                                       int keep, int64_t base) const {
  return RotatingLog::Open(LogPath(id, stream), max_bytes, keep, base);
}

Result<std::vector<std::string>> TaskFiles::List() const {
  std::error_code ec;
  fs::directory_iterator it(root_ + "/tasks", ec);
  if (ec) {
    return MakeError(ErrorCode::kInternal, "cannot list " + root_ + "/tasks: " + ec.message());
  }
  std::vector<std::string> ids;
  for (const auto& entry : it) {
    std::string name = entry.path().filename().string();
    if (entry.is_directory(ec) && ValidTaskId(name)) ids.push_back(std::move(name));
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

Status TaskFiles::Delete(const std::string& id) const {
  std::error_code ec;
  // A file that goes while remove_all walks the directory (a supervisor ending at this moment
  // unlinks its socket) fails the walk with ENOENT: walk again what is left.
  for (int attempt = 0; attempt < 3; ++attempt) {
    ec.clear();
    fs::remove_all(TaskDir(id), ec);
    if (ec != std::errc::no_such_file_or_directory) break;
  }
  if (ec) {
    return MakeError(ErrorCode::kInternal,
                     "task " + id + ": cannot remove " + TaskDir(id) + ": " + ec.message());
  }
  return {};
}

// ---- writes no caller waits for ----

void WriteTrouble::Observe(const Status& written, std::string_view task_id, std::string_view what,
                           const RuntimeWarning& warn) {
  if (written.has_value() != failing_) return;  // as it was
  failing_ = !written.has_value();
  if (!warn) return;
  const std::string subject = "task " + std::string(task_id) + ": " + std::string(what);
  warn(failing_ ? subject + " cannot be written (" + written.error().message +
                      "); the task runs on, and it is tried again at the next write"
                : subject + " is written again");
}

// ---- task logs ----

Status TaskLogs::Open(const TaskFiles& files, const std::string& task_id, int64_t max_bytes,
                      int keep, int64_t stdout_base, int64_t stderr_base) {
  Status result;
  const int64_t bases[2] = {stdout_base, stderr_base};
  for (LogStream s : {LogStream::kStdout, LogStream::kStderr}) {
    auto log = files.OpenLog(task_id, s, max_bytes, keep, bases[static_cast<int>(s)]);
    if (log) {
      streams[static_cast<int>(s)].emplace(std::move(*log));
    } else if (result) {
      result = tl::unexpected(log.error());
    }
  }
  return result;
}

RotatingLog* TaskLogs::of(LogStream s) {
  auto& log = streams[static_cast<int>(s)];
  return log ? &*log : nullptr;
}

void TaskLogs::Append(LogStream s, std::string_view data, bool* rotated, std::string_view task_id,
                      const RuntimeWarning& warn) {
  static constexpr std::string_view kWhat[2] = {"stdout log", "stderr log"};
  RotatingLog* log = of(s);
  if (log == nullptr) return;
  const int i = static_cast<int>(s);
  trouble[i].Observe(log->Append(data.data(), data.size(), rotated), task_id, kWhat[i], warn);
}

int64_t TaskLogs::base(LogStream s) const {
  const auto& log = streams[static_cast<int>(s)];
  return log ? log->base() : 0;
}

void TaskLogs::CloseWriters() {
  for (auto& log : streams) {
    if (log) log->CloseWriter();
  }
}

Result<RotatingLog::Snapshot> TaskLogs::Snapshot(const std::string& task_id,
                                                 LogStream stream) const {
  const auto& log = streams[static_cast<int>(stream)];
  if (!log) {
    return NotFound("task " + task_id + " has no " + std::string(LogStreamName(stream)) + " log");
  }
  return log->TakeSnapshot();
}

}  // namespace gpupool::agent
