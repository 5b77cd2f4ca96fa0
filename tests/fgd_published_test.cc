// The simulator against the FGD paper's published results, on the trace slice shipped in data/:
// our re-implementations of the paper's policies must land where the paper's simulator did, and
// the product's policy must allocate at least as much as FGD.
//
// Why some checks are per seed and others on the mean over seeds 42..46: the paper's simulator
// meets nodes in a random order drawn from Go's generator (it renames nodes with rand.Perm) and
// gives score ties to the first node in that order; we draw the order from our own generator. For
// policies whose scores rarely tie at the top (best-fit, dot-product, fgd on default) one run lands
// within a few tenths of the published run; for the others the order moves single runs by up to
// the published seed-to-seed spread, and only their mean is comparable (docs/benchmarks.md).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sim/compare.h"

namespace gpupool::sim {
namespace {

const std::string kTraceDir = std::string(GPUPOOL_SOURCE_DIR) + "/data/openb";
constexpr double kTolerancePct = 0.3;

std::vector<CompareRow> Compare(const std::vector<std::string>& variants,
                                const std::vector<std::string>& policies,
                                const std::vector<uint64_t>& seeds) {
  CompareOptions o;
  o.trace_dir = kTraceDir;
  o.variants = variants;
  o.policies = policies;
  o.seeds = seeds;
  o.jobs = 2;
  auto runs = RunComparison(o);
  EXPECT_TRUE(runs.has_value()) << (runs ? "" : runs.error().message);
  auto published = LoadPublished(kTraceDir);
  EXPECT_TRUE(published.has_value()) << (published ? "" : published.error().message);
  if (!runs || !published) return {};
  return SummarizeComparison(*runs, *published);
}

void ExpectMatchesPublished(const CompareRow& row, bool per_seed) {
  SCOPED_TRACE(row.variant + " " + row.policy);
  ASSERT_TRUE(row.diff.has_value()) << "no published value";
  ASSERT_EQ(row.published_seeds, row.seeds);
  const double off = per_seed ? *row.max_abs_seed_diff : std::fabs(*row.diff);
  EXPECT_LE(off, kTolerancePct) << "ours " << *row.alloc130_mean << " vs published "
                                << *row.published_alloc130;
}

// Default variant, seed 42: each run within 0.3 points of the paper's run
// (published: BestFit 93.13, DotProd 90.54, FGD 95.29).
TEST(FgdPublished, DefaultSeed42RunsMatch) {
  const auto rows = Compare({"default"}, {"best-fit", "dot-product", "fgd"}, {42});
  ASSERT_EQ(rows.size(), 3u);
  for (const CompareRow& row : rows) ExpectMatchesPublished(row, /*per_seed=*/true);
}

// One variant of each family, mean over seeds 42..46, for the policies the paper ranks first.
class FgdPublishedVariant : public testing::TestWithParam<std::string> {};

TEST_P(FgdPublishedVariant, MeanOverSeedsMatches) {
  const auto rows = Compare({GetParam()}, {"best-fit", "fgd"}, {42, 43, 44, 45, 46});
  ASSERT_EQ(rows.size(), 2u);
  for (const CompareRow& row : rows) ExpectMatchesPublished(row, /*per_seed=*/false);
}

INSTANTIATE_TEST_SUITE_P(Families, FgdPublishedVariant,
                         testing::Values("default", "cpu050", "gpushare40", "multigpu20",
                                         "gpuspec10"));

// The tie-heavy policies agree with the paper on average (default, seeds 42..46).
TEST(FgdPublished, TieHeavyPoliciesMatchOnAverage) {
  const auto rows = Compare({"default"}, {"dot-product", "gpu-packing"}, {42, 43, 44, 45, 46});
  ASSERT_EQ(rows.size(), 2u);
  for (const CompareRow& row : rows) ExpectMatchesPublished(row, /*per_seed=*/false);
}

// The product's policy allocates at least as much as the paper's FGD on every shipped variant
// (mean over seeds 42..46 of the published values, e.g. 95.40 % on default).
class DefaultPolicyVariant : public testing::TestWithParam<std::string> {};

TEST_P(DefaultPolicyVariant, BeatsPublishedFgd) {
  const auto rows = Compare({GetParam()}, {"default"}, {42, 43, 44, 45, 46});
  ASSERT_EQ(rows.size(), 1u);
  auto published = LoadPublished(kTraceDir);
  ASSERT_TRUE(published.has_value());
  double fgd = 0;
  for (uint64_t seed : {42, 43, 44, 45, 46}) {
    const Curve* c = published->alloc_pct.Find(GetParam(), "fgd", seed);
    ASSERT_NE(c, nullptr);
    fgd += *(*c)[130] / 5;
  }
  ASSERT_TRUE(rows[0].alloc130_mean.has_value());
  EXPECT_GE(*rows[0].alloc130_mean, fgd);
  // The goal on default: at least 96.0 % (FGD: 95.40).
  if (GetParam() == "default") {
    EXPECT_GE(*rows[0].alloc130_mean, 96.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Shipped, DefaultPolicyVariant,
                         testing::Values("default", "cpu050", "gpushare40", "multigpu20",
                                         "gpuspec10"));

}  // namespace
}  // namespace gpupool::sim
