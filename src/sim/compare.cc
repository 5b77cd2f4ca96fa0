// The policy comparison (see compare.h): trace loading shared across runs, the thread pool, the
// published-CSV reader and the table / JSON / plot renderings.
#include "sim/compare.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>
#include <thread>

#include "sched/policy.h"
#include "sim/report.h"
#include "sim/trace.h"

namespace gpupool::sim {
namespace {

namespace fs = std::filesystem;

constexpr int kAllocBin = 130;  // the paper's headline: allocation when 130 % has arrived
constexpr int kFragBin = 90;    // fragmentation before the cluster saturates

struct NamePair {
  const char* published;
  const char* ours;
};
constexpr NamePair kPolicyNames[] = {
    {"Random", "random"},          {"DotProd", "dot-product"}, {"GpuClustering", "gpu-clustering"},
    {"GpuPacking", "gpu-packing"}, {"BestFit", "best-fit"},    {"FGD", "fgd"},
};

std::string Line(std::string_view source, size_t line_no) {
  return std::string(source) + ":" + std::to_string(line_no);
}

std::vector<std::string_view> SplitComma(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      out.push_back(line.substr(start));
      return out;
    }
    out.push_back(line.substr(start, comma - start));
    start = comma + 1;
  }
}

template <typename T>
bool ParseNumber(std::string_view s, T& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::optional<double> At(const Curve& c, int bin) { return c[static_cast<size_t>(bin)]; }

std::optional<double> Mean(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

// A stable colour per policy, from its place in the registry, so that a policy keeps its colour
// whichever subset is compared.
std::string PolicyColor(const std::string& policy) {
  static constexpr const char* kPalette[] = {"#7f7f7f", "#bcbd22", "#2ca02c", "#ff7f0e", "#9467bd",
                                             "#8c564b", "#d62728", "#1f77b4", "#e377c2", "#17becf"};
  constexpr size_t n = sizeof kPalette / sizeof kPalette[0];
  const std::vector<std::string> names = sched::PolicyNames();
  const auto it = std::find(names.begin(), names.end(), policy);
  const size_t i = it == names.end() ? names.size() : static_cast<size_t>(it - names.begin());
  return kPalette[i % n];
}

// Everything a run reads, loaded once and shared read-only by the workers.
struct VariantData {
  std::string name;
  std::vector<TracePod> pods;
  std::vector<std::vector<int>> orders;  // per seed, in options.seeds order
};

struct Job {
  size_t variant;
  size_t policy;
  size_t seed;
};

}  // namespace

std::optional<std::string> PolicyFromPublished(std::string_view published_name) {
  for (const NamePair& p : kPolicyNames) {
    if (published_name == p.published) return std::string(p.ours);
  }
  return std::nullopt;
}

std::string_view PublishedPolicyName(std::string_view policy) {
  for (const NamePair& p : kPolicyNames) {
    if (policy == p.ours) return p.published;
  }
  return {};
}

void PublishedCurves::Set(const std::string& variant, const std::string& policy, uint64_t seed,
                          const Curve& curve) {
  curves_[{variant, policy, seed}] = curve;
}

const Curve* PublishedCurves::Find(const std::string& variant, const std::string& policy,
                                   uint64_t seed) const {
  const auto it = curves_.find({variant, policy, seed});
  return it == curves_.end() ? nullptr : &it->second;
}

Result<PublishedCurves> ParsePublishedCsv(std::string_view text, const std::string& source) {
  PublishedCurves out;
  std::vector<int> bins;  // bin of each column from the fourth on
  size_t line_no = 0;
  size_t columns = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const std::vector<std::string_view> cells = SplitComma(line);
    if (columns == 0) {
      if (cells.size() < 4 || cells[0] != "workload" || cells[1] != "policy" ||
          cells[2] != "seed") {
        return InvalidArgument(Line(source, line_no) +
                               ": header must be workload,policy,seed,0,1,…,130");
      }
      for (size_t i = 3; i < cells.size(); ++i) {
        int bin = -1;
        if (!ParseNumber(cells[i], bin) || bin < 0 || bin >= kBins) {
          return InvalidArgument(Line(source, line_no) + ": column " + std::to_string(i + 1) +
                                 " must be a bin 0.." + std::to_string(kBins - 1) + ", got '" +
                                 std::string(cells[i]) + "'");
        }
        bins.push_back(bin);
      }
      columns = cells.size();
      continue;
    }
    if (cells.size() != columns) {
      return InvalidArgument(Line(source, line_no) + ": expected " + std::to_string(columns) +
                             " fields, got " + std::to_string(cells.size()));
    }
    uint64_t seed = 0;
    if (!ParseNumber(cells[2], seed)) {
      return InvalidArgument(Line(source, line_no) + ": seed must be an integer, got '" +
                             std::string(cells[2]) + "'");
    }
    Curve curve;
    for (size_t i = 3; i < cells.size(); ++i) {
      if (cells[i].empty()) continue;
      double v = 0;
      if (!ParseNumber(cells[i], v)) {
        return InvalidArgument(Line(source, line_no) + ": bin " + std::to_string(bins[i - 3]) +
                               " must be a number, got '" + std::string(cells[i]) + "'");
      }
      curve[static_cast<size_t>(bins[i - 3])] = v;
    }
    // The published files may hold policies we do not implement; nothing can be compared to them.
    const std::optional<std::string> policy = PolicyFromPublished(cells[1]);
    if (!policy) continue;
    const std::string variant(cells[0]);
    if (out.Find(variant, *policy, seed) != nullptr) {
      return InvalidArgument(Line(source, line_no) + ": duplicate row for " + variant + " " +
                             std::string(cells[1]) + " seed " + std::to_string(seed));
    }
    out.Set(variant, *policy, seed, curve);
  }
  if (columns == 0) return InvalidArgument(source + ": empty file");
  return out;
}

