// Tests for agent/identity: the kept identity (absent, private, malformed, another node's) and
// what LoadOrJoin does without one (no token: says how to get credentials; unreachable server:
// the transport error). The join against a real server is in tests/agent_e2e_test.cc.
#include "agent/identity.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace gpupool::agent {
namespace {

namespace fs = std::filesystem;

class IdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "identity_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& text, mode_t mode) {
    const std::string path = IdentityPath(dir_);
    std::ofstream(path) << text;
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
  }

  std::string dir_;
};

TEST_F(IdentityTest, NoFileIsNoIdentity) {
  auto id = LoadIdentity(dir_, "n1");
  ASSERT_TRUE(id) << id.error().message;
  EXPECT_FALSE(id->has_value());
  EXPECT_EQ(IdentityPath(dir_), dir_ + "/identity.json");
}

TEST_F(IdentityTest, APrivateFileOfThisNodeIsItsIdentity) {
  Write(R"({"node":"n1","access_key":"AK1","secret_key":"S1","join_token":"JT1"})", 0600);
  auto id = LoadIdentity(dir_, "n1");
  ASSERT_TRUE(id) << id.error().message;
  ASSERT_TRUE(id->has_value());
  EXPECT_EQ((*id)->node, "n1");
  EXPECT_EQ((*id)->access_key, "AK1");
  EXPECT_EQ((*id)->secret_key, "S1");
  EXPECT_EQ((*id)->join_token_id, "JT1");

  // Kept wins over a token, and the server is not asked.
  std::string how;
  auto kept = LoadOrJoin("http://127.0.0.1:1", "", "JT9.secret", "n1", dir_, &how);
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_EQ(kept->access_key, "AK1");
  EXPECT_NE(how.find(IdentityPath(dir_)), std::string::npos) << how;
}

TEST_F(IdentityTest, UnusableFilesAreErrorsNamingTheFile) {
  struct Case {
    std::string text;
    mode_t mode;
    std::string message;
  };
  const Case cases[] = {
      {R"({"node":"n1","access_key":"AK1","secret_key":"S1"})", 0644, "(mode 644); chmod 600"},
      {R"({"node":"n1","access_key":"AK1","secret_key":"S1"})", 0640, "(mode 640)"},
      {"not json", 0600, "is not an agent identity"},
      {R"({"node":"n1","access_key":"AK1"})", 0600, "is not an agent identity"},
      {R"({"node":"n2","access_key":"AK1","secret_key":"S1"})", 0600,
       "is the identity of node n2, not of n1: run the agent with --name n2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    Write(c.text, c.mode);
    auto id = LoadIdentity(dir_, "n1");
    ASSERT_FALSE(id);
    EXPECT_EQ(id.error().code, ErrorCode::kFailedPrecondition);
    EXPECT_NE(id.error().message.find(IdentityPath(dir_)), std::string::npos);
    EXPECT_NE(id.error().message.find(c.message), std::string::npos) << id.error().message;
  }
}

TEST_F(IdentityTest, WithoutAnIdentityItJoinsOrSaysHow) {
  std::string how;
  auto none = LoadOrJoin("http://127.0.0.1:1", "", "", "n1", dir_, &how);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(none.error().message.find("join token"), std::string::npos) << none.error().message;

  // Port 1 on loopback: nothing listens, the join cannot happen and nothing is kept.
  auto unreachable = LoadOrJoin("http://127.0.0.1:1", "", "JT1.secret", "n1", dir_, &how);
  ASSERT_FALSE(unreachable);
  EXPECT_EQ(unreachable.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(unreachable.error().message.find("joining node n1 at http://127.0.0.1:1"),
            std::string::npos)
      << unreachable.error().message;
  EXPECT_FALSE(fs::exists(IdentityPath(dir_)));
}

}  // namespace
}  // namespace gpupool::agent
