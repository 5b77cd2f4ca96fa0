// Implementation of process_runtime.h: task directories, fork/exec with the child set up by
// async-signal-safe calls only, the monitor thread (output pipes, pidfds, stop deadlines, OOM
// counters), state files and adoption after a restart.
#include "agent/runtime/process_runtime.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "agent/runtime/linux_proc.h"
#include "agent/runtime/task_supervisor.h"
#include "core/task_path.h"
#include "core/unique_fd.h"
#include "os/files.h"

namespace gpupool::agent {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kPipeBytes = 1 << 20;       // room for output while the agent restarts
constexpr size_t kDrainBudget = 4 << 20;  // per stream per wake-up, for fairness
constexpr int64_t kRemoveWaitMs = 2000;   // for killed members to leave the cgroup
constexpr const char* kPipeNames[] = {"stdout.pipe", "stderr.pipe"};
constexpr const char* kEtc[] = {"/etc/passwd", "/etc/group"};
constexpr const char* kSelfExe = "/proc/self/exe";  // the supervisor is the agent's binary

// Whether `path` is `dir` or below it.
bool InTree(const std::string& path, std::string_view dir) {
  return path.starts_with(dir) && (path.size() == dir.size() || path[dir.size()] == '/');
}

// `to` as a hard link to `from`, or (another file system, or a link refused) a copy, readable
// by all: the task's own uid loads it.
Status LinkOrCopy(const std::string& from, const std::string& to) {
  if (link(from.c_str(), to.c_str()) == 0) return {};
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (!ec) fs::permissions(to, fs::perms(0644), ec);
  if (ec) {
    return MakeError(ErrorCode::kInternal, "cannot give the task the GPU-memory interposer " +
                                               from + ": " + ec.message());
  }
  return {};
}

// ---- the child between fork and exec: async-signal-safe calls only ----

enum ChildStage : int {
  kStageSetsid = 1,
  kStageCgroup,
  kStageStdio,
  kStageFds,
  kStageRlimit,
  kStageNamespace,
  kStageMount,
  kStageGroups,
  kStageGid,
  kStageUid,
  kStageChdir,
  kStageParent,
  kStageExec,
  kStageSupervisor,
  kStageTerminal,
  kStageJoin,
};

const char* StageName(int stage) {
  switch (stage) {
    case kStageSetsid:
      return "setsid";
    case kStageCgroup:
      return "joining the task's cgroup";
    case kStageStdio:
      return "redirecting stdin/stdout/stderr";
    case kStageFds:
      return "closing inherited descriptors";
    case kStageRlimit:
      return "setting RLIMIT_NPROC";
    case kStageNamespace:
      return "unsharing the mount namespace";
    case kStageMount:
      return "mounting the task's view";
    case kStageGroups:
      return "setgroups";
    case kStageGid:
      return "setgid";
    case kStageUid:
      return "setuid";
    case kStageChdir:
      return "changing into the workspace";
    case kStageParent:
      return "tying the task to its supervisor";
    case kStageExec:
      return "exec";
    case kStageSupervisor:
      return "starting the task's supervisor";
    case kStageTerminal:
      return "making the terminal its controlling one";
    case kStageJoin:
      return "entering the task's mount namespace";
  }
  return "child setup";
}

// Everything the child needs, prepared before fork.
struct ChildPlan {
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* workspace = nullptr;
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  const int* procs_fds = nullptr;  // cgroup.procs files to write "0" (self) into
  size_t procs_count = 0;
  int error_fd = -1;  // close-on-exec pipe: {stage, errno} on failure
  bool set_ids = false;
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t supervisor = 0;  // the task's parent, set by the supervisor before it forks the task
  rlim_t nproc = 0;      // > 0: RLIMIT_NPROC (pids limit without a pids controller)
  int max_fd = 1024;     // for closing descriptors where close_range is missing
  // Non-null: a mount namespace of its own, made private, with these bind mounts (host path,
  // /proc/self/fd/N, target: each host path is opened into descriptor N, reserved by the parent,
  // before the first mount, so that a mount hiding a host path cannot hide a later source; opened
  // after the unshare, since a mount cannot be bound from another namespace).
  const char* const* binds = nullptr;
  const int* bind_fds = nullptr;
  const char* bind_read_only = nullptr;  // per bind: non-zero makes it read-only
  size_t bind_count = 0;
  // A command run in a running task (Exec) rather than the task: it enters the task's mount
  // namespace (this descriptor of /proc/<task>/ns/mnt, -1: none) instead of making one, takes
  // `terminal` (a pty's slave, nullptr: none) as its controlling terminal and stdin/stdout/stderr,
  // and looks a bare `path` up in `search` (the task's PATH) when that is set.
  int mount_ns_fd = -1;
  const char* terminal = nullptr;
  const char* search = nullptr;
  int fd3 = -1;  // >= 0: becomes its descriptor 3, just before the exec
};

[[noreturn]] void ChildFail(const ChildPlan& p, int stage, int detail = 0) {
  const int msg[3] = {stage, errno, detail};
  ssize_t ignored = write(p.error_fd, msg, sizeof msg);
  (void)ignored;
  _exit(127);
}

// Default dispositions and an empty mask: both survive exec, and the agent's are not the task's
// business (an ignored SIGPIPE would break `producer | head`), nor its supervisor's.
void ResetSignals() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) {
    if (s != SIGKILL && s != SIGSTOP) sigaction(s, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

// Every descriptor from 3 up is closed by the next exec (`keep` excepted, when >= 0).
void CloseOnExec(const ChildPlan& p, int keep) {
  if (syscall(SYS_close_range, 3u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */) != 0) {
    for (int fd = 3; fd < p.max_fd; ++fd) {
      if (fd != p.error_fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
  }
  if (keep >= 0) fcntl(keep, F_SETFD, 0);
}

[[noreturn]] void ChildExec(const ChildPlan& p) {
  ResetSignals();
  if (setsid() < 0) ChildFail(p, kStageSetsid);
  for (size_t i = 0; i < p.procs_count; ++i) {
    if (write(p.procs_fds[i], "0", 1) != 1) ChildFail(p, kStageCgroup);
  }
  // The agent may be shielded from the OOM killer; its tasks are not (best effort).
  const int adj = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (adj >= 0) {
    ssize_t ignored = write(adj, "0", 1);
    (void)ignored;
    close(adj);
  }
  if (p.terminal != nullptr) {
    const int tty = open(p.terminal, O_RDWR | O_CLOEXEC);
    if (tty < 0 || ioctl(tty, TIOCSCTTY, 0) != 0) ChildFail(p, kStageTerminal);
    if (dup2(tty, 0) < 0 || dup2(tty, 1) < 0 || dup2(tty, 2) < 0) ChildFail(p, kStageStdio);
    close(tty);
  } else if (dup2(p.stdin_fd, 0) < 0 || dup2(p.stdout_fd, 1) < 0 || dup2(p.stderr_fd, 2) < 0) {
    ChildFail(p, kStageStdio);
  }
  // Nothing else of the agent's crosses exec.
  CloseOnExec(p, -1);
  if (p.nproc > 0) {
    const rlimit lim{p.nproc, p.nproc};
    if (setrlimit(RLIMIT_NPROC, &lim) != 0) ChildFail(p, kStageRlimit);
  }
  if (p.mount_ns_fd >= 0) {
    if (setns(p.mount_ns_fd, CLONE_NEWNS) != 0) ChildFail(p, kStageJoin);
  } else if (p.binds != nullptr) {
    if (unshare(CLONE_NEWNS) != 0) ChildFail(p, kStageNamespace);
    // Nothing the task mounts or unmounts reaches the host, nor the host's later mounts the task.
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ChildFail(p, kStageMount);
    for (size_t i = 0; i < p.bind_count; ++i) {
      const int fd = open(p.binds[3 * i], O_PATH | O_CLOEXEC);
      if (fd < 0 || dup3(fd, p.bind_fds[i], O_CLOEXEC) < 0) {
        ChildFail(p, kStageMount, static_cast<int>(i));
      }
      close(fd);
    }
    for (size_t i = 0; i < p.bind_count; ++i) {
      if (mount(p.binds[3 * i + 1], p.binds[3 * i + 2], nullptr, MS_BIND, nullptr) != 0) {
        ChildFail(p, kStageMount, static_cast<int>(i));
      }
      // A bind mount is made read-only by remounting it, never by the first mount's flags.
      if (p.bind_read_only[i] != 0 && mount(nullptr, p.binds[3 * i + 2], nullptr,
                                            MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
        ChildFail(p, kStageMount, static_cast<int>(i));
      }
    }
  }
  if (p.set_ids) {
    if (setgroups(0, nullptr) != 0) ChildFail(p, kStageGroups);
    if (setgid(p.gid) != 0) ChildFail(p, kStageGid);
    if (setuid(p.uid) != 0) ChildFail(p, kStageUid);
  }
  if (chdir(p.workspace) != 0) ChildFail(p, kStageChdir);
  umask(022);
  // The task dies with its supervisor. Set last: a change of uid clears it.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != p.supervisor) {
    ChildFail(p, kStageParent);
  }
  // Last: of the descriptors, only error_fd is used after it, which the parent kept off 3.
  if (p.fd3 >= 0 && (dup2(p.fd3, 3) < 0 || fcntl(3, F_SETFD, 0) != 0)) {
    ChildFail(p, kStageStdio);
  }
  if (p.search == nullptr || std::strchr(p.path, '/') != nullptr) {
    execve(p.path, p.argv, p.envp);
    ChildFail(p, kStageExec);
  }
  // The task's PATH, as execvpe would search it (execvpe reads the agent's own PATH).
  char candidate[4096];
  const size_t name = std::strlen(p.path);
  int first_error = ENOENT;
  for (const char* dir = p.search;;) {
    const char* end = std::strchr(dir, ':');
    const size_t len = end != nullptr ? static_cast<size_t>(end - dir) : std::strlen(dir);
    if (len > 0 && len + 1 + name < sizeof candidate) {
      std::memcpy(candidate, dir, len);
      candidate[len] = '/';
      std::memcpy(candidate + len + 1, p.path, name + 1);
      execve(candidate, p.argv, p.envp);
      // The first other failure (EACCES: found, not executable) is what the search reports.
      if (first_error == ENOENT && errno != ENOENT && errno != ENOTDIR) first_error = errno;
    }
    if (end == nullptr) break;
    dir = end + 1;
  }
  errno = first_error;
  ChildFail(p, kStageExec);
}

// What the supervisor's process needs between the agent's fork and its exec.
struct SupervisorPlan {
  const char* exe = nullptr;
  char* const* argv = nullptr;
  char* pid_arg = nullptr;  // kPidWidth characters of argv to write the task's pid into
  int lease_fd = -1;        // the supervisor's end of the lease socket
  int listen_fd = -1;       // its socket for a restarted agent (ListenForAgents)
  int devnull = -1;
};

// The agent's child: it becomes the task's supervisor (task_supervisor.h) in a session of its
// own, so that signals to the agent's process group or terminal do not reach it. It forks the
// task, tells the agent the task's pid over the lease socket, and executes the supervisor.
[[noreturn]] void SupervisorExec(ChildPlan& p, const SupervisorPlan& s) {
  ResetSignals();
  if (setsid() < 0) ChildFail(p, kStageSupervisor);
  p.supervisor = getpid();
  const pid_t task = fork();
  if (task < 0) ChildFail(p, kStageSupervisor);
  if (task == 0) ChildExec(p);
  char digits[kPidWidth];
  size_t n = 0;
  for (pid_t v = task; v > 0 && n < kPidWidth; v /= 10)
    digits[n++] = static_cast<char>('0' + v % 10);
  for (size_t i = 0; i < n; ++i) s.pid_arg[i] = digits[n - 1 - i];
  s.pid_arg[n] = '\0';
  ssize_t sent = send(s.lease_fd, &task, sizeof task, MSG_NOSIGNAL);
  (void)sent;  // the agent learns of a failure from the error pipe or the lease's end
  if (dup2(s.devnull, 0) < 0 || dup2(s.devnull, 1) < 0 || dup2(s.devnull, 2) < 0) {
    kill(task, SIGKILL);
    ChildFail(p, kStageSupervisor);
  }
  CloseOnExec(p, s.lease_fd);
  fcntl(s.listen_fd, F_SETFD, 0);
  char* const no_env[] = {nullptr};  // nothing of the agent's environment (its keys) goes along
  execve(s.exe, s.argv, no_env);
  const int err = errno;
  kill(task, SIGKILL);
  errno = err;
  ChildFail(p, kStageSupervisor);
}

// ---- helpers ----

// The executable execve gets: an absolute or workspace-relative path as given, a bare name
// looked up in the task's PATH.
Result<std::string> ResolveCommand(const std::string& name, const std::string& path,
                                   const std::string& task_id) {
  if (name.find('/') != std::string::npos) return name;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    const std::string dir = path.substr(start, end - start);
    if (!dir.empty() && dir[0] == '/') {
      const std::string candidate = dir + "/" + name;
      struct stat st {};
      if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111)) {
        return candidate;
      }
    }
    start = end + 1;
  }
  return NotFound("task " + task_id + ": command '" + name + "' not found in PATH=" + path);
}

// A descriptor at 3 or above (so that dup2 onto 0..2 in the child cannot clobber another).
// Gives `dir` and everything below it to uid/gid, never following a symbolic link; 0 or the
// errno.
int ChownTree(const std::string& dir, uid_t uid, gid_t gid) {
  if (lchown(dir.c_str(), uid, gid) != 0) return errno;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (lchown(it->path().c_str(), uid, gid) != 0) return errno;
  }
  return ec.value();
}

