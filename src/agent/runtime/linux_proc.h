// Small Linux process helpers for the task runtime: /proc/<pid>/stat (state and start time, the
// guard against pid reuse), pidfds (Linux >= 5.3), file reads and writes as single system calls
// (what cgroup files need), and the wall clock in milliseconds.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpupool::agent {

struct ProcStat {
  char state = '?';  // R, S, D, Z (zombie), X (dead), …
  pid_t ppid = 0;
  pid_t pgid = 0;
  uint64_t start_ticks = 0;  // field 22: clock ticks after boot when the process started
};

// Parses the text of /proc/<pid>/stat; the command name may hold spaces and parentheses.
std::optional<ProcStat> ParseProcStat(std::string_view text);
// Reads /proc/<pid>/stat; nullopt when the process does not exist.
std::optional<ProcStat> ReadProcStat(pid_t pid);
// Whether `pid` is a live (not zombie) process that started at `start_ticks`.
bool ProcessAlive(pid_t pid, uint64_t start_ticks);

// pidfd_open(2); -1 with errno set where the kernel lacks it or the process is gone.
int PidfdOpen(pid_t pid);
// pidfd_send_signal(2); -1 with errno set on failure.
int PidfdSendSignal(int pidfd, int sig);

// The whole file (small files: /proc, cgroup controls, state files); nullopt when unreadable.
std::optional<std::string> ReadFile(const std::string& path);
// Writes `value` with one write(2) to an existing file (cgroup control files need that).
// Returns 0 or the errno of the failure.
int WriteControl(const std::string& path, std::string_view value);

// Wall-clock milliseconds since the Unix epoch (what metering reports).
int64_t WallMs();
// Monotonic milliseconds (deadlines).
int64_t MonotonicMs();

// "No such file or directory" for an errno value.
std::string ErrnoText(int err);

}  // namespace gpupool::agent
