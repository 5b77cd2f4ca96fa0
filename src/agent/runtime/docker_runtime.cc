// Implementation of docker_runtime.h: launch (image, container, start), the per-task thread that
// copies a container's output into its logs and reports how it ended, the containers'
// supervisors and their leases, stop, adoption by label, removal, and the task's state file.
#include "agent/runtime/docker_runtime.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <utility>

#include "agent/runtime/docker_api.h"
#include "agent/runtime/image_archive.h"
#include "agent/runtime/linux_proc.h"
#include "api/url.h"
#include "core/hex.h"
#include "core/unique_fd.h"
#include "os/files.h"

namespace gpupool::agent {

using nlohmann::json;
using std::chrono::milliseconds;

namespace {

constexpr int64_t kStateEveryMs = 1000;   // how often a task's log position is persisted
constexpr milliseconds kFirstRetry{100};  // the daemon or a log stream failed: try again
constexpr milliseconds kMaxRetry{5000};
constexpr size_t kReadBytes = 64 << 10;

Status ValidImage(const std::string& task_id, const std::string& image) {
  const bool ok = !image.empty() && std::all_of(image.begin(), image.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
           c == '/' || c == ':' || c == '@' || c == '+';
  });
  if (ok) return {};
  return InvalidArgument("task " + task_id + ": image '" + image +
                         "' is not an image reference (letters, digits and . _ - / : @ +)");
}

// A fresh instance id: 12 lower-case hex digits.
std::string NewInstanceId() {
  unsigned char bytes[6] = {};
  if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    const uint64_t v = static_cast<uint64_t>(WallMs()) ^ (static_cast<uint64_t>(getpid()) << 40);
    for (size_t i = 0; i < sizeof bytes; ++i) bytes[i] = static_cast<unsigned char>(v >> (8 * i));
  }
  return HexEncode(std::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

bool ValidInstanceId(const std::string& id) {
  return !id.empty() && id.size() <= 32 && IsLowerHex(id);
}

// "1000" or "1000:1000" as uid and gid; nullopt for a name.
std::optional<std::pair<uid_t, gid_t>> NumericUser(const std::string& user) {
  const size_t colon = user.find(':');
  const std::string u = user.substr(0, colon);
  const std::string g = colon == std::string::npos ? u : user.substr(colon + 1);
  auto number = [](const std::string& s) -> std::optional<uint32_t> {
    if (s.empty() || s.size() > 9 ||
        !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::nullopt;
    }
    return static_cast<uint32_t>(std::stoul(s));
  };
  const auto uid = number(u);
  const auto gid = number(g);
  if (!uid || !gid) return std::nullopt;
  return std::pair<uid_t, gid_t>{*uid, *gid};
}

constexpr int kSupervisorLeaseFd = 3;   // where the supervisor finds its end of the lease
constexpr int kSupervisorListenFd = 4;  // and its socket for a restarted agent

// Starts the supervisor of `container` (task_supervisor.h) with a first lease of `lease_ms`,
// detached: a grandchild in a session of its own, so that it outlives the agent, which need not
// reap it. Returns the agent's end of the lease.
Result<UniqueFd> StartSupervisor(const std::string& task_dir, const std::string& container,
                                 const std::string& socket, int64_t lease_ms) {
  SupervisorArgs args;
  args.task_dir = task_dir;
  args.lease_fd = kSupervisorLeaseFd;
  args.listen_fd = kSupervisorListenFd;
  args.lease_ms = lease_ms;
  args.container = container;
  args.docker_socket = socket;
  std::vector<std::string> argv_text = SupervisorArgv("/proc/self/exe", args);
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  int pair[2] = {-1, -1};
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return MakeError(ErrorCode::kInternal, "socketpair for a supervisor: " + ErrnoText(errno));
  }
  UniqueFd ours(pair[0]);
  UniqueFd theirs(pair[1]);
  // Listening before the supervisor runs: an agent restarted at once still finds the socket.
  Result<UniqueFd> listener = ListenForAgents(task_dir);
  if (!listener) return tl::unexpected(listener.error());
  // Both above the places they go to, so that neither dup2 below overwrites the other.
  theirs = UniqueFd(fcntl(theirs.get(), F_DUPFD_CLOEXEC, kSupervisorListenFd + 1));
  *listener = UniqueFd(fcntl(listener->get(), F_DUPFD_CLOEXEC, kSupervisorListenFd + 1));
  if (!theirs.ok() || !listener->ok()) {
    return MakeError(ErrorCode::kInternal, "descriptors for a supervisor: " + ErrnoText(errno));
  }
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull.ok()) return MakeError(ErrorCode::kInternal, "/dev/null: " + ErrnoText(errno));
  // Signals stay blocked across fork so that no agent handler runs in the children.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = fork();
  if (pid == 0) {  // async-signal-safe calls only, up to the exec
    if (fork() != 0) _exit(0);
    setsid();
    if (dup2(devnull.get(), 0) < 0 || dup2(devnull.get(), 1) < 0 || dup2(devnull.get(), 2) < 0) {
      _exit(127);
    }
    if (dup2(theirs.get(), kSupervisorLeaseFd) < 0 ||
        dup2(listener->get(), kSupervisorListenFd) < 0) {
      _exit(127);
    }
    syscall(SYS_close_range, kSupervisorListenFd + 1u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    char* const no_env[] = {nullptr};  // nothing of the agent's environment (its keys) goes along
    execve("/proc/self/exe", argv.data(), no_env);
    _exit(127);
  }
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return MakeError(ErrorCode::kInternal, "fork: " + ErrnoText(fork_errno));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return ours;
}

}  // namespace

struct DockerRuntime::Task {
  RunningTask info;
  bool restartable = false;  // LaunchSpec::restartable: its lease is fenced
  UniqueFd lease;            // the supervisor's lease, while it has one
  TaskLogs logs;
  int64_t log_since_ns = 0;  // time of the last log entry copied
  int64_t state_written_mono = 0;
  WriteTrouble state_trouble;
  bool stop_requested = false;
  int64_t stop_grace_ms = 0;  // the shortest grace asked for
  bool ended = false;
  ExitReport report;
  std::thread watcher;
  std::vector<std::thread> stoppers;

  void Join() {
    if (watcher.joinable()) watcher.join();
    for (std::thread& s : stoppers) s.join();
    stoppers.clear();
  }
};

// ---- construction ----