int High(int fd) {
  if (fd < 0 || fd >= 3) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  close(fd);
  return moved;
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// The task's own view of the file system (the class comment): what its mount namespace binds
// where. The child opens each host path into a descriptor reserved here (N, holding /dev/null
// until then) before its first mount and binds /proc/self/fd/N, so that a mount hiding a host
// path (a data dir below /tmp or /root) cannot hide a later source.
struct TaskView {
  struct Entry {
    std::string name;  // "the workspace": for errors
    std::string host;
    std::string source;  // /proc/self/fd/N
    std::string target;
    bool read_only = false;
  };
  std::vector<Entry> binds;
  std::vector<UniqueFd> slots;
  std::vector<int> slot_fds;
  std::vector<const char*> flat;  // host, source, target, host, … as the child reads them
  std::vector<char> read_only;    // per bind

  // Adds `host` bound at `target`; 0 or the errno of reaching it or of reserving a descriptor.
  int Bind(const std::string& name, const std::string& host, const std::string& target,
           bool read_only_bind = false) {
    if (access(host.c_str(), F_OK) != 0) return errno;
    UniqueFd slot(High(open("/dev/null", O_RDONLY | O_CLOEXEC)));
    if (!slot.ok()) return errno;
    binds.push_back(
        {name, host, "/proc/self/fd/" + std::to_string(slot.get()), target, read_only_bind});
    slot_fds.push_back(slot.get());
    slots.push_back(std::move(slot));
    return 0;
  }
  void Flatten() {
    flat.clear();
    read_only.clear();
    for (const Entry& e : binds) {
      flat.push_back(e.host.c_str());
      flat.push_back(e.source.c_str());
      flat.push_back(e.target.c_str());
      read_only.push_back(e.read_only ? 1 : 0);
    }
  }
};

json CgroupToJson(const TaskCgroup& c) {
  json controllers = json::object();
  for (const auto& [name, e] : c.controllers) {
    controllers[name] = {{"version", static_cast<int>(e.version)}, {"dir", e.dir}};
  }
  return {{"controllers", controllers}, {"v2_dir", c.v2_dir}};
}

TaskCgroup CgroupFromJson(const json& j) {
  TaskCgroup c;
  if (!j.is_object()) return c;
  if (j.contains("controllers") && j["controllers"].is_object()) {
    for (const auto& [name, e] : j["controllers"].items()) {
      c.controllers[name] = {e.value("version", 1) == 2 ? CgroupVersion::kV2 : CgroupVersion::kV1,
                             e.value("dir", std::string())};
    }
  }
  c.v2_dir = j.value("v2_dir", std::string());
  return c;
}

}  // namespace

struct ProcessRuntime::Task {
  RunningTask info;
  int64_t memory_mib = 0;
  int pidfd = -1;  // the task's first process (signals; its end, for a task without supervisor)
  // The task's supervisor (task_supervisor.h), its parent; 0 for a task a runtime without
  // supervisors launched, adopted as it is.
  pid_t supervisor_pid = 0;
  uint64_t supervisor_ticks = 0;
  int supervisor_pidfd = -1;  // its end is the task's end
  int lease_fd = -1;          // our connection to it, -1 when there is none
  int fds[2] = {-1, -1};      // read ends of the stdout / stderr FIFOs
  TaskLogs logs;
  WriteTrouble state_trouble;
  bool restartable = false;  // its lease is fenced by the server's acknowledgements
  bool stop_requested = false;
  int64_t stop_requested_ms = 0;
  int64_t stop_deadline_ms = 0;    // wall clock (persisted)
  int64_t stop_deadline_mono = 0;  // the same on the monotonic clock
  bool kill_sent = false;
  int64_t oom_kills_seen = 0;
  bool oom = false;
  bool ended = false;
  ExitReport report;

  // What tells of the task's end: its supervisor, or the task itself.
  int ExitFd() const { return supervisor_pid > 0 ? supervisor_pidfd : pidfd; }

  ~Task() {
    CloseFd(pidfd);
    CloseFd(supervisor_pidfd);
    CloseFd(lease_fd);
    CloseFd(fds[0]);
    CloseFd(fds[1]);
  }
};

