// The scoring-policy interface and the registry of policies by name. A policy scores a feasible
// node for a task (higher is better; integer scores so that ties are exact) and chooses the GPUs
// on the node it won. Policies are stateful only for caches and their seeded random generator.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "sched/cluster_state.h"
#include "sched/feasibility.h"
#include "sched/fragmentation.h"

namespace gpupool::sched {

// How ScheduleOnce picks among nodes with the same top score.
enum class TieBreak {
  kLowestIndex,  // deterministic: the first node in index order
  kRandom,       // uniform among the tied nodes, from the policy's seeded generator (as the
                 // Kubernetes scheduler's selectHost does; the FGD paper's protocol)
};

struct PolicyOptions {
  uint64_t seed = 1;           // seeds the policy's random generator (tie-breaks, `random`)
  // Overrides the policy's own tie-break when set.
  std::optional<TieBreak> tie_break;
  // The workload's typical tasks, for fragmentation-aware policies (see fragmentation.h).
  std::vector<TypicalTask> typical;
};

class Policy {
 public:
  explicit Policy(const PolicyOptions& options, TieBreak default_tie_break)
      : rng_(options.seed), tie_break_(options.tie_break.value_or(default_tie_break)) {}
  virtual ~Policy() = default;
  Policy(const Policy&) = delete;
  Policy& operator=(const Policy&) = delete;

  virtual std::string_view Name() const = 0;

  // Score of placing the task on feasible node `node`; higher is better.
  virtual int64_t Score(const ClusterState& state, int node, const RequestView& request) = 0;

  // Scores of many nodes at once (out[i] for nodes[i]); the default calls Score for each. A
  // policy overrides it when a tight loop over node summaries is much cheaper.
  virtual void ScoreNodes(const ClusterState& state, std::span<const int> nodes,
                          const RequestView& request, std::span<int64_t> out);

  // The GPUs the task gets on `node` (which it fits). The default is the tightest-fitting GPU
  // for a share (least milli left, lowest index on ties), the lowest-index fully free GPUs for
  // whole GPUs, and for MIG the GPU whose instance is cheapest to obtain, then the fullest.
  virtual Placement ChooseGpus(const ClusterState& state, int node, const RequestView& request);

  TieBreak tie_break() const { return tie_break_; }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
  TieBreak tie_break_;
};

// The placement every policy shares for the parts it does not decide itself (see ChooseGpus).
Placement DefaultPlacement(const ClusterState& state, int node, const RequestView& request);

// Uniform integer in [0, n) from `rng` (n > 0); one definition so that runs are reproducible
// across standard libraries (std::uniform_int_distribution is implementation-defined).
uint64_t UniformIndex(std::mt19937_64& rng, uint64_t n);

// Builds the policy called `name` ("default" is the product's best policy).
Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name, const PolicyOptions& options);

// Registered policy names, "default" excluded, in registry order.
std::vector<std::string> PolicyNames();

// What "default" resolves to.
std::string_view DefaultPolicyName();

}  // namespace gpupool::sched
