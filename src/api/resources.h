// The typed client: one call per operation of proto/operations.h, grouped by resource —
// `client.Tasks().Submit(submit)` → Result<proto::Task>. Requests are encoded from the
// operation's wire types and answers decoded into them (fields a newer server adds are ignored),
// so the CLI and the agent write no JSON keys of their own. A non-2xx answer is the Error its
// body names (code and message), as Client::CallJson gives. The calls are defined in resources.cc,
// so that the codec of every operation is instantiated once, not in each file that makes a call.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "api/client.h"
#include "core/result.h"
#include "proto/operations.h"

namespace gpupool::api {

namespace ops = proto::ops;

class TasksApi {
 public:
  explicit TasksApi(Client& c) : c_(c) {}
  Result<proto::Task> Submit(const proto::TaskSubmit& s);
  Result<proto::TaskList> List(const proto::TaskListQuery& q);
  Result<proto::TaskDetail> Get(std::string_view id);
  Result<proto::Task> Stop(std::string_view id, const proto::TaskStop& how = {});
  Result<proto::Task> Release(std::string_view id);
  Result<proto::Deleted> Delete(std::string_view id);
  Result<proto::TaskEventList> Events(std::string_view id);
  Result<proto::TaskCostView> Cost(std::string_view id);
  Result<proto::LogSlice> Logs(std::string_view id, const proto::LogQuery& q);
  Result<proto::TaskMetrics> Metrics(std::string_view id, const proto::HistoryQuery& q);
  // Job arrays (POST /v1/arrays, /v1/arrays/{id}…).
  Result<proto::TaskArray> SubmitArray(const proto::TaskArraySubmit& s);
  Result<proto::TaskArray> GetArray(std::string_view id);
  Result<proto::TaskArray> StopArray(std::string_view id);
  Result<proto::TaskArray> ReleaseArray(std::string_view id);
  // Distributed jobs (POST /v1/jobs, /v1/jobs/{id}…).
  Result<proto::Job> SubmitJob(const proto::JobSubmit& s);
  Result<proto::Job> GetJob(std::string_view id);
  Result<proto::Job> StopJob(std::string_view id);
  Result<proto::Job> ReleaseJob(std::string_view id);

 private:
  Client& c_;
};

class FilesApi {
 public:
  explicit FilesApi(Client& c) : c_(c) {}
  Result<proto::FileListing> List(std::string_view task, const proto::FilesQuery& q);
  Result<proto::Bytes> Read(std::string_view task, const proto::FileContentQuery& q);
  Result<proto::UploadStatus> Upload(std::string_view task, const proto::UploadQuery& q);
  Result<proto::UploadStatus> PutChunk(std::string_view task, const proto::UploadChunkQuery& q,
                                       const proto::Bytes& chunk);
  Result<proto::CommittedFile> Commit(std::string_view task, const proto::UploadCommitQuery& q,
                                      const proto::UploadCommit& commit);

 private:
  Client& c_;
};

// Snapshots (docs/snapshots.md).
class SnapshotsApi {
 public:
  explicit SnapshotsApi(Client& c) : c_(c) {}
  Result<proto::Snapshot> Take(std::string_view task, const proto::TaskSnapshotRequest& what = {});
  Result<proto::Task> Resume(std::string_view task, const proto::TaskResume& r);
  Result<proto::SnapshotList> List(const proto::SnapshotListQuery& q);
  Result<proto::Snapshot> Get(std::string_view id);
  Result<proto::Deleted> Delete(std::string_view id);

 private:
  Client& c_;
};

// Volumes (docs/volumes.md): `volume` is an id (v-<seq>) or a name of the caller's projects.
class VolumesApi {
 public:
  explicit VolumesApi(Client& c) : c_(c) {}
  Result<proto::VolumeView> Create(const proto::VolumeCreate& create);
  Result<proto::VolumeList> List(const proto::VolumeListQuery& q);
  Result<proto::VolumeView> Get(std::string_view volume);
  Result<proto::VolumeView> Update(std::string_view volume, const proto::VolumeUpdate& update);
  Result<proto::Deleted> Delete(std::string_view volume);

 private:
  Client& c_;
};

// Datasets (docs/datasets.md): `dataset` is an id (d-<seq>) or a name of the caller's projects or
// of a published dataset. A push stores the chunks the project lacks, then records the version.
class DatasetsApi {
 public:
  explicit DatasetsApi(Client& c) : c_(c) {}
  Result<proto::DatasetView> Create(const proto::DatasetCreate& create);
  Result<proto::DatasetList> List(const proto::DatasetListQuery& q);
  Result<proto::DatasetView> Get(std::string_view dataset);
  Result<proto::DatasetView> Update(std::string_view dataset, const proto::DatasetUpdate& update);
  Result<proto::Deleted> Delete(std::string_view dataset);
  Result<proto::DatasetView> DeleteVersion(std::string_view dataset, int32_t version);
  Result<proto::ChunkSet> MissingChunks(std::string_view dataset, const proto::ChunkSet& chunks);
  Result<proto::Empty> PutChunk(std::string_view dataset, std::string_view sha256,
                                const proto::Bytes& bytes);
  Result<proto::DatasetView> PushVersion(std::string_view dataset,
                                         const proto::DatasetVersionPush& push);

