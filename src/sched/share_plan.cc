// SharePlan (see share_plan.h): best-fit decreasing over a sample of the typical share sizes, and
// the parts of the patterns it makes.
#include "sched/share_plan.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "core/node.h"

namespace gpupool::sched {
namespace {

// Adds every non-empty sub-multiset of `pattern` (largest first) to `parts`: per distinct size,
// each count from 0 to how often it occurs.
void AddParts(const std::vector<int32_t>& pattern, std::set<std::vector<int32_t>>& parts) {
  std::vector<std::pair<int32_t, int>> runs;  // (size, count), largest first
  for (int32_t m : pattern) {
    if (!runs.empty() && runs.back().first == m) {
      ++runs.back().second;
    } else {
      runs.emplace_back(m, 1);
    }
  }
  std::vector<int32_t> part;
  std::function<void(size_t)> walk = [&](size_t i) {
    if (i == runs.size()) {
      if (!part.empty()) parts.insert(part);
      return;
    }
    const size_t mark = part.size();
    for (int c = 0; c <= runs[i].second; ++c) {
      walk(i + 1);
      part.push_back(runs[i].first);
    }
    part.resize(mark);
  };
  walk(0);
}

}  // namespace

std::vector<std::vector<int32_t>> PackBestFitDecreasing(std::vector<int32_t> shares) {
  std::sort(shares.begin(), shares.end(), std::greater<>());
  std::vector<std::vector<int32_t>> gpus;
  std::multimap<int32_t, size_t> open;  // milli left → GPU (equal lefts are interchangeable)
  for (int32_t milli : shares) {
    auto it = open.lower_bound(milli);
    if (it == open.end()) {
      gpus.push_back({milli});
      if (milli < kMilliPerGpu) open.emplace(kMilliPerGpu - milli, gpus.size() - 1);
      continue;
    }
    const auto [left, g] = *it;
    open.erase(it);
    gpus[g].push_back(milli);
    if (left > milli) open.emplace(left - milli, g);
  }
  return gpus;
}

SharePlan::SharePlan(std::span<const TypicalTask> typical, int sample_items) {
  std::map<int32_t, double, std::greater<>> weight;  // share milli → weight, largest first
  double total = 0;
  for (const TypicalTask& t : typical) {
    if (t.gpu_count != 1 || t.milli_per_gpu <= 0 || t.milli_per_gpu >= kMilliPerGpu) continue;
    weight[t.milli_per_gpu] += t.weight;
    total += t.weight;
  }
  if (total <= 0) return;
  std::vector<int32_t> sample;
  for (const auto& [milli, w] : weight) {
    sample.insert(sample.end(), static_cast<size_t>(std::lround(sample_items * w / total)), milli);
  }
  const std::vector<std::vector<int32_t>> gpus = PackBestFitDecreasing(std::move(sample));
  std::set<std::vector<int32_t>> distinct(gpus.begin(), gpus.end());
  patterns_.assign(distinct.begin(), distinct.end());
  for (const std::vector<int32_t>& p : patterns_) AddParts(p, parts_);
}

bool SharePlan::Follows(std::span<const int32_t> shares_desc) const {
  return !shares_desc.empty() &&
         parts_.count(std::vector<int32_t>(shares_desc.begin(), shares_desc.end())) > 0;
}

bool SharePlan::FollowsWith(std::span<const int32_t> shares_desc, int32_t milli) const {
  std::vector<int32_t> with(shares_desc.begin(), shares_desc.end());
  with.insert(std::upper_bound(with.begin(), with.end(), milli, std::greater<>()), milli);
  return parts_.count(with) > 0;
}

}  // namespace gpupool::sched
