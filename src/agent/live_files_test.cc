// LiveFiles on a workspace in a temp dir: listings and reads with their SHA-256, resumable uploads
// committed into place, the shared refusals (core/file_rules.h), and the links a task may plant
// never followed — neither to read nor to write.
#include "agent/live_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "os/sha256.h"

namespace gpupool::agent {
namespace {

namespace fs = std::filesystem;

class LiveFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "live-files-" + std::to_string(::getpid());
    fs::remove_all(root_);
    workspace_ = root_ + "/workspace";
    outside_ = root_ + "/outside";
    fs::create_directories(workspace_);
    fs::create_directories(outside_);
    files_ = std::make_unique<LiveFiles>([this](const std::string& task) -> Result<LiveWorkspace> {
      if (task != "t-1") return NotFound("task " + task + " does not run on this node");
      return LiveWorkspace{workspace_, root_ + "/uploads"};
    });
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const std::string& path, const std::string& bytes) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
  }
  std::string ReadLocal(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  Result<proto::LiveFileReply> Do(proto::LiveFileRequest request, std::string body = "",
                                  std::string* bytes = nullptr) {
    std::string ignored;
    return files_->Serve("t-1", request, body, bytes != nullptr ? bytes : &ignored);
  }
  Result<proto::LiveFileReply> Upload(const std::string& path, const std::string& bytes) {
    auto sent = Do({.op = "append", .path = path, .size = int64_t(bytes.size())}, bytes);
    if (!sent) return sent;
    return Do({.op = "commit",
               .path = path,
               .size = int64_t(bytes.size()),
               .sha256 = os::Sha256Hex(bytes)});
  }

  std::string root_, workspace_, outside_;
  std::unique_ptr<LiveFiles> files_;
};

TEST_F(LiveFilesTest, ListsAndReadsTheWorkspaceWithHashes) {
  Write(workspace_ + "/a.txt", "hello");
  Write(workspace_ + "/out/b.bin", std::string(3000, 'b'));
  auto all = Do({.op = "list"});
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_EQ(all->type, "dir");
  ASSERT_EQ(all->files.size(), 2u);
  EXPECT_EQ(all->files[0].path, "a.txt");
  EXPECT_EQ(all->files[0].sha256, os::Sha256Hex("hello"));
  EXPECT_EQ(all->files[1].path, "out/b.bin");
  EXPECT_EQ(all->files[1].size, 3000);

  auto dir = Do({.op = "list", .path = "out"});
  ASSERT_TRUE(dir) << dir.error().message;
  ASSERT_EQ(dir->files.size(), 1u);
  EXPECT_EQ(dir->files[0].path, "out/b.bin");
  auto one = Do({.op = "list", .path = "a.txt"});
  ASSERT_TRUE(one);
  EXPECT_EQ(one->type, "file");

  std::string bytes;
  auto read = Do({.op = "read", .path = "out/b.bin", .offset = 2990, .length = 100}, "", &bytes);
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(bytes, std::string(10, 'b'));
  EXPECT_EQ(read->size, 3000);
  EXPECT_EQ(read->sha256, os::Sha256Hex(std::string(3000, 'b'))) << "kept from the listing";
  // Changed since: the kept hash no longer holds, and none is given.
  Write(workspace_ + "/out/b.bin", std::string(3001, 'c'));
  read = Do({.op = "read", .path = "out/b.bin", .length = 10}, "", &bytes);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->sha256, "");

  auto past = Do({.op = "read", .path = "a.txt", .offset = 6});
  ASSERT_FALSE(past);
  EXPECT_EQ(past.error().message, "offset 6 is past the end of 'a.txt' (5 bytes)");
  auto of_dir = Do({.op = "read", .path = "out"});
  ASSERT_FALSE(of_dir);
  EXPECT_EQ(of_dir.error().code, ErrorCode::kFailedPrecondition);
  auto missing = Do({.op = "list", .path = "nope/x"});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "task t-1 has no file or directory 'nope/x'");
  auto elsewhere = files_->Serve("t-2", {.op = "list"}, "", &bytes);
  ASSERT_FALSE(elsewhere);
  EXPECT_EQ(elsewhere.error().message, "task t-2 does not run on this node");
}

