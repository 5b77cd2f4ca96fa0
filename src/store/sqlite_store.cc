// SqliteStore: migrations at Open, the group-commit writer thread (one transaction per group, one
// savepoint per batch), and the reads (Load, ReadTask, ListTasks, TaskEvents, Ledger, Audit) on a second
// connection.
#include "store/sqlite_store.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>

#include "core/task_ports.h"
#include "store/migrations.h"
#include "store/record_json.h"
#include "store/sqlite_db.h"
#include "store/validation.h"

namespace gpupool::store {
namespace {

using sqlite::Database;
using sqlite::Statement;

// How long a connection waits for another's lock (e.g. a backup tool) before failing.
constexpr int kBusyTimeoutMs = 10'000;
// How often the writer tries a group again while the disk is full.
constexpr std::chrono::seconds kFullDiskRetry{1};

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

// `error` with `what` in front of its message.
Error WithContext(Error error, std::string_view what) {
  error.message = std::string(what) + ": " + error.message;
  return error;
}

tl::unexpected<Error> Fail(const Status& status, std::string_view what) {
  return tl::unexpected(WithContext(status.error(), what));
}

tl::unexpected<Error> Corrupt(std::string message) {
  return MakeError(ErrorCode::kInternal, std::move(message));
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Calls `row(stmt)` for each row of `stmt` (already bound), then resets it.
template <typename F>
Status ForEachRow(Statement& stmt, F&& row) {
  Statement::Resetter reset(stmt);
  for (;;) {
    Result<bool> more = stmt.Step();
    if (!more) return tl::unexpected(more.error());
    if (!*more) return {};
    if (Status s = row(stmt); !s) return s;
  }
}

// Column lists shared by the INSERT and SELECT statements; the Read*/Bind* functions below use
// the same order.
constexpr std::string_view kProjectColumns =
    "id, name, max_gpu_milli, max_tasks, stop_grace_ms, created_ms, max_storage_bytes";
constexpr std::string_view kUserColumns = "id, name, role, projects, created_ms, ssh_keys";
constexpr std::string_view kAccessKeyColumns =
    "access_key, user_id, sealed_secret, description, created_ms, revoked_ms, node, join_token_id";
constexpr std::string_view kJoinTokenColumns =
    "id, secret_digest, description, created_by, created_ms, expires_ms, revoked_ms";
constexpr std::string_view kNodeColumns =
    "name, status, draining, registered_ms, last_heartbeat_ms, node";
constexpr std::string_view kTaskColumns =
    "id, seq, project_id, user_id, name, request, image, command, disk_gib, max_runtime_ms, "
    "stop_when, restartable, state, reason, placement, created_ms, updated_ms, bound_ms, "
    "started_ms, finished_ms, billed_until_ms, exit_code, preemptions, held, array_id, "
    "array_index, array_limit, ports, ended_by, snapshot_every_ms, checkpoint_signal, "
    "checkpoint_timeout_ms, run, resume_from, work_lost_ms, volumes, datasets";
constexpr std::string_view kSnapshotColumns =
    "id, seq, task_id, project_id, run, trigger, consistency, node, manifest, files, bytes, "
    "new_bytes, taken_ms, frozen_ms, duration_ms, image_id, image_base, image_bytes, image_saved";
constexpr std::string_view kVolumeColumns =
    "id, seq, project_id, name, size_bytes, shared, node, deleting, created_ms, created_by";
constexpr std::string_view kDatasetColumns =
    "id, seq, project_id, name, published, versions, created_ms, created_by";
constexpr std::string_view kPriceColumns = "resource, effective_ms, micros_per_hour";
constexpr std::string_view kEventColumns = "task_id, time_ms, from_state, to_state, reason";
constexpr std::string_view kLedgerColumns =
    "\"key\", project_id, task_id, kind, amount_micros, from_ms, to_ms, detail, created_ms";
constexpr std::string_view kNonceColumns = "access_key, nonce, timestamp_ms";
constexpr std::string_view kAuditColumns =
    "seq, time_ms, actor, access_key, action, target, detail";

// " ON CONFLICT (key) DO UPDATE SET c = excluded.c, …" for every column but `key`: an upsert that
// updates the row in place, so that SQLite rewrites only the index entries whose columns changed
// (INSERT OR REPLACE deletes the row and inserts it again, rewriting every index).
std::string UpsertTail(std::string_view key, std::string_view columns) {
  std::string tail = " ON CONFLICT (" + std::string(key) + ") DO UPDATE SET ";
  bool first = true;
  while (!columns.empty()) {
    const size_t comma = columns.find(',');
    std::string_view column = columns.substr(0, comma);
    columns = comma == std::string_view::npos ? std::string_view() : columns.substr(comma + 1);
    while (!column.empty() && column.front() == ' ') column.remove_prefix(1);
    if (column == key) continue;
    if (!first) tail += ", ";
    first = false;
    tail += std::string(column) + " = excluded." + std::string(column);
  }
  return tail;
}

// "INSERT <verb> INTO table (columns) VALUES (?1, …, ?n)<tail>".
std::string InsertSql(std::string_view verb, std::string_view table, std::string_view columns,
                      std::string_view tail = "") {
  std::string sql = "INSERT ";
  sql += verb;
  sql += verb.empty() ? "INTO " : " INTO ";
  sql += table;
  sql += " (";
  sql += columns;
  sql += ") VALUES (";
  int n = 1;
  for (char c : columns) n += c == ',';
  for (int i = 1; i <= n; ++i) {
    if (i > 1) sql += ", ";
    sql += "?" + std::to_string(i);
  }
  sql += ")";
  sql += tail;
  return sql;
}

std::string SelectSql(std::string_view columns, std::string_view rest) {
  return "SELECT " + std::string(columns) + " FROM " + std::string(rest);
}

// The quoted names of the terminal (or the other) task states, comma-separated, for IN (…).
std::string StateList(bool terminal) {
  std::string list;
  for (int i = 0; i < kTaskStateCount; ++i) {
    const auto state = static_cast<TaskState>(i);
    if (IsTerminal(state) != terminal) continue;
    if (!list.empty()) list += ", ";
    list += Quote(TaskStateName(state));
  }
  return list;
}

// Statements of the writer connection, prepared once at Open.
struct WriteStatements {
  Statement begin, commit, rollback, savepoint, rollback_to_savepoint, release_savepoint;
  Statement upsert_project, upsert_user, upsert_access_key, upsert_node, upsert_task, upsert_price;
  Statement upsert_join_token;
  Statement upsert_snapshot, delete_snapshot, delete_task_snapshots;
  Statement upsert_volume, delete_volume;
  Statement upsert_dataset, delete_dataset;
  Statement delete_task, delete_task_events, insert_event, insert_ledger, insert_audit,
      upsert_nonce, expire_nonces, upsert_setting;
};

// Statements of the read connection, prepared once at Open.
struct ReadStatements {
  Statement begin, end;
  Statement projects, users, access_keys, nodes, tasks, prices, nonces, sums, settings;
  Statement join_tokens, snapshots, volumes, datasets;
  Statement max_task_seq, task_by_id, events_of_task, ledger_of_project, ledger_of_task;
  Statement max_audit_seq, audit_page;
};

struct StatementSpec {
  Statement* out;
  std::string sql;
  std::string what;
};

Status PrepareAll(Database& db, std::initializer_list<StatementSpec> specs) {
  for (const StatementSpec& spec : specs) {
    Result<Statement> stmt = db.Prepare(spec.sql, spec.what);
    if (!stmt) return tl::unexpected(stmt.error());
    *spec.out = std::move(*stmt);
  }
  return {};
}

Status PrepareWrites(Database& db, WriteStatements& w) {
  return PrepareAll(
      db,
      {
          {&w.begin, "BEGIN IMMEDIATE", "begin transaction"},
          {&w.commit, "COMMIT", "commit"},
          {&w.rollback, "ROLLBACK", "roll back"},
          {&w.savepoint, "SAVEPOINT batch", "open batch savepoint"},
          {&w.rollback_to_savepoint, "ROLLBACK TO batch", "roll back batch savepoint"},
          {&w.release_savepoint, "RELEASE batch", "release batch savepoint"},
          {&w.upsert_project, InsertSql("OR REPLACE", "projects", kProjectColumns),
           "upsert project"},
          {&w.upsert_user, InsertSql("OR REPLACE", "users", kUserColumns), "upsert user"},
          {&w.upsert_access_key, InsertSql("OR REPLACE", "access_keys", kAccessKeyColumns),
           "upsert access key"},
          {&w.upsert_join_token, InsertSql("OR REPLACE", "join_tokens", kJoinTokenColumns),
           "upsert join token"},
          {&w.upsert_node, InsertSql("OR REPLACE", "nodes", kNodeColumns), "upsert node"},
          {&w.upsert_task, InsertSql("", "tasks", kTaskColumns, UpsertTail("id", kTaskColumns)),
           "upsert task"},
          {&w.upsert_price, InsertSql("OR REPLACE", "prices", kPriceColumns), "upsert price"},
          {&w.delete_task, "DELETE FROM tasks WHERE id = ?1", "delete task"},
          {&w.delete_task_events, "DELETE FROM events WHERE task_id = ?1", "delete task events"},
          {&w.upsert_snapshot, InsertSql("OR REPLACE", "snapshots", kSnapshotColumns),
           "upsert snapshot"},
          {&w.delete_snapshot, "DELETE FROM snapshots WHERE id = ?1", "delete snapshot"},
          {&w.delete_task_snapshots, "DELETE FROM snapshots WHERE task_id = ?1",
           "delete task snapshots"},
          {&w.upsert_volume, InsertSql("OR REPLACE", "volumes", kVolumeColumns), "upsert volume"},
          {&w.delete_volume, "DELETE FROM volumes WHERE id = ?1", "delete volume"},
          {&w.upsert_dataset, InsertSql("OR REPLACE", "datasets", kDatasetColumns),
           "upsert dataset"},
          {&w.delete_dataset, "DELETE FROM datasets WHERE id = ?1", "delete dataset"},
          {&w.insert_event, InsertSql("", "events", kEventColumns), "append event"},
          // Not INSERT OR IGNORE: that would also skip rows failing a CHECK constraint.
          {&w.insert_ledger,
           InsertSql("", "ledger", kLedgerColumns, " ON CONFLICT (\"key\") DO NOTHING"),
           "append ledger entry"},
          {&w.insert_audit, InsertSql("", "audit", kAuditColumns, " ON CONFLICT (seq) DO NOTHING"),
           "append audit entry"},
          {&w.upsert_nonce, InsertSql("OR REPLACE", "nonces", kNonceColumns), "record nonce"},
          {&w.expire_nonces, "DELETE FROM nonces WHERE timestamp_ms < ?1", "expire nonces"},
          {&w.upsert_setting, InsertSql("OR REPLACE", "settings", "\"key\", value"),
           "upsert setting"},
      });
}

Status PrepareReads(Database& db, ReadStatements& r) {
  const std::string ledger_where =
      "ledger WHERE project_id = ?1 AND created_ms >= ?2 AND created_ms < ?3";
  return PrepareAll(
      db,
      {
          {&r.begin, "BEGIN", "begin read transaction"},
          {&r.end, "ROLLBACK", "end read transaction"},
          {&r.projects, SelectSql(kProjectColumns, "projects ORDER BY id"), "read projects"},
          {&r.users, SelectSql(kUserColumns, "users ORDER BY id"), "read users"},
          {&r.access_keys, SelectSql(kAccessKeyColumns, "access_keys ORDER BY access_key"),
           "read access keys"},
          {&r.join_tokens, SelectSql(kJoinTokenColumns, "join_tokens ORDER BY id"),
           "read join tokens"},
          {&r.nodes, SelectSql(kNodeColumns, "nodes ORDER BY name"), "read nodes"},
          // Live tasks, and finished ones since ?1; each term has its index (by state, by
          // finished_ms), so a store of old tasks is not scanned.
          // No ORDER BY: with one, SQLite would rather scan every task in seq order than use
          // the two indexes (LoadLocked sorts what comes back).
          {&r.tasks,
           SelectSql(kTaskColumns,
                     "tasks WHERE state IN (" + StateList(false) + ") OR finished_ms >= ?1"),
           "read tasks"},
          {&r.max_task_seq, "SELECT MAX(seq) FROM tasks", "read the highest task seq"},
          {&r.snapshots, SelectSql(kSnapshotColumns, "snapshots ORDER BY seq"), "read snapshots"},
          {&r.volumes, SelectSql(kVolumeColumns, "volumes ORDER BY seq"), "read volumes"},
          {&r.datasets, SelectSql(kDatasetColumns, "datasets ORDER BY seq"), "read datasets"},

          {&r.max_audit_seq, "SELECT MAX(seq) FROM audit", "read the highest audit seq"},
          // ?3, ?4: '' for any actor, any target.
          {&r.audit_page,
           SelectSql(kAuditColumns,
                     "audit WHERE seq > ?1 AND (?3 = '' OR actor = ?3) AND "
                     "(?4 = '' OR target = ?4) ORDER BY seq LIMIT ?2"),
           "read audit log"},
          {&r.task_by_id, SelectSql(kTaskColumns, "tasks WHERE id = ?1"), "read task"},
          {&r.prices, SelectSql(kPriceColumns, "prices ORDER BY resource, effective_ms"),
           "read prices"},
          {&r.nonces, SelectSql(kNonceColumns, "nonces ORDER BY access_key, nonce"), "read nonces"},
          {&r.sums,
           "SELECT project_id, kind, SUM(amount_micros) FROM ledger "
           "GROUP BY project_id, kind",
           "sum ledger entries"},
          {&r.settings, "SELECT \"key\", value FROM settings ORDER BY \"key\"", "read settings"},
          {&r.events_of_task, SelectSql(kEventColumns, "events WHERE task_id = ?1 ORDER BY id"),
           "read task events"},
          {&r.ledger_of_project,
           SelectSql(kLedgerColumns, ledger_where + " ORDER BY created_ms, id LIMIT ?4 OFFSET ?5"),
           "read ledger"},
          {&r.ledger_of_task,
           SelectSql(kLedgerColumns, ledger_where + " AND task_id = ?6 ORDER BY created_ms, id "
                                                    "LIMIT ?4 OFFSET ?5"),
           "read task ledger"},
      });
}

// ---- Rows to records -------------------------------------------------------------------------

Result<TaskState> ReadState(const Statement& s, int column, std::string_view record) {
  const std::string name = s.Text(column);
  std::optional<TaskState> state = ParseTaskState(name);
  if (!state) return Corrupt(std::string(record) + " has unknown task state " + Quote(name));
  return *state;
}

Project ReadProject(const Statement& s) {
  return Project{.id = s.Text(0),
                 .name = s.Text(1),
                 .max_gpu_milli = s.Int(2),
                 .max_tasks = s.Int(3),
                 .stop_grace_ms = s.Int(4),
                 .created_ms = s.Int(5),
                 .max_storage_bytes = s.Int(6)};
}

Result<User> ReadUser(const Statement& s) {
  User u;
  u.id = s.Text(0);
  u.name = s.Text(1);
  const std::string role = s.Text(2);
  std::optional<Role> parsed = ParseRole(role);
  if (!parsed) return Corrupt("user " + Quote(u.id) + " has unknown role " + Quote(role));
  u.role = *parsed;
  if (Status st = FromJson(s.Text(3), &u.projects); !st) return Fail(st, "user " + Quote(u.id));
  u.created_ms = s.Int(4);
  if (Status st = FromJson(s.Text(5), &u.ssh_keys); !st) return Fail(st, "user " + Quote(u.id));
  return u;
}

AccessKey ReadAccessKey(const Statement& s) {
  return AccessKey{.access_key = s.Text(0),
                   .user_id = s.Text(1),
                   .sealed_secret = s.Blob(2),
                   .description = s.Text(3),
                   .created_ms = s.Int(4),
                   .revoked_ms = s.Int(5),
                   .node = s.Text(6),
                   .join_token_id = s.Text(7)};
}

JoinToken ReadJoinToken(const Statement& s) {
  return JoinToken{.id = s.Text(0),
                   .secret_digest = s.Text(1),
                   .description = s.Text(2),
                   .created_by = s.Text(3),
                   .created_ms = s.Int(4),
                   .expires_ms = s.Int(5),
                   .revoked_ms = s.Int(6)};
}

Result<NodeInfo> ReadNode(const Statement& s) {
  NodeInfo n;
  const std::string name = s.Text(0);
  const std::string status = s.Text(1);
  std::optional<NodeStatus> parsed = ParseNodeStatus(status);
  if (!parsed) return Corrupt("node " + Quote(name) + " has unknown status " + Quote(status));
  n.status = *parsed;
  n.draining = s.Int(2) != 0;
  n.registered_ms = s.Int(3);
  n.last_heartbeat_ms = s.Int(4);
  if (Status st = FromJson(s.Text(5), &n.node); !st) return Fail(st, "node " + Quote(name));
  n.node.name = name;
  return n;
}

// (Not ReadTask: inside SqliteStore::Impl that name is SqliteStore's own.)
Result<Task> ReadTaskRow(const Statement& s) {
  Task t;
  t.id = s.Text(0);
  const std::string record = "task " + Quote(t.id);
  t.seq = s.Int(1);
  t.project_id = s.Text(2);
  t.user_id = s.Text(3);
  t.name = s.Text(4);
  if (Status st = FromJson(s.Text(5), &t.request); !st) return Fail(st, record);
  t.image = s.Text(6);
  if (Status st = FromJson(s.Text(7), &t.command); !st) return Fail(st, record);
  t.disk_gib = s.Int(8);
  t.max_runtime_ms = s.Int(9);
  t.stop_when = s.Text(10);
  t.restartable = s.Int(11) != 0;
  Result<TaskState> state = ReadState(s, 12, record);
  if (!state) return tl::unexpected(state.error());
  t.state = *state;
  t.reason = s.Text(13);
  if (!s.IsNull(14)) {
    TaskPlacement placement;
    if (Status st = FromJson(s.Text(14), &placement); !st) return Fail(st, record);
    t.placement = std::move(placement);
  }
  t.created_ms = s.Int(15);
  t.updated_ms = s.Int(16);
  t.bound_ms = s.Int(17);
  t.started_ms = s.Int(18);
  t.finished_ms = s.Int(19);
  t.billed_until_ms = s.Int(20);
  t.exit_code = static_cast<int>(s.Int(21));
  t.preemptions = static_cast<int>(s.Int(22));
  t.held = s.Int(23) != 0;
  t.array_id = s.Text(24);
  t.array_index = s.Int(25);
  t.array_limit = static_cast<int32_t>(s.Int(26));
  Result<std::vector<int32_t>> ports = ParsePortList(s.Text(27));
  if (!ports) return Fail(Status(tl::unexpected(ports.error())), record);
  t.ports = std::move(*ports);
  t.ended_by = s.Text(28);
  t.snapshot_every_ms = s.Int(29);
  t.checkpoint_signal = s.Text(30);
  t.checkpoint_timeout_ms = s.Int(31);
  t.run = static_cast<int32_t>(s.Int(32));
  t.resume_from = s.Text(33);
  t.work_lost_ms = s.Int(34);
  if (Status st = FromJson(s.Text(35), &t.volumes); !st) return Fail(st, record);
  if (Status st = FromJson(s.Text(36), &t.datasets); !st) return Fail(st, record);
  return t;
}

Volume ReadVolumeRow(const Statement& s) {
  Volume v;
  v.id = s.Text(0);
  v.seq = s.Int(1);
  v.project_id = s.Text(2);
  v.name = s.Text(3);
  v.size_bytes = s.Int(4);
  v.shared = s.Int(5) != 0;
  v.node = s.Text(6);
  v.deleting = s.Int(7) != 0;
  v.created_ms = s.Int(8);
  v.created_by = s.Text(9);
  return v;
}

Result<Dataset> ReadDatasetRow(const Statement& s) {
  Dataset d;
  d.id = s.Text(0);
  d.seq = s.Int(1);
  d.project_id = s.Text(2);
  d.name = s.Text(3);
  d.published = s.Int(4) != 0;
  if (Status st = FromJson(s.Text(5), &d.versions); !st) return Fail(st, "dataset " + Quote(d.id));
  d.created_ms = s.Int(6);
  d.created_by = s.Text(7);
  return d;
}

Result<TaskSnapshot> ReadSnapshotRow(const Statement& s) {
  TaskSnapshot snap;
  snap.id = s.Text(0);
  const std::string record = "snapshot " + Quote(snap.id);
  snap.seq = s.Int(1);
  snap.task_id = s.Text(2);
  snap.project_id = s.Text(3);
  snap.run = static_cast<int32_t>(s.Int(4));
  const std::string trigger = s.Text(5);
  const std::optional<SnapshotTrigger> t = ParseSnapshotTrigger(trigger);
  if (!t) return Corrupt(record + " has unknown trigger " + Quote(trigger));
  snap.trigger = *t;
  const std::string consistency = s.Text(6);
  const std::optional<Consistency> c = ParseConsistency(consistency);
  if (!c) return Corrupt(record + " has unknown consistency " + Quote(consistency));
  snap.consistency = *c;
  snap.node = s.Text(7);
  snap.manifest = s.Text(8);
  snap.files = s.Int(9);
  snap.bytes = s.Int(10);
  snap.new_bytes = s.Int(11);
  snap.taken_ms = s.Int(12);
  snap.frozen_ms = s.Int(13);
  snap.duration_ms = s.Int(14);
  if (std::string image = s.Text(15); !image.empty()) {
    snap.image = SavedImage{std::move(image), s.Text(16), s.Int(17), s.Int(18) != 0};
  }
  return snap;
}

Result<TaskEvent> ReadEvent(const Statement& s) {
  TaskEvent e;
  e.task_id = s.Text(0);
  const std::string record = "event of task " + Quote(e.task_id);
  e.time_ms = s.Int(1);
  Result<TaskState> from = ReadState(s, 2, record);
  if (!from) return tl::unexpected(from.error());
  Result<TaskState> to = ReadState(s, 3, record);
  if (!to) return tl::unexpected(to.error());
  e.from = *from;
  e.to = *to;
  e.reason = s.Text(4);
  return e;
}

Result<LedgerEntry> ReadLedgerEntry(const Statement& s) {
  LedgerEntry e;
  e.key = s.Text(0);
  e.project_id = s.Text(1);
  e.task_id = s.Text(2);
  const std::string kind = s.Text(3);
  std::optional<LedgerKind> parsed = ParseLedgerKind(kind);
  if (!parsed) {
    return Corrupt("ledger entry " + Quote(e.key) + " has unknown kind " + Quote(kind));
  }
  e.kind = *parsed;
  e.amount_micros = s.Int(4);
  e.from_ms = s.Int(5);
  e.to_ms = s.Int(6);
  e.detail = s.Text(7);
  e.created_ms = s.Int(8);
  return e;
}

// ---- Records to rows -------------------------------------------------------------------------

Status WriteTask(Statement& s, const Task& t) {
  Result<std::string> request = ToJson(t.request);
  if (!request) return tl::unexpected(request.error());
  Result<std::string> command = ToJson(t.command);
  if (!command) return tl::unexpected(command.error());
  Result<std::string> volumes = ToJson(t.volumes);
  if (!volumes) return tl::unexpected(volumes.error());
  Result<std::string> datasets = ToJson(t.datasets);
  if (!datasets) return tl::unexpected(datasets.error());
  std::optional<std::string> placement;
  if (t.placement) {
    Result<std::string> json = ToJson(*t.placement);
    if (!json) return tl::unexpected(json.error());
    placement = std::move(*json);
  }
  s.Bind(1, t.id)
      .Bind(2, t.seq)
      .Bind(3, t.project_id)
      .Bind(4, t.user_id)
      .Bind(5, t.name)
      .Bind(6, *request)
      .Bind(7, t.image)
      .Bind(8, *command)
      .Bind(9, t.disk_gib)
      .Bind(10, t.max_runtime_ms)
      .Bind(11, t.stop_when)
      .Bind(12, int64_t{t.restartable})
      .Bind(13, TaskStateName(t.state))
      .Bind(14, t.reason);
  if (placement) {
    s.Bind(15, *placement);
  } else {
    s.BindNull(15);
  }
  return s.Bind(16, t.created_ms)
      .Bind(17, t.updated_ms)
      .Bind(18, t.bound_ms)
      .Bind(19, t.started_ms)
      .Bind(20, t.finished_ms)
      .Bind(21, t.billed_until_ms)
      .Bind(22, int64_t{t.exit_code})
      .Bind(23, int64_t{t.preemptions})
      .Bind(24, int64_t{t.held})
      .Bind(25, t.array_id)
      .Bind(26, t.array_index)
      .Bind(27, int64_t{t.array_limit})
      .Bind(28, FormatPortList(t.ports))
      .Bind(29, t.ended_by)
      .Bind(30, t.snapshot_every_ms)
      .Bind(31, t.checkpoint_signal)
      .Bind(32, t.checkpoint_timeout_ms)
      .Bind(33, int64_t{t.run})
      .Bind(34, t.resume_from)
      .Bind(35, t.work_lost_ms)
      .Bind(36, *volumes)
      .Bind(37, *datasets)
      .Run();
}

Status WriteDataset(Statement& s, const Dataset& d) {
  Result<std::string> versions = ToJson(d.versions);
  if (!versions) return tl::unexpected(versions.error());
  return s.Bind(1, d.id)
      .Bind(2, d.seq)
      .Bind(3, d.project_id)
      .Bind(4, d.name)
      .Bind(5, int64_t{d.published})
      .Bind(6, *versions)
      .Bind(7, d.created_ms)
      .Bind(8, d.created_by)
      .Run();
}

Status WriteVolume(Statement& s, const Volume& v) {
  return s.Bind(1, v.id)
      .Bind(2, v.seq)
      .Bind(3, v.project_id)
      .Bind(4, v.name)
      .Bind(5, v.size_bytes)
      .Bind(6, int64_t{v.shared})
      .Bind(7, v.node)
      .Bind(8, int64_t{v.deleting})
      .Bind(9, v.created_ms)
      .Bind(10, v.created_by)
      .Run();
}

Status WriteSnapshot(Statement& s, const TaskSnapshot& snap) {
  return s.Bind(1, snap.id)
      .Bind(2, snap.seq)
      .Bind(3, snap.task_id)
      .Bind(4, snap.project_id)
      .Bind(5, int64_t{snap.run})
      .Bind(6, SnapshotTriggerName(snap.trigger))
      .Bind(7, ConsistencyName(snap.consistency))
      .Bind(8, snap.node)
      .Bind(9, snap.manifest)
      .Bind(10, snap.files)
      .Bind(11, snap.bytes)
      .Bind(12, snap.new_bytes)
      .Bind(13, snap.taken_ms)
      .Bind(14, snap.frozen_ms)
      .Bind(15, snap.duration_ms)
      .Bind(16, snap.image ? snap.image->id : std::string())
      .Bind(17, snap.image ? snap.image->base : std::string())
      .Bind(18, snap.image ? snap.image->bytes : 0)
      .Bind(19, int64_t{snap.image && snap.image->saved})
      .Run();
}

Status WriteNode(Statement& s, const NodeInfo& n) {
  Result<std::string> node = ToJson(n.node);
  if (!node) return tl::unexpected(node.error());
  return s.Bind(1, n.node.name)
      .Bind(2, NodeStatusName(n.status))
      .Bind(3, int64_t{n.draining})
      .Bind(4, n.registered_ms)
      .Bind(5, n.last_heartbeat_ms)
      .Bind(6, *node)
      .Run();
}

Status WriteUser(Statement& s, const User& u) {
  Result<std::string> projects = ToJson(u.projects);
  if (!projects) return tl::unexpected(projects.error());
  Result<std::string> ssh_keys = ToJson(u.ssh_keys);
  if (!ssh_keys) return tl::unexpected(ssh_keys.error());
  return s.Bind(1, u.id)
      .Bind(2, u.name)
      .Bind(3, RoleName(u.role))
      .Bind(4, *projects)
      .Bind(5, u.created_ms)
      .Bind(6, *ssh_keys)
      .Run();
}

struct Pending {
  WriteBatch batch;
  std::function<void(Status)> done;
};

}  // namespace

// ---- Impl ------------------------------------------------------------------------------------

class SqliteStore::Impl {
 public:
  static Result<std::unique_ptr<Impl>> Open(const std::string& path);
  ~Impl();

