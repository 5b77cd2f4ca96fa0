// The replay on a simulated clock: tasks arrive at their trace creation time, wait in a priority
// queue, are placed by the same sched::ScheduleOnce as the control plane, run for their trace
// runtime and depart; preempted tasks go back to the queue and restart from scratch, or, with
// snapshots modelled (SnapshotModel), resume from their latest snapshot; with moves, running tasks
// may be moved to make room. Distributed jobs (gangs) arrive, start and go back to the queue as a
// whole.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/node.h"
#include "core/result.h"
#include "core/task.h"
#include "sim/trace.h"

namespace gpupool::sim {

// One task of a replay; times are integer seconds on the simulated clock.
//
// Tasks with request.gang_size > 1 are the members of a distributed job, one per gang_id: they
// share arrival_s, runtime_s, request.priority and request.gang_size (RunReplay checks), so they
// arrive together; ScheduleOnce starts them all at once or none; they run the job's runtime and
// depart together. When one member is preempted the whole job goes back to the queue: its other
// members are evicted at the end of that pass and every member restarts from scratch, as the
// control plane does (fate sharing, server/controller_jobs.cc).
struct ReplayTask {
  std::string name;     // unique: the id the scheduler binds
  TaskRequest request;  // request.priority orders the queue and decides preemption
  int64_t arrival_s = 0;
  // Work to do: a preempted task restarts from scratch, or with snapshots modelled does what its
  // latest snapshot had not done yet.
  int64_t runtime_s = 1;
};

// The first `limit` pods of `pods` (all of them when limit < 0) as replay tasks: arrival =
// ⌊creation_time / speedup⌋, runtime = deletion_time − creation_time, or 1 s when that is not
// positive (the trace has pods deleted the second they were created); priority =
// TracePod::priority. `speedup` > 1 compresses the arrivals but not the runtimes, multiplying
// the offered load: the openb trace at its own pace never holds more than ~1 % of its cluster.
// Errors for a pod without creation or deletion time, a duplicate name, or speedup < 1.
Result<std::vector<ReplayTask>> ReplayTasksFromTrace(const std::vector<TracePod>& pods,
                                                     int64_t limit = -1, int64_t speedup = 1);

// Snapshots in the replay (issue 15): a task's work up to its latest snapshot survives its
// preemption, and it resumes from there. The scheduler is told (sched::WorkState) so that it
// chooses victims by the work they lose. Not enabled (the default): victims restart from scratch
// and the scheduler knows nothing of their work, as before snapshots existed.
struct SnapshotModel {
  // Every run is snapshotted every this many seconds of its work (0: not periodically). A
  // periodic snapshot costs the run nothing here (the freezer holds a task well under a second).
  int64_t every_s = 0;
  // A task is snapshotted before it is stopped by preemption or a move, and loses no work.
  bool on_stop = false;
  // Seconds a snapshot before a stop takes: the stop ends, and the task taking the freed room
  // starts, this much later.
  int64_t snapshot_s = 0;
  // Seconds a resumed run spends restoring its snapshot before its work goes on.
  int64_t restore_s = 0;

