// `gpupool sim compare`: flags for the policy comparison, wired to sim/compare.h; progress goes
// to stderr, the table (or JSON) to stdout, the plot to a file.
#include "cmd/sim_commands.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <thread>

#include "sched/policy.h"
#include "sim/compare.h"
#include "sim/plot.h"

namespace gpupool::cmd {
namespace {

struct CompareFlags {
  std::string trace_dir;
  std::vector<std::string> variants = {"default"};
  std::vector<std::string> policies = sched::PolicyNames();
  std::vector<uint64_t> seeds = {42, 43, 44, 45, 46};
  int jobs = std::max(1u, std::thread::hardware_concurrency());
  std::string plot;
  double typical_coverage = 95.0;
  bool json = false;
};

void RunCompare(const CompareFlags& f) {
  // Read the published results first: a malformed file should fail before minutes of runs.
  auto published = sim::LoadPublished(f.trace_dir);
  if (!published) return Fail(published.error().message);
  sim::CompareOptions options;
  options.trace_dir = f.trace_dir;
  options.variants = f.variants;
  options.policies = f.policies;
  options.seeds = f.seeds;
  options.jobs = f.jobs;
  options.typical_coverage_pct = f.typical_coverage;
  auto progress = [](int done, int total, const sim::CompareRun& run) {
    const auto& alloc = run.result.alloc_pct[sim::kBins - 1];  // at 130 % arrived
    char alloc_text[32] = "-";
    if (alloc) std::snprintf(alloc_text, sizeof alloc_text, "%.2f", *alloc);
    char line[256];
    std::snprintf(line, sizeof line, "[%d/%d] %s %s seed %llu: %s %% in %.1f s\n", done, total,
                  run.policy.c_str(), run.variant.c_str(),
                  static_cast<unsigned long long>(run.seed), alloc_text,
                  run.result.elapsed_ms / 1000.0);
    std::cerr << line << std::flush;
  };
  auto runs = sim::RunComparison(options, progress);
  if (!runs) return Fail(runs.error().message);
  const std::vector<sim::CompareRow> rows = sim::SummarizeComparison(*runs, *published);
  if (f.json) {
    std::cout << sim::CompareJson(*runs, rows, *published) << "\n";
  } else {
    std::cout << sim::CompareTable(rows);
  }
  if (!f.plot.empty()) {
    const sim::LinePlot plot = sim::UnallocatedGpuPlot(*runs, *published, f.variants.front());
    auto written = sim::WriteTextFile(f.plot, sim::RenderSvg(plot));
    if (!written) return Fail(written.error().message);
    std::cerr << "plot written to " << f.plot << "\n";
  }
}

}  // namespace

void AddSimCompareCommand(CLI::App& sim) {
  auto f = std::make_shared<CompareFlags>();
  CLI::App* c = sim.add_subcommand(
      "compare",
      "Run the FGD experiment for several policies, variants and seeds in parallel and compare "
      "with the paper's published results");
  c->add_option("--trace-dir", f->trace_dir,
                "directory with openb_node_list_gpu_node.csv, openb_pod_list_<variant>.csv, "
                "arrivals/<variant>/seed-<S>.txt and published-*-pct.csv")
      ->required()
      ->check(CLI::ExistingDirectory);
  c->add_option("--variants", f->variants, "trace variants (default, cpu050, …)")
      ->delimiter(',')
      ->capture_default_str();
  c->add_option("--policies", f->policies, "policies to run (\"default\" is the product's)")
      ->delimiter(',')
      ->capture_default_str();
  c->add_option("--seeds", f->seeds, "arrival-order seeds")->delimiter(',')->capture_default_str();
  c->add_option("--jobs", f->jobs, "runs at once (default: the number of CPUs)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->add_option("--plot", f->plot,
                "write an SVG of unallocated GPU % vs arrived % (first variant)");
  AddTypicalCoverageOption(*c, f->typical_coverage);
  c->add_flag("--json", f->json, "print one JSON object with every run instead of the table");
  c->callback([f] { RunCompare(*f); });
}

}  // namespace gpupool::cmd
