// The control plane's entities as plain data: projects, users, access keys, join tokens, nodes,
// tasks with their lifecycle state, task events, ledger entries and prices. The store persists
// them, the server keeps them in memory, the API renders them. Integers only: time is milliseconds
// since the Unix epoch (UTC), money is micros, resources are milli-CPU, MiB and milli-GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dataset.h"
#include "core/node.h"
#include "core/task.h"
#include "core/volume.h"

namespace gpupool {

// The task lifecycle. pending → scheduled → starting → running → succeeded | failed | stopped;
// preempted goes back to pending, and so does a running task the scheduler moves to another node
// (running → pending); lost when its node disappears. See CanTransition.
enum class TaskState {
  kPending,
  kScheduled,
  kStarting,
  kRunning,
  kSucceeded,
  kFailed,
  kStopped,
  kPreempted,
  kLost,
};
inline constexpr int kTaskStateCount = static_cast<int>(TaskState::kLost) + 1;

std::string_view TaskStateName(TaskState s);
// Parses a lower-case state name ("pending", …); nullopt for anything else.
std::optional<TaskState> ParseTaskState(std::string_view name);
// Terminal states: succeeded, failed, stopped, and lost (which only a restartable task leaves,
// for pending).
bool IsTerminal(TaskState s);
// Whether resources are held on a node in this state (scheduled, starting, running).
bool HoldsResources(TaskState s);
// The legal edges of the state machine:
//   pending   → scheduled | stopped
//   scheduled → starting | running | succeeded | failed | stopped | preempted | lost
//   starting  → running | succeeded | failed | stopped | preempted | lost
//   running   → succeeded | failed | stopped | preempted | lost
//               | pending (moved to another node: queued again to resume from its snapshot)
//   preempted → pending | stopped
//   lost      → pending (a restartable task whose node was lost is queued again)
bool CanTransition(TaskState from, TaskState to);

enum class Role { kAdmin, kMember };
std::string_view RoleName(Role r);
std::optional<Role> ParseRole(std::string_view name);

struct Project {
  std::string id;                 // "p-…", or a name chosen by the admin
  std::string name;
  int64_t max_gpu_milli = -1;     // concurrent GPU milli the project may hold; -1: unlimited
  int64_t max_tasks = -1;         // non-terminal tasks the project may have; -1: unlimited
  int64_t stop_grace_ms = 60'000; // how long running tasks keep going once the balance is gone
  int64_t created_ms = 0;
  // Bytes the server may keep of its tasks' files (inputs, outputs and unfinished uploads of
  // every task not deleted); -1: unlimited.
  int64_t max_storage_bytes = -1;

  friend bool operator==(const Project&, const Project&) = default;
};

// An SSH public key a user registered (gpupool ssh-key add): what lets the user log into the
// tasks of the user's projects over SSH (docs/api.md "SSH").
struct SshKey {
  std::string name;         // unique per user (core/ssh_key.h IsSshKeyName)
  std::string public_key;   // "TYPE BASE64", without a comment
  std::string fingerprint;  // "SHA256:" + unpadded base64 of the key's SHA-256, as ssh-keygen -l
  int64_t created_ms = 0;

  friend bool operator==(const SshKey&, const SshKey&) = default;
};

struct User {
  std::string id;
  std::string name;
  Role role = Role::kMember;
  std::vector<std::string> projects;  // project ids the user belongs to (admins: any)
  int64_t created_ms = 0;
  std::vector<SshKey> ssh_keys;  // in the order added

  friend bool operator==(const User&, const User&) = default;
};

struct AccessKey {
  std::string access_key;     // public id, "AK…"
  std::string user_id;
  std::string sealed_secret;  // the secret key encrypted under the server's master key
  std::string description;
  int64_t created_ms = 0;
  int64_t revoked_ms = 0;     // 0: active
  // An agent credential (minted when an agent joins with a join token) belongs to a node, not
  // to a user: user_id is empty, `node` names the node and `join_token_id` the token it joined
  // with. Both are empty for a user's key.
  std::string node{};
  std::string join_token_id{};