  Result<Snapshot> Load(const LoadOptions& options);
  void Write(WriteBatch batch, std::function<void(Status)> done);
  Result<std::optional<Task>> FindTask(const std::string& id);
  Result<std::vector<Task>> TaskPage(const TaskQuery& query);
  Result<std::vector<TaskEvent>> TaskEvents(const std::string& task_id);
  Result<std::vector<LedgerEntry>> Ledger(const LedgerQuery& query);
  Result<std::vector<AuditEntry>> Audit(const AuditQuery& query);
  void Close();
  Stats GetStats() const;

 private:
  explicit Impl(std::string path) : path_(std::move(path)) {}

  Status Migrate();
  void Run();  // the writer thread
  // Commits `group` in one transaction and answers each batch. A full disk leaves the whole
  // group unapplied (rolled back, whichever batch met it) and, unless `answer_full`, unanswered:
  // then it returns false and the caller tries the group again.
  bool CommitGroup(std::vector<Pending>& group, bool answer_full);
  Status ApplyBatch(const WriteBatch& b);
  Status LoadLocked(const LoadOptions& options, Snapshot& snapshot);

  const std::string path_;

  // Used by the writer thread only (and by Open before the thread starts). Declared before the
  // statements so that the statements are finalized first.
  std::unique_ptr<Database> writer_db_;
  WriteStatements w_;

