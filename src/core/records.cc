// Names and the legal transitions of the control plane's enums, and a task's runtime (see
// records.h).
#include "core/records.h"

#include <algorithm>
#include <array>

namespace gpupool {
namespace {

template <typename E, size_t N>
std::optional<E> ParseByName(std::string_view name, const std::array<E, N>& all,
                             std::string_view (*name_of)(E)) {
  for (E e : all) {
    if (name_of(e) == name) return e;
  }
  return std::nullopt;
}

constexpr std::array kAllStates = {TaskState::kPending,   TaskState::kScheduled,
                                   TaskState::kStarting,  TaskState::kRunning,
                                   TaskState::kSucceeded, TaskState::kFailed,
                                   TaskState::kStopped,   TaskState::kPreempted,
                                   TaskState::kLost};

}  // namespace

std::string_view TaskStateName(TaskState s) {
  switch (s) {
    case TaskState::kPending: return "pending";
    case TaskState::kScheduled: return "scheduled";
    case TaskState::kStarting: return "starting";
    case TaskState::kRunning: return "running";
    case TaskState::kSucceeded: return "succeeded";
    case TaskState::kFailed: return "failed";
    case TaskState::kStopped: return "stopped";
    case TaskState::kPreempted: return "preempted";
    case TaskState::kLost: return "lost";
  }
  return "unknown";
}

std::optional<TaskState> ParseTaskState(std::string_view name) {
  return ParseByName(name, kAllStates, &TaskStateName);
}

bool IsTerminal(TaskState s) {
  return s == TaskState::kSucceeded || s == TaskState::kFailed || s == TaskState::kStopped ||
         s == TaskState::kLost;
}

bool HoldsResources(TaskState s) {
  return s == TaskState::kScheduled || s == TaskState::kStarting || s == TaskState::kRunning;
}

bool CanTransition(TaskState from, TaskState to) {
  using S = TaskState;
  switch (from) {
    case S::kPending: return to == S::kScheduled || to == S::kStopped;
    case S::kScheduled:
      return to == S::kStarting || to == S::kRunning || to == S::kSucceeded || to == S::kFailed ||
             to == S::kStopped || to == S::kPreempted || to == S::kLost;
    case S::kStarting:
      return to == S::kRunning || to == S::kSucceeded || to == S::kFailed || to == S::kStopped ||
             to == S::kPreempted || to == S::kLost;
    case S::kRunning:
      return to == S::kSucceeded || to == S::kFailed || to == S::kStopped || to == S::kPreempted ||
             to == S::kLost || to == S::kPending;
    case S::kPreempted: return to == S::kPending || to == S::kStopped;
    case S::kLost: return to == S::kPending;
    case S::kSucceeded:
    case S::kFailed:
    case S::kStopped: return false;
  }
  return false;
}

std::string_view RoleName(Role r) { return r == Role::kAdmin ? "admin" : "member"; }

std::optional<Role> ParseRole(std::string_view name) {
  return ParseByName(name, std::array{Role::kAdmin, Role::kMember}, &RoleName);
}

std::string_view NodeStatusName(NodeStatus s) { return s == NodeStatus::kReady ? "ready" : "lost"; }

std::optional<NodeStatus> ParseNodeStatus(std::string_view name) {
  return ParseByName(name, std::array{NodeStatus::kReady, NodeStatus::kLost}, &NodeStatusName);
}

std::string_view LedgerKindName(LedgerKind k) {
  return k == LedgerKind::kCredit ? "credit" : "usage";
}

std::optional<LedgerKind> ParseLedgerKind(std::string_view name) {
  return ParseByName(name, std::array{LedgerKind::kCredit, LedgerKind::kUsage}, &LedgerKindName);
}

TaskRequest PlacementRequest(const Task& task) {
  TaskRequest r = task.request;
  r.disk_gib = task.disk_gib;
  r.image = !task.image.empty();
  for (const VolumeMount& m : task.volumes) r.shared_storage = r.shared_storage || m.shared;
  return r;
}

int64_t TaskRuntimeMs(const Task& task, int64_t now_ms) {
  if (task.started_ms <= 0) return 0;
  if (task.state == TaskState::kRunning) return std::max<int64_t>(0, now_ms - task.started_ms);
  return task.finished_ms > task.started_ms ? task.finished_ms - task.started_ms : 0;
}

}  // namespace gpupool
