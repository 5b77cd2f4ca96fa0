// A hand-written in-memory server::ControlPlane for the API's tests: maps instead of a store,
// every call recorded by name (and the arguments of the last one of each kind), and write
// callbacks that can be held back and released from another thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "server/control_plane.h"

namespace gpupool::api::testing {

class FakeControlPlane : public server::ControlPlane {
 public:
  struct Observation {
    std::string route;
    int status = 0;
    int64_t micros = 0;
  };
  struct NonceUse {
    std::string access_key;
    std::string nonce;
    int64_t timestamp_ms = 0;
    bool durable = false;
  };

  // --- setup ---
  void AddKey(const std::string& access_key, const std::string& secret, server::Caller caller,
              bool revoked = false);
  void AddTask(Task task);
  void AddNode(server::NodeView node);
  void AddProject(Project project);
  void AddUser(User user);
  void SetHealthy(bool healthy);
  // What ReadTaskLog serves for a task (every stream alike; the task must exist).
  void SetLog(const std::string& task_id, std::string data);
  // When on, write callbacks are queued instead of called; RunDeferred calls them.
  void SetDeferWrites(bool defer);
  size_t RunDeferred();
  size_t DeferredCount() const;

  // --- what happened ---
  std::vector<std::string> Calls() const;
  // Calls other than authentication and operations (LookupKey, ConsumeNonce, ObserveRequest,
  // MetricsText, Healthy): the ones that read or change the services.
  std::vector<std::string> ServiceCalls() const;
  // The (after_version, wait_ms) of the last WatchAssignments; (-1, -1) before any.
  std::pair<int64_t, int64_t> LastWatch() const;
  std::vector<NonceUse> Nonces() const;
  std::vector<Observation> Observations() const;
  void ClearRecords();

  server::TaskSpec last_spec() const;
  server::TaskFilter last_filter() const;
  Node last_node() const;
  Project last_project() const;
  User last_user() const;
  Price last_price() const;
  server::Caller last_caller() const;
  server::NodeTelemetry last_telemetry() const;
  server::LogRequest last_log_request() const;
  // The (from_ms, to_ms, resolution) of the last GetTaskMetrics or GetNodeMetrics.
  std::tuple<int64_t, int64_t, server::Resolution> last_history_query() const;

