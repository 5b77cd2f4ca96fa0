// Tests for server/task_files (DiskTaskFiles on a temp dir): chunked uploads committed and read
// back, resuming at the received offset (also after a restart), starting over, hash mismatches,
// size and count limits (declared sizes refused at the first chunk), file/directory conflicts,
// listings, stale hashes, removal, the expiry of abandoned uploads and projects' storage quotas.
#include "server/task_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "os/sha256.h"

namespace gpupool::server {
namespace {

namespace fs = std::filesystem;

std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(gen() & 0xFF);
  return s;
}

class TaskFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "task-files-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    Reopen();
  }
  void TearDown() override {
    files_.reset();
    fs::remove_all(root_);
  }

  void Reopen() {
    files_.reset();
    auto f = DiskTaskFiles::Open(root_, options_);
    ASSERT_TRUE(f) << f.error().message;
    files_ = std::move(*f);
  }

  // Uploads `data` in chunks of `chunk` bytes and commits it.
  Result<StoredFile> Put(const std::string& task, const std::string& path, const std::string& data,
                         size_t chunk = 1000) {
    for (size_t off = 0; off < data.size(); off += chunk) {
      auto r = files_->Append(task, path, static_cast<int64_t>(off), data.substr(off, chunk),
                              std::nullopt);
      if (!r) return tl::unexpected(r.error());
    }
    return files_->Commit(task, path, static_cast<int64_t>(data.size()), os::Sha256Hex(data));
  }

  std::string ReadAll(const std::string& task, const std::string& path) {
    std::string out;
    while (true) {
      auto c = files_->Read(task, path, static_cast<int64_t>(out.size()), 777);
      EXPECT_TRUE(c) << c.error().message;
      if (!c || c->bytes.empty()) return out;
      out += c->bytes;
    }
  }

  std::string root_;
  TaskFilesOptions options_;
  std::unique_ptr<DiskTaskFiles> files_;
};

