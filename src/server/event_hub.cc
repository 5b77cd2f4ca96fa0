// The live events' hub (see event_hub.h): subscribers, their bounded queues and the thread that
// hands queued events to the sinks.
#include "server/event_hub.h"

#include <algorithm>
#include <utility>

namespace gpupool::server {

EventHub::EventHub(EventHubOptions options, MayView may_view, ReadStdout read_stdout)
    : options_(options), may_view_(std::move(may_view)), read_stdout_(std::move(read_stdout)) {
  thread_ = std::thread([this] { Run(); });
}

EventHub::~EventHub() { Stop(); }

void EventHub::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::lock_guard lock(mu_);
  subs_.clear();
  subscribers_.store(0);
}

uint64_t EventHub::Subscribe(const Caller& caller, EventInterest interest,
                             std::shared_ptr<EventSink> sink, int64_t now_ms) {
  auto s = std::make_shared<Subscriber>();
  s->caller = caller;
  s->sink = std::move(sink);
  if (!interest.task.empty() && interest.logs_from) {
    s->log_next = *interest.logs_from;
    s->catch_up = true;
  }
  s->interest = std::move(interest);
  s->last_sent = Clock::now();
  std::lock_guard lock(mu_);
  s->id = next_id_++;
  QueueLocked(*s, std::make_shared<const Event>(StreamStarted{now_ms}));
  subs_.emplace(s->id, s);
  subscribers_.fetch_add(1, std::memory_order_relaxed);
  return s->id;
}

void EventHub::Unsubscribe(uint64_t id) {
  std::lock_guard lock(mu_);
  EraseLocked(id);
}

void EventHub::EraseLocked(uint64_t id) {
  if (subs_.erase(id) > 0) subscribers_.fetch_sub(1, std::memory_order_relaxed);
}

void EventHub::QueueLocked(Subscriber& s, const std::shared_ptr<const Event>& event) {
  if (s.overflowed) return;
  if (s.queue.size() >= options_.max_queued) {
    s.overflowed = true;
    s.queue.clear();  // it will not be delivered: the subscriber starts over
  } else {
    s.queue.push_back(event);
  }
  if (!work_) {
    work_ = true;
    cv_.notify_one();
  }
}

void EventHub::Publish(const std::function<bool(const Subscriber&)>& wants,
                       const std::function<Event()>& make) {
  if (!Active()) return;
  std::shared_ptr<const Event> event;
  std::lock_guard lock(mu_);
  for (auto& [id, s] : subs_) {
    if (!wants(*s)) continue;
    if (!event) event = std::make_shared<const Event>(make());
    QueueLocked(*s, event);
  }
}

void EventHub::PublishTask(const Task& task) {
  Publish([&](const Subscriber& s) { return may_view_(s.caller, task); },
          [&] { return Event(task); });
}

void EventHub::PublishTaskDeleted(const std::string& id, const std::string& project_id) {
  Publish([&](const Subscriber& s) { return s.caller.InProject(project_id); },
          [&] { return Event(TaskDeletedEvent{id}); });
}

void EventHub::PublishNode(const NodeView& node) {
  if (!Active()) return;
  std::shared_ptr<const Event> full, without_tasks;
  std::lock_guard lock(mu_);
  for (auto& [id, s] : subs_) {
    if (!s->interest.nodes) continue;
    std::shared_ptr<const Event>& event = s->caller.IsAdmin() ? full : without_tasks;
    if (!event) {
      NodeView view = node;
      if (!s->caller.IsAdmin()) view.tasks.clear();
      event = std::make_shared<const Event>(std::move(view));
    }
    QueueLocked(*s, event);
  }
}

void EventHub::PublishUsage(const std::string& task, const UsageSample& sample) {
  Publish([&](const Subscriber& s) { return s.interest.task == task; },
          [&] {
            return Event(TaskUsageEvent{task, sample});
          });
}

void EventHub::PublishMetrics(const std::string& task, const ReportedMetrics& metrics) {
  Publish([&](const Subscriber& s) { return s.interest.task == task; },
          [&] {
            return Event(TaskMetricsEvent{task, metrics});
          });
}