  std::mutex read_mu_;  // guards the read connection and its statements
  std::unique_ptr<Database> reader_db_;
  ReadStatements r_;

  std::mutex mu_;  // guards queue_ and closing_
  std::condition_variable cv_;
  std::vector<Pending> queue_;
  bool closing_ = false;

  std::mutex join_mu_;  // serialises joins of thread_
  std::thread thread_;
  std::thread::id writer_id_;

  std::atomic<int64_t> commits_{0};
  std::atomic<int64_t> batches_{0};
  std::atomic<int64_t> failed_batches_{0};
  std::atomic<int64_t> full_disk_retries_{0};
};

Result<std::unique_ptr<SqliteStore::Impl>> SqliteStore::Impl::Open(const std::string& path) {
  std::unique_ptr<Impl> impl(new Impl(path));
  const std::string where = "sqlite database " + path;

  Result<std::unique_ptr<Database>> writer = Database::Open(path);
  if (!writer) return tl::unexpected(writer.error());
  impl->writer_db_ = std::move(*writer);
  Database& db = *impl->writer_db_;
  if (Status s = db.SetBusyTimeout(kBusyTimeoutMs); !s) return Fail(s, where);
  Result<std::string> mode = db.QueryText("PRAGMA journal_mode = WAL", "set journal_mode");
  if (!mode) return tl::unexpected(WithContext(mode.error(), where));
  if (*mode != "wal") {
    return MakeError(ErrorCode::kFailedPrecondition,
                     where + ": journal_mode is " + Quote(*mode) + ", want 'wal'");
  }
  // FULL: the WAL is fsynced at every commit, so an acknowledged batch survives power loss.
  if (Status s = db.Exec("PRAGMA synchronous = FULL", "set synchronous"); !s) {
    return Fail(s, where);
  }
  Result<std::string> sync = db.QueryText("PRAGMA synchronous", "read synchronous");
  if (!sync) return tl::unexpected(WithContext(sync.error(), where));
  if (*sync != "2") {  // 2: FULL
    return MakeError(ErrorCode::kFailedPrecondition,
                     where + ": synchronous is " + *sync + ", want 2 (full)");
  }
  if (Status s = impl->Migrate(); !s) return tl::unexpected(s.error());
  if (Status s = PrepareWrites(db, impl->w_); !s) return Fail(s, where);

  Result<std::unique_ptr<Database>> reader = Database::Open(path);
  if (!reader) return tl::unexpected(reader.error());
  impl->reader_db_ = std::move(*reader);
  if (Status s = impl->reader_db_->SetBusyTimeout(kBusyTimeoutMs); !s) return Fail(s, where);
  if (Status s = impl->reader_db_->Exec("PRAGMA query_only = ON", "set query_only"); !s) {
    return Fail(s, where);
  }
  if (Status s = PrepareReads(*impl->reader_db_, impl->r_); !s) return Fail(s, where);

  try {
    impl->thread_ = std::thread([raw = impl.get()] { raw->Run(); });
  } catch (const std::system_error& e) {
    return MakeError(ErrorCode::kResourceExhausted,
                     where + ": cannot start the writer thread: " + e.what());
  }
  impl->writer_id_ = impl->thread_.get_id();
  return impl;
}

SqliteStore::Impl::~Impl() { Close(); }

Status SqliteStore::Impl::Migrate() {
  Database& db = *writer_db_;
  const std::string where = "sqlite database " + path_;
  const std::span<const Migration> migrations = EmbeddedMigrations();
  const int latest = migrations.empty() ? 0 : migrations.back().version;

  if (Status s = db.Exec("BEGIN IMMEDIATE", "begin migration transaction"); !s) {
    return Fail(s, where);
  }
  auto fail = [&](const Status& s, std::string_view what) {
    (void)db.Exec("ROLLBACK", "roll back migrations");
    return Fail(s, where + ": " + std::string(what));
  };
  if (Status s = db.Exec("CREATE TABLE IF NOT EXISTS schema_migrations ("
                         "version INTEGER PRIMARY KEY, applied_ms INTEGER NOT NULL) STRICT",
                         "create schema_migrations");
      !s) {
    return fail(s, "migrations");
  }
  Result<int64_t> current_version =
      db.QueryInt("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", "read version");
  if (!current_version) return fail(tl::unexpected(current_version.error()), "migrations");
  const int64_t current = *current_version;
  if (current > latest) {
    (void)db.Exec("ROLLBACK", "roll back migrations");
    return MakeError(ErrorCode::kFailedPrecondition,
                     where + " has schema version " + std::to_string(current) +
                         ", newer than the latest this gpupool knows (" + std::to_string(latest) +
                         "); use the gpupool release that wrote it or a newer one");
  }
  for (const Migration& m : migrations) {
    if (m.version <= current) continue;
    if (Status s = db.Exec(m.sql, "apply"); !s) {
      return fail(s, "migration " + std::string(m.name));
    }
    Result<Statement> record = db.Prepare(
        "INSERT INTO schema_migrations (version, applied_ms) VALUES (?1, ?2)", "record migration");
    if (!record) return fail(tl::unexpected(record.error()), "migration " + std::string(m.name));
    if (Status s = record->Bind(1, int64_t{m.version}).Bind(2, NowMs()).Run(); !s) {
      return fail(s, "migration " + std::string(m.name));
    }
  }
  if (Status s = db.Exec("COMMIT", "commit migrations"); !s) return fail(s, "migrations");
  return {};
}

void SqliteStore::Impl::Write(WriteBatch batch, std::function<void(Status)> done) {
  {
    std::lock_guard lock(mu_);
    if (!closing_) {
      queue_.push_back(Pending{std::move(batch), std::move(done)});
      cv_.notify_one();
      return;
    }
  }
  done(MakeError(ErrorCode::kUnavailable, "sqlite store " + path_ + " is closed"));
}

void SqliteStore::Impl::Close() {
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  // From a done callback (the writer thread itself) the thread cannot be joined here: it stops
  // after the current group, and the destructor joins it.
  if (std::this_thread::get_id() == writer_id_) return;
  std::lock_guard lock(join_mu_);
  if (thread_.joinable()) thread_.join();
}

SqliteStore::Stats SqliteStore::Impl::GetStats() const {
  return Stats{.commits = commits_.load(),
               .batches = batches_.load(),
               .failed_batches = failed_batches_.load(),
               .full_disk_retries = full_disk_retries_.load()};
}

void SqliteStore::Impl::Run() {
  std::vector<Pending> group;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return !queue_.empty() || closing_; });
      if (queue_.empty()) return;  // closing, and everything queued is committed
      group.swap(queue_);
    }
    // A full disk: the group waits, whole and in order, ahead of everything queued after it,
    // and is tried again every second until it fits (space was freed) or the store closes (then
    // its batches are answered with the error).
    for (bool last_try = false; !CommitGroup(group, last_try);) {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, kFullDiskRetry, [this] { return closing_; });
      last_try = closing_;
    }
    group.clear();
  }
}