DockerRuntime::DockerRuntime(TaskFiles files, DockerOptions options, std::string instance,
                             int cancel_fd)
    : files_(std::move(files)),
      options_(std::move(options)),
      instance_(std::move(instance)),
      cancel_fd_(cancel_fd),
      client_(options_.socket, UnixHttpOptions{options_.api_timeout, cancel_fd_}),
      fence_(options_.lease) {}

Result<std::unique_ptr<DockerRuntime>> DockerRuntime::Open(const std::string& root_dir,
                                                           DockerOptions options) {
  if (options.socket.empty()) return InvalidArgument("docker socket path is empty");
  if (options.network_mode.empty()) return InvalidArgument("docker network mode is empty");
  if (options.log_max_bytes < 0 || options.log_keep < 0) {
    return InvalidArgument("log_max_bytes " + std::to_string(options.log_max_bytes) +
                           " and log_keep " + std::to_string(options.log_keep) +
                           " must not be negative");
  }
  auto files = TaskFiles::Open(root_dir);
  if (!files) return tl::unexpected(files.error());
  const std::string instance_path = files->root() + "/instance";
  std::string instance;
  if (const auto text = ReadFile(instance_path)) {
    instance = *text;
    while (!instance.empty() && std::isspace(static_cast<unsigned char>(instance.back()))) {
      instance.pop_back();
    }
    if (!ValidInstanceId(instance)) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       instance_path + " holds '" + instance +
                           "', not an instance id (hex digits); its containers cannot be told "
                           "from another agent's");
    }
  } else {
    instance = NewInstanceId();
    if (Status written = os::WriteFileAtomically(instance_path, instance + "\n", {.mode = 0644});
        !written) {
      return tl::unexpected(written.error());
    }
  }

  const int cancel = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (cancel < 0) return MakeError(ErrorCode::kInternal, "eventfd: " + ErrnoText(errno));
  std::unique_ptr<DockerRuntime> rt(
      new DockerRuntime(std::move(*files), std::move(options), std::move(instance), cancel));
  const std::string where = "docker at " + rt->options_.socket;
  auto version = rt->client_.Call("GET", rt->Api("/version"));
  if (!version) return MakeError(ErrorCode::kUnavailable, where + ": " + version.error().message);
  if (version->status != 200) {
    return MakeError(ErrorCode::kUnavailable,
                     docker::ResponseError(where + ": GET /version", *version).message);
  }
  const json v = json::parse(version->body, nullptr, /*allow_exceptions=*/false);
  if (!v.is_object()) {
    return MakeError(ErrorCode::kUnavailable, where + ": GET /version: not a JSON object");
  }
  rt->description_ = "docker " + v.value("Version", std::string("?")) + " (API " +
                     v.value("ApiVersion", std::string("?")) + ") at " + rt->options_.socket;
  if (auto info = rt->client_.Call("GET", rt->Api("/info")); info && info->status == 200) {
    const json i = json::parse(info->body, nullptr, /*allow_exceptions=*/false);
    rt->nvidia_ = i.is_object() && i.contains("Runtimes") && i["Runtimes"].is_object() &&
                  i["Runtimes"].contains("nvidia");
  }
  for (const char* hook :
       {"/usr/bin/nvidia-container-runtime-hook", "/usr/local/bin/nvidia-container-runtime-hook"}) {
    rt->nvidia_ = rt->nvidia_ || access(hook, X_OK) == 0;
  }
  rt->renewer_ = std::thread(&DockerRuntime::RenewLoop, rt.get());
  return rt;
}

DockerRuntime::~DockerRuntime() {
  std::vector<Task*> tasks;
  {
    std::lock_guard lock(mu_);
    shutting_down_ = true;
    for (auto& [id, t] : tasks_) tasks.push_back(t.get());
  }
  const uint64_t one = 1;
  ssize_t ignored = write(cancel_fd_, &one, sizeof one);  // every call in flight ends
  (void)ignored;
  cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  for (Task* t : tasks) t->Join();
  close(cancel_fd_);
}

std::string DockerRuntime::Api(const std::string& path) const {
  return std::string(docker::kApi) + path;
}

std::string DockerRuntime::TaskDir(const std::string& id) const { return files_.TaskDir(id); }
std::string DockerRuntime::Workspace(const std::string& id) const { return files_.Workspace(id); }
std::string DockerRuntime::MetricsPath(const std::string& id) const {
  return files_.MetricsPath(id);
}
std::string DockerRuntime::LogPath(const std::string& id, LogStream stream) const {
  return files_.LogPath(id, stream);
}

// ---- launch ----

Result<RunningTask> DockerRuntime::Launch(const LaunchSpec& spec) {
  if (auto st = ValidateLaunchSpec(spec); !st) return tl::unexpected(st.error());
  if (spec.image.empty()) {
    return InvalidArgument("task " + spec.task_id + ": no image; the docker runtime runs images");
  }
  if (auto st = ValidImage(spec.task_id, spec.image); !st) return tl::unexpected(st.error());
  if (auto st = CheckGpuMemoryShare(spec, options_.gpu_memory); !st) {
    return tl::unexpected(st.error());
  }
  {
    std::lock_guard lock(mu_);
    if (tasks_.count(spec.task_id) || launching_.count(spec.task_id)) {
      return MakeError(ErrorCode::kAlreadyExists, "task " + spec.task_id + " exists");
    }
    if (access(TaskDir(spec.task_id).c_str(), F_OK) == 0) {
      return MakeError(ErrorCode::kAlreadyExists, "task " + spec.task_id + ": " +
                                                      TaskDir(spec.task_id) +
                                                      " exists (Adopt or Remove it first)");
    }
    launching_.insert(spec.task_id);
  }
  auto task = Create(spec);
  std::lock_guard lock(mu_);
  launching_.erase(spec.task_id);
  if (!task) return tl::unexpected(task.error());
  Task& t = **task;
  tasks_[spec.task_id] = std::move(*task);
  t.watcher = std::thread(&DockerRuntime::Watch, this, &t);
  return t.info;
}