// ---- construction ----

ProcessRuntime::ProcessRuntime(TaskFiles files, RuntimeOptions options, bool own_uid,
                               Cgroups cgroups, int wake_fd, std::string task_view_unavailable)
    : files_(std::move(files)),
      options_(std::move(options)),
      own_uid_(own_uid),
      task_view_(task_view_unavailable.empty()),
      task_view_unavailable_(std::move(task_view_unavailable)),
      cgroups_(std::move(cgroups)),
      wake_fd_(wake_fd),
      fence_(options_.lease),
      buffer_(64 << 10) {}

Result<std::unique_ptr<ProcessRuntime>> ProcessRuntime::Open(const std::string& root_dir,
                                                             RuntimeOptions options) {
  if (options.log_max_bytes < 0 || options.log_keep < 0) {
    return InvalidArgument("log_max_bytes " + std::to_string(options.log_max_bytes) +
                           " and log_keep " + std::to_string(options.log_keep) +
                           " must not be negative");
  }
  if (auto st = ValidTaskId(options.cgroup_name); !st) {
    return InvalidArgument("cgroup_name '" + options.cgroup_name + "' is not a plain name");
  }
  if (options.uid_count == 0) return InvalidArgument("uid_count is 0");
  auto files = TaskFiles::Open(root_dir);
  if (!files) return tl::unexpected(files.error());
  const std::string root = files->root();
  const std::string tasks = root + "/tasks";

  const bool own_uid = options.own_uid && geteuid() == 0;
  if (own_uid) {
    // Task uids must be able to walk down to their workspaces.
    for (fs::path p = tasks; !p.empty(); p = p.parent_path()) {
      struct stat st {};
      if (stat(p.c_str(), &st) == 0 && !(st.st_mode & S_IXOTH)) {
        char mode[8];
        snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return MakeError(ErrorCode::kFailedPrecondition,
                         "root_dir " + root + ": " + p.string() + " (mode " + mode +
                             ") is not searchable by other users, so tasks could not reach "
                             "their workspaces; chmod o+x it or choose another root_dir");
      }
      if (p == p.parent_path()) break;
    }
  }

  // The mount points of a task's view must exist on the host.
  std::string no_view;
  if (!options.task_view) {
    no_view = "turned off";
  } else if (geteuid() != 0) {
    no_view = "the agent is not root, and only root can make a mount namespace";
  } else if (mkdir(kTaskFilesDir, 0755) != 0 && errno != EEXIST) {
    no_view = std::string("cannot create ") + kTaskFilesDir + ": " + ErrnoText(errno);
  } else {
    struct stat st {};
    if (stat(kTaskHome, &st) != 0 || !S_ISDIR(st.st_mode)) {
      no_view = std::string(kTaskHome) + " is not a directory on this host";
    }
  }

  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) return MakeError(ErrorCode::kInternal, "eventfd: " + ErrnoText(errno));
  Cgroups cgroups =
      Cgroups::Detect(options.use_cgroups, options.cgroup_parent, options.cgroup_name);
  std::unique_ptr<ProcessRuntime> rt(new ProcessRuntime(std::move(*files), std::move(options),
                                                        own_uid, std::move(cgroups), wake,
                                                        std::move(no_view)));
  rt->uid_next_ = rt->options_.uid_base;
  if (const auto text = ReadFile(root + "/uid_next")) {
    try {
      rt->uid_next_ = std::stoull(*text);
    } catch (...) {
      // A damaged counter restarts at the base; uids in use are still skipped.
    }
  }
  rt->monitor_ = std::thread([p = rt.get()] { p->MonitorLoop(); });
  return rt;
}

ProcessRuntime::~ProcessRuntime() {
  {
    std::lock_guard lock(mu_);
    shutting_down_ = true;
  }
  Wake();
  if (monitor_.joinable()) monitor_.join();
  close(wake_fd_);
}

void ProcessRuntime::Wake() {
  const uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof one);
  (void)ignored;
}

std::string ProcessRuntime::TaskDir(const std::string& id) const { return files_.TaskDir(id); }
std::string ProcessRuntime::Workspace(const std::string& id) const { return files_.Workspace(id); }
std::string ProcessRuntime::MetricsPath(const std::string& id) const {
  return files_.MetricsPath(id);
}
std::string ProcessRuntime::LogPath(const std::string& id, LogStream stream) const {
  return files_.LogPath(id, stream);
}

// ---- launch ----

Result<uid_t> ProcessRuntime::AllocateUidLocked() {
  std::set<uid_t> used;
  for (const auto& [id, t] : tasks_) used.insert(t->info.uid);
  for (const auto& [id, uid] : launching_) used.insert(uid);
  const uint64_t base = options_.uid_base;
  const uint64_t count = options_.uid_count;
  const uint64_t from = uid_next_ >= base && uid_next_ < base + count ? uid_next_ - base : 0;
  for (uint64_t i = 0; i < count; ++i) {
    const uid_t cand = static_cast<uid_t>(base + (from + i) % count);
    if (used.count(cand)) continue;
    uid_next_ = cand + 1ull;
    // Only a hint where to start looking next time: a failure to keep it costs nothing.
    static_cast<void>(
        os::WriteFileAtomically(files_.root() + "/uid_next", std::to_string(uid_next_) + "\n"));
    return cand;
  }
  return MakeError(
      ErrorCode::kResourceExhausted,
      "all " + std::to_string(count) + " task uids from " + std::to_string(base) + " are in use");
}

Result<RunningTask> ProcessRuntime::Launch(const LaunchSpec& spec) {
  if (auto st = ValidateLaunchSpec(spec); !st) return tl::unexpected(st.error());
  if (auto st = CheckGpuMemoryShare(spec, options_.gpu_memory); !st) {
    return tl::unexpected(st.error());
  }
  if (!spec.image.empty()) {
    return InvalidArgument("task " + spec.task_id + ": image '" + spec.image +
                           "' needs the docker runtime; the process runtime runs commands");
  }
  uid_t uid = geteuid();
  gid_t gid = getegid();
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
    if (own_uid_) {
      auto u = AllocateUidLocked();
      if (!u) return tl::unexpected(u.error());
      uid = *u;
      gid = *u;
    }
    launching_[spec.task_id] = uid;
  }
  auto task = Spawn(spec, uid, gid);
  std::lock_guard lock(mu_);
  launching_.erase(spec.task_id);
  if (!task) return tl::unexpected(task.error());
  RunningTask info = (*task)->info;
  tasks_[spec.task_id] = std::move(*task);
  Wake();
  return info;
}