Result<PublishedCurves> LoadPublishedCsv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return ParsePublishedCsv(text.str(), path);
}

Result<Published> LoadPublished(const std::string& trace_dir) {
  Published out;
  const std::pair<const char*, PublishedCurves*> files[] = {
      {"published-alloc-pct.csv", &out.alloc_pct},
      {"published-frag-amount-pct.csv", &out.frag_amount_pct},
  };
  for (const auto& [name, curves] : files) {
    const std::string path = (fs::path(trace_dir) / name).string();
    if (!fs::exists(path)) continue;  // published columns stay empty
    auto loaded = LoadPublishedCsv(path);
    if (!loaded) return tl::unexpected(loaded.error());
    *curves = std::move(*loaded);
  }
  return out;
}

Result<std::vector<std::string>> ResolvePolicies(const std::vector<std::string>& names) {
  const std::vector<std::string> known = sched::PolicyNames();
  std::vector<std::string> out;
  for (const std::string& name : names) {
    const std::string canonical =
        name == "default" ? std::string(sched::DefaultPolicyName()) : name;
    if (std::find(known.begin(), known.end(), canonical) == known.end()) {
      std::string list = "default";
      for (const std::string& k : known) list += ", " + k;
      return InvalidArgument("policy must be one of " + list + "; got '" + name + "'");
    }
    if (std::find(out.begin(), out.end(), canonical) == out.end()) out.push_back(canonical);
  }
  return out;
}

