// Controller: the scheduling loop (event-triggered passes: snapshot → ScheduleOnce → plan
// applier) and housekeeping (metering, max runtime, exhausted balances).
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/gpu_catalog.h"
#include "sched/fragmentation.h"
#include "server/controller.h"
#include "server/metric_families.h"

namespace gpupool::server {
namespace {

constexpr int64_t kHousekeepingMs = 1000;
constexpr int64_t kPolicyRebuildMs = 10'000;

std::string DescribePlacement(const TaskPlacement& p) {
  std::string s = "placed on " + p.node;
  if (!p.gpus.empty()) {
    s += " gpu";
    for (size_t i = 0; i < p.gpus.size(); ++i) s += (i ? "," : " ") + std::to_string(p.gpus[i]);
  }
  return s;
}

}  // namespace

void Controller::Start() {
  std::lock_guard lock(loop_mu_);
  if (loop_.joinable()) return;
  stop_ = false;
  wake_ = true;
  loop_ = std::thread([this] { LoopMain(); });
}

void Controller::Stop() {
  {
    std::lock_guard lock(loop_mu_);
    stop_ = true;
  }
  loop_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  AnswerWatchers(/*all=*/true);  // long-polls end now, so that the HTTP server can drain
  if (output_) output_->ExpireWaiters(0, /*all=*/true);
}

void Controller::RetryAll() {
  retry_all_ = true;
  Wake();
}

void Controller::Wake() {
  {
    std::lock_guard lock(loop_mu_);
    wake_ = true;
  }
  loop_cv_.notify_one();
}

void Controller::LoopMain() {
  auto next_housekeeping = std::chrono::steady_clock::now();
  for (;;) {
    bool run_pass = false;
    {
      std::unique_lock lock(loop_mu_);
      loop_cv_.wait_until(lock, next_housekeeping, [this] { return stop_ || wake_; });
      if (stop_) return;
      run_pass = wake_;
      wake_ = false;
    }
    // Events that arrive during a pass set wake_ again: they are batched into the next pass.
    if (run_pass) SchedulePass();
    const bool housekeeping = std::chrono::steady_clock::now() >= next_housekeeping;
    if (housekeeping) {
      HousekeepingPass();
      next_housekeeping = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(kHousekeepingMs);
    }
    bool due = housekeeping;  // expired long-polls are answered once a second
    {
      std::lock_guard lock(mu_);
      due = due || watchers_due_;
    }
    if (due) AnswerWatchers(/*all=*/false);
    if (housekeeping && output_) output_->ExpireWaiters(clock_.NowMs());
  }
}

void Controller::RebuildPolicyIfStale(int64_t now_ms) {
  // The fragmentation-aware policies weigh nodes by the workload's typical tasks: learn them
  // from the recent submissions, rebuilt when enough new ones came and not too often.
  const int64_t enough = std::max<int64_t>(50, options_.typical_window / 10);
  const bool never = policy_built_ms_ == 0 && !recent_requests_.empty();
  if (!never && (requests_since_policy_ < enough || now_ms - policy_built_ms_ < kPolicyRebuildMs)) {
    return;
  }
  std::vector<TaskRequest> workload(recent_requests_.begin(), recent_requests_.end());
  sched::PolicyOptions options;
  options.typical = sched::TypicalTasks(workload);
  auto policy = sched::MakePolicy(
      options_.policy == "default" ? sched::DefaultPolicyName() : options_.policy, options);
  if (policy) policy_ = std::move(*policy);
  policy_built_ms_ = now_ms;
  requests_since_policy_ = 0;
}

int Controller::SchedulePass() {
  std::lock_guard pass(pass_mu_);
  const auto started = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  RebuildPolicyIfStale(clock_.NowMs());
  const bool billing = BillingEnabled();
  std::vector<sched::QueuedTask> queue;
  std::set<PendingKey> tried;
  tried.swap(fresh_);
  const std::set<PendingKey>& candidates = retry_all_ ? pending_ : tried;
  retry_all_ = false;
  queue.reserve(candidates.size());
  std::map<std::string, int64_t> planned_milli;  // per project, in this pass's queue
  std::map<std::string, int64_t> planned_elements;  // per job array with a limit, likewise
  const int64_t pass_ms = clock_.NowMs();
  for (const auto& [neg_priority, seq] : candidates) {
    const Task& t = tasks_.at(seq);
    if (!t.array_id.empty() && !ArrayAdmits(t, planned_elements)) continue;
    if (std::optional<std::string> why = AwaitingLastSnapshot(t, pass_ms)) {
      SetPendingReason(sched::PendingTask{t.id, std::move(*why), {}});
      continue;
    }
    const Project& p = projects_.at(t.project_id);
    if (billing && BalanceOf(p.id) <= 0) {
      SetPendingReason(sched::PendingTask{t.id, "project " + p.id + " has no balance", {}});
      continue;
    }
    if (p.max_gpu_milli >= 0) {
      int64_t& planned = planned_milli[p.id];
      const int64_t milli = UnplacedQuotaMilli(t.request);  // a MIG task: its slice share
      const int64_t taken = use_[p.id].gpu_milli + planned;
      if (taken + milli > p.max_gpu_milli) {
        SetPendingReason(sched::PendingTask{
            t.id,
            "project " + p.id + " quota: " + std::to_string(taken) + " of " +
                std::to_string(p.max_gpu_milli) +
                " milli-GPU in use or placed ahead of it, the task needs " + std::to_string(milli),
            {}});
        continue;
      }
      planned += milli;
    }
    queue.push_back(sched::QueuedTask{t.id, SchedulingRequest(t)});
  }
  int placed = 0;
  if (!queue.empty()) {
    metrics_.Add(metric::kSchedulerNodesCopied, {}, snapshot_.Refresh(cluster_));
    lock.unlock();
    // Victims are chosen by the work they would lose (their WorkState) as of now.
    sched::ScheduleOptions schedule;
    schedule.now_ms = clock_.NowMs();
    schedule.allow_moves = options_.allow_moves;
    schedule.move_any_priority = options_.move_any_priority;
    const sched::Plan plan = sched::ScheduleOnce(snapshot_.state(), queue, *policy_, schedule);
    lock.lock();
    store::WriteBatch batch;
    placed = ApplyPlan(plan, queue, clock_.NowMs(), batch);
    if (!batch.Empty()) Commit(std::move(batch), [](Status) {});
  }
  lock.unlock();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  metrics_.Observe(metric::kSchedulerCycle, {}, seconds, LatencyBuckets());
  metrics_.Add(metric::kSchedulerPlaced, {}, placed);
  return placed;
}

int Controller::ApplyPlan(const sched::Plan& plan, const std::vector<sched::QueuedTask>&,
                          int64_t now_ms, store::WriteBatch& batch) {
  for (const sched::PendingTask& p : plan.pending) SetPendingReason(p);
  std::map<std::string, std::string> preempt_reason;
  for (const sched::Preemption& p : plan.preemptions) preempt_reason[p.victim_id] = p.reason;
  std::map<std::string, const sched::Move*> move_of;  // by the task moved
  for (const sched::Move& m : plan.moves) move_of.emplace(m.task_id, &m);

  // Group the assignments: a gang's members are applied all together or not at all.
  std::vector<std::vector<const sched::Assignment*>> groups;
  std::map<std::string, size_t> gang_group;
  for (const sched::Assignment& a : plan.assignments) {
    const Task* t = FindTask(a.task_id);
    const std::string gang = t ? t->request.gang_id : "";
    if (gang.empty()) {
      groups.push_back({&a});
      continue;
    }
    auto [it, fresh] = gang_group.emplace(gang, groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(&a);
  }

  int placed = 0;
  int64_t stale = 0;
  for (const auto& group : groups) {
    // Re-check against the latest state before anything changes: the task still waits, its
    // victims still run, the tasks it moves still run where the plan found them, the project's
    // quota still holds (counting what they free), and the placement still fits (Bind re-checks
    // resources, with theirs freed). Only then are the victims preempted and the tasks moved: a
    // refused group leaves every one of them running.
    std::string refused;
    // The victims and the tasks moved: distinct, in plan order (victims may be shared in a gang).
    std::vector<Task*> leaving;
    std::set<std::string> leaving_ids;
    for (const sched::Assignment* a : group) {
      const Task* t = FindTask(a->task_id);
      if (t == nullptr || t->state != TaskState::kPending) {
        refused = "task " + a->task_id + " is no longer pending";
        break;
      }
      for (const std::string& v : a->preempted) {
        Task* victim = FindTask(v);
        if (victim == nullptr || !HoldsResources(victim->state)) {
          refused = "victim " + v + " no longer holds resources";
          break;
        }
        if (leaving_ids.insert(v).second) leaving.push_back(victim);
      }
      for (size_t i = 0; refused.empty() && i < a->moved.size(); ++i) {
        const auto move = move_of.find(a->moved[i]);
        refused = move == move_of.end()
                      ? "the plan moves task " + a->moved[i] + " without saying where from"
                      : MoveRefusal(*move->second);
        if (refused.empty() && leaving_ids.insert(a->moved[i]).second) {
          leaving.push_back(FindTask(a->moved[i]));
        }
      }
      if (!refused.empty()) break;
    }
    if (refused.empty()) refused = QuotaRefusal(group, leaving);
    // A distributed job's MASTER_PORT: a port on its member 0's node that no other job there has.
    int32_t rendezvous_port = 0;
    if (refused.empty()) {
      for (const sched::Assignment* a : group) {
        const Task* t = FindTask(a->task_id);
        if (MemberIndex(*t) != 0) continue;
        const std::string& node = cluster_.node(a->placement.node).name;
        rendezvous_port = FreeRendezvousPort(node);
        if (rendezvous_port == 0) {
          refused = "no rendezvous port is free on node " + node + " (" +
                    std::to_string(kRendezvousPortFirst) + "-" +
                    std::to_string(kRendezvousPortLast) + " are all in use)";
        }
      }
    }
    std::vector<std::pair<Task*, const sched::Assignment*>> bound;
    // Node-local volumes bound to their first task's node here (their records before): the next
    // task that mounts one, in this group or later in the plan, is held to that node by Bind.
    std::vector<Volume> claimed;
    if (refused.empty()) {
      for (Task* gone : leaving) (void)cluster_.Unbind(gone->id);
      for (const sched::Assignment* a : group) {
        Task* t = FindTask(a->task_id);
        if (auto ok = cluster_.Bind(t->id, SchedulingRequest(*t), a->placement, WorkOf(*t)); !ok) {
          refused = "the plan was stale: " + ok.error().message;
          break;
        }
        ClaimVolumes(*t, cluster_.node(a->placement.node).name, claimed);
        bound.emplace_back(t, a);
      }
    }
    if (!refused.empty()) {
      for (auto& [t, a] : bound) (void)cluster_.Unbind(t->id);
      for (auto v = claimed.rbegin(); v != claimed.rend(); ++v) volumes_[v->id] = *v;
      // Back where they were: the resources they held are exactly the ones just freed.
      for (Task* gone : leaving) {
        if (cluster_.FindBinding(gone->id) != nullptr) continue;
        const std::optional<sched::Placement> at = ToPlacement(*gone);
        Status back = at ? cluster_.Bind(gone->id, SchedulingRequest(*gone), *at, WorkOf(*gone))
                         : Status(MakeError(ErrorCode::kInternal, "no placement on record"));
        if (!back) {
          std::fprintf(stderr, "gpupool: internal: task %s could not be bound back: %s\n",
                       gone->id.c_str(), back.error().message.c_str());
        }
      }
      for (const sched::Assignment* a : group) {
        SetPendingReason(sched::PendingTask{a->task_id, refused, {}});
      }
      ++stale;
      RetryAll();  // retry with a fresh snapshot
      continue;
    }
    // A task taken off its node for this group's: its run is interrupted now, and it is kept
    // out of the queue until its last snapshot is stored, to resume from it.
    auto interrupt = [&](Task& task, SnapshotTrigger trigger) {
      if (task.state != TaskState::kRunning) return;
      NoteInterruption(task, now_ms);
      OrderLastSnapshot(task, trigger, now_ms, batch);  // while it has a node
    };
    for (const sched::Assignment* a : group) {
      for (const std::string& v : a->preempted) {
        Task* victim = FindTask(v);
        if (!HoldsResources(victim->state)) continue;  // shared by gang members: done once
        auto reason = preempt_reason.count(v) ? preempt_reason[v] : "preempted by " + a->task_id;
        interrupt(*victim, SnapshotTrigger::kPreempt);
        Transition(*victim, TaskState::kPreempted, reason, now_ms, batch);  // its Unbind: a no-op
        Transition(*victim, TaskState::kPending, "re-queued after preemption", now_ms, batch);
        batch.tasks.push_back(*victim);
        metrics_.Add(metric::kPreemptions, {}, 1);
      }
      // Not a preemption: queued again in its place (its priority and submission), its run
      // continues from the snapshot wherever it fits.
      for (const std::string& m : a->moved) {
        Task* mover = FindTask(m);
        const std::string from = mover->placement->node;
        interrupt(*mover, SnapshotTrigger::kMove);
        Transition(*mover, TaskState::kPending,
                   "moved from " + from + " to make room for " + a->task_id +
                       " (snapshotted first, to resume from it where it fits)",
                   now_ms, batch);  // its Unbind: a no-op
        batch.tasks.push_back(*mover);
        metrics_.Add(metric::kMoves, {}, 1);
      }
    }
    for (const Volume& before : claimed) batch.volumes.push_back(volumes_.at(before.id));
    for (auto& [t, a] : bound) {
      t->placement = FromPlacement(a->placement, t->request);
      if (IsJobMember(*t)) t->placement->rendezvous_port = rendezvous_port;
      TouchNode(t->placement->node);
      t->bound_ms = now_ms;
      t->billed_until_ms = now_ms;
      use_[t->project_id].gpu_milli += TaskGpuMilli(*t);
      why_pending_.erase(t->id);
      ++t->run;
      std::string how = DescribePlacement(*t->placement) + " (run " + std::to_string(t->run);
      if (const TaskSnapshot* from = FindSnapshot(t->resume_from)) {
        how += ", its workspace from " + from->id;
        if (t->work_lost_ms > 0) {
          how += "; " + std::to_string(t->work_lost_ms / 1000) + " s of work lost";
        }
      }
      for (size_t i = 0; i < a->moved.size(); ++i) {
        how += (i == 0 ? "; " : ", ") + a->moved[i];
        if (i + 1 == a->moved.size()) how += " moved away to make room";
      }
      Transition(*t, TaskState::kScheduled, how + ")", now_ms, batch);
      if (a->placement.mig) PersistNode(a->placement.node, batch);
      batch.tasks.push_back(*t);
      ++placed;
    }
  }
  if (stale > 0) metrics_.Add(metric::kSchedulerStale, {}, static_cast<double>(stale));
  return placed;
}

std::string Controller::MoveRefusal(const sched::Move& move) {
  const std::string& id = move.task_id;
  const Task* t = FindTask(id);
  const std::string from = move.from_node >= 0 && move.from_node < cluster_.NodeCount()
                               ? cluster_.node(move.from_node).name
                               : "#" + std::to_string(move.from_node);
  if (t == nullptr || t->state != TaskState::kRunning || !t->placement ||
      t->placement->node != from) {
    return "task " + id + ", to be moved, no longer runs on node " + from;
  }
  if (!t->request.gang_id.empty()) return "task " + id + " is a job's member: it cannot move alone";
  if (!WorkOf(*t).snapshot_on_stop) {
    return "task " + id + " is not snapshotted when it stops: it cannot move";
  }
  return "";
}

std::string Controller::QuotaRefusal(const std::vector<const sched::Assignment*>& group,
                                     const std::vector<Task*>& leaving) const {
  std::map<std::string, int64_t> added_milli;  // per project: the group's tasks less what leaves
  for (const Task* gone : leaving) added_milli[gone->project_id] -= TaskGpuMilli(*gone);
  for (const sched::Assignment* a : group) {
    const Task& t = tasks_.at(seq_of_.at(a->task_id));
    const Gpu* gpu = a->placement.gpus.empty()
                         ? nullptr
                         : &cluster_.node(a->placement.node)
                                .gpus.at(static_cast<size_t>(a->placement.gpus.front()));
    added_milli[t.project_id] += QuotaMilli(t.request, gpu ? gpu->model : "");
  }
  for (const auto& [id, added] : added_milli) {
    const Project& p = projects_.at(id);
    if (added <= 0 || p.max_gpu_milli < 0) continue;
    const int64_t in_use = use_.count(id) ? use_.at(id).gpu_milli : 0;
    if (in_use + added > p.max_gpu_milli) {
      return "project " + p.id + " quota max_gpu_milli " + std::to_string(p.max_gpu_milli) +
             " would be exceeded: " + std::to_string(in_use) + " milli-GPU in use, the placement " +
             "adds " + std::to_string(added);
    }
  }
  return "";
}

void Controller::HousekeepingPass() {
  SweepSessions(clock_.NowMs());  // auth_mu_ alone, before mu_
  std::unique_lock lock(mu_);
  const int64_t now = clock_.NowMs();
  store::WriteBatch batch;
  const bool meter_due = now - last_meter_ms_ >= options_.meter_interval_ms;
  for (auto& [name, info] : nodes_) {
    if (info.status == NodeStatus::kReady &&
        now - info.last_heartbeat_ms > options_.node_timeout_ms) {
      LoseNode(info, now, batch);
    }
  }
  std::set<int64_t> changed;  // seqs of tasks to write
  // The live tasks only (a copy: a transition moves a task out of live_).
  const std::vector<int64_t> live(live_.begin(), live_.end());
  for (int64_t seq : live) {
    Task& t = tasks_.at(seq);
    if (!HoldsResources(t.state)) continue;
    const int64_t run_start = t.started_ms > 0 ? t.started_ms : t.bound_ms;
    // now − run_start, not run_start + max: a deadline past int64 (a task stored before the
    // API bounded max_runtime_ms) must not wrap into the past.
    if (t.max_runtime_ms > 0 && now - run_start >= t.max_runtime_ms) {
      // Billing ends at the deadline, not at the moment housekeeping noticed it.
      const int64_t end = std::min(now, run_start + t.max_runtime_ms);
      if (t.state == TaskState::kRunning) {
        NoteInterruption(t, end);
        OrderLastSnapshot(t, SnapshotTrigger::kStop, now, batch);
      }
      Transition(t, TaskState::kStopped,
                 "max runtime of " + std::to_string(t.max_runtime_ms / 1000) + " s reached", end,
                 batch);
      changed.insert(seq);
    } else if (meter_due) {
      Bill(t, now, batch);
      changed.insert(seq);
    }
  }
  if (meter_due) last_meter_ms_ = now;
  // A project whose balance is gone keeps its running tasks for its grace period, then they stop.
  const bool billing = BillingEnabled();
  std::set<std::string> out_of_grace;
  for (auto& [id, use] : use_) {
    if (!billing || use.credits_micros - use.usage_micros > 0) {
      use.exhausted_since_ms = 0;
      continue;
    }
    if (use.exhausted_since_ms == 0) use.exhausted_since_ms = now;
    auto project = projects_.find(id);
    const int64_t grace = project == projects_.end() ? 0 : project->second.stop_grace_ms;
    if (now - use.exhausted_since_ms >= grace) out_of_grace.insert(id);
  }
  if (!out_of_grace.empty()) {
    for (int64_t seq : std::vector<int64_t>(live_.begin(), live_.end())) {
      Task& t = tasks_.at(seq);
      if (!HoldsResources(t.state) || !out_of_grace.count(t.project_id)) continue;
      if (t.state == TaskState::kRunning) {
        NoteInterruption(t, now);
        OrderLastSnapshot(t, SnapshotTrigger::kStop, now, batch);
      }
      Transition(t, TaskState::kStopped,
                 "project " + t.project_id + " ran out of balance (grace " +
                     std::to_string(projects_.at(t.project_id).stop_grace_ms / 1000) + " s)",
                 now, batch);
      changed.insert(seq);
    }
  }
  for (int64_t seq : changed) batch.tasks.push_back(tasks_.at(seq));
  std::vector<Done<TaskSnapshot>> late = ExpireSnapshotOrders(now);
  if (!batch.Empty()) Commit(std::move(batch), [](Status) {});
  const std::vector<std::string> dropped = DropFinished(now - options_.retain_finished_ms);
  lock.unlock();
  for (const auto& w : late) {
    w(MakeError(ErrorCode::kUnavailable, "the task's node did not store the snapshot in time"));
  }
  ForgetTasks(dropped);
}

}  // namespace gpupool::server