Result<std::string> DockerRuntime::EnsureImage(const std::string& image) {
  const std::string what = "image " + image;
  auto inspect = [&]() -> Result<HttpResponse> {
    auto r = client_.Call("GET", Api("/images/" + image + "/json"));
    if (!r) return MakeError(r.error().code, what + ": " + r.error().message);
    return r;
  };
  auto r = inspect();
  if (!r) return tl::unexpected(r.error());
  if (r->status == 404) {
    UnixHttpOptions o = client_.options();
    o.timeout = options_.pull_timeout;
    auto pull = UnixHttpClient(options_.socket, o)
                    .Call("POST", Api("/images/create?" + docker::PullQuery(image)));
    const std::string cannot = what + " is not on this node and cannot be pulled: ";
    if (!pull) return MakeError(ErrorCode::kFailedPrecondition, cannot + pull.error().message);
    if (pull->status != 200) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       cannot + docker::ResponseError("POST /images/create", *pull).message);
    }
    if (auto error = docker::ProgressError(pull->body)) {
      return MakeError(ErrorCode::kFailedPrecondition, cannot + *error);
    }
    r = inspect();
    if (!r) return tl::unexpected(r.error());
  }
  if (r->status != 200) return tl::unexpected(docker::ResponseError(what, *r));
  const json j = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return MakeError(ErrorCode::kInternal, what + ": inspect is not JSON");
  const auto config = j.find("Config");
  if (config == j.end() || !config->is_object()) return std::string();
  return config->value("User", std::string());
}

void DockerRuntime::PrepareWorkspace(const std::string& id, const std::string& user) const {
  if (user.empty() || user == "root" || user == "0" || user == "0:0") return;
  const std::string ws = Workspace(id);
  const std::string metrics = MetricsPath(id);
  const std::string checkpoint = files_.CheckpointDir(id);
  if (const auto ids = NumericUser(user)) {
    if (chown(ws.c_str(), ids->first, ids->second) == 0 &&
        chown(metrics.c_str(), ids->first, ids->second) == 0 &&
        chown(checkpoint.c_str(), ids->first, ids->second) == 0) {
      return;
    }
  }
  // A user the host cannot name (or chown refused, when the agent is not root).
  chmod(ws.c_str(), 0777);
  chmod(metrics.c_str(), 0666);
  chmod(checkpoint.c_str(), 0777);
}

Result<docker::ContainerState> DockerRuntime::Inspect(const std::string& container) const {
  auto r = client_.Call("GET", Api("/containers/" + container + "/json"));
  if (!r) return tl::unexpected(r.error());
  if (r->status != 200) return tl::unexpected(docker::ResponseError("container " + container, *r));
  return docker::ParseInspect(std::string_view(r->body));
}

Result<std::string> DockerRuntime::Address(const std::string& task_id) const {
  std::string container;
  for (const RunningTask& r : Running()) {
    if (r.task_id == task_id) container = r.container;
  }
  if (container.empty()) return NotFound("task " + task_id + " does not run on this node");
  Result<docker::ContainerState> state = Inspect(container);
  if (!state) return tl::unexpected(state.error());
  if (state->ip_address.empty()) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "task " + task_id +
                         "'s container has no address of its own (network mode host or "
                         "none): its ports cannot be told from the node's");
  }
  return state->ip_address;
}

Result<std::unique_ptr<DockerRuntime::Task>> DockerRuntime::Create(const LaunchSpec& spec) {
  const std::string& id = spec.task_id;
  const std::string who = "task " + id + ": ";
  std::string container;
  bool launched = false;
  // Undoes the directory and the container when the launch fails.
  struct Cleanup {
    std::function<void()> fn;
    ~Cleanup() { fn(); }
  } cleanup{[&] {
    if (launched) return;
    if (!container.empty()) {
      const Status removed = DeleteContainer(
          container, who + "removing its container " + container + " after the failed launch");
      if (!removed && options_.on_warning) {
        options_.on_warning(removed.error().message + "; the container is left behind");
      }
    }
    (void)files_.Delete(id);
  }};

  if (Status st = files_.Create(id, spec.workspace_from); !st) {
    launched = st.error().code == ErrorCode::kAlreadyExists;  // then not ours to delete
    return tl::unexpected(st.error());
  }
  auto t = std::make_unique<Task>();
  t->info.task_id = id;
  t->info.workspace = Workspace(id);
  t->restartable = spec.restartable;
  if (Status st = t->logs.Open(files_, id, options_.log_max_bytes, options_.log_keep, 0, 0); !st) {
    return tl::unexpected(st.error());
  }
  auto user = EnsureImage(spec.image);
  if (!user) return MakeError(user.error().code, who + user.error().message);
  PrepareWorkspace(id, *user);

  const std::string name = docker::ContainerName(instance_, id);
  const bool preload = options_.gpu_memory.enforce && HoldsGpuMemoryShare(spec);
  const json body = docker::CreateBody(
      spec, {Workspace(id), MetricsPath(id), files_.CheckpointDir(id),
             spec.host_network ? "host" : options_.network_mode, instance_, options_.gpu_devices,
             preload ? options_.gpu_memory.cudashim : std::string()});
  auto created = client_.Call("POST", Api("/containers/create?name=" + name), body.dump());
  if (!created) {
    return MakeError(created.error().code,
                     who + "creating its container: " + created.error().message);
  }
  if (created->status == 409) {
    return MakeError(ErrorCode::kAlreadyExists,
                     who + "container " + name + " exists (Adopt finds it)");
  }
  if (created->status != 201) {
    return tl::unexpected(docker::ResponseError(who + "creating its container", *created));
  }
  const json cj = json::parse(created->body, nullptr, /*allow_exceptions=*/false);
  if (!cj.is_object() || !cj.contains("Id") || !cj["Id"].is_string()) {
    return MakeError(ErrorCode::kInternal, who + "creating its container: no Id in the answer");
  }
  container = cj["Id"].get<std::string>();
  t->info.container = container;
  // Without its state file a restarted agent would not know where the logs stand.
  if (Status written = WriteStateLocked(*t); !written) {
    return MakeError(written.error().code, who + written.error().message);
  }

  auto started = client_.Call("POST", Api("/containers/" + container + "/start"));
  if (!started) {
    return MakeError(started.error().code,
                     who + "starting its container: " + started.error().message);
  }
  if (started->status != 204 && started->status != 304) {
    return tl::unexpected(docker::ResponseError(who + "starting its container", *started));
  }
  auto state = Inspect(container);
  if (!state) return MakeError(state.error().code, who + state.error().message);
  t->info.pid = state->pid;
  t->info.started_ms = state->started_ns / 1'000'000;
  t->info.limits = {spec.cpu_milli > 0, spec.memory_mib > 0, spec.pids_max > 0, ""};
  // Never running unsupervised: without its supervisor the launch fails (and the container goes).
  int64_t lease_ms;
  {
    std::lock_guard lock(mu_);
    lease_ms = fence_.First(spec.restartable, MonotonicMs());
  }
  auto supervisor = StartSupervisor(TaskDir(id), container, options_.socket, lease_ms);
  if (!supervisor) return MakeError(supervisor.error().code, who + supervisor.error().message);
  t->lease = std::move(*supervisor);
  launched = true;
  return t;
}

