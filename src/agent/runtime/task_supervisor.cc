// Implementation of task_supervisor.h: the supervisor's loops (a process task's exit, or a
// container's, the lease, reconnections), its record of the task's end, the agent's side of the
// lease, and the static initializer that runs a supervisor before main().
#include "agent/runtime/task_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <sstream>

#include "agent/runtime/docker_api.h"
#include "agent/runtime/linux_proc.h"
#include "agent/runtime/unix_http.h"
#include "core/unique_fd.h"
#include "os/files.h"

namespace gpupool::agent {
namespace {

constexpr int64_t kGoneWaitMs = 2000;         // for killed processes to leave
constexpr int64_t kContainerPollMs = 500;     // how often a container's state is read
constexpr int64_t kContainerGoneMs = 10'000;  // for a killed container to stop

template <typename T>
bool ParseNumber(const std::string& s, T* out) {
  const char* end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end;
}

// "/proc/self/fd/N/<name>": a path short enough for sockaddr_un however deep the task dir is.
std::string SocketPath(int dir_fd) {
  return "/proc/self/fd/" + std::to_string(dir_fd) + "/" + kSupervisorSocketName;
}

bool FillAddress(const std::string& path, sockaddr_un* addr) {
  if (path.size() >= sizeof addr->sun_path) return false;
  addr->sun_family = AF_UNIX;
  std::memcpy(addr->sun_path, path.c_str(), path.size() + 1);
  return true;
}

// Whether the peer of `fd` runs as our uid or root: tasks run under other uids and must not hold
// their own lease.
bool PeerMayRenew(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  return cred.uid == 0 || cred.uid == geteuid();
}

// Reaps the task's descendants that were left to us (we are their subreaper) and have ended;
// the task itself is reaped where its end is recorded.
void ReapOrphans(pid_t task) {
  while (true) {
    siginfo_t si{};
    if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0 ||
        si.si_pid == task) {
      return;
    }
    waitid(P_PID, static_cast<id_t>(si.si_pid), &si, WEXITED | WNOHANG);
  }
}

// Waits a bounded time until nothing of the task is left: its cgroup is empty and its process
// group has no member, zombies included (the task's first process is reaped by then).
void AwaitGone(const SupervisorArgs& a) {
  const int64_t deadline = MonotonicMs() + kGoneWaitMs;
  while (MonotonicMs() < deadline) {
    ReapOrphans(a.task_pid);
    const bool group_left = kill(-a.task_pid, 0) == 0 || errno != ESRCH;
    if (!group_left && a.cgroup.Members().empty()) return;
    usleep(5000);
  }
}

// Kills the rest of the task's tree (the reaped-or-not first process pins the process group).
void KillTree(const SupervisorArgs& a) {
  a.cgroup.Kill(SIGKILL);  // freezes the group first, so nothing in it forks meanwhile
  kill(-a.task_pid, SIGKILL);
}

// Reaps the task; its siginfo (si_pid 0 when it could not be reaped).
siginfo_t Reap(pid_t pid) {
  siginfo_t si{};
  while (waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED) != 0 && errno == EINTR) {
  }
  return si;
}

