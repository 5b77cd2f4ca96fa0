// The replay's event loop (see replay.h): a simulated clock driven by arrivals and departures, a
// pending queue ordered by (priority desc, arrival, name), and sched::ScheduleOnce passes that
// keep one ClusterState across the whole run; distributed jobs placed whole and sent back whole;
// the work preempted tasks keep in snapshots, and moves. Reads no clock: time is the trace's
// seconds.
#include "sim/replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "sched/cluster_state.h"
#include "sched/feasibility.h"
#include "sched/fragmentation.h"
#include "sched/policy.h"
#include "sched/schedule.h"

namespace gpupool::sim {
namespace {

// Passes are repeated at one instant while they preempt. A victim has strictly lower priority
// than the task that evicts it, so the chain ends after a few passes; this bound only turns a
// scheduler bug into an error.
constexpr int kMaxPassesPerInstant = 1000;

tl::unexpected<Error> Internal(std::string message) {
  return MakeError(ErrorCode::kInternal, std::move(message));
}

double Round2(double x) { return std::round(x * 100.0) / 100.0; }

// Whether `t` may be a member of the job whose first member in the input is `first`: an error
// naming the field that differs.
Status SameJob(const ReplayTask& first, const ReplayTask& t) {
  const auto differs = [&](const char* field, int64_t want, int64_t got) -> Status {
    return InvalidArgument("task " + t.name + ": " + field + " " + std::to_string(got) +
                           " differs from " + std::to_string(want) + " of " + first.name +
                           ", the first member of job " + t.request.gang_id +
                           " (a job's members arrive, run and queue together)");
  };
  if (t.arrival_s != first.arrival_s) return differs("arrival_s", first.arrival_s, t.arrival_s);
  if (t.runtime_s != first.runtime_s) return differs("runtime_s", first.runtime_s, t.runtime_s);
  if (t.request.priority != first.request.priority) {
    return differs("priority", first.request.priority, t.request.priority);
  }
  if (t.request.gang_size != first.request.gang_size) {
    return differs("gang_size", first.request.gang_size, t.request.gang_size);
  }
  return {};
}

// A task's end on the departure heap. `run` is the task's run number when it started, so that
// the entry of a run cut short by preemption is recognised as stale and skipped.
struct Departure {
  int64_t t_s = 0;
  int task = 0;
  int64_t run = 0;
  // Earliest first; equal times in task order, so that a batch is released deterministically.
  bool operator>(const Departure& o) const { return std::tie(t_s, task) > std::tie(o.t_s, o.task); }
};

// The event loop. One instant at a time: departures release their resources, arrivals enter the
// pending queue, then scheduling passes run until the instant is settled. The same shape serves
// a control plane: events in, a pass over what may have become placeable, the plan applied.
//
// A pass means "offer the pending queue, in order, to ScheduleOnce". Offering the whole queue
// on every event is quadratic (thousands of waiting tasks, each scanning every node, on each of
// thousands of events), so a pass offers a task only when it may fit now; that skips only tasks
// that would be left pending anyway, so the decisions are those of the whole-queue pass
// (`full_passes`, kept for tests; with preemption, as long as a failed preemption search leaves
// the order of the tasks on a node as it found it, since that order picks victims among
// equals). Why a skipped task cannot fit: it fitted no node at its
// previous turn, not even by preemption. Since then a node that only received tasks has no more
// room (feasibility only shrinks as resources are taken) and no more to evict (a task bound
// below the asker's priority adds as much to what eviction frees as it takes from what is
// free). So only the nodes that released something since its previous turn can take it, and on
// those the question is cheap. Tasks are offered one at a time, each checked against the state
// the tasks before it left; ScheduleOnce on [a, b] is ScheduleOnce on [a] then on [b] (a gang
// is offered whole, at its first member's turn; GangTurn says when it is skipped).
//
// Jobs share their fate at the end of each pass (ShareFate): the members still running of a job
// that lost a member to preemption in the pass are evicted then, after the plan, as the control
// plane re-queues them once the plan is applied. The whole-queue pass made its plan with them
// bound, so the one-at-a-time offers must see them bound until the pass ends too.
//
// Snapshots (SnapshotModel): each run's work begins once its snapshot is restored (when it has
// saved work) and lasts what its snapshot has not done; an eviction keeps the work up to the run's
// latest snapshot (all of it when snapshotted on stop). With snapshots modelled each binding
// carries its sched::WorkState, so that ScheduleOnce picks victims by the work they lose. A run
// placed where tasks leave with a snapshot on stop (victims, moved tasks) starts when their
// snapshots are done; the room is reserved from the decision on.
class Replayer {
 public:
  // `gangs`: the members of each job (tasks with gang_size > 1, checked by RunReplay). `probe`:
  // the policy that decides whether the empty cluster holds a job (GangFitsEmpty); may be null
  // when there are no jobs.
  Replayer(const std::vector<Node>& nodes, const std::vector<ReplayTask>& tasks,
           const std::unordered_map<std::string, int>& index,
           const std::vector<std::vector<int>>& gangs, const ReplayConfig& config,
           sched::Policy& policy, sched::Policy* probe)
      : tasks_(tasks),
        index_(index),
        config_(config),
        policy_(policy),
        probe_(probe),
        state_(nodes),
        empty_(state_),
        pending_(QueueOrder{&tasks}),
        records_(tasks.size()),
        running_(tasks.size(), false),
        run_(tasks.size(), 0),
        saved_s_(tasks.size(), 0),
        work_from_s_(tasks.size(), 0),
        milli_(tasks.size(), 0),
        seen_(tasks.size(), kNotOffered),
        gang_of_(tasks.size(), -1) {
    options_.allow_preemption = config.allow_preemption;
    options_.allow_moves = config.moves;
    options_.move_any_priority = config.moves_any_priority;
    deterministic_ = policy.tie_break() != sched::TieBreak::kRandom;
    // Built once per task: model ids are interned when the state is built and never change, so
    // a view is valid for `state_` and its pristine copy `empty_` alike.
    views_.reserve(tasks.size());
    for (const ReplayTask& t : tasks) views_.emplace_back(state_, t.request);
    for (const std::vector<int>& members : gangs) {
      Gang gang;
      gang.members = members;
      // The order of the pending queue, as a whole-queue pass lists them.
      std::sort(gang.members.begin(), gang.members.end(), QueueOrder{&tasks});
      const TaskRequest& first = Task(gang.members.front()).request;
      gang.size = first.gang_size;
      gang.uniform = first.Form() != GpuForm::kMig &&
                     std::all_of(gang.members.begin(), gang.members.end(),
                                 [&](int m) { return Task(m).request == first; });
      for (int m : gang.members) gang_of_[static_cast<size_t>(m)] = static_cast<int>(gangs_.size());
      gangs_.push_back(std::move(gang));
    }
  }