Result<std::unique_ptr<ProcessRuntime::Task>> ProcessRuntime::Spawn(const LaunchSpec& spec,
                                                                    uid_t uid, gid_t gid) {
  const std::string& id = spec.task_id;
  const std::string dir = TaskDir(id);
  const std::string ws = Workspace(id);
  const std::string metrics = MetricsPath(id);
  auto task = std::make_unique<Task>();
  TaskCgroup cgroup;
  // Undoes the directory and groups when the launch fails.
  bool launched = false;
  struct Cleanup {
    std::function<void()> fn;
    ~Cleanup() { fn(); }
  } cleanup{[&] {
    if (launched) return;
    cgroup.Remove(kRemoveWaitMs);
    std::error_code ec;
    fs::remove_all(dir, ec);
  }};
  auto fail = [&](const std::string& what, int err) {
    return MakeError(ErrorCode::kInternal, "task " + id + ": " + what + ": " + ErrnoText(err));
  };

  if (Status st = files_.Create(id, spec.workspace_from); !st) {
    launched = st.error().code == ErrorCode::kAlreadyExists;  // then not ours to delete
    return tl::unexpected(st.error());
  }
  if (own_uid_ && (chown(metrics.c_str(), uid, gid) != 0 ||
                   chown(files_.CheckpointDir(id).c_str(), uid, gid) != 0)) {
    return fail("cannot give the metrics file to uid " + std::to_string(uid), errno);
  }
  if (const int err = own_uid_ ? ChownTree(ws, uid, gid) : 0) {
    return fail("cannot give the workspace to uid " + std::to_string(uid), err);
  }

  // In its own mount namespace the task sees its workspace at kTaskHome, a /tmp of its own and
  // its task directory (the metrics file) at kTaskFilesDir; with its own uid, a passwd entry.
  TaskView view;
  if (task_view_) {
    const std::string tmp = dir + "/tmp";
    if (mkdir(tmp.c_str(), 0700) != 0) return fail("cannot create " + tmp, errno);
    if (own_uid_ && chown(tmp.c_str(), uid, gid) != 0) {
      return fail("cannot give " + tmp + " to uid " + std::to_string(uid), errno);
    }
    int err = view.Bind("the workspace", ws, kTaskHome);
    if (!err) err = view.Bind("the task's /tmp", tmp, "/tmp");
    if (!err) err = view.Bind("the task directory", dir, kTaskFilesDir);
    if (err) return fail("cannot open the task's files for its mount namespace", err);
    if (own_uid_) {
      for (const char* file : {"passwd", "group"}) {
        const std::string host = std::string("/etc/") + file;
        const std::string text = ReadFile(host).value_or("");
        const std::string own = dir + "/" + file;
        // Made anew at every launch, so not written durably.
        UniqueFd out(open(own.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
        if (!out.ok()) return fail("cannot create " + own, errno);
        if (const int e = os::WriteAll(
                out.get(), file[0] == 'p' ? TaskPasswd(text, uid, gid) : TaskGroup(text, gid))) {
          return fail("cannot write " + own, e);
        }
        if (const int e = view.Bind("the task's " + host, own, kEtc[file[0] == 'p' ? 0 : 1])) {
          return fail("cannot open " + own, e);
        }
      }
    }
    // Its volumes over their mount points in its workspace, made here (as its uid): below /root.
    for (const LaunchSpec::VolumeBind& v : spec.volumes) {
      std::string point = ws;
      for (const std::string& part :
           SplitTaskPath(v.target.substr(std::string_view(kTaskHome).size() + 1))) {
        point += "/" + part;
        // Never through a link the task made: its workspace is its own.
        struct stat st {};
        if ((mkdir(point.c_str(), 0755) != 0 && errno != EEXIST) ||
            lstat(point.c_str(), &st) != 0) {
          return fail("cannot make the mount point of volume " + v.target, errno);
        }
        if (!S_ISDIR(st.st_mode)) {
          return tl::unexpected(MakeError(ErrorCode::kFailedPrecondition,
                                          "task " + id + ": the mount point of volume " + v.target +
                                              " is not a directory in its workspace (" +
                                              point.substr(ws.size() + 1) + ")"));
        }
        if (own_uid_ && lchown(point.c_str(), uid, gid) != 0) {
          return fail("cannot give the mount point " + v.target + " to uid " + std::to_string(uid),
                      errno);
        }
      }
      if (own_uid_) {
        // A writable volume is the task's: its files become its uid's (a read-only one is only
        // read, which its files' modes allow).
        if (const int e = v.read_only ? 0 : ChownTree(v.host, uid, gid)) {
          return fail("cannot give volume " + v.target + " to uid " + std::to_string(uid), e);
        }
      }
      if (const int e = view.Bind("volume " + v.target, v.host, v.target, v.read_only)) {
        return fail("cannot open the volume at " + v.host, e);
      }
    }
    view.Flatten();
  } else if (!spec.volumes.empty()) {
    return tl::unexpected(
        MakeError(ErrorCode::kFailedPrecondition, "task " + id +
                                                      " mounts volumes, which need its own mount "
                                                      "namespace: " +
                                                      task_view_unavailable_));
  }
  // The interposer of a GPU-memory share: in its mount namespace the task sees only what is
  // bound, so it gets its own link to the library in its task directory.
  std::string cudashim;
  if (options_.gpu_memory.enforce && HoldsGpuMemoryShare(spec)) {
    cudashim = options_.gpu_memory.cudashim;
    if (task_view_) {
      if (Status linked = LinkOrCopy(cudashim, dir + "/" + kCudashimName); !linked) {
        return tl::unexpected(linked.error());
      }
      cudashim = std::string(kTaskFilesDir) + "/" + kCudashimName;
    }
  }
  auto env = task_view_
                 ? TaskEnvironment(spec, kTaskHome,
                                   std::string(kTaskFilesDir) + "/" + kMetricsFileName, cudashim)
                 : TaskEnvironment(spec, ws, metrics, cudashim);
  if (task_view_ && own_uid_) {
    env.try_emplace("USER", kTaskUser);
    env.try_emplace("LOGNAME", kTaskUser);
  }
  auto exe = ResolveCommand(spec.command[0], env.at("PATH"), id);
  if (!exe) return tl::unexpected(exe.error());
  // A path the task sees through its namespace is checked by the exec itself.
  const bool own_path = task_view_ && (InTree(*exe, kTaskHome) || InTree(*exe, "/tmp"));
  if ((*exe)[0] == '/' && !own_path) {
    struct stat st {};
    if (stat(exe->c_str(), &st) != 0) {
      return NotFound("task " + id + ": command '" + *exe + "': " + ErrnoText(errno));
    }
  }

  // Output: FIFOs the task holds open for reading and writing (see the class comment).
  int pipe_w[2] = {-1, -1};
  struct FdCloser {
    std::vector<int*> fds;
    ~FdCloser() {
      for (int* fd : fds) CloseFd(*fd);
    }
  } closer;
  for (int s = 0; s < 2; ++s) {
    const std::string fifo = dir + "/" + kPipeNames[s];
    if (mkfifo(fifo.c_str(), 0600) != 0) return fail("cannot create " + fifo, errno);
    pipe_w[s] = High(open(fifo.c_str(), O_RDWR | O_CLOEXEC));
    closer.fds.push_back(&pipe_w[s]);
    if (pipe_w[s] < 0) return fail("cannot open " + fifo, errno);
    task->fds[s] = open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (task->fds[s] < 0) return fail("cannot open " + fifo, errno);
    fcntl(task->fds[s], F_SETPIPE_SZ, kPipeBytes);  // best effort (pipe-max-size)
  }
  if (Status st = task->logs.Open(files_, id, options_.log_max_bytes, options_.log_keep, 0, 0);
      !st) {
    return tl::unexpected(st.error());
  }
  int devnull = High(open("/dev/null", O_RDONLY | O_CLOEXEC));
  closer.fds.push_back(&devnull);
  if (devnull < 0) return fail("cannot open /dev/null", errno);

  LimitStatus limits;
  cgroup = cgroups_.Create(id, {spec.cpu_milli, spec.memory_mib, spec.pids_max}, &limits);
  std::vector<int> procs;
  struct ProcsCloser {
    std::vector<int>& fds;
    ~ProcsCloser() {
      for (int fd : fds) close(fd);
    }
  } procs_closer{procs};
  for (const std::string& d : cgroup.Dirs()) {
    const int fd = High(open((d + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    if (fd < 0) return fail("cannot open " + d + "/cgroup.procs", errno);
    procs.push_back(fd);
  }
  rlim_t nproc = 0;
  if (spec.pids_max > 0 && !limits.pids && own_uid_) {
    // Without a pids controller the task's own uid makes RLIMIT_NPROC a per-task limit.
    nproc = static_cast<rlim_t>(spec.pids_max);
    limits.pids = true;
    std::string rest;
    size_t start = 0;
    const std::string& ne = limits.not_enforced;
    while (start < ne.size()) {
      size_t end = ne.find("; ", start);
      if (end == std::string::npos) end = ne.size();
      const std::string part = ne.substr(start, end - start);
      if (!part.starts_with("pids:")) rest += (rest.empty() ? "" : "; ") + part;
      start = end + 2;
    }
    limits.not_enforced = rest;
  }

  // argv / envp, prepared before fork.
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> argv;
  std::vector<std::string> args = spec.command;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) return fail("pipe2", errno);
  closer.fds.push_back(&err_pipe[0]);
  closer.fds.push_back(&err_pipe[1]);
  err_pipe[1] = High(err_pipe[1]);

  ChildPlan plan;
  plan.path = exe->c_str();
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.workspace = task_view_ ? kTaskHome : ws.c_str();
  if (task_view_) {
    plan.binds = view.flat.data();
    plan.bind_fds = view.slot_fds.data();
    plan.bind_read_only = view.read_only.data();
    plan.bind_count = view.binds.size();
  }
  plan.stdin_fd = devnull;
  plan.stdout_fd = pipe_w[0];
  plan.stderr_fd = pipe_w[1];
  plan.procs_fds = procs.data();
  plan.procs_count = procs.size();
  plan.error_fd = err_pipe[1];
  plan.set_ids = own_uid_;
  plan.uid = uid;
  plan.gid = gid;
  plan.nproc = nproc;
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  plan.max_fd = nofile.rlim_cur == RLIM_INFINITY
                    ? 65536
                    : static_cast<int>(std::min<rlim_t>(nofile.rlim_cur, 1 << 20));

  // The lease: our end stays with the task's record, the other is the supervisor's.
  int lease[2] = {-1, -1};
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, lease) != 0) {
    return fail("socketpair", errno);
  }
  closer.fds.push_back(&lease[0]);
  closer.fds.push_back(&lease[1]);
  int64_t lease_ms;
  {
    std::lock_guard lock(mu_);
    // Before the first acknowledgement, one lease: the assignment came from the server now.
    lease_ms = fence_.First(spec.restartable, MonotonicMs());
  }
  // Listening before the supervisor runs: an agent restarted at once still finds the socket.
  Result<UniqueFd> listener = ListenForAgents(dir);
  if (!listener) {
    return MakeError(ErrorCode::kInternal, "task " + id + ": " + listener.error().message);
  }
  std::vector<std::string> sup_args =
      SupervisorArgv(kSelfExe, {dir, lease[1], listener->get(), lease_ms, 0, cgroup, "", ""});
  std::vector<char*> sup_argv;
  for (std::string& a : sup_args) sup_argv.push_back(a.data());
  sup_argv.push_back(nullptr);
  const SupervisorPlan sup{kSelfExe, sup_argv.data(), sup_args[kSupervisorPidArg].data(),
                           lease[1], listener->get(), devnull};

  // Signals stay blocked across fork so that no agent handler runs in the child.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = fork();
  if (pid == 0) SupervisorExec(plan, sup);
  const int fork_errno = errno;
  const int64_t started_ms = WallMs();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return fail("fork", fork_errno);
  CloseFd(err_pipe[1]);
  CloseFd(lease[1]);
  pid_t task_pid = 0;
  ssize_t got;
  do {
    got = recv(lease[0], &task_pid, sizeof task_pid, 0);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof task_pid)) task_pid = 0;
  int msg[3] = {0, 0, 0};
  do {
    got = read(err_pipe[0], msg, sizeof msg);
  } while (got < 0 && errno == EINTR);
  if (got <= 0 && task_pid <= 0) {
    got = sizeof msg;
    msg[0] = kStageSupervisor;
    msg[1] = EPIPE;
  }
  if (got > 0) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::string what = std::string(StageName(msg[0])) + (msg[0] == kStageExec ? " " + *exe : "") +
                       (msg[0] == kStageChdir ? " " + std::string(plan.workspace) : "");
    if (msg[0] == kStageMount && msg[2] >= 0 && static_cast<size_t>(msg[2]) < view.binds.size()) {
      const TaskView::Entry& e = view.binds[static_cast<size_t>(msg[2])];
      what += " (" + e.name + " at " + e.target + ")";
    }
    return MakeError(
        msg[0] == kStageExec && msg[1] == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInternal,
        "task " + id + ": " + what + ": " + ErrnoText(msg[1]));
  }

  task->info.task_id = id;
  task->info.pid = task_pid;
  task->info.started_ms = started_ms;
  task->info.uid = uid;
  task->info.gid = gid;
  task->info.own_uid = own_uid_;
  task->info.workspace = ws;
  task->info.limits = limits;
  task->info.cgroup = cgroup;
  task->memory_mib = spec.memory_mib;
  task->restartable = spec.restartable;
  // The task is the supervisor's child, not ours: it may have ended (and its pid been taken)
  // already, so only a process whose parent is the supervisor is it.
  auto is_task = [&](const std::optional<ProcStat>& st) { return st && st->ppid == pid; };
  if (const auto st = ReadProcStat(task_pid); is_task(st)) {
    task->info.start_ticks = st->start_ticks;
    task->pidfd = PidfdOpen(task_pid);
    const auto again = ReadProcStat(task_pid);
    if (!is_task(again) || again->start_ticks != st->start_ticks) CloseFd(task->pidfd);
  }
  task->supervisor_pid = pid;
  if (const auto st = ReadProcStat(pid)) task->supervisor_ticks = st->start_ticks;
  task->supervisor_pidfd = PidfdOpen(pid);
  fcntl(lease[0], F_SETFL, O_NONBLOCK);
  task->lease_fd = std::exchange(lease[0], -1);
  // Without its state file a restarted agent could not find the task: better not to run it.
  if (Status written = WriteStateLocked(*task); !written) {
    SignalTreeLocked(*task, SIGKILL);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return MakeError(written.error().code, "task " + id + ": " + written.error().message);
  }
  launched = true;
  return task;
}

