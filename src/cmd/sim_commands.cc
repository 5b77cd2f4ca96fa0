// `gpupool sim` and its `fgd` subcommand, wired to src/sim.
#include "cmd/sim_commands.h"

#include <cstdio>
#include <iostream>
#include <memory>

#include "sim/fgd_experiment.h"
#include "sim/report.h"
#include "sim/trace.h"

namespace gpupool::cmd {
namespace {


struct FgdFlags {
  std::string nodes;
  std::string pods;
  std::string arrivals;
  int64_t seed = -1;
  std::string policy = "default";
  double typical_coverage = 95.0;
  bool json = false;
};

void RunFgd(const FgdFlags& f) {
  auto nodes = sim::LoadNodesCsv(f.nodes);
  if (!nodes) return Fail(nodes.error().message);
  auto pods = sim::LoadPodsCsv(f.pods);
  if (!pods) return Fail(pods.error().message);
  std::vector<int> order;
  uint64_t seed = f.seed >= 0 ? static_cast<uint64_t>(f.seed) : 42;
  if (!f.arrivals.empty()) {
    auto a = sim::LoadArrivals(f.arrivals, *pods);
    if (!a) return Fail(a.error().message);
    order = std::move(*a);
  } else {
    int64_t capacity = 0;
    for (const Node& n : *nodes) capacity += static_cast<int64_t>(n.gpus.size()) * kMilliPerGpu;
    order = sim::MakeArrivalOrder(*pods, capacity, seed);
  }
  sim::FgdRunConfig config;
  config.policy = f.policy;
  config.seed = seed;
  config.typical_coverage_pct = f.typical_coverage;
  auto r = sim::RunFgdExperiment(*nodes, *pods, order, config);
  if (!r) return Fail(r.error().message);
  std::cout << (f.json ? sim::FgdResultJson(*r) + "\n" : sim::FgdResultText(*r));
}

}  // namespace

void AddSimCommands(CLI::App& app) {
  CLI::App* sim = app.add_subcommand("sim", "Replay cluster traces through the scheduler");
  sim->require_subcommand(1);
  AddSimFgdCommand(*sim);
  AddSimCompareCommand(*sim);
  AddSimReplayCommand(*sim);
}

void AddTypicalCoverageOption(CLI::App& command, double& pct) {
  command
      .add_option("--typical-coverage", pct,
                  "typical tasks: the most frequent request shapes covering this % of the pods "
                  "(the FGD paper's 95)")
      ->check(CLI::Range(0.001, 100.0))
      ->capture_default_str();
}

void AddSimFgdCommand(CLI::App& sim) {
  auto fgd = std::make_shared<FgdFlags>();
  CLI::App* c = sim.add_subcommand(
      "fgd", "The FGD paper's experiment: arrivals in order, no departures, binned by arrived %");
  c->add_option("--nodes", fgd->nodes, "node list CSV (sn,cpu_milli,memory_mib,gpu,model)")
      ->required()
      ->check(CLI::ExistingFile);
  c->add_option("--pods", fgd->pods, "pod list CSV")->required()->check(CLI::ExistingFile);
  c->add_option("--arrivals", fgd->arrivals, "exact arrival order (one pod name a line)")
      ->check(CLI::ExistingFile);
  c->add_option("--seed", fgd->seed,
                "seed of our own shuffle and inflation to 130 % (without --arrivals) and of "
                "the policy's tie-breaks")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--policy", fgd->policy, "scheduling policy (default: the product's best)");
  AddTypicalCoverageOption(*c, fgd->typical_coverage);
  c->add_flag("--json", fgd->json, "print one JSON object");
  c->callback([fgd] { RunFgd(*fgd); });
}

}  // namespace gpupool::cmd
