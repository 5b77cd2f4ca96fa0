// ControlPlane: the server's services behind one interface — tasks, nodes (user- and agent-facing),
// projects, users, access keys, billing and prices — with tenancy checks. The API layer maps HTTP
// onto these calls; nothing here knows about HTTP or JSON. Reads answer from memory at once;
// writes answer through a callback once the change is durable (group commit), so an I/O thread
// never waits on the disk.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/records.h"
#include "core/result.h"
#include "core/stop_condition.h"
#include "server/metric_history.h"

namespace gpupool::server {

template <typename T>
using Done = std::function<void(Result<T>)>;
using DoneStatus = std::function<void(Status)>;

// Who makes a request (resolved by the API from the access key).
struct Caller {
  std::string user_id;
  std::string access_key;
  Role role = Role::kMember;
  std::vector<std::string> projects;
  // Set for a node's own agent credential (see JoinNode): it acts only for this node, through the
  // agent routes. Such a caller is no user: user_id is "agent:<node>" (no user id has a ':'),
  // its role member and its projects none.
  std::string agent_node{};

  bool IsAdmin() const { return role == Role::kAdmin; }
  bool IsAgent() const { return !agent_node.empty(); }
  bool InProject(const std::string& project_id) const;  // admins are in every project
};

// What an access key resolves to; `secret` is the plain secret, for signature checks only.
struct KeyGrant {
  Caller caller;
  std::string secret;
};

struct TaskSpec {
  std::string name;
  std::string project_id;  // empty: the caller's only project (an error when it has several)
  TaskRequest request;
  std::string image;
  std::vector<std::string> command;
  int64_t disk_gib = 0;
  int64_t max_runtime_ms = 0;
  std::string stop_when;
  bool restartable = false;
  bool hold = false;  // created held: not scheduled until ReleaseTask
};

struct TaskFilter {
  std::string project_id;         // empty: every project the caller sees
  std::vector<TaskState> states;  // empty: any
  std::string node;               // empty: any
  int64_t after_seq = 0;          // pagination cursor: tasks with seq > after_seq
  int limit = 100;                // 1..1000
};

struct TaskPage {
  std::vector<Task> tasks;     // ascending seq
  int64_t next_after_seq = 0;  // 0: no more pages
};

// A task with what the scheduler says of it while it waits.
struct TaskView {
  Task task;
  int64_t queue_position = 0;  // 1-based among queued tasks in scheduling order; 0: not queued
                               // (not pending, or held)
  std::string pending_reason;  // the last scheduling pass's one-line reason
  std::vector<std::pair<std::string, int>> pending_nodes;  // (why a node rejected it, how many)
};

struct NodeView {
  NodeInfo info;
  std::vector<std::string> tasks;  // ids of the tasks bound to it
  int64_t cpu_free_milli = 0;
  int64_t memory_free_mib = 0;
  int64_t gpu_milli_free = 0;
};

// What an agent must run: the tasks bound to its node (scheduled, starting, running), and a
// version that grows whenever that set changes.
struct NodeAssignments {
  std::string node;
  int64_t version = 0;
  std::vector<Task> tasks;
};

struct NewAccessKey {
  AccessKey key;
  std::string secret;  // shown once, at creation
};

// A join token as admins see it: never its secret, nor the secret's digest.
struct JoinTokenView {
  JoinToken token;                 // secret_digest empty
  bool expired = false;            // its expiry has passed (joins are refused)
  std::vector<std::string> nodes;  // the nodes that joined with it, sorted
};

struct NewJoinToken {
  JoinTokenView view;
  std::string token;  // "<id>.<secret>": what agents join with; shown once, at creation
};

// What an agent gets when its node joins: the node's own access key and secret (shown once).
struct AgentCredentials {
  AccessKey key;  // node and join_token_id set, sealed_secret empty
  std::string secret;
};

struct Balance {
  std::string project_id;
  int64_t balance_micros = 0;
  int64_t credits_micros = 0;
  int64_t usage_micros = 0;
};

struct TaskCost {
  std::string task_id;
  int64_t cost_micros = 0;  // billed so far
  int64_t billed_until_ms = 0;
  std::vector<LedgerEntry> entries;
};

struct Statement {
  std::string project_id;
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  int64_t credits_micros = 0;
  int64_t usage_micros = 0;
  // Usage per task in the period: (task id, micros), descending cost.
  std::vector<std::pair<std::string, int64_t>> by_task;
};

// --- telemetry: what agents ship (usage sampled at 1 Hz, task output) and users read ---

// Usage over the second before time_ms, gauges in usage:: order (cpu_milli, memory_mib,
// gpu_util_pct, gpu_mem_mib; kUnknown where not measured): a task's (its cgroup, its GPUs) or a
// node's (the machine, all its GPUs).
using UsageSample = Sample<usage::kGauges>;
using UsagePoint = HistoryPoint<usage::kGauges>;
using GpuSample = Sample<gpu_usage::kGauges>;
using GpuPoint = HistoryPoint<gpu_usage::kGauges>;

struct NodeSample {
  UsageSample usage;
  std::vector<GpuSample> gpus;  // by GPU index (each with the node sample's time)
};

// What a task writes that the pool keeps: its stdout, its stderr, and the metric lines it appends
// to $GPUPOOL_METRICS_FILE.
enum class OutputStream { kStdout, kStderr, kMetrics };

inline std::string_view OutputStreamName(OutputStream s) {
  switch (s) {
    case OutputStream::kStdout:
      return "stdout";
    case OutputStream::kStderr:
      return "stderr";
    case OutputStream::kMetrics:
      return "metrics";
  }
  return "stdout";
}

inline std::optional<OutputStream> ParseOutputStream(std::string_view name) {
  for (OutputStream s : {OutputStream::kStdout, OutputStream::kStderr, OutputStream::kMetrics}) {
    if (OutputStreamName(s) == name) return s;
  }
  return std::nullopt;
}

// Bytes of a stored output stream.
struct OutputSlice {
  int64_t offset = 0;  // where `data` starts
  std::string data;
  int64_t next_offset = 0;  // offset + data.size(): where to continue
  int64_t size = 0;         // bytes stored for the stream
  bool truncated = false;   // the stream reached its size limit; later bytes were dropped
};

// Bytes of one of a task's output streams, starting at `offset` of the stream as this run wrote
// it.
struct OutputChunk {
  OutputStream stream = OutputStream::kStdout;
  int64_t offset = 0;
  std::string data;
};

// One line of the task's metrics file, parsed; `end_offset` is where the line ends in the
// metrics stream of the run (so a line shipped twice counts once).
struct ReportedPoint {
  int64_t end_offset = 0;
  MetricValues values;
};

struct TaskTelemetry {
  std::string task_id;
  int64_t bound_ms = 0;  // the binding it is about (another binding's telemetry is refused)
  std::vector<UsageSample> samples;
  std::vector<OutputChunk> output;
  std::vector<ReportedPoint> reported;  // the complete lines of the metrics chunk
  bool output_complete = false;  // the task ended and every byte of its output has been shipped
};

// One batch from an agent.
struct NodeTelemetry {
  std::string node;
  std::vector<NodeSample> samples;
  std::vector<TaskTelemetry> tasks;
};

// How much of each output stream of the task's run the server holds: the agent continues there.
struct OutputOffsets {
  std::string task_id;
  int64_t stdout_bytes = 0;
  int64_t stderr_bytes = 0;
  int64_t metrics_bytes = 0;
  bool refused = false;  // not this node's task (any more): stop shipping it
};

struct LogRequest {
  OutputStream stream = OutputStream::kStdout;
  int64_t offset = 0;
  int64_t tail_lines = -1;  // ≥ 0: start at the last N lines instead of `offset`
  int64_t max_bytes = 1 << 20;
  int64_t wait_ms = 0;  // > 0: wait up to this long for bytes past `offset` (follow)
};

struct LogSlice {
  std::string task_id;
  OutputSlice slice;
  // Nothing more will come: the task ended and its agent shipped the last bytes (or it ended
  // long enough ago that nothing more is expected).
  bool complete = false;
};

// Metric values the task reported, as received.
struct ReportedMetrics {
  int64_t time_ms = 0;
  MetricValues values;
};

struct TaskMetrics {
  std::string task_id;
  Resolution resolution = Resolution::kRaw;
  std::vector<UsagePoint> usage;
  std::vector<ReportedMetrics> reported;  // the last ones received, oldest first
  MetricValues latest;                    // each reported metric's latest value, and the built-ins
};

struct NodeMetrics {
  std::string node;
  Resolution resolution = Resolution::kRaw;
  std::vector<UsagePoint> usage;
  std::vector<std::vector<GpuPoint>> gpus;  // by GPU index
};

// The latest usage of what the caller may see, for `gpupool top`.
struct UsageOverview {
  struct NodeRow {
    NodeInfo info;
    std::optional<NodeSample> latest;
  };
  struct TaskRow {
    Task task;
    std::optional<UsageSample> latest;
    MetricValues reported;  // the latest value of each metric the task reported
  };
  std::vector<NodeRow> nodes;
  std::vector<TaskRow> tasks;  // running tasks
};

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;

