// Implementation of the /proc, pidfd and small-file helpers of linux_proc.h.
#include "agent/runtime/linux_proc.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <vector>

namespace gpupool::agent {

std::optional<ProcStat> ParseProcStat(std::string_view text) {
  // "pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime
  //  stime cutime cstime priority nice num_threads itrealvalue starttime …"
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(close + 1);
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < rest.size() && fields.size() < 20) {
    while (i < rest.size() && rest[i] == ' ') ++i;
    const size_t start = i;
    while (i < rest.size() && rest[i] != ' ' && rest[i] != '\n') ++i;
    if (i > start) fields.push_back(rest.substr(start, i - start));
    if (i < rest.size() && rest[i] == '\n') break;
  }
  // fields[0] is field 3 (state); starttime (field 22) is fields[19].
  if (fields.size() < 20 || fields[0].size() != 1) return std::nullopt;
  ProcStat st;
  st.state = fields[0][0];
  auto parse = [](std::string_view s, auto& out) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
  };
  if (!parse(fields[1], st.ppid) || !parse(fields[2], st.pgid) ||
      !parse(fields[19], st.start_ticks)) {
    return std::nullopt;
  }
  return st;
}

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  const auto text = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!text) return std::nullopt;
  return ParseProcStat(*text);
}

bool ProcessAlive(pid_t pid, uint64_t start_ticks) {
  const auto st = ReadProcStat(pid);
  return st && st->start_ticks == start_ticks && st->state != 'Z' && st->state != 'X';
}

int PidfdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

int PidfdSendSignal(int pidfd, int sig) {
#ifdef SYS_pidfd_send_signal
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
#else
  (void)pidfd;
  (void)sig;
  errno = ENOSYS;
  return -1;
#endif
}

std::optional<std::string> ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

int WriteControl(const std::string& path, std::string_view value) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n;
  do {
    n = write(fd, value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  const int err = n < 0 ? errno : (static_cast<size_t>(n) == value.size() ? 0 : EIO);
  close(fd);
  return err;
}

int64_t WallMs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

int64_t MonotonicMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

std::string ErrnoText(int err) {
  char buf[256];
  // GNU strerror_r returns the message (maybe not in buf).
  return std::string(strerror_r(err, buf, sizeof buf));
}

}  // namespace gpupool::agent