// ---- watching ----

Status DockerRuntime::CopyLogs(Task& t, bool follow) {
  std::string since = "0";
  {
    std::lock_guard lock(mu_);
    if (t.log_since_ns > 0) since = docker::SinceAfter(t.log_since_ns);
  }
  auto stream = client_.Open("GET", Api("/containers/" + t.info.container +
                                        "/logs?stdout=1&stderr=1&timestamps=1&follow=" +
                                        (follow ? "1" : "0") + "&since=" + since));
  if (!stream) return tl::unexpected(stream.error());
  if ((*stream)->status() != 200) {
    auto text = (*stream)->ReadAll(options_.api_timeout);
    return tl::unexpected(docker::ResponseError(
        "logs of container " + t.info.container,
        HttpResponse{(*stream)->status(), {}, text ? *text : text.error().message}));
  }
  // Where the logs stand is persisted however this ends (after the lock below is released).
  struct SaveState {
    DockerRuntime* rt;
    Task& t;
    ~SaveState() {
      std::lock_guard lock(rt->mu_);
      rt->SaveStateLocked(t);
    }
  } save{this, t};
  docker::FrameDecoder decoder;
  std::vector<docker::FrameDecoder::Frame> frames;
  std::string buffer(kReadBytes, '\0');
  // A followed stream may be quiet for as long as the task is; otherwise the daemon sends what
  // it has at once.
  const milliseconds wait = follow ? milliseconds(-1) : options_.api_timeout;
  while (true) {
    auto n = (*stream)->Read(buffer.data(), buffer.size(), wait);
    if (!n) return tl::unexpected(n.error());
    if (*n == 0) break;
    frames.clear();
    if (Status st = decoder.Feed(std::string_view(buffer.data(), *n), &frames); !st) return st;
    std::lock_guard lock(mu_);
    bool rotated = false;
    for (const auto& frame : frames) {
      if (frame.stream == 3) {
        return MakeError(ErrorCode::kInternal,
                         "logs of container " + t.info.container + ": " + frame.payload);
      }
      auto entry = docker::SplitTimestamp(frame.payload);
      if (!entry) return tl::unexpected(entry.error());
      const LogStream s = frame.stream == 2 ? LogStream::kStderr : LogStream::kStdout;
      t.logs.Append(s, entry->text, &rotated, t.info.task_id, options_.on_warning);
      t.log_since_ns = std::max(t.log_since_ns, entry->time_ns);
    }
    if (rotated || MonotonicMs() - t.state_written_mono >= kStateEveryMs) SaveStateLocked(t);
  }
  if (decoder.pending() > 0) {
    return MakeError(ErrorCode::kUnavailable,
                     "logs of container " + t.info.container + ": the stream ended inside a frame");
  }
  return {};
}

void DockerRuntime::Watch(Task* t) {
  milliseconds retry{0};
  while (true) {
    const Status followed = CopyLogs(*t, /*follow=*/true);
    {
      std::lock_guard lock(mu_);
      if (shutting_down_) return;
    }
    auto state = Inspect(t->info.container);
    if (state && !docker::IsRunning(*state)) {
      // A stream that broke before the end leaves output behind: copy what is left.
      if (!followed) (void)CopyLogs(*t, /*follow=*/false);
      bool stop_requested;
      {
        std::lock_guard lock(mu_);
        stop_requested = t->stop_requested;
      }
      Finish(*t, EndOf(*t, *state, stop_requested));
      return;
    }
    if (!state && state.error().code == ErrorCode::kNotFound) {
      ExitReport r{t->info.task_id,
                   ExitKind::kLost,
                   -1,
                   0,
                   t->info.started_ms,
                   WallMs(),
                   false,
                   "lost: its container " + t->info.container +
                       " was removed while it ran (not by the agent)"};
      Finish(*t, std::move(r));
      return;
    }
    // Still running (the stream broke) or the daemon is unreachable: follow again, from where
    // the logs stand.
    retry = retry.count() == 0 ? kFirstRetry : std::min(2 * retry, kMaxRetry);
    if (WaitCancelled(retry)) return;
  }
}

ExitReport DockerRuntime::EndOf(const Task& t, const docker::ContainerState& state,
                                bool stop_requested) const {
  ExitReport r = docker::ExitFromState(t.info.task_id, state, stop_requested, WallMs());
  if (stop_requested) return r;
  const auto e = ReadSupervisorExit(TaskDir(t.info.task_id));
  if (e && e->kind == ExitKind::kLost) {
    r.kind = ExitKind::kLost;
    r.reason = SupervisorLostReason(*e, t.restartable);
  }
  return r;
}

// ---- the supervisors' leases ----

void DockerRuntime::RenewLocked(Task& t, int64_t now_mono) {
  if (t.ended || t.info.container.empty()) return;
  const auto ms = fence_.Now(t.restartable, now_mono);
  if (!ms) return;  // a restartable task's fenced lease is over: nothing may extend it
  if (t.lease.ok() && RenewLease(t.lease.get(), milliseconds(*ms))) return;
  // None (adopted without one), or it ended while the container runs: a new one. (One that
  // ended with its container leaves a supervisor that sees the container gone and exits.)
  auto started = StartSupervisor(TaskDir(t.info.task_id), t.info.container, options_.socket, *ms);
  if (started) {
    t.lease = std::move(*started);
  } else if (options_.on_warning) {
    options_.on_warning("task " + t.info.task_id + ": " + started.error().message +
                        "; its container is not supervised");
  }
}

void DockerRuntime::RenewLoop() {
  std::unique_lock lock(mu_);
  while (!shutting_down_) {
    const int64_t now = MonotonicMs();
    if (now >= next_renewal_mono_) {
      next_renewal_mono_ = now + std::max<int64_t>(1, fence_.lease().count() / 4);
      for (auto& [id, t] : tasks_) RenewLocked(*t, now);
    }
    cv_.wait_for(lock, milliseconds(std::max<int64_t>(1, next_renewal_mono_ - MonotonicMs())));
  }
}

void DockerRuntime::SetLease(milliseconds lease) {
  {
    std::lock_guard lock(mu_);
    if (!fence_.SetLease(lease)) return;
    next_renewal_mono_ = 0;  // tell every supervisor now
  }
  cv_.notify_all();
}

