// Controller: job arrays (task_service.h) — one submission of many tasks that differ by their
// index, created in one durable batch, read, stopped and released as a whole, and the %N limit of
// elements holding resources at once that the scheduling pass applies (ArrayAdmits).
#include <algorithm>

#include "server/controller.h"

namespace gpupool::server {
namespace {

// The first element's seq of an array id ("a-7" → 7); 0 when `id` is not one.
int64_t FirstSeq(const std::string& id) {
  if (!IsArrayId(id)) return 0;
  return std::stoll(id.substr(2));
}

tl::unexpected<Error> NoArray(const std::string& id) {
  return NotFound("array " + id + " not found");
}

}  // namespace

void Controller::SubmitArray(const Caller& caller, TaskSpec spec, ArraySpec array,
                             Done<TaskArrayView> done) {
  if (Status ok = CheckSpec(spec); !ok) return done(tl::unexpected(ok.error()));
  const int64_t count = static_cast<int64_t>(array.indexes.size());
  if (count < 1 || count > kMaxArrayElements) {
    return done(InvalidArgument("array must have 1.." + std::to_string(kMaxArrayElements) +
                                " indexes, got " + std::to_string(count)));
  }
  if (!spec.request.gang_id.empty()) {
    return done(InvalidArgument("gang_id: an array's elements cannot be a gang"));
  }
  std::unique_lock lock(mu_);
  Result<std::string> project_id = CheckSubmission(caller, spec, count);
  if (!project_id) return lock.unlock(), done(tl::unexpected(project_id.error()));
  const int64_t now = clock_.NowMs();
  const int64_t first = next_seq_;
  TaskArrayView view;
  view.id = ArrayId(first);
  view.project_id = *project_id;
  view.task_ids.reserve(static_cast<size_t>(count));
  std::vector<Task> elements;
  elements.reserve(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) {
    const int64_t index = array.indexes[static_cast<size_t>(k)];
    Task& task = elements.emplace_back(
        NewTask(caller, *project_id, spec, first + k, now,
                " (element " + std::to_string(index) + " of array " + view.id + ")"));
    task.array_id = view.id;
    task.array_index = index;
    task.array_limit = array.limit;
    task.name = (spec.name.empty() ? view.id : spec.name) + "[" + std::to_string(index) + "]";
    view.task_ids.push_back(task.id);
  }
  store::WriteBatch batch;
  if (Status ok = AdmitNew(std::move(elements), batch); !ok) {
    return lock.unlock(), done(tl::unexpected(ok.error()));
  }
  view.states[static_cast<size_t>(TaskState::kPending)] = count;
  view.spec = std::move(array);
  const bool queued = !spec.hold;
  Commit(std::move(batch), [done = std::move(done), view = std::move(view)](Status) mutable {
    done(std::move(view));
  });
  lock.unlock();
  if (queued) Wake();
}

bool Controller::ArrayAdmits(const Task& task, std::map<std::string, int64_t>& planned) {
  if (task.array_limit <= 0) return true;
  int64_t& queued = planned[task.array_id];
  const ArrayUse& a = arrays_.at(task.array_id);
  if (a.holding + queued < a.limit) {
    ++queued;
    return true;
  }
  // One text for every waiting element (not a count that changes), so that it is published once.
  SetPendingReason(sched::PendingTask{task.id,
                                      "array " + task.array_id + " runs at most " +
                                          std::to_string(a.limit) + " elements at once (%" +
                                          std::to_string(a.limit) + "): waiting for one to end",
                                      {}});
  return false;
}

void Controller::ReadArray(const Caller& caller, const std::string& id, Done<TaskArrayView> done) {
  if (FirstSeq(id) == 0) return done(NoArray(id));
  ReadHistory<TaskArrayView>(
      [this, caller, id]() -> Result<TaskArrayView> {
        TaskArrayView view;
        view.id = id;
        store::TaskQuery q;
        q.array_id = id;
        q.limit = store::kMaxTaskQueryLimit;
        Result<std::vector<Task>> elements = store_.ListTasks(q);
        if (!elements) return tl::unexpected(elements.error());
        if (elements->empty() || !MayView(caller, elements->front())) return NoArray(id);
        view.project_id = elements->front().project_id;
        view.spec.limit = elements->front().array_limit;
        for (const Task& t : *elements) {
          view.spec.indexes.push_back(t.array_index);
          view.task_ids.push_back(t.id);
          ++view.states[static_cast<size_t>(t.state)];
        }
        return view;
      },
      std::move(done));
}

void Controller::GetArray(const Caller& caller, const std::string& id, Done<TaskArrayView> done) {
  ReadArray(caller, id, std::move(done));
}

void Controller::ChangeArray(const Caller& caller, const std::string& id,
                             const std::function<void(Task&, store::WriteBatch&)>& change,
                             Done<TaskArrayView> done) {
  const int64_t first = FirstSeq(id);
  std::unique_lock lock(mu_);
  auto a = arrays_.find(id);
  if (first == 0 || a == arrays_.end()) {
    // None of its elements is in memory: all ended long ago (nothing to change), or no such array.
    lock.unlock();
    return ReadArray(caller, id, std::move(done));
  }
  if (!caller.InProject(a->second.project_id)) return lock.unlock(), done(NoArray(id));
  store::WriteBatch batch;
  for (auto it = tasks_.lower_bound(first); it != tasks_.end() && it->first <= a->second.last_seq;
       ++it) {
    if (it->second.array_id == id) change(it->second, batch);
  }
  const bool queued = !batch.Empty();
  Commit(std::move(batch), [this, caller, id, done = std::move(done)](Status) mutable {
    ReadArray(caller, id, std::move(done));
  });
  lock.unlock();
  if (queued) Wake();
}

void Controller::StopArray(const Caller& caller, const std::string& id, Done<TaskArrayView> done) {
  const int64_t now = clock_.NowMs();
  ChangeArray(
      caller, id,
      [&](Task& t, store::WriteBatch& batch) {
        if (IsTerminal(t.state)) return;
        Transition(t, TaskState::kStopped, "stopped by " + caller.user_id + " with array " + id,
                   now, batch);
        batch.tasks.push_back(t);
      },
      std::move(done));
}

void Controller::ReleaseArray(const Caller& caller, const std::string& id,
                              Done<TaskArrayView> done) {
  const int64_t now = clock_.NowMs();
  ChangeArray(
      caller, id,
      [&](Task& t, store::WriteBatch& batch) {
        if (!t.held) return;
        t.held = false;
        t.reason = "released by " + caller.user_id + " with array " + id;
        t.updated_ms = now;
        Enqueue(t);
        batch.tasks.push_back(t);
        batch.events.push_back(
            TaskEvent{t.id, now, TaskState::kPending, TaskState::kPending, t.reason});
      },
      std::move(done));
}

}  // namespace gpupool::server
