// Tests for the Controller's console sessions (controller_sessions.cc): memory keeps only the
// cookie's digest, housekeeping sweeps expired sessions, a key's sessions are capped (oldest
// out), agents' credentials cannot open one, and a session opened for a revoked key is refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/controller_testing.h"
#include "server/secrets.h"

namespace gpupool::server {

class ControllerSessionsTest : public testing::ControllerFixture {
 protected:
  Result<NewSession> Open(const Caller& caller, int64_t ttl_ms) {
    return testing::Await<NewSession>(
        [&](Done<NewSession> d) { c_->CreateSession(caller, ttl_ms, d); });
  }
  size_t SessionsInMemory() {
    std::lock_guard lock(c_->auth_mu_);
    size_t listed = 0;
    for (const auto& [key, digests] : c_->sessions_of_key_) listed += digests.size();
    EXPECT_EQ(listed, c_->sessions_.size()) << "every session is on its key's list, once";
    return c_->sessions_.size();
  }
  bool Holds(const std::string& digest) {
    std::lock_guard lock(c_->auth_mu_);
    return c_->sessions_.count(digest) > 0;
  }
};

namespace {

TEST_F(ControllerSessionsTest, MemoryKeepsTheCookiesDigestOnly) {
  Result<NewSession> s = Open(admin_, 60'000);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->grant.caller.user_id, "admin");
  EXPECT_EQ(s->grant.expires_ms, clock_.now_ms + 60'000);
  EXPECT_FALSE(Holds(s->cookie));
  EXPECT_TRUE(Holds(SecretDigest(s->cookie)));
  Result<SessionGrant> grant = c_->LookupSession(s->cookie);
  ASSERT_TRUE(grant) << grant.error().message;
  EXPECT_EQ(grant->csrf_token, s->grant.csrf_token);
  EXPECT_FALSE(c_->LookupSession(SecretDigest(s->cookie))) << "the digest is no cookie";
}

TEST_F(ControllerSessionsTest, HousekeepingSweepsTheExpiredOnes) {
  ASSERT_TRUE(Open(admin_, 60'000));
  Result<NewSession> longer = Open(admin_, 120'000);
  ASSERT_TRUE(longer);
  EXPECT_EQ(SessionsInMemory(), 2u);
  clock_.now_ms += 60'000;
  c_->HousekeepingPass();
  EXPECT_EQ(SessionsInMemory(), 1u);
  EXPECT_TRUE(c_->LookupSession(longer->cookie));
  clock_.now_ms += 60'000;
  c_->HousekeepingPass();
  EXPECT_EQ(SessionsInMemory(), 0u);
}

TEST_F(ControllerSessionsTest, AKeysOldestSessionGoesPastTheCap) {
  std::vector<NewSession> opened;
  for (int i = 0; i < 65; ++i) {
    Result<NewSession> s = Open(admin_, 60'000);
    ASSERT_TRUE(s) << s.error().message;
    opened.push_back(*s);
  }
  EXPECT_EQ(SessionsInMemory(), 64u);
  EXPECT_FALSE(c_->LookupSession(opened[0].cookie));
  EXPECT_TRUE(c_->LookupSession(opened[1].cookie));
  EXPECT_TRUE(c_->LookupSession(opened[64].cookie));
}

TEST_F(ControllerSessionsTest, AgentsAndRevokedKeysOpenNone) {
  Caller agent = admin_;
  agent.agent_node = "n7";
  Result<NewSession> refused = Open(agent, 60'000);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(refused.error().message.find("agents cannot open console sessions"), std::string::npos);

  const Caller member = testing::MakeMember(*c_, admin_, "u-1", "p-1");
  ASSERT_TRUE(testing::Await<AccessKey>(
      [&](Done<AccessKey> d) { c_->RevokeAccessKey(admin_, member.access_key, d); }));
  refused = Open(member, 60'000);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnauthenticated);
  EXPECT_EQ(SessionsInMemory(), 0u);
}

}  // namespace
}  // namespace gpupool::server
