// Unit tests of `gpupool cp`'s path arithmetic (copy_paths.h).
#include "cli/copy_paths.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace gpupool::cli {
namespace {

TEST(ParseCopyEnd, TellsTaskFilesFromLocalPaths) {
  auto remote = ParseCopyEnd("t-4:data/x.bin", "source");
  ASSERT_TRUE(remote) << remote.error().message;
  EXPECT_TRUE(remote->remote);
  EXPECT_EQ(remote->task_id, "t-4");
  EXPECT_EQ(remote->path, "data/x.bin");
  for (const std::string root : {"t-4:", "t-4:.", "t-4:/root", "t-4:/root/", "t-4:./"}) {
    auto r = ParseCopyEnd(root, "destination");
    ASSERT_TRUE(r) << root << ": " << (r ? "" : r.error().message);
    EXPECT_TRUE(r->remote) << root;
    EXPECT_EQ(r->path, "") << root;
  }
  EXPECT_EQ(ParseCopyEnd("t-4:out/", "source")->path, "out");
  EXPECT_EQ(ParseCopyEnd("t-4:/root/out/x", "source")->path, "out/x");  // the task's home
  EXPECT_EQ(ParseCopyEnd("4:out", "source")->task_id, "t-4");  // a bare number, as elsewhere
  for (const std::string local :
       {"data.bin", "./t-4:x", "/abs/path", "dir/a:b", ":x", "t 4:x", "t$4:x"}) {
    auto r = ParseCopyEnd(local, "source");
    ASSERT_TRUE(r) << local;
    EXPECT_FALSE(r->remote) << local;
    EXPECT_EQ(r->path, local);
  }
}

TEST(ParseCopyEnd, PathsLeavingTheWorkspaceAreUsageErrorsNamingTheArgument) {
  auto up = ParseCopyEnd("t-4:../etc/passwd", "destination");
  ASSERT_FALSE(up);
  EXPECT_EQ(up.error().message,
            "destination t-4: path '../etc/passwd' has a '..' component; paths may not leave the "
            "workspace");
  for (const std::string outside : {"t-4://etc", "t-4:/", "t-4:/etc/passwd"}) {
    auto abs = ParseCopyEnd(outside, "source");
    ASSERT_FALSE(abs) << outside;
    EXPECT_EQ(abs.error().message, "source t-4: path '" + outside.substr(4) +
                                       "' is outside the task's workspace /root: give a path "
                                       "below /root/ or a relative one");
  }
}

TEST(LocalName, IsTheLastComponent) {
  EXPECT_EQ(*LocalName("a/b/data.bin"), "data.bin");
  EXPECT_EQ(*LocalName("a/b/dir/"), "dir");
  EXPECT_EQ(*LocalName("."), std::filesystem::current_path().filename().string());
  EXPECT_FALSE(LocalName("/"));
}

TEST(Mapping, JoinsAndRelativises) {
  EXPECT_EQ(JoinTaskPath("", "x"), "x");
  EXPECT_EQ(JoinTaskPath("in", "x"), "in/x");
  EXPECT_EQ(RelativeToListed("", true, "a/b"), "a/b");
  EXPECT_EQ(RelativeToListed("a", true, "a/b/c"), "b/c");
  EXPECT_EQ(RelativeToListed("a/b", false, "a/b"), "b");
}

TEST(SyncDifferencesTest, SendsWhatTheOtherSideLacksOrHoldsOtherwiseHashingOnlyEqualSizes) {
  const SyncSide from = {{"a", {1, ""}}, {"b/c", {2, ""}}, {"d", {3, ""}}, {"e", {4, ""}}};
  const SyncSide to = {
      {"a", {1, "sha-a"}}, {"b/c", {2, "old"}}, {"d", {30, "sha-d"}}, {"z", {9, ""}}};
  std::vector<std::string> hashed;
  auto local = [&](const std::string& rel) -> Result<std::string> {
    hashed.push_back(rel);
    return rel == "a" ? "sha-a" : "new";
  };
  auto never = [](const std::string& rel) -> Result<std::string> {
    ADD_FAILURE() << "hashed " << rel;
    return std::string();
  };
  Result<std::vector<std::string>> differ = SyncDifferences(from, to, local, never);
  ASSERT_TRUE(differ);
  // a: same bytes; b/c: changed; d: another size; e: missing there. z is only the destination's.
  EXPECT_EQ(*differ, (std::vector<std::string>{"b/c", "d", "e"}));
  EXPECT_EQ(hashed, (std::vector<std::string>{"a", "b/c"}));  // only where the sizes are equal
  auto broken = [](const std::string&) -> Result<std::string> {
    return MakeError(ErrorCode::kInternal, "cannot read");
  };
  EXPECT_FALSE(SyncDifferences(from, to, broken, never));
}

}  // namespace
}  // namespace gpupool::cli