Result<std::vector<CompareRun>> RunComparison(const CompareOptions& options,
                                              const CompareProgress& progress) {
  if (options.variants.empty()) return InvalidArgument("variants must not be empty");
  if (options.seeds.empty()) return InvalidArgument("seeds must not be empty");
  if (options.jobs < 1) {
    return InvalidArgument("jobs must be at least 1, got " + std::to_string(options.jobs));
  }
  auto policies = ResolvePolicies(options.policies);
  if (!policies) return tl::unexpected(policies.error());
  if (policies->empty()) return InvalidArgument("policies must not be empty");

  const fs::path dir(options.trace_dir);
  auto nodes = LoadNodesCsv((dir / "openb_node_list_gpu_node.csv").string());
  if (!nodes) return tl::unexpected(nodes.error());
  std::vector<VariantData> variants;
  for (const std::string& name : options.variants) {
    VariantData v;
    v.name = name;
    auto pods = LoadPodsCsv((dir / ("openb_pod_list_" + name + ".csv")).string());
    if (!pods) return tl::unexpected(pods.error());
    v.pods = std::move(*pods);
    for (uint64_t seed : options.seeds) {
      const std::string path =
          (dir / "arrivals" / name / ("seed-" + std::to_string(seed) + ".txt")).string();
      if (!fs::exists(path)) {
        return NotFound("no arrival order for variant " + name + " seed " + std::to_string(seed) +
                        ": " + path + " does not exist");
      }
      auto order = LoadArrivals(path, v.pods);
      if (!order) return tl::unexpected(order.error());
      v.orders.push_back(std::move(*order));
    }
    variants.push_back(std::move(v));
  }

  std::vector<Job> jobs;
  for (size_t v = 0; v < variants.size(); ++v) {
    for (size_t p = 0; p < policies->size(); ++p) {
      for (size_t s = 0; s < options.seeds.size(); ++s) jobs.push_back({v, p, s});
    }
  }
  std::vector<std::optional<Result<CompareRun>>> results(jobs.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex progress_mu;
  int done = 0;
  const int total = static_cast<int>(jobs.size());

  // Each worker takes the next job until none is left or a run has failed; results land in the
  // job's own slot, so no two threads write the same element.
  auto worker = [&] {
    while (!failed.load()) {
      const size_t i = next.fetch_add(1);
      if (i >= jobs.size()) return;
      const Job& job = jobs[i];
      const VariantData& v = variants[job.variant];
      CompareRun run;
      run.variant = v.name;
      run.policy = (*policies)[job.policy];
      run.seed = options.seeds[job.seed];
      FgdRunConfig config;
      config.policy = run.policy;
      config.seed = run.seed;
      config.typical_coverage_pct = options.typical_coverage_pct;
      auto r = RunFgdExperiment(*nodes, v.pods, v.orders[job.seed], config);
      if (!r) {
        failed = true;
        const std::string what = run.policy + " " + v.name + " seed " + std::to_string(run.seed);
        results[i] = tl::unexpected(Error{r.error().code, what + ": " + r.error().message});
        return;
      }
      run.result = std::move(*r);
      std::lock_guard lock(progress_mu);
      ++done;
      if (progress) progress(done, total, run);
      results[i] = std::move(run);
    }
  };
  const size_t threads = std::min(static_cast<size_t>(options.jobs), jobs.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) {
    // Fewer threads than asked (the system refused one) only makes the comparison slower.
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error&) {
      break;
    }
  }
  worker();  // the calling thread works too
  for (std::thread& t : pool) t.join();

  std::vector<CompareRun> runs;
  runs.reserve(jobs.size());
  for (auto& r : results) {
    if (r && !*r) return tl::unexpected(r->error());
  }
  for (auto& r : results) {
    if (!r) return MakeError(ErrorCode::kInternal, "a comparison run did not finish");
    runs.push_back(std::move(**r));
  }
  return runs;
}

