// Volumes' names, ids and mounts (core/volume.h).
#include "core/volume.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(VolumeTest, NamesAreLowerCaseWordsAndNeverAnIdsForm) {
  EXPECT_TRUE(ValidateVolumeName("data"));
  EXPECT_TRUE(ValidateVolumeName("imagenet-2012.v2_train"));
  EXPECT_TRUE(ValidateVolumeName(std::string(63, 'a')));
  for (const char* bad : {"", "Data", "-data", "da ta", "v-12", "ä"}) {
    const Status s = ValidateVolumeName(bad);
    ASSERT_FALSE(s) << bad;
    EXPECT_NE(s.error().message.find("name"), std::string::npos) << s.error().message;
  }
  EXPECT_FALSE(ValidateVolumeName(std::string(64, 'a')));
  EXPECT_TRUE(IsVolumeId("v-12"));
  EXPECT_FALSE(IsVolumeId("v-"));
  EXPECT_FALSE(IsVolumeId("v-1a"));
}

TEST(VolumeTest, AMountIsANameAPathBelowTheWorkspaceAndAMode) {
  Result<VolumeMount> m = ParseVolumeMount("data:/root/data/");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->name, "data");
  EXPECT_EQ(m->path, "/root/data");
  EXPECT_FALSE(m->read_only);
  m = ParseVolumeMount("imagenet:in/train:ro");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->path, "/root/in/train");
  EXPECT_TRUE(m->read_only);
  m = ParseVolumeMount("v-3:/root/x:rw");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->name, "v-3");

  EXPECT_NE(ParseVolumeMount("data").error().message.find("needs a path"), std::string::npos);
  EXPECT_NE(ParseVolumeMount("data:/root").error().message.find("whole workspace"),
            std::string::npos);
  EXPECT_NE(ParseVolumeMount("data:/etc/x").error().message.find("outside the task's workspace"),
            std::string::npos);
  EXPECT_NE(ParseVolumeMount("data:/root/x:rx").error().message.find("neither ro nor rw"),
            std::string::npos);
  // The same words as the SDK's and the console's checks (sdk/python/gpupool/volumes.py,
  // web/src/lib/volumes.ts).
  EXPECT_EQ(ParseVolumeMount("Data:/root/x").error().message,
            "volume 'Data' must start with a lower-case letter or a digit");
  EXPECT_EQ(ParseVolumeMount("da ta:/root/x").error().message,
            "volume 'da ta' may hold only lower-case letters, digits, '_', '.' and '-'");
}

TEST(VolumeTest, ATasksMountsAreDistinctAndNeverNested) {
  auto mount = [](std::string name, std::string path) {
    return VolumeMount{.volume_id = "", .name = std::move(name), .path = std::move(path)};
  };
  EXPECT_TRUE(ValidateVolumeMounts({mount("a", "/root/a"), mount("b", "/root/ab")}));
  Status twice = ValidateVolumeMounts({mount("a", "/root/a"), mount("a", "/root/b")});
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().message, "volumes[1].volume 'a' is mounted twice");
  Status nested = ValidateVolumeMounts({mount("a", "/root/a"), mount("b", "/root/a/b")});
  ASSERT_FALSE(nested);
  EXPECT_EQ(nested.error().message, "volumes[1].path /root/a/b overlaps volumes[0].path /root/a");
  Status odd = ValidateVolumeMounts({mount("a", "/root/a/")});
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.error().message.find("volumes[0].path"), std::string::npos);
  std::vector<VolumeMount> many;
  for (int i = 0; i <= 16; ++i) {
    many.push_back(mount("v" + std::to_string(i), "/root/v" + std::to_string(i)));
  }
  EXPECT_FALSE(ValidateVolumeMounts(many));
}

}  // namespace
}  // namespace gpupool
