// The per-task supervisor of the process runtime: a small process between the agent and each
// task, so that a task never outlives its agent unsupervised. It is the task's parent (the task
// gets SIGKILL as its parent-death signal, so it cannot outlive the supervisor either), holds a
// lease from the agent over a unix socket, and when the agent is gone (or silent) for longer than
// the lease it kills the task's whole tree (its cgroup, frozen first, and its process group),
// records why, and exits. A restarted agent re-adopts within the lease by connecting to the
// supervisor's socket in the task directory. Whenever the task ends, the supervisor records its
// exit status in the task directory (durably) before it exits, so that an agent that was away
// still reports the real status.
//
// The supervisor is the agent's own binary again: the process runtime forks, the child forks the
// task and then executes /proc/self/exe with kSupervisorFlag and the arguments below. Every
// binary that links the process runtime (`gpupool`, the tests) runs the supervisor before main()
// when started that way (a static initializer of task_supervisor.cc), so no main() has to know.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/runtime/cgroup.h"
#include "agent/runtime/task_runtime.h"
#include "core/result.h"

namespace gpupool::agent {

// argv[1] of a supervisor; no command of the binary starts with it.
inline constexpr const char* kSupervisorFlag = "--gpupool-task-supervisor";
// In the task directory: the supervisor's socket (0600, the agent's uid) and its record of the
// task's end.
inline constexpr const char* kSupervisorSocketName = "supervisor.sock";
inline constexpr const char* kSupervisorExitName = "supervisor.exit";

// What the supervisor is started with. The agent renews the lease by sending an int64_t (native
// byte order): the lease in milliseconds from the moment it arrives.
struct SupervisorArgs {
  std::string task_dir;
  int lease_fd = -1;     // the agent's connection, inherited
  int64_t lease_ms = 0;  // the first lease, from the supervisor's start
  pid_t task_pid = 0;
  TaskCgroup cgroup;
};
// The argv of a supervisor (argv[0] is `exe`), and back; the parse names what is wrong.
std::vector<std::string> SupervisorArgv(const std::string& exe, const SupervisorArgs& args);
Result<SupervisorArgs> ParseSupervisorArgv(const std::vector<std::string>& argv);
// Where SupervisorArgv puts the task's pid, which the forked child fills in before it executes
// the supervisor (the argument is kPidWidth characters of room).
inline constexpr size_t kSupervisorPidArg = 4;
inline constexpr size_t kPidWidth = 20;

// Runs the supervisor until the task has ended and its end is recorded; the exit status of the
// supervisor process (0, or 2 for bad arguments).
int RunTaskSupervisor(const SupervisorArgs& args);

// How the task ended, as the supervisor recorded it. kind is kExited, kSignaled or kLost (the
// lease ran out and the supervisor killed it: lease_ms says which lease).
struct SupervisorExit {
  ExitKind kind = ExitKind::kExited;
  int exit_code = -1;
  int signal = 0;
  int64_t finished_ms = 0;
  int64_t lease_ms = 0;
  friend bool operator==(const SupervisorExit&, const SupervisorExit&) = default;
};
Status WriteSupervisorExit(const std::string& task_dir, const SupervisorExit& exit);
// nullopt when there is no record (the supervisor still runs, or was killed itself) or it is
// damaged.
std::optional<SupervisorExit> ReadSupervisorExit(const std::string& task_dir);

// Connects to the supervisor of the task in `task_dir` (a non-blocking, close-on-exec socket);
// the errno of the failure otherwise.
Result<int> ConnectSupervisor(const std::string& task_dir);
// Sends one lease renewal without blocking; false when the supervisor is gone or not reading.
bool RenewLease(int fd, std::chrono::milliseconds lease);

}  // namespace gpupool::agent