  Status Run() {
    std::vector<int> order(tasks_.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return tasks_[static_cast<size_t>(a)].arrival_s < tasks_[static_cast<size_t>(b)].arrival_s;
    });
    size_t next = 0;
    while (true) {
      while (!departures_.empty() && Stale(departures_.top())) departures_.pop();
      const bool arrivals_left = next < order.size();
      if (!arrivals_left && departures_.empty()) break;
      int64_t now = arrivals_left ? Task(order[next]).arrival_s : departures_.top().t_s;
      if (!departures_.empty()) now = std::min(now, departures_.top().t_s);
      ++event_times_;
      // Departures first: a task ending at t frees its resources for the tasks arriving at t.
      if (auto ok = Depart(now); !ok) return ok;
      bool arrived = false;
      while (next < order.size() && Task(order[next]).arrival_s == now) {
        arrived = Arrive(order[next++]) || arrived;
      }
      if (auto ok = Schedule(now, arrived); !ok) return ok;
      Sample(now);
    }
    return {};
  }

  ReplayResult Summarize() const;

 private:
  // seen_ of a task not offered since it arrived or was evicted.
  static constexpr size_t kNotOffered = std::numeric_limits<size_t>::max();

  // A distributed job: the tasks of one gang_id with gang_size > 1.
  struct Gang {
    std::vector<int> members;  // in queue order (by name: members share priority and arrival)
    int size = 0;              // gang_size
    // Every member has the same request, not MIG: then whether the job can be placed depends only
    // on how many members each node can hold (GangTurn).
    bool uniform = false;
    int fits_empty = -1;        // GangFitsEmpty's answer; -1: not asked yet
    size_t seen = kNotOffered;  // releases_.size() at its last turn, or kNotOffered
    int64_t pass = -1;          // the last pass in which it had its turn
  };

  // Pending queue order: priority desc, then arrival, then name (names are unique).
  struct QueueOrder {
    const std::vector<ReplayTask>* tasks;
    bool operator()(int a, int b) const {
      const ReplayTask& x = (*tasks)[static_cast<size_t>(a)];
      const ReplayTask& y = (*tasks)[static_cast<size_t>(b)];
      return std::tie(y.request.priority, x.arrival_s, x.name) <
             std::tie(x.request.priority, y.arrival_s, y.name);
    }
  };

  // What node n would have free if every task on it below `priority` were evicted.
  struct Evictable {
    bool computed = false;
    uint64_t version = 0;  // the node's version it was computed at
    int64_t cpu_milli = 0;
    int64_t memory_mib = 0;
    std::vector<int32_t> gpu_milli;  // per GPU; -1: in MIG mode, closed to shares and whole GPUs
    std::vector<int64_t> gpu_mem_mib;
  };

  const ReplayTask& Task(int i) const { return tasks_[static_cast<size_t>(i)]; }
  TaskRecord& Record(int i) { return records_[static_cast<size_t>(i)]; }
  int GangOf(int i) const { return gang_of_[static_cast<size_t>(i)]; }

  bool Stale(const Departure& d) const {
    return !running_[static_cast<size_t>(d.task)] || run_[static_cast<size_t>(d.task)] != d.run;
  }

  Status Depart(int64_t now) {
    while (!departures_.empty() && departures_.top().t_s == now) {
      const Departure d = departures_.top();
      departures_.pop();
      if (Stale(d)) continue;
      if (auto ok = state_.Unbind(Task(d.task).name); !ok) {
        return Internal("replay: departure of " + Task(d.task).name + ": " + ok.error().message);
      }
      running_[static_cast<size_t>(d.task)] = false;
      Record(d.task).end_s = now;
      releases_.push_back(Record(d.task).node);
    }
    return {};
  }

  // Queues the task, or rejects it at once when it fits no node of the empty cluster (it would
  // wait forever); a job's members are queued or rejected together. Returns whether it was
  // queued.
  bool Arrive(int task) {
    const int g = GangOf(task);
    if (!(g < 0 ? FitsEmpty(task) : GangFitsEmpty(g))) {
      Record(task).outcome = TaskOutcome::kRejected;
      return false;
    }
    pending_.insert(task);
    seen_[static_cast<size_t>(task)] = kNotOffered;
    if (g >= 0) gangs_[static_cast<size_t>(g)].seen = kNotOffered;
    return true;
  }

  bool FitsEmpty(int task) const {
    for (int n = 0; n < empty_.NodeCount(); ++n) {
      if (sched::CheckNode(empty_, n, views_[static_cast<size_t>(task)]) == sched::Reject::kNone) {
        return true;
      }
    }
    return false;
  }

