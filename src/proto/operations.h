// Every operation of the REST API as a type: its method, path, summary, who may call it, and the
// wire types of its query, request body and answer. The server binds one handler to each (its
// routes take exactly these types), clients call them through api::Client, and the OpenAPI
// document (openapi.h) is generated from this list — so the three cannot disagree.
#pragma once

#include <string_view>
#include <tuple>

#include "proto/accounts.h"
#include "proto/billing.h"
#include "proto/common.h"
#include "proto/console.h"
#include "proto/datasets.h"
#include "proto/events.h"
#include "proto/exec.h"
#include "proto/files.h"
#include "proto/nodes.h"
#include "proto/snapshots.h"
#include "proto/tasks.h"
#include "proto/telemetry.h"
#include "proto/tunnel.h"
#include "proto/volumes.h"

namespace gpupool::proto {

enum class Auth {
  kPublic,      // no signature (health, metrics, joining with a join token)
  kSigned,      // GPUPOOL-HMAC-SHA256 (docs/api.md "Authentication"), or a console session
  kSignedOnly,  // GPUPOOL-HMAC-SHA256 only: opening a console session
  kSession,     // the console session's cookie only: the session itself (read it, log out)
};

struct OperationInfo {
  std::string_view method;
  std::string_view path;  // with {name} path parameters (identifiers)
  std::string_view id;    // OpenAPI operationId
  std::string_view tag;
  std::string_view summary;
  Auth auth = Auth::kSigned;
  int status = 200;            // the answer's status on success
  bool body_optional = false;  // the request body may be left out (its defaults apply)
};

// Whether a request is refused (507 insufficient_storage) while the server's disk is below its
// reserve: a write, but not a deletion, which frees space, an agent's call, which lets tasks
// end, or a console login, which a deletion may need. `path` is a request's or an operation's
// (with {name} parameters): the rule reads only its fixed prefix. The routes apply it and the
// OpenAPI document lists the refusal by it.
constexpr bool RefusedOnFullDisk(std::string_view method, std::string_view path) {
  return method != "GET" && method != "HEAD" && method != "DELETE" &&
         !path.starts_with("/v1/agent/") && path != "/v1/console/sessions";
}

// An operation: Op<Query, Request, Response>; Empty for no query parameters or no body.
#define GPUPOOL_OPERATION(NAME, QUERY, REQUEST, RESPONSE, ...) \
  struct NAME {                                                \
    using Query = QUERY;                                       \
    using Request = REQUEST;                                   \
    using Response = RESPONSE;                                 \
    static constexpr OperationInfo kInfo{__VA_ARGS__};         \
  }

namespace ops {

// --- operations ---
GPUPOOL_OPERATION(Healthz, Empty, Empty, Health, "GET", "/healthz", "healthz", "operations",
                  "Whether the server serves", Auth::kPublic);
GPUPOOL_OPERATION(Metrics, Empty, Empty, MetricsText, "GET", "/metrics", "metrics", "operations",
                  "Prometheus metrics of the server", Auth::kPublic);
GPUPOOL_OPERATION(GetOpenApi, Empty, Empty, JsonDocument, "GET", "/v1/openapi.json", "getOpenApi",
                  "operations", "The API as an OpenAPI 3.1 document", Auth::kPublic);
GPUPOOL_OPERATION(GetWhoAmI, Empty, Empty, WhoAmI, "GET", "/v1/whoami", "whoAmI", "accounts",
                  "The caller's identity");

// --- tasks ---
GPUPOOL_OPERATION(SubmitTask, Empty, TaskSubmit, Task, "POST", "/v1/tasks", "submitTask", "tasks",
                  "Submit a task", Auth::kSigned, 201);
GPUPOOL_OPERATION(ListTasks, TaskListQuery, Empty, TaskList, "GET", "/v1/tasks", "listTasks",
                  "tasks", "List tasks, a page at a time");
GPUPOOL_OPERATION(GetTask, Empty, Empty, TaskDetail, "GET", "/v1/tasks/{id}", "getTask", "tasks",
                  "A task with its place in the queue");
GPUPOOL_OPERATION(DeleteTask, Empty, Empty, Deleted, "DELETE", "/v1/tasks/{id}", "deleteTask",
                  "tasks", "Delete an ended task and its files");
GPUPOOL_OPERATION(StopTask, Empty, TaskStop, Task, "POST", "/v1/tasks/{id}/stop", "stopTask",
                  "tasks", "Stop a task (a running one is snapshotted first unless `discard`)",
                  Auth::kSigned, 200, true);
GPUPOOL_OPERATION(ReleaseTask, Empty, Empty, Task, "POST", "/v1/tasks/{id}/release", "releaseTask",
                  "tasks", "Queue a held task");
GPUPOOL_OPERATION(ListTaskEvents, Empty, Empty, TaskEventList, "GET", "/v1/tasks/{id}/events",
                  "listTaskEvents", "tasks", "A task's state transitions");
GPUPOOL_OPERATION(GetTaskCost, Empty, Empty, TaskCostView, "GET", "/v1/tasks/{id}/cost",
                  "getTaskCost", "billing", "What a task cost so far");

// --- snapshots (docs/snapshots.md) ---
GPUPOOL_OPERATION(SnapshotTask, Empty, TaskSnapshotRequest, Snapshot, "POST",
                  "/v1/tasks/{id}/snapshots", "snapshotTask", "snapshots",
                  "Snapshot a running task's workspace now (answered once it is stored)",
                  Auth::kSigned, 201, true);
GPUPOOL_OPERATION(ResumeTask, Empty, TaskResume, Task, "POST", "/v1/tasks/{id}/resume",
                  "resumeTask", "snapshots",
                  "Queue an ended task again, its workspace restored from a snapshot",
                  Auth::kSigned, 200, true);
GPUPOOL_OPERATION(ListSnapshots, SnapshotListQuery, Empty, SnapshotList, "GET", "/v1/snapshots",
                  "listSnapshots", "snapshots", "Snapshots of the caller's tasks");
GPUPOOL_OPERATION(GetSnapshot, Empty, Empty, Snapshot, "GET", "/v1/snapshots/{id}", "getSnapshot",
                  "snapshots", "A snapshot");
GPUPOOL_OPERATION(DeleteSnapshot, Empty, Empty, Deleted, "DELETE", "/v1/snapshots/{id}",
                  "deleteSnapshot", "snapshots",
                  "Delete a snapshot (its chunks go once no other snapshot lists them)");

// --- volumes (docs/volumes.md) ---
GPUPOOL_OPERATION(CreateVolume, Empty, VolumeCreate, VolumeView, "POST", "/v1/volumes",
                  "createVolume", "volumes", "Create a volume in a project", Auth::kSigned, 201);
GPUPOOL_OPERATION(ListVolumes, VolumeListQuery, Empty, VolumeList, "GET", "/v1/volumes",
                  "listVolumes", "volumes", "The volumes of the caller's projects");
GPUPOOL_OPERATION(GetVolume, Empty, Empty, VolumeView, "GET", "/v1/volumes/{id}", "getVolume",
                  "volumes", "A volume, by its id or its name");
GPUPOOL_OPERATION(UpdateVolume, Empty, VolumeUpdate, VolumeView, "PATCH", "/v1/volumes/{id}",
                  "updateVolume", "volumes", "Resize a volume");
GPUPOOL_OPERATION(DeleteVolume, Empty, Empty, Deleted, "DELETE", "/v1/volumes/{id}", "deleteVolume",
                  "volumes",
                  "Delete a volume no live task mounts: its files are removed, then it goes");
// --- datasets (docs/datasets.md) ---
GPUPOOL_OPERATION(CreateDataset, Empty, DatasetCreate, DatasetView, "POST", "/v1/datasets",
                  "createDataset", "datasets", "Create an empty dataset in a project",
                  Auth::kSigned, 201);
GPUPOOL_OPERATION(ListDatasets, DatasetListQuery, Empty, DatasetList, "GET", "/v1/datasets",
                  "listDatasets", "datasets",
                  "The datasets of the caller's projects and the published ones");
GPUPOOL_OPERATION(GetDataset, Empty, Empty, DatasetView, "GET", "/v1/datasets/{id}", "getDataset",
                  "datasets", "A dataset, by its id or its name");
GPUPOOL_OPERATION(UpdateDataset, Empty, DatasetUpdate, DatasetView, "PATCH", "/v1/datasets/{id}",
                  "updateDataset", "datasets",
                  "Publish a dataset to every project, or take it back");
GPUPOOL_OPERATION(DeleteDataset, Empty, Empty, Deleted, "DELETE", "/v1/datasets/{id}",
                  "deleteDataset", "datasets",
                  "Delete a dataset no live task mounts (its chunks go once nothing lists them)");
GPUPOOL_OPERATION(DeleteDatasetVersion, Empty, Empty, DatasetView, "DELETE",
                  "/v1/datasets/{id}/versions/{version}", "deleteDatasetVersion", "datasets",
                  "Delete one version of a dataset that no live task mounts");
GPUPOOL_OPERATION(FindDatasetChunks, Empty, ChunkSet, ChunkSet, "POST",
                  "/v1/datasets/{id}/chunks/missing", "findDatasetChunks", "datasets",
                  "Which of these chunks the dataset's project does not store (a push sends only "
                  "those)");
GPUPOOL_OPERATION(PutDatasetChunk, Empty, Bytes, Empty, "PUT", "/v1/datasets/{id}/chunks/{sha256}",
                  "putDatasetChunk", "datasets",
                  "Store a chunk of a version being pushed (refused unless its SHA-256 matches)");
GPUPOOL_OPERATION(PushDatasetVersion, Empty, DatasetVersionPush, DatasetView, "POST",
                  "/v1/datasets/{id}/versions", "pushDatasetVersion", "datasets",
                  "Record a new version whose manifest and chunks were stored (none when it is the "
                  "latest version's manifest)",
                  Auth::kSigned, 201);
GPUPOOL_OPERATION(GetDatasetChunk, Empty, Empty, Bytes, "GET",
                  "/v1/agent/datasets/{id}/chunks/{sha256}", "getDatasetChunk", "agents",
                  "A chunk of a dataset that a task on the node mounts");

GPUPOOL_OPERATION(VolumeRemoved, Empty, Empty, Empty, "POST", "/v1/agent/volumes/{id}/removed",
                  "volumeRemoved", "agents",
                  "A node removed a deleted volume's files: its record goes");

// --- job arrays ---
GPUPOOL_OPERATION(SubmitTaskArray, Empty, TaskArraySubmit, TaskArray, "POST", "/v1/arrays",
                  "submitTaskArray", "tasks", "Submit a job array: one task per index",
                  Auth::kSigned, 201);
GPUPOOL_OPERATION(GetTaskArray, Empty, Empty, TaskArray, "GET", "/v1/arrays/{id}", "getTaskArray",
                  "tasks", "A job array and its elements' states");
GPUPOOL_OPERATION(StopTaskArray, Empty, Empty, TaskArray, "POST", "/v1/arrays/{id}/stop",
                  "stopTaskArray", "tasks", "Stop every element of a job array");
GPUPOOL_OPERATION(ReleaseTaskArray, Empty, Empty, TaskArray, "POST", "/v1/arrays/{id}/release",
                  "releaseTaskArray", "tasks", "Queue every held element of a job array");

// --- distributed jobs ---
GPUPOOL_OPERATION(SubmitJob, Empty, JobSubmit, Job, "POST", "/v1/jobs", "submitJob", "tasks",
                  "Submit a distributed job: its members placed together, with a rendezvous",
                  Auth::kSigned, 201);
GPUPOOL_OPERATION(GetJob, Empty, Empty, Job, "GET", "/v1/jobs/{id}", "getJob", "tasks",
                  "A distributed job and its members");
GPUPOOL_OPERATION(StopJob, Empty, Empty, Job, "POST", "/v1/jobs/{id}/stop", "stopJob", "tasks",
                  "Stop every member of a distributed job");
GPUPOOL_OPERATION(ReleaseJob, Empty, Empty, Job, "POST", "/v1/jobs/{id}/release", "releaseJob",
                  "tasks", "Queue a held distributed job");

// --- task files ---
GPUPOOL_OPERATION(ListFiles, FilesQuery, Empty, FileListing, "GET", "/v1/tasks/{id}/files",
                  "listFiles", "files", "A task's files under a path");
GPUPOOL_OPERATION(ReadFile, FileContentQuery, Empty, Bytes, "GET", "/v1/tasks/{id}/files/content",
                  "readFile", "files",
                  "A chunk of a file (X-Gpupool-File-Size and X-Gpupool-File-Sha256 describe the "
                  "whole file; a running task's node sends the hash when it has it at hand)");
GPUPOOL_OPERATION(GetUpload, UploadQuery, Empty, UploadStatus, "GET", "/v1/tasks/{id}/uploads",
                  "getUpload", "files", "How much of an upload arrived");
GPUPOOL_OPERATION(PutUploadChunk, UploadChunkQuery, Bytes, UploadStatus, "PUT",
                  "/v1/tasks/{id}/uploads", "putUploadChunk", "files",
                  "Append a chunk to an upload at the offset received so far");
GPUPOOL_OPERATION(CommitUpload, UploadCommitQuery, UploadCommit, CommittedFile, "POST",
                  "/v1/tasks/{id}/uploads/commit", "commitUpload", "files",
                  "Check an upload's size and SHA-256 and put the file in place");

// --- nodes ---
GPUPOOL_OPERATION(ListNodes, Empty, Empty, NodeList, "GET", "/v1/nodes", "listNodes", "nodes",
                  "Every node of the pool");
GPUPOOL_OPERATION(GetNode, Empty, Empty, NodeView, "GET", "/v1/nodes/{name}", "getNode", "nodes",
                  "A node");
GPUPOOL_OPERATION(CordonNode, Empty, Empty, NodeView, "POST", "/v1/nodes/{name}/cordon",
                  "cordonNode", "nodes", "Place no new tasks on a node");
GPUPOOL_OPERATION(UncordonNode, Empty, Empty, NodeView, "POST", "/v1/nodes/{name}/uncordon",
                  "uncordonNode", "nodes", "Place tasks on a node again");
GPUPOOL_OPERATION(DrainNode, Empty, Empty, NodeView, "POST", "/v1/nodes/{name}/drain", "drainNode",
                  "nodes", "Cordon a node and stop (or preempt) its tasks");

// --- agents ---
GPUPOOL_OPERATION(RegisterNode, Empty, NodeRegistration, NodeView, "POST", "/v1/agent/nodes",
                  "registerNode", "agents", "Register a node or update its capacity");
GPUPOOL_OPERATION(Heartbeat, Empty, NodeHeartbeat, HeartbeatAck, "POST",
                  "/v1/agent/nodes/{name}/heartbeat", "heartbeat", "agents",
                  "A node's agent is alive", Auth::kSigned, 200, true);
GPUPOOL_OPERATION(WatchAssignments, AssignmentsQuery, Empty, Assignments, "GET",
                  "/v1/agent/nodes/{name}/assignments", "watchAssignments", "agents",
                  "Long-poll what a node must run");
GPUPOOL_OPERATION(ReportTask, Empty, TaskReport, Task, "POST", "/v1/agent/tasks/{id}/status",
                  "reportTask", "agents", "A task's state on its node");
GPUPOOL_OPERATION(CommitSnapshot, Empty, SnapshotCommit, Snapshot, "POST",
                  "/v1/agent/tasks/{id}/snapshots", "commitSnapshot", "agents",
                  "Record a snapshot the node captured and uploaded", Auth::kSigned, 201);
GPUPOOL_OPERATION(FailSnapshot, Empty, SnapshotFailure, Empty, "POST",
                  "/v1/agent/tasks/{id}/snapshots/failed", "failSnapshot", "agents",
                  "Say why a snapshot the node was asked for could not be taken");
GPUPOOL_OPERATION(FindMissingChunks, Empty, ChunkSet, ChunkSet, "POST",
                  "/v1/agent/tasks/{id}/chunks/missing", "findMissingChunks", "agents",
                  "Which of these chunks the task's project does not store");
GPUPOOL_OPERATION(PutChunk, Empty, Bytes, Empty, "PUT", "/v1/agent/tasks/{id}/chunks/{sha256}",
                  "putChunk", "agents",
                  "Store a chunk in the task's project (refused unless its SHA-256 matches)");
GPUPOOL_OPERATION(GetChunk, Empty, Empty, Bytes, "GET", "/v1/agent/tasks/{id}/chunks/{sha256}",
                  "getChunk", "agents", "A chunk of the task's project");
GPUPOOL_OPERATION(PushTelemetry, Empty, TelemetryBatch, TelemetryAck, "POST",
                  "/v1/agent/nodes/{name}/telemetry", "pushTelemetry", "agents",
                  "Ship usage samples and task output");
GPUPOOL_OPERATION(OpenTunnel, Empty, Empty, WebSocketStream, "GET", "/v1/agent/nodes/{name}/tunnel",
                  "openTunnel", "agents",
                  "The node's tunnel: the agent's WebSocket that carries the streams the server "
                  "opens into its tasks",
                  Auth::kSigned, 101);
GPUPOOL_OPERATION(JoinNode, Empty, JoinRequest, AgentCredentials, "POST", "/v1/agent/join",
                  "joinNode", "agents",
                  "Exchange a join token for a node's own credentials (the token is the "
                  "credential)",
                  Auth::kPublic, 201);

// --- interactive: a task's ports (docs/api.md "The gateway") ---
GPUPOOL_OPERATION(ForwardPort, Empty, Empty, WebSocketStream, "GET",
                  "/v1/tasks/{id}/ports/{port}/stream", "forwardPort", "tasks",
                  "A byte stream to a running task's declared port (gpupool port-forward)",
                  Auth::kSigned, 101);
GPUPOOL_OPERATION(CreatePortLink, Empty, GatewayLinkCreate, GatewayLink, "POST",
                  "/v1/tasks/{id}/ports/{port}/link", "createPortLink", "tasks",
                  "A short-lived signed link to a task's declared port, signed with the caller's "
                  "key (the console's Open buttons; gpupool open signs its own)",
                  Auth::kSigned, 201, /*body_optional=*/true);
GPUPOOL_OPERATION(ExecTask, Empty, Empty, ExecStream, "GET", "/v1/tasks/{id}/exec", "execTask",
                  "tasks",
                  "Run a command inside a running task: its input, output and exit status as "
                  "frames over a WebSocket (gpupool exec, gpupool shell)",
                  Auth::kSigned, 101);
GPUPOOL_OPERATION(SshTask, Empty, Empty, WebSocketStream, "GET", "/v1/tasks/{id}/ssh", "sshTask",
                  "tasks",
                  "A byte stream to an SSH server run for the task, as its user, in its cgroup "
                  "and namespaces (gpupool tunnel, the ProxyCommand of gpupool ssh-config)",
                  Auth::kSigned, 101);

// --- telemetry ---
GPUPOOL_OPERATION(ReadTaskLogs, LogQuery, Empty, LogSlice, "GET", "/v1/tasks/{id}/logs",
                  "readTaskLogs", "telemetry", "A task's output; with wait_ms, follow it");
GPUPOOL_OPERATION(GetTaskMetrics, HistoryQuery, Empty, TaskMetrics, "GET", "/v1/tasks/{id}/metrics",
                  "getTaskMetrics", "telemetry", "A task's usage history and reported metrics");
GPUPOOL_OPERATION(GetNodeMetrics, HistoryQuery, Empty, NodeMetrics, "GET",
                  "/v1/nodes/{name}/metrics", "getNodeMetrics", "telemetry",
                  "A node's usage history");
GPUPOOL_OPERATION(GetUsage, Empty, Empty, UsageOverview, "GET", "/v1/usage", "getUsage",
                  "telemetry", "The latest usage of nodes and running tasks");

// --- projects ---
GPUPOOL_OPERATION(CreateProject, Empty, ProjectCreate, ProjectView, "POST", "/v1/projects",
                  "createProject", "accounts", "Create a project", Auth::kSigned, 201);
GPUPOOL_OPERATION(ListProjects, Empty, Empty, ProjectList, "GET", "/v1/projects", "listProjects",
                  "accounts", "The projects the caller sees");
GPUPOOL_OPERATION(GetProject, Empty, Empty, ProjectView, "GET", "/v1/projects/{id}", "getProject",
                  "accounts", "A project");
GPUPOOL_OPERATION(PatchProject, Empty, ProjectPatch, ProjectView, "PATCH", "/v1/projects/{id}",
                  "patchProject", "accounts", "Change a project's name or quotas");
GPUPOOL_OPERATION(GetBalance, Empty, Empty, BalanceView, "GET", "/v1/projects/{id}/balance",
                  "getBalance", "billing", "A project's balance");
GPUPOOL_OPERATION(AddCredit, Empty, CreditRequest, LedgerEntryView, "POST",
                  "/v1/projects/{id}/credits", "addCredit", "billing", "Add credit to a project",
                  Auth::kSigned, 201);
GPUPOOL_OPERATION(GetLedger, LedgerQuery, Empty, LedgerPage, "GET", "/v1/projects/{id}/ledger",
                  "getLedger", "billing", "A page of a project's ledger");
GPUPOOL_OPERATION(GetStatement, PeriodQuery, Empty, StatementView, "GET",
                  "/v1/projects/{id}/statement", "getStatement", "billing",
                  "A project's statement over a period");

// --- users and keys ---
GPUPOOL_OPERATION(CreateUser, Empty, UserCreate, UserView, "POST", "/v1/users", "createUser",
                  "accounts", "Create a user", Auth::kSigned, 201);
GPUPOOL_OPERATION(ListUsers, Empty, Empty, UserList, "GET", "/v1/users", "listUsers", "accounts",
                  "The users the caller sees");
GPUPOOL_OPERATION(PatchUser, Empty, UserPatch, UserView, "PATCH", "/v1/users/{id}", "patchUser",
                  "accounts", "Change a user's role or projects");
GPUPOOL_OPERATION(CreateKey, Empty, KeyCreate, NewAccessKey, "POST", "/v1/users/{id}/keys",
                  "createKey", "accounts", "Create an access key (its secret is shown once)",
                  Auth::kSigned, 201, /*body_optional=*/true);
GPUPOOL_OPERATION(ListKeys, Empty, Empty, AccessKeyList, "GET", "/v1/users/{id}/keys", "listKeys",
                  "accounts", "A user's access keys");
GPUPOOL_OPERATION(RevokeKey, Empty, Empty, AccessKeyView, "DELETE", "/v1/keys/{access_key}",
                  "revokeKey", "accounts", "Revoke an access key");
GPUPOOL_OPERATION(AddSshKey, Empty, SshKeyCreate, SshKeyView, "POST", "/v1/users/{id}/ssh-keys",
                  "addSshKey", "accounts",
                  "Register an SSH public key for logging into tasks (gpupool ssh-key add)",
                  Auth::kSigned, 201);
GPUPOOL_OPERATION(ListSshKeys, Empty, Empty, SshKeyList, "GET", "/v1/users/{id}/ssh-keys",
                  "listSshKeys", "accounts", "A user's SSH public keys");
GPUPOOL_OPERATION(RemoveSshKey, Empty, Empty, SshKeyView, "DELETE",
                  "/v1/users/{id}/ssh-keys/{name}", "removeSshKey", "accounts",
                  "Remove an SSH public key: it logs into no task from the next connection on");

// --- prices ---
GPUPOOL_OPERATION(ListPrices, Empty, Empty, PriceList, "GET", "/v1/prices", "listPrices", "billing",
                  "Every price");
GPUPOOL_OPERATION(SetPrice, Empty, PriceSet, PriceView, "PUT", "/v1/prices", "setPrice", "billing",
                  "Set a resource's price from a time on");

// --- join tokens ---
GPUPOOL_OPERATION(CreateJoinToken, Empty, JoinTokenCreate, NewJoinToken, "POST", "/v1/join-tokens",
                  "createJoinToken", "agents", "Create a join token (its text is shown once)",
                  Auth::kSigned, 201,
                  /*body_optional=*/true);
GPUPOOL_OPERATION(ListJoinTokens, Empty, Empty, JoinTokenList, "GET", "/v1/join-tokens",
                  "listJoinTokens", "agents", "Every join token");
GPUPOOL_OPERATION(RevokeJoinToken, Empty, Empty, JoinTokenView, "DELETE", "/v1/join-tokens/{id}",
                  "revokeJoinToken", "agents",
                  "Refuse further joins and revoke the credentials minted with a token");

// --- the audit log (docs/api.md "Audit log") ---
GPUPOOL_OPERATION(ListAudit, AuditQuery, Empty, AuditPage, "GET", "/v1/audit", "listAudit",
                  "accounts", "The audit log of administrative changes (admins)");

// --- console sessions (docs/api.md "Console sessions") ---
GPUPOOL_OPERATION(CreateSession, Empty, SessionCreate, ConsoleSession, "POST",
                  "/v1/console/sessions", "createSession", "console",
                  "Log in to the console: a session cookie and its CSRF token", Auth::kSignedOnly,
                  201, /*body_optional=*/true);
GPUPOOL_OPERATION(GetSession, Empty, Empty, ConsoleSession, "GET", "/v1/console/sessions/current",
                  "getSession", "console", "The console session the cookie names", Auth::kSession);
GPUPOOL_OPERATION(DeleteSession, Empty, Empty, SessionDeleted, "DELETE",
                  "/v1/console/sessions/current", "deleteSession", "console",
                  "Log out: end the session and clear its cookie", Auth::kSession);

// --- console: live events (docs/api.md "Live events") ---
GPUPOOL_OPERATION(WatchEvents, EventsQuery, Empty, EventStream, "GET", "/v1/events", "watchEvents",
                  "console",
                  "Live events (Server-Sent Events): changes of the caller's tasks, a watched "
                  "task's log, usage and metrics, the nodes' usage");

// Every operation, in the order of the reference.
using All =
    std::tuple<Healthz, Metrics, GetOpenApi, GetWhoAmI, SubmitTask, ListTasks, GetTask, DeleteTask,
               StopTask, ReleaseTask, ListTaskEvents, GetTaskCost, SnapshotTask, ResumeTask,
               ListSnapshots, GetSnapshot, DeleteSnapshot, CreateVolume, ListVolumes, GetVolume,
               UpdateVolume, DeleteVolume, CreateDataset, ListDatasets, GetDataset, UpdateDataset,
               DeleteDataset, DeleteDatasetVersion, FindDatasetChunks, PutDatasetChunk,
               PushDatasetVersion, SubmitTaskArray, GetTaskArray, StopTaskArray, ReleaseTaskArray,
               SubmitJob, GetJob, StopJob, ReleaseJob, ListFiles, ReadFile, GetUpload,
               PutUploadChunk, CommitUpload, ListNodes, GetNode, CordonNode, UncordonNode,
               DrainNode, RegisterNode, Heartbeat, WatchAssignments, ReportTask, CommitSnapshot,
               FailSnapshot, VolumeRemoved, FindMissingChunks, PutChunk, GetChunk, GetDatasetChunk,
               PushTelemetry, OpenTunnel, JoinNode, ForwardPort, CreatePortLink, ExecTask, SshTask,
               ReadTaskLogs, GetTaskMetrics, GetNodeMetrics, GetUsage, CreateProject, ListProjects,
               GetProject, PatchProject, GetBalance, AddCredit, GetLedger, GetStatement, CreateUser,
               ListUsers, PatchUser, CreateKey, ListKeys, RevokeKey, AddSshKey, ListSshKeys,
               RemoveSshKey, ListPrices, SetPrice, CreateJoinToken, ListJoinTokens, RevokeJoinToken,
               ListAudit, CreateSession, GetSession, DeleteSession, WatchEvents>;

}  // namespace ops

#undef GPUPOOL_OPERATION

// Calls f.template operator()<Op>() for every operation, in order.
template <typename F>
void ForEachOperation(F&& f) {
  [&]<typename... Op>(std::tuple<Op...>*) {
    (f.template operator()<Op>(), ...);
  }(static_cast<ops::All*>(nullptr));
}

}  // namespace gpupool::proto
