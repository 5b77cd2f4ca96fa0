// MemoryStore: a Store kept in process memory, thread-safe, with the same semantics as SqliteStore
// (it passes the same conformance suite). Write applies the batch and calls `done` before it
// returns. Used by tests and the simulator; nothing survives the process.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/records.h"
#include "core/result.h"
#include "store/store.h"

namespace gpupool::store {

class MemoryStore : public Store {
 public:
  // What a MemoryStore holds. Stores built on the same Data see the same records, as two opens
  // of one database file would: a test "reopens" by building a new MemoryStore on it.
  struct Data;
  static std::shared_ptr<Data> NewData();

  MemoryStore();  // on fresh, empty data
  explicit MemoryStore(std::shared_ptr<Data> data);
  ~MemoryStore() override;

  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  Result<Snapshot> Load(const LoadOptions& options) override;
  void Write(WriteBatch batch, std::function<void(Status)> done) override;
  Result<std::optional<Task>> ReadTask(const std::string& id) override;
  Result<std::vector<Task>> ListTasks(const TaskQuery& query) override;
  Result<std::vector<TaskEvent>> TaskEvents(const std::string& task_id) override;
  Result<std::vector<LedgerEntry>> Ledger(const LedgerQuery& query) override;
  Result<std::vector<AuditEntry>> Audit(const AuditQuery& query) override;
  void Close() override;

 private:
  std::shared_ptr<Data> data_;
  std::atomic<bool> closed_{false};
};

}  // namespace gpupool::store
