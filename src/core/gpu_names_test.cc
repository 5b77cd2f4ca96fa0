// GPU model names as people write them resolve to catalog models; a task's models are checked
// against the pool's (gpu_names.h).
#include "core/gpu_names.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

using Names = std::vector<std::string>;

TEST(GpuNamesTest, WhatPeopleWriteNamesCatalogModels) {
  EXPECT_EQ(CatalogModelsNamed("RTX 3090"), Names{"RTX3090"});
  EXPECT_EQ(CatalogModelsNamed("3090"), Names{"RTX3090"});
  EXPECT_EQ(CatalogModelsNamed("rtx3090"), Names{"RTX3090"});
  EXPECT_EQ(CatalogModelsNamed("NVIDIA GeForce RTX 4090"), Names{"RTX4090"});
  EXPECT_EQ(CatalogModelsNamed("A100 80GB"), Names{"A100-80GB"});
  EXPECT_EQ(CatalogModelsNamed("a100-80gb"), Names{"A100-80GB"});
  EXPECT_EQ(CatalogModelsNamed("H100"), Names{"H100-80GB"});
  EXPECT_EQ(CatalogModelsNamed("Tesla T4"), Names{"T4"});
  const Names a100 = CatalogModelsNamed("A100");
  EXPECT_EQ(a100, (Names{"A100-40GB", "A100-80GB"}));
}

TEST(GpuNamesTest, ANameOfNoModelNamesNone) {
  EXPECT_TRUE(CatalogModelsNamed("foo").empty());
  EXPECT_TRUE(CatalogModelsNamed("G2").empty());
  EXPECT_TRUE(CatalogModelsNamed("").empty());
  EXPECT_TRUE(CatalogModelsNamed("A10 0").size() == 2) << "blanks do not count";
  EXPECT_TRUE(CatalogModelsNamed("100").empty()) << "only RTX models go by their number";
}

TEST(GpuNamesTest, ExpandKeepsOpaqueNamesAndDropsDuplicates) {
  EXPECT_EQ(ExpandGpuModelNames({"A100", "a100-80gb", "G2"}),
            (Names{"A100-40GB", "A100-80GB", "G2"}));
}

TEST(GpuNamesTest, TheModelsAreCheckedAgainstThePool) {
  const std::set<std::string> pool = {"A100-80GB", "G2"};
  EXPECT_TRUE(CheckGpuModelsInPool({"A100-40GB", "A100-80GB"}, pool));
  EXPECT_TRUE(CheckGpuModelsInPool({"G2"}, pool)) << "an opaque model some node has";
  EXPECT_TRUE(CheckGpuModelsInPool({}, pool));
  EXPECT_EQ(CheckGpuModelsInPool({"foo"}, pool).error().message,
            "gpu_models: 'foo' is not a GPU model of this pool (it has A100-80GB, G2)");
  EXPECT_EQ(CheckGpuModelsInPool({"H100-80GB"}, pool).error().message,
            "gpu_models: no node of this pool has H100-80GB (it has A100-80GB, G2)");
  // Before any node joined, catalog models are taken on trust; unknown names are not.
  EXPECT_TRUE(CheckGpuModelsInPool({"H100-80GB"}, {}));
  EXPECT_EQ(CheckGpuModelsInPool({"foo"}, {}).error().message,
            "gpu_models: 'foo' is not a GPU model of this pool (it has no GPU node yet)");
}

TEST(GpuNamesTest, AMigProfileIsCheckedAgainstThePoolsGpus) {
  EXPECT_TRUE(CheckMigProfileInPool("3g.40gb", {}, {"A100-80GB", "T4"}));
  EXPECT_TRUE(CheckMigProfileInPool("1g.5gb", {}, {})) << "no GPU node yet: taken on trust";
  const std::string message =
      CheckMigProfileInPool("1g.5gb", {}, {"A100-80GB", "T4"}).error().message;
  EXPECT_EQ(message.rfind("mig_profile '1g.5gb' is not offered by this pool's GPUs (they offer "
                          "1g.10gb, ",
                          0),
            0u)
      << message;
  EXPECT_NE(message.find(" on A100-80GB)"), std::string::npos) << message;
  EXPECT_EQ(CheckMigProfileInPool("1g.10gb", {}, {"T4"}).error().message,
            "mig_profile '1g.10gb' is not offered by this pool's GPUs (none of them is "
            "MIG-capable)");
  EXPECT_FALSE(CheckMigProfileInPool("3g.40gb", {"T4"}, {"A100-80GB", "T4"}))
      << "only the allowed models count";
}

}  // namespace
}  // namespace gpupool
