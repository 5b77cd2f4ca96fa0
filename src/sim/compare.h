// `gpupool sim compare`: the FGD experiment for several trace variants × policies × seeds, run on
// a small thread pool, summarised beside the FGD paper's published results (table, JSON, plot).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/result.h"
#include "sim/fgd_experiment.h"
#include "sim/plot.h"

namespace gpupool::sim {

// The paper's policy names in its published CSVs ("FGD", "BestFit", …) mapped to ours ("fgd",
// "best-fit", …); nullopt for a name we have no policy for.
std::optional<std::string> PolicyFromPublished(std::string_view published_name);
// The inverse; empty when the paper has no counterpart (e.g. first-fit).
std::string_view PublishedPolicyName(std::string_view policy);

// Published curves by (variant, our policy name, seed).
class PublishedCurves {
 public:
  void Set(const std::string& variant, const std::string& policy, uint64_t seed,
           const Curve& curve);
  // nullptr when there is no published row for the key.
  const Curve* Find(const std::string& variant, const std::string& policy, uint64_t seed) const;
  size_t size() const { return curves_.size(); }

 private:
  std::map<std::tuple<std::string, std::string, uint64_t>, Curve> curves_;
};

// `workload,policy,seed,0,1,…,130` rows (the layout of published-*-pct.csv); an empty cell is a
// missing value. Rows of policies we do not implement are skipped. `source` names the text in
// errors ("path:line: …").
Result<PublishedCurves> ParsePublishedCsv(std::string_view text, const std::string& source);
// NotFound when the file cannot be opened.
Result<PublishedCurves> LoadPublishedCsv(const std::string& path);

struct Published {
  PublishedCurves alloc_pct;        // published-alloc-pct.csv
  PublishedCurves frag_amount_pct;  // published-frag-amount-pct.csv
};
// From a trace directory; a missing file leaves its curves empty, a malformed one is an error.
Result<Published> LoadPublished(const std::string& trace_dir);

struct CompareOptions {
  // Holds openb_node_list_gpu_node.csv, openb_pod_list_<variant>.csv and
  // arrivals/<variant>/seed-<S>.txt.
  std::string trace_dir;
  std::vector<std::string> variants;
  std::vector<std::string> policies;  // "default" is resolved to the product's policy
  std::vector<uint64_t> seeds;
  int jobs = 1;  // worker threads
  double typical_coverage_pct = 95.0;  // FgdRunConfig::typical_coverage_pct of every run
};

struct CompareRun {
  std::string variant;
  std::string policy;  // canonical registry name
  uint64_t seed = 0;
  FgdResult result;
};

// Called after each run (from the worker thread, serialised) with how many are done of how many.
using CompareProgress = std::function<void(int done, int total, const CompareRun& run)>;

// Policy names with "default" resolved and duplicates dropped, order kept; an unknown name is an
// error that lists the known ones.
Result<std::vector<std::string>> ResolvePolicies(const std::vector<std::string>& names);

// Loads the node list once and each variant's pods and arrival orders once (a missing arrivals
// file is an error naming it), then runs every (variant, policy, seed) on `jobs` threads that
// share the loaded traces read-only. Runs come back in (variant, policy, seed) order.
Result<std::vector<CompareRun>> RunComparison(const CompareOptions& options,
                                              const CompareProgress& progress = nullptr);

// One (variant, policy) of the comparison, over its seeds. Values are % of cluster GPU capacity.
struct CompareRow {
  std::string variant;
  std::string policy;
  int seeds = 0;
  std::optional<double> alloc130_mean, alloc130_min, alloc130_max;
  int published_seeds = 0;                   // seeds run that have a published value at 130
  std::optional<double> published_alloc130;  // mean over those seeds
  std::optional<double> diff;                // mean over those seeds of (ours − published)
  std::optional<double> max_abs_seed_diff;   // max over those seeds of |ours − published|
  std::optional<double> frag90_mean;
  std::optional<double> published_frag90;  // mean over the seeds run that have one
};

std::vector<CompareRow> SummarizeComparison(const std::vector<CompareRun>& runs,
                                            const Published& published);

// The aligned text table, with a header and a footnote that explains the columns.
std::string CompareTable(const std::vector<CompareRow>& rows);

// One JSON object: {"runs": [{variant, policy, seed, arrivals, failed, alloc130, frag90,
// published_alloc130, published_frag90, elapsed_ms}…], "summary": [rows…]}; null where missing.
std::string CompareJson(const std::vector<CompareRun>& runs, const std::vector<CompareRow>& rows,
                        const Published& published);

// The FGD paper's figure: unallocated GPU % (100 − alloc %) against arrived % for `variant`, one
// solid line per policy (mean over seeds) and dashed lines for the published means of the same
// seeds, with a zoomed inset where the policies separate.
LinePlot UnallocatedGpuPlot(const std::vector<CompareRun>& runs, const Published& published,
                            const std::string& variant);

}  // namespace gpupool::sim