bool SqliteStore::Impl::CommitGroup(std::vector<Pending>& group, bool answer_full) {
  std::vector<Status> results(group.size());
  std::optional<Error> group_error;  // set when the transaction as a whole failed
  int64_t applied = 0;
  auto run = [&](Statement& stmt) {
    Status s = stmt.Run();
    if (!s) group_error = WithContext(s.error(), "sqlite database " + path_);
    return s.has_value();
  };

  // A transaction a failed ROLLBACK left open would make every later BEGIN fail.
  if (!writer_db_->AutoCommit()) (void)w_.rollback.Run();
  if (run(w_.begin)) {
    for (size_t i = 0; i < group.size(); ++i) {
      if (Status valid = ValidateBatch(group[i].batch); !valid) {
        results[i] = std::move(valid);
        continue;
      }
      if (!run(w_.savepoint)) break;
      Status status = ApplyBatch(group[i].batch);
      if (status) {
        if (!run(w_.release_savepoint)) break;
        ++applied;
        continue;
      }
      results[i] = status;
      if (status.error().code == ErrorCode::kInsufficientStorage) {
        // The batches after this one must not commit without it: the group fails whole.
        group_error = WithContext(status.error(), "sqlite database " + path_);
        break;
      }
      if (writer_db_->AutoCommit()) {
        // SQLite rolled the whole transaction back (e.g. disk full): nothing of the group stays.
        group_error = WithContext(status.error(), "sqlite database " + path_ + " rolled back");
        break;
      }
      if (!run(w_.rollback_to_savepoint) || !run(w_.release_savepoint)) break;
    }
    if (!group_error) run(w_.commit);
    if (group_error && !writer_db_->AutoCommit()) (void)w_.rollback.Run();
  }

  if (group_error && group_error->code == ErrorCode::kInsufficientStorage && !answer_full) {
    ++full_disk_retries_;
    return false;
  }
  if (group_error) {
    for (Status& result : results) {
      if (result) result = tl::unexpected(*group_error);
    }
    failed_batches_ += static_cast<int64_t>(group.size());
  } else {
    if (applied > 0) ++commits_;
    batches_ += applied;
    failed_batches_ += static_cast<int64_t>(group.size()) - applied;
  }
  for (size_t i = 0; i < group.size(); ++i) group[i].done(std::move(results[i]));
  return true;
}

