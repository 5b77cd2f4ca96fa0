// The parts of the Store interface that every implementation shares: WriteBatch::Empty,
// WriteSync (Write, then wait for its `done`) and the filters of a TaskQuery.
#include "store/store.h"

#include <algorithm>
#include <future>
#include <memory>
#include <utility>

namespace gpupool::store {

bool WriteBatch::Empty() const {
  return projects.empty() && users.empty() && access_keys.empty() && join_tokens.empty() &&
         nodes.empty() && tasks.empty() && prices.empty() && deleted_tasks.empty() &&
         snapshots.empty() && deleted_snapshots.empty() && volumes.empty() &&
         deleted_volumes.empty() && datasets.empty() && deleted_datasets.empty() &&
         events.empty() && ledger.empty() && audit.empty() && nonces.empty() &&
         expire_nonces_before_ms <= 0 && settings.empty();
}

bool TaskQueryMatches(const TaskQuery& q, const Task& t) {
  if (!q.project_ids.empty() &&
      std::find(q.project_ids.begin(), q.project_ids.end(), t.project_id) == q.project_ids.end()) {
    return false;
  }
  if (!q.states.empty() && std::find(q.states.begin(), q.states.end(), t.state) == q.states.end()) {
    return false;
  }
  if (!q.array_id.empty() && t.array_id != q.array_id) return false;
  return q.node.empty() || (t.placement && t.placement->node == q.node);
}

Status Store::WriteSync(WriteBatch batch) {
  // The callback owns the promise: `done` may still be inside set_value when this thread wakes
  // up and returns, so the promise must not live on this stack frame.
  auto promise = std::make_shared<std::promise<Status>>();
  std::future<Status> result = promise->get_future();
  Write(std::move(batch), [promise](Status status) { promise->set_value(std::move(status)); });
  return result.get();
}

}  // namespace gpupool::store