  // --- authentication (used by the API before any other call) ---
  // The caller and plain secret of an active key; kUnauthenticated when unknown or revoked
  // (the message says which).
  virtual Result<KeyGrant> LookupKey(const std::string& access_key) = 0;
  // Records a request nonce; kUnauthenticated when this (key, nonce) was seen within the window.
  // `durable`: also persist it (mutating requests), ordered before the request's own write.
  virtual Status ConsumeNonce(const std::string& access_key, const std::string& nonce,
                              int64_t timestamp_ms, bool durable) = 0;

  // --- tasks ---
  virtual void SubmitTask(const Caller& caller, TaskSpec spec, Done<Task> done) = 0;
  virtual Result<TaskView> GetTask(const Caller& caller, const std::string& id) = 0;
  virtual Result<TaskPage> ListTasks(const Caller& caller, const TaskFilter& filter) = 0;
  virtual void StopTask(const Caller& caller, const std::string& id, Done<Task> done) = 0;
  // Puts a held task (submitted with TaskSpec::hold, still pending) into the scheduler's queue as
  // a fresh submission; kFailedPrecondition for any other task.
  virtual void ReleaseTask(const Caller& caller, const std::string& id, Done<Task> done) = 0;
  // Only a terminal task may be deleted.
  virtual void DeleteTask(const Caller& caller, const std::string& id, DoneStatus done) = 0;
  virtual Result<std::vector<TaskEvent>> TaskEvents(const Caller& caller,
                                                    const std::string& id) = 0;

