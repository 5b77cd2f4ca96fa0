// The bounded blocking-work pool (see blocking_executor.h).
#include "server/blocking_executor.h"

#include <algorithm>
#include <atomic>
#include <utility>

namespace gpupool::server {

struct BlockingExecutor::Slot::State {
  explicit State(BlockingExecutor* e) : executor(e) {}
  ~State() {
    if (!used.exchange(true)) executor->Unreserve();
  }
  BlockingExecutor* executor;
  std::atomic<bool> used{false};
};

void BlockingExecutor::Slot::Run(std::function<void()> job) const {
  if (state_ == nullptr || state_->used.exchange(true)) return;
  state_->executor->Enqueue(std::move(job));
}

BlockingExecutor::BlockingExecutor(int threads, size_t max_queued)
    : max_queued_(std::max<size_t>(max_queued, 1)) {
  for (int i = 0; i < std::max(threads, 1); ++i) workers_.emplace_back([this] { WorkerMain(); });
}

BlockingExecutor::~BlockingExecutor() {
  {
    std::unique_lock lock(mu_);
    // A reserved job is still owed (its caller waits on a write that will call back): wait for
    // it to be handed over or given back before the workers may end.
    cv_.wait(lock, [&] { return reserved_ == 0; });
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

Result<BlockingExecutor::Slot> BlockingExecutor::Reserve() {
  {
    std::lock_guard lock(mu_);
    if (jobs_.size() + reserved_ >= max_queued_) {
      return MakeError(ErrorCode::kUnavailable, "the server's blocking-work queue is full (" +
                                                    std::to_string(max_queued_) +
                                                    " jobs waiting); retry later");
    }
    ++reserved_;
  }
  Slot slot;
  slot.state_ = std::make_shared<Slot::State>(this);
  return slot;
}

Status BlockingExecutor::Post(std::function<void()> job) {
  Result<Slot> slot = Reserve();
  if (!slot) return tl::unexpected(slot.error());
  slot->Run(std::move(job));
  return {};
}

bool BlockingExecutor::OnWorker() const {
  const std::thread::id me = std::this_thread::get_id();
  return std::any_of(workers_.begin(), workers_.end(),
                     [&](const std::thread& t) { return t.get_id() == me; });
}

size_t BlockingExecutor::Queued() const {
  std::lock_guard lock(mu_);
  return jobs_.size() + reserved_;
}

// Both notify under the lock: the last reservation's hand-over may let the destructor, waiting
// for reserved_ == 0, finish and destroy cv_, so nothing of this object may be touched once the
// lock is released (ThreadSanitizer found notify_all racing with ~condition_variable).
void BlockingExecutor::Enqueue(std::function<void()> job) {
  std::lock_guard lock(mu_);
  --reserved_;
  jobs_.push_back(std::move(job));
  cv_.notify_all();
}

void BlockingExecutor::Unreserve() {
  std::lock_guard lock(mu_);
  --reserved_;
  cv_.notify_all();
}

void BlockingExecutor::WorkerMain() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace gpupool::server
