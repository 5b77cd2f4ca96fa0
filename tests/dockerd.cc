// Implementation of dockerd.h: the ustar writer, starting, waiting for and stopping a private
// dockerd, and building the busybox test image through the Engine API.
#include "tests/dockerd.h"

#include <elf.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "agent/runtime/docker_api.h"
#include "agent/runtime/unix_http.h"
#include "core/tar.h"

namespace gpupool::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

constexpr milliseconds kStartTimeout{60'000};
constexpr milliseconds kStopTimeout{30'000};
// Applets the tests' scripts use, as links to /bin/busybox.
constexpr const char* kApplets[] = {"sh",    "echo", "cat",  "sleep",  "tail", "ls",   "mkdir",
                                    "test",  "[",    "true", "false",  "id",   "env",  "head",
                                    "touch", "wc",   "pwd",  "printf", "dd",   "kill", "rm"};

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Tail(const std::string& text, size_t n) {
  return text.size() <= n ? text : "…" + text.substr(text.size() - n);
}

// Waits up to `ms` for the process behind `pidfd` to end; true when it has.
bool WaitExit(int pidfd, milliseconds ms) {
  pollfd p{pidfd, POLLIN, 0};
  return poll(&p, 1, static_cast<int>(ms.count())) > 0;
}

std::string FindDockerd() {
  for (const char* p : {"/usr/sbin/dockerd", "/usr/bin/dockerd", "/usr/local/bin/dockerd"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

// Everything mounted at or under `dir`, deepest first.
std::vector<std::string> MountsUnder(const std::string& dir) {
  std::vector<std::string> out;
  std::istringstream in(ReadText("/proc/self/mountinfo"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, mount_point;
    fields >> id >> parent >> dev >> root >> mount_point;
    if (mount_point == dir || mount_point.rfind(dir + "/", 0) == 0) out.push_back(mount_point);
  }
  std::sort(out.begin(), out.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return out;
}

// Whether `binary` is a 64-bit ELF executable that names a program interpreter (dynamically
// linked: it could not run in an image with nothing else in it).
bool NeedsInterpreter(const std::string& binary) {
  Elf64_Ehdr eh;
  if (binary.size() < sizeof eh) return true;
  std::memcpy(&eh, binary.data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) {
    return true;
  }
  for (size_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    const size_t at = eh.e_phoff + i * eh.e_phentsize;
    if (at + sizeof ph > binary.size()) return true;
    std::memcpy(&ph, binary.data() + at, sizeof ph);
    if (ph.p_type == PT_INTERP) return true;
  }
  return false;
}

}  // namespace

// ---- tar ----

void TarWriter::Add(const std::string& name, char type, const std::string& data, unsigned mode,
                    const std::string& link) {
  Result<std::string> header =
      TarHeader(TarEntry{name, type, mode, static_cast<int64_t>(data.size()), 1'700'000'000, link});
  if (!header) std::abort();  // the test's own names fit
  out_ += *header + data + std::string(TarPadding(static_cast<int64_t>(data.size())), '\0');
}

void TarWriter::AddDirectory(const std::string& name, unsigned mode) {
  Add(name.back() == '/' ? name : name + "/", '5', "", mode, "");
}
void TarWriter::AddFile(const std::string& name, const std::string& data, unsigned mode) {
  Add(name, '0', data, mode, "");
}
void TarWriter::AddSymlink(const std::string& name, const std::string& target) {
  Add(name, '2', "", 0777, target);
}
std::string TarWriter::Finish() const { return out_ + TarEnd(); }

// ---- dockerd ----

std::unique_ptr<Dockerd> Dockerd::Start(std::string* why_not) {
  const std::string binary = FindDockerd();
  if (binary.empty()) {
    *why_not = "dockerd is not installed (Debian package docker.io; scripts/install-deps.sh)";
    return nullptr;
  }
  if (geteuid() != 0) {
    *why_not = "dockerd needs root";
    return nullptr;
  }
  std::unique_ptr<Dockerd> d(new Dockerd());
  std::string tmpl = "/tmp/gpupool-dockerd-XXXXXX";  // short: the socket path is limited
  if (mkdtemp(tmpl.data()) == nullptr) {
    *why_not = "mkdtemp: " + std::string(strerror(errno));
    return nullptr;
  }
  d->dir_ = tmpl;
  d->socket_ = d->dir_ + "/docker.sock";
  d->cgroup_parent_ = "/gpupool-" + fs::path(d->dir_).filename().string();
  const std::string log = d->dir_ + "/dockerd.log";
  std::vector<std::string> args = {binary,
                                   "--data-root=" + d->dir_ + "/data",
                                   "--exec-root=" + d->dir_ + "/exec",
                                   "--pidfile=" + d->dir_ + "/dockerd.pid",
                                   "--host=unix://" + d->socket_,
                                   "--iptables=false",
                                   "--ip-masq=false",
                                   "--bridge=none",
                                   "--userland-proxy=false",
                                   "--cgroup-parent=" + d->cgroup_parent_};
  d->pid_ = fork();
  if (d->pid_ < 0) {
    *why_not = "fork: " + std::string(strerror(errno));
    return nullptr;
  }
  if (d->pid_ == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    setsid();  // not in the test's process group
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  d->pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, d->pid_, 0));

  agent::UnixHttpOptions o;
  o.timeout = milliseconds(2000);
  const agent::UnixHttpClient client(d->socket_, o);
  const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  while (true) {
    auto ping = client.Call("GET", "/_ping");
    if (ping && ping->status == 200) return d;
    // The daemon dying ends the wait at once; otherwise the socket is tried again shortly.
    if (WaitExit(d->pidfd_, milliseconds(50))) {
      int status = 0;
      waitpid(d->pid_, &status, 0);
      d->pid_ = -1;
      *why_not =
          "dockerd exited (status " + std::to_string(status) + "): " + Tail(ReadText(log), 1500);
      return nullptr;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      *why_not = "dockerd did not answer /_ping within 60 s (" +
                 (ping ? "HTTP " + std::to_string(ping->status) : ping.error().message) +
                 "): " + Tail(ReadText(log), 1500);
      return nullptr;  // the destructor stops it
    }
  }
}

Dockerd::~Dockerd() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    if (pidfd_ < 0 || !WaitExit(pidfd_, kStopTimeout)) kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (pidfd_ >= 0) close(pidfd_);
  if (dir_.empty()) return;
  // The containers' parent group, in every hierarchy (v1) or the unified one (v2), now empty.
  std::error_code ec;
  for (const auto& h : fs::directory_iterator("/sys/fs/cgroup", ec)) {
    rmdir((h.path().string() + cgroup_parent_).c_str());
  }
  rmdir(("/sys/fs/cgroup" + cgroup_parent_).c_str());
  for (const std::string& m : MountsUnder(dir_)) umount2(m.c_str(), MNT_DETACH);
  fs::remove_all(dir_, ec);
}

Status Dockerd::BuildTestImage(const std::string& tag) const {
  std::string busybox;
  for (const char* p : {"/bin/busybox", "/usr/bin/busybox"}) {
    if (access(p, X_OK) == 0) {
      busybox = p;
      break;
    }
  }
  if (busybox.empty()) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "no busybox (Debian package busybox-static; scripts/install-deps.sh)");
  }
  const std::string binary = ReadText(busybox);
  if (NeedsInterpreter(binary)) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     busybox + " is not a static 64-bit executable; install busybox-static");
  }
  TarWriter tar;
  tar.AddFile("Dockerfile",
              "FROM scratch\n"
              "COPY rootfs/ /\n"
              "CMD [\"/bin/sh\", \"-c\", \"echo default command\"]\n");
  tar.AddDirectory("rootfs");
  tar.AddDirectory("rootfs/bin");
  tar.AddDirectory("rootfs/tmp", 01777);
  tar.AddFile("rootfs/bin/busybox", binary, 0755);
  for (const char* applet : kApplets)
    tar.AddSymlink(std::string("rootfs/bin/") + applet, "busybox");

  agent::UnixHttpOptions o;
  o.timeout = milliseconds(120'000);
  auto r = agent::UnixHttpClient(socket_, o)
               .Call("POST", std::string(agent::docker::kApi) + "/build?rm=1&forcerm=1&t=" + tag,
                     tar.Finish(), "application/x-tar");
  if (!r) return tl::unexpected(r.error());
  if (r->status != 200) {
    return tl::unexpected(agent::docker::ResponseError("building " + tag, *r));
  }
  if (auto error = agent::docker::ProgressError(r->body)) {
    return MakeError(ErrorCode::kInternal, "building " + tag + ": " + *error);
  }
  return {};
}

}  // namespace gpupool::testing