// ---- state files ----

Status ProcessRuntime::WriteStateLocked(const Task& t) {
  json j = {
      {"version", 1},
      {"task_id", t.info.task_id},
      {"pid", t.info.pid},
      {"start_ticks", t.info.start_ticks},
      {"started_ms", t.info.started_ms},
      {"uid", t.info.uid},
      {"gid", t.info.gid},
      {"own_uid", t.info.own_uid},
      {"memory_mib", t.memory_mib},
      {"restartable", t.restartable},
      {"cgroup", CgroupToJson(t.info.cgroup)},
      {"limits",
       {{"cpu", t.info.limits.cpu},
        {"memory", t.info.limits.memory},
        {"pids", t.info.limits.pids},
        {"not_enforced", t.info.limits.not_enforced}}},
      {"log_base",
       {{"stdout", t.logs.base(LogStream::kStdout)}, {"stderr", t.logs.base(LogStream::kStderr)}}},
      {"stop_requested_ms", t.stop_requested ? t.stop_requested_ms : 0},
      {"stop_deadline_ms", t.stop_requested ? t.stop_deadline_ms : 0},
      {"supervisor", {{"pid", t.supervisor_pid}, {"start_ticks", t.supervisor_ticks}}},
  };
  if (t.ended) {
    const ExitReport& r = t.report;
    j["exit"] = {
        {"kind", ExitKindName(r.kind)}, {"exit_code", r.exit_code},       {"signal", r.signal},
        {"finished_ms", r.finished_ms}, {"finish_exact", r.finish_exact}, {"reason", r.reason}};
  }
  return os::WriteFileAtomically(files_.StatePath(t.info.task_id), j.dump(2) + "\n");
}

void ProcessRuntime::SaveStateLocked(Task& t) {
  t.state_trouble.Observe(WriteStateLocked(t), t.info.task_id, "state file", options_.on_warning);
}

// Reads a task's state file. A running task comes back ready to watch; an ended or lost one
// comes back ended with *ended filled in.
Result<std::unique_ptr<ProcessRuntime::Task>> ProcessRuntime::LoadTaskLocked(const std::string& id,
                                                                             ExitReport* ended) {
  auto t = std::make_unique<Task>();
  t->info.task_id = id;
  t->info.workspace = Workspace(id);
  t->info.adopted = true;
  const int64_t now = WallMs();
  auto lost = [&](std::string reason) {
    t->ended = true;
    t->report =
        ExitReport{id, ExitKind::kLost, -1, 0, t->info.started_ms, now, false, std::move(reason)};
  };
  json j;
  const auto text = ReadFile(files_.StatePath(id));
  if (text) j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!text || !j.is_object()) {
    lost(text ? "lost: its state file is damaged" : "lost: the agent stopped while launching it");
    *ended = t->report;
    return t;
  }
  t->info.pid = j.value("pid", 0);
  t->info.start_ticks = j.value("start_ticks", uint64_t{0});
  t->info.started_ms = j.value("started_ms", int64_t{0});
  t->info.uid = j.value("uid", 0u);
  t->info.gid = j.value("gid", 0u);
  t->info.own_uid = j.value("own_uid", false);
  t->memory_mib = j.value("memory_mib", int64_t{0});
  t->restartable = j.value("restartable", false);
  t->info.cgroup = CgroupFromJson(j.value("cgroup", json::object()));
  if (j.contains("limits") && j["limits"].is_object()) {
    const json& l = j["limits"];
    t->info.limits = {l.value("cpu", false), l.value("memory", false), l.value("pids", false),
                      l.value("not_enforced", std::string())};
  }
  int64_t base[2] = {0, 0};
  if (j.contains("log_base") && j["log_base"].is_object()) {
    base[0] = j["log_base"].value("stdout", int64_t{0});
    base[1] = j["log_base"].value("stderr", int64_t{0});
  }
  // A log that cannot be opened is left out: the task is still watched and reported.
  (void)t->logs.Open(files_, id, options_.log_max_bytes, options_.log_keep, base[0], base[1]);
  t->stop_requested_ms = j.value("stop_requested_ms", int64_t{0});
  t->stop_requested = t->stop_requested_ms > 0;
  t->stop_deadline_ms = j.value("stop_deadline_ms", int64_t{0});
  if (j.contains("supervisor") && j["supervisor"].is_object()) {
    t->supervisor_pid = j["supervisor"].value("pid", 0);
    t->supervisor_ticks = j["supervisor"].value("start_ticks", uint64_t{0});
  }

  if (j.contains("exit") && j["exit"].is_object()) {
    const json& e = j["exit"];
    t->ended = true;
    t->report = ExitReport{id,
                           ParseExitKind(e.value("kind", std::string())).value_or(ExitKind::kLost),
                           e.value("exit_code", -1),
                           e.value("signal", 0),
                           t->info.started_ms,
                           e.value("finished_ms", int64_t{0}),
                           e.value("finish_exact", false),
                           e.value("reason", std::string())};
    t->logs.CloseWriters();
    *ended = t->report;
    return t;
  }

  auto watch_output = [&] {
    for (int s = 0; s < 2; ++s) {
      const std::string fifo = TaskDir(id) + "/" + kPipeNames[s];
      t->fds[s] = open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
      if (t->fds[s] >= 0) fcntl(t->fds[s], F_SETPIPE_SZ, kPipeBytes);
    }
    if (t->stop_requested) {
      t->stop_deadline_mono = MonotonicMs() + std::max<int64_t>(0, t->stop_deadline_ms - WallMs());
    }
  };
  const pid_t pid = t->info.pid;
  if (t->supervisor_pid > 0) {
    // Supervised: the task lives as long as its supervisor, who knows how it ended.
    const pid_t sup = t->supervisor_pid;
    if (ProcessAlive(sup, t->supervisor_ticks)) {
      t->supervisor_pidfd = PidfdOpen(sup);
      if (ProcessAlive(sup, t->supervisor_ticks)) {
        if (ProcessAlive(pid, t->info.start_ticks)) t->pidfd = PidfdOpen(pid);
        // Renewed by the monitor from now on; without it the supervisor ends the task when its
        // lease runs out, and its end is reported as that.
        auto conn = ConnectSupervisor(TaskDir(id));
        if (conn) {
          t->lease_fd = *conn;
          // A failure: the supervisor is ending.
          if (const auto ms = fence_.Now(t->restartable, MonotonicMs())) {
            (void)RenewLease(t->lease_fd, std::chrono::milliseconds(*ms));
          }
        } else if (options_.on_warning) {
          options_.on_warning(id + ": " + conn.error().message +
                              "; the task ends when its lease runs out");
        }
        watch_output();
        return t;
      }
      CloseFd(t->supervisor_pidfd);
    }
    t->info.cgroup.Kill(SIGKILL);
    t->ended = true;
    t->report = Concluded(*t, SupervisedEnd(*t, now));
    t->logs.CloseWriters();
    SaveStateLocked(*t);
    *ended = t->report;
    return t;
  }
  if (pid > 0 && ProcessAlive(pid, t->info.start_ticks)) {
    t->pidfd = PidfdOpen(pid);
    // The pidfd may name a newer process if ours ended just now: check again after opening.
    if (ProcessAlive(pid, t->info.start_ticks)) {
      watch_output();
      return t;
    }
    CloseFd(t->pidfd);
  }

  // Gone while the agent was away. Its cgroup's members are the task's, whatever they are now.
  const auto st = ReadProcStat(pid);
  const std::string p = std::to_string(pid);
  if (st && st->start_ticks != t->info.start_ticks) {
    lost("lost: pid " + p + " now belongs to another process (its start time differs); the task " +
         "ended while the agent was not running");
  } else {
    lost("lost: process " + p + " ended while the agent was not running");
  }
  t->info.cgroup.Kill(SIGKILL);
  if (t->info.cgroup.OomKills().value_or(0) > 0) {
    t->report.kind = ExitKind::kOomKilled;
    t->report.reason = ExitReason(t->report, t->memory_mib);
  } else if (t->stop_requested) {
    t->report.kind = ExitKind::kStopped;
    t->report.reason = "stopped";
  }
  t->logs.CloseWriters();
  SaveStateLocked(*t);
  *ended = t->report;
  return t;
}

