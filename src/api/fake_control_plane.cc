// The in-memory ControlPlane for the API's tests (see fake_control_plane.h).
#include "api/fake_control_plane.h"

#include <algorithm>

namespace gpupool::api::testing {
namespace {

const std::set<std::string>& NonServiceCalls() {
  static const std::set<std::string> kNames = {"LookupKey", "ConsumeNonce", "ObserveRequest",
                                               "MetricsText", "Healthy"};
  return kNames;
}

tl::unexpected<Error> TaskNotFound(const std::string& id) {
  return NotFound("task '" + id + "' not found");
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Setup and records

void FakeControlPlane::AddKey(const std::string& access_key, const std::string& secret,
                              server::Caller caller, bool revoked) {
  std::lock_guard lock(mu_);
  KeyEntry& e = keys_[access_key];
  e.key.access_key = access_key;
  e.key.user_id = caller.user_id;
  e.key.sealed_secret = "sealed:" + secret;
  e.key.revoked_ms = revoked ? 1 : 0;
  e.secret = secret;
  caller.access_key = access_key;
  e.caller = std::move(caller);
}

void FakeControlPlane::AddTask(Task task) {
  std::lock_guard lock(mu_);
  if (task.seq == 0) task.seq = next_seq_;
  next_seq_ = std::max(next_seq_, task.seq + 1);
  if (task.id.empty()) task.id = "t-" + std::to_string(task.seq);
  tasks_[task.seq] = std::move(task);
}

void FakeControlPlane::AddNode(server::NodeView node) {
  std::lock_guard lock(mu_);
  nodes_[node.info.node.name] = std::move(node);
}

void FakeControlPlane::AddProject(Project project) {
  std::lock_guard lock(mu_);
  projects_[project.id] = std::move(project);
}

void FakeControlPlane::AddUser(User user) {
  std::lock_guard lock(mu_);
  users_[user.id] = std::move(user);
}

void FakeControlPlane::SetHealthy(bool healthy) {
  std::lock_guard lock(mu_);
  healthy_ = healthy;
}

void FakeControlPlane::SetDeferWrites(bool defer) {
  std::lock_guard lock(mu_);
  defer_ = defer;
}

size_t FakeControlPlane::RunDeferred() {
  std::deque<std::function<void()>> pending;
  {
    std::lock_guard lock(mu_);
    pending.swap(deferred_);
  }
  for (auto& fn : pending) fn();
  return pending.size();
}

size_t FakeControlPlane::DeferredCount() const {
  std::lock_guard lock(mu_);
  return deferred_.size();
}

std::vector<std::string> FakeControlPlane::Calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

std::vector<std::string> FakeControlPlane::ServiceCalls() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const std::string& c : calls_) {
    if (!NonServiceCalls().count(c)) out.push_back(c);
  }
  return out;
}

std::vector<FakeControlPlane::NonceUse> FakeControlPlane::Nonces() const {
  std::lock_guard lock(mu_);
  return nonces_;
}

std::vector<FakeControlPlane::Observation> FakeControlPlane::Observations() const {
  std::lock_guard lock(mu_);
  return observations_;
}

void FakeControlPlane::ClearRecords() {
  std::lock_guard lock(mu_);
  calls_.clear();
  nonces_.clear();
  observations_.clear();
}

server::TaskSpec FakeControlPlane::last_spec() const {
  std::lock_guard lock(mu_);
  return last_spec_;
}
server::TaskFilter FakeControlPlane::last_filter() const {
  std::lock_guard lock(mu_);
  return last_filter_;
}
Node FakeControlPlane::last_node() const {
  std::lock_guard lock(mu_);
  return last_node_;
}
Project FakeControlPlane::last_project() const {
  std::lock_guard lock(mu_);
  return last_project_;
}
User FakeControlPlane::last_user() const {
  std::lock_guard lock(mu_);
  return last_user_;
}
Price FakeControlPlane::last_price() const {
  std::lock_guard lock(mu_);
  return last_price_;
}
server::Caller FakeControlPlane::last_caller() const {
  std::lock_guard lock(mu_);
  return last_caller_;
}

void FakeControlPlane::Record(const char* name, const server::Caller* caller) {
  calls_.emplace_back(name);
  if (caller != nullptr) last_caller_ = *caller;
}

void FakeControlPlane::Finish(std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    if (defer_) {
      deferred_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

std::vector<LedgerEntry> FakeControlPlane::EntriesLocked(const std::string& project_id) const {
  std::vector<LedgerEntry> out;
  for (const LedgerEntry& e : ledger_) {
    if (e.project_id == project_id) out.push_back(e);
  }
  return out;
}

// ------------------------------------------------------------------------------------------
// Authentication

Result<server::KeyGrant> FakeControlPlane::LookupKey(const std::string& access_key) {
  std::lock_guard lock(mu_);
  Record("LookupKey");
  const auto it = keys_.find(access_key);
  if (it == keys_.end()) {
    return MakeError(ErrorCode::kUnauthenticated, "unknown access key '" + access_key + "'");
  }
  if (it->second.key.revoked_ms != 0) {
    return MakeError(ErrorCode::kUnauthenticated, "access key '" + access_key + "' is revoked");
  }
  return server::KeyGrant{it->second.caller, it->second.secret};
}

Status FakeControlPlane::ConsumeNonce(const std::string& access_key, const std::string& nonce,
                                      int64_t timestamp_ms, bool durable) {
  std::lock_guard lock(mu_);
  Record("ConsumeNonce");
  nonces_.push_back({access_key, nonce, timestamp_ms, durable});
  if (!seen_nonces_.insert({access_key, nonce}).second) {
    return MakeError(ErrorCode::kUnauthenticated,
                     "nonce '" + nonce + "' was already used: the request is a replay");
  }
  return {};
}

// ------------------------------------------------------------------------------------------
// Tasks

void FakeControlPlane::SubmitTask(const server::Caller& caller, server::TaskSpec spec,
                                  server::Done<Task> done) {
  Task task;
  {
    std::lock_guard lock(mu_);
    Record("SubmitTask", &caller);
    last_spec_ = spec;
    task.seq = next_seq_++;
    task.id = "t-" + std::to_string(task.seq);
    task.project_id = !spec.project_id.empty()  ? spec.project_id
                      : caller.projects.empty() ? std::string("default")
                                                : caller.projects.front();
    task.user_id = caller.user_id;
    task.name = spec.name;
    task.request = spec.request;
    task.image = spec.image;
    task.command = spec.command;
    task.disk_gib = spec.disk_gib;
    task.max_runtime_ms = spec.max_runtime_ms;
    task.stop_when = spec.stop_when;
    task.restartable = spec.restartable;
    task.held = spec.hold;
    task.reason = "waiting for the scheduler";
    task.created_ms = 1000;
    task.updated_ms = 1000;
    tasks_[task.seq] = task;
    events_.push_back({task.id, 1000, TaskState::kPending, TaskState::kPending, "submitted"});
  }
  Finish([done = std::move(done), task]() { done(task); });
}

Result<server::TaskView> FakeControlPlane::GetTask(const server::Caller& caller,
                                                   const std::string& id) {
  std::lock_guard lock(mu_);
  Record("GetTask", &caller);
  for (const auto& [seq, task] : tasks_) {
    if (task.id != id) continue;
    server::TaskView view;
    view.task = task;
    if (task.state == TaskState::kPending) {
      view.queue_position = 1;
      view.pending_reason = "3 nodes: no GPU with 470 milli free";
      view.pending_nodes = {{"no GPU with 470 milli free", 3}};
    }
    return view;
  }
  return TaskNotFound(id);
}

Result<server::TaskPage> FakeControlPlane::ListTasks(const server::Caller& caller,
                                                     const server::TaskFilter& filter) {
  std::lock_guard lock(mu_);
  Record("ListTasks", &caller);
  last_filter_ = filter;
  server::TaskPage page;
  for (auto it = tasks_.upper_bound(filter.after_seq); it != tasks_.end(); ++it) {
    const Task& t = it->second;
    if (!filter.project_id.empty() && t.project_id != filter.project_id) continue;
    if (!filter.node.empty() && (!t.placement || t.placement->node != filter.node)) continue;
    if (!filter.states.empty() &&
        std::find(filter.states.begin(), filter.states.end(), t.state) == filter.states.end()) {
      continue;
    }
    if (static_cast<int>(page.tasks.size()) == filter.limit) {
      page.next_after_seq = page.tasks.back().seq;
      break;
    }
    page.tasks.push_back(t);
  }
  return page;
}

void FakeControlPlane::StopTask(const server::Caller& caller, const std::string& id,
                                server::Done<Task> done) {
  Result<Task> result = TaskNotFound(id);
  {
    std::lock_guard lock(mu_);
    Record("StopTask", &caller);
    for (auto& [seq, task] : tasks_) {
      if (task.id != id) continue;
      if (IsTerminal(task.state)) {
        result =
            MakeError(ErrorCode::kFailedPrecondition,
                      "task '" + id + "' is already " + std::string(TaskStateName(task.state)));
      } else {
        task.state = TaskState::kStopped;
        task.reason = "stopped by " + caller.user_id;
        result = task;
      }
    }
  }
  Finish([done = std::move(done), result]() { done(result); });
}

void FakeControlPlane::ReleaseTask(const server::Caller& caller, const std::string& id,
                                   server::Done<Task> done) {
  Result<Task> result = TaskNotFound(id);
  {
    std::lock_guard lock(mu_);
    Record("ReleaseTask", &caller);
    for (auto& [seq, task] : tasks_) {
      if (task.id != id) continue;
      if (!task.held) {
        result = MakeError(ErrorCode::kFailedPrecondition, "task '" + id + "' is not held");
      } else {
        task.held = false;
        task.reason = "released by " + caller.user_id;
        result = task;
      }
    }
  }
  Finish([done = std::move(done), result]() { done(result); });
}

void FakeControlPlane::DeleteTask(const server::Caller& caller, const std::string& id,
                                  server::DoneStatus done) {
  Status result = TaskNotFound(id);
  {
    std::lock_guard lock(mu_);
    Record("DeleteTask", &caller);
    for (auto it = tasks_.begin(); it != tasks_.end(); ++it) {
      if (it->second.id != id) continue;
      if (!IsTerminal(it->second.state)) {
        result = MakeError(ErrorCode::kFailedPrecondition,
                           "task '" + id + "' is " + std::string(TaskStateName(it->second.state)) +
                               "; only a terminal task may be deleted");
      } else {
        tasks_.erase(it);
        result = {};
      }
      break;
    }
  }
  Finish([done = std::move(done), result]() { done(result); });
}

Result<std::vector<TaskEvent>> FakeControlPlane::TaskEvents(const server::Caller& caller,
                                                            const std::string& id) {
  std::lock_guard lock(mu_);
  Record("TaskEvents", &caller);
  std::vector<TaskEvent> out;
  for (const TaskEvent& e : events_) {
    if (e.task_id == id) out.push_back(e);
  }
  if (out.empty()) return TaskNotFound(id);
  return out;
}

// ------------------------------------------------------------------------------------------
// Nodes

std::vector<server::NodeView> FakeControlPlane::ListNodes(const server::Caller& caller) {
  std::lock_guard lock(mu_);
  Record("ListNodes", &caller);
  std::vector<server::NodeView> out;
  for (const auto& [name, node] : nodes_) out.push_back(node);
  return out;
}

Result<server::NodeView> FakeControlPlane::GetNode(const server::Caller& caller,
                                                   const std::string& name) {
  std::lock_guard lock(mu_);
  Record("GetNode", &caller);
  const auto it = nodes_.find(name);
  if (it == nodes_.end()) return NotFound("node '" + name + "' not found");
  return it->second;
}

void FakeControlPlane::SetCordon(const server::Caller& caller, const std::string& name,
                                 bool cordoned, server::Done<server::NodeView> done) {
  Result<server::NodeView> result = NotFound("node '" + name + "' not found");
  {
    std::lock_guard lock(mu_);
    Record(cordoned ? "Cordon" : "Uncordon", &caller);
    if (auto it = nodes_.find(name); it != nodes_.end()) {
      it->second.info.node.schedulable = !cordoned;
      result = it->second;
    }
  }
  Finish([done = std::move(done), result]() { done(result); });
}

void FakeControlPlane::DrainNode(const server::Caller& caller, const std::string& name,
                                 server::Done<server::NodeView> done) {
  Result<server::NodeView> result = NotFound("node '" + name + "' not found");
  {
    std::lock_guard lock(mu_);
    Record("DrainNode", &caller);
    if (auto it = nodes_.find(name); it != nodes_.end()) {
      it->second.info.node.schedulable = false;
      it->second.info.draining = true;
      result = it->second;
    }
  }
  Finish([done = std::move(done), result]() { done(result); });
}

void FakeControlPlane::RegisterNode(const server::Caller& caller, Node node,
                                    server::Done<server::NodeView> done) {
  server::NodeView view;
  {
    std::lock_guard lock(mu_);
    Record("RegisterNode", &caller);
    last_node_ = node;
    view.info.node = std::move(node);
    view.info.registered_ms = 1000;
    view.cpu_free_milli = view.info.node.cpu_milli;
    view.memory_free_mib = view.info.node.memory_mib;
    view.gpu_milli_free = static_cast<int64_t>(view.info.node.gpus.size()) * 1000;
    nodes_[view.info.node.name] = view;
  }
  Finish([done = std::move(done), view]() { done(view); });
}

Status FakeControlPlane::Heartbeat(const server::Caller& caller, const std::string& name) {
  std::lock_guard lock(mu_);
  Record("Heartbeat", &caller);
  if (auto it = nodes_.find(name); it != nodes_.end()) {
    it->second.info.last_heartbeat_ms = 2000;
    return {};
  }
  return NotFound("node '" + name + "' not found");
}

std::pair<int64_t, int64_t> FakeControlPlane::LastWatch() const {
  std::lock_guard lock(mu_);
  return last_watch_;
}

void FakeControlPlane::WatchAssignments(const server::Caller& caller, const std::string& node,
                                        int64_t after_version, int64_t wait_ms,
                                        server::Done<server::NodeAssignments> done) {
  Result<server::NodeAssignments> result = NotFound("node '" + node + "' not found");
  {
    std::lock_guard lock(mu_);
    Record("WatchAssignments", &caller);
    last_watch_ = {after_version, wait_ms};
    if (nodes_.count(node)) {
      server::NodeAssignments a;
      a.node = node;
      a.version = 1;
      for (const auto& [seq, task] : tasks_) {
        if (task.placement && task.placement->node == node) a.tasks.push_back(task);
      }
      result = std::move(a);
    }
  }
  done(std::move(result));
}

void FakeControlPlane::ReportTask(const server::Caller& caller, const std::string& id, TaskState to,
                                  int64_t time_ms, int exit_code, std::string reason,
                                  int64_t /*bound_ms*/, server::Done<Task> done) {
  Result<Task> result = TaskNotFound(id);
  {
    std::lock_guard lock(mu_);
    Record("ReportTask", &caller);
    for (auto& [seq, task] : tasks_) {
      if (task.id != id) continue;
      if (!CanTransition(task.state, to)) {
        result =
            MakeError(ErrorCode::kFailedPrecondition, "task '" + id + "' cannot go from " +
                                                          std::string(TaskStateName(task.state)) +
                                                          " to " + std::string(TaskStateName(to)));
        break;
      }
      events_.push_back({id, time_ms, task.state, to, reason});
      task.state = to;
      task.exit_code = exit_code;
      task.reason = std::move(reason);
      task.updated_ms = time_ms;
      result = task;
    }
  }
  Finish([done = std::move(done), result]() { done(result); });
}

// ------------------------------------------------------------------------------------------
// Projects, users, keys

void FakeControlPlane::CreateProject(const server::Caller& caller, Project project,
                                     server::Done<Project> done) {
  Result<Project> result;
  {
    std::lock_guard lock(mu_);
    Record("CreateProject", &caller);
    last_project_ = project;
    if (project.id.empty()) project.id = "p-" + std::to_string(next_id_++);
    if (projects_.count(project.id)) {
      result = MakeError(ErrorCode::kAlreadyExists, "project '" + project.id + "' exists");
    } else {
      project.created_ms = 1000;
      projects_[project.id] = project;
      result = project;
    }
  }
  Finish([done = std::move(done), result]() { done(result); });
}

void FakeControlPlane::UpdateProject(const server::Caller& caller, Project project,
                                     server::Done<Project> done) {
  Result<Project> result = NotFound("project '" + project.id + "' not found");
  {
    std::lock_guard lock(mu_);
    Record("UpdateProject", &caller);
    last_project_ = project;
    if (auto it = projects_.find(project.id); it != projects_.end()) {
      it->second = project;
      result = project;
    }
  }
  Finish([done = std::move(done), result]() { done(result); });
}

Result<std::vector<Project>> FakeControlPlane::ListProjects(const server::Caller& caller) {
  std::lock_guard lock(mu_);
  Record("ListProjects", &caller);
  std::vector<Project> out;
  for (const auto& [id, p] : projects_) out.push_back(p);
  return out;
}

Result<Project> FakeControlPlane::GetProject(const server::Caller& caller, const std::string& id) {
  std::lock_guard lock(mu_);
  Record("GetProject", &caller);
  const auto it = projects_.find(id);
  if (it == projects_.end()) return NotFound("project '" + id + "' not found");
  return it->second;
}

void FakeControlPlane::CreateUser(const server::Caller& caller, User user,
                                  server::Done<User> done) {
  Result<User> result;
  {
    std::lock_guard lock(mu_);
    Record("CreateUser", &caller);
    last_user_ = user;
    if (user.id.empty()) user.id = "u-" + std::to_string(next_id_++);
    if (users_.count(user.id)) {
      result = MakeError(ErrorCode::kAlreadyExists, "user '" + user.id + "' exists");
    } else {
      users_[user.id] = user;
      result = user;
    }
  }
  Finish([done = std::move(done), result]() { done(result); });
}

void FakeControlPlane::UpdateUser(const server::Caller& caller, User user,
                                  server::Done<User> done) {
  Result<User> result = NotFound("user '" + user.id + "' not found");
  {
    std::lock_guard lock(mu_);
    Record("UpdateUser", &caller);
    last_user_ = user;
    if (auto it = users_.find(user.id); it != users_.end()) {
      it->second = user;
      result = user;
    }
  }
  Finish([done = std::move(done), result]() { done(result); });
}

Result<std::vector<User>> FakeControlPlane::ListUsers(const server::Caller& caller) {
  std::lock_guard lock(mu_);
  Record("ListUsers", &caller);
  std::vector<User> out;
  for (const auto& [id, u] : users_) out.push_back(u);
  return out;
}

void FakeControlPlane::CreateAccessKey(const server::Caller& caller, const std::string& user_id,
                                       std::string description,
                                       server::Done<server::NewAccessKey> done) {
  server::NewAccessKey created;
  {
    std::lock_guard lock(mu_);
    Record("CreateAccessKey", &caller);
    const std::string n = std::to_string(next_id_++);
    created.key.access_key = "AKFAKE" + n;
    created.key.user_id = user_id;
    created.key.description = std::move(description);
    created.key.sealed_secret = "sealed";
    created.key.created_ms = 1000;
    created.secret = "fake-secret-" + n;
    KeyEntry& e = keys_[created.key.access_key];
    e.key = created.key;
    e.secret = created.secret;
    e.caller.user_id = user_id;
    e.caller.access_key = created.key.access_key;
  }
  Finish([done = std::move(done), created]() { done(created); });
}

Result<std::vector<AccessKey>> FakeControlPlane::ListAccessKeys(const server::Caller& caller,
                                                                const std::string& user_id) {
  std::lock_guard lock(mu_);
  Record("ListAccessKeys", &caller);
  std::vector<AccessKey> out;
  for (const auto& [id, e] : keys_) {
    if (e.key.user_id == user_id) out.push_back(e.key);
  }
  return out;
}

void FakeControlPlane::RevokeAccessKey(const server::Caller& caller, const std::string& access_key,
                                       server::Done<AccessKey> done) {
  Result<AccessKey> result = NotFound("access key '" + access_key + "' not found");
  {
    std::lock_guard lock(mu_);
    Record("RevokeAccessKey", &caller);
    if (auto it = keys_.find(access_key); it != keys_.end()) {
      it->second.key.revoked_ms = 2000;
      result = it->second.key;
    }
  }
  Finish([done = std::move(done), result]() { done(result); });
}

// ------------------------------------------------------------------------------------------
// Billing

Result<server::Balance> FakeControlPlane::GetBalance(const server::Caller& caller,
                                                     const std::string& project_id) {
  std::lock_guard lock(mu_);
  Record("GetBalance", &caller);
  if (!projects_.count(project_id)) return NotFound("project '" + project_id + "' not found");
  server::Balance b;
  b.project_id = project_id;
  for (const LedgerEntry& e : EntriesLocked(project_id)) {
    (e.kind == LedgerKind::kCredit ? b.credits_micros : b.usage_micros) += e.amount_micros;
  }
  b.balance_micros = b.credits_micros - b.usage_micros;
  return b;
}

void FakeControlPlane::Credit(const server::Caller& caller, const std::string& project_id,
                              int64_t amount_micros, std::string note,
                              server::Done<LedgerEntry> done) {
  Result<LedgerEntry> result = NotFound("project '" + project_id + "' not found");
  {
    std::lock_guard lock(mu_);
    Record("Credit", &caller);
    if (projects_.count(project_id)) {
      LedgerEntry e;
      e.key = "credit:" + std::to_string(next_id_++);
      e.project_id = project_id;
      e.kind = LedgerKind::kCredit;
      e.amount_micros = amount_micros;
      e.detail = std::move(note);
      e.created_ms = 1000;
      ledger_.push_back(e);
      result = e;
    }
  }
  Finish([done = std::move(done), result]() { done(result); });
}

Result<std::vector<LedgerEntry>> FakeControlPlane::Ledger(const server::Caller& caller,
                                                          const std::string& project_id,
                                                          int64_t from_ms, int64_t to_ms,
                                                          int64_t offset, int64_t limit) {
  std::lock_guard lock(mu_);
  Record("Ledger", &caller);
  if (!projects_.count(project_id)) return NotFound("project '" + project_id + "' not found");
  std::vector<LedgerEntry> in_range;
  for (const LedgerEntry& e : EntriesLocked(project_id)) {
    if (e.created_ms >= from_ms && e.created_ms < to_ms) in_range.push_back(e);
  }
  std::vector<LedgerEntry> out;
  for (int64_t i = offset; i < static_cast<int64_t>(in_range.size()) && i < offset + limit; ++i) {
    out.push_back(in_range[static_cast<size_t>(i)]);
  }
  return out;
}

Result<server::TaskCost> FakeControlPlane::GetTaskCost(const server::Caller& caller,
                                                       const std::string& task_id) {
  std::lock_guard lock(mu_);
  Record("GetTaskCost", &caller);
  for (const auto& [seq, task] : tasks_) {
    if (task.id != task_id) continue;
    server::TaskCost cost;
    cost.task_id = task_id;
    cost.billed_until_ms = task.billed_until_ms;
    for (const LedgerEntry& e : ledger_) {
      if (e.task_id == task_id) {
        cost.cost_micros += e.amount_micros;
        cost.entries.push_back(e);
      }
    }
    return cost;
  }
  return TaskNotFound(task_id);
}

Result<server::Statement> FakeControlPlane::GetStatement(const server::Caller& caller,
                                                         const std::string& project_id,
                                                         int64_t from_ms, int64_t to_ms) {
  std::lock_guard lock(mu_);
  Record("GetStatement", &caller);
  if (!projects_.count(project_id)) return NotFound("project '" + project_id + "' not found");
  server::Statement s;
  s.project_id = project_id;
  s.from_ms = from_ms;
  s.to_ms = to_ms;
  for (const LedgerEntry& e : EntriesLocked(project_id)) {
    if (e.created_ms < from_ms || e.created_ms >= to_ms) continue;
    if (e.kind == LedgerKind::kCredit) {
      s.credits_micros += e.amount_micros;
    } else {
      s.usage_micros += e.amount_micros;
      s.by_task.emplace_back(e.task_id, e.amount_micros);
    }
  }
  return s;
}

Result<std::vector<Price>> FakeControlPlane::ListPrices(const server::Caller& caller) {
  std::lock_guard lock(mu_);
  Record("ListPrices", &caller);
  return prices_;
}

void FakeControlPlane::SetPrice(const server::Caller& caller, Price price,
                                server::Done<Price> done) {
  {
    std::lock_guard lock(mu_);
    Record("SetPrice", &caller);
    last_price_ = price;
    prices_.push_back(price);
  }
  Finish([done = std::move(done), price]() { done(price); });
}

// ------------------------------------------------------------------------------------------
// Operations

std::string FakeControlPlane::MetricsText() {
  std::lock_guard lock(mu_);
  Record("MetricsText");
  return "# HELP gpupool_up Whether the server is up.\n# TYPE gpupool_up gauge\ngpupool_up 1\n";
}

void FakeControlPlane::ObserveRequest(const std::string& route, int status, int64_t micros) {
  std::lock_guard lock(mu_);
  Record("ObserveRequest");
  observations_.push_back({route, status, micros});
}

bool FakeControlPlane::Healthy() {
  std::lock_guard lock(mu_);
  Record("Healthy");
  return healthy_;
}

// --- telemetry ---

void FakeControlPlane::SetLog(const std::string& task_id, std::string data) {
  std::lock_guard lock(mu_);
  logs_[task_id] = std::move(data);
}

server::NodeTelemetry FakeControlPlane::last_telemetry() const {
  std::lock_guard lock(mu_);
  return last_telemetry_;
}

server::LogRequest FakeControlPlane::last_log_request() const {
  std::lock_guard lock(mu_);
  return last_log_request_;
}

std::tuple<int64_t, int64_t, server::Resolution> FakeControlPlane::last_history_query() const {
  std::lock_guard lock(mu_);
  return last_history_query_;
}

Result<std::vector<server::OutputOffsets>> FakeControlPlane::PushTelemetry(
    const server::Caller& caller, server::NodeTelemetry batch) {
  std::lock_guard lock(mu_);
  Record("PushTelemetry", &caller);
  if (!nodes_.count(batch.node)) return NotFound("node '" + batch.node + "' not found");
  // Acknowledges every chunk whole: offset + size per stream.
  std::vector<server::OutputOffsets> out;
  for (const server::TaskTelemetry& t : batch.tasks) {
    server::OutputOffsets o;
    o.task_id = t.task_id;
    for (const server::OutputChunk& c : t.output) {
      const int64_t end = c.offset + static_cast<int64_t>(c.data.size());
      if (c.stream == server::OutputStream::kStdout) o.stdout_bytes = end;
      if (c.stream == server::OutputStream::kStderr) o.stderr_bytes = end;
      if (c.stream == server::OutputStream::kMetrics) o.metrics_bytes = end;
    }
    out.push_back(o);
  }
  last_telemetry_ = std::move(batch);
  return out;
}

void FakeControlPlane::ReadTaskLog(const server::Caller& caller, const std::string& id,
                                   server::LogRequest request,
                                   server::Done<server::LogSlice> done) {
  Result<server::LogSlice> result;
  {
    std::lock_guard lock(mu_);
    Record("ReadTaskLog", &caller);
    last_log_request_ = request;
    const auto it = logs_.find(id);
    if (it == logs_.end()) {
      result = NotFound("task '" + id + "' not found");
    } else {
      server::LogSlice s;
      s.task_id = id;
      const int64_t size = static_cast<int64_t>(it->second.size());
      s.slice.offset = std::min(request.offset, size);
      s.slice.data = it->second.substr(static_cast<size_t>(s.slice.offset),
                                       static_cast<size_t>(request.max_bytes));
      s.slice.next_offset = s.slice.offset + static_cast<int64_t>(s.slice.data.size());
      s.slice.size = size;
      s.complete = true;
      result = std::move(s);
    }
  }
  done(std::move(result));
}

Result<server::TaskMetrics> FakeControlPlane::GetTaskMetrics(const server::Caller& caller,
                                                             const std::string& id, int64_t from_ms,
                                                             int64_t to_ms,
                                                             server::Resolution resolution) {
  std::lock_guard lock(mu_);
  Record("GetTaskMetrics", &caller);
  last_history_query_ = {from_ms, to_ms, resolution};
  server::TaskMetrics m;
  m.task_id = id;
  m.resolution = resolution;
  server::UsagePoint p;
  p.time_ms = from_ms;
  p.samples = 1;
  p.mean = {500, 128, server::kUnknown, 0};
  p.max = p.mean;
  m.usage.push_back(p);
  m.reported.push_back({from_ms, {{"step", 10}, {"val_acc", 0.5}}});
  m.latest = {{"step", 10}, {"val_acc", 0.5}};
  return m;
}

Result<server::NodeMetrics> FakeControlPlane::GetNodeMetrics(const server::Caller& caller,
                                                             const std::string& name,
                                                             int64_t from_ms, int64_t to_ms,
                                                             server::Resolution resolution) {
  std::lock_guard lock(mu_);
  Record("GetNodeMetrics", &caller);
  last_history_query_ = {from_ms, to_ms, resolution};
  if (!nodes_.count(name)) return NotFound("node '" + name + "' not found");
  server::NodeMetrics m;
  m.node = name;
  m.resolution = resolution;
  return m;
}

Result<server::UsageOverview> FakeControlPlane::GetUsage(const server::Caller& caller) {
  std::lock_guard lock(mu_);
  Record("GetUsage", &caller);
  server::UsageOverview o;
  for (const auto& [name, view] : nodes_) {
    server::NodeSample latest{{1000, {2000, 4096, 50, server::kUnknown}}, {}};
    for (size_t i = 0; i < view.info.node.gpus.size(); ++i) {
      latest.gpus.push_back({1000, {50, server::kUnknown}});
    }
    o.nodes.push_back({view.info, latest});
  }
  for (const auto& [seq, t] : tasks_) {
    if (t.state != TaskState::kRunning) continue;
    o.tasks.push_back(
        {t, server::UsageSample{1000, {500, 128, server::kUnknown, 0}}, {{"loss", 0.25}}});
  }
  return o;
}

}  // namespace gpupool::api::testing