void DockerRuntime::ServerHeard(std::chrono::steady_clock::time_point sent) {
  const int64_t at = std::chrono::duration_cast<milliseconds>(sent.time_since_epoch()).count();
  {
    std::lock_guard lock(mu_);
    if (!fence_.Heard(at)) return;
    next_renewal_mono_ = 0;  // tell the restartable tasks' supervisors now
  }
  cv_.notify_all();
}

bool DockerRuntime::WaitCancelled(milliseconds d) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, d, [&] { return shutting_down_; });
}

void DockerRuntime::Finish(Task& t, ExitReport report) {
  {
    std::lock_guard lock(mu_);
    t.ended = true;
    t.report = std::move(report);
    t.logs.CloseWriters();
    SaveStateLocked(t);
    reports_.push_back(t.report);
  }
  cv_.notify_all();
  if (options_.on_exit) options_.on_exit();
}

// ---- stop, reap ----

Status DockerRuntime::Stop(const std::string& task_id, milliseconds grace) {
  std::lock_guard lock(mu_);
  const auto it = tasks_.find(task_id);
  if (it == tasks_.end()) return NotFound("task " + task_id + " is not known");
  Task& t = *it->second;
  if (t.ended) return {};
  const int64_t g = std::max<int64_t>(0, grace.count());
  if (t.stop_requested && g >= t.stop_grace_ms) return {};
  t.stop_requested = true;
  t.stop_grace_ms = g;
  SaveStateLocked(t);
  // Docker's stop: the image's stop signal (SIGTERM), SIGKILL after t seconds. It answers once
  // the container is gone, so it runs on a thread of its own.
  const int64_t seconds = (g + 999) / 1000;
  UnixHttpOptions o = client_.options();
  o.timeout = options_.api_timeout + milliseconds(seconds * 1000);
  t.stoppers.emplace_back(
      [client = UnixHttpClient(options_.socket, o),
       target = Api("/containers/" + t.info.container + "/stop?t=" + std::to_string(seconds))] {
        // 204 stopped, 304 already stopped, 404 gone: the watcher sees the end in every case.
        (void)client.Call("POST", target);
      });
  return {};
}

Status DockerRuntime::Freeze(const std::string& task_id, bool frozen) {
  std::string container;
  {
    std::lock_guard lock(mu_);
    const auto it = tasks_.find(task_id);
    if (it == tasks_.end()) return NotFound("task " + task_id + " is not known");
    if (it->second->ended)
      return MakeError(ErrorCode::kFailedPrecondition, "task " + task_id + " has ended");
    container = it->second->info.container;
  }
  // Docker's pause freezes the container's cgroup and answers once it is frozen.
  const std::string verb = frozen ? "pause" : "unpause";
  auto r = client_.Call("POST", Api("/containers/" + container + "/" + verb));
  if (!r) return tl::unexpected(r.error());
  if (r->status != 204) return tl::unexpected(docker::ResponseError(verb + " " + task_id, *r));
  return {};
}

Result<bool> DockerRuntime::HasImage(const std::string& image) const {
  Result<json> inspected = InspectImage(image);
  if (inspected) return true;
  if (inspected.error().code == ErrorCode::kNotFound) return false;  // Docker's 404
  return tl::unexpected(inspected.error());
}

Result<json> DockerRuntime::InspectImage(const std::string& image) const {
  auto r = client_.Call("GET", Api("/images/" + image + "/json"));
  if (!r) return tl::unexpected(r.error());
  if (r->status != 200) return tl::unexpected(docker::ResponseError("image " + image, *r));
  json j = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return MakeError(ErrorCode::kInternal, "image " + image + ": not JSON");
  return j;
}

Result<docker::LoadArchive> DockerRuntime::SaveImage(const std::string& task_id,
                                                     const std::string& base, int archive_fd,
                                                     const std::string& created_by) {
  std::string container;
  {
    std::lock_guard lock(mu_);
    const auto it = tasks_.find(task_id);
    if (it == tasks_.end()) return NotFound("task " + task_id + " is not known");
    if (it->second->ended) {
      return MakeError(ErrorCode::kFailedPrecondition, "task " + task_id + " has ended");
    }
    container = it->second->info.container;
  }
  const std::string what = "saving the container of task " + task_id + " as an image";
  auto fail = [&](const Error& e) { return MakeError(e.code, what + ": " + e.message); };
  Result<json> base_image = InspectImage(base);
  if (!base_image) return fail(base_image.error());
  std::set<std::string> base_layers;
  if (const auto rootfs = base_image->find("RootFS");
      rootfs != base_image->end() && rootfs->is_object() && rootfs->contains("Layers")) {
    for (const json& l : (*rootfs)["Layers"]) {
      if (l.is_string()) base_layers.insert(l.get<std::string>());
    }
  }
  const json base_config = base_image->value("Config", json::object());

  // Docker pauses the container while it commits its changes into an image.
  UnixHttpOptions slow = client_.options();
  slow.timeout = options_.pull_timeout;
  const UnixHttpClient client(options_.socket, slow);
  auto committed = client.Call("POST", Api("/commit?container=" + container + "&pause=1"), "{}");
  if (!committed) return fail(committed.error());
  if (committed->status != 201) {
    return fail(docker::ResponseError("POST /commit", *committed));
  }
  const json cj = json::parse(committed->body, nullptr, /*allow_exceptions=*/false);
  if (!cj.is_object() || !cj.contains("Id") || !cj["Id"].is_string()) {
    return MakeError(ErrorCode::kInternal, what + ": no Id in Docker's answer");
  }
  const std::string commit_id = cj["Id"].get<std::string>();
  // The committed image holds the container's configuration (its variables): it goes once its
  // archive, with the base's configuration, is written and loaded.
  auto drop_commit = [&] {
    (void)client.Call("DELETE", Api("/images/" + commit_id + "?noprune=1"));
  };
  auto saved = client.Open("GET", Api("/images/" + commit_id + "/get"));
  if (!saved) return drop_commit(), fail(saved.error());
  if ((*saved)->status() != 200) {
    auto body = (*saved)->ReadAll(options_.api_timeout);
    drop_commit();
    return fail(docker::ResponseError(
        "GET /images/…/get",
        HttpResponse{(*saved)->status(), (*saved)->headers(), body ? *body : std::string()}));
  }
  Result<docker::LoadArchive> archive = docker::WriteLoadArchive(
      [&](char* into, size_t n) { return (*saved)->Read(into, n, options_.pull_timeout); },
      base_layers,
      [&](std::string_view config) {
        return docker::ImageConfigFor(config, base_config, created_by);
      },
      archive_fd);
  if (!archive) return drop_commit(), fail(archive.error());
  const Status loaded = LoadImage(archive->id, base, archive_fd, archive->bytes);
  drop_commit();
  if (!loaded) return fail(loaded.error());
  return archive;
}