TEST_F(LiveFilesTest, AnUploadResumesAndIsCommittedIntoPlaceWithItsHash) {
  const std::string data = std::string(1000, 'x') + std::string(1000, 'y');
  auto first =
      Do({.op = "append", .path = "in/d.bin", .offset = 0, .size = 2000}, data.substr(0, 1000));
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->received, 1000);
  EXPECT_EQ(Do({.op = "status", .path = "in/d.bin"})->received, 1000);
  auto wrong = Do({.op = "append", .path = "in/d.bin", .offset = 500, .size = 2000}, "z");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(wrong.error().message.find("continue with offset=1000"), std::string::npos);
  auto early =
      Do({.op = "commit", .path = "in/d.bin", .size = 2000, .sha256 = os::Sha256Hex(data)});
  ASSERT_FALSE(early);
  EXPECT_NE(early.error().message.find("has received 1000 of its 2000 bytes"), std::string::npos);
  ASSERT_TRUE(
      Do({.op = "append", .path = "in/d.bin", .offset = 1000, .size = 2000}, data.substr(1000)));
  EXPECT_FALSE(fs::exists(workspace_ + "/in")) << "nothing is in the workspace before the commit";
  auto done = Do({.op = "commit", .path = "in/d.bin", .size = 2000, .sha256 = os::Sha256Hex(data)});
  ASSERT_TRUE(done) << done.error().message;
  EXPECT_EQ(done->sha256, os::Sha256Hex(data));
  EXPECT_EQ(ReadLocal(workspace_ + "/in/d.bin"), data);
  struct stat st {};
  ASSERT_EQ(::stat((workspace_ + "/in/d.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_EQ(st.st_uid, ::getuid()) << "the workspace's owner's";
  EXPECT_EQ(Do({.op = "status", .path = "in/d.bin"})->received, 0);

  // A replacement; an empty file without bytes.
  ASSERT_TRUE(Upload("in/d.bin", "new"));
  EXPECT_EQ(ReadLocal(workspace_ + "/in/d.bin"), "new");
  ASSERT_TRUE(Do({.op = "commit", .path = "empty", .size = 0, .sha256 = os::Sha256Hex("")}));
  EXPECT_TRUE(fs::is_regular_file(workspace_ + "/empty"));
}

TEST_F(LiveFilesTest, AVolumesPathsAreServedFromTheVolumeAndAReadOnlyOneTakesNoUpload) {
  const std::string data = root_ + "/volumes/v-1";
  const std::string ref = root_ + "/volumes/v-2";
  Write(data + "/old.txt", "kept");
  Write(ref + "/r.txt", "reference");
  fs::create_directories(workspace_ + "/data");  // the mount points, empty in the workspace
  fs::create_directories(workspace_ + "/in/ref");
  files_ = std::make_unique<LiveFiles>([&](const std::string&) -> Result<LiveWorkspace> {
    return LiveWorkspace{
        workspace_,
        root_ + "/uploads",
        {{"v-1", "volume data", "data", data, false}, {"v-2", "volume ref", "in/ref", ref, true}}};
  });
  ASSERT_TRUE(Upload("data/new/x.bin", "bytes"));
  EXPECT_EQ(ReadLocal(data + "/new/x.bin"), "bytes");
  EXPECT_FALSE(fs::exists(workspace_ + "/data/new")) << "not under the hidden mount point";
  EXPECT_FALSE(fs::exists(root_ + "/uploads")) << "the volume's uploads wait beside it";
  auto list = Do({.op = "list", .path = "data"});
  ASSERT_TRUE(list) << list.error().message;
  ASSERT_EQ(list->files.size(), 2u);
  EXPECT_EQ(list->files[0].path, "data/new/x.bin");
  EXPECT_EQ(list->files[1].path, "data/old.txt");
  std::string bytes;
  ASSERT_TRUE(Do({.op = "read", .path = "in/ref/r.txt", .offset = 0, .length = 100}, "", &bytes));
  EXPECT_EQ(bytes, "reference");
  auto refused = Upload("in/ref/y", "z");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(refused.error().message,
            "task t-1 mounts volume ref read-only at 'in/ref': nothing can be uploaded into it");
  auto missing = Do({.op = "read", .path = "data/nope", .offset = 0, .length = 1});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "task t-1 has no file 'data/nope'");
  // A path beside a mount point, not in it, is the workspace's.
  ASSERT_TRUE(Upload("database", "w"));
  EXPECT_EQ(ReadLocal(workspace_ + "/database"), "w");
}

TEST_F(LiveFilesTest, RefusesWhatTheServersCopyRefusesInItsWords) {
  ASSERT_TRUE(Do({.op = "append", .path = "a", .size = 4}, "real"));
  auto mismatch = Do({.op = "commit", .path = "a", .size = 4, .sha256 = os::Sha256Hex("fake")});
  ASSERT_FALSE(mismatch);
  EXPECT_EQ(mismatch.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(mismatch.error().message.find("the upload was discarded"), std::string::npos);
  EXPECT_EQ(Do({.op = "status", .path = "a"})->received, 0);
  EXPECT_FALSE(fs::exists(workspace_ + "/a"));

  auto big = Do({.op = "append", .path = "big", .size = 11, .max_file_bytes = 10}, "x");
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(big.error().message, "'big' would be 11 bytes; the limit is 10 bytes per file");

  Write(workspace_ + "/file", "f");
  auto below = Upload("file/x", "x");
  ASSERT_FALSE(below);
  EXPECT_EQ(below.error().message,
            "task t-1 has a file 'file', so 'file/x' cannot be created below it");
  fs::create_directories(workspace_ + "/dir");
  auto onto = Upload("dir", "x");
  ASSERT_FALSE(onto);
  EXPECT_EQ(onto.error().message, "task t-1 has a directory 'dir'; a file cannot replace it");
  auto no_upload = Do({.op = "commit", .path = "none", .size = 3, .sha256 = os::Sha256Hex("abc")});
  ASSERT_FALSE(no_upload);
  EXPECT_EQ(no_upload.error().message,
            "no upload of 'none' to task t-1 is in progress; send its bytes first");
}

TEST_F(LiveFilesTest, NeverFollowsALinkTheTaskMade) {
  Write(outside_ + "/secret", "not the task's");
  fs::create_symlink(outside_, workspace_ + "/dir-link");
  fs::create_symlink(outside_ + "/secret", workspace_ + "/file-link");
  Write(workspace_ + "/mine", "mine");

  auto listed = Do({.op = "list"});
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->files.size(), 1u) << "links are not listed";
  EXPECT_EQ(listed->files[0].path, "mine");

  for (const std::string path : {"file-link", "dir-link/secret"}) {
    auto read = Do({.op = "read", .path = path});
    ASSERT_FALSE(read) << path;
    EXPECT_EQ(read.error().code, ErrorCode::kFailedPrecondition) << path;
    EXPECT_NE(read.error().message.find("is a symbolic link; links are not followed"),
              std::string::npos)
        << read.error().message;
    EXPECT_FALSE(Do({.op = "list", .path = path})) << path;
  }
  // An upload below a link is refused; one onto a link replaces the link, not its target.
  auto through = Upload("dir-link/planted", "x");
  ASSERT_FALSE(through);
  EXPECT_EQ(through.error().message,
            "'dir-link' in the workspace of task t-1 is a symbolic link; links are not followed");
  EXPECT_FALSE(fs::exists(outside_ + "/planted"));
  ASSERT_TRUE(Upload("file-link", "replaced"));
  EXPECT_EQ(ReadLocal(outside_ + "/secret"), "not the task's");
  EXPECT_FALSE(fs::is_symlink(workspace_ + "/file-link"));
  EXPECT_EQ(ReadLocal(workspace_ + "/file-link"), "replaced");
}

}  // namespace
}  // namespace gpupool::agent