void EventHub::PublishNodeUsage(const std::string& node, const NodeSample& sample) {
  Publish([&](const Subscriber& s) { return s.interest.nodes; },
          [&] {
            return Event(NodeUsageEvent{node, sample});
          });
}

void EventHub::PublishStdout(const std::string& task, int64_t offset, std::string_view data) {
  Publish([&](const Subscriber& s) { return s.interest.task == task; },
          [&] {
            return Event(TaskLogEvent{task, offset, std::string(data)});
          });
}

void EventHub::Run() {
  struct Work {
    std::shared_ptr<Subscriber> s;
    std::vector<std::shared_ptr<const Event>> events;
    bool overflowed;
  };
  std::unique_lock lock(mu_);
  while (!stop_) {
    // Wake for queued events, or at the earliest keep-alive due.
    Clock::time_point due = Clock::time_point::max();
    for (const auto& [id, s] : subs_) due = std::min(due, s->last_sent + options_.keep_alive);
    if (due == Clock::time_point::max()) {
      cv_.wait(lock, [this] { return stop_ || work_; });
    } else {
      cv_.wait_until(lock, due, [this] { return stop_ || work_; });
    }
    if (stop_) break;
    work_ = false;
    const Clock::time_point now = Clock::now();
    std::vector<Work> work;
    for (auto& [id, s] : subs_) {
      if (s->queue.empty() && !s->overflowed && now < s->last_sent + options_.keep_alive) continue;
      work.push_back({s, std::exchange(s->queue, {}), s->overflowed});
    }
    lock.unlock();
    std::vector<uint64_t> drop;
    for (Work& w : work) {
      if (!Deliver(*w.s, w.events, w.overflowed, now)) drop.push_back(w.s->id);
    }
    work.clear();
    lock.lock();
    for (uint64_t id : drop) EraseLocked(id);
  }
}

bool EventHub::Deliver(Subscriber& s, const std::vector<std::shared_ptr<const Event>>& events,
                       bool overflowed, Clock::time_point now) {
  for (const std::shared_ptr<const Event>& event : events) {
    bool ok = true;
    if (const auto* log = std::get_if<TaskLogEvent>(event.get())) {
      ok = DeliverStdout(s, *log);
    } else {
      ok = s.sink->Deliver(*event);
      // The stored stdout follows the start, ahead of every event queued after it.
      if (ok && s.catch_up && std::holds_alternative<StreamStarted>(*event)) {
        s.catch_up = false;
        ok = CatchUp(s, -1);
      }
    }
    if (!ok) return false;
  }
  if (overflowed) {
    s.sink->Overflowed(options_.max_queued);
    return false;
  }
  if (events.empty() && !s.sink->KeepAlive()) return false;
  s.last_sent = now;
  return true;
}

bool EventHub::DeliverStdout(Subscriber& s, const TaskLogEvent& e) {
  const int64_t end = e.offset + static_cast<int64_t>(e.data.size());
  if (s.log_next < 0) s.log_next = e.offset;  // from the first bytes after subscribing
  if (end <= s.log_next) return true;         // sent already (by a catch-up read)
  if (e.offset > s.log_next && !CatchUp(s, e.offset)) return false;
  if (s.log_next < e.offset) s.log_next = e.offset;  // the gap could not be read
  const size_t skip = static_cast<size_t>(s.log_next - e.offset);
  TaskLogEvent part{e.task, s.log_next, e.data.substr(skip)};
  s.log_next = end;
  return s.sink->Deliver(Event(std::move(part)));
}

bool EventHub::CatchUp(Subscriber& s, int64_t until) {
  while (until < 0 || s.log_next < until) {
    int64_t want = options_.log_read_bytes;
    if (until >= 0) want = std::min(want, until - s.log_next);
    Result<std::string> bytes = read_stdout_(s.interest.task, s.log_next, want);
    if (!bytes || bytes->empty()) return true;  // the end (or unreadable: the live bytes go on)
    const int64_t offset = s.log_next;
    s.log_next += static_cast<int64_t>(bytes->size());
    if (!s.sink->Deliver(Event(TaskLogEvent{s.interest.task, offset, std::move(*bytes)}))) {
      return false;
    }
  }
  return true;
}

}  // namespace gpupool::server
