// Datasets' names, ids, versions and mounts (core/dataset.h).
#include "core/dataset.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(DatasetTest, NamesFollowVolumesRulesAndAreNeverAnIdsForm) {
  EXPECT_TRUE(ValidateDatasetName("imagenet-2012"));
  EXPECT_TRUE(ValidateDatasetName("v-1"));  // a volume id's form is a fine dataset name
  for (const char* bad : {"", "ImageNet", "-x", "d-12", "a b"}) {
    const Status s = ValidateDatasetName(bad);
    ASSERT_FALSE(s) << bad;
    EXPECT_NE(s.error().message.find("name"), std::string::npos) << s.error().message;
  }
  EXPECT_TRUE(IsDatasetId("d-7"));
  EXPECT_FALSE(IsDatasetId("d-"));
  EXPECT_FALSE(IsDatasetId("v-7"));
  EXPECT_EQ(DatasetId(7), "d-7");
}

TEST(DatasetTest, TheVersionIsTheNumberedOneOrTheLatest) {
  Dataset d;
  EXPECT_EQ(d.Version(0), nullptr);
  d.versions = {{.version = 1, .manifest = "a"}, {.version = 3, .manifest = "c"}};
  EXPECT_EQ(d.Version(0)->manifest, "c");
  EXPECT_EQ(d.Version(1)->manifest, "a");
  EXPECT_EQ(d.Version(2), nullptr);
}

TEST(DatasetTest, AMountIsANameAnOptionalVersionAndAPathBelowTheWorkspace) {
  Result<DatasetMount> m = ParseDatasetMount("imagenet:/root/data/");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->name, "imagenet");
  EXPECT_EQ(m->version, 0);
  EXPECT_EQ(m->path, "/root/data");
  m = ParseDatasetMount("d-4@12:in:ro");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->name, "d-4");
  EXPECT_EQ(m->version, 12);
  EXPECT_EQ(m->path, "/root/in");
  for (const char* bad : {"imagenet", "imagenet@0:/root/d", "imagenet@x:/root/d",
                          "imagenet@:/root/d", "Bad:/root/d", "imagenet:/root", "imagenet:/etc"}) {
    EXPECT_FALSE(ParseDatasetMount(bad)) << bad;
  }
}

TEST(DatasetTest, MountsMayNotRepeatADatasetOrOverlapEachOtherOrVolumes) {
  const std::vector<VolumeMount> volumes = {{.name = "scratch", .path = "/root/out"}};
  EXPECT_TRUE(ValidateDatasetMounts(
      {{.name = "a", .path = "/root/a"}, {.name = "b", .version = 2, .path = "/root/b"}}, volumes));
  auto error = [&](const std::vector<DatasetMount>& mounts) {
    const Status s = ValidateDatasetMounts(mounts, volumes);
    return s ? std::string() : s.error().message;
  };
  EXPECT_NE(error({{.name = "a", .path = "/root/a"}, {.name = "a", .path = "/root/b"}})
                .find("datasets[1].dataset 'a' is mounted twice"),
            std::string::npos);
  EXPECT_NE(error({{.name = "a", .path = "/root/a"}, {.name = "b", .path = "/root/a/b"}})
                .find("overlaps datasets[0].path"),
            std::string::npos);
  EXPECT_NE(error({{.name = "a", .path = "/root/out/a"}}).find("overlaps volumes[0].path"),
            std::string::npos);
  EXPECT_NE(error({{.name = "a", .path = "/root/a/"}}).find("not canonical"), std::string::npos);
  EXPECT_NE(error({{.name = "a", .version = -1, .path = "/root/a"}}).find("datasets[0].version"),
            std::string::npos);
  EXPECT_FALSE(ValidateDatasetMounts(std::vector<DatasetMount>(kMaxDatasetMounts + 1), {}));
  // A path that only shares a prefix is not below another.
  EXPECT_TRUE(ValidateDatasetMounts({{.name = "a", .path = "/root/outs"}}, volumes));
}

}  // namespace
}  // namespace gpupool
