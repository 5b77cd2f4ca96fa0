// The Controller's telemetry (controller.h): agents' batches into the usage histories and the task
// output store, stop conditions checked on the metrics tasks report, logs read and followed, and
// the usage views (per task, per node, the overview `gpupool top` shows). Locks: mu_ (tasks,
// nodes) before telemetry_mu_ (histories); the output store and its waiters' callbacks run with
// neither held.
#include <algorithm>
#include <iterator>
#include <memory>
#include <utility>

#include "server/controller.h"
#include "server/metric_families.h"
#include "server/metric_line.h"

namespace gpupool::server {
namespace {

constexpr size_t kReportedKept = 500;  // reported points kept per task (the API shows them)

double Seconds(int64_t ms) { return static_cast<double>(ms) / 1000.0; }

// gpu_idle_s: how long the GPUs have been idle as of the sample at `latest_ms` (0: not idle).
double GpuIdleSeconds(int64_t idle_since_ms, int64_t latest_ms) {
  return idle_since_ms > 0 ? Seconds(latest_ms - idle_since_ms) : 0.0;
}

}  // namespace

void Controller::PushTelemetry(const Caller& caller, NodeTelemetry batch,
                               Done<std::vector<OutputOffsets>> done) {
  // All of it on the blocking-work executor: the output is appended to files. An agent sends its
  // next batch only once this one is answered, so a node's batches stay in order.
  auto shared = std::make_shared<NodeTelemetry>(std::move(batch));
  if (Status posted = blocking_->Post(
          [this, caller, shared, done] { done(ApplyTelemetry(caller, std::move(*shared))); });
      !posted) {
    done(tl::unexpected(posted.error()));
  }
}

Result<std::vector<OutputOffsets>> Controller::ApplyTelemetry(const Caller& caller,
                                                              NodeTelemetry batch) {
  const int64_t now = clock_.NowMs();
  struct Accepted {
    TaskTelemetry* t;
    int64_t run;
    bool running;
    int64_t started_ms;
    bool checks;  // running with a stop condition: each new value is checked against it
    std::vector<ReportedPoint> reported;  // the complete lines of its metrics chunks
  };
  std::vector<OutputOffsets> answer;
  std::vector<Accepted> accepted;
  {
    std::lock_guard lock(mu_);
    if (Status ok = RequireAgentOf(caller, batch.node, "ship the telemetry of node " + batch.node);
        !ok) {
      return tl::unexpected(ok.error());
    }
    if (nodes_.find(batch.node) == nodes_.end())
      return NotFound("node " + batch.node + " not found");
    for (TaskTelemetry& t : batch.tasks) {
      const Task* task = FindTask(t.task_id);
      // Output of a task's run comes from the node it ran on, for the binding it ran under; a
      // task bound anew (elsewhere, or here again) no longer takes the old run's telemetry.
      const bool here = task != nullptr && task->placement && task->placement->node == batch.node;
      const bool holds = here && HoldsResources(task->state);
      if (!here || (holds && t.bound_ms > 0 && t.bound_ms != task->bound_ms)) {
        answer.push_back(OutputOffsets{t.task_id, 0, 0, 0, /*refused=*/true});
        continue;
      }
      const int64_t run = t.bound_ms > 0 ? t.bound_ms : (holds ? task->bound_ms : 0);
      const bool running = task->state == TaskState::kRunning;
      accepted.push_back(
          Accepted{&t, run, running, task->started_ms, running && !task->stop_when.empty(), {}});
    }
  }

  // The metric lines, parsed outside every lock.
  for (Accepted& a : accepted) {
    for (const OutputChunk& chunk : a.t->output) {
      if (chunk.stream != OutputStream::kMetrics) continue;
      std::vector<ReportedPoint> points = ParseMetricLines(chunk, a.t->output_complete);
      std::move(points.begin(), points.end(), std::back_inserter(a.reported));
    }
  }

  // The output: appended outside every lock (file I/O; it wakes log followers). On a full disk
  // (or one below the reserve) the rest of a task's output waits: the offsets answered are what
  // is stored, so the agent ships the remainder again later, and its end is not taken as
  // complete yet.
  for (Accepted& a : accepted) {
    OutputOffsets offsets;
    offsets.task_id = a.t->task_id;
    for (const OutputChunk& chunk : a.t->output) {
      if (!output_) break;
      const auto bytes = static_cast<int64_t>(chunk.data.size());
      const Status room = disk_.Admit(bytes, "storing tasks' output is");
      Result<int64_t> stored =
          room ? output_->Append(a.t->task_id, a.run, chunk.stream, chunk.offset, chunk.data)
               : Result<int64_t>(tl::unexpected(room.error()));
      if (!stored && stored.error().code == ErrorCode::kFailedPrecondition) {
        offsets.refused = true;  // an earlier run's late output
        break;
      }
      if (!stored && stored.error().code == ErrorCode::kInsufficientStorage) {
        a.t->output_complete = false;
        break;
      }
      if (!stored) return tl::unexpected(stored.error());
      disk_.Wrote(bytes);
    }
    if (output_ && !offsets.refused) {
      offsets.stdout_bytes = output_->RunSize(a.t->task_id, a.run, OutputStream::kStdout);
      offsets.stderr_bytes = output_->RunSize(a.t->task_id, a.run, OutputStream::kStderr);
      offsets.metrics_bytes = output_->RunSize(a.t->task_id, a.run, OutputStream::kMetrics);
    }
    answer.push_back(std::move(offsets));
  }

  // Histories, reported metrics, and the stop conditions they may satisfy.
  // For each running task with a stop condition, its values after each new sample and point, in
  // order: the condition must be seen the first time it holds, even if a later value in the
  // same batch undoes it.
  std::vector<std::pair<std::string, std::vector<MetricValues>>> to_check;
  {
    std::lock_guard lock(telemetry_mu_);
    NodeTelemetryState& node = node_telemetry_[batch.node];
    const bool publish = events_->Active();
    for (const NodeSample& s : batch.samples) {
      if (!node.usage.Append(s.usage)) continue;
      if (publish) events_->PublishNodeUsage(batch.node, s);
      node.latest = s;
      if (node.gpus.size() < s.gpus.size()) node.gpus.resize(s.gpus.size());
      for (size_t i = 0; i < s.gpus.size(); ++i) node.gpus[i].Append(s.gpus[i]);
    }
    for (Accepted& a : accepted) {
      TaskTelemetryState& st = task_telemetry_[a.t->task_id];
      if (a.run != st.run && a.run > 0) {
        st.run = a.run;  // a new run: its metrics file starts anew, its output is still to come
        st.reported_until = 0;
        st.idle_since_ms = 0;
        st.output_complete = false;
      }
      std::vector<MetricValues> seen;
      for (const UsageSample& s : a.t->samples) {
        if (!st.usage.Append(s)) continue;
        if (publish) events_->PublishUsage(a.t->task_id, s);
        const int64_t util = s.values[usage::kGpuUtilPct];
        if (util == 0 && st.idle_since_ms == 0) st.idle_since_ms = s.time_ms;
        if (util > 0) st.idle_since_ms = 0;
        if (a.checks) seen.push_back(WithBuiltins(st, a.started_ms, now));
      }
      for (ReportedPoint& p : a.reported) {
        if (p.end_offset <= st.reported_until) continue;  // shipped before
        st.reported_until = p.end_offset;
        for (const auto& [name, value] : p.values) st.latest[name] = value;
        st.reported.push_back(ReportedMetrics{now, std::move(p.values)});
        if (publish) events_->PublishMetrics(a.t->task_id, st.reported.back());
        if (st.reported.size() > kReportedKept) st.reported.pop_front();
        if (a.checks) seen.push_back(WithBuiltins(st, a.started_ms, now));
      }
      if (a.t->output_complete) st.output_complete = true;
      if (!seen.empty()) to_check.emplace_back(a.t->task_id, std::move(seen));
    }
  }
  for (const Accepted& a : accepted) {
    if (a.t->output_complete && output_) output_->Wake(a.t->task_id);
  }
  for (const auto& [id, seen] : to_check) StopIfConditionHolds(id, seen, now);
  return answer;
}

MetricValues Controller::WithBuiltins(const TaskTelemetryState& st, int64_t started_ms,
                                      int64_t now_ms) const {
  MetricValues values = st.latest;
  std::optional<double> interactive_idle;
  if (started_ms > 0) {
    values[std::string(kRuntimeMetric)] = Seconds(now_ms - started_ms);
    // Since the user's latest activity on it, or since it started (this run's).
    interactive_idle = Seconds(std::max<int64_t>(0, now_ms - std::max(st.active_ms, started_ms)));
    values[std::string(kInteractiveIdleMetric)] = *interactive_idle;
  }
  if (auto latest = st.usage.Latest()) {
    const int64_t util = latest->values[usage::kGpuUtilPct];
    if (util >= 0) {
      const double gpu_idle = GpuIdleSeconds(st.idle_since_ms, latest->time_ms);
      values[std::string(kGpuUtilMetric)] = static_cast<double>(util);
      values[std::string(kGpuIdleMetric)] = gpu_idle;
      if (interactive_idle)
        values[std::string(kIdleMetric)] = std::min(gpu_idle, *interactive_idle);
    }
  }
  return values;
}

void Controller::NoteActivity(const std::string& id) {
  const int64_t now = clock_.NowMs();
  std::lock_guard lock(telemetry_mu_);
  // The callers found the task running (its telemetry state goes when it is let go).
  task_telemetry_[id].active_ms = now;
}

void Controller::AddLatestMetrics(const std::vector<std::string>& names, TaskPage& page) {
  const int64_t now = clock_.NowMs();
  std::lock_guard lock(telemetry_mu_);
  for (const Task& t : page.tasks) {
    auto st = task_telemetry_.find(t.id);
    if (st == task_telemetry_.end()) continue;
    const MetricValues all =
        WithBuiltins(st->second, t.state == TaskState::kRunning ? t.started_ms : 0, now);
    MetricValues wanted;
    for (const std::string& name : names) {
      if (auto v = all.find(name); v != all.end()) wanted.emplace(name, v->second);
    }
    if (!wanted.empty()) page.metrics.emplace(t.id, std::move(wanted));
  }
}

void Controller::StopIfConditionHolds(const std::string& id, const std::vector<MetricValues>& seen,
                                      int64_t now_ms) {
  std::lock_guard lock(mu_);
  Task* t = FindTask(id);
  if (t == nullptr || t->state != TaskState::kRunning || t->stop_when.empty()) return;
  auto condition = ParseStopCondition(t->stop_when);
  if (!condition) return;  // refused at submission; a task from before the grammar keeps running
  const auto first = std::find_if(seen.begin(), seen.end(), [&](const MetricValues& values) {
    return condition->Evaluate(values);
  });
  if (first == seen.end()) return;
  store::WriteBatch batch;
  Transition(*t, TaskState::kStopped, "stop condition met: " + condition->Explain(*first), now_ms,
             batch);
  batch.tasks.push_back(*t);
  Commit(std::move(batch), [](Status) {});
}

bool Controller::OutputComplete(const std::string& id) {
  bool ended = false;
  int64_t bound_ms = 0;
  int64_t finished_ms = 0;
  {
    std::lock_guard lock(mu_);
    const Task* t = FindTask(id);
    if (t == nullptr) return true;  // deleted, or it ended long ago (it left memory)
    ended = IsTerminal(t->state);
    if (ended && t->started_ms == 0) return true;  // it never ran: it wrote nothing
    bound_ms = t->bound_ms;
    finished_ms = t->finished_ms;
  }
  {
    // The agent's word that the run ended and all its output was shipped counts even before its
    // report of the end arrives (the two travel apart): for an ended task, or the current run.
    std::lock_guard lock(telemetry_mu_);
    const auto it = task_telemetry_.find(id);
    if (it != task_telemetry_.end() && it->second.output_complete &&
        (ended || (bound_ms > 0 && it->second.run == bound_ms))) {
      return true;
    }
  }
  return ended && clock_.NowMs() - finished_ms >= options_.output_grace_ms;
}

void Controller::ReadTaskLog(const Caller& caller, const std::string& id, LogRequest request,
                             Done<LogSlice> done) {
  ReadTask(caller, id, [this, id, request, done = std::move(done)](Result<Task> task) {
    if (!task) return done(tl::unexpected(task.error()));
    if (!output_) {
      return done(MakeError(ErrorCode::kFailedPrecondition, "this server keeps no task output"));
    }
    // The output is read from files: on the blocking-work executor. A follower waiting for bytes
    // does not hold a worker (TaskOutput answers it from the append that brings them).
    if (Status posted = blocking_->Post([this, id, request, done] { ReadLog(id, request, done); });
        !posted) {
      done(tl::unexpected(posted.error()));
    }
  });
}

void Controller::ReadLog(const std::string& id, const LogRequest& request, Done<LogSlice> done) {
  auto finish = [this, id, done](Result<OutputSlice> slice) {
    if (!slice) return done(tl::unexpected(slice.error()));
    bool in_memory = false;
    {
      std::lock_guard lock(mu_);
      in_memory = FindTask(id) != nullptr;
    }
    // A task that left memory leaves nothing in the output's caches after a read either.
    if (!in_memory) output_->Forget(id);
    done(LogSlice{id, std::move(*slice), OutputComplete(id)});
  };
  if (request.tail_lines >= 0 || request.wait_ms <= 0 || OutputComplete(id)) {
    return finish(
        output_->Read(id, request.stream, request.offset, request.tail_lines, request.max_bytes));
  }
  output_->ReadOrWait(id, request.stream, request.offset, request.max_bytes,
                      clock_.NowMs() + request.wait_ms, std::move(finish));
  // The output may have completed between the check above and the wait: its wake-up would have
  // missed this reader, so look again.
  if (OutputComplete(id)) output_->Wake(id);
}

void Controller::GetTaskMetrics(const Caller& caller, const std::string& id, int64_t from_ms,
                                int64_t to_ms, Resolution resolution, Done<TaskMetrics> done) {
  ReadTask(caller, id,
           [this, id, from_ms, to_ms, resolution, done = std::move(done)](Result<Task> task) {
             if (!task) return done(tl::unexpected(task.error()));
             TaskMetrics out;
             out.task_id = id;
             out.resolution = resolution;
             {
               // A task that left memory has no history left: an empty answer.
               std::lock_guard lock(telemetry_mu_);
               const auto it = task_telemetry_.find(id);
               if (it != task_telemetry_.end()) {
                 const TaskTelemetryState& st = it->second;
                 out.usage = st.usage.Points(from_ms, to_ms, resolution);
                 out.reported.assign(st.reported.begin(), st.reported.end());
                 out.latest = task->state == TaskState::kRunning
                                  ? WithBuiltins(st, task->started_ms, clock_.NowMs())
                                  : st.latest;
               }
             }
             done(std::move(out));
           });
}

Result<NodeMetrics> Controller::GetNodeMetrics(const Caller& caller, const std::string& name,
                                               int64_t from_ms, int64_t to_ms,
                                               Resolution resolution) {
  (void)caller;  // every caller sees the nodes (as ListNodes shows them)
  {
    std::lock_guard lock(mu_);
    if (nodes_.find(name) == nodes_.end()) return NotFound("node " + name + " not found");
  }
  NodeMetrics out;
  out.node = name;
  out.resolution = resolution;
  std::lock_guard lock(telemetry_mu_);
  const auto it = node_telemetry_.find(name);
  if (it == node_telemetry_.end()) return out;
  out.usage = it->second.usage.Points(from_ms, to_ms, resolution);
  for (const GpuSeries& g : it->second.gpus) {
    out.gpus.push_back(g.Points(from_ms, to_ms, resolution));
  }
  return out;
}

Result<UsageOverview> Controller::GetUsage(const Caller& caller) {
  UsageOverview out;
  std::lock_guard lock(mu_);
  for (const auto& [name, info] : nodes_) out.nodes.push_back({info, std::nullopt});
  for (int64_t seq : live_) {
    const Task& t = tasks_.at(seq);
    if (!caller.InProject(t.project_id)) continue;
    if (t.state == TaskState::kRunning) out.tasks.push_back({t, std::nullopt, {}});
    if (t.state != TaskState::kPending) continue;
    if (t.held) {
      ++out.queue.held;
      continue;
    }
    ++out.queue.waiting;
    // A pending task's updated_ms is when it entered the queue (CollectGauges says why).
    if (out.queue.oldest_id.empty() || t.updated_ms < out.queue.oldest_since_ms) {
      out.queue.oldest_id = t.id;
      out.queue.oldest_since_ms = t.updated_ms;
    }
  }
  std::lock_guard telemetry_lock(telemetry_mu_);
  for (UsageOverview::NodeRow& row : out.nodes) {
    const auto it = node_telemetry_.find(row.info.node.name);
    if (it != node_telemetry_.end()) row.latest = it->second.latest;
  }
  for (UsageOverview::TaskRow& row : out.tasks) {
    const auto it = task_telemetry_.find(row.task.id);
    if (it == task_telemetry_.end()) continue;
    row.latest = it->second.usage.Latest();
    row.reported = it->second.latest;
  }
  return out;
}

void Controller::ForgetTelemetry(const std::vector<std::string>& ids) {
  std::lock_guard lock(telemetry_mu_);
  for (const std::string& id : ids) task_telemetry_.erase(id);
}

void Controller::CollectTelemetryGauges(GaugeSnapshot& gauges) {
  for (const auto* family : {&metric::kNodeCpu, &metric::kNodeMemory}) {
    gauges.Include(*family);
  }
  for (const auto* family :
       {&metric::kGpuUtilization, &metric::kGpuMemory, &metric::kTaskCpu, &metric::kTaskMemory,
        &metric::kTaskGpuUtilization, &metric::kTaskGpuMemory, &metric::kTaskGpuIdle}) {
    gauges.Include(*family);
  }
  // Samples are integers in the API's units (milli-cores, MiB, percent); the gauges are in
  // Prometheus' base units: v × mul / div (a division, so that 43 % is 0.43, not
  // 0.43000000000000005). kUnknown (< 0): not measured, no series.
  struct Unit {
    double mul = 1, div = 1;
  };
  constexpr Unit kMilli{1, 1000}, kMib{1024.0 * 1024.0, 1}, kPercent{1, 100};
  auto set = [&]<size_t N>(const MetricFamily<N>& family, const LabelValues<N>& labels, int64_t v,
                           Unit unit) {
    if (v >= 0) gauges.Set(family, labels, static_cast<double>(v) * unit.mul / unit.div);
  };
  std::lock_guard lock(telemetry_mu_);
  for (const auto& [name, st] : node_telemetry_) {
    const auto info = nodes_.find(name);
    if (!st.latest || info == nodes_.end() || info->second.status != NodeStatus::kReady) continue;
    set(metric::kNodeCpu, {name}, st.latest->usage.values[usage::kCpuMilli], kMilli);
    set(metric::kNodeMemory, {name}, st.latest->usage.values[usage::kMemoryMib], kMib);
    const std::vector<Gpu>& gpus = info->second.node.gpus;
    for (size_t i = 0; i < st.latest->gpus.size(); ++i) {
      const LabelValues<3> gpu = {name, std::to_string(i), i < gpus.size() ? gpus[i].model : ""};
      set(metric::kGpuUtilization, gpu, st.latest->gpus[i].values[gpu_usage::kUtilPct], kPercent);
      set(metric::kGpuMemory, gpu, st.latest->gpus[i].values[gpu_usage::kMemMib], kMib);
    }
  }
  for (int64_t seq : live_) {
    const Task& t = tasks_.at(seq);
    if (t.state != TaskState::kRunning || !t.placement) continue;
    const auto it = task_telemetry_.find(t.id);
    if (it == task_telemetry_.end()) continue;
    const auto latest = it->second.usage.Latest();
    if (!latest) continue;
    const LabelValues<3> labels = {t.project_id, t.id, t.placement->node};
    set(metric::kTaskCpu, labels, latest->values[usage::kCpuMilli], kMilli);
    set(metric::kTaskMemory, labels, latest->values[usage::kMemoryMib], kMib);
    set(metric::kTaskGpuUtilization, labels, latest->values[usage::kGpuUtilPct], kPercent);
    set(metric::kTaskGpuMemory, labels, latest->values[usage::kGpuMemMib], kMib);
    if (latest->values[usage::kGpuUtilPct] >= 0) {  // a task with GPUs
      gauges.Set(metric::kTaskGpuIdle, labels,
                 GpuIdleSeconds(it->second.idle_since_ms, latest->time_ms));
    }
  }
}

}  // namespace gpupool::server