Status DockerRuntime::LoadImage(const std::string& id, const std::string& base, int archive_fd,
                                int64_t bytes) {
  Result<bool> here = HasImage(id);
  if (!here) return tl::unexpected(here.error());
  if (*here) return {};
  // Docker reads a layer's file only when it lacks the layer: the base's are not in the archive.
  if (auto base_here = EnsureImage(base); !base_here) {
    return MakeError(base_here.error().code,
                     "the image it was saved from: " + base_here.error().message);
  }
  UnixHttpOptions slow = client_.options();
  slow.timeout = options_.pull_timeout;
  auto r = UnixHttpClient(options_.socket, slow)
               .OpenWithFile("POST", Api("/images/load?quiet=1"), archive_fd, bytes);
  if (!r) return tl::unexpected(r.error());
  auto body = (*r)->ReadAll(options_.pull_timeout);
  if (!body) return tl::unexpected(body.error());
  if ((*r)->status() != 200) {
    return tl::unexpected(
        docker::ResponseError("POST /images/load", HttpResponse{(*r)->status(), {}, *body}));
  }
  if (auto error = docker::ProgressError(*body)) {
    return MakeError(ErrorCode::kInternal, "POST /images/load: " + *error);
  }
  here = HasImage(id);
  if (!here) return tl::unexpected(here.error());
  if (!*here) {
    return MakeError(ErrorCode::kInternal, "Docker loaded the archive but has no image " + id +
                                               " (it said: " + body->substr(0, 200) + ")");
  }
  return {};
}

Status DockerRuntime::Signal(const std::string& task_id, pid_t pid, int sig) {
  if (pid <= 0)
    return NotFound("process " + std::to_string(pid) + " is not task " + task_id + "'s");
  // `pid` is in the container's pid namespace: kill runs there, as the task's user.
  ExecSpec spec;
  spec.command = {"/bin/sh", "-c", "kill -" + std::to_string(sig) + " " + std::to_string(pid)};
  Result<ExecProcess> kill = Exec(task_id, spec);
  if (!kill) return tl::unexpected(kill.error());
  kill->input = UniqueFd();  // it reads nothing
  pollfd ended{kill->done.get(), POLLIN, 0};
  if (::poll(&ended, 1, 10'000) != 1) {
    kill->kill();
    return MakeError(ErrorCode::kUnavailable, "signalling task " + task_id + " timed out");
  }
  const ExecStatus status = kill->wait();
  if (status.exit_code != 0) {
    return NotFound("process " + std::to_string(pid) + " of task " + task_id +
                    " could not be signalled (kill exited with " +
                    std::to_string(status.exit_code) + ")");
  }
  return {};
}

std::vector<ExitReport> DockerRuntime::Reap(milliseconds wait) {
  std::unique_lock lock(mu_);
  if (reports_.empty() && wait.count() > 0) {
    cv_.wait_for(lock, wait, [&] { return !reports_.empty(); });
  }
  return std::exchange(reports_, {});
}

// ---- adoption, removal ----

Result<std::unique_ptr<DockerRuntime::Task>> DockerRuntime::LoadTask(const std::string& id,
                                                                     const std::string& container) {
  auto t = std::make_unique<Task>();
  t->info.task_id = id;
  t->info.workspace = Workspace(id);
  t->info.container = container;
  t->info.adopted = true;
  int64_t base[2] = {0, 0};
  if (const auto text = ReadFile(files_.StatePath(id))) {
    const json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("container", std::string()) == container) {
      if (j.contains("log_base") && j["log_base"].is_object()) {
        base[0] = j["log_base"].value("stdout", int64_t{0});
        base[1] = j["log_base"].value("stderr", int64_t{0});
      }
      t->log_since_ns = j.value("log_since_ns", int64_t{0});
      t->stop_requested = j.value("stop_requested", false);
      t->stop_grace_ms = j.value("stop_grace_ms", int64_t{0});
      t->restartable = j.value("restartable", false);
    }
  } else if (Status st = files_.Create(id); !st && st.error().code != ErrorCode::kAlreadyExists) {
    return tl::unexpected(st.error());  // a container without its directory: made again
  }
  if (Status st =
          t->logs.Open(files_, id, options_.log_max_bytes, options_.log_keep, base[0], base[1]);
      !st) {
    return tl::unexpected(st.error());
  }
  return t;
}

Result<AdoptResult> DockerRuntime::Adopt() {
  const json filters = {{"label", {std::string(docker::kAgentLabel) + "=" + instance_}}};
  auto listed = client_.Call(
      "GET", Api("/containers/json?all=1&filters=" + api::PercentEncode(filters.dump())));
  if (!listed) {
    return MakeError(listed.error().code,
                     "listing this agent's containers: " + listed.error().message);
  }
  if (listed->status != 200) {
    return tl::unexpected(docker::ResponseError("listing this agent's containers", *listed));
  }
  const json list = json::parse(listed->body, nullptr, /*allow_exceptions=*/false);
  if (!list.is_array()) {
    return MakeError(ErrorCode::kInternal, "listing this agent's containers: not a JSON array");
  }
  std::map<std::string, std::string> containers;  // task id -> container id
  for (const json& c : list) {
    if (!c.is_object() || !c.contains("Labels") || !c["Labels"].is_object()) continue;
    const std::string id = c["Labels"].value(docker::kTaskLabel, std::string());
    if (ValidTaskId(id) && c.contains("Id") && c["Id"].is_string()) {
      containers.emplace(id, c["Id"].get<std::string>());
    }
  }
  auto dirs = files_.List();
  if (!dirs) return tl::unexpected(dirs.error());
  std::set<std::string> ids(dirs->begin(), dirs->end());
  for (const auto& [id, c] : containers) ids.insert(id);

  AdoptResult out;
  for (const std::string& id : ids) {
    {
      std::lock_guard lock(mu_);
      if (tasks_.count(id) || launching_.count(id)) continue;
    }
    const auto c = containers.find(id);
    if (c == containers.end()) {
      auto t = std::make_unique<Task>();
      t->info.task_id = id;
      t->info.workspace = Workspace(id);
      t->info.adopted = true;
      (void)t->logs.Open(files_, id, options_.log_max_bytes, options_.log_keep, 0, 0);
      t->logs.CloseWriters();
      t->ended = true;
      t->report = {id,
                   ExitKind::kLost,
                   -1,
                   0,
                   0,
                   WallMs(),
                   false,
                   "lost: its container is gone (removed outside the agent, or the agent "
                   "stopped while creating it)"};
      out.ended.push_back(t->report);
      std::lock_guard lock(mu_);
      tasks_[id] = std::move(t);
      continue;
    }
    auto t = LoadTask(id, c->second);
    if (!t) return MakeError(t.error().code, "adopting task " + id + ": " + t.error().message);
    auto state = Inspect(c->second);
    if (!state) {
      return MakeError(state.error().code, "adopting task " + id + ": " + state.error().message);
    }
    Task& task = **t;
    task.info.pid = state->pid;
    task.info.started_ms = state->started_ns / 1'000'000;
    if (docker::IsRunning(*state)) {
      // Its supervisor is renewed from now on (a restartable task's only once the server has
      // heard from the node: RenewLocked); without one, the renewal starts one.
      if (auto conn = ConnectSupervisor(TaskDir(id))) task.lease = UniqueFd(*conn);
      out.running.push_back(task.info);
      std::lock_guard lock(mu_);
      RenewLocked(task, MonotonicMs());
      tasks_[id] = std::move(*t);
      task.watcher = std::thread(&DockerRuntime::Watch, this, &task);
      continue;
    }
    // Ended while the agent was away: the output it wrote since, then its real exit status.
    if (Status st = CopyLogs(task, /*follow=*/false); !st) {
      return MakeError(st.error().code, "adopting task " + id + ": " + st.error().message);
    }
    task.ended = true;
    task.report = EndOf(task, *state, task.stop_requested);
    task.logs.CloseWriters();
    out.ended.push_back(task.report);
    std::lock_guard lock(mu_);
    SaveStateLocked(task);
    tasks_[id] = std::move(*t);
  }
  return out;
}

