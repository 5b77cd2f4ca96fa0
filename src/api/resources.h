// The typed client: one call per operation of proto/operations.h, grouped by resource —
// `client.Tasks().Submit(submit)` → Result<proto::Task>. Requests are encoded from the
// operation's wire types and answers decoded into them (fields a newer server adds are ignored),
// so the CLI and the agent write no JSON keys of their own. A non-2xx answer is the Error its
// body names (code and message), as Client::CallJson gives.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "api/client.h"
#include "api/url.h"
#include "core/result.h"
#include "proto/json_codec.h"
#include "proto/operations.h"
#include "proto/query_codec.h"

namespace gpupool::api {

// Op's path with its {parameters} replaced, in order, by `args` (percent-encoded), and `query`
// appended.
std::string OperationTarget(std::string_view pattern, std::initializer_list<std::string_view> args,
                            const proto::QueryPairs& query);

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

namespace ops = proto::ops;

class TasksApi {
 public:
  explicit TasksApi(Client& c) : c_(c) {}
  Result<proto::Task> Submit(const proto::TaskSubmit& s) {
    return Invoke<ops::SubmitTask>(c_, {}, {}, s);
  }
  Result<proto::TaskList> List(const proto::TaskListQuery& q) {
    return Invoke<ops::ListTasks>(c_, {}, q);
  }
  Result<proto::TaskDetail> Get(std::string_view id) { return Invoke<ops::GetTask>(c_, {id}); }
  Result<proto::Task> Stop(std::string_view id) { return Invoke<ops::StopTask>(c_, {id}); }
  Result<proto::Task> Release(std::string_view id) { return Invoke<ops::ReleaseTask>(c_, {id}); }
  Result<proto::Deleted> Delete(std::string_view id) { return Invoke<ops::DeleteTask>(c_, {id}); }
  Result<proto::TaskEventList> Events(std::string_view id) {
    return Invoke<ops::ListTaskEvents>(c_, {id});
  }
  Result<proto::TaskCostView> Cost(std::string_view id) {
    return Invoke<ops::GetTaskCost>(c_, {id});
  }
  Result<proto::LogSlice> Logs(std::string_view id, const proto::LogQuery& q) {
    return Invoke<ops::ReadTaskLogs>(c_, {id}, q);
  }
  Result<proto::TaskMetrics> Metrics(std::string_view id, const proto::HistoryQuery& q) {
    return Invoke<ops::GetTaskMetrics>(c_, {id}, q);
  }

 private:
  Client& c_;
};

class FilesApi {
 public:
  explicit FilesApi(Client& c) : c_(c) {}
  Result<proto::FileListing> List(std::string_view task, const proto::FilesQuery& q) {
    return Invoke<ops::ListFiles>(c_, {task}, q);
  }
  Result<proto::Bytes> Read(std::string_view task, const proto::FileContentQuery& q) {
    return Invoke<ops::ReadFile>(c_, {task}, q);
  }
  Result<proto::UploadStatus> Upload(std::string_view task, const proto::UploadQuery& q) {
    return Invoke<ops::GetUpload>(c_, {task}, q);
  }
  Result<proto::UploadStatus> PutChunk(std::string_view task, const proto::UploadChunkQuery& q,
                                       const proto::Bytes& chunk) {
    return Invoke<ops::PutUploadChunk>(c_, {task}, q, chunk);
  }
  Result<proto::CommittedFile> Commit(std::string_view task, const proto::UploadCommitQuery& q,
                                      const proto::UploadCommit& commit) {
    return Invoke<ops::CommitUpload>(c_, {task}, q, commit);
  }

 private:
  Client& c_;
};

class NodesApi {
 public:
  explicit NodesApi(Client& c) : c_(c) {}
  Result<proto::NodeList> List() { return Invoke<ops::ListNodes>(c_, {}); }
  Result<proto::NodeView> Get(std::string_view name) { return Invoke<ops::GetNode>(c_, {name}); }
  Result<proto::NodeView> Cordon(std::string_view name) {
    return Invoke<ops::CordonNode>(c_, {name});
  }
  Result<proto::NodeView> Uncordon(std::string_view name) {
    return Invoke<ops::UncordonNode>(c_, {name});
  }
  Result<proto::NodeView> Drain(std::string_view name) {
    return Invoke<ops::DrainNode>(c_, {name});
  }
  Result<proto::NodeMetrics> Metrics(std::string_view name, const proto::HistoryQuery& q) {
    return Invoke<ops::GetNodeMetrics>(c_, {name}, q);
  }
  Result<proto::UsageOverview> Usage() { return Invoke<ops::GetUsage>(c_, {}); }

