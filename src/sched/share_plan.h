// SharePlan: which fractional tasks should share a GPU, planned from the workload's typical
// tasks before any of them arrives. Online, a share that lands next to the wrong partner strands
// what is left of the GPU (a 230 beside a 650 leaves 120 that almost nothing fits); offline,
// best-fit decreasing pairs the same tasks with far less left over (650 + 320, 4 × 230). The plan
// packs a large sample of the typical share sizes, in their proportions, by best-fit decreasing
// and keeps the GPU contents that packing made ("patterns"). A GPU follows the plan while what it
// holds is all or part of one pattern, so a scheduler can prefer placements that keep it so.
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <vector>

#include "sched/fragmentation.h"

namespace gpupool::sched {

// The contents of the GPUs (of 1000 milli) that best-fit decreasing packs `shares` into: each
// share, largest first, goes to the GPU it leaves least of, else to a new GPU. Each GPU's shares
// largest first, GPUs in the order they were opened.
std::vector<std::vector<int32_t>> PackBestFitDecreasing(std::vector<int32_t> shares);

class SharePlan {
 public:
  // Sample size of the packing: every share size with at least 0.0025 % of the typical shares'
  // weight appears in it. On the openb traces fgd-plan's results barely move between 2,000 and
  // 100,000 items (at most 0.07 points per variant).
  static constexpr int kSampleItems = 20000;

  SharePlan() = default;
  // Plans from the shares (one GPU, 1..999 milli) among `typical`, by weight.
  explicit SharePlan(std::span<const TypicalTask> typical, int sample_items = kSampleItems);

  // Whether a GPU holding shares of these milli (largest first) follows the plan: they are a
  // non-empty part of one pattern. An empty plan (no shares in the workload) is followed by
  // nothing.
  bool Follows(std::span<const int32_t> shares_desc) const;
  // Follows() of `shares_desc` with one more share of `milli`.
  bool FollowsWith(std::span<const int32_t> shares_desc, int32_t milli) const;

  // The distinct GPU contents of the planned packing, each largest first, in ascending order.
  const std::vector<std::vector<int32_t>>& patterns() const { return patterns_; }

 private:
  std::vector<std::vector<int32_t>> patterns_;
  std::set<std::vector<int32_t>> parts_;  // every non-empty part of every pattern, largest first
};

}  // namespace gpupool::sched