  // --- ControlPlane ---
  Result<server::KeyGrant> LookupKey(const std::string& access_key) override;
  Status ConsumeNonce(const std::string& access_key, const std::string& nonce, int64_t timestamp_ms,
                      bool durable) override;
  void SubmitTask(const server::Caller& caller, server::TaskSpec spec,
                  server::Done<Task> done) override;
  Result<server::TaskView> GetTask(const server::Caller& caller, const std::string& id) override;
  Result<server::TaskPage> ListTasks(const server::Caller& caller,
                                     const server::TaskFilter& filter) override;
  void StopTask(const server::Caller& caller, const std::string& id,
                server::Done<Task> done) override;
  // Releases a pending held task; kFailedPrecondition for any other.
  void ReleaseTask(const server::Caller& caller, const std::string& id,
                   server::Done<Task> done) override;
  void DeleteTask(const server::Caller& caller, const std::string& id,
                  server::DoneStatus done) override;
  Result<std::vector<TaskEvent>> TaskEvents(const server::Caller& caller,
                                            const std::string& id) override;
  std::vector<server::NodeView> ListNodes(const server::Caller& caller) override;
  Result<server::NodeView> GetNode(const server::Caller& caller, const std::string& name) override;
  void SetCordon(const server::Caller& caller, const std::string& name, bool cordoned,
                 server::Done<server::NodeView> done) override;
  void DrainNode(const server::Caller& caller, const std::string& name,
                 server::Done<server::NodeView> done) override;
  void RegisterNode(const server::Caller& caller, Node node,
                    server::Done<server::NodeView> done) override;
  Status Heartbeat(const server::Caller& caller, const std::string& name) override;
  // Answers at once: version 1 and the tasks whose placement names the node.
  void WatchAssignments(const server::Caller& caller, const std::string& node,
                        int64_t after_version, int64_t wait_ms,
                        server::Done<server::NodeAssignments> done) override;
  void ReportTask(const server::Caller& caller, const std::string& id, TaskState to,
                  int64_t time_ms, int exit_code, std::string reason, int64_t bound_ms,
                  server::Done<Task> done) override;
  void CreateProject(const server::Caller& caller, Project project,
                     server::Done<Project> done) override;
  void UpdateProject(const server::Caller& caller, Project project,
                     server::Done<Project> done) override;
  Result<std::vector<Project>> ListProjects(const server::Caller& caller) override;
  Result<Project> GetProject(const server::Caller& caller, const std::string& id) override;
  void CreateUser(const server::Caller& caller, User user, server::Done<User> done) override;
  void UpdateUser(const server::Caller& caller, User user, server::Done<User> done) override;
  Result<std::vector<User>> ListUsers(const server::Caller& caller) override;
  void CreateAccessKey(const server::Caller& caller, const std::string& user_id,
                       std::string description, server::Done<server::NewAccessKey> done) override;
  Result<std::vector<AccessKey>> ListAccessKeys(const server::Caller& caller,
                                                const std::string& user_id) override;
  void RevokeAccessKey(const server::Caller& caller, const std::string& access_key,
                       server::Done<AccessKey> done) override;
  // Join tokens (fake_control_plane_join.cc): tokens are "JTFAKE<n>.secret<n>"; a join with one
  // that is not revoked mints key "AKAGENT<n>" (secret "agent-secret-<n>") whose caller is the
  // node's agent.
  void CreateJoinToken(const server::Caller& caller, std::string description, int64_t expires_in_ms,
                       server::Done<server::NewJoinToken> done) override;
  Result<std::vector<server::JoinTokenView>> ListJoinTokens(const server::Caller& caller) override;
  void RevokeJoinToken(const server::Caller& caller, const std::string& id,
                       server::Done<server::JoinTokenView> done) override;
  void JoinNode(const std::string& token, const std::string& node,
                server::Done<server::AgentCredentials> done) override;
  // The (description, expires_in_ms) of the last CreateJoinToken; the (token, node) of the last
  // JoinNode.
  std::pair<std::string, int64_t> last_join_token_request() const;
  std::pair<std::string, std::string> last_join() const;
  Result<server::Balance> GetBalance(const server::Caller& caller,
                                     const std::string& project_id) override;
  void Credit(const server::Caller& caller, const std::string& project_id, int64_t amount_micros,
              std::string note, server::Done<LedgerEntry> done) override;
  Result<std::vector<LedgerEntry>> Ledger(const server::Caller& caller,
                                          const std::string& project_id, int64_t from_ms,
                                          int64_t to_ms, int64_t offset, int64_t limit) override;
  Result<server::TaskCost> GetTaskCost(const server::Caller& caller,
                                       const std::string& task_id) override;
  Result<server::Statement> GetStatement(const server::Caller& caller,
                                         const std::string& project_id, int64_t from_ms,
                                         int64_t to_ms) override;
  Result<std::vector<Price>> ListPrices(const server::Caller& caller) override;
  void SetPrice(const server::Caller& caller, Price price, server::Done<Price> done) override;
  std::string MetricsText() override;
  void ObserveRequest(const std::string& route, int status, int64_t micros) override;
  bool Healthy() override;
  Result<std::vector<server::OutputOffsets>> PushTelemetry(const server::Caller& caller,
                                                           server::NodeTelemetry batch) override;
  void ReadTaskLog(const server::Caller& caller, const std::string& id, server::LogRequest request,
                   server::Done<server::LogSlice> done) override;
  Result<server::TaskMetrics> GetTaskMetrics(const server::Caller& caller, const std::string& id,
                                             int64_t from_ms, int64_t to_ms,
                                             server::Resolution resolution) override;
  Result<server::NodeMetrics> GetNodeMetrics(const server::Caller& caller, const std::string& name,
                                             int64_t from_ms, int64_t to_ms,
                                             server::Resolution resolution) override;
  // Every node with a sample (its GPUs at 50 %, memory unknown) and every running task with one
  // (GPU utilisation unknown) and a reported loss of 0.25.
  Result<server::UsageOverview> GetUsage(const server::Caller& caller) override;

 private:
  struct KeyEntry {
    AccessKey key;
    std::string secret;
    server::Caller caller;
  };

  void Record(const char* name, const server::Caller* caller = nullptr);
  // Calls `fn` now, or queues it (deferred writes); `mu_` must not be held.
  void Finish(std::function<void()> fn);
  std::vector<LedgerEntry> EntriesLocked(const std::string& project_id) const;

  mutable std::mutex mu_;
  std::vector<std::string> calls_;
  std::vector<NonceUse> nonces_;
  std::set<std::pair<std::string, std::string>> seen_nonces_;
  std::vector<Observation> observations_;
  std::map<std::string, KeyEntry> keys_;
  std::map<int64_t, Task> tasks_;  // by seq
  std::vector<TaskEvent> events_;
  std::map<std::string, server::NodeView> nodes_;
  std::pair<int64_t, int64_t> last_watch_{-1, -1};
  std::map<std::string, Project> projects_;
  std::map<std::string, User> users_;
  std::vector<LedgerEntry> ledger_;
  std::vector<Price> prices_;
  bool healthy_ = true;
  bool defer_ = false;
  std::deque<std::function<void()>> deferred_;
  int64_t next_seq_ = 1;
  int next_id_ = 1;

  server::TaskSpec last_spec_;
  server::TaskFilter last_filter_;
  Node last_node_;
  Project last_project_;
  User last_user_;
  Price last_price_;
  server::Caller last_caller_;
  server::NodeTelemetry last_telemetry_;
  server::LogRequest last_log_request_;
  std::tuple<int64_t, int64_t, server::Resolution> last_history_query_{-1, -1,
                                                                       server::Resolution::kRaw};
  std::map<std::string, std::string> logs_;

  std::map<std::string, server::NewJoinToken> join_tokens_;  // by id
  std::pair<std::string, int64_t> last_join_token_request_;
  std::pair<std::string, std::string> last_join_;
};

}  // namespace gpupool::api::testing