  // Whether the empty cluster holds job g whole, asked once per job and once per shape of job:
  // each member fits a node, and ScheduleOnce places all of them on a copy of the empty cluster
  // with the probe policy (first-fit; for members with one request the policy cannot matter, as
  // how many members a node holds does not depend on the order they come in). A job short of
  // members is not rejected: ScheduleOnce keeps it waiting for them.
  bool GangFitsEmpty(int g) {
    Gang& gang = gangs_[static_cast<size_t>(g)];
    if (gang.fits_empty >= 0) return gang.fits_empty == 1;
    bool fits =
        std::all_of(gang.members.begin(), gang.members.end(), [&](int m) { return FitsEmpty(m); });
    if (fits && static_cast<int>(gang.members.size()) >= gang.size && probe_ != nullptr) {
      std::vector<TaskRequest> shape;  // the members' requests but for the job's name
      for (int m : gang.members) {
        shape.push_back(Task(m).request);
        shape.back().gang_id.clear();
      }
      const auto known = std::find_if(fit_shapes_.begin(), fit_shapes_.end(),
                                      [&](const auto& entry) { return entry.first == shape; });
      if (known != fit_shapes_.end()) {
        fits = known->second;
      } else {
        sched::ClusterState copy = empty_;
        std::vector<sched::QueuedTask> queue;
        for (int m : gang.members) {
          queue.push_back(sched::QueuedTask{Task(m).name, Task(m).request});
        }
        sched::ScheduleOptions no_preemption;
        no_preemption.allow_preemption = false;
        const sched::Plan plan = sched::ScheduleOnce(copy, queue, *probe_, no_preemption);
        fits = plan.assignments.size() == queue.size();
        fit_shapes_.emplace_back(std::move(shape), fits);
      }
    }
    gang.fits_empty = fits ? 1 : 0;
    return fits;
  }

  // Settles the instant: a pass when tasks arrived or nodes released resources since the
  // previous pass began, again while a pass evicts (its victims re-enter the queue, and their
  // nodes may have room left for tasks that had their turn before the eviction).
  Status Schedule(int64_t now, bool arrived) {
    for (int pass = 0; (pass == 0 && arrived) || releases_.size() > pass_mark_; ++pass) {
      if (pass == kMaxPassesPerInstant) {
        return Internal("replay: the scheduler did not settle at t=" + std::to_string(now) +
                        " s after " + std::to_string(pass) + " passes");
      }
      pass_mark_ = releases_.size();
      if (pending_.empty()) continue;
      ++passes_;
      // The queue as the pass begins: victims evicted during the pass wait for the next one.
      snapshot_.assign(pending_.begin(), pending_.end());
      if (config_.full_passes) {
        queue_.clear();
        for (int i : snapshot_) queue_.push_back(sched::QueuedTask{Task(i).name, Task(i).request});
        if (auto ok = Offer(now); !ok) return ok;
      } else {
        for (int i : snapshot_) {
          if (!pending_.count(i)) continue;  // placed with its gang earlier in this pass
          queue_.clear();
          if (const int g = GangOf(i); g >= 0) {
            GangTurn(g);
          } else {
            const size_t since = seen_[static_cast<size_t>(i)];
            seen_[static_cast<size_t>(i)] = releases_.size();
            if (since == kNotOffered || MayFitReleased(i, since)) {
              queue_.push_back(sched::QueuedTask{Task(i).name, Task(i).request});
            }
          }
          if (auto ok = Offer(now); !ok) return ok;
        }
      }
      if (auto ok = ShareFate(now); !ok) return ok;
    }
    return {};
  }

  // Job g's turn in the pass, at its first member's place in the queue: fills queue_ with its
  // pending members (ScheduleOnce places a gang only with all its members in one queue), unless
  // it cannot be placed now. Why a skipped job cannot: it was not placed at its previous turn,
  // and a gang does not preempt, so only room matters. With members of one request (`uniform`)
  // it is placed exactly when the nodes it may use can hold as many members as it has (each node
  // as many as fit, at most members_per_node; all under one value of its topology label, or
  // anywhere): a count that binds only lower. Since that turn only the nodes that released
  // something can hold more, and one that cannot hold a single member now holds none. A random
  // tie-break is not skipped: the tries of a failed job draw from the policy's generator, which
  // a whole-queue pass would have drawn.
  void GangTurn(int g) {
    Gang& gang = gangs_[static_cast<size_t>(g)];
    if (gang.pass == passes_) return;  // offered at its first member's turn in this pass
    gang.pass = passes_;
    const size_t since = std::exchange(gang.seen, releases_.size());
    if (since != kNotOffered && gang.uniform && deterministic_ &&
        !FitsReleased(gang.members.front(), since)) {
      return;
    }
    for (int m : gang.members) {
      if (pending_.count(m)) queue_.push_back(sched::QueuedTask{Task(m).name, Task(m).request});
    }
  }

  // Whether task i fits, as things are now, a node that released resources since
  // releases_[since].
  bool FitsReleased(int i, size_t since) const {
    for (size_t k = since; k < releases_.size(); ++k) {
      if (sched::CheckNode(state_, releases_[k], views_[static_cast<size_t>(i)]) ==
          sched::Reject::kNone) {
        return true;
      }
    }
    return false;
  }

  // Whether task i may fit now on a node that released resources since releases_[since]. With
  // moves, any release may be the room a task to move needed, so any release will do; and with a
  // random tie-break every turn is taken, as the tentative placements of a move search draw from
  // the policy's generator.
  bool MayFitReleased(int i, size_t since) {
    if (config_.moves && (since < releases_.size() || !deterministic_)) return true;
    const TaskRequest& r = Task(i).request;
    const sched::RequestView& view = views_[static_cast<size_t>(i)];
    // ScheduleOnce preempts for a single task above the lowest priority.
    const bool may_preempt = config_.allow_preemption && r.priority > kMinPriority;
    for (size_t k = since; k < releases_.size(); ++k) {
      const int n = releases_[k];
      if (sched::CheckNode(state_, n, view) == sched::Reject::kNone) return true;
      if (may_preempt && FitsAfterEvictions(n, view, r.priority)) return true;
    }
    return false;
  }

