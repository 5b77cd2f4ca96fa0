// Batch and query validation shared by MemoryStore and SqliteStore (see validation.h).
#include "store/validation.h"

#include <cstdint>
#include <string>
#include <vector>

#include "core/utf8.h"

namespace gpupool::store {
namespace {

// Quotes a key for an error message, keeping it short.
std::string Quote(std::string_view s) {
  constexpr size_t kMax = 64;
  if (s.size() > kMax) return "'" + std::string(s.substr(0, kMax)) + "…'";
  return "'" + std::string(s) + "'";
}

Status NonEmpty(std::string_view value, std::string_view what) {
  if (value.empty()) return InvalidArgument(std::string(what) + " must not be empty");
  return {};
}

Status Utf8(std::string_view value, const std::string& record, std::string_view field) {
  if (!IsValidUtf8(value)) {
    return InvalidArgument(record + ": " + std::string(field) + " is not valid utf-8");
  }
  return {};
}

Status Utf8All(const std::vector<std::string>& values, const std::string& record,
               std::string_view field) {
  for (const std::string& v : values) {
    if (auto s = Utf8(v, record, field); !s) return s;
  }
  return {};
}

bool ValidState(TaskState s) { return ParseTaskState(TaskStateName(s)).has_value(); }

Status ValidateUser(const User& u) {
  if (auto s = NonEmpty(u.id, "user id"); !s) return s;
  const std::string record = "user " + Quote(u.id);
  if (u.role != Role::kAdmin && u.role != Role::kMember) {
    return InvalidArgument(record + ": role " + std::to_string(static_cast<int>(u.role)) +
                           " is not a role");
  }
  if (auto s = Utf8All(u.projects, record, "projects"); !s) return s;
  for (const SshKey& k : u.ssh_keys) {
    if (auto s = NonEmpty(k.name, record + " ssh key name"); !s) return s;
    for (const std::string* v : {&k.name, &k.public_key, &k.fingerprint}) {
      if (auto s = Utf8(*v, record, "ssh_keys"); !s) return s;
    }
  }
  return {};
}

// A key belongs to a user or, as an agent credential, to a node (and the token it joined with).
Status ValidateAccessKey(const AccessKey& k) {
  if (auto s = NonEmpty(k.access_key, "access key id"); !s) return s;
  const std::string record = "access key " + Quote(k.access_key);
  if (k.user_id.empty() == k.node.empty()) {
    return InvalidArgument(record + ": exactly one of user_id and node must be set, got user_id " +
                           Quote(k.user_id) + " and node " + Quote(k.node));
  }
  if (k.node.empty() && !k.join_token_id.empty()) {
    return InvalidArgument(record + ": join_token_id " + Quote(k.join_token_id) +
                           " is only for an agent credential (one with a node)");
  }
  return {};
}

Status ValidateJoinToken(const JoinToken& t) {
  if (auto s = NonEmpty(t.id, "join token id"); !s) return s;
  return NonEmpty(t.secret_digest, "secret_digest of join token " + Quote(t.id));
}

Status ValidateNode(const NodeInfo& n) {
  if (auto s = NonEmpty(n.node.name, "node name"); !s) return s;
  const std::string record = "node " + Quote(n.node.name);
  if (n.status != NodeStatus::kReady && n.status != NodeStatus::kLost) {
    return InvalidArgument(record + ": status " + std::to_string(static_cast<int>(n.status)) +
                           " is not a node status");
  }
  for (const Gpu& g : n.node.gpus) {
    if (auto s = Utf8(g.model, record, "gpu model"); !s) return s;
    if (auto s = Utf8(g.uuid, record, "gpu uuid"); !s) return s;
  }
  for (const auto& [key, value] : n.node.labels) {
    if (auto s = Utf8(key, record, "label key"); !s) return s;
    if (auto s = Utf8(value, record, "label value"); !s) return s;
  }
  return {};
}

Status ValidateTask(const Task& t) {
  if (auto s = NonEmpty(t.id, "task id"); !s) return s;
  const std::string record = "task " + Quote(t.id);
  if (!ValidState(t.state)) {
    return InvalidArgument(record + ": state " + std::to_string(static_cast<int>(t.state)) +
                           " is not a task state");
  }
  if (t.held && t.state != TaskState::kPending) {
    return InvalidArgument(record + ": held is set but its state is " +
                           std::string(TaskStateName(t.state)) + "; only a pending task is held");
  }
  if (t.array_index < 0 || t.array_limit < 0) {
    return InvalidArgument(record + ": array_index " + std::to_string(t.array_index) +
                           " and array_limit " + std::to_string(t.array_limit) + " must be >= 0");
  }
  if (t.array_id.empty() && (t.array_index != 0 || t.array_limit != 0)) {
    return InvalidArgument(record + ": array_index and array_limit are set without an array_id");
  }
  if (auto s = Utf8(t.array_id, record, "array_id"); !s) return s;
  if (auto s = Utf8(t.ended_by, record, "ended_by"); !s) return s;
  if (auto s = Utf8(t.checkpoint_signal, record, "checkpoint_signal"); !s) return s;
  if (auto s = Utf8(t.resume_from, record, "resume_from"); !s) return s;
  if (auto s = Utf8All(t.command, record, "command"); !s) return s;
  if (auto s = Utf8(t.request.mig_profile, record, "request.mig_profile"); !s) return s;
  if (auto s = Utf8All(t.request.gpu_models, record, "request.gpu_models"); !s) return s;
  if (auto s = Utf8(t.request.gang_id, record, "request.gang_id"); !s) return s;
  if (t.placement) {
    if (auto s = Utf8(t.placement->node, record, "placement.node"); !s) return s;
  }
  for (const VolumeMount& m : t.volumes) {
    if (m.volume_id.empty())
      return InvalidArgument(record + ": a volume mount needs its volume_id");
    if (auto s = Utf8(m.name, record, "volumes.name"); !s) return s;
    if (auto s = Utf8(m.path, record, "volumes.path"); !s) return s;
  }
  for (const DatasetMount& m : t.datasets) {
    if (m.dataset_id.empty() || m.project_id.empty() || m.manifest.empty() || m.version <= 0) {
      return InvalidArgument(record +
                             ": a dataset mount needs its dataset_id, project_id, version and "
                             "manifest");
    }
    if (auto s = Utf8(m.name, record, "datasets.name"); !s) return s;
    if (auto s = Utf8(m.path, record, "datasets.path"); !s) return s;
  }
  return {};
}

Status ValidateEvent(const TaskEvent& e) {
  if (auto s = NonEmpty(e.task_id, "event task_id"); !s) return s;
  if (!ValidState(e.from) || !ValidState(e.to)) {
    return InvalidArgument("event of task " + Quote(e.task_id) + ": from/to " +
                           std::to_string(static_cast<int>(e.from)) + "/" +
                           std::to_string(static_cast<int>(e.to)) + " are not task states");
  }
  return {};
}

Status ValidateLedgerEntry(const LedgerEntry& e) {
  if (auto s = NonEmpty(e.key, "ledger entry key"); !s) return s;
  const std::string record = "ledger entry " + Quote(e.key);
  if (e.project_id.empty()) return InvalidArgument(record + ": project_id must not be empty");
  if (e.kind != LedgerKind::kCredit && e.kind != LedgerKind::kUsage) {
    return InvalidArgument(record + ": kind " + std::to_string(static_cast<int>(e.kind)) +
                           " is not a ledger kind");
  }
  if (e.amount_micros <= 0) {
    return InvalidArgument(record + ": amount_micros must be > 0, got " +
                           std::to_string(e.amount_micros));
  }
  return {};
}

Status ValidateAuditEntry(const AuditEntry& e) {
  const std::string record = "audit entry " + std::to_string(e.seq);
  if (e.seq <= 0) return InvalidArgument(record + ": seq must be > 0");
  if (e.actor.empty()) return InvalidArgument(record + ": actor must not be empty");
  if (e.action.empty()) return InvalidArgument(record + ": action must not be empty");
  for (const auto& [value, field] : {std::pair{&e.actor, "actor"}, {&e.access_key, "access_key"},
                                     {&e.action, "action"}, {&e.target, "target"},
                                     {&e.detail, "detail"}}) {
    if (auto s = Utf8(*value, record, field); !s) return s;
  }
  return {};
}

Status ValidateSnapshot(const TaskSnapshot& snap) {
  if (auto s = NonEmpty(snap.id, "snapshot id"); !s) return s;
  const std::string record = "snapshot " + Quote(snap.id);
  if (snap.seq <= 0) return InvalidArgument(record + ": seq must be > 0");
  if (snap.task_id.empty() || snap.project_id.empty()) {
    return InvalidArgument(record + ": task_id and project_id must not be empty");
  }
  if (!ParseSnapshotTrigger(SnapshotTriggerName(snap.trigger)) ||
      !ParseConsistency(ConsistencyName(snap.consistency))) {
    return InvalidArgument(record + ": trigger or consistency is out of range");
  }
  for (const auto& [value, field] : {std::pair{&snap.task_id, "task_id"},
                                     {&snap.project_id, "project_id"},
                                     {&snap.node, "node"},
                                     {&snap.manifest, "manifest"}}) {
    if (auto s = Utf8(*value, record, field); !s) return s;
  }
  if (snap.image) {
    if (snap.image->id.empty() || snap.image->base.empty()) {
      return InvalidArgument(record + ": a saved image needs its id and its base");
    }
    if (auto s = Utf8(snap.image->base, record, "image base"); !s) return s;
  }
  return {};
}

Status ValidateVolume(const Volume& v) {
  if (auto s = NonEmpty(v.id, "volume id"); !s) return s;
  const std::string record = "volume " + Quote(v.id);
  if (v.seq <= 0) return InvalidArgument(record + ": seq must be > 0");
  if (v.project_id.empty() || v.name.empty()) {
    return InvalidArgument(record + ": project_id and name must not be empty");
  }
  if (v.size_bytes <= 0) return InvalidArgument(record + ": size_bytes must be > 0");
  for (const auto& [value, field] : {std::pair{&v.project_id, "project_id"},
                                     {&v.name, "name"},
                                     {&v.node, "node"},
                                     {&v.created_by, "created_by"}}) {
    if (auto s = Utf8(*value, record, field); !s) return s;
  }
  return {};
}

Status ValidateDataset(const Dataset& d) {
  if (auto s = NonEmpty(d.id, "dataset id"); !s) return s;
  const std::string record = "dataset " + Quote(d.id);
  if (d.seq <= 0) return InvalidArgument(record + ": seq must be > 0");
  if (d.project_id.empty() || d.name.empty()) {
    return InvalidArgument(record + ": project_id and name must not be empty");
  }
  for (const auto& [value, field] :
       {std::pair{&d.project_id, "project_id"}, {&d.name, "name"}, {&d.created_by, "created_by"}}) {
    if (auto s = Utf8(*value, record, field); !s) return s;
  }
  for (const DatasetVersion& v : d.versions) {
    if (v.version <= 0 || v.manifest.empty()) {
      return InvalidArgument(record + ": a version needs a number > 0 and its manifest");
    }
    if (auto s = Utf8(v.created_by, record, "versions.created_by"); !s) return s;
  }
  return {};
}

}  // namespace

Status ValidateBatch(const WriteBatch& b) {
  for (const Project& p : b.projects) {
    if (auto s = NonEmpty(p.id, "project id"); !s) return s;
  }
  for (const User& u : b.users) {
    if (auto s = ValidateUser(u); !s) return s;
  }
  for (const AccessKey& k : b.access_keys) {
    if (auto s = ValidateAccessKey(k); !s) return s;
  }
  for (const JoinToken& t : b.join_tokens) {
    if (auto s = ValidateJoinToken(t); !s) return s;
  }
  for (const NodeInfo& n : b.nodes) {
    if (auto s = ValidateNode(n); !s) return s;
  }
  for (const Task& t : b.tasks) {
    if (auto s = ValidateTask(t); !s) return s;
  }
  for (const Price& p : b.prices) {
    if (auto s = NonEmpty(p.resource, "price resource"); !s) return s;
  }
  for (const std::string& id : b.deleted_tasks) {
    if (auto s = NonEmpty(id, "deleted task id"); !s) return s;
  }
  for (const TaskSnapshot& snap : b.snapshots) {
    if (auto s = ValidateSnapshot(snap); !s) return s;
  }
  for (const std::string& id : b.deleted_snapshots) {
    if (auto s = NonEmpty(id, "deleted snapshot id"); !s) return s;
  }
  for (const Volume& v : b.volumes) {
    if (auto s = ValidateVolume(v); !s) return s;
  }
  for (const std::string& id : b.deleted_volumes) {
    if (auto s = NonEmpty(id, "deleted volume id"); !s) return s;
  }
  for (const Dataset& d : b.datasets) {
    if (auto s = ValidateDataset(d); !s) return s;
  }
  for (const std::string& id : b.deleted_datasets) {
    if (auto s = NonEmpty(id, "deleted dataset id"); !s) return s;
  }
  for (const TaskEvent& e : b.events) {
    if (auto s = ValidateEvent(e); !s) return s;
  }
  for (const LedgerEntry& e : b.ledger) {
    if (auto s = ValidateLedgerEntry(e); !s) return s;
  }
  for (const AuditEntry& e : b.audit) {
    if (auto s = ValidateAuditEntry(e); !s) return s;
  }
  for (const Nonce& n : b.nonces) {
    if (auto s = NonEmpty(n.access_key, "nonce access_key"); !s) return s;
    if (auto s = NonEmpty(n.nonce, "nonce of access key " + Quote(n.access_key)); !s) return s;
  }
  if (b.expire_nonces_before_ms < 0) {
    return InvalidArgument("expire_nonces_before_ms must be >= 0, got " +
                           std::to_string(b.expire_nonces_before_ms));
  }
  for (const auto& [key, value] : b.settings) {
    if (auto s = NonEmpty(key, "setting key"); !s) return s;
  }
  return {};
}

Status ValidateAuditQuery(const AuditQuery& q) {
  if (q.after_seq < 0) {
    return InvalidArgument("audit query after_seq must be >= 0, got " + std::to_string(q.after_seq));
  }
  if (q.limit < 1 || q.limit > 1000) {
    return InvalidArgument("audit query limit must be 1..1000, got " + std::to_string(q.limit));
  }
  return {};
}

Status ValidateLedgerQuery(const LedgerQuery& q) {
  if (q.project_id.empty()) return InvalidArgument("ledger query project_id must not be empty");
  if (q.offset < 0) {
    return InvalidArgument("ledger query offset must be >= 0, got " + std::to_string(q.offset));
  }
  if (q.limit <= 0) {
    return InvalidArgument("ledger query limit must be > 0, got " + std::to_string(q.limit));
  }
  if (q.to_ms < 0) {
    return InvalidArgument("ledger query to_ms must be >= 0 (0: no bound), got " +
                           std::to_string(q.to_ms));
  }
  if (q.to_ms != 0 && q.to_ms < q.from_ms) {
    return InvalidArgument("ledger query to_ms " + std::to_string(q.to_ms) + " is before from_ms " +
                           std::to_string(q.from_ms));
  }
  return {};
}

Status ValidateTaskQuery(const TaskQuery& q) {
  if (q.after_seq < 0) {
    return InvalidArgument("task query after_seq must be >= 0, got " + std::to_string(q.after_seq));
  }
  if (q.limit < 1 || q.limit > kMaxTaskQueryLimit) {
    return InvalidArgument("task query limit must be 1.." + std::to_string(kMaxTaskQueryLimit) +
                           ", got " + std::to_string(q.limit));
  }
  for (const std::string& id : q.project_ids) {
    if (Status ok = NonEmpty(id, "task query project id"); !ok) return ok;
  }
  return {};
}

Status ValidateTaskId(std::string_view task_id) { return NonEmpty(task_id, "task id"); }

}  // namespace gpupool::store
