// Tests for agent/workspace_sync's walk of a finished task's workspace: regular files are visited
// in path order through descriptors, and every way a task could point the agent elsewhere (links
// to outside, a linked directory, FIFOs, a hard link to another uid's file, unrepresentable names)
// is skipped and named. The transfers themselves run end to end in tests/agent_e2e_test.cc.
#include "agent/workspace_sync.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace gpupool::agent {
namespace {

namespace fs = std::filesystem;

constexpr uid_t kOtherUid = 54321;

class WalkWorkspaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = ::testing::TempDir() + "walk-ws-" + std::to_string(::getpid());
    fs::remove_all(base_);
    ws_ = base_ + "/workspace";
    fs::create_directories(ws_);
  }
  void TearDown() override { fs::remove_all(base_); }

  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories(fs::path(ws_ + "/" + rel).parent_path());
    std::ofstream(ws_ + "/" + rel, std::ios::binary) << text;
  }

  // Walks ws_, reading each visited file through its descriptor.
  std::map<std::string, std::string> Walk(std::vector<std::string>* skipped) {
    std::map<std::string, std::string> seen;
    const Status ok = WalkWorkspace(
        ws_,
        [&](const std::string& rel, int fd, int64_t size) -> Status {
          std::string data(static_cast<size_t>(size), '\0');
          EXPECT_EQ(::pread(fd, data.data(), data.size(), 0), size) << rel;
          seen[rel] = data;
          return {};
        },
        skipped);
    EXPECT_TRUE(ok) << ok.error().message;
    return seen;
  }

  std::string base_;
  std::string ws_;
};

TEST_F(WalkWorkspaceTest, VisitsRegularFilesAndNamesEverythingItSkips) {
  Write("a.txt", "a");
  Write("sub/b.bin", std::string("b\0b", 3));
  Write("sub/deep/c", "c");
  Write("sub/deep/.hidden", "h");
  fs::create_directory_symlink("/etc", ws_ + "/etc-link");
  fs::create_symlink("/etc/passwd", ws_ + "/sub/passwd-link");
  fs::create_symlink("a.txt", ws_ + "/inner-link");  // even one that stays inside
  ASSERT_EQ(::mkfifo((ws_ + "/pipe").c_str(), 0600), 0);
  Write(std::string("bad\xff"), "x");
  fs::create_directories(ws_ + "/empty-dir");

  std::vector<std::string> skipped;
  const auto seen = Walk(&skipped);
  const std::map<std::string, std::string> expected = {{"a.txt", "a"},
                                                       {"sub/b.bin", std::string("b\0b", 3)},
                                                       {"sub/deep/.hidden", "h"},
                                                       {"sub/deep/c", "c"}};
  EXPECT_EQ(seen, expected);
  const std::vector<std::string> expected_skipped = {
      "the name 'bad\\xff' is not valid UTF-8",
      "'etc-link': a symbolic link (not followed)",
      "'inner-link': a symbolic link (not followed)",
      "'pipe': not a regular file",
      "'sub/passwd-link': a symbolic link (not followed)",
  };
  EXPECT_EQ(skipped, expected_skipped);
}

TEST_F(WalkWorkspaceTest, FilesOfAnotherOwnerAreNotTaken) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another uid";
  Write("mine", "mine");
  Write("theirs", "theirs");
  ASSERT_EQ(::chown((ws_ + "/theirs").c_str(), kOtherUid, kOtherUid), 0);
  // A hard link a task could make to a file it does not own (where the kernel allows it).
  const std::string outside = base_ + "/secret";
  std::ofstream(outside) << "secret";
  ASSERT_EQ(::chown(outside.c_str(), kOtherUid, kOtherUid), 0);
  ASSERT_EQ(::link(outside.c_str(), (ws_ + "/hard").c_str()), 0);

  std::vector<std::string> skipped;
  const auto seen = Walk(&skipped);
  EXPECT_EQ(seen, (std::map<std::string, std::string>{{"mine", "mine"}}));
  EXPECT_EQ(skipped, (std::vector<std::string>{"'hard': owned by uid 54321, not the task's",
                                               "'theirs': owned by uid 54321, not the task's"}));
}

TEST_F(WalkWorkspaceTest, AWorkspaceThatIsALinkIsRefusedAndVisitorErrorsStopTheWalk) {
  fs::create_directory_symlink(ws_, base_ + "/ws-link");
  std::vector<std::string> skipped;
  const Status linked = WalkWorkspace(
      base_ + "/ws-link", [](const std::string&, int, int64_t) -> Status { return {}; }, &skipped);
  ASSERT_FALSE(linked);
  EXPECT_NE(linked.error().message.find("cannot open the workspace"), std::string::npos);

  Write("a", "1");
  Write("b", "2");
  int visited = 0;
  const Status stopped = WalkWorkspace(
      ws_,
      [&](const std::string&, int, int64_t) -> Status {
        ++visited;
        return MakeError(ErrorCode::kUnavailable, "server gone");
      },
      &skipped);
  ASSERT_FALSE(stopped);
  EXPECT_EQ(stopped.error().message, "server gone");
  EXPECT_EQ(visited, 1);
}

TEST(OutputsText, DescribesTheCountsAndNotesOnlyWhatWasNotSaved) {
  SavedOutputs saved;
  saved.uploaded = 2;
  saved.bytes = 3 << 20;
  saved.unchanged = 1;
  EXPECT_EQ(DescribeOutputs(saved), "2 file(s) saved (3145728 bytes), 1 unchanged");
  EXPECT_EQ(OutputsNote(saved), "");
  for (int i = 0; i < 7; ++i) saved.skipped.push_back("'l" + std::to_string(i) + "': why");
  EXPECT_EQ(DescribeOutputs(saved),
            "2 file(s) saved (3145728 bytes), 1 unchanged; not saved: 'l0': why; 'l1': why; "
            "'l2': why; 'l3': why; 'l4': why; 'l5': why; 'l6': why");
  EXPECT_EQ(OutputsNote(saved),
            "; outputs not saved: 'l0': why, 'l1': why, 'l2': why, 'l3': why, 'l4': why and 2 "
            "more");
}

}  // namespace
}  // namespace gpupool::agent
