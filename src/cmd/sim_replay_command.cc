// `gpupool sim replay`: replays a trace's tasks with their creation and deletion times on a
// simulated clock through the scheduler (src/sim/replay.h), optionally with synthetic distributed
// jobs and racks (src/sim/job_mix.h), snapshots and moves; wiring and the wall-time measure only.
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cmd/sim_commands.h"
#include "core/result.h"
#include "core/task.h"
#include "sim/job_mix.h"
#include "sim/replay.h"
#include "sim/trace.h"

namespace gpupool::cmd {
namespace {

struct ReplayFlags {
  std::string nodes;
  std::string pods;
  std::string policy = "default";
  int64_t limit = -1;
  int64_t speedup = 1;
  int64_t seed = 42;
  bool no_preemption = false;
  bool full_passes = false;
  bool json = false;
  std::string per_task;  // file for one line per task; empty: none
  // Synthetic distributed jobs (sim/job_mix.h) and racks.
  int64_t jobs = 0;
  int job_members = 4;
  int job_gpus = 8;
  int64_t job_runtime = 0;  // 0: the median of the trace's tasks asking job_gpus whole GPUs
  int job_priority = kMinPriority;
  std::string job_topology = "none";
  int racks = 0;  // 0: no rack labels
  sim::SnapshotModel snapshots;
  bool moves = false;
  bool moves_any_priority = false;
};

// Adds f.jobs jobs to `tasks`, each member shaped like the trace's tasks of as many whole GPUs.
Status AddJobs(const ReplayFlags& f, std::vector<sim::ReplayTask>& tasks) {
  auto shape = sim::MedianWholeGpuShape(tasks, f.job_gpus);
  if (!shape) {
    return InvalidArgument("--job-gpus " + std::to_string(f.job_gpus) + ": " +
                           shape.error().message);
  }
  sim::JobMix mix;
  mix.count = f.jobs;
  mix.members = f.job_members;
  mix.gpus = f.job_gpus;
  mix.cpu_milli = shape->cpu_milli;
  mix.memory_mib = shape->memory_mib;
  mix.runtime_s = f.job_runtime > 0 ? f.job_runtime : shape->runtime_s;
  mix.priority = f.job_priority;
  mix.members_per_node = 1;
  if (f.job_topology != "none") {
    mix.topology_label = "rack";
    mix.topology = ParseTopology(f.job_topology).value_or(Topology::kPreferred);
  }
  auto jobs = sim::SyntheticJobs(tasks, mix);
  if (!jobs) return InvalidArgument("--jobs: " + jobs.error().message);
  tasks.insert(tasks.end(), jobs->begin(), jobs->end());
  return {};
}

void RunReplay(const ReplayFlags& f) {
  if (f.job_topology != "none" && f.racks == 0) {
    return Fail("--job-topology " + f.job_topology +
                ": needs --racks K, the rack label its members share");
  }
  auto nodes = sim::LoadNodesCsv(f.nodes);
  if (!nodes) return Fail(nodes.error().message);
  if (f.racks > 0) {
    if (auto ok = sim::LabelRacks(*nodes, f.racks); !ok) {
      return Fail("--racks: " + ok.error().message);
    }
  }
  auto pods = sim::LoadPodsCsv(f.pods);
  if (!pods) return Fail(pods.error().message);
  auto tasks = sim::ReplayTasksFromTrace(*pods, f.limit, f.speedup);
  if (!tasks) return Fail(tasks.error().message);
  if (f.jobs > 0) {
    if (auto ok = AddJobs(f, *tasks); !ok) return Fail(ok.error().message);
  }
  sim::ReplayConfig config;
  config.policy = f.policy;
  config.seed = static_cast<uint64_t>(f.seed);
  config.allow_preemption = !f.no_preemption;
  config.full_passes = f.full_passes;
  config.snapshots = f.snapshots;
  config.moves = f.moves;
  config.moves_any_priority = f.moves_any_priority;
  // The simulation reads no clock; its cost in wall time is measured here, loading excluded.
  const auto start = std::chrono::steady_clock::now();
  auto r = sim::RunReplay(*nodes, *tasks, config);
  if (!r) return Fail(r.error().message);
  r->elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!f.per_task.empty()) {
    std::ofstream out(f.per_task, std::ios::trunc);
    out << sim::ReplayTasksText(*tasks, *r);
    out.close();
    if (!out) return Fail("--per-task: cannot write " + f.per_task + ": " + std::strerror(errno));
  }
  std::cout << (f.json ? sim::ReplayResultJson(*r) + "\n" : sim::ReplayResultText(*r));
}

}  // namespace

