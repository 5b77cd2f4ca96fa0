// Policy defaults (GPU choice), the reproducible uniform draw, and the registry of policies.
#include "sched/policy.h"

#include <algorithm>
#include <map>

#include "core/gpu_catalog.h"
#include "core/mig.h"
#include "sched/policies/policies.h"

namespace gpupool::sched {
namespace {

Placement MigPlacementOn(const ClusterState& state, int node, const RequestView& r) {
  const Node& n = state.node(node);
  Placement best;
  best.node = node;
  // Cheapest action first (reuse < create < re-partition), then the GPU with the fewest free
  // compute slices (pack MIG work onto few GPUs), then the lowest index.
  int best_action = 3;
  int best_free = 1 << 20;
  for (size_t i = 0; i < n.gpus.size(); ++i) {
    const Gpu& g = n.gpus[i];
    if (!r.GpuUsable(state, g)) continue;
    const GpuModelInfo* info = FindGpuModel(g.model);
    if (info == nullptr) continue;
    const int profile = info->ProfileIndex(r.request->mig_profile);
    if (profile < 0) continue;
    auto p = FindMigPlacement(*info, g, profile);
    if (!p) continue;
    const int action = static_cast<int>(p->action);
    const int free_slices = MigFreeComputeSlices(*info, g);
    if (action < best_action || (action == best_action && free_slices < best_free)) {
      best_action = action;
      best_free = free_slices;
      best.gpus = {static_cast<int>(i)};
      best.mig = *p;
    }
  }
  return best;
}

// The fully free GPUs a whole-GPU request gets on `n`: the lowest-index ones, except where the
// node knows its GPUs' link groups and the request asks for more than one: then from the group
// with the fewest free GPUs that holds them all (the tightest, keeping larger groups whole for
// larger requests), or, when none does, from the groups with the most free GPUs first (spanning
// as few as possible); lowest index first within a group.
std::vector<int> WholeGpus(const ClusterState& state, const Node& n, const RequestView& r) {
  const int count = r.request->gpu_count;
  std::vector<int> free;
  bool grouped = false;
  for (size_t i = 0; i < n.gpus.size(); ++i) {
    const Gpu& g = n.gpus[i];
    if (!g.mig_enabled && g.milli_free == kMilliPerGpu && g.mem_free_mib == g.mem_mib &&
        r.GpuUsable(state, g)) {
      free.push_back(static_cast<int>(i));
      grouped = grouped || g.link_group >= 0;
    }
  }
  if (count < 2 || !grouped || static_cast<int>(free.size()) < count) {
    free.resize(std::min(free.size(), static_cast<size_t>(count)));
    return free;
  }
  // The free GPUs by group (a GPU of no known group is a group of its own).
  std::map<int, std::vector<int>> groups;
  for (const int i : free) {
    const int group = n.gpus[static_cast<size_t>(i)].link_group;
    groups[group >= 0 ? group : -1 - i].push_back(i);
  }
  const std::vector<int>* tightest = nullptr;
  for (const auto& [group, gpus] : groups) {
    if (static_cast<int>(gpus.size()) >= count &&
        (tightest == nullptr || gpus.size() < tightest->size() ||
         (gpus.size() == tightest->size() && gpus.front() < tightest->front()))) {
      tightest = &gpus;
    }
  }
  if (tightest != nullptr) return {tightest->begin(), tightest->begin() + count};
  std::vector<const std::vector<int>*> order;
  for (const auto& [group, gpus] : groups) order.push_back(&gpus);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return a->size() > b->size() || (a->size() == b->size() && a->front() < b->front());
  });
  std::vector<int> chosen;
  for (const auto* gpus : order) {
    for (const int i : *gpus) {
      if (static_cast<int>(chosen.size()) < count) chosen.push_back(i);
    }
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

}  // namespace

Placement DefaultPlacement(const ClusterState& state, int node, const RequestView& r) {
  const Node& n = state.node(node);
  Placement p;
  p.node = node;
  switch (r.form) {
    case GpuForm::kNone:
      break;
    case GpuForm::kWhole:
      p.gpus = WholeGpus(state, n, r);
      p.milli_per_gpu = kMilliPerGpu;
      break;
    case GpuForm::kShare: {
      // Tightest fit: least milli left among GPUs that fit, lowest index on ties.
      int best = -1;
      for (size_t i = 0; i < n.gpus.size(); ++i) {
        const Gpu& g = n.gpus[i];
        if (g.mig_enabled || g.milli_free < r.request->gpu_milli ||
            g.mem_free_mib < r.request->gpu_mem_mib || !r.GpuUsable(state, g)) {
          continue;
        }
        if (best < 0 || g.milli_free < n.gpus[static_cast<size_t>(best)].milli_free) {
          best = static_cast<int>(i);
        }
      }
      if (best >= 0) p.gpus = {best};
      p.milli_per_gpu = r.request->gpu_milli;
      p.gpu_mem_mib = r.request->gpu_mem_mib;
      break;
    }
    case GpuForm::kMig:
      return MigPlacementOn(state, node, r);
  }
  return p;
}

void Policy::ScoreNodes(const ClusterState& state, std::span<const int> nodes,
                        const RequestView& request, std::span<int64_t> out) {
  for (size_t i = 0; i < nodes.size(); ++i) out[i] = Score(state, nodes[i], request);
}

Placement Policy::ChooseGpus(const ClusterState& state, int node, const RequestView& request) {
  return DefaultPlacement(state, node, request);
}

uint64_t UniformIndex(std::mt19937_64& rng, uint64_t n) {
  // Rejection sampling on the top of the range: unbiased and identical on every platform.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return x % n;
}

namespace {

struct Entry {
  const char* name;
  std::unique_ptr<Policy> (*make)(const PolicyOptions&);
};

constexpr Entry kRegistry[] = {
    {"random", policies::MakeRandom},
    {"first-fit", policies::MakeFirstFit},
    {"best-fit", policies::MakeBestFit},
    {"dot-product", policies::MakeDotProduct},
    {"gpu-packing", policies::MakeGpuPacking},
    {"gpu-clustering", policies::MakeGpuClustering},
    {"fgd", policies::MakeFgd},
    {"fgd-plan", policies::MakeFgdPlan},
};

}  // namespace

std::string_view DefaultPolicyName() { return "fgd-plan"; }

std::vector<std::string> PolicyNames() {
  std::vector<std::string> names;
  for (const Entry& e : kRegistry) names.emplace_back(e.name);
  return names;
}

Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name, const PolicyOptions& options) {
  if (name == "default") name = DefaultPolicyName();
  for (const Entry& e : kRegistry) {
    if (name == e.name) return e.make(options);
  }
  std::string known;
  for (const Entry& e : kRegistry) known += std::string(known.empty() ? "" : ", ") + e.name;
  return InvalidArgument("policy must be one of default, " + known + "; got '" +
                         std::string(name) + "'");
}

}  // namespace gpupool::sched
