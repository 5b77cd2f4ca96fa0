// MemoryStore: the records in ordered maps behind one mutex (tasks also by seq, for the pages); a
// batch is validated, then applied under the lock in WriteBatch's order, so readers never see half
// a batch.
#include "store/memory_store.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>

#include "store/validation.h"

namespace gpupool::store {

struct MemoryStore::Data {
  std::mutex mu;
  std::map<std::string, Project> projects;
  std::map<std::string, User> users;
  std::map<std::string, AccessKey> access_keys;
  std::map<std::string, JoinToken> join_tokens;
  std::map<std::string, NodeInfo> nodes;
  std::map<std::string, Task> tasks;
  std::map<int64_t, std::set<std::string>> task_ids_by_seq;  // ListTasks' order (seq, then id)
  std::map<std::pair<std::string, int64_t>, Price> prices;
  std::map<std::string, std::vector<TaskEvent>> events;  // by task, in insertion order
  std::vector<LedgerEntry> ledger;                       // insertion order
  std::set<std::string> ledger_keys;
  std::map<int64_t, AuditEntry> audit;     // by seq
  std::map<std::string, int64_t> credits;  // project id -> Σ credit entries
  std::map<std::string, int64_t> usage;    // project id -> Σ usage entries
  std::map<std::pair<std::string, std::string>, Nonce> nonces;
  std::map<std::string, std::string> settings;
  std::map<int64_t, TaskSnapshot> snapshots;  // by seq
  std::map<int64_t, Volume> volumes;          // by seq
  std::map<int64_t, Dataset> datasets;        // by seq

  void EraseSeq(const Task& t) {
    auto it = task_ids_by_seq.find(t.seq);
    it->second.erase(t.id);
    if (it->second.empty()) task_ids_by_seq.erase(it);
  }

