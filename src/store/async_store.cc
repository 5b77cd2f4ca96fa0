// AsyncStore: one writer thread takes the queued writes in order, applies each to the decorated
// store and waits for it to be durable there, then calls its `done`; holding stops it from
// taking more.
#include "store/async_store.h"

#include <chrono>
#include <utility>

namespace gpupool::store {
namespace {

// How long AwaitHeld waits for the writes a test expects before it gives up (a bug, not a wait).
constexpr auto kAwaitHeldLimit = std::chrono::seconds(10);

}  // namespace

AsyncStore::AsyncStore(std::unique_ptr<Store> inner)
    : inner_(std::move(inner)), thread_([this] { Run(); }) {}

AsyncStore::~AsyncStore() { Close(); }

Result<Snapshot> AsyncStore::Load(const LoadOptions& options) { return inner_->Load(options); }

Result<std::optional<Task>> AsyncStore::ReadTask(const std::string& id) {
  return inner_->ReadTask(id);
}

Result<std::vector<Task>> AsyncStore::ListTasks(const TaskQuery& query) {
  return inner_->ListTasks(query);
}

Result<std::vector<TaskEvent>> AsyncStore::TaskEvents(const std::string& task_id) {
  return inner_->TaskEvents(task_id);
}

Result<std::vector<LedgerEntry>> AsyncStore::Ledger(const LedgerQuery& query) {
  return inner_->Ledger(query);
}

Result<std::vector<AuditEntry>> AsyncStore::Audit(const AuditQuery& query) {
  return inner_->Audit(query);
}

void AsyncStore::Write(WriteBatch batch, std::function<void(Status)> done) {
  {
    std::lock_guard lock(mu_);
    if (!closing_) {
      queue_.push_back(Pending{std::move(batch), std::move(done)});
      cv_.notify_all();
      return;
    }
  }
  done(MakeError(ErrorCode::kUnavailable, "async store is closed"));
}

void AsyncStore::Close() {
  {
    std::lock_guard lock(mu_);
    closing_ = true;
    holding_ = false;
  }
  cv_.notify_all();
  // From a done callback the writer cannot join itself: it stops once the queue is empty, and
  // the destructor joins it.
  if (std::this_thread::get_id() == thread_.get_id()) return;
  std::lock_guard lock(join_mu_);
  if (thread_.joinable()) {
    thread_.join();
    inner_->Close();
  }
}

void AsyncStore::Hold() {
  std::lock_guard lock(mu_);
  if (closing_) return;  // Close lets everything through
  holding_ = true;
  let_through_ = 0;
}

void AsyncStore::Step(size_t n) {
  {
    std::lock_guard lock(mu_);
    let_through_ += n;
  }
  cv_.notify_all();
}

void AsyncStore::Release() {
  {
    std::lock_guard lock(mu_);
    holding_ = false;
    let_through_ = 0;
  }
  cv_.notify_all();
}

std::vector<WriteBatch> AsyncStore::AwaitHeld(size_t n) {
  std::unique_lock lock(mu_);
  auto held = [&] { return queue_.size() > let_through_ ? queue_.size() - let_through_ : 0; };
  cv_.wait_for(lock, kAwaitHeldLimit, [&] { return !holding_ || held() >= n; });
  std::vector<WriteBatch> out;
  if (!holding_) return out;
  for (size_t i = let_through_; i < queue_.size(); ++i) out.push_back(queue_[i].batch);
  return out;
}

size_t AsyncStore::DropHeld() {
  std::deque<Pending> dropped;
  {
    std::lock_guard lock(mu_);
    if (!holding_) return 0;
    while (queue_.size() > let_through_) {
      dropped.push_front(std::move(queue_.back()));
      queue_.pop_back();
    }
  }
  return dropped.size();  // their callbacks are destroyed here, outside the lock
}

size_t AsyncStore::applied() const {
  std::lock_guard lock(mu_);
  return applied_;
}

void AsyncStore::Run() {
  for (;;) {
    Pending next;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] {
        return (!queue_.empty() && (!holding_ || let_through_ > 0)) || (closing_ && queue_.empty());
      });
      if (queue_.empty()) return;  // closing, and everything queued is acknowledged
      next = std::move(queue_.front());
      queue_.pop_front();
      if (holding_) --let_through_;
    }
    const bool changes = !next.batch.Empty();
    Status status = inner_->WriteSync(std::move(next.batch));
    if (status && changes) {
      std::lock_guard lock(mu_);
      ++applied_;
    }
    next.done(std::move(status));
  }
}

}  // namespace gpupool::store