  friend bool operator==(const AccessKey&, const AccessKey&) = default;
};

// A join token lets agents join the pool: each exchanges it once for its node's own credentials
// (an agent AccessKey). The token is "<id>.<secret>"; only a digest of the secret is kept, since
// the server never needs the secret back. Revoking it revokes the credentials minted with it.
struct JoinToken {
  std::string id;             // public id, "JT…"
  std::string secret_digest;  // lower-case hex SHA-256 of the secret
  std::string description;
  std::string created_by;     // the admin's user id
  int64_t created_ms = 0;
  int64_t expires_ms = 0;     // 0: never; joins from this time on are refused
  int64_t revoked_ms = 0;     // 0: active

  friend bool operator==(const JoinToken&, const JoinToken&) = default;
};

// A nonce seen on a signed mutating request, kept until its timestamp leaves the window.
struct Nonce {
  std::string access_key;
  std::string nonce;
  int64_t timestamp_ms = 0;

  friend bool operator==(const Nonce&, const Nonce&) = default;
};

enum class NodeStatus { kReady, kLost };
std::string_view NodeStatusName(NodeStatus s);
std::optional<NodeStatus> ParseNodeStatus(std::string_view name);

struct NodeInfo {
  Node node;                  // capacity, GPUs, labels, cordon flag (free fields are ignored:
                              // what is free follows from the tasks bound to it)
  NodeStatus status = NodeStatus::kReady;
  bool draining = false;      // cordoned and its tasks are being stopped
  int64_t registered_ms = 0;
  int64_t last_heartbeat_ms = 0;

  friend bool operator==(const NodeInfo&, const NodeInfo&) = default;
};

// Where a bound task sits: the node and the exact GPUs / MIG instance.
struct TaskPlacement {
  std::string node;
  std::vector<int> gpus;
  int32_t milli_per_gpu = 0;
  int64_t gpu_mem_mib = 0;
  int mig_profile = -1;        // index into the GPU model's MIG profiles; -1: not MIG
  int mig_start = -1;
  // A distributed job's member: its job's MASTER_PORT on member 0's node for this run
  // (core/task_job.h; the same in every member); 0: none.
  int32_t rendezvous_port = 0;

  friend bool operator==(const TaskPlacement&, const TaskPlacement&) = default;
};

struct Task {
  std::string id;              // "t-<seq>"
  int64_t seq = 0;             // submission order: the queue order among equal priorities
  std::string project_id;
  std::string user_id;
  std::string name;
  TaskRequest request;
  std::string image;           // empty: a plain command
  std::vector<std::string> command;
  int64_t disk_gib = 0;
  int64_t max_runtime_ms = 0;  // 0: no limit
  std::string stop_when;       // a condition on its reported metrics (core/stop_condition.h)
  bool restartable = false;    // re-queued when its node is lost
  std::vector<int32_t> ports;  // TCP ports it serves through the gateway (core/task_ports.h)
  std::vector<VolumeMount> volumes;  // the project's volumes it mounts (core/volume.h)
  std::vector<DatasetMount> datasets;  // the datasets it mounts read-only (core/dataset.h)
  // Submitted on hold: pending but kept out of the scheduler's queue until released (so that its
  // inputs can be uploaded first). Only a pending task is held; leaving pending clears it.
  bool held = false;
  // An element of a job array (core/task_array.h): the array's id ("a-<seq>"; empty: not in one),
  // the element's index (its GPUPOOL_ARRAY_INDEX) and the array's %N (at most that many of its
  // elements hold resources at once; 0: no limit).
  std::string array_id;
  int64_t array_index = 0;
  int32_t array_limit = 0;