Status SqliteStore::Impl::ApplyBatch(const WriteBatch& b) {
  for (const Project& p : b.projects) {
    Status s = w_.upsert_project.Bind(1, p.id)
                   .Bind(2, p.name)
                   .Bind(3, p.max_gpu_milli)
                   .Bind(4, p.max_tasks)
                   .Bind(5, p.stop_grace_ms)
                   .Bind(6, p.created_ms)
                   .Bind(7, p.max_storage_bytes)
                   .Run();
    if (!s) return Fail(s, "project " + Quote(p.id));
  }
  for (const User& u : b.users) {
    if (Status s = WriteUser(w_.upsert_user, u); !s) return Fail(s, "user " + Quote(u.id));
  }
  for (const AccessKey& k : b.access_keys) {
    Status s = w_.upsert_access_key.Bind(1, k.access_key)
                   .Bind(2, k.user_id)
                   .BindBlob(3, k.sealed_secret)
                   .Bind(4, k.description)
                   .Bind(5, k.created_ms)
                   .Bind(6, k.revoked_ms)
                   .Bind(7, k.node)
                   .Bind(8, k.join_token_id)
                   .Run();
    if (!s) return Fail(s, "access key " + Quote(k.access_key));
  }
  for (const JoinToken& t : b.join_tokens) {
    Status s = w_.upsert_join_token.Bind(1, t.id)
                   .Bind(2, t.secret_digest)
                   .Bind(3, t.description)
                   .Bind(4, t.created_by)
                   .Bind(5, t.created_ms)
                   .Bind(6, t.expires_ms)
                   .Bind(7, t.revoked_ms)
                   .Run();
    if (!s) return Fail(s, "join token " + Quote(t.id));
  }
  for (const NodeInfo& n : b.nodes) {
    if (Status s = WriteNode(w_.upsert_node, n); !s) return Fail(s, "node " + Quote(n.node.name));
  }
  for (const Task& t : b.tasks) {
    if (Status s = WriteTask(w_.upsert_task, t); !s) return Fail(s, "task " + Quote(t.id));
  }
  for (const Price& p : b.prices) {
    Status s = w_.upsert_price.Bind(1, p.resource)
                   .Bind(2, p.effective_ms)
                   .Bind(3, p.micros_per_hour)
                   .Run();
    if (!s) return Fail(s, "price of " + Quote(p.resource));
  }
  for (const std::string& id : b.deleted_tasks) {
    if (Status s = w_.delete_task.Bind(1, id).Run(); !s) return Fail(s, "task " + Quote(id));
    if (Status s = w_.delete_task_events.Bind(1, id).Run(); !s) {
      return Fail(s, "task " + Quote(id));
    }
    if (Status s = w_.delete_task_snapshots.Bind(1, id).Run(); !s) {
      return Fail(s, "task " + Quote(id));
    }
  }
  for (const TaskSnapshot& snap : b.snapshots) {
    if (Status s = WriteSnapshot(w_.upsert_snapshot, snap); !s) {
      return Fail(s, "snapshot " + Quote(snap.id));
    }
  }
  for (const std::string& id : b.deleted_snapshots) {
    if (Status s = w_.delete_snapshot.Bind(1, id).Run(); !s) {
      return Fail(s, "snapshot " + Quote(id));
    }
  }
  for (const Volume& v : b.volumes) {
    if (Status s = WriteVolume(w_.upsert_volume, v); !s) return Fail(s, "volume " + Quote(v.id));
  }
  for (const std::string& id : b.deleted_volumes) {
    if (Status s = w_.delete_volume.Bind(1, id).Run(); !s) return Fail(s, "volume " + Quote(id));
  }
  for (const Dataset& d : b.datasets) {
    if (Status s = WriteDataset(w_.upsert_dataset, d); !s) return Fail(s, "dataset " + Quote(d.id));
  }
  for (const std::string& id : b.deleted_datasets) {
    if (Status s = w_.delete_dataset.Bind(1, id).Run(); !s) return Fail(s, "dataset " + Quote(id));
  }
  for (const TaskEvent& e : b.events) {
    Status s = w_.insert_event.Bind(1, e.task_id)
                   .Bind(2, e.time_ms)
                   .Bind(3, TaskStateName(e.from))
                   .Bind(4, TaskStateName(e.to))
                   .Bind(5, e.reason)
                   .Run();
    if (!s) return Fail(s, "event of task " + Quote(e.task_id));
  }
  for (const LedgerEntry& e : b.ledger) {
    Status s = w_.insert_ledger.Bind(1, e.key)
                   .Bind(2, e.project_id)
                   .Bind(3, e.task_id)
                   .Bind(4, LedgerKindName(e.kind))
                   .Bind(5, e.amount_micros)
                   .Bind(6, e.from_ms)
                   .Bind(7, e.to_ms)
                   .Bind(8, e.detail)
                   .Bind(9, e.created_ms)
                   .Run();
    if (!s) return Fail(s, "ledger entry " + Quote(e.key));
  }
  for (const AuditEntry& e : b.audit) {
    Status s = w_.insert_audit.Bind(1, e.seq)
                   .Bind(2, e.time_ms)
                   .Bind(3, e.actor)
                   .Bind(4, e.access_key)
                   .Bind(5, e.action)
                   .Bind(6, e.target)
                   .Bind(7, e.detail)
                   .Run();
    if (!s) return Fail(s, "audit entry " + std::to_string(e.seq));
  }
  for (const Nonce& n : b.nonces) {
    Status s = w_.upsert_nonce.Bind(1, n.access_key).Bind(2, n.nonce).Bind(3, n.timestamp_ms).Run();
    if (!s) return Fail(s, "nonce " + Quote(n.nonce) + " of access key " + Quote(n.access_key));
  }
  if (b.expire_nonces_before_ms > 0) {
    if (Status s = w_.expire_nonces.Bind(1, b.expire_nonces_before_ms).Run(); !s) return s;
  }
  for (const auto& [key, value] : b.settings) {
    if (Status s = w_.upsert_setting.Bind(1, key).Bind(2, value).Run(); !s) {
      return Fail(s, "setting " + Quote(key));
    }
  }
  return {};
}