std::vector<CompareRow> SummarizeComparison(const std::vector<CompareRun>& runs,
                                            const Published& published) {
  std::vector<CompareRow> rows;
  // Runs of one (variant, policy) may be spread out; group them in first-seen order.
  for (const CompareRun& run : runs) {
    auto it = std::find_if(rows.begin(), rows.end(), [&](const CompareRow& r) {
      return r.variant == run.variant && r.policy == run.policy;
    });
    if (it != rows.end()) continue;
    CompareRow row;
    row.variant = run.variant;
    row.policy = run.policy;
    std::vector<double> alloc, pub_alloc, diffs, frag, pub_frag;
    for (const CompareRun& r : runs) {
      if (r.variant != row.variant || r.policy != row.policy) continue;
      ++row.seeds;
      const std::optional<double> ours = At(r.result.alloc_pct, kAllocBin);
      if (ours) alloc.push_back(*ours);
      if (const auto f = At(r.result.frag_amount_pct, kFragBin)) frag.push_back(*f);
      if (const Curve* c = published.alloc_pct.Find(r.variant, r.policy, r.seed)) {
        if (const auto p = At(*c, kAllocBin)) {
          pub_alloc.push_back(*p);
          if (ours) diffs.push_back(*ours - *p);
        }
      }
      if (const Curve* c = published.frag_amount_pct.Find(r.variant, r.policy, r.seed)) {
        if (const auto p = At(*c, kFragBin)) pub_frag.push_back(*p);
      }
    }
    row.alloc130_mean = Mean(alloc);
    if (!alloc.empty()) {
      row.alloc130_min = *std::min_element(alloc.begin(), alloc.end());
      row.alloc130_max = *std::max_element(alloc.begin(), alloc.end());
    }
    row.published_seeds = static_cast<int>(pub_alloc.size());
    row.published_alloc130 = Mean(pub_alloc);
    row.diff = Mean(diffs);
    for (double d : diffs) {
      row.max_abs_seed_diff = std::max(row.max_abs_seed_diff.value_or(0.0), std::abs(d));
    }
    row.frag90_mean = Mean(frag);
    row.published_frag90 = Mean(pub_frag);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string CompareTable(const std::vector<CompareRow>& rows) {
  struct Column {
    std::string header;
    bool right;  // numbers are right-aligned so that their decimal points line up
  };
  const std::vector<Column> cols = {
      {"variant", false}, {"policy", false}, {"seeds", true},  {"ours", true}, {"min..max", false},
      {"paper", true},    {"diff", true},    {"max|d|", true}, {"ours", true}, {"paper", true},
  };
  struct Group {
    std::string label;
    size_t first, last;  // column span
  };
  const std::vector<Group> groups = {
      {"alloc % at " + std::to_string(kAllocBin) + " % arrived", 3, 7},
      {"frag amount % at " + std::to_string(kFragBin) + " %", 8, 9},
  };

  std::vector<std::vector<std::string>> cells;
  bool partial = false;
  for (const CompareRow& r : rows) {
    std::string range = "-";
    if (r.alloc130_min) range = Fixed(r.alloc130_min) + ".." + Fixed(r.alloc130_max);
    std::string paper = Fixed(r.published_alloc130);
    if (r.published_seeds > 0 && r.published_seeds < r.seeds) {
      paper += "*";
      partial = true;
    }
    cells.push_back({r.variant, r.policy, std::to_string(r.seeds), Fixed(r.alloc130_mean), range,
                     paper, Fixed(r.diff, "%+.2f"), Fixed(r.max_abs_seed_diff),
                     Fixed(r.frag90_mean), Fixed(r.published_frag90)});
  }
  std::vector<size_t> width(cols.size());
  for (size_t c = 0; c < cols.size(); ++c) {
    width[c] = cols[c].header.size();
    for (const auto& row : cells) width[c] = std::max(width[c], row[c].size());
  }
  // A group label wider than its columns widens them evenly (the first ones take the remainder).
  const std::string sep = "  ";
  auto span = [&](const Group& g) {
    size_t w = 0;
    for (size_t c = g.first; c <= g.last; ++c) w += width[c] + (c > g.first ? sep.size() : 0);
    return w;
  };
  for (const Group& g : groups) {
    if (span(g) >= g.label.size()) continue;
    const size_t extra = g.label.size() - span(g);
    const size_t n = g.last - g.first + 1;
    for (size_t c = g.first; c <= g.last; ++c) {
      width[c] += extra / n + (c - g.first < extra % n ? 1 : 0);
    }
  }

  auto pad = [](const std::string& s, size_t w, bool right) {
    const std::string fill(w > s.size() ? w - s.size() : 0, ' ');
    return right ? fill + s : s + fill;
  };
  auto rtrim = [](std::string s) {
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
  };
  std::string out;
  // Two header lines for the groups: the label centred over its columns, then a rule.
  std::string labels, rules;
  size_t at = 0;
  for (size_t c = 0; c < cols.size(); ++c) {
    for (const Group& g : groups) {
      if (g.first != c) continue;
      const size_t w = span(g);
      const size_t left = at + (w - g.label.size()) / 2;
      labels += std::string(left - std::min(left, labels.size()), ' ') + g.label;
      rules += std::string(at - std::min(at, rules.size()), ' ') + std::string(w, '-');
    }
    at += width[c] + sep.size();
  }
  out += rtrim(labels) + "\n" + rtrim(rules) + "\n";
  std::string header;
  for (size_t c = 0; c < cols.size(); ++c) {
    header += (c ? sep : "") + pad(cols[c].header, width[c], cols[c].right);
  }
  out += rtrim(header) + "\n";
  std::string prev_variant;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i > 0 && cells[i][0] != prev_variant) out += "\n";
    prev_variant = cells[i][0];
    std::string line;
    for (size_t c = 0; c < cols.size(); ++c) {
      line += (c ? sep : "") + pad(cells[i][c], width[c], cols[c].right);
    }
    out += rtrim(line) + "\n";
  }
  out +=
      "\nours: mean over seeds; paper: published mean over the same seeds (Weng et al., "
      "ATC'23);\ndiff: mean of per-seed (ours - paper); max|d|: largest per-seed "
      "|ours - paper|; - : no value.\n";
  if (partial)
    out += "*: the paper publishes only some of these seeds; paper and diff use those.\n";
  for (const CompareRow& r : rows) {
    if (r.policy == sched::DefaultPolicyName()) {
      out += r.policy + " is `default`, the product's policy.\n";
      break;
    }
  }
  return out;
}