  // --- nodes (admins see and change them; members see them without their tasks) ---
  virtual std::vector<NodeView> ListNodes(const Caller& caller) = 0;
  virtual Result<NodeView> GetNode(const Caller& caller, const std::string& name) = 0;
  virtual void SetCordon(const Caller& caller, const std::string& name, bool cordoned,
                         Done<NodeView> done) = 0;
  // Cordons the node and stops (preempts, when restartable) the tasks on it.
  virtual void DrainNode(const Caller& caller, const std::string& name, Done<NodeView> done) = 0;

  // --- agent-facing: admins, or the node's own agent (its credential from JoinNode) ---
  // Registers a node or updates its capacity; it becomes ready.
  virtual void RegisterNode(const Caller& caller, Node node, Done<NodeView> done) = 0;
  virtual Status Heartbeat(const Caller& caller, const std::string& name) = 0;
  // Long-poll: answers with the node's assignments as soon as their version is greater than
  // `after_version` (at once when it already is), or after `wait_ms` with them unchanged.
  virtual void WatchAssignments(const Caller& caller, const std::string& node,
                                int64_t after_version, int64_t wait_ms,
                                Done<NodeAssignments> done) = 0;
  // The agent's report of a task's state at `time_ms` (its true start / stop time).
  // `bound_ms` > 0 names the binding the report is about: a report for another binding (say,
  // from a node that was lost while the task was re-queued and bound elsewhere) is refused.
  virtual void ReportTask(const Caller& caller, const std::string& id, TaskState to,
                          int64_t time_ms, int exit_code, std::string reason, int64_t bound_ms,
                          Done<Task> done) = 0;