Result<Snapshot> SqliteStore::Impl::Load(const LoadOptions& options) {
  Snapshot snapshot;
  std::lock_guard lock(read_mu_);
  // One read transaction: every table as of the same commit.
  if (Status s = r_.begin.Run(); !s) return Fail(s, "sqlite database " + path_);
  Status status = LoadLocked(options, snapshot);
  (void)r_.end.Run();
  if (!status) return Fail(status, "load sqlite database " + path_);
  return snapshot;
}

Status SqliteStore::Impl::LoadLocked(const LoadOptions& options, Snapshot& out) {
  Status s = ForEachRow(r_.projects, [&](const Statement& row) -> Status {
    out.projects.push_back(ReadProject(row));
    return {};
  });
  if (!s) return s;
  s = ForEachRow(r_.users, [&](const Statement& row) -> Status {
    Result<User> user = ReadUser(row);
    if (!user) return tl::unexpected(user.error());
    out.users.push_back(std::move(*user));
    return {};
  });
  if (!s) return s;
  s = ForEachRow(r_.access_keys, [&](const Statement& row) -> Status {
    out.access_keys.push_back(ReadAccessKey(row));
    return {};
  });
  if (!s) return s;
  s = ForEachRow(r_.join_tokens, [&](const Statement& row) -> Status {
    out.join_tokens.push_back(ReadJoinToken(row));
    return {};
  });
  if (!s) return s;
  s = ForEachRow(r_.nodes, [&](const Statement& row) -> Status {
    Result<NodeInfo> node = ReadNode(row);
    if (!node) return tl::unexpected(node.error());
    out.nodes.push_back(std::move(*node));
    return {};
  });
  if (!s) return s;
  s = ForEachRow(r_.tasks.Bind(1, options.finished_since_ms), [&](const Statement& row) -> Status {
    Result<Task> task = ReadTaskRow(row);
    if (!task) return tl::unexpected(task.error());
    out.tasks.push_back(std::move(*task));
    return {};
  });
  if (!s) return s;
  std::sort(out.tasks.begin(), out.tasks.end(), [](const Task& a, const Task& b) {
    return std::tie(a.seq, a.id) < std::tie(b.seq, b.id);
  });
  s = ForEachRow(r_.max_task_seq, [&](const Statement& row) -> Status {
    if (!row.IsNull(0)) out.max_task_seq = row.Int(0);
    return {};
  });
  if (!s) return s;
  s = ForEachRow(r_.max_audit_seq, [&](const Statement& row) -> Status {
    if (!row.IsNull(0)) out.max_audit_seq = row.Int(0);
    return {};
  });
  if (!s) return s;
  s = ForEachRow(r_.snapshots, [&](const Statement& row) -> Status {
    Result<TaskSnapshot> snap = ReadSnapshotRow(row);
    if (!snap) return tl::unexpected(snap.error());
    out.snapshots.push_back(std::move(*snap));
    return {};
  });
  if (!s) return s;
  s = ForEachRow(r_.volumes, [&](const Statement& row) -> Status {
    out.volumes.push_back(ReadVolumeRow(row));
    return {};
  });
  if (!s) return s;
  s = ForEachRow(r_.datasets, [&](const Statement& row) -> Status {
    Result<Dataset> d = ReadDatasetRow(row);
    if (!d) return tl::unexpected(d.error());
    out.datasets.push_back(std::move(*d));
    return {};
  });
  if (!s) return s;

  s = ForEachRow(r_.prices, [&](const Statement& row) -> Status {
    out.prices.push_back(
        Price{.resource = row.Text(0), .micros_per_hour = row.Int(2), .effective_ms = row.Int(1)});
    return {};
  });
  if (!s) return s;
  s = ForEachRow(r_.nonces, [&](const Statement& row) -> Status {
    out.nonces.push_back(
        Nonce{.access_key = row.Text(0), .nonce = row.Text(1), .timestamp_ms = row.Int(2)});
    return {};
  });
  if (!s) return s;
  s = ForEachRow(r_.sums, [&](const Statement& row) -> Status {
    const std::string kind = row.Text(1);
    std::optional<LedgerKind> parsed = ParseLedgerKind(kind);
    if (!parsed)
      return Corrupt("ledger of project " + Quote(row.Text(0)) + " has unknown kind " +
                     Quote(kind));
    (*parsed == LedgerKind::kCredit ? out.credits_micros : out.usage_micros)[row.Text(0)] =
        row.Int(2);
    return {};
  });
  if (!s) return s;
  return ForEachRow(r_.settings, [&](const Statement& row) -> Status {
    out.settings[row.Text(0)] = row.Text(1);
    return {};
  });
}