 private:
  Client& c_;
};

// The agent-facing routes (an agent's own key, or an admin's).
class AgentApi {
 public:
  explicit AgentApi(Client& c) : c_(c) {}
  Result<proto::NodeView> Register(const proto::NodeRegistration& r) {
    return Invoke<ops::RegisterNode>(c_, {}, {}, r);
  }
  Result<proto::HeartbeatAck> Heartbeat(std::string_view node) {
    return Invoke<ops::Heartbeat>(c_, {node});
  }
  Result<proto::Assignments> Watch(std::string_view node, const proto::AssignmentsQuery& q) {
    return Invoke<ops::WatchAssignments>(c_, {node}, q);
  }
  Result<proto::Task> Report(std::string_view task, const proto::TaskReport& r) {
    return Invoke<ops::ReportTask>(c_, {task}, {}, r);
  }
  Result<proto::TelemetryAck> Telemetry(std::string_view node, const proto::TelemetryBatch& b) {
    return Invoke<ops::PushTelemetry>(c_, {node}, {}, b);
  }
  Result<proto::AgentCredentials> Join(const proto::JoinRequest& r) {
    return Invoke<ops::JoinNode>(c_, {}, {}, r);
  }

 private:
  Client& c_;
};

class AccountsApi {
 public:
  explicit AccountsApi(Client& c) : c_(c) {}
  Result<proto::WhoAmI> WhoAmI() { return Invoke<ops::GetWhoAmI>(c_, {}); }
  Result<proto::ProjectView> CreateProject(const proto::ProjectCreate& p) {
    return Invoke<ops::CreateProject>(c_, {}, {}, p);
  }
  Result<proto::ProjectList> ListProjects() { return Invoke<ops::ListProjects>(c_, {}); }
  Result<proto::ProjectView> GetProject(std::string_view id) {
    return Invoke<ops::GetProject>(c_, {id});
  }
  Result<proto::ProjectView> PatchProject(std::string_view id, const proto::ProjectPatch& p) {
    return Invoke<ops::PatchProject>(c_, {id}, {}, p);
  }
  Result<proto::UserView> CreateUser(const proto::UserCreate& u) {
    return Invoke<ops::CreateUser>(c_, {}, {}, u);
  }
  Result<proto::UserList> ListUsers() { return Invoke<ops::ListUsers>(c_, {}); }
  Result<proto::UserView> PatchUser(std::string_view id, const proto::UserPatch& p) {
    return Invoke<ops::PatchUser>(c_, {id}, {}, p);
  }
  Result<proto::NewAccessKey> CreateKey(std::string_view user, const proto::KeyCreate& k) {
    return Invoke<ops::CreateKey>(c_, {user}, {}, k);
  }
  Result<proto::AccessKeyList> ListKeys(std::string_view user) {
    return Invoke<ops::ListKeys>(c_, {user});
  }
  Result<proto::AccessKeyView> RevokeKey(std::string_view access_key) {
    return Invoke<ops::RevokeKey>(c_, {access_key});
  }
  Result<proto::NewJoinToken> CreateJoinToken(const proto::JoinTokenCreate& t) {
    return Invoke<ops::CreateJoinToken>(c_, {}, {}, t);
  }
  Result<proto::JoinTokenList> ListJoinTokens() { return Invoke<ops::ListJoinTokens>(c_, {}); }
  Result<proto::JoinTokenView> RevokeJoinToken(std::string_view id) {
    return Invoke<ops::RevokeJoinToken>(c_, {id});
  }

 private:
  Client& c_;
};

class BillingApi {
 public:
  explicit BillingApi(Client& c) : c_(c) {}
  Result<proto::BalanceView> Balance(std::string_view project) {
    return Invoke<ops::GetBalance>(c_, {project});
  }
  Result<proto::LedgerEntryView> Credit(std::string_view project, const proto::CreditRequest& r) {
    return Invoke<ops::AddCredit>(c_, {project}, {}, r);
  }
  Result<proto::LedgerPage> Ledger(std::string_view project, const proto::LedgerQuery& q) {
    return Invoke<ops::GetLedger>(c_, {project}, q);
  }
  Result<proto::StatementView> Statement(std::string_view project, const proto::PeriodQuery& q) {
    return Invoke<ops::GetStatement>(c_, {project}, q);
  }
  Result<proto::PriceList> Prices() { return Invoke<ops::ListPrices>(c_, {}); }
  Result<proto::PriceView> SetPrice(const proto::PriceSet& p) {
    return Invoke<ops::SetPrice>(c_, {}, {}, p);
  }

 private:
  Client& c_;
};

inline TasksApi Client::Tasks() { return TasksApi(*this); }
inline FilesApi Client::Files() { return FilesApi(*this); }
inline NodesApi Client::Nodes() { return NodesApi(*this); }
inline AgentApi Client::Agent() { return AgentApi(*this); }
inline AccountsApi Client::Accounts() { return AccountsApi(*this); }
inline BillingApi Client::Billing() { return BillingApi(*this); }

}  // namespace gpupool::api