Result<AdoptResult> ProcessRuntime::Adopt() {
  AdoptResult out;
  auto ids = files_.List();
  if (!ids) return tl::unexpected(ids.error());
  {
    std::lock_guard lock(mu_);
    for (const std::string& id : *ids) {
      if (tasks_.count(id) || launching_.count(id)) continue;
      ExitReport ended;
      auto t = LoadTaskLocked(id, &ended);
      if (!t) continue;
      if ((*t)->ended) {
        out.ended.push_back(ended);
      } else {
        out.running.push_back((*t)->info);
      }
      tasks_[id] = std::move(*t);
    }
  }
  Wake();
  return out;
}

Status ProcessRuntime::Remove(const std::string& task_id) {
  TaskCgroup cgroup;
  {
    std::lock_guard lock(mu_);
    const auto it = tasks_.find(task_id);
    if (it == tasks_.end()) return NotFound("task " + task_id + " is not known");
    if (!it->second->ended) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "task " + task_id + " is running; Stop it and Reap its end first");
    }
    cgroup = it->second->info.cgroup;
    tasks_.erase(it);
  }
  const bool groups_gone = cgroup.Remove(kRemoveWaitMs);
  if (Status st = files_.Delete(task_id); !st) return st;
  if (!groups_gone) {
    return MakeError(ErrorCode::kInternal,
                     "task " + task_id + ": its cgroup still holds processes after SIGKILL");
  }
  return {};
}

// ---- stop, signals ----

void ProcessRuntime::SignalTreeLocked(Task& t, int sig) {
  const auto st = ReadProcStat(t.info.pid);
  // The group leader (alive or a zombie not yet reaped) pins the pid, so -pid is still the
  // task's process group.
  if (st && st->start_ticks == t.info.start_ticks) {
    if (t.pidfd >= 0) {
      PidfdSendSignal(t.pidfd, sig);
    } else {
      kill(t.info.pid, sig);
    }
    kill(-t.info.pid, sig);
  }
  t.info.cgroup.Kill(sig);
}

Status ProcessRuntime::Stop(const std::string& task_id, std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(mu_);
    const auto it = tasks_.find(task_id);
    if (it == tasks_.end()) return NotFound("task " + task_id + " is not known");
    Task& t = *it->second;
    if (t.ended) return {};
    const int64_t g = std::max<int64_t>(0, grace.count());
    const int64_t deadline_mono = MonotonicMs() + g;
    if (!t.stop_requested) {
      t.stop_requested = true;
      t.stop_requested_ms = WallMs();
      t.stop_deadline_ms = t.stop_requested_ms + g;
      t.stop_deadline_mono = deadline_mono;
      SaveStateLocked(t);
      SignalTreeLocked(t, g == 0 ? SIGKILL : SIGTERM);
      if (g == 0) t.kill_sent = true;
    } else if (deadline_mono < t.stop_deadline_mono) {
      t.stop_deadline_mono = deadline_mono;
      t.stop_deadline_ms = WallMs() + g;
      SaveStateLocked(t);
    }
  }
  Wake();
  return {};
}

Status ProcessRuntime::Freeze(const std::string& task_id, bool frozen) {
  std::lock_guard lock(mu_);
  const auto it = tasks_.find(task_id);
  if (it == tasks_.end()) return NotFound("task " + task_id + " is not known");
  const Task& t = *it->second;
  if (t.ended) return MakeError(ErrorCode::kFailedPrecondition, "task " + task_id + " has ended");
  // Long enough for members inside a slow system call (a large write) to reach a stop.
  constexpr int64_t kFreezeWaitMs = 2'000;
  if (t.info.cgroup.Freeze(frozen, kFreezeWaitMs)) return {};
  if (frozen) t.info.cgroup.Freeze(false, 0);  // half frozen: let it go again
  return MakeError(
      ErrorCode::kFailedPrecondition,
      "task " + task_id + " cannot be " + (frozen ? "frozen" : "thawed") + ": " +
          (t.info.cgroup.empty() ? "it has no cgroup"
                                 : "its cgroup has no freezer or did not freeze in time"));
}

Status ProcessRuntime::Signal(const std::string& task_id, pid_t pid, int sig) {
  std::lock_guard lock(mu_);
  const auto it = tasks_.find(task_id);
  if (it == tasks_.end()) return NotFound("task " + task_id + " is not known");
  const Task& t = *it->second;
  if (t.ended) return MakeError(ErrorCode::kFailedPrecondition, "task " + task_id + " has ended");
  // Only a process of the task: a member of its cgroup, or (without one) of its process group.
  bool ours = false;
  if (!t.info.cgroup.empty()) {
    for (pid_t member : t.info.cgroup.Members()) ours = ours || member == pid;
  } else {
    ours = pid > 0 && getpgid(pid) == t.info.pid;
  }
  if (!ours) return NotFound("process " + std::to_string(pid) + " is not task " + task_id + "'s");
  if (kill(pid, sig) != 0) {
    return MakeError(ErrorCode::kInternal,
                     "cannot signal process " + std::to_string(pid) + ": " + ErrnoText(errno));
  }
  return {};
}

std::vector<ExitReport> ProcessRuntime::Reap(std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  if (reports_.empty() && wait.count() > 0) {
    cv_.wait_for(lock, wait, [&] { return !reports_.empty(); });
  }
  return std::exchange(reports_, {});
}

// ---- queries ----