TEST_F(TaskFilesTest, ChunkedUploadIsCommittedListedAndReadBack) {
  const std::string data = RandomBytes(10'000, 1);
  auto stored = Put("t-1", "in/data.bin", data);
  ASSERT_TRUE(stored) << stored.error().message;
  EXPECT_EQ(stored->sha256, os::Sha256Hex(data));
  EXPECT_EQ(ReadAll("t-1", "in/data.bin"), data);

  auto chunk = files_->Read("t-1", "in/data.bin", 9'990, 100);
  ASSERT_TRUE(chunk);
  EXPECT_EQ(chunk->bytes, data.substr(9'990));
  EXPECT_EQ(chunk->size, 10'000);
  EXPECT_EQ(chunk->sha256, os::Sha256Hex(data));
  auto past = files_->Read("t-1", "in/data.bin", 10'001, 1);
  ASSERT_FALSE(past);
  EXPECT_NE(past.error().message.find("offset 10001 is past the end of 'in/data.bin'"),
            std::string::npos);

  auto listing = files_->List("t-1", "");
  ASSERT_TRUE(listing);
  EXPECT_TRUE(listing->is_dir);
  ASSERT_EQ(listing->files.size(), 1u);
  EXPECT_EQ(listing->files[0].path, "in/data.bin");
  EXPECT_EQ(listing->files[0].size, 10'000);
  EXPECT_EQ(listing->files[0].sha256, os::Sha256Hex(data));
  EXPECT_EQ(*files_->Received("t-1", "in/data.bin"), 0) << "committed: nothing in progress";
}

TEST_F(TaskFilesTest, AnUploadResumesAtTheOffsetReceivedEvenAfterARestart) {
  const std::string data = RandomBytes(5'000, 2);
  ASSERT_TRUE(files_->Append("t-1", "a.bin", 0, data.substr(0, 2'000), std::nullopt));
  EXPECT_EQ(*files_->Received("t-1", "a.bin"), 2'000);

  auto wrong = files_->Append("t-1", "a.bin", 1'000, data.substr(1'000, 1'000), std::nullopt);
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(wrong.error().message.find("has received 2000 bytes; continue with offset=2000"),
            std::string::npos)
      << wrong.error().message;

  Reopen();  // the running hash is gone: the commit hashes the file
  EXPECT_EQ(*files_->Received("t-1", "a.bin"), 2'000);
  ASSERT_TRUE(files_->Append("t-1", "a.bin", 2'000, data.substr(2'000), std::nullopt));
  auto stored = files_->Commit("t-1", "a.bin", 5'000, os::Sha256Hex(data));
  ASSERT_TRUE(stored) << stored.error().message;
  EXPECT_EQ(ReadAll("t-1", "a.bin"), data);
}

TEST_F(TaskFilesTest, OffsetZeroStartsOver) {
  ASSERT_TRUE(files_->Append("t-1", "a", 0, "garbage that is long", std::nullopt));
  ASSERT_TRUE(files_->Append("t-1", "a", 0, "good", std::nullopt));
  EXPECT_EQ(*files_->Received("t-1", "a"), 4);
  ASSERT_TRUE(files_->Commit("t-1", "a", 4, os::Sha256Hex("good")));
  EXPECT_EQ(ReadAll("t-1", "a"), "good");
}

TEST_F(TaskFilesTest, AHashMismatchNamesBothHashesAndDiscardsTheUpload) {
  ASSERT_TRUE(files_->Append("t-1", "a", 0, "actual bytes", std::nullopt));
  const std::string claimed = os::Sha256Hex("other bytes");
  auto r = files_->Commit("t-1", "a", 12, claimed);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("the commit says " + claimed), std::string::npos);
  EXPECT_NE(r.error().message.find("hash to " + os::Sha256Hex("actual bytes")), std::string::npos);
  EXPECT_EQ(*files_->Received("t-1", "a"), 0);
  EXPECT_FALSE(files_->List("t-1", "a")) << "nothing was stored";
}

TEST_F(TaskFilesTest, ACommitBeforeEveryByteArrivedKeepsWhatWasReceived) {
  ASSERT_TRUE(files_->Append("t-1", "a", 0, "half", std::nullopt));
  auto r = files_->Commit("t-1", "a", 8, os::Sha256Hex("halfhalf"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(r.error().message.find("has received 4 of its 8 bytes; continue with offset=4"),
            std::string::npos)
      << r.error().message;
  ASSERT_TRUE(files_->Append("t-1", "a", 4, "half", std::nullopt));
  EXPECT_TRUE(files_->Commit("t-1", "a", 8, os::Sha256Hex("halfhalf")));

  auto none = files_->Commit("t-1", "b", 3, os::Sha256Hex("abc"));
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("no upload of 'b' to task t-1 is in progress"),
            std::string::npos);
}

TEST_F(TaskFilesTest, AnEmptyFileNeedsNoBytes) {
  auto r = files_->Commit("t-1", "empty", 0, os::Sha256Hex(""));
  ASSERT_TRUE(r) << r.error().message;
  auto listing = files_->List("t-1", "empty");
  ASSERT_TRUE(listing);
  EXPECT_FALSE(listing->is_dir);
  ASSERT_EQ(listing->files.size(), 1u);
  EXPECT_EQ(listing->files[0].size, 0);
  EXPECT_EQ(ReadAll("t-1", "empty"), "");
}

TEST_F(TaskFilesTest, PerFileAndPerTaskLimitsNameTheLimit) {
  options_.max_file_bytes = 1'000;
  options_.max_task_bytes = 1'500;
  options_.max_files = 3;
  Reopen();
  auto big = files_->Append("t-1", "big", 0, std::string(1'001, 'x'), std::nullopt);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(big.error().message.find("'big' would be 1001 bytes; the limit is 1000 bytes per file"),
            std::string::npos)
      << big.error().message;

  ASSERT_TRUE(Put("t-1", "a", std::string(1'000, 'a')));
  // An unfinished upload counts too.
  ASSERT_TRUE(files_->Append("t-1", "b", 0, std::string(400, 'b'), std::nullopt));
  auto over = files_->Append("t-1", "b", 400, std::string(200, 'b'), std::nullopt);
  ASSERT_FALSE(over);
  EXPECT_NE(over.error().message.find("would take 1600 bytes; the limit is 1500 bytes per task"),
            std::string::npos)
      << over.error().message;
  // Starting over frees what the upload held; replacing a file frees the old one at commit.
  ASSERT_TRUE(files_->Append("t-1", "b", 0, std::string(100, 'b'), std::nullopt));
  ASSERT_TRUE(files_->Commit("t-1", "b", 100, os::Sha256Hex(std::string(100, 'b'))));
  ASSERT_TRUE(Put("t-1", "a", std::string(300, 'A')));
  EXPECT_TRUE(Put("t-1", "c", std::string(1'000, 'c')));  // 300 + 100 + 1000

  auto many = Put("t-1", "d", "");
  ASSERT_FALSE(many);
  EXPECT_NE(many.error().message.find("task t-1 has 3 files; the limit is 3 per task"),
            std::string::npos)
      << many.error().message;

  // After a restart the usage is counted from the disk.
  Reopen();
  auto again = files_->Append("t-1", "e", 0, std::string(200, 'e'), std::nullopt);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kResourceExhausted);
}

TEST_F(TaskFilesTest, ADeclaredSizeOverALimitIsRefusedAtTheFirstChunkAndDropsTheUpload) {
  options_.max_file_bytes = 1'000;
  options_.max_task_bytes = 1'500;
  Reopen();
  auto big = files_->Append("t-1", "big", 0, "x", int64_t{1'001});
  ASSERT_FALSE(big) << "refused from its size, not once 1001 bytes arrived";
  EXPECT_EQ(big.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(big.error().message.find("'big' would be 1001 bytes; the limit is 1000 bytes per file"),
            std::string::npos)
      << big.error().message;

  ASSERT_TRUE(Put("t-1", "a", std::string(1'000, 'a')));
  ASSERT_TRUE(files_->Append("t-1", "b", 0, std::string(300, 'b'), int64_t{400}));
  auto over = files_->Append("t-1", "b", 300, std::string(10, 'b'), int64_t{501});
  ASSERT_FALSE(over);
  EXPECT_NE(over.error().message.find("would take 1501 bytes; the limit is 1500 bytes per task"),
            std::string::npos)
      << over.error().message;
  EXPECT_EQ(*files_->Received("t-1", "b"), 0) << "a refused upload keeps nothing";
  EXPECT_FALSE(fs::exists(root_ + "/tasks/t-1/partial/" + os::Sha256Hex("b")));
  EXPECT_TRUE(Put("t-1", "c", std::string(500, 'c'))) << "and what it held is free again";

  auto past = files_->Append("t-1", "d", 0, "12345", int64_t{4});
  ASSERT_FALSE(past);
  EXPECT_EQ(past.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(past.error().message.find("'d' ends at byte 5, past the declared size=4"),
            std::string::npos)
      << past.error().message;
}

TEST_F(TaskFilesTest, AbandonedUploadsExpireAndFreeWhatTheyHeld) {
  options_.max_task_bytes = 1'500;
  Reopen();
  ASSERT_TRUE(files_->Append("t-1", "old", 0, std::string(1'000, 'o'), std::nullopt));
  ASSERT_TRUE(files_->Append("t-2", "new", 0, std::string(10, 'n'), std::nullopt));
  // The old upload last received a byte two hours ago.
  const std::string old_partial = root_ + "/tasks/t-1/partial/" + os::Sha256Hex("old");
  const timespec two_hours_ago{::time(nullptr) - 7200, 0};
  const timespec times[2] = {two_hours_ago, two_hours_ago};
  ASSERT_EQ(::utimensat(AT_FDCWD, old_partial.c_str(), times, 0), 0);
  ASSERT_FALSE(files_->Append("t-1", "x", 0, std::string(600, 'x'), std::nullopt))
      << "the old upload still counts";

  const int64_t hour_ago_ms = (static_cast<int64_t>(::time(nullptr)) - 3600) * 1000;
  EXPECT_EQ(files_->ExpireUploads(hour_ago_ms), 1);
  EXPECT_FALSE(fs::exists(old_partial));
  EXPECT_EQ(*files_->Received("t-1", "old"), 0);
  EXPECT_EQ(*files_->Received("t-2", "new"), 10) << "a recent upload stays";
  EXPECT_TRUE(files_->Append("t-1", "x", 0, std::string(600, 'x'), std::nullopt))
      << "what the expired upload held is free again";
  EXPECT_EQ(files_->ExpireUploads(hour_ago_ms), 0);
}

TEST_F(TaskFilesTest, ForgettingATaskKeepsItsFilesAndItsUsageIsCountedAgain) {
  options_.max_task_bytes = 1'500;
  Reopen();
  ASSERT_TRUE(Put("t-1", "a", std::string(1'000, 'a')));
  ASSERT_TRUE(files_->Append("t-1", "b", 0, std::string(100, 'b'), std::nullopt));
  files_->Forget("t-1");
  EXPECT_EQ(ReadAll("t-1", "a"), std::string(1'000, 'a'));
  EXPECT_EQ(*files_->Received("t-1", "b"), 100) << "an unfinished upload stays on disk";
  auto over = files_->Append("t-1", "c", 0, std::string(401, 'c'), std::nullopt);
  ASSERT_FALSE(over) << "the usage was counted again from the disk";
  EXPECT_EQ(over.error().code, ErrorCode::kResourceExhausted);
  ASSERT_TRUE(files_->Append("t-1", "b", 100, std::string(50, 'b'), std::nullopt));
  EXPECT_TRUE(files_->Commit("t-1", "b", 150, os::Sha256Hex(std::string(150, 'b'))))
      << "the upload's hash is recomputed from the file";
}

// Issue 11 finding 3/4: a project's storage quota covers the files and unfinished uploads of all
// its tasks together, is checked against a declared size at the first chunk, is freed by
// removals, expiries and replacements, and survives a restart (the bytes are counted again and
// each task's project is recorded in its directory).
TEST_F(TaskFilesTest, AProjectsStorageQuotaCoversAllItsTasksFilesAndUnfinishedUploads) {
  const StorageQuota p1{"p-1", 10'000};
  auto put = [&](const std::string& task, const std::string& path, const std::string& data,
                 const StorageQuota& quota) -> Result<StoredFile> {
    auto r = files_->Append(task, path, 0, data, static_cast<int64_t>(data.size()), quota);
    if (!r) return tl::unexpected(r.error());
    return files_->Commit(task, path, static_cast<int64_t>(data.size()), os::Sha256Hex(data));
  };
  ASSERT_TRUE(put("t-1", "a.bin", RandomBytes(4'000, 1), p1));
  // An unfinished upload of another task of the project counts too.
  ASSERT_TRUE(files_->Append("t-2", "b.bin", 0, RandomBytes(3'000, 2), int64_t{5'000}, p1));
  EXPECT_EQ(files_->ProjectBytes("p-1"), 7'000);
  // Another project's tasks are not counted against it.
  ASSERT_TRUE(put("t-9", "c.bin", RandomBytes(9'000, 9), StorageQuota{"p-2", 10'000}));
  EXPECT_EQ(files_->ProjectBytes("p-2"), 9'000);

  // 4,000 + 3,000 received + 4,000 declared: refused at its first chunk, naming the quota.
  auto over = files_->Append("t-3", "d.bin", 0, "x", int64_t{4'000}, p1);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(over.error().message.find("project p-1's files would take 11000 bytes; its storage "
                                      "quota is 10000 bytes"),
            std::string::npos)
      << over.error().message;
  EXPECT_EQ(files_->ProjectBytes("p-1"), 7'000) << "the refused upload kept nothing";
  // The unfinished upload goes on to its declared size: its rest was room it already had.
  ASSERT_TRUE(files_->Append("t-2", "b.bin", 3'000, RandomBytes(2'000, 3), int64_t{5'000}, p1));
  EXPECT_EQ(files_->ProjectBytes("p-1"), 9'000);
  // A chunk past the quota without a declared size is refused too, and drops its upload.
  ASSERT_TRUE(files_->Append("t-3", "e.bin", 0, RandomBytes(500, 4), std::nullopt, p1));
  auto chunk = files_->Append("t-3", "e.bin", 500, RandomBytes(1'000, 5), std::nullopt, p1);
  ASSERT_FALSE(chunk);
  EXPECT_EQ(chunk.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(files_->ProjectBytes("p-1"), 9'000);

  // A restart counts the same bytes against the same projects.
  Reopen();
  EXPECT_EQ(files_->ProjectBytes("p-1"), 9'000);
  EXPECT_EQ(files_->ProjectBytes("p-2"), 9'000);
  EXPECT_FALSE(files_->Append("t-3", "d.bin", 0, "x", int64_t{1'001}, p1));
  // Replacing a file counts only the difference; removing a task frees what it kept.
  ASSERT_TRUE(put("t-1", "a.bin", RandomBytes(1'000, 6), p1));
  EXPECT_EQ(files_->ProjectBytes("p-1"), 6'000);
  files_->Remove("t-2");
  EXPECT_EQ(files_->ProjectBytes("p-1"), 1'000);
  ASSERT_TRUE(put("t-3", "d.bin", RandomBytes(9'000, 7), p1));
  EXPECT_EQ(files_->ProjectBytes("p-1"), 10'000);
  // Without a quota (-1) nothing is refused, but the bytes still count.
  ASSERT_TRUE(put("t-4", "f.bin", RandomBytes(2'000, 8), StorageQuota{"p-1", -1}));
  EXPECT_EQ(files_->ProjectBytes("p-1"), 12'000);
}

TEST_F(TaskFilesTest, AFileAndADirectoryCannotShareAPath) {
  ASSERT_TRUE(Put("t-1", "a/b", "x"));
  auto file_over_dir = files_->Append("t-1", "a", 0, "y", std::nullopt);
  ASSERT_FALSE(file_over_dir);
  EXPECT_EQ(file_over_dir.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(file_over_dir.error().message.find("has a directory 'a'"), std::string::npos);
  auto below_file = files_->Append("t-1", "a/b/c", 0, "y", std::nullopt);
  ASSERT_FALSE(below_file);
  EXPECT_NE(below_file.error().message.find("has a file 'a/b', so 'a/b/c' cannot be created"),
            std::string::npos)
      << below_file.error().message;
}

TEST_F(TaskFilesTest, ListingsAreRecursiveSortedAndScoped) {
  auto empty = files_->List("t-1", "");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->is_dir);
  EXPECT_TRUE(empty->files.empty());

  for (const std::string p : {"z", "d/2", "d/1", "d/e/3", "dd"}) ASSERT_TRUE(Put("t-1", p, p));
  auto all = files_->List("t-1", "");
  ASSERT_TRUE(all);
  std::vector<std::string> paths;
  for (const StoredFile& f : all->files) paths.push_back(f.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"d/1", "d/2", "d/e/3", "dd", "z"}));

  auto sub = files_->List("t-1", "d");
  ASSERT_TRUE(sub);
  EXPECT_TRUE(sub->is_dir);
  EXPECT_EQ(sub->files.size(), 3u);

  auto missing = files_->List("t-1", "nope/x");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("task t-1 has no file or directory 'nope/x'"),
            std::string::npos);
  auto dir_read = files_->Read("t-1", "d", 0, 10);
  ASSERT_FALSE(dir_read);
  EXPECT_EQ(dir_read.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(files_->List("t-2", "")->files.empty()) << "tasks do not see each other's files";
}

TEST_F(TaskFilesTest, PathsThatLeaveTheWorkspaceAreRefused) {
  for (const std::string p : {"../x", "/etc/passwd", "a/../../b", "a//b"}) {
    auto r = files_->Append("t-1", p, 0, "x", std::nullopt);
    ASSERT_FALSE(r) << p;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << p;
    EXPECT_FALSE(files_->List("t-1", p)) << p;
    EXPECT_FALSE(files_->Read("t-1", p, 0, 1)) << p;
    EXPECT_FALSE(files_->Commit("t-1", p, 1, os::Sha256Hex("x"))) << p;
  }
  EXPECT_FALSE(files_->List("..", "")) << "a task id is never a path";
  EXPECT_FALSE(fs::exists(root_ + "/x"));
}

TEST_F(TaskFilesTest, AHashThatNoLongerFitsItsFileIsComputedAgain) {
  ASSERT_TRUE(Put("t-1", "f", "before"));
  // Someone (an operator, a crash between a commit's two renames) changed the file behind the
  // hash's back.
  const std::string path = root_ + "/tasks/t-1/data/f";
  fs::remove(path);
  std::ofstream(path, std::ios::binary) << "after!!";
  auto listing = files_->List("t-1", "f");
  ASSERT_TRUE(listing);
  EXPECT_EQ(listing->files[0].sha256, os::Sha256Hex("after!!"));
  EXPECT_EQ(listing->files[0].size, 7);
}

TEST_F(TaskFilesTest, RemoveDeletesEverythingAndTheTaskStartsEmptyAfterwards) {
  ASSERT_TRUE(Put("t-1", "d/f", "data"));
  ASSERT_TRUE(files_->Append("t-1", "partial", 0, "half", std::nullopt));
  ASSERT_TRUE(Put("t-2", "g", "kept"));
  files_->Remove("t-1");
  files_->WaitForDeletions();
  EXPECT_FALSE(fs::exists(root_ + "/tasks/t-1"));
  EXPECT_TRUE(fs::is_empty(root_ + "/trash"));
  EXPECT_TRUE(files_->List("t-1", "")->files.empty());
  EXPECT_EQ(*files_->Received("t-1", "partial"), 0);
  EXPECT_EQ(files_->List("t-2", "")->files.size(), 1u);
  files_->Remove("t-9");  // nothing stored: a no-op
}

TEST_F(TaskFilesTest, SweepRemovesTheFilesOfTasksThatNoLongerExist) {
  ASSERT_TRUE(Put("t-1", "f", "1"));
  ASSERT_TRUE(Put("t-2", "f", "2"));
  EXPECT_EQ(files_->Sweep([](const std::string& id) { return id == "t-2"; }), 1);
  files_->WaitForDeletions();
  EXPECT_TRUE(files_->List("t-1", "")->files.empty());
  EXPECT_EQ(ReadAll("t-2", "f"), "2");
}

TEST_F(TaskFilesTest, TrashLeftByAnEarlierProcessIsDeletedAtOpen) {
  fs::create_directories(root_ + "/trash/t-5.1/data");
  std::ofstream(root_ + "/trash/t-5.1/data/f") << "old";
  Reopen();
  files_->WaitForDeletions();
  EXPECT_TRUE(fs::is_empty(root_ + "/trash"));
}

TEST_F(TaskFilesTest, RemovalSkipsTrashNamesAnEarlierProcessStillHas) {
  // An earlier process's trash, not yet deleted, under the name this one would pick first.
  fs::create_directories(root_ + "/trash/t-1.1/data");
  std::ofstream(root_ + "/trash/t-1.1/data/f") << "old";
  ASSERT_TRUE(files_->Append("t-1", "x", 0, "new", std::nullopt));
  files_->Remove("t-1");
  files_->WaitForDeletions();
  EXPECT_FALSE(fs::exists(root_ + "/tasks/t-1"));
  EXPECT_TRUE(fs::exists(root_ + "/trash/t-1.1/data/f"));
  EXPECT_FALSE(fs::exists(root_ + "/trash/t-1.2"));
}

}  // namespace
}  // namespace gpupool::server