Result<std::optional<Task>> SqliteStore::Impl::FindTask(const std::string& id) {
  if (Status s = ValidateTaskId(id); !s) return tl::unexpected(s.error());
  std::optional<Task> found;
  std::lock_guard lock(read_mu_);
  Status s = ForEachRow(r_.task_by_id.Bind(1, id), [&](const Statement& row) -> Status {
    Result<Task> task = ReadTaskRow(row);
    if (!task) return tl::unexpected(task.error());
    found = std::move(*task);
    return {};
  });
  if (!s) return Fail(s, "sqlite database " + path_);
  return found;
}

Result<std::vector<Task>> SqliteStore::Impl::TaskPage(const TaskQuery& q) {
  if (Status s = ValidateTaskQuery(q); !s) return tl::unexpected(s.error());
  // A page walks one index in seq order ((project_id, seq) or (state, seq)) only when the query
  // names at most one value of its column: an IN list of several would have SQLite sort every
  // match. So several projects (or, without a project, several states) are one statement each,
  // all in one read transaction, and their pages merged.
  std::vector<TaskQuery> parts;
  auto part = [&](std::vector<std::string> projects, std::vector<TaskState> states) {
    TaskQuery p = q;
    p.project_ids = std::move(projects);
    p.states = std::move(states);
    parts.push_back(std::move(p));
  };
  if (q.project_ids.size() > 1) {
    for (const std::string& id : q.project_ids) part({id}, q.states);
  } else if (q.project_ids.empty() && q.states.size() > 1) {
    for (TaskState state : q.states) part({}, {state});
  } else {
    parts.push_back(q);
  }
  std::vector<Task> page;
  std::lock_guard lock(read_mu_);
  if (Status s = r_.begin.Run(); !s) return Fail(s, "sqlite database " + path_);
  Status status;
  for (const TaskQuery& p : parts) {
    // The filters vary in number: the statement is made for the query. ?1 is the cursor, ?2 the
    // limit, then the projects, the states and the node.
    std::string where = "tasks WHERE seq > ?1";
    int next = 3;
    auto in_list = [&](size_t n) {
      std::string list;
      for (size_t i = 0; i < n; ++i) list += (i ? ", ?" : "?") + std::to_string(next++);
      return list;
    };
    if (!p.project_ids.empty()) {
      where += " AND project_id IN (" + in_list(p.project_ids.size()) + ")";
    }
    if (!p.states.empty()) where += " AND state IN (" + in_list(p.states.size()) + ")";
    if (!p.node.empty()) {
      where += " AND json_extract(placement, '$.node') = ?" + std::to_string(next++);
    }
    if (!p.array_id.empty()) where += " AND array_id = ?" + std::to_string(next++);
    Result<Statement> stmt = reader_db_->Prepare(
        SelectSql(kTaskColumns, where + " ORDER BY seq, id LIMIT ?2"), "read a page of tasks");
    if (!stmt) {
      status = tl::unexpected(stmt.error());
      break;
    }
    stmt->Bind(1, p.after_seq).Bind(2, p.limit);
    int bind = 3;
    for (const std::string& id : p.project_ids) stmt->Bind(bind++, id);
    for (TaskState state : p.states) stmt->Bind(bind++, TaskStateName(state));
    if (!p.node.empty()) stmt->Bind(bind++, p.node);
    if (!p.array_id.empty()) stmt->Bind(bind++, p.array_id);
    status = ForEachRow(*stmt, [&](const Statement& row) -> Status {
      Result<Task> task = ReadTaskRow(row);
      if (!task) return tl::unexpected(task.error());
      page.push_back(std::move(*task));
      return {};
    });
    if (!status) break;
  }
  (void)r_.end.Run();
  if (!status) return Fail(status, "sqlite database " + path_);
  if (parts.size() > 1) {
    std::sort(page.begin(), page.end(), [](const Task& a, const Task& b) {
      return std::tie(a.seq, a.id) < std::tie(b.seq, b.id);
    });
    if (static_cast<int64_t>(page.size()) > q.limit) page.resize(static_cast<size_t>(q.limit));
  }
  return page;
}