  const Evictable& EvictableBelow(int n, int priority) {
    const int64_t key = int64_t{n} * (kMaxPriority + 1) + priority;
    Evictable& e = evictable_[key];
    const uint64_t version = state_.NodeVersion(n);
    if (e.computed && e.version == version) return e;
    const Node& node = state_.node(n);
    e.computed = true;
    e.version = version;
    e.cpu_milli = node.cpu_free_milli;
    e.memory_mib = node.memory_free_mib;
    e.gpu_milli.clear();
    e.gpu_mem_mib.clear();
    for (const Gpu& g : node.gpus) {
      e.gpu_milli.push_back(g.mig_enabled ? -1 : g.milli_free);
      e.gpu_mem_mib.push_back(g.mem_free_mib);
    }
    for (const std::string& id : state_.TasksOn(n)) {
      const sched::Binding* b = state_.FindBinding(id);
      if (b == nullptr || b->request.priority >= priority) continue;
      e.cpu_milli += b->request.cpu_milli;
      e.memory_mib += b->request.memory_mib;
      if (b->placement.mig) continue;
      for (int g : b->placement.gpus) {
        if (e.gpu_milli[static_cast<size_t>(g)] < 0) continue;
        e.gpu_milli[static_cast<size_t>(g)] += b->placement.milli_per_gpu;
        e.gpu_mem_mib[static_cast<size_t>(g)] += b->placement.gpu_mem_mib;
      }
    }
    return e;
  }

  // Whether the task would fit node n once every lower-priority task there is evicted: the
  // condition for ScheduleOnce's preemption to succeed on n. It mirrors sched::CheckNode on that
  // state; MIG requests are not modelled and answer for the empty node (an upper bound).
  bool FitsAfterEvictions(int n, const sched::RequestView& view, int priority) {
    const TaskRequest& r = *view.request;
    if (sched::CheckNode(empty_, n, view) != sched::Reject::kNone) return false;
    if (!state_.node(n).schedulable) return false;
    if (view.form == GpuForm::kMig) return true;
    const Evictable& e = EvictableBelow(n, priority);
    if (e.cpu_milli < r.cpu_milli || e.memory_mib < r.memory_mib) return false;
    const Node& node = state_.node(n);
    int whole = 0;
    for (size_t g = 0; g < node.gpus.size(); ++g) {
      if (e.gpu_milli[g] < 0 || !view.GpuUsable(state_, node.gpus[g])) continue;
      if (view.form == GpuForm::kShare && e.gpu_milli[g] >= r.gpu_milli &&
          e.gpu_mem_mib[g] >= r.gpu_mem_mib) {
        return true;
      }
      whole += e.gpu_milli[g] == kMilliPerGpu && e.gpu_mem_mib[g] == node.gpus[g].mem_mib;
    }
    return view.form == GpuForm::kNone || (view.form == GpuForm::kWhole && whole >= r.gpu_count);
  }

  // Offers queue_ (when not empty) to ScheduleOnce and applies the plan.
  Status Offer(int64_t now) {
    if (queue_.empty()) return {};
    options_.now_ms = now * 1000;
    const sched::Plan plan = sched::ScheduleOnce(state_, queue_, policy_, options_);
    ++calls_;
    tries_ += static_cast<int64_t>(queue_.size());
    return Apply(plan, now);
  }

  // Books what ScheduleOnce already did to `state_`: moved tasks at their new node, victims
  // released, assignments bound. The jobs of victims that are job members go back whole at the
  // end of the pass (ShareFate).
  Status Apply(const sched::Plan& plan, int64_t now) {
    for (const sched::Move& m : plan.moves) {
      const auto it = index_.find(m.task_id);
      if (it == index_.end() || !running_[static_cast<size_t>(it->second)]) {
        return Internal("replay: plan moves " + m.task_id + ", which is not running");
      }
      MoveTask(it->second, now);
    }
    for (const sched::Assignment& a : plan.assignments) {
      for (const std::string& victim : a.preempted) {
        const auto it = index_.find(victim);
        if (it == index_.end() || !running_[static_cast<size_t>(it->second)]) {
          return Internal("replay: plan preempts " + victim + ", which is not running");
        }
        Evict(it->second, now);
        if (const int g = GangOf(it->second); g >= 0) hit_.push_back(g);
      }
      const auto it = index_.find(a.task_id);
      if (it == index_.end() || !pending_.count(it->second)) {
        return Internal("replay: plan assigns " + a.task_id + ", which is not pending");
      }
      // It starts once the tasks leaving its room with a snapshot have taken it.
      const bool waits = config_.snapshots.on_stop && (!a.preempted.empty() || !a.moved.empty());
      Start(it->second, a.placement.node, now, waits ? config_.snapshots.snapshot_s : 0);
    }
    return {};
  }

  // Fate sharing, at the end of a pass at `now`: each job that lost a member to preemption in it
  // goes back to the queue whole. Its members still running are released and evicted (counted as
  // preemptions too); all restart from scratch (or from their snapshots) when the job is placed
  // again.
  Status ShareFate(int64_t now) {
    std::sort(hit_.begin(), hit_.end());
    hit_.erase(std::unique(hit_.begin(), hit_.end()), hit_.end());
    for (int g : hit_) {
      ++job_restarts_;
      for (int m : gangs_[static_cast<size_t>(g)].members) {
        if (!running_[static_cast<size_t>(m)]) continue;
        if (auto ok = state_.Unbind(Task(m).name); !ok) {
          return Internal("replay: evicting " + Task(m).name +
                          " with its job: " + ok.error().message);
        }
        Evict(m, now);
      }
    }
    hit_.clear();
    return {};
  }

  // The victim re-enters the queue at its original position (its arrival time is unchanged).
  // Without snapshots its next run does all its work again: plain trace tasks keep nothing, so a
  // restart is the honest cost. With them it keeps the work up to its run's latest periodic
  // snapshot, or all of it when snapshotted on stop (its GPUs then spend the snapshot on it).
  void Evict(int task, int64_t now) {
    const size_t t = static_cast<size_t>(task);
    const SnapshotModel& m = config_.snapshots;
    const int64_t done = Progress(task, now);
    const int64_t kept = m.on_stop ? done : m.every_s > 0 ? done - done % m.every_s : 0;
    saved_s_[t] += kept;
    lost_milli_s_ += (done - kept) * milli_[t];
    kill_restart_milli_s_ += done * milli_[t];
    if (m.on_stop) snapshot_restore_milli_s_ += m.snapshot_s * milli_[t];
    running_[static_cast<size_t>(task)] = false;
    ++Record(task).preemptions;
    ++preemptions_;
    pending_.insert(task);
    seen_[static_cast<size_t>(task)] = kNotOffered;
    if (const int g = GangOf(task); g >= 0) gangs_[static_cast<size_t>(g)].seen = kNotOffered;
    releases_.push_back(Record(task).node);
  }

