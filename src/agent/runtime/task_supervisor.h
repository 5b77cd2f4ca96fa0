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
// A container (docker runtime) has a supervisor too, which holds the same lease over the same
// socket but is not the container's parent: it watches the container through the Docker Engine
// API, and when the lease runs out it records the task lost, kills the container (POST
// /containers/{id}/kill; the record first, so that whoever sees the end also sees why) and waits
// until it has stopped. A container that ends by itself needs no record (Docker keeps its exit
// status): the supervisor just exits.
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
#include "core/unique_fd.h"

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
  int lease_fd = -1;  // the agent's connection, inherited
  // The socket a restarted agent connects to (ListenForAgents), made by the agent before the
  // supervisor starts so that it is there as soon as the task is, inherited; -1: the supervisor
  // makes it when it starts.
  int listen_fd = -1;
  int64_t lease_ms = 0;  // the first lease, from the supervisor's start
  pid_t task_pid = 0;    // a process task's (0 for a container)
  TaskCgroup cgroup;
  // A container's supervisor: its id and the Docker Engine's socket.
  std::string container;
  std::string docker_socket;
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

// The listening socket of a task's supervisor, kSupervisorSocketName in `task_dir` (only the
// agent's uid and root may renew through it); the errno of the failure otherwise. Safe in a
// threaded agent (no umask).
Result<UniqueFd> ListenForAgents(const std::string& task_dir);
// Connects to the supervisor of the task in `task_dir` (a non-blocking, close-on-exec socket);
// the errno of the failure otherwise.
Result<int> ConnectSupervisor(const std::string& task_dir);
// Sends one lease renewal without blocking; false when the supervisor is gone or not reading.
bool RenewLease(int fd, std::chrono::milliseconds lease);

// The reason of a task its supervisor recorded lost (kLost): for a restartable task the lease
// fenced by the server's acknowledgements (LeaseFence), else the agent's absence.
std::string SupervisorLostReason(const SupervisorExit& exit, bool restartable);

// The agent's side of the leases: what a task's supervisor may be told now. A task that is not
// restartable gets the lease; a restartable one (the server runs it again elsewhere once it
// loses the node) only what is left of the lease after the send time of the last heartbeat the
// server acknowledged (Heard), so that a network cut, which leaves the agent alive and renewing,
// still ends it before the server gives up on the node. Not thread-safe (the runtime's lock).
class LeaseFence {
 public:
  explicit LeaseFence(std::chrono::milliseconds lease) : lease_(lease) {}
  std::chrono::milliseconds lease() const { return lease_; }
  // False when unchanged (or below 1 ms, which is ignored).
  bool SetLease(std::chrono::milliseconds lease);
  // A heartbeat sent at `sent_mono_ms` was acknowledged; false when one sent later already was.
  bool Heard(int64_t sent_mono_ms);
  // Whether the server acknowledged any heartbeat yet.
  bool heard() const { return heard_mono_ >= 0; }
  // The lease for a supervisor now (ms from now); nullopt for a restartable task when no
  // heartbeat was acknowledged yet or that lease is over.
  std::optional<int64_t> Now(bool restartable, int64_t now_mono_ms) const;
  // The first lease of a supervisor started now: as Now, but a restartable task launched before
  // any acknowledgement gets one lease (its assignment came from the server just now), and one
  // whose fenced lease is over gets 1 ms.
  int64_t First(bool restartable, int64_t now_mono_ms) const;

 private:
  std::chrono::milliseconds lease_;
  int64_t heard_mono_ = -1;  // when the last acknowledged heartbeat was sent; -1: none
};

}  // namespace gpupool::agent