  // --- telemetry ---
  // An agent's batch (its node's tasks only): usage into the histories, output appended, metric
  // lines parsed and stop conditions checked. Answers how much output the server holds.
  virtual Result<std::vector<OutputOffsets>> PushTelemetry(const Caller& caller,
                                                           NodeTelemetry batch) = 0;
  // A task's output from an offset or its last lines; with wait_ms, waits for new bytes.
  virtual void ReadTaskLog(const Caller& caller, const std::string& id, LogRequest request,
                           Done<LogSlice> done) = 0;
  // Sampled usage in [from_ms, to_ms], and the metrics the task reported.
  virtual Result<TaskMetrics> GetTaskMetrics(const Caller& caller, const std::string& id,
                                             int64_t from_ms, int64_t to_ms,
                                             Resolution resolution) = 0;
  virtual Result<NodeMetrics> GetNodeMetrics(const Caller& caller, const std::string& name,
                                             int64_t from_ms, int64_t to_ms,
                                             Resolution resolution) = 0;
  virtual Result<UsageOverview> GetUsage(const Caller& caller) = 0;

  // --- projects, users, keys (admin; members may read their own) ---
  virtual void CreateProject(const Caller& caller, Project project, Done<Project> done) = 0;
  // Replaces the quota fields (max_gpu_milli, max_tasks, stop_grace_ms) and the name.
  virtual void UpdateProject(const Caller& caller, Project project, Done<Project> done) = 0;
  virtual Result<std::vector<Project>> ListProjects(const Caller& caller) = 0;
  virtual Result<Project> GetProject(const Caller& caller, const std::string& id) = 0;
  virtual void CreateUser(const Caller& caller, User user, Done<User> done) = 0;
  // Replaces role and project membership.
  virtual void UpdateUser(const Caller& caller, User user, Done<User> done) = 0;
  virtual Result<std::vector<User>> ListUsers(const Caller& caller) = 0;
  // Members may create and revoke their own keys; admins anyone's.
  virtual void CreateAccessKey(const Caller& caller, const std::string& user_id,
                               std::string description, Done<NewAccessKey> done) = 0;
  virtual Result<std::vector<AccessKey>> ListAccessKeys(const Caller& caller,
                                                        const std::string& user_id) = 0;
  virtual void RevokeAccessKey(const Caller& caller, const std::string& access_key,
                               Done<AccessKey> done) = 0;

  // --- join tokens and the agents' own credentials ---
  // Admin only. `expires_in_ms` > 0: joins are refused from creation + expires_in_ms on; 0: the
  // token does not expire.
  virtual void CreateJoinToken(const Caller& caller, std::string description, int64_t expires_in_ms,
                               Done<NewJoinToken> done) = 0;
  virtual Result<std::vector<JoinTokenView>> ListJoinTokens(const Caller& caller) = 0;
  // Admin only. Refuses further joins with the token and revokes the credentials minted with it:
  // their agents' requests are refused from now on, so their nodes go lost.
  virtual void RevokeJoinToken(const Caller& caller, const std::string& id,
                               Done<JoinTokenView> done) = 0;
  // Unauthenticated (the token is the credential): exchanges a join token "<id>.<secret>" for node
  // `node`'s own credentials, which replace (revoke) any the node got from an earlier join.
  // kUnauthenticated when the token is unknown, its secret wrong, or it is revoked or expired.
  virtual void JoinNode(const std::string& token, const std::string& node,
                        Done<AgentCredentials> done) = 0;

  // --- billing ---
  virtual Result<Balance> GetBalance(const Caller& caller, const std::string& project_id) = 0;
  virtual void Credit(const Caller& caller, const std::string& project_id, int64_t amount_micros,
                      std::string note, Done<LedgerEntry> done) = 0;
  virtual Result<std::vector<LedgerEntry>> Ledger(const Caller& caller,
                                                  const std::string& project_id, int64_t from_ms,
                                                  int64_t to_ms, int64_t offset, int64_t limit) = 0;
  virtual Result<TaskCost> GetTaskCost(const Caller& caller, const std::string& task_id) = 0;
  virtual Result<Statement> GetStatement(const Caller& caller, const std::string& project_id,
                                         int64_t from_ms, int64_t to_ms) = 0;
  virtual Result<std::vector<Price>> ListPrices(const Caller& caller) = 0;
  virtual void SetPrice(const Caller& caller, Price price, Done<Price> done) = 0;

  // --- operations ---
  // Prometheus text exposition of the server's gauges, counters and histograms.
  virtual std::string MetricsText() = 0;
  // The API reports each request's handling time; `route` is the route pattern.
  virtual void ObserveRequest(const std::string& route, int status, int64_t micros) = 0;
  virtual bool Healthy() = 0;
};

}  // namespace gpupool::server