  bool enabled() const { return every_s > 0 || on_stop; }
};

struct ReplayConfig {
  std::string policy = "default";
  uint64_t seed = 42;  // the policy's random draws (tie-breaks, `random`)
  bool allow_preemption = true;
  // Offer the whole pending queue to ScheduleOnce in one call on every pass: the plain
  // definition, kept to check the default against. The default offers, one at a time, only the
  // pending tasks that may fit at their turn (replay.cc says why the others cannot): the same
  // decisions at a fraction of the cost.
  bool full_passes = false;
  int max_alloc_points = 200;  // the allocation curve is downsampled to at most this many points
  SnapshotModel snapshots;
  // Move instead of kill (sched::ScheduleOptions::allow_moves): a task that fits nowhere, even by
  // preemption, may take a node once tasks there are moved to other nodes (snapshotted, stopped
  // and resumed there). Needs snapshots.on_stop.
  bool moves = false;
  // With moves, tasks of a higher priority than the waiting task's may be moved too
  // (sched::ScheduleOptions::move_any_priority).
  bool moves_any_priority = false;
};

enum class TaskOutcome {
  kCompleted,     // ran to its end (after zero or more preemptions)
  kNeverStarted,  // still pending when no event was left
  kRejected,      // fits no node even on the empty cluster: rejected on arrival (a job's members:
                  // when one of them does, or the empty cluster cannot hold the job whole)
};

struct TaskRecord {
  int64_t first_start_s = -1;  // -1: never started; queueing delay = first_start_s − arrival_s
  int64_t start_s = -1;        // start of the last run, the one that completed
  int64_t end_s = -1;
  int preemptions = 0;  // times this task was evicted and sent back to the queue
  int moves = 0;        // times this task was moved to another node while it ran
  int node = -1;        // node of the last run
  TaskOutcome outcome = TaskOutcome::kNeverStarted;
};

// Queueing delay statistics in seconds; percentiles by nearest rank (see NearestRank).
struct DelayStats {
  int64_t count = 0;
  double mean_s = 0;
  int64_t p50_s = 0;
  int64_t p99_s = 0;
  int64_t max_s = 0;
};

// The ⌈p·n/100⌉-th smallest of the ascending, non-empty `sorted` (p in 1..100): the smallest
// value that at least p % of the samples do not exceed.
int64_t NearestRank(std::span<const int64_t> sorted, int p);

// Statistics of `delays_s` (any order; all zero when empty).
DelayStats ComputeDelayStats(std::vector<int64_t> delays_s);

// Allocated milli-GPU as % of the cluster's, time-weighted over [t_s, t_s + interval).
struct AllocPoint {
  int64_t t_s = 0;
  double pct = 0;
};

struct ReplayResult {
  std::string policy;
  int64_t tasks = 0;
  int64_t nodes = 0;
  int64_t gpus = 0;
  int64_t completed = 0;
  int64_t never_started = 0;
  int64_t rejected = 0;
  int64_t preemptions = 0;  // tasks evicted, job members sent back with their job included
  DelayStats delay;         // over the tasks that started at least once
  // Over the tasks (not job members) asking kMaxGpusPerTask (8) whole GPUs that started: those
  // that only a whole free node holds. Left out of the reports when there is none.
  DelayStats eight_gpu_delay;
  // What preemption cost in work, in GPU-seconds (each second weighed by the task's GPU:
  // sched::BindingGpuMilli / 1000), job members sent back with their job included. Computed
  // with and without snapshots; the text report shows them when snapshots are modelled.
  bool snapshots = false;         // the run modelled snapshots (SnapshotModel::enabled)
  double work_lost_gpu_s = 0;     // the victims' work since their latest snapshot (or start)
  double kill_restart_gpu_s = 0;  // what the same preemptions lose with kill and restart: all of
                                  // each victim's run up to its preemption
  // GPU time the victims spent on snapshots before their stop and on restoring them.
  double snapshot_restore_gpu_s = 0;
  // Moves (ReplayConfig::moves): how many, and the GPU time the moved tasks spent on their
  // snapshots and restores.
  int64_t moves = 0;
  double moved_gpu_s = 0;
  // Distributed jobs (the gangs among the tasks; their members are counted in the task fields
  // above too). All zero, and left out of the reports, when there is none.
  int64_t jobs = 0;
  int64_t job_members = 0;         // tasks that are members of a job
  int64_t jobs_completed = 0;      // every member ran to its end
  int64_t jobs_pending = 0;        // waiting when no event was left, started before or not
  int64_t jobs_never_started = 0;  // of jobs_pending, those that never started
  int64_t jobs_rejected = 0;
  int64_t job_restarts = 0;     // times a running job went back to the queue (a member preempted)
  DelayStats job_wait;          // over the jobs that started: first start − arrival
  int64_t first_arrival_s = 0;  // 0 when there is no task
  int64_t last_end_s = 0;       // latest departure; first_arrival_s when nothing completed
  int64_t makespan_s = 0;       // last_end_s − first_arrival_s
  double mean_alloc_pct = 0;    // time-weighted over the makespan
  double peak_alloc_pct = 0;
  int64_t alloc_interval_s = 0;  // simulated seconds per point of `alloc`
  std::vector<AllocPoint> alloc;
  // What the run cost: distinct event times, scheduling passes over the queue, ScheduleOnce
  // calls, tasks offered to them.
  int64_t event_times = 0;
  int64_t passes = 0;
  int64_t calls = 0;
  int64_t tries = 0;
  std::vector<TaskRecord> per_task;  // in the order of the input tasks
  double elapsed_ms = 0;             // wall time, set by the caller: the simulation reads no clock
};

// Replays `tasks` on `nodes` (initially empty) with the policy of `config`. Fails for an unknown
// policy, a negative snapshot time, moves without snapshots on stop (or moves_any_priority
// without moves), duplicate task names, a job whose members differ in arrival, runtime, priority
// or gang_size or outnumber its gang_size, or a scheduler that returns a plan the state does not
// accept.
Result<ReplayResult> RunReplay(const std::vector<Node>& nodes, const std::vector<ReplayTask>& tasks,
                               const ReplayConfig& config);

// One JSON object: the summary fields above, delay_s {count, mean, p50, p99, max}, alloc as
// [{t_s, pct}], the cost counters and elapsed_ms (per-task records left out), "work": {snapshots,
// lost_gpu_s, kill_restart_gpu_s, snapshot_restore_gpu_s, moves, moved_gpu_s}; when 8-GPU tasks
// started, "eight_gpu_delay_s" {count, mean, p50, p99, max}; when there are jobs, "jobs": {count,
// members, completed, pending, never_started, rejected, restarts, wait_s {count, mean, p50, p99,
// max}}.
std::string ReplayResultJson(const ReplayResult& r);

// The deterministic summary for people: outcomes, delays (the 8-GPU tasks' apart when some
// started), the work preemption lost and the moves (when snapshots are modelled), the jobs'
// outcomes and waits (when there are jobs), makespan, allocation (no costs).
std::string ReplaySummaryText(const ReplayResult& r);

// ReplaySummaryText plus the cost lines (passes, tries, elapsed wall time).
std::string ReplayResultText(const ReplayResult& r);

// One line per task, in input order: `name arrival first_start start end preemptions outcome`
// (-1 for a time that did not happen).
std::string ReplayTasksText(const std::vector<ReplayTask>& tasks, const ReplayResult& r);

std::string_view TaskOutcomeName(TaskOutcome o);

}  // namespace gpupool::sim