  TaskState state = TaskState::kPending;
  std::string reason;          // why it is in this state (people read it)
  std::optional<TaskPlacement> placement;  // where it is (or last was) bound
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  int64_t bound_ms = 0;        // resources reserved since (0: not bound); metering starts here
  int64_t started_ms = 0;      // the agent's (or the scheduler's) start time of the current run
  int64_t finished_ms = 0;
  int64_t billed_until_ms = 0; // usage up to here is in the ledger (never billed twice)
  int exit_code = 0;
  int preemptions = 0;
  // A distributed job's member ended (or re-queued) because another member's run ended: that
  // member's task id (core/task_job.h); empty when it ended by itself.
  std::string ended_by;
  // Snapshots (core/snapshot.h, docs/snapshots.md). While it runs its agent snapshots its
  // workspace every snapshot_every_ms (0: only when asked, and before it stops it for a stop,
  // preemption or drain); first, when the task said it handles it, the agent sends
  // checkpoint_signal (a signal's name; empty: SIGUSR1) and waits up to checkpoint_timeout_ms
  // (0: kDefaultCheckpointTimeoutMs) for the task to checkpoint.
  int64_t snapshot_every_ms = 0;
  std::string checkpoint_signal;
  int64_t checkpoint_timeout_ms = 0;
  int32_t run = 0;          // its runs so far: each binding starts the next (the first is 1)
  std::string resume_from;  // the snapshot its next run (or this one) starts from; empty: none
  // Its last interruption (preemption, drain, lost node, stop): the work done after the
  // snapshot it resumes from, which its next run does again.
  int64_t work_lost_ms = 0;

  friend bool operator==(const Task&, const Task&) = default;
};

inline constexpr int64_t kDefaultCheckpointTimeoutMs = 30'000;

// Time actually run: the current (or last) run's start to its end, or to `now_ms` while it runs;
// 0 when it never started (or a new run has not started yet).
int64_t TaskRuntimeMs(const Task& task, int64_t now_ms);

// What the scheduler places and reserves for the task: its request with the task's disk_gib,
// whether it runs an image and whether it mounts a shared volume (kept beside the request in the
// task's record). The node of a node-local volume it mounts (TaskRequest::node) is the control
// plane's to add: it is the volume's record's.
TaskRequest PlacementRequest(const Task& task);

struct TaskEvent {
  std::string task_id;
  int64_t time_ms = 0;
  TaskState from = TaskState::kPending;
  TaskState to = TaskState::kPending;
  std::string reason;

  friend bool operator==(const TaskEvent&, const TaskEvent&) = default;
};

// One administrative change, as the audit log keeps it: who (the user and the key the request
// was signed with), when, what (`action`, e.g. "user.create"; `target`, the entity's id; `detail`,
// the values set). `seq` orders the log (1, 2, …, drawn by the server); entries are only added.
struct AuditEntry {
  int64_t seq = 0;
  int64_t time_ms = 0;
  std::string actor;       // user id
  std::string access_key;  // the key it was signed with (a console session's key too)
  std::string action;
  std::string target;
  std::string detail;

  friend bool operator==(const AuditEntry&, const AuditEntry&) = default;
};

enum class LedgerKind { kCredit, kUsage };
std::string_view LedgerKindName(LedgerKind k);
std::optional<LedgerKind> ParseLedgerKind(std::string_view name);

// One line of a project's account. `key` is unique: writing an entry whose key exists is a no-op,
// which makes metering idempotent (usage keys are "<task>:<from_ms>").
struct LedgerEntry {
  std::string key;
  std::string project_id;
  std::string task_id;         // usage entries
  LedgerKind kind = LedgerKind::kUsage;
  int64_t amount_micros = 0;   // > 0; credits add to the balance, usage subtracts
  int64_t from_ms = 0;         // usage interval [from_ms, to_ms)
  int64_t to_ms = 0;
  std::string detail;          // "A100-80GB 1000 milli, 16000 cpu milli, 65536 MiB, 60 s"
  int64_t created_ms = 0;

  friend bool operator==(const LedgerEntry&, const LedgerEntry&) = default;
};

// One version of a price: from `effective_ms` on, `resource` costs `micros_per_hour` per unit
// ("gpu:A100-80GB" per whole GPU, "gpu:*" any other GPU model, "cpu" per core, "memory" per GiB).
// Metering charges per second (see meter/).
struct Price {
  std::string resource;
  int64_t micros_per_hour = 0;
  int64_t effective_ms = 0;

  friend bool operator==(const Price&, const Price&) = default;
};

}  // namespace gpupool
