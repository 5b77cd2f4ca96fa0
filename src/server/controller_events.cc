// The Controller's live events (controller.h, event_service.h): who may watch what, and the
// changes it publishes to its EventHub from the places where they are made — Commit (tasks and
// nodes written), a deletion, a new pending reason; the telemetry ingest and the output's appends
// publish their own (controller_telemetry.cc, Open).
#include <unordered_set>
#include <utility>

#include "server/controller.h"

namespace gpupool::server {

void Controller::CheckWatch(const Caller& caller, const EventInterest& interest, DoneStatus done) {
  if (interest.task.empty()) return done({});
  ReadTask(caller, interest.task, [done = std::move(done)](Result<Task> task) {
    done(task ? Status{} : Status(tl::unexpected(task.error())));
  });
}

uint64_t Controller::Subscribe(const Caller& caller, EventInterest interest,
                               std::shared_ptr<EventSink> sink) {
  return events_->Subscribe(caller, std::move(interest), std::move(sink), clock_.NowMs());
}

void Controller::Unsubscribe(uint64_t id) { events_->Unsubscribe(id); }

void Controller::PublishChanges(const store::WriteBatch& batch) {
  if (!batch.events.empty()) {
    std::unordered_set<std::string_view> changed;
    for (const TaskEvent& e : batch.events) changed.insert(e.task_id);
    for (const Task& t : batch.tasks) {
      if (changed.count(t.id)) events_->PublishTask(t);
    }
  }
  for (const NodeInfo& n : batch.nodes) {
    const auto it = nodes_.find(n.node.name);
    if (it != nodes_.end()) events_->PublishNode(MakeNodeView(it->second, /*with_tasks=*/true));
  }
}

void Controller::SetPendingReason(sched::PendingTask why) {
  auto [it, added] = why_pending_.try_emplace(why.task_id);
  const bool changed = added || it->second.reason != why.reason;
  it->second = std::move(why);
  if (!changed || !events_->Active()) return;
  if (const Task* t = FindTask(it->first)) events_->PublishTask(*t);
}

Result<std::string> Controller::ReadStoredStdout(const std::string& task, int64_t offset,
                                                 int64_t max_bytes) {
  if (!output_) return std::string();
  Result<OutputSlice> slice = output_->Read(task, OutputStream::kStdout, offset, -1, max_bytes);
  if (!slice) return tl::unexpected(slice.error());
  if (slice->offset != offset) return std::string();  // past the end (Read clamps)
  return std::move(slice->data);
}

}  // namespace gpupool::server
