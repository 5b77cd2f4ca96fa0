// Store: the durable home of the control plane's entities. The server keeps the working state in
// memory and writes every change through a WriteBatch; Load() rebuilds that state at start-up,
// without the tasks that finished before the server's retention (those stay in the store only and
// are read one by one, ReadTask, or by the page, ListTasks). Implementations: MemoryStore (tests,
// simulator), SqliteStore (group commit), AsyncStore (a decorator for tests); every one passes the
// conformance suite in store/store_conformance.h.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/records.h"
#include "core/result.h"
#include "core/snapshot.h"

namespace gpupool::store {

// Changes applied atomically, in this order: upserts (a record replaces the one with its key),
// task deletions, volume and dataset deletions, appended events, appended ledger entries (an
// existing key is left as it is), appended audit entries (likewise), nonces, then the nonce expiry.
// Batches are applied in the order they were written.
struct WriteBatch {
  std::vector<Project> projects;       // key: id
  std::vector<User> users;             // key: id
  std::vector<AccessKey> access_keys;  // key: access_key
  std::vector<JoinToken> join_tokens;  // key: id
  std::vector<NodeInfo> nodes;         // key: node.name
  std::vector<Task> tasks;             // key: id
  std::vector<Price> prices;           // key: (resource, effective_ms)
  // Removes the task, its events and its snapshots' records (not its ledger).
  std::vector<std::string> deleted_tasks;
  std::vector<TaskSnapshot> snapshots;         // key: id
  std::vector<std::string> deleted_snapshots;  // ids
  std::vector<Volume> volumes;                 // key: id
  std::vector<std::string> deleted_volumes;    // ids
  std::vector<Dataset> datasets;               // key: id
  std::vector<std::string> deleted_datasets;   // ids
  std::vector<TaskEvent> events;
  std::vector<LedgerEntry> ledger;
  std::vector<AuditEntry> audit;       // appended; key: seq (an existing seq is left as it is)
  std::vector<Nonce> nonces;           // key: (access_key, nonce)
  int64_t expire_nonces_before_ms = 0; // > 0: forget nonces with an older timestamp
  std::map<std::string, std::string> settings;  // small key/value facts (e.g. "bootstrap_done")

  bool Empty() const;
};

// What every Store refuses a batch for, before any of it is applied (a batch is applied entirely
// or not at all): empty keys, out-of-range enums, non-positive ledger amounts, text that cannot be
// stored as JSON, access keys of both or neither of a user and a node. kInvalidArgument naming
// the record and field. A writer checks it before its own state changes, so that a batch the
// store would refuse is answered with why and changes nothing (store/validation.cc).
Status ValidateBatch(const WriteBatch& batch);

// What Load brings back.
struct LoadOptions {
  // > 0: terminal tasks (succeeded, failed, stopped, lost) whose finished_ms is older are left
  // out, so that a restart does not bring back every task ever run. 0: every task.
  int64_t finished_since_ms = 0;
};

// Everything the server needs in memory, as of the last durable write.
struct Snapshot {
  std::vector<Project> projects;
  std::vector<User> users;
  std::vector<AccessKey> access_keys;
  std::vector<JoinToken> join_tokens;  // ascending id
  std::vector<NodeInfo> nodes;
  std::vector<Task> tasks;             // ascending seq
  int64_t max_task_seq = 0;            // the highest seq of any task stored, loaded or not
  int64_t max_audit_seq = 0;           // the highest seq of the audit log (its entries stay)
  std::vector<TaskSnapshot> snapshots;  // every snapshot's record, ascending seq
  std::vector<Volume> volumes;          // every volume's record, ascending seq
  std::vector<Dataset> datasets;        // every dataset's record, ascending seq
  std::vector<Price> prices;           // ascending (resource, effective_ms)
  std::vector<Nonce> nonces;
  std::map<std::string, int64_t> credits_micros;  // project id -> Σ credit entries
  std::map<std::string, int64_t> usage_micros;    // project id -> Σ usage entries
  std::map<std::string, std::string> settings;
};

inline constexpr int64_t kMaxTaskQueryLimit = 10'000;

// A page of tasks in ascending seq: those with seq > after_seq that pass every filter given.
struct TaskQuery {
  std::vector<std::string> project_ids;  // empty: any project
  std::vector<TaskState> states;         // empty: any state
  std::string node;                      // empty: any; else the node of the task's placement
  std::string array_id;                  // empty: any; else only this job array's elements
  int64_t after_seq = 0;
  int64_t limit = 100;  // 1..kMaxTaskQueryLimit
};

// Whether `task` passes the filters of `query` (all but the cursor and the limit): the one rule
// of every store's ListTasks, and of the server's pages of the tasks it holds in memory.
bool TaskQueryMatches(const TaskQuery& query, const Task& task);

struct LedgerQuery {
  std::string project_id;   // required
  std::string task_id;      // empty: all tasks
  int64_t from_ms = 0;      // entries with created_ms in [from_ms, to_ms); to_ms 0: no bound
  int64_t to_ms = 0;
  int64_t offset = 0;
  int64_t limit = 1000;
};

// A page of the audit log in ascending seq: entries with seq > after_seq, of `actor` and about
// `target` when given.
struct AuditQuery {
  int64_t after_seq = 0;
  int64_t limit = 100;  // 1..1000
  std::string actor;    // empty: anyone
  std::string target;   // empty: anything
};

class Store {
 public:
  virtual ~Store() = default;

  virtual Result<Snapshot> Load(const LoadOptions& options) = 0;

  // Queues `batch`. `done` runs exactly once, after the batch is durable (or with the error that
  // stopped it), on a thread of the store's choosing; it must not block. Batches commit in the
  // order Write was called; many may share one commit (group commit). A full disk is no error
  // while the store is open: the batch (and those after it) waits, unapplied, until it fits;
  // only a store closing with the disk still full answers kInsufficientStorage.
  virtual void Write(WriteBatch batch, std::function<void(Status)> done) = 0;
  // Write and wait for durability.
  Status WriteSync(WriteBatch batch);

  // Reads of what the server does not keep in memory: tasks that finished long ago (nullopt: no
  // such task), the durable history. A malformed task id or query is kInvalidArgument. Reads see
  // every write acknowledged before they began.
  virtual Result<std::optional<Task>> ReadTask(const std::string& id) = 0;
  virtual Result<std::vector<Task>> ListTasks(const TaskQuery& query) = 0;
  virtual Result<std::vector<TaskEvent>> TaskEvents(const std::string& task_id) = 0;
  virtual Result<std::vector<LedgerEntry>> Ledger(const LedgerQuery& query) = 0;
  virtual Result<std::vector<AuditEntry>> Audit(const AuditQuery& query) = 0;

  // Finishes queued writes and stops accepting new ones (later Writes fail with kUnavailable).
  virtual void Close() = 0;
};

}  // namespace gpupool::store
