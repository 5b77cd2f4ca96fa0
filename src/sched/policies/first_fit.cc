// `first-fit`: the first feasible node in node order, tightest-fitting GPU on it.
#include "sched/policies/policies.h"

namespace gpupool::sched::policies {
namespace {

class FirstFitPolicy final : public Policy {
 public:
  explicit FirstFitPolicy(const PolicyOptions& o) : Policy(o, TieBreak::kLowestIndex) {}
  std::string_view Name() const override { return "first-fit"; }
  // All nodes tie; the lowest-index tie-break takes the first.
  int64_t Score(const ClusterState&, int, const RequestView&) override { return 0; }
};

}  // namespace

std::unique_ptr<Policy> MakeFirstFit(const PolicyOptions& o) {
  return std::make_unique<FirstFitPolicy>(o);
}

}  // namespace gpupool::sched::policies