Status DockerRuntime::DeleteContainer(const std::string& container, const std::string& what) const {
  auto r = client_.Call("DELETE", Api("/containers/" + container + "?force=1"));
  if (!r) return MakeError(r.error().code, what + ": " + r.error().message);
  if (r->status != 204 && r->status != 404) return tl::unexpected(docker::ResponseError(what, *r));
  return {};
}

Status DockerRuntime::Remove(const std::string& task_id) {
  std::unique_ptr<Task> t;
  {
    std::lock_guard lock(mu_);
    const auto it = tasks_.find(task_id);
    if (it == tasks_.end()) return NotFound("task " + task_id + " is not known");
    if (!it->second->ended) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "task " + task_id + " is running; Stop it and Reap its end first");
    }
    t = std::move(it->second);
    tasks_.erase(it);
  }
  t->Join();
  if (!t->info.container.empty()) {
    // Its directory stays when the container does, so that a restarted agent finds both.
    if (Status removed = DeleteContainer(
            t->info.container, "task " + task_id + ": removing container " + t->info.container);
        !removed) {
      return removed;
    }
  }
  return files_.Delete(task_id);
}

// ---- queries ----

namespace {

// Writes all of `data` to a socket; false when its reader is gone.
bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// A docker exec's connection, taken over after its start (101): the daemon's raw stream, the
// command's output (demultiplexed without a tty) passed on to the session's sockets, the
// session's input passed in (its end: the connection's write side shut), and `done` closed once
// the daemon closed the stream.
struct DockerExecPump {
  UniqueFd connection;
  UniqueFd input;   // the session writes the other end
  UniqueFd output;  // the session reads the other ends
  UniqueFd error;
  UniqueFd done;
  // The command was not found: the daemon's ExitCode says 126 for every command runc could not
  // start; this says which (as the docker CLI tells 127 from 126 by the same text).
  std::atomic<bool> not_found{false};

