// AgentService: what a node's agent calls — joining with a token, registering, heartbeats, the
// long-poll for its assignments and its reports of task states. Callers are admins or the node's
// own agent (its credential from JoinNode); telemetry is TelemetryService.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/records.h"
#include "core/result.h"
#include "core/task_job.h"
#include "server/caller.h"
#include "server/node_service.h"
#include "server/snapshot_service.h"

namespace gpupool::server {

// What an agent must run: the tasks bound to its node (scheduled, starting, running), and a
// version that grows whenever that set changes.
struct NodeAssignments {
  std::string node;
  int64_t version = 0;
  std::vector<Task> tasks;
  // Each task's own credential for its current binding (GPUPOOL_TASK_TOKEN): by task id.
  std::map<std::string, std::string> task_tokens;
  // Each distributed job member's rendezvous for its current run: by task id.
  std::map<std::string, Rendezvous> rendezvous;
  // The snapshot each task's run restores its workspace from (those not yet running): by task id.
  std::map<std::string, TaskSnapshot> restores;
  // Snapshots the node must take (snapshot_service.h): by task id.
  std::map<std::string, SnapshotOrder> snapshots;
  // The volumes its tasks mount, by id; the deleted ones whose files it removes (volume_service.h).
  std::map<std::string, Volume> volumes;
  std::vector<std::string> remove_volumes;
};

// What an agent gets when its node joins: the node's own access key and secret (shown once).
struct AgentCredentials {
  AccessKey key;  // node and join_token_id set, sealed_secret empty
  std::string secret;
};

class AgentService {
 public:
  virtual ~AgentService() = default;

  // Unauthenticated (the token is the credential): exchanges a join token "<id>.<secret>" for node
  // `node`'s own credentials, which replace (revoke) any the node got from an earlier join.
  // kUnauthenticated when the token is unknown, its secret wrong, or it is revoked or expired.
  virtual void JoinNode(const std::string& token, const std::string& node,
                        Done<AgentCredentials> done) = 0;
  // Registers a node or updates its capacity; it becomes ready.
  virtual void RegisterNode(const Caller& caller, Node node, Done<NodeView> done) = 0;
  // Records a sign of life of node `name` and the dataset versions whose files it holds (their
  // manifests' SHA-256: tasks that mount them are placed there where they fit); answers the node
  // timeout: how long the server waits for the next before it declares the node lost
  // (ControllerOptions::node_timeout_ms).
  virtual Result<int64_t> Heartbeat(const Caller& caller, const std::string& name,
                                    std::vector<std::string> datasets) = 0;
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
};

}  // namespace gpupool::server