  // A moved task (sched::Move, already bound at its new node): snapshotted at `now`, stopped, and
  // resumed there from that snapshot once it is taken, keeping all its work; its GPUs spend the
  // snapshot and the restore on it. Its old node released room.
  void MoveTask(int task, int64_t now) {
    const size_t t = static_cast<size_t>(task);
    const SnapshotModel& m = config_.snapshots;
    saved_s_[t] += Progress(task, now);
    ++Record(task).moves;
    ++moves_;
    releases_.push_back(Record(task).node);
    BeginWork(task, now + m.snapshot_s);
    Record(task).node = state_.FindBinding(Task(task).name)->placement.node;
    moved_milli_s_ += (m.snapshot_s + m.restore_s) * milli_[t];
  }

  // Starts a run of `task` (bound on `node` by the plan at `now`) `delay_s` later.
  void Start(int task, int node, int64_t now, int64_t delay_s) {
    pending_.erase(task);
    running_[static_cast<size_t>(task)] = true;
    TaskRecord& r = Record(task);
    r.node = node;
    const int64_t start = now + delay_s;
    if (r.first_start_s < 0) r.first_start_s = start;
    r.start_s = start;
    BeginWork(task, start);
    const size_t t = static_cast<size_t>(task);
    if (saved_s_[t] > 0) snapshot_restore_milli_s_ += config_.snapshots.restore_s * milli_[t];
  }

  // A new run of bound `task` from `start_s`: it restores its snapshot first when it has saved
  // work, then does the rest of its work and departs. Its GPU weight and, with snapshots
  // modelled, its sched::WorkState are taken into its binding's.
  void BeginWork(int task, int64_t start_s) {
    const size_t t = static_cast<size_t>(task);
    const ReplayTask& rt = Task(task);
    const SnapshotModel& m = config_.snapshots;
    const int64_t run = ++run_[t];
    work_from_s_[t] = start_s + (saved_s_[t] > 0 ? m.restore_s : 0);
    departures_.push(Departure{work_from_s_[t] + rt.runtime_s - saved_s_[t], task, run});
    const sched::Binding* b = state_.FindBinding(rt.name);
    milli_[t] = sched::BindingGpuMilli(state_.node(b->placement.node), *b);
    if (!m.enabled()) return;
    // 0 means "unknown" to the scheduler: work that begins at 0 s counts from 1 ms.
    (void)state_.SetWork(
        rt.name, sched::WorkState{std::max<int64_t>(work_from_s_[t] * 1000, 1), m.every_s * 1000,
                                  m.on_stop, (m.snapshot_s + m.restore_s) * 1000});
  }

  // Seconds of work `task`'s current run has done by `now` (none while it still restores).
  int64_t Progress(int task, int64_t now) const {
    return std::max<int64_t>(0, now - work_from_s_[static_cast<size_t>(task)]);
  }

  // The allocation after the instant settled; it holds until the next event time.
  void Sample(int64_t now) {
    const int64_t milli = state_.AllocatedGpuMilli();
    if (alloc_steps_.empty() || alloc_steps_.back().second != milli) {
      alloc_steps_.emplace_back(now, milli);
    }
  }

  const std::vector<ReplayTask>& tasks_;
  const std::unordered_map<std::string, int>& index_;
  const ReplayConfig& config_;
  sched::Policy& policy_;
  sched::Policy* probe_;       // GangFitsEmpty's policy
  bool deterministic_ = true;  // the policy breaks ties by node order (GangTurn)
  sched::ScheduleOptions options_;
  sched::ClusterState state_;
  const sched::ClusterState empty_;  // the cluster before any task: what "fits at all" means
  std::vector<sched::RequestView> views_;

  std::set<int, QueueOrder> pending_;
  std::priority_queue<Departure, std::vector<Departure>, std::greater<>> departures_;
  std::vector<TaskRecord> records_;
  std::vector<bool> running_;
  std::vector<int64_t> run_;  // runs started per task
  // Per task: seconds of its work kept by snapshots; when its current run's work began (after
  // its restore); the GPU milli its binding counts for (sched::BindingGpuMilli).
  std::vector<int64_t> saved_s_;
  std::vector<int64_t> work_from_s_;
  std::vector<int64_t> milli_;
  // Every release of resources, in order (the node's index): departures and evictions. A task
  // that had its turn when there were k releases need only look at releases_[k..] later.
  std::vector<int> releases_;
  std::vector<size_t> seen_;  // per task: releases_.size() at its last turn, or kNotOffered
  size_t pass_mark_ = 0;      // releases_.size() when the last pass began
  std::unordered_map<int64_t, Evictable> evictable_;  // by (node, priority), cached by version
  std::vector<int> snapshot_;
  std::vector<sched::QueuedTask> queue_;

  std::vector<Gang> gangs_;
  std::vector<int> gang_of_;  // per task: its index in gangs_, or -1
  std::vector<int> hit_;      // jobs that lost a member to preemption in this pass (ShareFate)
  // GangFitsEmpty's answers by the members' requests (gang_id cleared).
  std::vector<std::pair<std::vector<TaskRequest>, bool>> fit_shapes_;
  int64_t job_restarts_ = 0;

