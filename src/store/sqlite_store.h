// SqliteStore: the Store on one SQLite file (WAL, synchronous=FULL: acknowledged writes survive
// kill -9 and power loss) with group commit: one writer thread commits everything queued in one
// transaction, a savepoint per batch (a failing batch fails alone), one fsync for all of them.
// A full disk (SQLITE_FULL) rolls the whole group back and the writer tries it again every
// second, later batches waiting behind it, until it fits or the store closes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/records.h"
#include "core/result.h"
#include "store/store.h"

namespace gpupool::store {

class SqliteStore final : public Store {
 public:
  // Counters since Open, for benchmarks and monitoring.
  struct Stats {
    int64_t commits = 0;         // transactions committed
    int64_t batches = 0;         // batches those transactions committed
    int64_t failed_batches = 0;  // batches that were refused or rolled back
    int64_t full_disk_retries = 0;  // groups rolled back for a full disk, to be tried again
  };

  // Opens (creating if needed) the database at `path` and brings its schema up to date with the
  // migrations under store/migrations/. A database whose schema is newer than this binary's is
  // refused (kFailedPrecondition).
  static Result<std::unique_ptr<SqliteStore>> Open(const std::string& path);

  // Closes the store (see Close). Must not run on the store's writer thread, i.e. not from a
  // `done` callback.
  ~SqliteStore() override;

  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  Result<Snapshot> Load(const LoadOptions& options) override;
  void Write(WriteBatch batch, std::function<void(Status)> done) override;
  Result<std::optional<Task>> ReadTask(const std::string& id) override;
  Result<std::vector<Task>> ListTasks(const TaskQuery& query) override;
  Result<std::vector<TaskEvent>> TaskEvents(const std::string& task_id) override;
  Result<std::vector<LedgerEntry>> Ledger(const LedgerQuery& query) override;
  Result<std::vector<AuditEntry>> Audit(const AuditQuery& query) override;
  // Commits what is queued, then stops the writer thread. Reads keep working until destruction.
  void Close() override;

  Stats GetStats() const;

 private:
  class Impl;
  explicit SqliteStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupool::store
