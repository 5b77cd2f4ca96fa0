// `gpupool sim replay`: replays a trace's tasks with their creation and deletion times on a
// simulated clock through the scheduler (src/sim/replay.h); wiring and the wall-time measure only.
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>

#include "cmd/sim_commands.h"
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
};

void RunReplay(const ReplayFlags& f) {
  auto nodes = sim::LoadNodesCsv(f.nodes);
  if (!nodes) return Fail(nodes.error().message);
  auto pods = sim::LoadPodsCsv(f.pods);
  if (!pods) return Fail(pods.error().message);
  auto tasks = sim::ReplayTasksFromTrace(*pods, f.limit, f.speedup);
  if (!tasks) return Fail(tasks.error().message);
  sim::ReplayConfig config;
  config.policy = f.policy;
  config.seed = static_cast<uint64_t>(f.seed);
  config.allow_preemption = !f.no_preemption;
  config.full_passes = f.full_passes;
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
  c->callback([flags] { RunReplay(*flags); });
}

}  // namespace gpupool::cmd