Result<std::vector<TaskEvent>> SqliteStore::Impl::TaskEvents(const std::string& task_id) {
  if (Status s = ValidateTaskId(task_id); !s) return tl::unexpected(s.error());
  std::vector<TaskEvent> events;
  std::lock_guard lock(read_mu_);
  Status s = ForEachRow(r_.events_of_task.Bind(1, task_id), [&](const Statement& row) -> Status {
    Result<TaskEvent> event = ReadEvent(row);
    if (!event) return tl::unexpected(event.error());
    events.push_back(std::move(*event));
    return {};
  });
  if (!s) return Fail(s, "sqlite database " + path_);
  return events;
}

Result<std::vector<LedgerEntry>> SqliteStore::Impl::Ledger(const LedgerQuery& q) {
  if (Status s = ValidateLedgerQuery(q); !s) return tl::unexpected(s.error());
  std::vector<LedgerEntry> entries;
  std::lock_guard lock(read_mu_);
  Statement& stmt = q.task_id.empty() ? r_.ledger_of_project : r_.ledger_of_task;
  stmt.Bind(1, q.project_id)
      .Bind(2, q.from_ms)
      .Bind(3, q.to_ms == 0 ? std::numeric_limits<int64_t>::max() : q.to_ms)
      .Bind(4, q.limit)
      .Bind(5, q.offset);
  if (!q.task_id.empty()) stmt.Bind(6, q.task_id);
  Status s = ForEachRow(stmt, [&](const Statement& row) -> Status {
    Result<LedgerEntry> entry = ReadLedgerEntry(row);
    if (!entry) return tl::unexpected(entry.error());
    entries.push_back(std::move(*entry));
    return {};
  });
  if (!s) return Fail(s, "sqlite database " + path_);
  return entries;
}

Result<std::vector<AuditEntry>> SqliteStore::Impl::Audit(const AuditQuery& q) {
  if (Status s = ValidateAuditQuery(q); !s) return tl::unexpected(s.error());
  std::vector<AuditEntry> entries;
  std::lock_guard lock(read_mu_);
  r_.audit_page.Bind(1, q.after_seq).Bind(2, q.limit).Bind(3, q.actor).Bind(4, q.target);
  Status s = ForEachRow(r_.audit_page, [&](const Statement& row) -> Status {
    entries.push_back(AuditEntry{.seq = row.Int(0),
                                 .time_ms = row.Int(1),
                                 .actor = row.Text(2),
                                 .access_key = row.Text(3),
                                 .action = row.Text(4),
                                 .target = row.Text(5),
                                 .detail = row.Text(6)});
    return {};
  });
  if (!s) return Fail(s, "sqlite database " + path_);
  return entries;
}

// ---- SqliteStore -----------------------------------------------------------------------------

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path) {
  Result<std::unique_ptr<Impl>> impl = Impl::Open(path);
  if (!impl) return tl::unexpected(impl.error());
  return std::unique_ptr<SqliteStore>(new SqliteStore(std::move(*impl)));
}

SqliteStore::SqliteStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SqliteStore::~SqliteStore() = default;

Result<Snapshot> SqliteStore::Load(const LoadOptions& options) { return impl_->Load(options); }

Result<std::optional<Task>> SqliteStore::ReadTask(const std::string& id) {
  return impl_->FindTask(id);
}

Result<std::vector<Task>> SqliteStore::ListTasks(const TaskQuery& query) {
  return impl_->TaskPage(query);
}

void SqliteStore::Write(WriteBatch batch, std::function<void(Status)> done) {
  impl_->Write(std::move(batch), std::move(done));
}

Result<std::vector<TaskEvent>> SqliteStore::TaskEvents(const std::string& task_id) {
  return impl_->TaskEvents(task_id);
}

Result<std::vector<LedgerEntry>> SqliteStore::Ledger(const LedgerQuery& query) {
  return impl_->Ledger(query);
}

Result<std::vector<AuditEntry>> SqliteStore::Audit(const AuditQuery& query) {
  return impl_->Audit(query);
}

void SqliteStore::Close() { impl_->Close(); }

SqliteStore::Stats SqliteStore::GetStats() const { return impl_->GetStats(); }

}  // namespace gpupool::store