  std::vector<std::pair<int64_t, int64_t>> alloc_steps_;  // (time, allocated milli) changes
  int64_t event_times_ = 0;
  int64_t passes_ = 0;
  int64_t calls_ = 0;
  int64_t tries_ = 0;
  int64_t preemptions_ = 0;
  // GPU milli × seconds: work lost to preemption, what kill and restart would have lost on the
  // same preemptions, victims' snapshots and restores, moved tasks' snapshots and restores.
  int64_t lost_milli_s_ = 0;
  int64_t kill_restart_milli_s_ = 0;
  int64_t snapshot_restore_milli_s_ = 0;
  int64_t moved_milli_s_ = 0;
  int64_t moves_ = 0;
};

ReplayResult Replayer::Summarize() const {
  ReplayResult r;
  r.tasks = static_cast<int64_t>(tasks_.size());
  r.nodes = state_.NodeCount();
  r.gpus = state_.TotalGpuMilli() / kMilliPerGpu;
  r.preemptions = preemptions_;
  r.snapshots = config_.snapshots.enabled();
  r.work_lost_gpu_s = static_cast<double>(lost_milli_s_) / kMilliPerGpu;
  r.kill_restart_gpu_s = static_cast<double>(kill_restart_milli_s_) / kMilliPerGpu;
  r.snapshot_restore_gpu_s = static_cast<double>(snapshot_restore_milli_s_) / kMilliPerGpu;
  r.moves = moves_;
  r.moved_gpu_s = static_cast<double>(moved_milli_s_) / kMilliPerGpu;
  r.event_times = event_times_;
  r.passes = passes_;
  r.calls = calls_;
  r.tries = tries_;
  r.per_task = records_;

  std::vector<int64_t> delays;
  std::vector<int64_t> eight_gpu_delays;
  int64_t first = 0;
  int64_t last = std::numeric_limits<int64_t>::min();
  for (size_t i = 0; i < tasks_.size(); ++i) {
    TaskRecord& rec = r.per_task[i];
    first = i == 0 ? tasks_[i].arrival_s : std::min(first, tasks_[i].arrival_s);
    if (rec.outcome == TaskOutcome::kRejected) {
      ++r.rejected;
      continue;
    }
    if (rec.first_start_s >= 0) {
      delays.push_back(rec.first_start_s - tasks_[i].arrival_s);
      const TaskRequest& req = tasks_[i].request;
      if (req.gang_size <= 1 && req.Form() == GpuForm::kWhole && req.gpu_count == kMaxGpusPerTask) {
        eight_gpu_delays.push_back(delays.back());
      }
    }
    // The loop ends with no departure left, so a task is either done or still pending (never
    // started, or evicted and never restarted).
    if (rec.end_s >= 0) {
      rec.outcome = TaskOutcome::kCompleted;
      ++r.completed;
      last = std::max(last, rec.end_s);
    } else {
      rec.outcome = TaskOutcome::kNeverStarted;
      ++r.never_started;
    }
  }
  r.delay = ComputeDelayStats(std::move(delays));
  r.eight_gpu_delay = ComputeDelayStats(std::move(eight_gpu_delays));

  std::vector<int64_t> waits;
  for (const Gang& gang : gangs_) {
    ++r.jobs;
    r.job_members += static_cast<int64_t>(gang.members.size());
    int64_t first_start = -1;
    bool completed = true;
    bool rejected = false;
    for (int m : gang.members) {
      const TaskRecord& rec = r.per_task[static_cast<size_t>(m)];
      if (rec.first_start_s >= 0 && (first_start < 0 || rec.first_start_s < first_start)) {
        first_start = rec.first_start_s;
      }
      completed = completed && rec.outcome == TaskOutcome::kCompleted;
      rejected = rejected || rec.outcome == TaskOutcome::kRejected;
    }
    if (rejected) {
      ++r.jobs_rejected;
      continue;
    }
    if (first_start >= 0) waits.push_back(first_start - Task(gang.members.front()).arrival_s);
    if (completed) {
      ++r.jobs_completed;
    } else {
      ++r.jobs_pending;
      if (first_start < 0) ++r.jobs_never_started;
    }
  }
  r.job_restarts = job_restarts_;
  r.job_wait = ComputeDelayStats(std::move(waits));

  r.first_arrival_s = first;
  r.last_end_s = std::max(last, first);
  r.makespan_s = r.last_end_s - r.first_arrival_s;

  // The allocation is a step function (alloc_steps_); each point is its time-weighted mean over
  // one interval of the makespan, with intervals as short as `max_alloc_points` allows.
  const int64_t total = state_.TotalGpuMilli();
  if (r.makespan_s > 0 && total > 0 && config_.max_alloc_points > 0) {
    const int64_t points_max = config_.max_alloc_points;
    const int64_t interval = (r.makespan_s + points_max - 1) / points_max;
    const int64_t points = (r.makespan_s + interval - 1) / interval;
    std::vector<int64_t> milli_s(static_cast<size_t>(points), 0);  // Σ allocated milli × seconds
    int64_t peak = 0;
    for (size_t i = 0; i < alloc_steps_.size(); ++i) {
      const auto [t, milli] = alloc_steps_[i];
      peak = std::max(peak, milli);
      int64_t s = std::max(t, r.first_arrival_s);
      const int64_t e = std::min(
          i + 1 < alloc_steps_.size() ? alloc_steps_[i + 1].first : r.last_end_s, r.last_end_s);
      while (s < e) {
        const int64_t b = (s - r.first_arrival_s) / interval;
        const int64_t take = std::min(e, r.first_arrival_s + (b + 1) * interval) - s;
        milli_s[static_cast<size_t>(b)] += milli * take;
        s += take;
      }
    }
    int64_t sum = 0;
    for (int64_t b = 0; b < points; ++b) {
      const int64_t lo = r.first_arrival_s + b * interval;
      const int64_t len = std::min(interval, r.last_end_s - lo);
      const int64_t v = milli_s[static_cast<size_t>(b)];
      sum += v;
      r.alloc.push_back(AllocPoint{
          lo, Round2(100.0 * static_cast<double>(v) / static_cast<double>(len * total))});
    }
    r.alloc_interval_s = interval;
    r.mean_alloc_pct =
        Round2(100.0 * static_cast<double>(sum) / static_cast<double>(r.makespan_s * total));
    r.peak_alloc_pct = Round2(100.0 * static_cast<double>(peak) / static_cast<double>(total));
  }
  return r;
}

std::string Fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

nlohmann::json DelayJson(const DelayStats& d) {
  return {{"count", d.count},
          {"mean", Round2(d.mean_s)},
          {"p50", d.p50_s},
          {"p99", d.p99_s},
          {"max", d.max_s}};
}

// "count started: mean …, p50 …, p99 …, max …" of a DelayStats, for the text report.
std::string DelayText(const DelayStats& d) {
  return std::to_string(d.count) + " started: mean " + Fixed2(d.mean_s) + ", p50 " +
         std::to_string(d.p50_s) + ", p99 " + std::to_string(d.p99_s) + ", max " +
         std::to_string(d.max_s);
}

}  // namespace

