// BlockingExecutor: a small pool of threads for the control plane's blocking work — reads of the
// store's history, file-system work (task files, output deletion) — so that neither an HTTP I/O
// thread nor the store's callback thread ever waits on the disk. Its queue is bounded: when it is
// full a request is refused (kUnavailable, answered 503) instead of growing a backlog. A caller
// that must first wait for something else (a durable write) reserves its place up front, so the
// refusal comes before anything changed and the reserved job can never be refused later.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/result.h"

namespace gpupool::server {

class BlockingExecutor {
 public:
  // `threads` ≥ 1 workers; at most `max_queued` ≥ 1 jobs queued or reserved and not yet started.
  BlockingExecutor(int threads, size_t max_queued);
  // Runs every job queued (and every reserved one handed over meanwhile), then joins the workers.
  ~BlockingExecutor();
  BlockingExecutor(const BlockingExecutor&) = delete;
  BlockingExecutor& operator=(const BlockingExecutor&) = delete;

  // A reserved place in the queue. Copyable (callbacks are std::functions); the first Run hands
  // the job over, later ones are ignored; the place is given back when the last copy goes unused.
  class Slot {
   public:
    void Run(std::function<void()> job) const;

   private:
    friend class BlockingExecutor;
    struct State;
    std::shared_ptr<State> state_;
  };

  // A place for one job; kUnavailable (naming the limit) when the queue is full.
  Result<Slot> Reserve();
  // Reserve, then Run: queues `job`, or refuses it when the queue is full.
  Status Post(std::function<void()> job);

  // Whether the calling thread is one of the workers (for tests and assertions).
  bool OnWorker() const;
  // Jobs queued or reserved and not yet started.
  size_t Queued() const;

 private:
  void Enqueue(std::function<void()> job);
  void Unreserve();
  void WorkerMain();

  const size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  size_t reserved_ = 0;  // places reserved, job not yet handed over
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace gpupool::server
