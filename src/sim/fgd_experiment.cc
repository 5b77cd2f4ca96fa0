// FGD experiment driver and the paper's binning (see fgd_experiment.h).
#include "sim/fgd_experiment.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <numeric>
#include <random>

#include "sched/cluster_state.h"
#include "sched/policy.h"
#include "sched/schedule.h"
#include "sched/share_plan.h"

namespace gpupool::sim {
namespace {

struct Sample {
  int bin;              // round-half-even of arrived %
  double alloc_pct;     // rounded to 2 decimals
  double frag_milli;    // rounded to 2 decimals (the simulator logs "%.2f")
  double frag_ratio;    // % rounded to 2 decimals
};

double Round2(double x) { return std::round(x * 100.0) / 100.0; }

// Per bin b: the mean over samples whose bin is b, or when there are none, over bins b-1..b+1.
template <typename Value>
Curve BinMean(const std::vector<Sample>& samples, Value value, bool round2) {
  std::array<double, kBins> sum{};
  std::array<int64_t, kBins> count{};
  for (const Sample& s : samples) {
    if (s.bin < 0 || s.bin >= kBins) continue;
    sum[static_cast<size_t>(s.bin)] += value(s);
    ++count[static_cast<size_t>(s.bin)];
  }
  Curve out;
  for (int b = 0; b < kBins; ++b) {
    double total = sum[static_cast<size_t>(b)];
    int64_t n = count[static_cast<size_t>(b)];
    if (n == 0) {
      for (int nb = std::max(0, b - 1); nb <= std::min(kBins - 1, b + 1); ++nb) {
        total += sum[static_cast<size_t>(nb)];
        n += count[static_cast<size_t>(nb)];
      }
    }
    if (n > 0) {
      const double mean = total / static_cast<double>(n);
      out[static_cast<size_t>(b)] = round2 ? Round2(mean) : mean;
    }
  }
  return out;
}

}  // namespace

Result<FgdResult> RunFgdExperiment(const std::vector<Node>& nodes,
                                   const std::vector<TracePod>& pods,
                                   const std::vector<int>& order, const FgdRunConfig& config) {
  std::vector<TaskRequest> workload;
  workload.reserve(pods.size());
  for (const TracePod& p : pods) workload.push_back(p.request);
  sched::PolicyOptions options;
  options.seed = config.seed;
  if (!(config.typical_coverage_pct > 0 && config.typical_coverage_pct <= 100)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", config.typical_coverage_pct);
    return InvalidArgument(std::string("typical coverage must be in (0, 100] %, got ") + got);
  }
  options.typical = sched::TypicalTasks(workload, config.typical_coverage_pct);
  auto policy = sched::MakePolicy(config.policy, options);
  if (!policy) return tl::unexpected(policy.error());

  const auto start = std::chrono::steady_clock::now();
  // The paper's simulator renames nodes "%04d-<name>" with a seeded random permutation before
  // creating them, so the scheduler meets them (and breaks score ties) in a random order that is
  // fixed for the run. We do the same with our generator.
  std::vector<Node> ordered = nodes;
  if (config.shuffle_nodes) {
    std::mt19937_64 rng(config.seed);
    for (size_t i = ordered.size(); i > 1; --i) {
      std::swap(ordered[i - 1], ordered[sched::UniformIndex(rng, i)]);
    }
  }
  sched::ClusterState state(std::move(ordered));
  sched::FragModel frag(options.typical);
  const int64_t capacity = state.TotalGpuMilli();
  if (capacity <= 0) return InvalidArgument("the node list has no GPUs");
  const double gpus = static_cast<double>(capacity) / kMilliPerGpu;

  // Fragment bins per node, recomputed only for the node an arrival changed.
  std::vector<sched::FragBins> node_bins(static_cast<size_t>(state.NodeCount()));
  for (int n = 0; n < state.NodeCount(); ++n) {
    node_bins[static_cast<size_t>(n)] = frag.NodeBins(state, n);
  }

  FgdResult result;
  result.policy = std::string((*policy)->Name());
  std::vector<Sample> samples;
  samples.reserve(order.size());
  int64_t arrived_milli = 0;
  sched::ScheduleOptions no_preemption;
  no_preemption.allow_preemption = false;
  std::vector<sched::QueuedTask> one(1);
  for (size_t i = 0; i < order.size(); ++i) {
    const TracePod& pod = pods[static_cast<size_t>(order[i])];
    arrived_milli += pod.request.GpuMilli();
    one[0].id = std::to_string(i);
    one[0].request = pod.request;
    const sched::Plan plan = sched::ScheduleOnce(state, one, **policy, no_preemption);
    if (plan.assignments.empty()) {
      ++result.failed;
    } else {
      const int n = plan.assignments[0].placement.node;
      node_bins[static_cast<size_t>(n)] = frag.NodeBins(state, n);
    }
    sched::FragBins cluster{};
    for (const sched::FragBins& b : node_bins) {
      for (size_t c = 0; c < cluster.size(); ++c) cluster[c] += b[c];
    }
    const double frag_milli = sched::FragAmount(cluster);
    const double total = sched::FragTotal(cluster);
    Sample s;
    s.bin = static_cast<int>(std::nearbyint(static_cast<double>(arrived_milli) / gpus / 10.0));
    s.alloc_pct = Round2(static_cast<double>(state.AllocatedGpuMilli()) / gpus / 10.0);
    s.frag_milli = Round2(frag_milli);
    s.frag_ratio = Round2(total > 0 ? 100.0 * frag_milli / total : 0.0);
    samples.push_back(s);
  }
  result.arrivals = static_cast<int64_t>(order.size());
  result.alloc_pct = BinMean(samples, [](const Sample& s) { return s.alloc_pct; }, true);
  result.frag_amount_pct = BinMean(
      samples, [&](const Sample& s) { return 100.0 * s.frag_milli / 1000.0 / gpus; }, true);
  result.frag_ratio_pct = BinMean(samples, [](const Sample& s) { return s.frag_ratio; }, false);
  result.elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::vector<int32_t> shares;
  for (int n = 0; n < state.NodeCount(); ++n) {
    const Node& node = state.node(n);
    for (size_t g = 0; g < node.gpus.size(); ++g) {
      const Gpu& gpu = node.gpus[g];
      if (gpu.mig_enabled) continue;
      result.idle.free_gpus += gpu.milli_free == kMilliPerGpu;
      if (gpu.milli_free < kMilliPerGpu) result.idle.partial_milli += gpu.milli_free;
      const std::span<const int32_t> on = state.GpuShares(n, static_cast<int>(g));
      result.idle.share_gpus += !on.empty();
      shares.insert(shares.end(), on.begin(), on.end());
    }
  }
  result.idle.share_gpus_repacked =
      static_cast<int64_t>(sched::PackBestFitDecreasing(std::move(shares)).size());
  return result;
}

std::vector<int> MakeArrivalOrder(const std::vector<TracePod>& pods, int64_t capacity_milli,
                                  uint64_t seed) {
  std::vector<int> order(pods.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return pods[static_cast<size_t>(a)].name < pods[static_cast<size_t>(b)].name; });
  std::mt19937_64 rng(seed);
  for (size_t i = order.size(); i > 1; --i) {
    std::swap(order[i - 1], order[sched::UniformIndex(rng, i)]);
  }
  const int64_t target = capacity_milli * 130 / 100;
  int64_t total = 0;
  for (int i : order) total += pods[static_cast<size_t>(i)].request.GpuMilli();
  const size_t originals = order.size();
  if (total <= target) {
    while (originals > 0) {
      const int pick = order[sched::UniformIndex(rng, originals)];
      const int64_t milli = pods[static_cast<size_t>(pick)].request.GpuMilli();
      if (total + milli > target) break;
      total += milli;
      order.push_back(pick);
    }
  } else {
    while (total > target && !order.empty()) {
      const size_t at = sched::UniformIndex(rng, order.size());
      total -= pods[static_cast<size_t>(order[at])].request.GpuMilli();
      order.erase(order.begin() + static_cast<long>(at));
    }
  }
  return order;
}

}  // namespace gpupool::sim