 private:
  Client& c_;
};

class NodesApi {
 public:
  explicit NodesApi(Client& c) : c_(c) {}
  Result<proto::NodeList> List();
  Result<proto::NodeView> Get(std::string_view name);
  Result<proto::NodeView> Cordon(std::string_view name);
  Result<proto::NodeView> Uncordon(std::string_view name);
  Result<proto::NodeView> Drain(std::string_view name);
  Result<proto::NodeMetrics> Metrics(std::string_view name, const proto::HistoryQuery& q);
  Result<proto::UsageOverview> Usage();

 private:
  Client& c_;
};

// The agent-facing routes (an agent's own key, or an admin's).
class AgentApi {
 public:
  explicit AgentApi(Client& c) : c_(c) {}
  Result<proto::NodeView> Register(const proto::NodeRegistration& r);
  Result<proto::HeartbeatAck> Heartbeat(std::string_view node, const proto::NodeHeartbeat& h);
  Result<proto::Assignments> Watch(std::string_view node, const proto::AssignmentsQuery& q);
  Result<proto::Task> Report(std::string_view task, const proto::TaskReport& r);
  Result<proto::TelemetryAck> Telemetry(std::string_view node, const proto::TelemetryBatch& b);
  Result<proto::AgentCredentials> Join(const proto::JoinRequest& r);
  // A snapshot's transfer and record (a task of this node's).
  Result<proto::Snapshot> CommitSnapshot(std::string_view task, const proto::SnapshotCommit& c);
  Result<proto::Empty> FailSnapshot(std::string_view task, const proto::SnapshotFailure& f);
  Result<proto::ChunkSet> MissingChunks(std::string_view task, const proto::ChunkSet& chunks);
  Result<proto::Empty> PutChunk(std::string_view task, std::string_view sha256,
                                const proto::Bytes& bytes);
  Result<proto::Bytes> GetChunk(std::string_view task, std::string_view sha256);
  // A chunk of a dataset a task of this node mounts.
  Result<proto::Bytes> GetDatasetChunk(std::string_view dataset, std::string_view sha256);
  // A deleted volume's files are removed from this node.
  Result<proto::Empty> VolumeRemoved(std::string_view volume);

 private:
  Client& c_;
};

class AccountsApi {
 public:
  explicit AccountsApi(Client& c) : c_(c) {}
  Result<proto::WhoAmI> WhoAmI();
  Result<proto::ProjectView> CreateProject(const proto::ProjectCreate& p);
  Result<proto::ProjectList> ListProjects();
  Result<proto::ProjectView> GetProject(std::string_view id);
  Result<proto::ProjectView> PatchProject(std::string_view id, const proto::ProjectPatch& p);
  Result<proto::UserView> CreateUser(const proto::UserCreate& u);
  Result<proto::UserList> ListUsers();
  Result<proto::UserView> PatchUser(std::string_view id, const proto::UserPatch& p);
  Result<proto::NewAccessKey> CreateKey(std::string_view user, const proto::KeyCreate& k);
  Result<proto::AccessKeyList> ListKeys(std::string_view user);
  Result<proto::AccessKeyView> RevokeKey(std::string_view access_key);
  Result<proto::SshKeyView> AddSshKey(std::string_view user, const proto::SshKeyCreate& k);
  Result<proto::SshKeyList> ListSshKeys(std::string_view user);
  Result<proto::SshKeyView> RemoveSshKey(std::string_view user, std::string_view name);
  Result<proto::NewJoinToken> CreateJoinToken(const proto::JoinTokenCreate& t);
  Result<proto::JoinTokenList> ListJoinTokens();
  Result<proto::JoinTokenView> RevokeJoinToken(std::string_view id);
  Result<proto::AuditPage> ListAudit(const proto::AuditQuery& q);

 private:
  Client& c_;
};

class BillingApi {
 public:
  explicit BillingApi(Client& c) : c_(c) {}
  Result<proto::BalanceView> Balance(std::string_view project);
  Result<proto::LedgerEntryView> Credit(std::string_view project, const proto::CreditRequest& r);
  Result<proto::LedgerPage> Ledger(std::string_view project, const proto::LedgerQuery& q);
  Result<proto::StatementView> Statement(std::string_view project, const proto::PeriodQuery& q);
  Result<proto::PriceList> Prices();
  Result<proto::PriceView> SetPrice(const proto::PriceSet& p);

 private:
  Client& c_;
};

inline TasksApi Client::Tasks() { return TasksApi(*this); }
inline FilesApi Client::Files() { return FilesApi(*this); }
inline NodesApi Client::Nodes() { return NodesApi(*this); }
inline SnapshotsApi Client::Snapshots() { return SnapshotsApi(*this); }
inline VolumesApi Client::Volumes() { return VolumesApi(*this); }
inline DatasetsApi Client::Datasets() { return DatasetsApi(*this); }
inline AgentApi Client::Agent() { return AgentApi(*this); }
inline AccountsApi Client::Accounts() { return AccountsApi(*this); }
inline BillingApi Client::Billing() { return BillingApi(*this); }

}  // namespace gpupool::api