  // Applies a validated batch; the caller holds `mu`.
  void Apply(WriteBatch& b) {
    for (Project& p : b.projects) projects[p.id] = std::move(p);
    for (User& u : b.users) users[u.id] = std::move(u);
    for (AccessKey& k : b.access_keys) access_keys[k.access_key] = std::move(k);
    for (JoinToken& t : b.join_tokens) join_tokens[t.id] = std::move(t);
    for (NodeInfo& n : b.nodes) nodes[n.node.name] = std::move(n);
    for (Task& t : b.tasks) {
      auto [it, added] = tasks.try_emplace(t.id);
      if (!added) EraseSeq(it->second);
      task_ids_by_seq[t.seq].insert(t.id);
      it->second = std::move(t);
    }
    for (Price& p : b.prices) prices[{p.resource, p.effective_ms}] = std::move(p);
    for (const std::string& id : b.deleted_tasks) {
      if (auto it = tasks.find(id); it != tasks.end()) {
        EraseSeq(it->second);
        tasks.erase(it);
      }
      events.erase(id);
      std::erase_if(snapshots, [&](const auto& entry) { return entry.second.task_id == id; });
    }
    for (TaskSnapshot& snap : b.snapshots) {
      std::erase_if(snapshots, [&](const auto& entry) { return entry.second.id == snap.id; });
      snapshots[snap.seq] = std::move(snap);
    }
    for (const std::string& id : b.deleted_snapshots) {
      std::erase_if(snapshots, [&](const auto& entry) { return entry.second.id == id; });
    }
    for (Volume& v : b.volumes) {
      std::erase_if(volumes, [&](const auto& entry) { return entry.second.id == v.id; });
      volumes[v.seq] = std::move(v);
    }
    for (const std::string& id : b.deleted_volumes) {
      std::erase_if(volumes, [&](const auto& entry) { return entry.second.id == id; });
    }
    for (Dataset& d : b.datasets) {
      std::erase_if(datasets, [&](const auto& entry) { return entry.second.id == d.id; });
      datasets[d.seq] = std::move(d);
    }
    for (const std::string& id : b.deleted_datasets) {
      std::erase_if(datasets, [&](const auto& entry) { return entry.second.id == id; });
    }
    for (TaskEvent& e : b.events) events[e.task_id].push_back(std::move(e));
    for (LedgerEntry& e : b.ledger) {
      if (!ledger_keys.insert(e.key).second) continue;  // an existing key is left as it is
      (e.kind == LedgerKind::kCredit ? credits : usage)[e.project_id] += e.amount_micros;
      ledger.push_back(std::move(e));
    }
    for (AuditEntry& e : b.audit) audit.try_emplace(e.seq, std::move(e));
    for (Nonce& n : b.nonces) nonces[{n.access_key, n.nonce}] = std::move(n);
    if (b.expire_nonces_before_ms > 0) {
      std::erase_if(nonces, [&](const auto& entry) {
        return entry.second.timestamp_ms < b.expire_nonces_before_ms;
      });
    }
    for (auto& [key, value] : b.settings) settings[key] = std::move(value);
  }
};

std::shared_ptr<MemoryStore::Data> MemoryStore::NewData() { return std::make_shared<Data>(); }

MemoryStore::MemoryStore() : MemoryStore(NewData()) {}

MemoryStore::MemoryStore(std::shared_ptr<Data> data) : data_(std::move(data)) {}

MemoryStore::~MemoryStore() { Close(); }

Result<Snapshot> MemoryStore::Load(const LoadOptions& options) {
  Snapshot s;
  std::lock_guard lock(data_->mu);
  for (const auto& [id, p] : data_->projects) s.projects.push_back(p);
  for (const auto& [id, u] : data_->users) s.users.push_back(u);
  for (const auto& [id, k] : data_->access_keys) s.access_keys.push_back(k);
  for (const auto& [id, t] : data_->join_tokens) s.join_tokens.push_back(t);
  for (const auto& [name, n] : data_->nodes) s.nodes.push_back(n);
  if (!data_->task_ids_by_seq.empty()) s.max_task_seq = data_->task_ids_by_seq.rbegin()->first;
  for (const auto& [seq, ids] : data_->task_ids_by_seq) {
    for (const std::string& id : ids) {
      const Task& t = data_->tasks.at(id);
      if (IsTerminal(t.state) && t.finished_ms < options.finished_since_ms) continue;
      s.tasks.push_back(t);
    }
  }
  for (const auto& [key, p] : data_->prices) s.prices.push_back(p);
  for (const auto& [key, n] : data_->nonces) s.nonces.push_back(n);
  if (!data_->audit.empty()) s.max_audit_seq = data_->audit.rbegin()->first;
  s.credits_micros = data_->credits;
  s.usage_micros = data_->usage;
  s.settings = data_->settings;
  for (const auto& [seq, snap] : data_->snapshots) s.snapshots.push_back(snap);
  for (const auto& [seq, v] : data_->volumes) s.volumes.push_back(v);
  for (const auto& [seq, d] : data_->datasets) s.datasets.push_back(d);
  return s;
}

void MemoryStore::Write(WriteBatch batch, std::function<void(Status)> done) {
  Status status;
  if (closed_.load()) {
    status = MakeError(ErrorCode::kUnavailable, "memory store is closed");
  } else {
    status = ValidateBatch(batch);
    if (status) {
      std::lock_guard lock(data_->mu);
      data_->Apply(batch);
    }
  }
  done(std::move(status));
}

Result<std::vector<TaskEvent>> MemoryStore::TaskEvents(const std::string& task_id) {
  if (auto s = ValidateTaskId(task_id); !s) return tl::unexpected(s.error());
  std::lock_guard lock(data_->mu);
  auto it = data_->events.find(task_id);
  if (it == data_->events.end()) return std::vector<TaskEvent>{};
  return it->second;
}

Result<std::optional<Task>> MemoryStore::ReadTask(const std::string& id) {
  if (auto s = ValidateTaskId(id); !s) return tl::unexpected(s.error());
  std::lock_guard lock(data_->mu);
  auto it = data_->tasks.find(id);
  if (it == data_->tasks.end()) return std::optional<Task>();
  return std::optional<Task>(it->second);
}

Result<std::vector<Task>> MemoryStore::ListTasks(const TaskQuery& q) {
  if (auto s = ValidateTaskQuery(q); !s) return tl::unexpected(s.error());
  std::vector<Task> page;
  std::lock_guard lock(data_->mu);
  for (auto it = data_->task_ids_by_seq.upper_bound(q.after_seq);
       it != data_->task_ids_by_seq.end(); ++it) {
    for (const std::string& id : it->second) {
      const Task& t = data_->tasks.at(id);
      if (!TaskQueryMatches(q, t)) continue;
      page.push_back(t);
      if (static_cast<int64_t>(page.size()) == q.limit) return page;
    }
  }
  return page;
}

Result<std::vector<LedgerEntry>> MemoryStore::Ledger(const LedgerQuery& q) {
  if (auto s = ValidateLedgerQuery(q); !s) return tl::unexpected(s.error());
  std::vector<LedgerEntry> matching;
  {
    std::lock_guard lock(data_->mu);
    for (const LedgerEntry& e : data_->ledger) {
      if (e.project_id != q.project_id) continue;
      if (!q.task_id.empty() && e.task_id != q.task_id) continue;
      if (e.created_ms < q.from_ms || (q.to_ms != 0 && e.created_ms >= q.to_ms)) continue;
      matching.push_back(e);
    }
  }
  // Insertion order breaks ties, as the rowid does in SQL.
  std::stable_sort(
      matching.begin(), matching.end(),
      [](const LedgerEntry& a, const LedgerEntry& b) { return a.created_ms < b.created_ms; });
  const auto size = static_cast<int64_t>(matching.size());
  const int64_t begin = std::min(q.offset, size);
  const int64_t end = begin + std::min(q.limit, size - begin);
  return std::vector<LedgerEntry>(std::make_move_iterator(matching.begin() + begin),
                                  std::make_move_iterator(matching.begin() + end));
}

Result<std::vector<AuditEntry>> MemoryStore::Audit(const AuditQuery& q) {
  if (auto s = ValidateAuditQuery(q); !s) return tl::unexpected(s.error());
  std::vector<AuditEntry> page;
  std::lock_guard lock(data_->mu);
  for (auto it = data_->audit.upper_bound(q.after_seq); it != data_->audit.end(); ++it) {
    const AuditEntry& e = it->second;
    if (!q.actor.empty() && e.actor != q.actor) continue;
    if (!q.target.empty() && e.target != q.target) continue;
    page.push_back(e);
    if (static_cast<int64_t>(page.size()) == q.limit) break;
  }
  return page;
}

void MemoryStore::Close() { closed_.store(true); }

}  // namespace gpupool::store
