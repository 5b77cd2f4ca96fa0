// Tests for sched/share_plan: the patterns best-fit decreasing makes from typical share sizes,
// which GPU contents follow them, and the plans that are empty.
#include "sched/share_plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace gpupool::sched {
namespace {

TypicalTask ShareTask(int32_t milli, double weight) {
  TypicalTask t;
  t.cpu_milli = 1000;
  t.milli_per_gpu = milli;
  t.gpu_count = 1;
  t.weight = weight;
  return t;
}

TypicalTask WholeTask(int count, double weight) {
  TypicalTask t = ShareTask(kMilliPerGpu, weight);
  t.gpu_count = count;
  return t;
}

using Shares = std::vector<int32_t>;

// 810 (w 0.5), 470 (0.25), 160 (0.25), a sample of 8: four 810, two 470, two 160. Best-fit
// decreasing: each 810 opens a GPU (190 left); the first 470 opens one (530 left), the second
// joins it (60 left); each 160 takes the tightest gap it fits, a 190. Patterns: 810+160 (twice),
// 810 (twice), 470+470. Whole-GPU typical tasks take no part.
TEST(SharePlanTest, BestFitDecreasingPatterns) {
  const std::vector<TypicalTask> typical = {ShareTask(810, 0.5), ShareTask(470, 0.25),
                                            ShareTask(160, 0.25), WholeTask(1, 3.0)};
  const SharePlan plan(typical, 8);
  EXPECT_EQ(plan.patterns(), (std::vector<Shares>{{470, 470}, {810}, {810, 160}}));
  // The default sample makes the same patterns in other numbers.
  EXPECT_EQ(SharePlan(typical).patterns(), plan.patterns());

  EXPECT_TRUE(plan.Follows(Shares{810}));
  EXPECT_TRUE(plan.Follows(Shares{160}));
  EXPECT_TRUE(plan.Follows(Shares{810, 160}));
  EXPECT_TRUE(plan.Follows(Shares{470, 470}));
  EXPECT_FALSE(plan.Follows(Shares{470, 160}));
  EXPECT_FALSE(plan.Follows(Shares{810, 160, 160}));  // more than the pattern holds
  EXPECT_FALSE(plan.Follows(Shares{}));
  EXPECT_FALSE(plan.Follows(Shares{1000}));

  // A 160 joins an 810 (or opens a GPU), never a 470; a 470 joins a 470.
  EXPECT_TRUE(plan.FollowsWith(Shares{810}, 160));
  EXPECT_TRUE(plan.FollowsWith(Shares{}, 160));
  EXPECT_FALSE(plan.FollowsWith(Shares{470}, 160));
  EXPECT_TRUE(plan.FollowsWith(Shares{470}, 470));
  EXPECT_TRUE(plan.FollowsWith(Shares{160}, 810));  // order of arrival does not matter
  EXPECT_FALSE(plan.FollowsWith(Shares{810, 160}, 160));
}

// Best-fit decreasing itself: largest first, each into the GPU it leaves least of.
TEST(SharePlanTest, PackBestFitDecreasing) {
  EXPECT_TRUE(PackBestFitDecreasing({}).empty());
  // 700 opens, 600 opens, 400 fits only beside the 600, 300 fits the 700 exactly, 200 opens.
  EXPECT_EQ(PackBestFitDecreasing({300, 600, 200, 700, 400}),
            (std::vector<Shares>{{700, 300}, {600, 400}, {200}}));
  // 250 goes to the tighter of 500 and 300 left.
  EXPECT_EQ(PackBestFitDecreasing({500, 700, 250}), (std::vector<Shares>{{700, 250}, {500}}));
  EXPECT_EQ(PackBestFitDecreasing({1000, 1000}), (std::vector<Shares>{{1000}, {1000}}));
}

// A size that repeats within a pattern: every count up to the pattern's is a part.
TEST(SharePlanTest, RepeatedSizes) {
  const SharePlan plan(std::vector<TypicalTask>{ShareTask(230, 1.0)});
  EXPECT_EQ(plan.patterns(), (std::vector<Shares>{{230, 230, 230, 230}}));
  for (size_t k = 1; k <= 4; ++k) EXPECT_TRUE(plan.Follows(Shares(k, 230))) << k;
  EXPECT_FALSE(plan.Follows(Shares(5, 230)));
  EXPECT_TRUE(plan.FollowsWith(Shares(3, 230), 230));
  EXPECT_FALSE(plan.FollowsWith(Shares(4, 230), 230));
}

// Weights set the mix: with 650 three times as frequent as 320, best-fit decreasing pairs every
// 320 with a 650 and leaves the other 650s alone (a 650 does not fit beside a 650).
TEST(SharePlanTest, WeightsSetTheMix) {
  const SharePlan plan(std::vector<TypicalTask>{ShareTask(650, 0.75), ShareTask(320, 0.25)}, 40);
  EXPECT_EQ(plan.patterns(), (std::vector<Shares>{{650}, {650, 320}}));
  EXPECT_FALSE(plan.FollowsWith(Shares{320}, 320));
  // Equal weights: every 650 gets a 320.
  const SharePlan equal(std::vector<TypicalTask>{ShareTask(650, 0.5), ShareTask(320, 0.5)}, 40);
  EXPECT_EQ(equal.patterns(), (std::vector<Shares>{{650, 320}}));
  // 650 rarer (10 and 30 of 40): ten pairs, and the twenty 320s left go three to a GPU, the last
  // two together.
  const SharePlan few(std::vector<TypicalTask>{ShareTask(650, 0.25), ShareTask(320, 0.75)}, 40);
  EXPECT_EQ(few.patterns(), (std::vector<Shares>{{320, 320}, {320, 320, 320}, {650, 320}}));
  EXPECT_TRUE(few.FollowsWith(Shares{320, 320}, 320));
}

// No share among the typical tasks: nothing follows the plan.
TEST(SharePlanTest, EmptyPlans) {
  const SharePlan none(std::vector<TypicalTask>{WholeTask(1, 0.5), WholeTask(8, 0.5)});
  EXPECT_TRUE(none.patterns().empty());
  EXPECT_FALSE(none.Follows(Shares{500}));
  EXPECT_FALSE(none.FollowsWith(Shares{}, 500));
  EXPECT_TRUE(SharePlan().patterns().empty());
  EXPECT_FALSE(SharePlan(std::vector<TypicalTask>{}).FollowsWith(Shares{}, 100));
}

}  // namespace
}  // namespace gpupool::sched