std::string CompareJson(const std::vector<CompareRun>& runs, const std::vector<CompareRow>& rows,
                        const Published& published) {
  nlohmann::json j;
  j["runs"] = nlohmann::json::array();
  for (const CompareRun& r : runs) {
    nlohmann::json o;
    o["variant"] = r.variant;
    o["policy"] = r.policy;
    o["seed"] = r.seed;
    o["arrivals"] = r.result.arrivals;
    o["failed"] = r.result.failed;
    o["alloc130"] = JsonOrNull(At(r.result.alloc_pct, kAllocBin));
    o["frag90"] = JsonOrNull(At(r.result.frag_amount_pct, kFragBin));
    const Curve* pa = published.alloc_pct.Find(r.variant, r.policy, r.seed);
    const Curve* pf = published.frag_amount_pct.Find(r.variant, r.policy, r.seed);
    o["published_alloc130"] = JsonOrNull(pa ? At(*pa, kAllocBin) : std::nullopt);
    o["published_frag90"] = JsonOrNull(pf ? At(*pf, kFragBin) : std::nullopt);
    o["elapsed_ms"] = r.result.elapsed_ms;
    j["runs"].push_back(std::move(o));
  }
  j["summary"] = nlohmann::json::array();
  for (const CompareRow& r : rows) {
    nlohmann::json o;
    o["variant"] = r.variant;
    o["policy"] = r.policy;
    o["seeds"] = r.seeds;
    o["alloc130_mean"] = JsonOrNull(r.alloc130_mean);
    o["alloc130_min"] = JsonOrNull(r.alloc130_min);
    o["alloc130_max"] = JsonOrNull(r.alloc130_max);
    o["published_seeds"] = r.published_seeds;
    o["published_alloc130"] = JsonOrNull(r.published_alloc130);
    o["diff"] = JsonOrNull(r.diff);
    o["max_abs_seed_diff"] = JsonOrNull(r.max_abs_seed_diff);
    o["frag90_mean"] = JsonOrNull(r.frag90_mean);
    o["published_frag90"] = JsonOrNull(r.published_frag90);
    j["summary"].push_back(std::move(o));
  }
  return j.dump();
}

LinePlot UnallocatedGpuPlot(const std::vector<CompareRun>& runs, const Published& published,
                            const std::string& variant) {
  LinePlot plot;
  plot.x_label = "Arrived workload (% of cluster GPU capacity)";
  plot.y_label = "Unallocated GPU (% of cluster capacity)";
  plot.range = {0, kBins - 1, 0.0, 100.0};
  // The policies only separate once the cluster fills up; magnify the tail.
  plot.inset = PlotRange{90, kBins - 1, std::nullopt, std::nullopt};

  std::vector<std::string> policies;
  std::vector<uint64_t> seeds;
  for (const CompareRun& r : runs) {
    if (r.variant != variant) continue;
    if (std::find(policies.begin(), policies.end(), r.policy) == policies.end()) {
      policies.push_back(r.policy);
    }
    if (std::find(seeds.begin(), seeds.end(), r.seed) == seeds.end()) seeds.push_back(r.seed);
  }
  bool any_published = false;
  std::vector<PlotSeries> published_series;
  for (const std::string& policy : policies) {
    std::vector<const Curve*> ours, theirs;
    for (const CompareRun& r : runs) {
      if (r.variant != variant || r.policy != policy) continue;
      ours.push_back(&r.result.alloc_pct);
      if (const Curve* c = published.alloc_pct.Find(variant, policy, r.seed)) theirs.push_back(c);
    }
    // Unallocated % at each bin, averaged over the curves that have a value there.
    auto mean_unallocated = [](const std::vector<const Curve*>& curves) {
      std::vector<PlotPoint> points;
      for (int b = 0; b < kBins; ++b) {
        std::vector<double> v;
        for (const Curve* c : curves) {
          if (const auto a = At(*c, b)) v.push_back(100.0 - *a);
        }
        points.push_back({static_cast<double>(b), Mean(v)});
      }
      return points;
    };
    const std::string color = PolicyColor(policy);
    plot.series.push_back({color, false, mean_unallocated(ours)});
    if (!theirs.empty()) {
      any_published = true;
      published_series.push_back({color, true, mean_unallocated(theirs)});
    }
    plot.legend.push_back({policy, color, false});
  }
  // Published lines underneath ours: where they coincide, ours stays visible.
  plot.series.insert(plot.series.begin(), published_series.begin(), published_series.end());

  std::string seed_list;
  for (uint64_t s : seeds) seed_list += (seed_list.empty() ? "" : ", ") + std::to_string(s);
  plot.title = "Unallocated GPU as the workload arrives: openb " + variant;
  plot.subtitle =
      (seeds.size() == 1 ? "FGD experiment, seed " : "FGD experiment, mean over seeds ") +
      seed_list +
      (any_published ? "; solid: gpupool, dashed: published (Weng et al., ATC'23)" : "");
  if (any_published) {
    plot.legend.push_back({"gpupool", "#444444", false});
    plot.legend.push_back({"published", "#444444", true});
  }
  return plot;
}

}  // namespace gpupool::sim
