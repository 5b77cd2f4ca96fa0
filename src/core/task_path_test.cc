// Tests for core/task_path: every rule refuses with a message naming the path and the rule, and
// the paths a workspace really has pass.
#include "core/task_path.h"

#include <gtest/gtest.h>

#include <string>

namespace gpupool {
namespace {

TEST(TaskPath, AcceptsOrdinaryRelativePaths) {
  for (const std::string& p :
       {std::string("a"), std::string("data/train.bin"), std::string(".hidden/x.y"),
        std::string("a..b/c"), std::string("dir with spaces/ü-ñ.txt"), std::string("..x"),
        std::string(kMaxTaskPathComponentBytes, 'x')}) {
    EXPECT_TRUE(ValidateTaskPath(p)) << p << ": " << ValidateTaskPath(p).error().message;
  }
}

struct BadPath {
  std::string path;
  std::string message;  // a part of the message
};

class TaskPathRefusal : public ::testing::TestWithParam<BadPath> {};

TEST_P(TaskPathRefusal, NamesThePathAndTheRule) {
  const Status s = ValidateTaskPath(GetParam().path, "source");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(s.error().message.find(GetParam().message), std::string::npos) << s.error().message;
  EXPECT_EQ(s.error().message.rfind("source", 0), 0u) << s.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Rules, TaskPathRefusal,
    ::testing::Values(
        BadPath{"", "must not be empty"}, BadPath{"/etc/passwd", "'/etc/passwd' is absolute"},
        BadPath{"..", "'..' has a '..' component"},
        BadPath{"a/../../etc", "'a/../../etc' has a '..' component"},
        BadPath{"./a", "has a '.' component"}, BadPath{"a//b", "has an empty component"},
        BadPath{"a/", "has an empty component"},
        BadPath{std::string("a\0b", 3), "'a\\x00b' contains a NUL byte"},
        BadPath{"a\nb", "'a\\x0ab' contains a control character"},
        BadPath{"a\xff", "'a\\xff' is not valid UTF-8"},
        BadPath{"\xc0\xaf", "is not valid UTF-8"},  // an overlong '/'
        BadPath{std::string(kMaxTaskPathComponentBytes + 1, 'x'), "has a component of 256 bytes"},
        BadPath{std::string(kMaxTaskPathBytes + 1, 'x'), "is 1025 bytes long"}));

TEST(TaskPath, DepthIsBounded) {
  std::string deep = "d";
  for (size_t i = 1; i < kMaxTaskPathDepth; ++i) deep += "/d";
  EXPECT_TRUE(ValidateTaskPath(deep));
  const Status s = ValidateTaskPath(deep + "/d");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("deeper than 32 components"), std::string::npos);
}

TEST(TaskPath, SplitsIntoComponents) {
  EXPECT_EQ(SplitTaskPath("a"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(SplitTaskPath("a/b c/d"), (std::vector<std::string>{"a", "b c", "d"}));
}

TEST(TaskPathFromUser, TheHomeAndRelativePathsNameTheWorkspace) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/root", ""},
      {"/root/", ""},
      {"", ""},
      {".", ""},
      {"/root/data", "data"},
      {"/root/out/", "out"},
      {"data/x.csv", "data/x.csv"},
      {"./data//x", "data/x"},
      {"/root/./a/b/", "a/b"},
  };
  for (const auto& [given, want] : cases) {
    const Result<std::string> got = TaskPathFromUser(given);
    ASSERT_TRUE(got) << given << ": " << got.error().message;
    EXPECT_EQ(*got, want) << given;
  }
}

TEST(TaskPathFromUser, PathsOutsideTheWorkspaceAreRefusedNamingIt) {
  for (const std::string given : {"/etc/passwd", "/rootkit/x", "/", "/tmp/out"}) {
    const Result<std::string> got = TaskPathFromUser(given, "remote_path");
    ASSERT_FALSE(got) << given;
    EXPECT_EQ(got.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(got.error().message, "remote_path '" + given +
                                       "' is outside the task's workspace /root: give a path "
                                       "below /root/ or a relative one");
  }
  const Result<std::string> up = TaskPathFromUser("/root/../etc");
  ASSERT_FALSE(up);
  EXPECT_NE(up.error().message.find("'..'"), std::string::npos) << up.error().message;
}

}  // namespace
}  // namespace gpupool
