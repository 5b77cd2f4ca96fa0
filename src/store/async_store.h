// AsyncStore: a Store that decorates another and calls every Write's `done` on a writer thread of
// its own, in Write order, as SqliteStore's writer thread does, so that code over it meets the
// production threading in-process (callbacks off the caller's thread and outside its locks). A
// test can hold writes back (queued, neither applied nor acknowledged: not yet durable), let
// them through one by one or all at once, or drop them as a crash would. Reads go straight to the
// decorated store. It passes the conformance suite (store/store_conformance.h).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/records.h"
#include "core/result.h"
#include "store/store.h"

namespace gpupool::store {

class AsyncStore final : public Store {
 public:
  explicit AsyncStore(std::unique_ptr<Store> inner);
  // Closes (see Close). Must not run on the writer thread, i.e. not from a `done` callback.
  ~AsyncStore() override;

  AsyncStore(const AsyncStore&) = delete;
  AsyncStore& operator=(const AsyncStore&) = delete;

  Result<Snapshot> Load(const LoadOptions& options) override;
  // Queues `batch`; the writer thread applies it to the decorated store and then calls `done`.
  void Write(WriteBatch batch, std::function<void(Status)> done) override;
  Result<std::optional<Task>> ReadTask(const std::string& id) override;
  Result<std::vector<Task>> ListTasks(const TaskQuery& query) override;
  Result<std::vector<TaskEvent>> TaskEvents(const std::string& task_id) override;
  Result<std::vector<LedgerEntry>> Ledger(const LedgerQuery& query) override;
  Result<std::vector<AuditEntry>> Audit(const AuditQuery& query) override;
  // Stops holding, applies and acknowledges everything queued, stops the writer thread and
  // closes the decorated store. Later Writes fail with kUnavailable. Idempotent.
  void Close() override;

  // --- holding writes back (tests) ---
  // From now on the writer takes no queued write (one it is applying finishes).
  void Hold();
  // Lets the next `n` queued writes through, in order, and keeps holding the ones after them.
  void Step(size_t n);
  // Stops holding: everything queued is applied and acknowledged, in order.
  void Release();
  // Waits until at least `n` writes are held back and returns their batches, in Write order.
  std::vector<WriteBatch> AwaitHeld(size_t n);
  // Forgets the held writes without applying them or calling back, as a crash before they
  // were durable would; their callbacks are destroyed uncalled. Returns how many there were.
  size_t DropHeld();
  // Non-empty batches applied to the decorated store so far (empty ones are the ordering
  // barriers readers use; they change nothing).
  size_t applied() const;

 private:
  struct Pending {
    WriteBatch batch;
    std::function<void(Status)> done;
  };
  void Run();  // the writer thread

  const std::unique_ptr<Store> inner_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool holding_ = false;
  size_t let_through_ = 0;  // while holding: writes that may still pass
  bool closing_ = false;
  size_t applied_ = 0;
  std::mutex join_mu_;  // serialises joins of thread_
  std::thread thread_;
};

}  // namespace gpupool::store
