// Tests of the agent's disk_gib enforcement: the du-like measure of a directory (allocated blocks,
// hard links once, symbolic links not followed) and the watch that finds a task past its limit.
#include "agent/disk_watch.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace gpupool::agent {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

class DiskWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpupool-disk-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // A file of `bytes` allocated bytes (written, so every file system allocates them).
  void Write(const std::string& name, size_t bytes) {
    const int fd = open((dir_ + "/" + name).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    const std::string block(1 << 16, 'x');
    for (size_t done = 0; done < bytes; done += block.size()) {
      ASSERT_EQ(write(fd, block.data(), block.size()), static_cast<ssize_t>(block.size()));
    }
    ASSERT_EQ(fsync(fd), 0);
    close(fd);
  }
  int64_t Usage() {
    auto u = DiskUsageBytes(dir_);
    EXPECT_TRUE(u) << u.error().message;
    return u.value_or(-1);
  }
  std::string dir_;
};

// What the watch reports within 10 s (polled: the watch has no event to wait on).
std::vector<DiskWatch::Exceeded> AwaitExceeded(DiskWatch& watch) {
  std::vector<DiskWatch::Exceeded> got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got.empty() && std::chrono::steady_clock::now() < deadline) {
    got = watch.TakeExceeded();
    std::this_thread::sleep_for(milliseconds(10));
  }
  return got;
}

TEST_F(DiskWatchTest, CountsAllocatedBytesHardLinksOnceAndNoSymlinkTargets) {
  const int64_t empty = Usage();
  fs::create_directories(dir_ + "/a/b");
  Write("a/b/data", 4 << 20);
  const int64_t with_data = Usage();
  EXPECT_GE(with_data - empty, 4 << 20);
  EXPECT_LT(with_data - empty, (4 << 20) + (1 << 20));
  // A second name for the same file, and a link to a big file elsewhere, add nothing.
  ASSERT_EQ(link((dir_ + "/a/b/data").c_str(), (dir_ + "/again").c_str()), 0);
  fs::create_symlink("/usr/bin", dir_ + "/bin");
  EXPECT_LT(Usage() - with_data, 64 << 10);
  // A sparse file holds (nearly) nothing.
  const int fd = open((dir_ + "/sparse").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_EQ(ftruncate(fd, int64_t{8} << 30), 0);
  close(fd);
  EXPECT_LT(Usage() - with_data, 1 << 20);
  EXPECT_FALSE(DiskUsageBytes(dir_ + "/missing"));
}

TEST_F(DiskWatchTest, ATaskPastItsLimitIsReportedOnceWithTheReason) {
  DiskWatch watch(milliseconds(20));
  watch.Watch("t-1", {dir_}, 1);
  watch.Watch("t-2", {dir_ + "/a"}, 1);  // missing: counts 0
  EXPECT_TRUE(watch.TakeExceeded().empty());
  // Allocated without writing a gigabyte (what the walk counts is the allocation).
  const int fd = open((dir_ + "/big").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_EQ(posix_fallocate(fd, 0, (off_t{1} << 30) + (8 << 20)), 0);
  close(fd);
  const std::vector<DiskWatch::Exceeded> got = AwaitExceeded(watch);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].task_id, "t-1");
  EXPECT_EQ(got[0].reason.rfind("disk limit of 1 GB exceeded (the workspace holds 1.0", 0), 0u)
      << got[0].reason;
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_TRUE(watch.TakeExceeded().empty()) << "reported once";
}

TEST_F(DiskWatchTest, AVolumePastItsSizeIsReportedForTheTaskWithTheVolumesReason) {
  DiskWatch watch(milliseconds(20));
  fs::create_directories(dir_ + "/v-1");
  watch.Watch("t-1", {dir_ + "/ws"}, 1);
  watch.WatchVolume("t-1", "data", dir_ + "/v-1", 1 << 20);
  std::ofstream(dir_ + "/v-1/f") << std::string(3 << 20, 'x');
  const std::vector<DiskWatch::Exceeded> got = AwaitExceeded(watch);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].task_id, "t-1");
  EXPECT_EQ(got[0].reason.rfind("volume data is over its size of 1.0 MiB (it holds 3.0 MiB", 0), 0u)
      << got[0].reason;
  watch.Forget("t-1");  // the workspace's watch goes with it
}

TEST(DiskLimitReason, SaysTheLimitAndTheUse) {
  EXPECT_EQ(DiskLimitReason(50, (int64_t{50} << 30) + (int64_t{3} << 29)),
            "disk limit of 50 GB exceeded (the workspace holds 51.5 GiB)");
}

}  // namespace
}  // namespace gpupool::agent
