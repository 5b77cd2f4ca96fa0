#include "os/chunk_dir.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "os/sha256.h"

namespace gpupool::os {
namespace {

namespace fs = std::filesystem;

class ChunkDirTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(testing::TempDir()) / "chunk_dir_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    base_ = tmpl;
  }
  void TearDown() override { fs::remove_all(base_); }
  std::string base_;
};

TEST_F(ChunkDirTest, StoresByHashOnceAndReadsBack) {
  ChunkDir dir(base_ + "/store/project-1");  // made, parents included, at the first Put
  const std::string bytes = "some chunk bytes";
  const std::string sha = Sha256Hex(bytes);
  EXPECT_FALSE(dir.Has(sha));
  Result<bool> first = dir.Put(sha, bytes);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_TRUE(*first);
  Result<bool> again = dir.Put(sha, bytes);
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again);  // already here
  EXPECT_TRUE(dir.Has(sha));
  Result<std::string> read = dir.Get(sha);
  ASSERT_TRUE(read);
  EXPECT_EQ(*read, bytes);
  EXPECT_EQ(dir.PathOf(sha), base_ + "/store/project-1/" + sha.substr(0, 2) + "/" + sha);
  ASSERT_TRUE(dir.Sync());
  std::set<std::string> listed;
  ASSERT_TRUE(dir.ForEach([&](const ChunkDir::Entry& e) {
    listed.insert(e.sha256);
    EXPECT_EQ(e.size, static_cast<int64_t>(bytes.size()));
    EXPECT_GT(e.mtime_ms, 0);
  }));
  EXPECT_EQ(listed, std::set<std::string>{sha});
  ASSERT_TRUE(dir.Remove(sha));
  EXPECT_FALSE(dir.Has(sha));
  EXPECT_EQ(dir.Get(sha).error().code, ErrorCode::kNotFound);
}

TEST_F(ChunkDirTest, RefusesBytesThatDoNotMatchTheirName) {
  ChunkDir dir(base_ + "/chunks");
  const std::string sha = Sha256Hex("the right bytes");
  Result<bool> put = dir.Put(sha, "other bytes");
  ASSERT_FALSE(put);
  EXPECT_EQ(put.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(dir.Has(sha));
  EXPECT_FALSE(dir.Put("not-a-digest", "x"));
}

TEST_F(ChunkDirTest, ACorruptedChunkIsNeverReturned) {
  ChunkDir dir(base_ + "/chunks");
  const std::string sha = Sha256Hex("original");
  ASSERT_TRUE(dir.Put(sha, "original"));
  std::ofstream(dir.PathOf(sha), std::ios::trunc) << "tampered";
  Result<std::string> got = dir.Get(sha);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, ErrorCode::kInternal);
  EXPECT_NE(got.error().message.find("corrupt"), std::string::npos) << got.error().message;
}

TEST_F(ChunkDirTest, TrimDeletesTheLeastRecentlyUsedFirst) {
  ChunkDir dir(base_ + "/cache");
  std::vector<std::string> shas;
  for (int i = 0; i < 4; ++i) {
    const std::string bytes(1000, static_cast<char>('a' + i));
    shas.push_back(Sha256Hex(bytes));
    ASSERT_TRUE(dir.Put(shas.back(), bytes));
    // Oldest first: chunk i was used at second i.
    const timespec times[2] = {{i, 0}, {i, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, dir.PathOf(shas.back()).c_str(), times, 0), 0);
  }
  ASSERT_TRUE(dir.Get(shas[0]));  // used now: the most recent
  Result<int64_t> freed = dir.Trim(2500);
  ASSERT_TRUE(freed);
  EXPECT_EQ(*freed, 2000);
  EXPECT_TRUE(dir.Has(shas[0]));
  EXPECT_FALSE(dir.Has(shas[1]));
  EXPECT_FALSE(dir.Has(shas[2]));
  EXPECT_TRUE(dir.Has(shas[3]));
  EXPECT_EQ(*dir.Trim(2500), 0);  // under the limit: nothing more
}

}  // namespace
}  // namespace gpupool::os