Result<ExecProcess> ProcessRuntime::Exec(const std::string& task_id, const ExecSpec& spec) {
  if (spec.command.empty() || spec.command[0].empty()) {
    return InvalidArgument("command must name a program");
  }
  RunningTask info;
  {
    std::lock_guard lock(mu_);
    const auto it = tasks_.find(task_id);
    if (it == tasks_.end()) return NotFound("task " + task_id + " does not run on this node");
    if (it->second->ended || !ProcessAlive(it->second->info.pid, it->second->info.start_ticks)) {
      return MakeError(ErrorCode::kFailedPrecondition, "task " + task_id + " has ended");
    }
    info = it->second->info;
  }
  const auto fail = [&](const std::string& what, int err) -> tl::unexpected<Error> {
    return MakeError(ErrorCode::kInternal,
                     "task " + task_id + ": exec: " + what + ": " + ErrnoText(err));
  };
  const std::string proc = "/proc/" + std::to_string(info.pid);
  // The task's first process's environment is the task's (GPUPOOL_*, CUDA_VISIBLE_DEVICES, …).
  std::optional<std::string> environ = ReadFile(proc + "/environ");
  if (!environ) return fail("cannot read " + proc + "/environ", errno);
  std::vector<std::string> env_strings;
  std::string search = "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start < environ->size();) {
    size_t end = environ->find('\0', start);
    if (end == std::string::npos) end = environ->size();
    std::string entry = environ->substr(start, end - start);
    start = end + 1;
    if (entry.starts_with("PATH=")) search = entry.substr(5);
    if (spec.tty && !spec.term.empty() && entry.starts_with("TERM=")) continue;
    if (!entry.empty()) env_strings.push_back(std::move(entry));
  }
  if (spec.tty && !spec.term.empty()) env_strings.push_back("TERM=" + spec.term);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.command;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  UniqueFd mount_ns;
  if (task_view_) {
    mount_ns = UniqueFd(High(open((proc + "/ns/mnt").c_str(), O_RDONLY | O_CLOEXEC)));
    if (!mount_ns.ok()) return fail("cannot open " + proc + "/ns/mnt", errno);
  }
  // The pid may have been taken by another process since the check: only the task's is entered.
  if (!ProcessAlive(info.pid, info.start_ticks)) {
    return MakeError(ErrorCode::kFailedPrecondition, "task " + task_id + " has ended");
  }
  std::vector<UniqueFd> procs;
  std::vector<int> procs_fds;
  for (const std::string& d : info.cgroup.Dirs()) {
    procs.emplace_back(High(open((d + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC)));
    if (!procs.back().ok()) return fail("cannot open " + d + "/cgroup.procs", errno);
    procs_fds.push_back(procs.back().get());
  }

  ExecProcess out;
  UniqueFd child_in, child_out, child_err;  // the child's ends
  std::string terminal;
  if (spec.tty && spec.stdio_socket >= 0) {
    return InvalidArgument("a command on a socket has no terminal");
  }
  if (spec.stdio_socket >= 0) {
    child_in = UniqueFd(fcntl(spec.stdio_socket, F_DUPFD_CLOEXEC, 4));
    if (!child_in.ok()) return fail("dup", errno);
    int err[2];
    if (pipe2(err, O_CLOEXEC) != 0) return fail("pipe2", errno);
    out.error = UniqueFd(High(err[0]));
    child_err = UniqueFd(High(err[1]));
  } else if (spec.tty) {
    out.input = UniqueFd(High(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)));
    if (!out.input.ok() || grantpt(out.input.get()) != 0 || unlockpt(out.input.get()) != 0) {
      return fail("cannot open a terminal", errno);
    }
    char name[128];
    if (ptsname_r(out.input.get(), name, sizeof name) != 0) return fail("ptsname", errno);
    terminal = name;
    if (spec.cols > 0 && spec.rows > 0) {
      const winsize size{spec.rows, spec.cols, 0, 0};
      ioctl(out.input.get(), TIOCSWINSZ, &size);
    }
  } else {
    int fds[3][2];
    for (int i = 0; i < 3; ++i) {
      if (pipe2(fds[i], O_CLOEXEC) != 0) return fail("pipe2", errno);
    }
    child_in = UniqueFd(High(fds[0][0]));
    out.input = UniqueFd(High(fds[0][1]));
    out.output = UniqueFd(High(fds[1][0]));
    child_out = UniqueFd(High(fds[1][1]));
    out.error = UniqueFd(High(fds[2][0]));
    child_err = UniqueFd(High(fds[2][1]));
  }
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) return fail("pipe2", errno);
  UniqueFd err_read(err_pipe[0]);
  // Above 3, which fd3 takes in the child before its exec.
  UniqueFd err_write(fcntl(err_pipe[1], F_DUPFD_CLOEXEC, 4));
  close(err_pipe[1]);
  if (!err_write.ok()) return fail("dup", errno);
  UniqueFd fd3;
  if (spec.fd3 >= 0) {
    fd3 = UniqueFd(fcntl(spec.fd3, F_DUPFD_CLOEXEC, 4));
    if (!fd3.ok()) return fail("dup", errno);
  }

  ChildPlan plan;
  plan.path = args[0].c_str();
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.workspace = task_view_ ? kTaskHome : info.workspace.c_str();
  plan.stdin_fd = child_in.get();
  plan.stdout_fd = spec.stdio_socket >= 0 ? child_in.get() : child_out.get();
  plan.stderr_fd = child_err.get();
  plan.fd3 = fd3.get();
  plan.terminal = spec.tty ? terminal.c_str() : nullptr;
  plan.procs_fds = procs_fds.data();
  plan.procs_count = procs_fds.size();
  plan.error_fd = err_write.get();
  plan.set_ids = info.own_uid;
  plan.uid = info.uid;
  plan.gid = info.gid;
  plan.mount_ns_fd = mount_ns.get();
  plan.search = search.c_str();
  plan.supervisor = getpid();  // it dies with the agent, as an ssh session with its sshd
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  plan.max_fd = nofile.rlim_cur == RLIM_INFINITY
                    ? 65536
                    : static_cast<int>(std::min<rlim_t>(nofile.rlim_cur, 1 << 20));

  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = fork();
  if (pid == 0) ChildExec(plan);
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return fail("fork", fork_errno);
  err_write = UniqueFd();
  child_in = UniqueFd();
  child_out = UniqueFd();
  child_err = UniqueFd();
  fd3 = UniqueFd();
  int msg[3] = {0, 0, 0};
  ssize_t got;
  do {
    got = read(err_read.get(), msg, sizeof msg);
  } while (got < 0 && errno == EINTR);
  if (got > 0) {  // it failed before its exec: reap it and say why
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (msg[0] == kStageExec) {
      const std::string what = "command '" + spec.command[0] + "': " + ErrnoText(msg[1]);
      return msg[1] == ENOENT ? NotFound(what) : MakeError(ErrorCode::kPermissionDenied, what);
    }
    return fail(StageName(msg[0]), msg[1]);
  }
  out.done = UniqueFd(PidfdOpen(pid));
  if (!out.done.ok()) {
    const int err = errno;
    kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return fail("pidfd_open", err);
  }
  out.wait = [pid] {
    siginfo_t si{};
    while (waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED) != 0 && errno == EINTR) {
    }
    if (si.si_code == CLD_EXITED) return ExecStatus{si.si_status, 0};
    return ExecStatus{128 + si.si_status, si.si_status};
  };
  out.kill = [pid] {
    kill(-pid, SIGKILL);  // its process group: it is a session leader
    kill(pid, SIGKILL);
  };
  if (spec.tty) {
    out.resize = [master = out.input.get()](uint16_t cols, uint16_t rows) {
      const winsize size{rows, cols, 0, 0};
      ioctl(master, TIOCSWINSZ, &size);  // the master lives as long as the session
    };
  }
  return out;
}

Result<LogChunk> ProcessRuntime::ReadLog(const std::string& task_id, LogStream stream,
                                         int64_t offset, int64_t max_bytes) const {
  Result<RotatingLog::Snapshot> snap = [&] {
    std::lock_guard lock(mu_);
    return LogSnapshotOf(tasks_, task_id, stream);
  }();
  if (!snap) return tl::unexpected(snap.error());
  return RotatingLog::Read(*snap, offset, max_bytes);
}

std::vector<RunningTask> ProcessRuntime::Running() const {
  std::lock_guard lock(mu_);
  return RunningOf(tasks_);
}

std::vector<std::string> ProcessRuntime::Tasks() const {
  std::lock_guard lock(mu_);
  return IdsOf(tasks_);
}

// ---- the monitor ----

void ProcessRuntime::DrainLocked(Task& t, int s, size_t budget) {
  size_t total = 0;
  while (t.fds[s] >= 0 && total < budget) {
    const ssize_t n = read(t.fds[s], buffer_.data(), buffer_.size());
    if (n > 0) {
      bool rotated = false;
      t.logs.Append(static_cast<LogStream>(s),
                    std::string_view(buffer_.data(), static_cast<size_t>(n)), &rotated,
                    t.info.task_id, options_.on_warning);
      if (rotated) SaveStateLocked(t);
      total += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) CloseFd(t.fds[s]);  // every writer closed it: nothing more can come
    break;                          // or EAGAIN: drained for now
  }
}

