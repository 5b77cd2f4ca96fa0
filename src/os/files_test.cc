// Tests of files.h: an atomic write creates with the exact mode, replaces, refuses to replace when
// told, and on a failure at any step leaves the old content and no temporary file; whole writes
// at an offset or not; the default data directory; free space and the code of a full disk.
#include "os/files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gpupool::os {
namespace {

namespace fs = std::filesystem;

class FilesTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(testing::TempDir()) / "files_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::vector<std::string> Entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
    return names;
  }
  static mode_t Mode(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }

  std::string dir_;
};

TEST_F(FilesTest, CreatesAndReplacesWithTheExactMode) {
  const std::string path = dir_ + "/state.json";
  const mode_t old_umask = ::umask(077);
  ASSERT_TRUE(WriteFileAtomically(path, "one", {.mode = 0644}));
  ::umask(old_umask);
  EXPECT_EQ(Read(path), "one");
  EXPECT_EQ(Mode(path), 0644u) << "the umask must not narrow the mode";
  ASSERT_TRUE(WriteFileAtomically(path, "two"));
  EXPECT_EQ(Read(path), "two");
  EXPECT_EQ(Mode(path), 0600u);
  ASSERT_TRUE(WriteFileAtomically(path, ""));
  EXPECT_EQ(Read(path), "");
  EXPECT_EQ(Entries(), std::vector<std::string>{"state.json"}) << "no temporary file is left";
}

TEST_F(FilesTest, WithoutReplaceAnExistingFileIsKeptAndReported) {
  const std::string path = dir_ + "/master.key";
  ASSERT_TRUE(WriteFileAtomically(path, "first", {.replace = false}));
  const Status second = WriteFileAtomically(path, "second", {.replace = false});
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(second.error().message, "cannot write " + path + ": cannot link it: File exists");
  EXPECT_EQ(Read(path), "first");
  EXPECT_EQ(Entries(), std::vector<std::string>{"master.key"});
}

TEST_F(FilesTest, AFailedWriteLeavesTheOldContentAndNoTemporaryFile) {
  const std::string path = dir_ + "/identity.json";
  ASSERT_TRUE(WriteFileAtomically(path, "old"));
  // A file size limit makes write(2) fail with EFBIG part way (SIGXFSZ ignored).
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const Status s = WriteFileAtomically(path, std::string(10000, 'n'));
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kInternal);
  EXPECT_EQ(s.error().message, "cannot write " + path + ": cannot write it: File too large");
  EXPECT_EQ(Read(path), "old");
  EXPECT_EQ(Entries(), std::vector<std::string>{"identity.json"});
}

TEST_F(FilesTest, AFailedRenameLeavesTheTargetAndNoTemporaryFile) {
  const std::string path = dir_ + "/bindings";
  fs::create_directories(path + "/t-1");  // a non-empty directory cannot be renamed over
  const Status s = WriteFileAtomically(path, "data");
  ASSERT_FALSE(s);
  EXPECT_TRUE(s.error().message.starts_with("cannot write " + path + ": cannot rename it: "))
      << s.error().message;
  EXPECT_TRUE(fs::is_directory(path + "/t-1"));
  EXPECT_EQ(Entries(), std::vector<std::string>{"bindings"});
}

TEST_F(FilesTest, NoPlaceForTheTemporaryFileNamesIt) {
  const std::string path = dir_ + "/missing/credentials.env";
  const Status s = WriteFileAtomically(path, "x");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "cannot write " + path + ": cannot create a temporary file in " +
                                   dir_ + "/missing: No such file or directory");
}

TEST_F(FilesTest, TemporaryFileInAnotherDirectoryAndLongNames) {
  fs::create_directories(dir_ + "/tmp");
  fs::create_directories(dir_ + "/sums");
  const std::string path = dir_ + "/sums/" + std::string(255, 'n');  // NAME_MAX long
  ASSERT_TRUE(WriteFileAtomically(path, "hash", {.temp_dir = dir_ + "/tmp"}));
  EXPECT_EQ(Read(path), "hash");
  EXPECT_TRUE(fs::is_empty(dir_ + "/tmp"));
}

TEST_F(FilesTest, WriteAllAtAnOffsetAndSyncDirectory) {
  const std::string path = dir_ + "/partial";
  ASSERT_TRUE(WriteFileAtomically(path, "abcdef"));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(WriteAll(fd, "XY", 2), 0);
  EXPECT_EQ(WriteAll(fd, "12345678", 4), 0);
  EXPECT_EQ(::lseek(fd, 0, SEEK_CUR), 0) << "pwrite must not move the offset";
  ::close(fd);
  EXPECT_EQ(Read(path), "abXY12345678");
  EXPECT_EQ(SyncDirectory(dir_), 0);
  EXPECT_EQ(SyncDirectory(dir_ + "/none"), ENOENT);
}

TEST_F(FilesTest, WriteAllToAPipe) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  EXPECT_EQ(WriteAll(fds[1], "through"), 0);
  ::close(fds[1]);
  char buffer[16] = {};
  EXPECT_EQ(::read(fds[0], buffer, sizeof buffer), 7);
  EXPECT_STREQ(buffer, "through");
  EXPECT_EQ(WriteAll(fds[0], "x"), EBADF);  // the read end
  ::close(fds[0]);
}

TEST(ErrorCodeOfErrnoTest, AFullDiskIsInsufficientStorageAndTheRestInternal) {
  EXPECT_EQ(ErrorCodeOfErrno(ENOSPC), ErrorCode::kInsufficientStorage);
  EXPECT_EQ(ErrorCodeOfErrno(EDQUOT), ErrorCode::kInsufficientStorage);
  EXPECT_EQ(ErrorCodeOfErrno(EIO), ErrorCode::kInternal);
}

TEST(FreeBytesTest, ReadsTheFileSystemAndNamesAPathItCannotRead) {
  Result<int64_t> free = FreeBytes(testing::TempDir());
  ASSERT_TRUE(free) << free.error().message;
  EXPECT_GT(*free, 0);
  Result<int64_t> none = FreeBytes("/no/such/dir");
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("cannot read the free space of /no/such/dir"),
            std::string::npos)
      << none.error().message;
}

TEST(DefaultDataDirTest, UnderVarLibAsRootElseUnderHome) {
  const char* home = std::getenv("HOME");
  const std::string saved = home != nullptr ? home : "";
  ::setenv("HOME", "/home/ada", 1);
  const std::string dir = DefaultDataDir("gpupool-agent");
  if (home != nullptr) {
    ::setenv("HOME", saved.c_str(), 1);
  } else {
    ::unsetenv("HOME");
  }
  EXPECT_EQ(dir,
            ::geteuid() == 0 ? "/var/lib/gpupool-agent" : "/home/ada/.local/share/gpupool-agent");
}

}  // namespace
}  // namespace gpupool::os