  void Run(std::string first, bool tty) {
    docker::FrameDecoder decoder;
    bool out_open = true;
    bool first_payload = true;
    // runc's refusal to start the command comes in place of its first output: it is an error.
    const auto refusal = [&](std::string_view text) {
      if (!std::exchange(first_payload, false) || !text.starts_with("OCI runtime exec failed")) {
        return false;
      }
      not_found = text.find("executable file not found") != std::string_view::npos ||
                  text.find("no such file or directory") != std::string_view::npos;
      out_open = SendAll(error.get(), text);
      return true;
    };
    const auto deliver = [&](std::string_view bytes) {
      if (!out_open || bytes.empty()) return;
      if (tty) {
        if (!refusal(bytes)) out_open = SendAll(output.get(), bytes);
        return;
      }
      std::vector<docker::FrameDecoder::Frame> frames;
      if (!decoder.Feed(bytes, &frames)) {
        out_open = false;
        return;
      }
      for (const auto& f : frames) {
        if (refusal(f.payload)) continue;
        // 1: stdout; 2: stderr, and 3: the daemon's own error, which the user reads there.
        if (!SendAll(f.stream == 1 ? output.get() : error.get(), f.payload)) out_open = false;
      }
    };
    deliver(first);
    std::string buffer(32 * 1024, '\0');
    bool in_open = true;
    while (true) {
      pollfd fds[2] = {{connection.get(), POLLIN, 0}, {input.get(), POLLIN, 0}};
      const int ready = poll(fds, in_open ? 2 : 1, -1);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) break;
      if (fds[0].revents != 0) {
        const ssize_t n = read(connection.get(), buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // the command ended (or the connection broke)
        deliver(std::string_view(buffer.data(), static_cast<size_t>(n)));
      }
      if (in_open && fds[1].revents != 0) {
        const ssize_t n = read(input.get(), buffer.data(), buffer.size());
        if (n > 0 &&
            SendAll(connection.get(), std::string_view(buffer.data(), static_cast<size_t>(n)))) {
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        shutdown(connection.get(), SHUT_WR);  // its stdin ends
        in_open = false;
      }
    }
    output = UniqueFd();
    error = UniqueFd();
    done = UniqueFd();  // the session's end of it reads EOF: the command ended
  }
};

}  // namespace

Result<ExecProcess> DockerRuntime::Exec(const std::string& task_id, const ExecSpec& spec) {
  if (spec.command.empty() || spec.command[0].empty()) {
    return InvalidArgument("command must name a program");
  }
  if (spec.stdio_socket >= 0 || spec.fd3 >= 0) {
    // docker exec carries the command's streams itself: it takes none of the agent's descriptors.
    return MakeError(ErrorCode::kFailedPrecondition,
                     "task " + task_id +
                         " runs in a container: its commands get no descriptors "
                         "of the agent's");
  }
  std::string container;
  {
    std::lock_guard lock(mu_);
    const auto it = tasks_.find(task_id);
    if (it == tasks_.end()) return NotFound("task " + task_id + " does not run on this node");
    if (it->second->ended) {
      return MakeError(ErrorCode::kFailedPrecondition, "task " + task_id + " has ended");
    }
    container = it->second->info.container;
  }
  const std::string who = "task " + task_id + ": exec: ";
  json create = {{"AttachStdin", true},
                 {"AttachStdout", true},
                 {"AttachStderr", true},
                 {"Tty", spec.tty},
                 {"Cmd", spec.command}};
  if (spec.tty && !spec.term.empty()) create["Env"] = json::array({"TERM=" + spec.term});
  if (spec.tty && spec.cols > 0 && spec.rows > 0) create["ConsoleSize"] = {spec.rows, spec.cols};
  auto created = client_.Call("POST", Api("/containers/" + container + "/exec"), create.dump());
  if (!created) return MakeError(created.error().code, who + created.error().message);
  if (created->status == 404 || created->status == 409) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "task " + task_id + "'s container is not running");
  }
  if (created->status != 201) {
    return tl::unexpected(docker::ResponseError(who + "creating the exec", *created));
  }
  const json cj = json::parse(created->body, nullptr, /*allow_exceptions=*/false);
  if (!cj.is_object() || !cj.contains("Id") || !cj["Id"].is_string()) {
    return MakeError(ErrorCode::kInternal, who + "no Id in the answer");
  }
  const std::string exec_id = cj["Id"].get<std::string>();
  auto started = client_.Upgrade("POST", Api("/exec/" + exec_id + "/start"),
                                 json{{"Detach", false}, {"Tty", spec.tty}}.dump());
  if (!started) return MakeError(started.error().code, who + started.error().message);
  if ((*started)->status() != 101 && (*started)->status() != 200) {
    auto body = (*started)->ReadAll(std::chrono::seconds(5));
    return tl::unexpected(docker::ResponseError(
        who + "starting it", HttpResponse{(*started)->status(), {}, body.value_or("")}));
  }
  auto [connection, first] = (*started)->TakeConnection();

  // Each pair: the session's end, then the pump's.
  UniqueFd ends[4][2];
  for (auto& pair : ends) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      return MakeError(ErrorCode::kInternal, who + "socketpair: " + ErrnoText(errno));
    }
    pair[0] = UniqueFd(fds[0]);
    pair[1] = UniqueFd(fds[1]);
  }
  ExecProcess p;
  p.input = std::move(ends[0][0]);
  p.output = std::move(ends[1][0]);
  p.error = std::move(ends[2][0]);
  p.done = std::move(ends[3][0]);
  auto pump = std::make_shared<DockerExecPump>();
  pump->connection = std::move(connection);
  pump->input = std::move(ends[0][1]);
  pump->output = std::move(ends[1][1]);
  pump->error = std::move(ends[2][1]);
  pump->done = std::move(ends[3][1]);
  const int connection_fd = pump->connection.get();
  std::thread([pump, first = std::move(first), tty = spec.tty]() mutable {
    pump->Run(std::move(first), tty);
  }).detach();

  // The session outlives neither the agent nor the exec, but may outlive this runtime: its
  // calls carry their own client.
  const UnixHttpClient api = client_;
  const std::string inspect = Api("/exec/" + exec_id + "/json");
  p.wait = [api, inspect, pump] {
    if (pump->not_found) return ExecStatus{127, 0};
    // The daemon closes the stream as the command ends and records its code a moment later.
    for (int attempt = 0; attempt < 50; ++attempt) {
      auto r = api.Call("GET", inspect);
      const json j = r && r->status == 200
                         ? json::parse(r->body, nullptr, /*allow_exceptions=*/false)
                         : json();
      if (j.is_object() && !j.value("Running", true) && j.contains("ExitCode") &&
          j["ExitCode"].is_number_integer()) {
        return ExecStatus{j["ExitCode"].get<int>(), 0};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return ExecStatus{125, 0};  // the daemon does not say
  };
  p.kill = [api, inspect, pump, connection_fd] {
    // Docker has no way to stop an exec: its process, by the pid the daemon reports.
    if (auto r = api.Call("GET", inspect); r && r->status == 200) {
      const json j = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.value("Running", false) && j.value("Pid", 0) > 0) {
        kill(j["Pid"].get<int>(), SIGKILL);
      }
    }
    shutdown(connection_fd, SHUT_RDWR);  // the pump (which holds the descriptor) ends
  };
  if (spec.tty) {
    const std::string resize = Api("/exec/" + exec_id + "/resize");
    p.resize = [api, resize](uint16_t cols, uint16_t rows) {
      (void)api.Call("POST", resize + "?h=" + std::to_string(rows) + "&w=" + std::to_string(cols));
    };
  }
  return p;
}

Result<LogChunk> DockerRuntime::ReadLog(const std::string& task_id, LogStream stream,
                                        int64_t offset, int64_t max_bytes) const {
  Result<RotatingLog::Snapshot> snap = [&] {
    std::lock_guard lock(mu_);
    return LogSnapshotOf(tasks_, task_id, stream);
  }();
  if (!snap) return tl::unexpected(snap.error());
  return RotatingLog::Read(*snap, offset, max_bytes);
}

std::vector<RunningTask> DockerRuntime::Running() const {
  std::lock_guard lock(mu_);
  return RunningOf(tasks_);
}

std::vector<std::string> DockerRuntime::Tasks() const {
  std::lock_guard lock(mu_);
  return IdsOf(tasks_);
}

// ---- state file ----

Status DockerRuntime::WriteStateLocked(Task& t) {
  const json j = {
      {"version", 1},
      {"task_id", t.info.task_id},
      {"container", t.info.container},
      {"log_base",
       {{"stdout", t.logs.base(LogStream::kStdout)}, {"stderr", t.logs.base(LogStream::kStderr)}}},
      {"log_since_ns", t.log_since_ns},
      {"stop_requested", t.stop_requested},
      {"stop_grace_ms", t.stop_grace_ms},
      {"restartable", t.restartable},
  };
  Status written = os::WriteFileAtomically(files_.StatePath(t.info.task_id), j.dump(2) + "\n");
  t.state_written_mono = MonotonicMs();
  return written;
}

void DockerRuntime::SaveStateLocked(Task& t) {
  t.state_trouble.Observe(WriteStateLocked(t), t.info.task_id, "state file", options_.on_warning);
}

}  // namespace gpupool::agent