void AddSimReplayCommand(CLI::App& sim) {
  auto flags = std::make_shared<ReplayFlags>();
  CLI::App* c = sim.add_subcommand(
      "replay",
      "Replay tasks with their creation and deletion times on a simulated clock: queueing, "
      "priorities, preemption");
  c->add_option("--nodes", flags->nodes, "node list CSV (sn,cpu_milli,memory_mib,gpu,model)")
      ->required()
      ->check(CLI::ExistingFile);
  c->add_option("--pods", flags->pods,
                "pod list CSV with creation_time and deletion_time (priority from qos, or from "
                "an explicit priority column)")
      ->required()
      ->check(CLI::ExistingFile);
  c->add_option("--policy", flags->policy, "scheduling policy (default: the product's best)");
  c->add_option("--limit", flags->limit, "replay only the first N pods of the file")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--speedup", flags->speedup,
                "arrivals K times faster (creation times divided by K), runtimes unchanged: K "
                "times the offered load")
      ->check(CLI::PositiveNumber);
  c->add_option("--seed", flags->seed, "seed of the policy's random draws (tie-breaks)")
      ->check(CLI::NonNegativeNumber);
  c->add_flag("--no-preemption", flags->no_preemption,
              "never evict running tasks: higher priority only jumps the queue");
  c->add_flag("--full-passes", flags->full_passes,
              "offer the whole pending queue on every pass (slow: checks the fast path)");
  c->add_flag("--json", flags->json, "print one JSON object");
  c->add_option("--per-task", flags->per_task,
                "also write one line per task to this file: name arrival_s first_start_s "
                "start_s end_s preemptions outcome (-1: did not happen)");
  CLI::Option* jobs =
      c->add_option("--jobs", flags->jobs,
                    "add N synthetic distributed jobs (job-<k>-<m>), arriving evenly spaced over "
                    "the trace's arrival span; their waits are reported apart")
          ->check(CLI::Range(int64_t{0}, sim::kMaxSyntheticJobs));
  c->add_option("--job-members", flags->job_members,
                "members per job, at most one per node (default 4)")
      ->check(CLI::Range(2, kMaxGangSize))
      ->needs(jobs);
  c->add_option("--job-gpus", flags->job_gpus,
                "whole GPUs per member (default 8); CPU, memory and runtime are the medians of "
                "the trace's tasks asking as many")
      ->check(CLI::Range(1, kMaxGpusPerTask))
      ->needs(jobs);
  c->add_option("--job-runtime", flags->job_runtime,
                "seconds each run of a job lasts (default: the median runtime of the trace's "
                "tasks asking --job-gpus whole GPUs)")
      ->check(CLI::PositiveNumber)
      ->needs(jobs);
  c->add_option("--job-priority", flags->job_priority,
                "the jobs' priority, 0..1000 (default 0: LS and Burstable trace tasks may preempt "
                "a member, which sends its whole job back)")
      ->check(CLI::Range(kMinPriority, kMaxPriority))
      ->needs(jobs);
  c->add_option("--job-topology", flags->job_topology,
                "none, preferred or required: the members of a job under one rack (node label "
                "rack, see --racks); required waits for one, preferred falls back to any nodes")
      ->check(CLI::IsMember({"none", "preferred", "required"}))
      ->needs(jobs);
  c->add_option("--racks", flags->racks,
                "label the nodes rack=r0..r<K-1>, in contiguous blocks of the node list")
      ->check(CLI::PositiveNumber);
  c->add_option("--snapshot-every", flags->snapshots.every_s,
                "snapshot every run every S seconds of its work: a preempted task resumes from "
                "its latest snapshot instead of restarting from scratch (default 0: none)")
      ->check(CLI::NonNegativeNumber);
  CLI::Option* on_stop =
      c->add_flag("--snapshot-on-stop", flags->snapshots.on_stop,
                  "snapshot a task before preemption stops it: it loses no work");
  c->add_option("--snapshot-s", flags->snapshots.snapshot_s,
                "seconds a snapshot before a stop takes: the task taking the room starts that "
                "much later (default 0)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--restore-s", flags->snapshots.restore_s,
                "seconds a resumed task spends restoring its snapshot (default 0)")
      ->check(CLI::NonNegativeNumber);
  CLI::Option* moves =
      c->add_flag("--moves", flags->moves,
                  "move instead of kill: a task that fits nowhere, even by preemption, may take a "
                  "node once tasks of at most its priority there are moved to other nodes")
          ->needs(on_stop);
  c->add_flag("--moves-any-priority", flags->moves_any_priority,
              "with --moves, tasks of a higher priority may be moved too (a move costs them their "
              "snapshot and restore, not their work)")
      ->needs(moves);
  c->callback([flags] { RunReplay(*flags); });
}

}  // namespace gpupool::cmd