std::string_view TaskOutcomeName(TaskOutcome o) {
  switch (o) {
    case TaskOutcome::kCompleted:
      return "completed";
    case TaskOutcome::kNeverStarted:
      return "pending";
    case TaskOutcome::kRejected:
      return "rejected";
  }
  return "?";
}

Result<std::vector<ReplayTask>> ReplayTasksFromTrace(const std::vector<TracePod>& pods,
                                                     int64_t limit, int64_t speedup) {
  if (speedup < 1) return InvalidArgument("speedup must be >= 1, got " + std::to_string(speedup));
  const size_t n = limit < 0 ? pods.size() : std::min(pods.size(), static_cast<size_t>(limit));
  std::vector<ReplayTask> out;
  out.reserve(n);
  std::unordered_map<std::string, int> seen;
  for (size_t i = 0; i < n; ++i) {
    const TracePod& p = pods[i];
    if (p.creation_s < 0 || p.deletion_s < 0) {
      return InvalidArgument("pod " + p.name + " has no creation_time or deletion_time; " +
                             "the replay needs both");
    }
    if (!seen.emplace(p.name, static_cast<int>(i)).second) {
      return InvalidArgument("pod name " + p.name + " appears twice");
    }
    ReplayTask t;
    t.name = p.name;
    t.request = p.request;
    t.request.priority = p.priority;
    t.arrival_s = p.creation_s / speedup;
    t.runtime_s = std::max<int64_t>(p.deletion_s - p.creation_s, 1);
    out.push_back(std::move(t));
  }
  return out;
}

int64_t NearestRank(std::span<const int64_t> sorted, int p) {
  const int64_t n = static_cast<int64_t>(sorted.size());
  const int64_t rank = std::clamp<int64_t>((p * n + 99) / 100, 1, n);  // ⌈p·n/100⌉
  return sorted[static_cast<size_t>(rank - 1)];
}

DelayStats ComputeDelayStats(std::vector<int64_t> delays_s) {
  DelayStats s;
  if (delays_s.empty()) return s;
  std::sort(delays_s.begin(), delays_s.end());
  s.count = static_cast<int64_t>(delays_s.size());
  int64_t sum = 0;
  for (int64_t d : delays_s) sum += d;
  s.mean_s = static_cast<double>(sum) / static_cast<double>(s.count);
  s.p50_s = NearestRank(delays_s, 50);
  s.p99_s = NearestRank(delays_s, 99);
  s.max_s = delays_s.back();
  return s;
}

Result<ReplayResult> RunReplay(const std::vector<Node>& nodes, const std::vector<ReplayTask>& tasks,
                               const ReplayConfig& config) {
  const SnapshotModel& snapshots = config.snapshots;
  if (snapshots.every_s < 0 || snapshots.snapshot_s < 0 || snapshots.restore_s < 0) {
    return InvalidArgument("snapshot times must be >= 0 s, got every " +
                           std::to_string(snapshots.every_s) + ", snapshot " +
                           std::to_string(snapshots.snapshot_s) + ", restore " +
                           std::to_string(snapshots.restore_s));
  }
  if (config.moves && !snapshots.on_stop) {
    return InvalidArgument("moves need snapshots on stop: a task is moved by a snapshot");
  }
  if (config.moves_any_priority && !config.moves) {
    return InvalidArgument("moves_any_priority needs moves");
  }
  std::unordered_map<std::string, int> index;
  std::vector<TaskRequest> workload;
  workload.reserve(tasks.size());
  std::vector<std::vector<int>> gangs;  // each job's members, in input order
  std::unordered_map<std::string, size_t> gang_index;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const ReplayTask& t = tasks[i];
    if (!index.emplace(t.name, static_cast<int>(i)).second) {
      return InvalidArgument("task name " + t.name + " appears twice");
    }
    if (t.runtime_s <= 0) {
      return InvalidArgument("task " + t.name + ": runtime_s must be > 0, got " +
                             std::to_string(t.runtime_s));
    }
    workload.push_back(t.request);
    if (t.request.gang_size <= 1) continue;
    const auto [it, fresh] = gang_index.emplace(t.request.gang_id, gangs.size());
    if (fresh) {
      gangs.push_back({static_cast<int>(i)});
      continue;
    }
    std::vector<int>& members = gangs[it->second];
    if (auto ok = SameJob(tasks[static_cast<size_t>(members.front())], t); !ok) {
      return tl::unexpected(ok.error());
    }
    members.push_back(static_cast<int>(i));
    if (static_cast<int>(members.size()) > t.request.gang_size) {
      return InvalidArgument("job " + t.request.gang_id + " has more members than its gang_size " +
                             std::to_string(t.request.gang_size) + " (" + t.name +
                             " is one too many)");
    }
  }
  sched::PolicyOptions options;
  options.seed = config.seed;
  options.typical = sched::TypicalTasks(workload);
  auto policy = sched::MakePolicy(config.policy, options);
  if (!policy) return tl::unexpected(policy.error());
  std::unique_ptr<sched::Policy> probe;  // whether the empty cluster holds a job
  if (!gangs.empty()) {
    auto first_fit = sched::MakePolicy("first-fit", sched::PolicyOptions{});
    if (!first_fit) return tl::unexpected(first_fit.error());
    probe = std::move(*first_fit);
  }

  Replayer replayer(nodes, tasks, index, gangs, config, **policy, probe.get());
  if (auto ok = replayer.Run(); !ok) return tl::unexpected(ok.error());
  ReplayResult r = replayer.Summarize();
  r.policy = std::string((*policy)->Name());
  return r;
}