// The end of a supervised task whose supervisor is gone, noticed at `noticed_ms`: as the
// supervisor recorded it, or lost when it left no record (it was killed itself, and the task by
// its parent-death signal).
ExitReport ProcessRuntime::SupervisedEnd(const Task& t, int64_t noticed_ms) const {
  ExitReport r;
  r.task_id = t.info.task_id;
  r.started_ms = t.info.started_ms;
  r.finished_ms = noticed_ms;
  const auto e = ReadSupervisorExit(TaskDir(t.info.task_id));
  if (!e) {
    r.kind = ExitKind::kLost;
    r.finish_exact = false;
    r.reason = "lost: its supervisor ended without recording how the task ended";
    return r;
  }
  r.kind = e->kind;
  r.exit_code = e->exit_code;
  r.signal = e->signal;
  r.finished_ms = e->finished_ms;
  if (r.kind == ExitKind::kLost) r.reason = SupervisorLostReason(*e, t.restartable);
  return r;
}

// `r` with what the runtime knows beyond the exit status: a stop it asked for, an OOM kill of any
// of the task's processes (that ends the whole task — v2: memory.oom.group; v1: the monitor kills
// the rest —, so it is the outcome even when the first process got to exit 0), and its reason.
ExitReport ProcessRuntime::Concluded(const Task& t, ExitReport r) const {
  const auto oom_kills = t.info.cgroup.OomKills();
  bool oom = t.oom || oom_kills.value_or(0) > 0;
  if (!oom_kills && t.info.limits.memory && r.kind == ExitKind::kSignaled && r.signal == SIGKILL &&
      !t.stop_requested) {
    oom = t.info.cgroup.MemoryLimitHits() > 0;  // kernels that do not count OOM kills
  }
  if (t.stop_requested) {
    r.kind = ExitKind::kStopped;
    r.reason.clear();
  } else if (oom) {
    r.kind = ExitKind::kOomKilled;
    r.reason.clear();
  }
  if (r.reason.empty()) r.reason = ExitReason(r, t.memory_mib);
  return r;
}

// The task's supervisor ended (or, for a task without one, its first process), or may have: a
// pidfd woke us, or polling found it gone; `observed_ms` is when the monitor woke up to it.
void ProcessRuntime::ObserveExitLocked(Task& t, int64_t observed_ms) {
  const bool supervised = t.supervisor_pid > 0;
  if (supervised ? ProcessAlive(t.supervisor_pid, t.supervisor_ticks)
                 : ProcessAlive(t.info.pid, t.info.start_ticks)) {
    return;
  }
  if (supervised && !t.info.adopted) {
    // Ours: reap it (its zombie pins its pid until then, so the pid is still its own).
    siginfo_t reaped{};
    waitid(P_PID, static_cast<id_t>(t.supervisor_pid), &reaped, WEXITED | WNOHANG);
  }
  // Whatever is left of the tree goes with it.
  SignalTreeLocked(t, SIGKILL);
  for (int s = 0; s < 2; ++s) {
    DrainLocked(t, s, SIZE_MAX);
    CloseFd(t.fds[s]);
  }
  t.logs.CloseWriters();
  CloseFd(t.pidfd);
  CloseFd(t.supervisor_pidfd);
  CloseFd(t.lease_fd);

  ExitReport r;
  if (supervised) {
    r = SupervisedEnd(t, observed_ms);
  } else {
    r.task_id = t.info.task_id;
    r.started_ms = t.info.started_ms;
    r.finished_ms = observed_ms;
    r.kind = ExitKind::kUnknown;  // adopted from a runtime without supervisors: not our child
  }
  FinishLocked(t, Concluded(t, std::move(r)));
}

void ProcessRuntime::FinishLocked(Task& t, ExitReport report) {
  t.ended = true;
  t.report = std::move(report);
  SaveStateLocked(t);
  reports_.push_back(t.report);
}

void ProcessRuntime::PollLocked(int64_t now_mono) {
  for (auto& [id, tp] : tasks_) {
    Task& t = *tp;
    if (t.ended) continue;
    if (t.stop_requested && !t.kill_sent && now_mono >= t.stop_deadline_mono) {
      t.kill_sent = true;
      SignalTreeLocked(t, SIGKILL);
    }
  }
  if (now_mono - last_poll_mono_ < options_.poll_interval.count()) return;
  last_poll_mono_ = now_mono;
  for (auto& [id, tp] : tasks_) {
    Task& t = *tp;
    if (t.ended) continue;
    // v1 has no memory.oom.group: when the OOM killer took one process, take the whole task.
    if (const auto kills = t.info.cgroup.OomKills(); kills && *kills > t.oom_kills_seen) {
      t.oom_kills_seen = *kills;
      t.oom = true;
      SignalTreeLocked(t, SIGKILL);
    }
    if (t.ExitFd() < 0) ObserveExitLocked(t, WallMs());
  }
}

void ProcessRuntime::RenewLeasesLocked(int64_t now_mono) {
  if (now_mono < next_renewal_mono_) return;
  next_renewal_mono_ = now_mono + std::max<int64_t>(1, fence_.lease().count() / 4);
  for (auto& [id, t] : tasks_) {
    if (t->ended || t->lease_fd < 0) continue;
    // A supervisor that does not take it is ending: its end is noticed through its pidfd.
    if (const auto ms = fence_.Now(t->restartable, now_mono)) {
      (void)RenewLease(t->lease_fd, std::chrono::milliseconds(*ms));
    }
  }
}

void ProcessRuntime::ServerHeard(std::chrono::steady_clock::time_point sent) {
  const int64_t at =
      std::chrono::duration_cast<std::chrono::milliseconds>(sent.time_since_epoch()).count();
  {
    std::lock_guard lock(mu_);
    if (!fence_.Heard(at)) return;
    next_renewal_mono_ = 0;  // tell the restartable tasks' supervisors now
  }
  Wake();
}

void ProcessRuntime::SetLease(std::chrono::milliseconds lease) {
  {
    std::lock_guard lock(mu_);
    if (!fence_.SetLease(lease)) return;
    next_renewal_mono_ = 0;  // tell every supervisor now
  }
  Wake();
}

std::chrono::milliseconds ProcessRuntime::lease() const {
  std::lock_guard lock(mu_);
  return fence_.lease();
}

void ProcessRuntime::MonitorLoop() {
  struct Ref {
    std::string id;
    int what;  // 0, 1: output stream; 2: pidfd
  };
  std::vector<pollfd> pfds;
  std::vector<Ref> refs;
  while (true) {
    pfds.assign(1, pollfd{wake_fd_, POLLIN, 0});
    refs.assign(1, Ref{"", -1});
    int timeout = -1;
    {
      std::lock_guard lock(mu_);
      if (shutting_down_) return;
      const int64_t now = MonotonicMs();
      for (const auto& [id, t] : tasks_) {
        if (t->ended) continue;
        for (int s = 0; s < 2; ++s) {
          if (t->fds[s] < 0) continue;
          pfds.push_back({t->fds[s], POLLIN, 0});
          refs.push_back({id, s});
        }
        if (t->ExitFd() >= 0) {
          pfds.push_back({t->ExitFd(), POLLIN, 0});
          refs.push_back({id, 2});
        }
        // OOM counters and processes without a pidfd are polled.
        int64_t wait = options_.poll_interval.count();
        if (t->stop_requested && !t->kill_sent) {
          wait = std::min(wait, std::max<int64_t>(0, t->stop_deadline_mono - now));
        }
        if (t->lease_fd >= 0) wait = std::min(wait, std::max<int64_t>(0, next_renewal_mono_ - now));
        if (timeout < 0 || wait < timeout) timeout = static_cast<int>(wait);
      }
    }
    const int n = poll(pfds.data(), pfds.size(), timeout);
    const int64_t woke_ms = WallMs();  // exits seen now ended no later than this
    bool notify = false;
    {
      std::lock_guard lock(mu_);
      if (shutting_down_) return;
      const size_t before = reports_.size();
      if (n > 0) {
        if (pfds[0].revents) {
          uint64_t v;
          ssize_t ignored = read(wake_fd_, &v, sizeof v);
          (void)ignored;
        }
        // Output first, so that a task's last lines are in its log before its end is reported.
        for (int pass = 0; pass < 2; ++pass) {
          for (size_t i = 1; i < pfds.size(); ++i) {
            if (!pfds[i].revents || (refs[i].what == 2) != (pass == 1)) continue;
            const auto it = tasks_.find(refs[i].id);
            if (it == tasks_.end() || it->second->ended) continue;
            if (refs[i].what == 2) {
              ObserveExitLocked(*it->second, woke_ms);
            } else {
              DrainLocked(*it->second, refs[i].what, kDrainBudget);
            }
          }
        }
      }
      PollLocked(MonotonicMs());
      RenewLeasesLocked(MonotonicMs());
      notify = reports_.size() > before;
    }
    if (notify) {
      cv_.notify_all();
      if (options_.on_exit) options_.on_exit();
    }
  }
}

}  // namespace gpupool::agent
