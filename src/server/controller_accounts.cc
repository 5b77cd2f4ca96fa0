// Controller: projects, users, access keys, balances, the ledger, statements, prices and the
// operational endpoints (metrics, health).
#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <regex>
#include <utility>

#include "core/ssh_key.h"
#include "meter/meter.h"
#include "meter/price_table.h"
#include "os/sha256.h"
#include "proto/billing.h"
#include "server/controller.h"
#include "server/metric_families.h"

namespace gpupool::server {
namespace {

// Ids chosen by admins: short, URL- and shell-safe.
Status ValidateId(const std::string& field, const std::string& id) {
  static const std::regex kId("[a-z0-9][a-z0-9_.-]{0,62}");
  if (!std::regex_match(id, kId)) {
    return InvalidArgument(field + " must be 1..63 characters of a-z, 0-9, '_', '.', '-' "
                           "starting with a letter or digit, got '" + id + "'");
  }
  return {};
}

Status ValidateQuota(const Project& p) {
  if (p.max_gpu_milli < -1) {
    return InvalidArgument("max_gpu_milli must be ≥ 0 or -1 (unlimited), got " +
                           std::to_string(p.max_gpu_milli));
  }
  if (p.max_tasks < -1) {
    return InvalidArgument("max_tasks must be ≥ 0 or -1 (unlimited), got " +
                           std::to_string(p.max_tasks));
  }
  if (p.stop_grace_ms < 0) {
    return InvalidArgument("stop_grace_ms must be ≥ 0, got " + std::to_string(p.stop_grace_ms));
  }
  if (p.max_storage_bytes < -1) {
    return InvalidArgument("max_storage_bytes must be ≥ 0 or -1 (unlimited), got " +
                           std::to_string(p.max_storage_bytes));
  }
  return {};
}

// "name a → b, max_tasks 10 → 20": the fields an update changes.
std::string ProjectChanges(const Project& before, const Project& after) {
  std::string out;
  auto field = [&](std::string_view name, const std::string& from, const std::string& to) {
    if (from == to) return;
    out += (out.empty() ? "" : ", ") + std::string(name) + " " + from + " → " + to;
  };
  field("name", before.name, after.name);
  field("max_gpu_milli", std::to_string(before.max_gpu_milli), std::to_string(after.max_gpu_milli));
  field("max_tasks", std::to_string(before.max_tasks), std::to_string(after.max_tasks));
  field("stop_grace_ms", std::to_string(before.stop_grace_ms), std::to_string(after.stop_grace_ms));
  field("max_storage_bytes", std::to_string(before.max_storage_bytes),
        std::to_string(after.max_storage_bytes));
  return out.empty() ? "no change" : out;
}

std::string ProjectFacts(const Project& p) {
  return "name " + p.name + ", max_gpu_milli " + std::to_string(p.max_gpu_milli) +
         ", max_tasks " + std::to_string(p.max_tasks) + ", stop_grace_ms " +
         std::to_string(p.stop_grace_ms) + ", max_storage_bytes " +
         std::to_string(p.max_storage_bytes);
}

std::string UserFacts(const User& u) {
  std::string projects;
  for (const std::string& p : u.projects) projects += (projects.empty() ? "" : ",") + p;
  return "name " + u.name + ", role " + std::string(RoleName(u.role)) + ", projects " +
         (projects.empty() ? "none" : projects);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Projects and users.

void Controller::CreateProject(const Caller& caller, Project project, Done<Project> done) {
  if (auto ok = ValidateId("id", project.id); !ok) return done(tl::unexpected(ok.error()));
  if (auto ok = ValidateQuota(project); !ok) return done(tl::unexpected(ok.error()));
  std::unique_lock lock(mu_);
  if (auto ok = RequireAdmin(caller); !ok) return lock.unlock(), done(tl::unexpected(ok.error()));
  if (projects_.count(project.id)) {
    lock.unlock();
    return done(MakeError(ErrorCode::kAlreadyExists, "project " + project.id + " exists"));
  }
  if (project.name.empty()) project.name = project.id;
  project.created_ms = clock_.NowMs();
  store::WriteBatch batch;
  batch.projects.push_back(project);
  if (auto ok = store::ValidateBatch(batch); !ok) {
    return lock.unlock(), done(tl::unexpected(ok.error()));
  }
  projects_[project.id] = project;
  Audit(caller, "project.create", project.id, ProjectFacts(project), batch);
  Commit(std::move(batch), [done = std::move(done), project](Status) { done(project); });
}

void Controller::UpdateProject(const Caller& caller, Project project, Done<Project> done) {
  if (auto ok = ValidateQuota(project); !ok) return done(tl::unexpected(ok.error()));
  std::unique_lock lock(mu_);
  if (auto ok = RequireAdmin(caller); !ok) return lock.unlock(), done(tl::unexpected(ok.error()));
  auto it = projects_.find(project.id);
  if (it == projects_.end()) {
    lock.unlock();
    return done(NotFound("project " + project.id + " not found"));
  }
  Project p = it->second;
  if (!project.name.empty()) p.name = project.name;
  p.max_gpu_milli = project.max_gpu_milli;
  p.max_tasks = project.max_tasks;
  p.stop_grace_ms = project.stop_grace_ms;
  p.max_storage_bytes = project.max_storage_bytes;
  store::WriteBatch batch;
  batch.projects.push_back(p);
  if (auto ok = store::ValidateBatch(batch); !ok) {
    return lock.unlock(), done(tl::unexpected(ok.error()));
  }
  Audit(caller, "project.update", p.id, ProjectChanges(it->second, p), batch);
  it->second = p;
  RetryAll();  // a raised quota may let pending tasks run
  Commit(std::move(batch), [done = std::move(done), copy = p](Status) { done(copy); });
}

Result<std::vector<Project>> Controller::ListProjects(const Caller& caller) {
  std::lock_guard lock(mu_);
  std::vector<Project> out;
  for (const auto& [id, p] : projects_) {
    if (caller.InProject(id)) out.push_back(p);
  }
  return out;
}

Result<Project> Controller::GetProject(const Caller& caller, const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = projects_.find(id);
  if (it == projects_.end() || !caller.InProject(id)) return NotFound("project " + id + " not found");
  return it->second;
}

void Controller::CreateUser(const Caller& caller, User user, Done<User> done) {
  if (auto ok = ValidateId("id", user.id); !ok) return done(tl::unexpected(ok.error()));
  std::unique_lock lock(mu_);
  if (auto ok = RequireAdmin(caller); !ok) return lock.unlock(), done(tl::unexpected(ok.error()));
  if (users_.count(user.id)) {
    lock.unlock();
    return done(MakeError(ErrorCode::kAlreadyExists, "user " + user.id + " exists"));
  }
  for (const std::string& p : user.projects) {
    if (!projects_.count(p)) return lock.unlock(), done(NotFound("project " + p + " not found"));
  }
  if (user.name.empty()) user.name = user.id;
  user.created_ms = clock_.NowMs();
  store::WriteBatch batch;
  batch.users.push_back(user);
  if (auto ok = store::ValidateBatch(batch); !ok) {
    return lock.unlock(), done(tl::unexpected(ok.error()));
  }
  {
    std::lock_guard auth(auth_mu_);
    users_[user.id] = user;
  }
  Audit(caller, "user.create", user.id, UserFacts(user), batch);
  Commit(std::move(batch), [done = std::move(done), user](Status) { done(user); });
}

void Controller::UpdateUser(const Caller& caller, User user, Done<User> done) {
  std::unique_lock lock(mu_);
  if (auto ok = RequireAdmin(caller); !ok) return lock.unlock(), done(tl::unexpected(ok.error()));
  auto it = users_.find(user.id);
  if (it == users_.end()) return lock.unlock(), done(NotFound("user " + user.id + " not found"));
  for (const std::string& p : user.projects) {
    if (!projects_.count(p)) return lock.unlock(), done(NotFound("project " + p + " not found"));
  }
  User u = it->second;
  if (u.id == caller.user_id && user.role != Role::kAdmin) {
    lock.unlock();
    return done(MakeError(ErrorCode::kFailedPrecondition,
                          "an admin cannot take away their own admin role"));
  }
  if (!user.name.empty()) u.name = user.name;
  u.role = user.role;
  u.projects = user.projects;
  store::WriteBatch batch;
  batch.users.push_back(u);
  if (auto ok = store::ValidateBatch(batch); !ok) {
    return lock.unlock(), done(tl::unexpected(ok.error()));
  }
  Audit(caller, "user.update", u.id, UserFacts(it->second) + " → " + UserFacts(u), batch);
  {
    std::lock_guard auth(auth_mu_);
    it->second = u;
  }
  Commit(std::move(batch), [done = std::move(done), copy = u](Status) { done(copy); });
}

Result<std::vector<User>> Controller::ListUsers(const Caller& caller) {
  std::lock_guard lock(mu_);
  if (auto ok = RequireAdmin(caller); !ok) return tl::unexpected(ok.error());
  std::vector<User> out;
  for (const auto& [id, u] : users_) out.push_back(u);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Access keys. Members manage their own; admins anyone's. Another user's keys are "not found"
// to a member, like other tenants' things.

void Controller::CreateAccessKey(const Caller& caller, const std::string& user_id,
                                 std::string description, Done<NewAccessKey> done) {
  std::unique_lock lock(mu_);
  if ((!caller.IsAdmin() && user_id != caller.user_id) || !users_.count(user_id)) {
    lock.unlock();
    return done(NotFound("user " + user_id + " not found"));
  }
  NewAccessKey key;
  key.secret = NewSecretKey();
  key.key = AccessKey{.access_key = NewAccessKeyId(), .user_id = user_id,
                      .sealed_secret = secrets_.Seal(key.secret),
                      .description = std::move(description), .created_ms = clock_.NowMs()};
  {
    std::lock_guard auth(auth_mu_);
    keys_[key.key.access_key] = key.key;
    plain_secrets_[key.key.access_key] = key.secret;
  }
  store::WriteBatch batch;
  batch.access_keys.push_back(key.key);
  Audit(caller, "key.create", key.key.access_key, "of user " + user_id, batch);
  Commit(std::move(batch), [done = std::move(done), key = std::move(key)](Status) mutable {
    done(std::move(key));
  });
}

Result<std::vector<AccessKey>> Controller::ListAccessKeys(const Caller& caller,
                                                          const std::string& user_id) {
  std::lock_guard lock(mu_);
  if ((!caller.IsAdmin() && user_id != caller.user_id) || !users_.count(user_id)) {
    return NotFound("user " + user_id + " not found");
  }
  std::vector<AccessKey> out;
  for (const auto& [ak, k] : keys_) {
    if (k.user_id != user_id) continue;
    AccessKey shown = k;
    shown.sealed_secret.clear();  // never leaves the server, not even sealed
    out.push_back(std::move(shown));
  }
  return out;
}

void Controller::RevokeAccessKey(const Caller& caller, const std::string& access_key,
                                 Done<AccessKey> done) {
  std::unique_lock lock(mu_);
  auto it = keys_.find(access_key);
  if (it == keys_.end() || (!caller.IsAdmin() && it->second.user_id != caller.user_id)) {
    lock.unlock();
    return done(NotFound("access key " + access_key + " not found"));
  }
  AccessKey& k = it->second;
  {
    std::lock_guard auth(auth_mu_);
    if (k.revoked_ms == 0) k.revoked_ms = clock_.NowMs();
    plain_secrets_.erase(access_key);
  }
  store::WriteBatch batch;
  batch.access_keys.push_back(k);
  Audit(caller, "key.revoke", access_key, "of user " + k.user_id, batch);
  AccessKey shown = k;
  shown.sealed_secret.clear();
  Commit(std::move(batch), [done = std::move(done), shown](Status) { done(shown); });
}

// ---------------------------------------------------------------------------------------------
// SSH keys: like access keys, members manage their own and admins anyone's.

void Controller::AddSshKey(const Caller& caller, const std::string& user_id, std::string name,
                           const std::string& public_key, Done<SshKey> done) {
  Result<SshPublicKey> parsed = ParseSshPublicKey(public_key);
  if (!parsed) return done(tl::unexpected(parsed.error()));
  if (name.empty()) name = SshKeyNameOf(parsed->comment);
  if (!name.empty() && !IsSshKeyName(name)) {
    return done(
        InvalidArgument("name must be 1..64 characters of A-Z a-z 0-9 - _ ., not "
                        "starting with '.' or '-', got '" +
                        name + "'"));
  }
  SshKey key{.name = std::move(name),
             .public_key = parsed->Line(),
             .fingerprint = os::SshFingerprint(parsed->blob),
             .created_ms = clock_.NowMs()};

  std::unique_lock lock(mu_);
  auto it = users_.find(user_id);
  if ((!caller.IsAdmin() && user_id != caller.user_id) || it == users_.end()) {
    return lock.unlock(), done(NotFound("user " + user_id + " not found"));
  }
  User u = it->second;
  for (const SshKey& k : u.ssh_keys) {
    if (k.fingerprint == key.fingerprint) {
      return lock.unlock(), done(MakeError(ErrorCode::kAlreadyExists,
                                           "user " + user_id + " has this key already, as '" +
                                               k.name + "' (" + k.fingerprint + ")"));
    }
  }
  if (u.ssh_keys.size() >= kMaxSshKeysPerUser) {
    return lock.unlock(),
           done(MakeError(ErrorCode::kResourceExhausted,
                          "user " + user_id + " has " + std::to_string(u.ssh_keys.size()) +
                              " SSH keys, the most a user may have: remove one first"));
  }
  if (key.name.empty()) {
    for (size_t n = u.ssh_keys.size() + 1; key.name.empty(); ++n) {
      const std::string candidate = "key-" + std::to_string(n);
      if (std::none_of(u.ssh_keys.begin(), u.ssh_keys.end(),
                       [&](const SshKey& k) { return k.name == candidate; })) {
        key.name = candidate;
      }
    }
  }
  if (std::any_of(u.ssh_keys.begin(), u.ssh_keys.end(),
                  [&](const SshKey& k) { return k.name == key.name; })) {
    return lock.unlock(), done(MakeError(ErrorCode::kAlreadyExists,
                                         "user " + user_id + " has an SSH key named '" + key.name +
                                             "' already: give this one another --name"));
  }
  u.ssh_keys.push_back(key);
  store::WriteBatch batch;
  batch.users.push_back(u);
  Audit(caller, "ssh-key.add", user_id, "'" + key.name + "' " + key.fingerprint, batch);
  {
    std::lock_guard auth(auth_mu_);
    it->second = std::move(u);
  }
  Commit(std::move(batch), [done = std::move(done), key](Status) { done(key); });
}

Result<std::vector<SshKey>> Controller::ListSshKeys(const Caller& caller,
                                                    const std::string& user_id) {
  std::lock_guard lock(mu_);
  auto it = users_.find(user_id);
  if ((!caller.IsAdmin() && user_id != caller.user_id) || it == users_.end()) {
    return NotFound("user " + user_id + " not found");
  }
  return it->second.ssh_keys;
}

void Controller::RemoveSshKey(const Caller& caller, const std::string& user_id,
                              const std::string& name, Done<SshKey> done) {
  std::unique_lock lock(mu_);
  auto it = users_.find(user_id);
  if ((!caller.IsAdmin() && user_id != caller.user_id) || it == users_.end()) {
    return lock.unlock(), done(NotFound("user " + user_id + " not found"));
  }
  User u = it->second;
  auto key = std::find_if(u.ssh_keys.begin(), u.ssh_keys.end(),
                          [&](const SshKey& k) { return k.name == name; });
  if (key == u.ssh_keys.end()) {
    return lock.unlock(),
           done(NotFound("user " + user_id + " has no SSH key named '" + name + "'"));
  }
  const SshKey removed = *key;
  u.ssh_keys.erase(key);
  store::WriteBatch batch;
  batch.users.push_back(u);
  Audit(caller, "ssh-key.remove", user_id, "'" + removed.name + "' " + removed.fingerprint, batch);
  {
    std::lock_guard auth(auth_mu_);
    it->second = std::move(u);
  }
  Commit(std::move(batch), [done = std::move(done), removed](Status) { done(removed); });
}

std::vector<std::string> Controller::SshKeysOfProject(const Caller& caller,
                                                      const std::string& project_id) {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [id, u] : users_) {
    const bool member =
        std::find(u.projects.begin(), u.projects.end(), project_id) != u.projects.end();
    if (!member && id != caller.user_id) continue;
    for (const SshKey& k : u.ssh_keys) out.push_back(k.public_key);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Billing.

bool Controller::BillingEnabled() const {
  // A pool with no price set is free: balances then gate nothing.
  return std::any_of(prices_.begin(), prices_.end(),
                     [](const Price& p) { return p.micros_per_hour > 0; });
}

int64_t Controller::BalanceOf(const std::string& project_id) const {
  auto it = use_.find(project_id);
  return it == use_.end() ? 0 : it->second.credits_micros - it->second.usage_micros;
}

Result<Balance> Controller::GetBalance(const Caller& caller, const std::string& project_id) {
  std::lock_guard lock(mu_);
  if (!projects_.count(project_id) || !caller.InProject(project_id)) {
    return NotFound("project " + project_id + " not found");
  }
  Balance b;
  b.project_id = project_id;
  auto it = use_.find(project_id);
  if (it != use_.end()) {
    b.credits_micros = it->second.credits_micros;
    b.usage_micros = it->second.usage_micros;
  }
  b.balance_micros = b.credits_micros - b.usage_micros;
  return b;
}

void Controller::Credit(const Caller& caller, const std::string& project_id, int64_t amount_micros,
                        std::string note, Done<LedgerEntry> done) {
  if (amount_micros <= 0 || amount_micros > proto::kMaxCreditMicros) {
    return done(InvalidArgument("amount_micros must be 1.." +
                                std::to_string(proto::kMaxCreditMicros) + ", got " +
                                std::to_string(amount_micros)));
  }
  std::unique_lock lock(mu_);
  if (auto ok = RequireAdmin(caller); !ok) return lock.unlock(), done(tl::unexpected(ok.error()));
  if (!projects_.count(project_id)) {
    lock.unlock();
    return done(NotFound("project " + project_id + " not found"));
  }
  ProjectUse& use = use_[project_id];
  if (use.credits_micros > proto::kMaxCreditMicros - amount_micros) {
    lock.unlock();
    return done(InvalidArgument("amount_micros " + std::to_string(amount_micros) +
                                " would bring project " + project_id + "'s credits past " +
                                std::to_string(proto::kMaxCreditMicros)));
  }
  const int64_t now = clock_.NowMs();
  LedgerEntry e;
  e.key = "credit:" + project_id + ":" + std::to_string(now) + ":" + NewAccessKeyId();
  e.project_id = project_id;
  e.kind = LedgerKind::kCredit;
  e.amount_micros = amount_micros;
  e.from_ms = now;
  e.to_ms = now;
  e.detail = note.empty() ? "credit by " + caller.user_id : std::move(note);
  e.created_ms = now;
  use.credits_micros += amount_micros;
  if (use.credits_micros - use.usage_micros > 0) use.exhausted_since_ms = 0;
  store::WriteBatch batch;
  batch.ledger.push_back(e);
  Audit(caller, "credit.add", project_id,
        std::to_string(amount_micros) + " micros (" + e.detail + ")", batch);
  RetryAll();  // a project out of balance may run again
  Commit(std::move(batch), [done = std::move(done), e](Status) { done(e); });
}

void Controller::Ledger(const Caller& caller, const std::string& project_id, int64_t from_ms,
                        int64_t to_ms, int64_t offset, int64_t limit,
                        Done<std::vector<LedgerEntry>> done) {
  if (limit < 1 || limit > 1000) {
    return done(InvalidArgument("limit must be 1..1000, got " + std::to_string(limit)));
  }
  if (offset < 0) {
    return done(InvalidArgument("offset must be ≥ 0, got " + std::to_string(offset)));
  }
  {
    std::lock_guard lock(mu_);
    if (!projects_.count(project_id) || !caller.InProject(project_id)) {
      return done(NotFound("project " + project_id + " not found"));
    }
  }
  store::LedgerQuery q;
  q.project_id = project_id;
  q.from_ms = from_ms;
  q.to_ms = to_ms;
  q.offset = offset;
  q.limit = limit;
  ReadHistory<std::vector<LedgerEntry>>([this, q] { return store_.Ledger(q); }, std::move(done));
}

void Controller::ListAudit(const Caller& caller, const AuditFilter& filter,
                           Done<std::vector<AuditEntry>> done) {
  if (filter.limit < 1 || filter.limit > 1000) {
    return done(InvalidArgument("limit must be 1..1000, got " + std::to_string(filter.limit)));
  }
  if (filter.after_seq < 0) {
    return done(InvalidArgument("after must be ≥ 0, got " + std::to_string(filter.after_seq)));
  }
  if (auto ok = RequireAdmin(caller); !ok) return done(tl::unexpected(ok.error()));
  store::AuditQuery q;
  q.after_seq = filter.after_seq;
  q.limit = filter.limit;
  q.actor = filter.actor;
  q.target = filter.target;
  ReadHistory<std::vector<AuditEntry>>([this, q] { return store_.Audit(q); }, std::move(done));
}

void Controller::GetTaskCost(const Caller& caller, const std::string& task_id,
                             Done<TaskCost> done) {
  ReadTask(caller, task_id, [this, task_id, done = std::move(done)](Result<Task> task) {
    if (!task) return done(tl::unexpected(task.error()));
    TaskCost cost;
    cost.task_id = task_id;
    cost.billed_until_ms = task->billed_until_ms;
    cost.as_of_ms = clock_.NowMs();
    if (HoldsResources(task->state) && task->bound_ms > 0 &&
        cost.as_of_ms > task->billed_until_ms) {
      // What the next meter tick will bill, so that a running task's cost shows live.
      std::lock_guard lock(mu_);  // price_table_
      cost.accrued_micros =
          meter::CostMicros(price_table_, meter::UsageOf(task->request, TaskGpuModel(*task)),
                            task->bound_ms, task->billed_until_ms, cost.as_of_ms);
    }
    store::LedgerQuery q;
    q.project_id = task->project_id;
    q.task_id = task_id;
    q.limit = 1'000'000;
    ReadHistory<TaskCost>(
        [this, q, cost]() mutable -> Result<TaskCost> {
          auto entries = store_.Ledger(q);
          if (!entries) return tl::unexpected(entries.error());
          for (const LedgerEntry& e : *entries) cost.cost_micros += e.amount_micros;
          cost.entries = std::move(*entries);
          return cost;
        },
        done);
  });
}

namespace {

// The statement of `project_id` over [from_ms, to_ms) from the store's ledger, page by page.
Result<Statement> ReadStatement(store::Store& store, const std::string& project_id, int64_t from_ms,
                                int64_t to_ms) {
  Statement s;
  s.project_id = project_id;
  s.from_ms = from_ms;
  s.to_ms = to_ms;
  std::map<std::string, int64_t> by_task;
  store::LedgerQuery q;
  q.project_id = project_id;
  q.from_ms = from_ms;
  q.to_ms = to_ms;
  q.limit = 10'000;
  for (;; q.offset += q.limit) {
    auto page = store.Ledger(q);
    if (!page) return tl::unexpected(page.error());
    for (const LedgerEntry& e : *page) {
      if (e.kind == LedgerKind::kCredit) {
        s.credits_micros += e.amount_micros;
      } else {
        s.usage_micros += e.amount_micros;
        by_task[e.task_id] += e.amount_micros;
      }
    }
    if (static_cast<int64_t>(page->size()) < q.limit) break;
  }
  s.by_task.assign(by_task.begin(), by_task.end());
  std::stable_sort(s.by_task.begin(), s.by_task.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return s;
}

}  // namespace

void Controller::GetStatement(const Caller& caller, const std::string& project_id, int64_t from_ms,
                              int64_t to_ms, Done<Statement> done) {
  if (to_ms != 0 && to_ms <= from_ms) {
    return done(InvalidArgument("to_ms must be after from_ms, got " + std::to_string(from_ms) +
                                ".." + std::to_string(to_ms)));
  }
  {
    std::lock_guard lock(mu_);
    if (!projects_.count(project_id) || !caller.InProject(project_id)) {
      return done(NotFound("project " + project_id + " not found"));
    }
  }
  auto read = [this, project_id, from_ms, to_ms] {
    return ReadStatement(store_, project_id, from_ms, to_ms);
  };
  ReadHistory<Statement>(std::move(read), std::move(done));
}

Result<std::vector<Price>> Controller::ListPrices(const Caller&) {
  std::lock_guard lock(mu_);
  return prices_;
}

void Controller::SetPrice(const Caller& caller, Price price, Done<Price> done) {
  if (auto ok = meter::Validate(price); !ok) return done(tl::unexpected(ok.error()));
  price.resource = meter::CanonicalResource(price.resource);
  std::unique_lock lock(mu_);
  if (auto ok = RequireAdmin(caller); !ok) return lock.unlock(), done(tl::unexpected(ok.error()));
  const int64_t now = clock_.NowMs();
  if (price.effective_ms == 0) price.effective_ms = now;
  // Usage already billed stays billed at the old price; a price may not change the past.
  if (price.effective_ms < last_meter_ms_) {
    lock.unlock();
    return done(InvalidArgument("effective_ms must not be before the last metering at " +
                                std::to_string(last_meter_ms_) + ", got " +
                                std::to_string(price.effective_ms)));
  }
  auto same = std::find_if(prices_.begin(), prices_.end(), [&](const Price& p) {
    return p.resource == price.resource && p.effective_ms == price.effective_ms;
  });
  if (same != prices_.end()) {
    *same = price;
  } else {
    prices_.push_back(price);
  }
  std::sort(prices_.begin(), prices_.end(), [](const Price& a, const Price& b) {
    return std::tie(a.resource, a.effective_ms) < std::tie(b.resource, b.effective_ms);
  });
  price_table_ = meter::PriceTable(prices_);
  store::WriteBatch batch;
  batch.prices.push_back(price);
  Audit(caller, "price.set", price.resource,
        std::to_string(price.micros_per_hour) + " micros per hour from " +
            std::to_string(price.effective_ms),
        batch);
  Commit(std::move(batch), [done = std::move(done), price](Status) { done(price); });
}

// ---------------------------------------------------------------------------------------------
// Operations.

void Controller::CollectGauges(GaugeSnapshot& gauges) {
  // Runs under mu_, which every request waits for: one pass over the live tasks, one over the
  // nodes' GPUs and one over the projects, into a flat snapshot (no map, no lock of the
  // registry); the finished tasks are counted by the index.
  gauges.Include(metric::kTasks);
  for (const auto& [project, counts] : by_state_) {
    for (int s = 0; s < kTaskStateCount; ++s) {
      if (counts[static_cast<size_t>(s)] == 0) continue;
      gauges.Set(metric::kTasks, {project, std::string(TaskStateName(static_cast<TaskState>(s)))},
                 static_cast<double>(counts[static_cast<size_t>(s)]));
    }
  }
  struct Queue {
    int64_t depth = 0;
    int64_t oldest_ms = std::numeric_limits<int64_t>::max();
  };
  std::map<std::string, Queue> queue;            // by project
  std::map<std::string, int64_t> mig_allocated;  // by model name: MIG tasks count by their slices
  gauges.Include(metric::kTaskGpus);
  for (int64_t seq : live_) {
    const Task& t = tasks_.at(seq);
    if (t.state == TaskState::kPending && !t.held) {
      // A pending task's updated_ms is when it entered the queue: submitted, released or
      // re-queued (Transition, SubmitTask, ReleaseTask; nothing else changes it while pending).
      Queue& q = queue[t.project_id];
      ++q.depth;
      q.oldest_ms = std::min(q.oldest_ms, t.updated_ms);
    }
    if (!HoldsResources(t.state) || !t.placement) continue;
    // Only a MIG instance's milli depends on its GPU's model (a lookup of its node).
    const bool mig = t.request.Form() == GpuForm::kMig;
    const int64_t milli = mig ? TaskGpuMilli(t) : t.request.GpuMilli();
    if (milli == 0) continue;
    gauges.Set(metric::kTaskGpus, {t.project_id, t.id, t.placement->node},
               static_cast<double>(milli) / kMilliPerGpu);
    if (mig) mig_allocated[TaskGpuModel(t)] += milli;
  }
  gauges.Include(metric::kQueueDepth);
  gauges.Include(metric::kQueueOldest);
  gauges.Include(metric::kProjectBalance);
  gauges.Include(metric::kProjectUsage);
  const bool billing = BillingEnabled();
  for (const auto& [id, project] : projects_) {
    const auto q = queue.find(id);
    gauges.Set(metric::kQueueDepth, {id},
               q == queue.end() ? 0.0 : static_cast<double>(q->second.depth));
    if (q != queue.end()) {
      gauges.Set(metric::kQueueOldest, {id}, static_cast<double>(q->second.oldest_ms) / 1000);
    }
    const auto use = use_.find(id);
    const int64_t usage = use == use_.end() ? 0 : use->second.usage_micros;
    gauges.Set(metric::kProjectUsage, {id}, static_cast<double>(usage));  // the server's total
    if (billing) gauges.Set(metric::kProjectBalance, {id}, static_cast<double>(BalanceOf(id)));
  }
  // By the cluster's model ids (ClusterState::GpuModelId), named once at the end.
  std::vector<int64_t> allocated(static_cast<size_t>(cluster_.ModelCount()));
  std::vector<int64_t> total(allocated.size());
  gauges.Include(metric::kNodeStatus);
  for (const auto& [name, info] : nodes_) {
    for (NodeStatus s : {NodeStatus::kReady, NodeStatus::kLost}) {
      gauges.Set(metric::kNodeStatus, {name, std::string(NodeStatusName(s))},
                 info.status == s ? 1 : 0);
    }
    const int i = cluster_.FindNode(name);
    if (i < 0 || info.status != NodeStatus::kReady) continue;
    const std::vector<Gpu>& gpus = cluster_.node(i).gpus;
    for (size_t g = 0; g < gpus.size(); ++g) {
      const auto model = static_cast<size_t>(cluster_.GpuModelId(i, static_cast<int>(g)));
      total[model] += kMilliPerGpu;
      allocated[model] += gpus[g].mig_enabled ? 0 : kMilliPerGpu - gpus[g].milli_free;
    }
  }
  gauges.Include(metric::kGpus);
  gauges.Include(metric::kGpusAllocated);
  for (size_t model = 0; model < total.size(); ++model) {
    if (total[model] == 0) continue;
    const std::string& name = cluster_.ModelName(static_cast<int>(model));
    const auto mig = mig_allocated.find(name);
    const int64_t used = allocated[model] + (mig == mig_allocated.end() ? 0 : mig->second);
    gauges.Set(metric::kGpus, {name}, static_cast<double>(total[model]) / kMilliPerGpu);
    gauges.Set(metric::kGpusAllocated, {name}, static_cast<double>(used) / kMilliPerGpu);
  }
  CollectTelemetryGauges(gauges);
}

void Controller::SetConnectionFigures(std::function<ConnectionFigures()> figures) {
  connection_figures_ = std::move(figures);
}

std::string Controller::MetricsText() {
  // mu_ is held only to read the state; the registry's map work and the rendering come after.
  GaugeSnapshot gauges;
  {
    std::lock_guard lock(mu_);
    CollectGauges(gauges);
  }
  if (connection_figures_) {
    const ConnectionFigures f = connection_figures_();
    gauges.Set(metric::kHttpConnections, {"anonymous"}, static_cast<double>(f.anonymous));
    gauges.Set(metric::kHttpConnections, {"authenticated"},
               static_cast<double>(f.open - f.anonymous));
    gauges.Set(metric::kHttpConnectionsReserved, {}, static_cast<double>(f.reserved));
    gauges.Set(metric::kHttpConnectionsRefused, {"peer"}, static_cast<double>(f.refused_peer));
    gauges.Set(metric::kHttpConnectionsRefused, {"full"}, static_cast<double>(f.refused_full));
    gauges.Set(metric::kHttpConnectionsRefused, {"reserve"},
               static_cast<double>(f.refused_reserve));
    gauges.Set(metric::kHttpConnectionsRefused, {"user"}, static_cast<double>(f.refused_user));
  }
  metrics_.Publish(std::move(gauges));
  return metrics_.Render();
}

void Controller::ObserveRequest(const std::string& route, int status, int64_t micros) {
  metrics_.Observe(metric::kApiRequestDuration, {route, std::to_string(status)},
                   static_cast<double>(micros) / 1e6, LatencyBuckets());
}

bool Controller::Healthy() {
  std::lock_guard lock(mu_);
  return healthy_;
}

Status Controller::CheckDiskSpace() { return disk_.AdmitRequest(); }

}  // namespace gpupool::server