std::string ReplayResultJson(const ReplayResult& r) {
  nlohmann::json j;
  j["policy"] = r.policy;
  j["tasks"] = r.tasks;
  j["nodes"] = r.nodes;
  j["gpus"] = r.gpus;
  j["completed"] = r.completed;
  j["never_started"] = r.never_started;
  j["rejected"] = r.rejected;
  j["preemptions"] = r.preemptions;
  j["delay_s"] = DelayJson(r.delay);
  if (r.eight_gpu_delay.count > 0) j["eight_gpu_delay_s"] = DelayJson(r.eight_gpu_delay);
  j["work"] = {{"snapshots", r.snapshots},
               {"lost_gpu_s", Round2(r.work_lost_gpu_s)},
               {"kill_restart_gpu_s", Round2(r.kill_restart_gpu_s)},
               {"snapshot_restore_gpu_s", Round2(r.snapshot_restore_gpu_s)},
               {"moves", r.moves},
               {"moved_gpu_s", Round2(r.moved_gpu_s)}};
  if (r.jobs > 0) {
    j["jobs"] = {{"count", r.jobs},
                 {"members", r.job_members},
                 {"completed", r.jobs_completed},
                 {"pending", r.jobs_pending},
                 {"never_started", r.jobs_never_started},
                 {"rejected", r.jobs_rejected},
                 {"restarts", r.job_restarts},
                 {"wait_s", DelayJson(r.job_wait)}};
  }
  j["first_arrival_s"] = r.first_arrival_s;
  j["last_end_s"] = r.last_end_s;
  j["makespan_s"] = r.makespan_s;
  j["mean_alloc_pct"] = r.mean_alloc_pct;
  j["peak_alloc_pct"] = r.peak_alloc_pct;
  j["alloc_interval_s"] = r.alloc_interval_s;
  nlohmann::json alloc = nlohmann::json::array();
  for (const AllocPoint& p : r.alloc) alloc.push_back({{"t_s", p.t_s}, {"pct", p.pct}});
  j["alloc"] = std::move(alloc);
  j["event_times"] = r.event_times;
  j["passes"] = r.passes;
  j["calls"] = r.calls;
  j["tries"] = r.tries;
  j["elapsed_ms"] = Round2(r.elapsed_ms);
  return j.dump();
}

std::string ReplaySummaryText(const ReplayResult& r) {
  const auto n = [](int64_t v) { return std::to_string(v); };
  std::string s = "policy " + r.policy + ": " + n(r.tasks) + " tasks on " + n(r.nodes) +
                  " nodes (" + n(r.gpus) + " GPUs)\n";
  s += "outcomes: " + n(r.completed) + " completed, " + n(r.never_started) +
       " pending at the end, " + n(r.rejected) + " rejected (fit no node of the empty cluster)\n";
  if (r.snapshots) {
    s += "preemptions: " + n(r.preemptions) + " (victims resume from their latest snapshot)\n";
    s += "work lost to preemption: " + Fixed2(r.work_lost_gpu_s) +
         " GPU-s since the victims' latest snapshots (kill and restart: " +
         Fixed2(r.kill_restart_gpu_s) +
         " GPU-s); snapshots before stops and restores: " + Fixed2(r.snapshot_restore_gpu_s) +
         " GPU-s\n";
    s +=
        "moves: " + n(r.moves) + " (" + Fixed2(r.moved_gpu_s) + " GPU-s of snapshot and restore)\n";
  } else {
    s += "preemptions: " + n(r.preemptions) + " (victims restart from scratch)\n";
  }
  s += "queueing delay s over " + DelayText(r.delay) + "\n";
  if (r.eight_gpu_delay.count > 0) {
    s += "8-GPU tasks' queueing delay s over " + DelayText(r.eight_gpu_delay) + "\n";
  }
  if (r.jobs > 0) {
    s += "jobs: " + n(r.jobs) + " (" + n(r.job_members) +
         " member tasks, counted above too): " + n(r.jobs_completed) + " completed, " +
         n(r.jobs_pending) + " pending at the end (" + n(r.jobs_never_started) +
         " never started), " + n(r.jobs_rejected) + " rejected; " + n(r.job_restarts) +
         " sent back whole when a member was preempted\n";
    s += "job wait s (first start - arrival) over " + DelayText(r.job_wait) + "\n";
  }
  s += "makespan s: " + n(r.makespan_s) + " (first arrival " + n(r.first_arrival_s) +
       ", last departure " + n(r.last_end_s) + ")\n";
  s += "GPU allocation %: mean " + Fixed2(r.mean_alloc_pct) + ", peak " + Fixed2(r.peak_alloc_pct) +
       " (" + n(static_cast<int64_t>(r.alloc.size())) + " points of " + n(r.alloc_interval_s) +
       " s in --json)\n";
  return s;
}

std::string ReplayResultText(const ReplayResult& r) {
  return ReplaySummaryText(r) + "cost: " + std::to_string(r.event_times) + " event times, " +
         std::to_string(r.passes) + " scheduling passes, " + std::to_string(r.calls) +
         " ScheduleOnce calls, " + std::to_string(r.tries) + " tasks offered, " +
         std::to_string(static_cast<int64_t>(r.elapsed_ms)) + " ms\n";
}

std::string ReplayTasksText(const std::vector<ReplayTask>& tasks, const ReplayResult& r) {
  std::string s;
  for (size_t i = 0; i < tasks.size() && i < r.per_task.size(); ++i) {
    const TaskRecord& t = r.per_task[i];
    s += tasks[i].name + " " + std::to_string(tasks[i].arrival_s) + " " +
         std::to_string(t.first_start_s) + " " + std::to_string(t.start_s) + " " +
         std::to_string(t.end_s) + " " + std::to_string(t.preemptions) + " " +
         std::string(TaskOutcomeName(t.outcome)) + "\n";
  }
  return s;
}

}  // namespace gpupool::sim