// The socket goes with the supervisor: a later agent finds none to renew.
void Unlisten(const SupervisorArgs& a) {
  UniqueFd dir(open(a.task_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dir.ok()) unlink(SocketPath(dir.get()).c_str());
}

int Finish(const SupervisorArgs& a, const SupervisorExit& exit) {
  AwaitGone(a);
  // Nobody may take this record for a stale one: the agent reads it once we are gone.
  const Status written = WriteSupervisorExit(a.task_dir, exit);
  Unlisten(a);
  return written ? 0 : 1;
}

// The lease as the supervisor holds it: the agent's connection (renewals: an int64_t of
// milliseconds each), the socket a restarted agent reconnects to, and when the lease runs out.
class LeaseHolder {
 public:
  explicit LeaseHolder(const SupervisorArgs& a)
      : conn_(a.lease_fd),
        // Without one, the task keeps the first agent's lease only.
        listener_(a.listen_fd >= 0 ? UniqueFd(a.listen_fd)
                                   : ListenForAgents(a.task_dir).value_or(UniqueFd())),
        lease_(a.lease_ms),
        deadline_(MonotonicMs() + a.lease_ms) {
    fcntl(conn_.get(), F_SETFL, O_NONBLOCK);  // it is read until there is nothing more
  }
  int64_t lease() const { return lease_; }
  // Milliseconds until the lease runs out (≤ 0: it has).
  int64_t Remaining() const { return deadline_ - MonotonicMs(); }

  // Waits up to `timeout_ms` (and no longer than the lease) for `fd` (-1: none), a renewal or
  // a reconnecting agent, and takes what came. True when `fd` is readable.
  bool Wait(int fd, int64_t timeout_ms) {
    pollfd fds[3] = {{fd, POLLIN, 0}, {listener_.get(), POLLIN, 0}, {conn_.get(), POLLIN, 0}};
    const int64_t timeout = std::max<int64_t>(0, std::min(timeout_ms, Remaining()));
    if (poll(fds, 3, static_cast<int>(timeout)) <= 0) return false;
    if (fds[1].revents & POLLIN) {
      UniqueFd next(accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (next.ok() && PeerMayRenew(next.get())) conn_ = std::move(next);
      // the new connection's first renewal is read next round
    } else if (fds[2].revents != 0) {
      ReadRenewals();
    }
    return (fds[0].revents & POLLIN) != 0;
  }

 private:
  void ReadRenewals() {
    while (conn_.ok()) {
      int64_t value = 0;
      const ssize_t n = recv(conn_.get(), &value, sizeof value, 0);
      if (n == static_cast<ssize_t>(sizeof value)) {
        if (value > 0) {
          lease_ = value;
          deadline_ = MonotonicMs() + lease_;
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      conn_.Close();  // the agent is gone: the lease runs out unless one reconnects in time
    }
  }

  UniqueFd conn_;
  UniqueFd listener_;
  int64_t lease_;
  int64_t deadline_;
};

// Whether the container is still there and running (or paused, or restarting): true also while
// the daemon does not answer, so that only its word ends the watch.
bool ContainerRuns(const UnixHttpClient& docker, const std::string& container) {
  auto r = docker.Call("GET", std::string(docker::kApi) + "/containers/" + container + "/json");
  if (!r) return true;
  if (r->status == 404) return false;
  if (r->status != 200) return true;
  auto state = docker::ParseInspect(std::string_view(r->body));
  return !state || docker::IsRunning(*state);
}

int RunContainerSupervisor(const SupervisorArgs& a) {
  const UnixHttpClient docker(a.docker_socket, UnixHttpOptions{std::chrono::seconds(5), -1});
  LeaseHolder lease(a);
  while (ContainerRuns(docker, a.container)) {
    if (lease.Remaining() <= 0) {
      // The agent has been gone (or silent) for the whole lease: the container must be gone
      // before the server may give the task to another node. The record comes first, so that
      // whoever sees the container's end also sees why.
      const Status written =
          WriteSupervisorExit(a.task_dir, {ExitKind::kLost, -1, SIGKILL, WallMs(), lease.lease()});
      const std::string kill =
          std::string(docker::kApi) + "/containers/" + a.container + "/kill?signal=KILL";
      const int64_t until = MonotonicMs() + kContainerGoneMs;
      do {
        (void)docker.Call("POST", kill);
        if (!ContainerRuns(docker, a.container)) break;
        usleep(50'000);
      } while (MonotonicMs() < until);
      Unlisten(a);
      return written ? 0 : 1;
    }
    lease.Wait(-1, kContainerPollMs);
  }
  Unlisten(a);
  return 0;
}

// Runs the supervisor when this process was started as one (see the header).
[[maybe_unused]] const bool kRanAsSupervisor = [] {
  const auto cmdline = ReadFile("/proc/self/cmdline");
  if (!cmdline || cmdline->find(kSupervisorFlag) == std::string::npos) return false;
  std::vector<std::string> argv;
  size_t start = 0;
  while (start < cmdline->size()) {
    size_t end = cmdline->find('\0', start);
    if (end == std::string::npos) end = cmdline->size();
    argv.push_back(cmdline->substr(start, end - start));
    start = end + 1;
  }
  if (argv.size() < 2 || argv[1] != kSupervisorFlag) return false;
  auto args = ParseSupervisorArgv(argv);
  _exit(args ? RunTaskSupervisor(*args) : 2);
}();

}  // namespace

std::vector<std::string> SupervisorArgv(const std::string& exe, const SupervisorArgs& a) {
  std::vector<std::string> argv = {exe,
                                   kSupervisorFlag,
                                   a.task_dir,
                                   std::to_string(a.lease_fd),
                                   a.task_pid > 0 || !a.container.empty()
                                       ? std::to_string(a.task_pid)
                                       : std::string(kPidWidth, ' '),
                                   std::to_string(a.lease_ms)};
  if (a.listen_fd >= 0) argv.push_back("listen:" + std::to_string(a.listen_fd));
  for (const auto& [name, e] : a.cgroup.controllers) {
    argv.push_back("c:" + name + ":" + std::to_string(static_cast<int>(e.version)) + ":" + e.dir);
  }
  if (!a.cgroup.v2_dir.empty()) argv.push_back("v2:" + a.cgroup.v2_dir);
  if (!a.container.empty()) {
    argv.push_back("docker:" + a.docker_socket);
    argv.push_back("container:" + a.container);
  }
  return argv;
}

Result<SupervisorArgs> ParseSupervisorArgv(const std::vector<std::string>& argv) {
  if (argv.size() < 6 || argv[1] != kSupervisorFlag) {
    return InvalidArgument(std::string("usage: gpupool ") + kSupervisorFlag +
                           " TASK_DIR LEASE_FD TASK_PID LEASE_MS [listen:FD] [CGROUP…] "
                           "[docker:SOCKET container:ID]");
  }
  SupervisorArgs a;
  a.task_dir = argv[2];
  if (a.task_dir.empty() || a.task_dir[0] != '/') {
    return InvalidArgument("task directory '" + a.task_dir + "' is not an absolute path");
  }
  if (!ParseNumber(argv[3], &a.lease_fd) || a.lease_fd < 0) {
    return InvalidArgument("lease descriptor '" + argv[3] + "' is not a descriptor number");
  }
  if (!ParseNumber(argv[kSupervisorPidArg], &a.task_pid) || a.task_pid < 0) {
    return InvalidArgument("task pid '" + argv[kSupervisorPidArg] + "' is not a pid");
  }
  if (!ParseNumber(argv[5], &a.lease_ms) || a.lease_ms <= 0) {
    return InvalidArgument("lease '" + argv[5] + "' is not a positive number of milliseconds");
  }
  for (size_t i = 6; i < argv.size(); ++i) {
    const std::string& s = argv[i];
    if (s.starts_with("v2:")) {
      a.cgroup.v2_dir = s.substr(3);
      continue;
    }
    if (s.starts_with("listen:")) {
      if (!ParseNumber(s.substr(7), &a.listen_fd) || a.listen_fd < 0) {
        return InvalidArgument("listening descriptor '" + s + "' is not a descriptor number");
      }
      continue;
    }
    if (s.starts_with("docker:")) {
      a.docker_socket = s.substr(7);
      continue;
    }
    if (s.starts_with("container:")) {
      a.container = s.substr(10);
      continue;
    }
    const size_t name_end = s.find(':', 2);
    const size_t version_end = name_end == std::string::npos ? name_end : s.find(':', name_end + 1);
    int version = 0;
    if (!s.starts_with("c:") || version_end == std::string::npos ||
        !ParseNumber(s.substr(name_end + 1, version_end - name_end - 1), &version) ||
        (version != 1 && version != 2)) {
      return InvalidArgument("cgroup '" + s + "' is not c:CONTROLLER:VERSION:DIR or v2:DIR");
    }
    a.cgroup.controllers[s.substr(2, name_end - 2)] = {
        version == 2 ? CgroupVersion::kV2 : CgroupVersion::kV1, s.substr(version_end + 1)};
  }
  if (a.container.empty() != a.docker_socket.empty()) {
    return InvalidArgument("a container needs both docker:SOCKET and container:ID");
  }
  if (a.task_pid == 0 && a.container.empty()) {
    return InvalidArgument("task pid '0' is not a pid");
  }
  return a;
}

int RunTaskSupervisor(const SupervisorArgs& a) {
  signal(SIGPIPE, SIG_IGN);
  if (!a.container.empty()) return RunContainerSupervisor(a);
  // What the task leaves behind when its processes' parents end comes to us, not to init, so
  // that we can see it gone.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  const pid_t task = a.task_pid;
  UniqueFd pidfd(PidfdOpen(task));  // our child: without pidfds, waitid is polled
  LeaseHolder lease(a);
  while (true) {
    ReapOrphans(task);
    siginfo_t si{};
    if (waitid(P_PID, static_cast<id_t>(task), &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        si.si_pid == task) {
      SupervisorExit exit;
      exit.finished_ms = WallMs();
      KillTree(a);
      Reap(task);
      if (si.si_code == CLD_EXITED) {
        exit.kind = ExitKind::kExited;
        exit.exit_code = si.si_status;
      } else {
        exit.kind = ExitKind::kSignaled;
        exit.signal = si.si_status;
      }
      return Finish(a, exit);
    }
    if (lease.Remaining() <= 0) {
      // The agent has been gone (or silent) for the whole lease: its server may give the task
      // to another node from now on, so nothing of this run may be left.
      KillTree(a);
      kill(task, SIGKILL);
      Reap(task);
      return Finish(a, {ExitKind::kLost, -1, SIGKILL, WallMs(), lease.lease()});
    }
    lease.Wait(pidfd.get(), pidfd.ok() ? lease.Remaining() : 100);
  }
}

Status WriteSupervisorExit(const std::string& task_dir, const SupervisorExit& e) {
  std::ostringstream out;
  out << ExitKindName(e.kind) << ' ' << e.exit_code << ' ' << e.signal << ' ' << e.finished_ms
      << ' ' << e.lease_ms << '\n';
  return os::WriteFileAtomically(task_dir + "/" + kSupervisorExitName, out.str());
}

std::optional<SupervisorExit> ReadSupervisorExit(const std::string& task_dir) {
  const auto text = ReadFile(task_dir + "/" + kSupervisorExitName);
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  std::string kind;
  SupervisorExit e;
  if (!(in >> kind >> e.exit_code >> e.signal >> e.finished_ms >> e.lease_ms)) return std::nullopt;
  const auto k = ParseExitKind(kind);
  if (!k || (*k != ExitKind::kExited && *k != ExitKind::kSignaled && *k != ExitKind::kLost)) {
    return std::nullopt;
  }
  e.kind = *k;
  return e;
}

Result<UniqueFd> ListenForAgents(const std::string& task_dir) {
  UniqueFd dir(open(task_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  sockaddr_un addr{};
  if (!dir.ok() || !FillAddress(SocketPath(dir.get()), &addr)) {
    return MakeError(ErrorCode::kNotFound, "cannot open " + task_dir + ": " + ErrnoText(errno));
  }
  unlink(addr.sun_path);
  UniqueFd fd(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  // Connecting needs write permission on the socket: bound with the process's umask (022 or
  // stricter leaves no one else write), then 0600; a peer of another uid that connected in
  // between is refused at accept (PeerMayRenew).
  if (!fd.ok() || bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      chmod(addr.sun_path, 0600) != 0 || listen(fd.get(), 4) != 0) {
    return MakeError(ErrorCode::kUnavailable,
                     "cannot listen in " + task_dir + " for the agent: " + ErrnoText(errno));
  }
  return fd;
}

Result<int> ConnectSupervisor(const std::string& task_dir) {
  UniqueFd dir(open(task_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  sockaddr_un addr{};
  if (!dir.ok() || !FillAddress(SocketPath(dir.get()), &addr)) {
    return MakeError(ErrorCode::kNotFound, "cannot open " + task_dir + ": " + ErrnoText(errno));
  }
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    if (fd >= 0) close(fd);
    return MakeError(ErrorCode::kUnavailable,
                     "cannot reach the task's supervisor: " + ErrnoText(err));
  }
  return fd;
}

std::string SupervisorLostReason(const SupervisorExit& e, bool restartable) {
  if (restartable) {
    // What the supervisor recorded is the rest of the lease it was last told, not the lease.
    return "lost: the server had not heard from its node (or its agent was away) for longer than "
           "its lease, so its supervisor killed it before the server could run it elsewhere";
  }
  return "lost: its agent was away for longer than its lease of " + std::to_string(e.lease_ms) +
         " ms, so its supervisor killed it";
}

bool LeaseFence::SetLease(std::chrono::milliseconds lease) {
  if (lease.count() < 1 || lease == lease_) return false;
  lease_ = lease;
  return true;
}

bool LeaseFence::Heard(int64_t sent_mono_ms) {
  if (sent_mono_ms <= heard_mono_) return false;
  heard_mono_ = sent_mono_ms;
  return true;
}

std::optional<int64_t> LeaseFence::Now(bool restartable, int64_t now_mono_ms) const {
  if (!restartable) return lease_.count();
  if (heard_mono_ < 0) return std::nullopt;
  const int64_t left = heard_mono_ + lease_.count() - now_mono_ms;
  if (left < 1) return std::nullopt;
  return left;
}

int64_t LeaseFence::First(bool restartable, int64_t now_mono_ms) const {
  if (!restartable || heard_mono_ < 0) return lease_.count();
  return Now(true, now_mono_ms).value_or(1);
}

bool RenewLease(int fd, std::chrono::milliseconds lease) {
  const int64_t value = lease.count();
  return send(fd, &value, sizeof value, MSG_NOSIGNAL | MSG_DONTWAIT) ==
         static_cast<ssize_t>(sizeof value);
}

}  // namespace gpupool::agent
