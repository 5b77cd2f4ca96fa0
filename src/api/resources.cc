// The typed client's calls (see resources.h): each one encodes its operation's query and body,
// sends it and decodes the answer, through Invoke<Op> — instantiated here once per operation.
#include "api/resources.h"

#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "api/url.h"
#include "proto/json_codec.h"
#include "proto/query_codec.h"

namespace gpupool::api {
namespace {

// Op's path with its {parameters} replaced, in order, by `args` (percent-encoded), and `query`
// appended.
std::string OperationTarget(std::string_view pattern, std::initializer_list<std::string_view> args,
                            const proto::QueryPairs& query) {
  std::string target;
  const std::string_view* arg = args.begin();
  size_t at = 0;
  while (at < pattern.size()) {
    const size_t open = pattern.find('{', at);
    if (open == std::string_view::npos) {
      target += pattern.substr(at);
      break;
    }
    target += pattern.substr(at, open - at);
    // A missing argument leaves the parameter empty: the server answers 404.
    if (arg != args.end()) target += PercentEncode(*arg++);
    at = pattern.find('}', open) + 1;
  }
  for (size_t i = 0; i < query.size(); ++i) {
    target += i == 0 ? '?' : '&';
    target += PercentEncode(query[i].first) + "=" + PercentEncode(query[i].second);
  }
  return target;
}

// Sends Op and decodes its answer. Bytes answers come back raw (and uploads go raw).
template <typename Op>
Result<typename Op::Response> Invoke(Client& client, std::initializer_list<std::string_view> args,
                                     const typename Op::Query& query = {},
                                     const typename Op::Request& body = {}) {
  using Request = typename Op::Request;
  using Response = typename Op::Response;
  proto::QueryPairs pairs;
  if constexpr (!std::is_same_v<typename Op::Query, proto::Empty>) {
    pairs = proto::EncodeQuery(query);
  }
  std::string text;
  if constexpr (std::is_same_v<Request, proto::Bytes>) {
    text = body.data;
  } else if constexpr (!std::is_same_v<Request, proto::Empty>) {
    text = proto::Dump(proto::Encode(body));
  }
  Result<ClientResponse> r =
      client.Call(Op::kInfo.method, OperationTarget(Op::kInfo.path, args, pairs), text);
  if (!r) return tl::unexpected(r.error());
  if (r->status < 200 || r->status >= 300) return tl::unexpected(ResponseError(*r));
  if constexpr (std::is_same_v<Response, proto::Bytes>) {
    return proto::Bytes{std::move(r->body)};
  } else if constexpr (std::is_same_v<Response, proto::MetricsText>) {
    return proto::MetricsText{std::move(r->body)};
  } else if constexpr (std::is_same_v<Response, proto::JsonDocument>) {
    return proto::JsonDocument{std::move(r->body)};
  } else {
    Result<Response> decoded =
        proto::DecodeBody<Response>(r->body, /*required=*/true, proto::UnknownFields::kIgnore);
    if (!decoded) {
      return MakeError(ErrorCode::kInternal, "the server's answer to " +
                                                 std::string(Op::kInfo.method) + " " +
                                                 std::string(Op::kInfo.path) +
                                                 " does not parse: " + decoded.error().message);
    }
    return decoded;
  }
}

}  // namespace

Result<proto::Task> TasksApi::Submit(const proto::TaskSubmit& s) {
  return Invoke<ops::SubmitTask>(c_, {}, {}, s);
}
Result<proto::TaskList> TasksApi::List(const proto::TaskListQuery& q) {
  return Invoke<ops::ListTasks>(c_, {}, q);
}
Result<proto::TaskDetail> TasksApi::Get(std::string_view id) {
  return Invoke<ops::GetTask>(c_, {id});
}
Result<proto::Task> TasksApi::Stop(std::string_view id, const proto::TaskStop& how) {
  return Invoke<ops::StopTask>(c_, {id}, {}, how);
}

Result<proto::Snapshot> SnapshotsApi::Take(std::string_view task,
                                           const proto::TaskSnapshotRequest& what) {
  return Invoke<ops::SnapshotTask>(c_, {task}, {}, what);
}
Result<proto::Task> SnapshotsApi::Resume(std::string_view task, const proto::TaskResume& r) {
  return Invoke<ops::ResumeTask>(c_, {task}, {}, r);
}
Result<proto::SnapshotList> SnapshotsApi::List(const proto::SnapshotListQuery& q) {
  return Invoke<ops::ListSnapshots>(c_, {}, q);
}
Result<proto::Snapshot> SnapshotsApi::Get(std::string_view id) {
  return Invoke<ops::GetSnapshot>(c_, {id});
}
Result<proto::Deleted> SnapshotsApi::Delete(std::string_view id) {
  return Invoke<ops::DeleteSnapshot>(c_, {id});
}
Result<proto::VolumeView> VolumesApi::Create(const proto::VolumeCreate& create) {
  return Invoke<ops::CreateVolume>(c_, {}, {}, create);
}
Result<proto::VolumeList> VolumesApi::List(const proto::VolumeListQuery& q) {
  return Invoke<ops::ListVolumes>(c_, {}, q);
}
Result<proto::VolumeView> VolumesApi::Get(std::string_view volume) {
  return Invoke<ops::GetVolume>(c_, {volume});
}
Result<proto::VolumeView> VolumesApi::Update(std::string_view volume,
                                             const proto::VolumeUpdate& update) {
  return Invoke<ops::UpdateVolume>(c_, {volume}, {}, update);
}
Result<proto::Deleted> VolumesApi::Delete(std::string_view volume) {
  return Invoke<ops::DeleteVolume>(c_, {volume});
}

Result<proto::DatasetView> DatasetsApi::Create(const proto::DatasetCreate& create) {
  return Invoke<ops::CreateDataset>(c_, {}, {}, create);
}
Result<proto::DatasetList> DatasetsApi::List(const proto::DatasetListQuery& q) {
  return Invoke<ops::ListDatasets>(c_, {}, q);
}
Result<proto::DatasetView> DatasetsApi::Get(std::string_view dataset) {
  return Invoke<ops::GetDataset>(c_, {dataset});
}
Result<proto::DatasetView> DatasetsApi::Update(std::string_view dataset,
                                               const proto::DatasetUpdate& update) {
  return Invoke<ops::UpdateDataset>(c_, {dataset}, {}, update);
}
Result<proto::Deleted> DatasetsApi::Delete(std::string_view dataset) {
  return Invoke<ops::DeleteDataset>(c_, {dataset});
}
Result<proto::DatasetView> DatasetsApi::DeleteVersion(std::string_view dataset, int32_t version) {
  const std::string number = std::to_string(version);
  return Invoke<ops::DeleteDatasetVersion>(c_, {dataset, number});
}
Result<proto::ChunkSet> DatasetsApi::MissingChunks(std::string_view dataset,
                                                   const proto::ChunkSet& chunks) {
  return Invoke<ops::FindDatasetChunks>(c_, {dataset}, {}, chunks);
}
Result<proto::Empty> DatasetsApi::PutChunk(std::string_view dataset, std::string_view sha256,
                                           const proto::Bytes& bytes) {
  return Invoke<ops::PutDatasetChunk>(c_, {dataset, sha256}, {}, bytes);
}
Result<proto::DatasetView> DatasetsApi::PushVersion(std::string_view dataset,
                                                    const proto::DatasetVersionPush& push) {
  return Invoke<ops::PushDatasetVersion>(c_, {dataset}, {}, push);
}
Result<proto::TaskArray> TasksApi::SubmitArray(const proto::TaskArraySubmit& s) {
  return Invoke<ops::SubmitTaskArray>(c_, {}, {}, s);
}
Result<proto::TaskArray> TasksApi::GetArray(std::string_view id) {
  return Invoke<ops::GetTaskArray>(c_, {id});
}
Result<proto::TaskArray> TasksApi::StopArray(std::string_view id) {
  return Invoke<ops::StopTaskArray>(c_, {id});
}
Result<proto::TaskArray> TasksApi::ReleaseArray(std::string_view id) {
  return Invoke<ops::ReleaseTaskArray>(c_, {id});
}
Result<proto::Job> TasksApi::SubmitJob(const proto::JobSubmit& s) {
  return Invoke<ops::SubmitJob>(c_, {}, {}, s);
}
Result<proto::Job> TasksApi::GetJob(std::string_view id) { return Invoke<ops::GetJob>(c_, {id}); }
Result<proto::Job> TasksApi::StopJob(std::string_view id) { return Invoke<ops::StopJob>(c_, {id}); }
Result<proto::Job> TasksApi::ReleaseJob(std::string_view id) {
  return Invoke<ops::ReleaseJob>(c_, {id});
}
Result<proto::Task> TasksApi::Release(std::string_view id) {
  return Invoke<ops::ReleaseTask>(c_, {id});
}
Result<proto::Deleted> TasksApi::Delete(std::string_view id) {
  return Invoke<ops::DeleteTask>(c_, {id});
}
Result<proto::TaskEventList> TasksApi::Events(std::string_view id) {
  return Invoke<ops::ListTaskEvents>(c_, {id});
}
Result<proto::TaskCostView> TasksApi::Cost(std::string_view id) {
  return Invoke<ops::GetTaskCost>(c_, {id});
}
Result<proto::LogSlice> TasksApi::Logs(std::string_view id, const proto::LogQuery& q) {
  return Invoke<ops::ReadTaskLogs>(c_, {id}, q);
}
Result<proto::TaskMetrics> TasksApi::Metrics(std::string_view id, const proto::HistoryQuery& q) {
  return Invoke<ops::GetTaskMetrics>(c_, {id}, q);
}

Result<proto::FileListing> FilesApi::List(std::string_view task, const proto::FilesQuery& q) {
  return Invoke<ops::ListFiles>(c_, {task}, q);
}
Result<proto::Bytes> FilesApi::Read(std::string_view task, const proto::FileContentQuery& q) {
  return Invoke<ops::ReadFile>(c_, {task}, q);
}
Result<proto::UploadStatus> FilesApi::Upload(std::string_view task, const proto::UploadQuery& q) {
  return Invoke<ops::GetUpload>(c_, {task}, q);
}
Result<proto::UploadStatus> FilesApi::PutChunk(std::string_view task,
                                               const proto::UploadChunkQuery& q,
                                               const proto::Bytes& chunk) {
  return Invoke<ops::PutUploadChunk>(c_, {task}, q, chunk);
}
Result<proto::CommittedFile> FilesApi::Commit(std::string_view task,
                                              const proto::UploadCommitQuery& q,
                                              const proto::UploadCommit& commit) {
  return Invoke<ops::CommitUpload>(c_, {task}, q, commit);
}

Result<proto::NodeList> NodesApi::List() { return Invoke<ops::ListNodes>(c_, {}); }
Result<proto::NodeView> NodesApi::Get(std::string_view name) {
  return Invoke<ops::GetNode>(c_, {name});
}
Result<proto::NodeView> NodesApi::Cordon(std::string_view name) {
  return Invoke<ops::CordonNode>(c_, {name});
}
Result<proto::NodeView> NodesApi::Uncordon(std::string_view name) {
  return Invoke<ops::UncordonNode>(c_, {name});
}
Result<proto::NodeView> NodesApi::Drain(std::string_view name) {
  return Invoke<ops::DrainNode>(c_, {name});
}
Result<proto::NodeMetrics> NodesApi::Metrics(std::string_view name, const proto::HistoryQuery& q) {
  return Invoke<ops::GetNodeMetrics>(c_, {name}, q);
}
Result<proto::UsageOverview> NodesApi::Usage() { return Invoke<ops::GetUsage>(c_, {}); }

Result<proto::NodeView> AgentApi::Register(const proto::NodeRegistration& r) {
  return Invoke<ops::RegisterNode>(c_, {}, {}, r);
}
Result<proto::HeartbeatAck> AgentApi::Heartbeat(std::string_view node,
                                                const proto::NodeHeartbeat& h) {
  return Invoke<ops::Heartbeat>(c_, {node}, {}, h);
}
Result<proto::Assignments> AgentApi::Watch(std::string_view node,
                                           const proto::AssignmentsQuery& q) {
  return Invoke<ops::WatchAssignments>(c_, {node}, q);
}
Result<proto::Task> AgentApi::Report(std::string_view task, const proto::TaskReport& r) {
  return Invoke<ops::ReportTask>(c_, {task}, {}, r);
}
Result<proto::TelemetryAck> AgentApi::Telemetry(std::string_view node,
                                                const proto::TelemetryBatch& b) {
  return Invoke<ops::PushTelemetry>(c_, {node}, {}, b);
}
Result<proto::AgentCredentials> AgentApi::Join(const proto::JoinRequest& r) {
  return Invoke<ops::JoinNode>(c_, {}, {}, r);
}
Result<proto::Snapshot> AgentApi::CommitSnapshot(std::string_view task,
                                                 const proto::SnapshotCommit& c) {
  return Invoke<ops::CommitSnapshot>(c_, {task}, {}, c);
}
Result<proto::Empty> AgentApi::FailSnapshot(std::string_view task,
                                            const proto::SnapshotFailure& f) {
  return Invoke<ops::FailSnapshot>(c_, {task}, {}, f);
}
Result<proto::ChunkSet> AgentApi::MissingChunks(std::string_view task,
                                                const proto::ChunkSet& chunks) {
  return Invoke<ops::FindMissingChunks>(c_, {task}, {}, chunks);
}
Result<proto::Empty> AgentApi::PutChunk(std::string_view task, std::string_view sha256,
                                        const proto::Bytes& bytes) {
  return Invoke<ops::PutChunk>(c_, {task, sha256}, {}, bytes);
}
Result<proto::Bytes> AgentApi::GetChunk(std::string_view task, std::string_view sha256) {
  return Invoke<ops::GetChunk>(c_, {task, sha256});
}

Result<proto::Bytes> AgentApi::GetDatasetChunk(std::string_view dataset, std::string_view sha256) {
  return Invoke<ops::GetDatasetChunk>(c_, {dataset, sha256});
}
Result<proto::Empty> AgentApi::VolumeRemoved(std::string_view volume) {
  return Invoke<ops::VolumeRemoved>(c_, {volume});
}

Result<proto::WhoAmI> AccountsApi::WhoAmI() { return Invoke<ops::GetWhoAmI>(c_, {}); }
Result<proto::ProjectView> AccountsApi::CreateProject(const proto::ProjectCreate& p) {
  return Invoke<ops::CreateProject>(c_, {}, {}, p);
}
Result<proto::ProjectList> AccountsApi::ListProjects() { return Invoke<ops::ListProjects>(c_, {}); }
Result<proto::ProjectView> AccountsApi::GetProject(std::string_view id) {
  return Invoke<ops::GetProject>(c_, {id});
}
Result<proto::ProjectView> AccountsApi::PatchProject(std::string_view id,
                                                     const proto::ProjectPatch& p) {
  return Invoke<ops::PatchProject>(c_, {id}, {}, p);
}
Result<proto::UserView> AccountsApi::CreateUser(const proto::UserCreate& u) {
  return Invoke<ops::CreateUser>(c_, {}, {}, u);
}
Result<proto::UserList> AccountsApi::ListUsers() { return Invoke<ops::ListUsers>(c_, {}); }
Result<proto::UserView> AccountsApi::PatchUser(std::string_view id, const proto::UserPatch& p) {
  return Invoke<ops::PatchUser>(c_, {id}, {}, p);
}
Result<proto::NewAccessKey> AccountsApi::CreateKey(std::string_view user,
                                                   const proto::KeyCreate& k) {
  return Invoke<ops::CreateKey>(c_, {user}, {}, k);
}
Result<proto::AccessKeyList> AccountsApi::ListKeys(std::string_view user) {
  return Invoke<ops::ListKeys>(c_, {user});
}
Result<proto::AccessKeyView> AccountsApi::RevokeKey(std::string_view access_key) {
  return Invoke<ops::RevokeKey>(c_, {access_key});
}
Result<proto::SshKeyView> AccountsApi::AddSshKey(std::string_view user,
                                                 const proto::SshKeyCreate& k) {
  return Invoke<ops::AddSshKey>(c_, {user}, {}, k);
}
Result<proto::SshKeyList> AccountsApi::ListSshKeys(std::string_view user) {
  return Invoke<ops::ListSshKeys>(c_, {user});
}
Result<proto::SshKeyView> AccountsApi::RemoveSshKey(std::string_view user, std::string_view name) {
  return Invoke<ops::RemoveSshKey>(c_, {user, name});
}
Result<proto::NewJoinToken> AccountsApi::CreateJoinToken(const proto::JoinTokenCreate& t) {
  return Invoke<ops::CreateJoinToken>(c_, {}, {}, t);
}
Result<proto::JoinTokenList> AccountsApi::ListJoinTokens() {
  return Invoke<ops::ListJoinTokens>(c_, {});
}
Result<proto::JoinTokenView> AccountsApi::RevokeJoinToken(std::string_view id) {
  return Invoke<ops::RevokeJoinToken>(c_, {id});
}
Result<proto::AuditPage> AccountsApi::ListAudit(const proto::AuditQuery& q) {
  return Invoke<ops::ListAudit>(c_, {}, q);
}

Result<proto::BalanceView> BillingApi::Balance(std::string_view project) {
  return Invoke<ops::GetBalance>(c_, {project});
}
Result<proto::LedgerEntryView> BillingApi::Credit(std::string_view project,
                                                  const proto::CreditRequest& r) {
  return Invoke<ops::AddCredit>(c_, {project}, {}, r);
}
Result<proto::LedgerPage> BillingApi::Ledger(std::string_view project,
                                             const proto::LedgerQuery& q) {
  return Invoke<ops::GetLedger>(c_, {project}, q);
}
Result<proto::StatementView> BillingApi::Statement(std::string_view project,
                                                   const proto::PeriodQuery& q) {
  return Invoke<ops::GetStatement>(c_, {project}, q);
}
Result<proto::PriceList> BillingApi::Prices() { return Invoke<ops::ListPrices>(c_, {}); }
Result<proto::PriceView> BillingApi::SetPrice(const proto::PriceSet& p) {
  return Invoke<ops::SetPrice>(c_, {}, {}, p);
}

}  // namespace gpupool::api
