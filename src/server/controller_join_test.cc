// Controller: join tokens (admin-only create, list, revoke; only a digest stored), the join that
// exchanges one for a node's own credential (unknown, wrong, revoked and expired tokens refused),
// what that credential may do (its own node's agent calls only), and revocation cascading to the
// credentials minted with a token. On a MemoryStore with a hand-driven clock.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/controller.h"
#include "server/controller_testing.h"
#include "store/memory_store.h"

namespace gpupool::server {
namespace {

using testing::Await;
using testing::AwaitTask;
using testing::ControllerFixture;

constexpr int64_t kNodeTimeoutMs = 10'000;

class ControllerJoinTest : public ControllerFixture {
 protected:
  ControllerJoinTest() { options_.node_timeout_ms = kNodeTimeoutMs; }

  Result<NewJoinToken> Create(const Caller& who, int64_t expires_in_ms = 0) {
    return Await<NewJoinToken>([&](Done<NewJoinToken> d) {
      c_->CreateJoinToken(who, "rack 7", expires_in_ms, std::move(d));
    });
  }
  std::string CreateOk() {
    auto t = Create(admin_);
    EXPECT_TRUE(t) << t.error().message;
    return t ? t->token : "";
  }
  Result<JoinTokenView> Revoke(const Caller& who, const std::string& id) {
    return Await<JoinTokenView>(
        [&](Done<JoinTokenView> d) { c_->RevokeJoinToken(who, id, std::move(d)); });
  }
  Result<AgentCredentials> Join(const std::string& token, const std::string& node) {
    return Await<AgentCredentials>(
        [&](Done<AgentCredentials> d) { c_->JoinNode(token, node, std::move(d)); });
  }
  // Joins `node` with `token` and returns the caller its credential resolves to.
  Caller JoinOk(const std::string& token, const std::string& node) {
    auto creds = Join(token, node);
    EXPECT_TRUE(creds) << creds.error().message;
    if (!creds) return Caller{};
    auto grant = c_->LookupKey(creds->key.access_key);
    EXPECT_TRUE(grant) << grant.error().message;
    return grant ? grant->caller : Caller{};
  }
  Result<NodeView> Register(const Caller& who, const std::string& name) {
    return Await<NodeView>([&](Done<NodeView> d) {
      c_->RegisterNode(who, Node::Make(name, 64'000, 512 * 1024, 1, "A100-80GB"), std::move(d));
    });
  }
  Result<Task> Report(const Caller& who, const std::string& id, TaskState to) {
    return Await<Task>(
        [&](Done<Task> d) { c_->ReportTask(who, id, to, 0, 0, "", 0, std::move(d)); });
  }
  Result<NodeAssignments> Watch(const Caller& who, const std::string& node) {
    return Await<NodeAssignments>(
        [&](Done<NodeAssignments> d) { c_->WatchAssignments(who, node, 0, 0, std::move(d)); });
  }
  Task SubmitOneGpu() {
    TaskSpec spec;
    spec.request.cpu_milli = 1000;
    spec.request.memory_mib = 1024;
    spec.request.gpu_count = 1;
    spec.command = {"true"};
    auto t = Await<Task>([&](Done<Task> d) { c_->SubmitTask(admin_, spec, std::move(d)); });
    EXPECT_TRUE(t) << t.error().message;
    return t.value_or(Task{});
  }
  Caller Member() {
    User u;
    u.id = "bo";
    u.projects = {"default"};
    EXPECT_TRUE(Await<User>([&](Done<User> d) { c_->CreateUser(admin_, u, d); }));
    auto key = Await<NewAccessKey>(
        [&](Done<NewAccessKey> d) { c_->CreateAccessKey(admin_, "bo", "", d); });
    return c_->LookupKey(key->key.access_key)->caller;
  }

  static std::string IdOf(const std::string& token) { return token.substr(0, token.find('.')); }
  JoinTokenView ViewOf(const std::string& id) {
    const auto views = c_->ListJoinTokens(admin_);
    EXPECT_TRUE(views) << views.error().message;
    for (const JoinTokenView& v : views.value_or(std::vector<JoinTokenView>{})) {
      if (v.token.id == id) return v;
    }
    ADD_FAILURE() << "join token " << id << " is not listed";
    return {};
  }
};

TEST_F(ControllerJoinTest, AdminsCreateListAndRevokeTokensStoredOnlyAsDigests) {
  auto created = Create(admin_, /*expires_in_ms=*/3'600'000);
  ASSERT_TRUE(created) << created.error().message;
  const std::string id = created->view.token.id;
  ASSERT_EQ(created->token.substr(0, id.size() + 1), id + ".");
  const std::string secret = created->token.substr(id.size() + 1);
  EXPECT_EQ(secret.size(), 40u);
  EXPECT_EQ(created->view.token.description, "rack 7");
  EXPECT_EQ(created->view.token.created_by, "admin");
  EXPECT_EQ(created->view.token.expires_ms, clock_.now_ms + 3'600'000);
  EXPECT_TRUE(created->view.token.secret_digest.empty());

  // The store keeps the digest, never the secret.
  auto snap = store_->Load({});
  ASSERT_EQ(snap->join_tokens.size(), 1u);
  EXPECT_EQ(snap->join_tokens[0].secret_digest, SecretDigest(secret));
  EXPECT_EQ(snap->join_tokens[0].description.find(secret), std::string::npos);

  auto list = c_->ListJoinTokens(admin_);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].token.id, id);
  EXPECT_TRUE((*list)[0].token.secret_digest.empty());
  EXPECT_FALSE((*list)[0].expired);
  EXPECT_TRUE((*list)[0].nodes.empty());

  // Members may do none of it.
  const Caller bo = Member();
  auto denied = Create(bo);
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(c_->ListJoinTokens(bo).error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(Revoke(bo, id).error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(Revoke(admin_, "JTNOSUCHTOKEN").error().code, ErrorCode::kNotFound);
  auto negative = Await<NewJoinToken>(
      [&](Done<NewJoinToken> d) { c_->CreateJoinToken(admin_, "", -1, std::move(d)); });
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.error().message.find("expires_in_ms"), std::string::npos);

  const int64_t revoked_at = clock_.now_ms;
  auto revoked = Revoke(admin_, id);
  ASSERT_TRUE(revoked) << revoked.error().message;
  EXPECT_EQ(revoked->token.revoked_ms, revoked_at);
  clock_.now_ms += 5'000;
  EXPECT_EQ(Revoke(admin_, id)->token.revoked_ms, revoked_at) << "revoking again changes nothing";

  Reopen();
  list = c_->ListJoinTokens(admin_);
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].token.revoked_ms, revoked_at);
  clock_.now_ms += 3'600'000;
  EXPECT_TRUE(c_->ListJoinTokens(admin_)->at(0).expired);
}

TEST_F(ControllerJoinTest, AJoinMintsTheNodesOwnCredentialThatSurvivesARestart) {
  const std::string token = CreateOk();
  auto creds = Join(token, "n1");
  ASSERT_TRUE(creds) << creds.error().message;
  EXPECT_EQ(creds->key.node, "n1");
  EXPECT_EQ(creds->key.join_token_id, IdOf(token));
  EXPECT_TRUE(creds->key.user_id.empty());
  EXPECT_TRUE(creds->key.sealed_secret.empty());
  EXPECT_EQ(creds->secret.size(), 40u);

  auto grant = c_->LookupKey(creds->key.access_key);
  ASSERT_TRUE(grant) << grant.error().message;
  EXPECT_EQ(grant->secret, creds->secret);
  EXPECT_EQ(grant->caller.agent_node, "n1");
  EXPECT_EQ(grant->caller.user_id, "agent:n1");
  EXPECT_FALSE(grant->caller.IsAdmin());
  EXPECT_TRUE(grant->caller.projects.empty());
  EXPECT_EQ(ViewOf(IdOf(token)).nodes, std::vector<std::string>{"n1"});

  // Sealed at rest; unsealed again after a restart.
  auto snap = store_->Load({});
  bool stored = false;
  for (const AccessKey& k : snap->access_keys) {
    if (k.access_key != creds->key.access_key) continue;
    stored = true;
    EXPECT_EQ(k.node, "n1");
    EXPECT_EQ(k.sealed_secret.find(creds->secret), std::string::npos);
  }
  EXPECT_TRUE(stored);
  Reopen();
  EXPECT_EQ(c_->LookupKey(creds->key.access_key)->secret, creds->secret);
  // An agent's key is no user's: it is not among anyone's keys.
  EXPECT_EQ(c_->ListAccessKeys(admin_, "admin")->size(), 1u);
}

TEST_F(ControllerJoinTest, JoinsWithUnknownWrongRevokedOrExpiredTokensAreRefused) {
  const std::string good = CreateOk();
  struct Case {
    std::string token;
    std::string node;
    ErrorCode code;
    std::string message;
  };
  const std::vector<Case> malformed = {
      {"no-dot", "n1", ErrorCode::kInvalidArgument, "token must be '<id>.<secret>'"},
      {".secret", "n1", ErrorCode::kInvalidArgument, "token must be"},
      {IdOf(good) + ".", "n1", ErrorCode::kInvalidArgument, "token must be"},
      {good, "", ErrorCode::kInvalidArgument, "node is required"},
      {"JTUNKNOWN.secret", "n1", ErrorCode::kUnauthenticated, "unknown join token JTUNKNOWN"},
      {IdOf(good) + ".WRONGSECRET", "n1", ErrorCode::kUnauthenticated, "does not match"},
      {good + "x", "n1", ErrorCode::kUnauthenticated, "does not match"},
  };
  for (const Case& c : malformed) {
    SCOPED_TRACE(c.token + " / " + c.node);
    auto r = Join(c.token, c.node);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, c.code);
    EXPECT_NE(r.error().message.find(c.message), std::string::npos) << r.error().message;
  }

  auto expiring = Create(admin_, /*expires_in_ms=*/1'000);
  ASSERT_TRUE(expiring);
  clock_.now_ms += 999;
  EXPECT_TRUE(Join(expiring->token, "n1")) << "still valid 1 ms before its expiry";
  clock_.now_ms += 1;
  auto expired = Join(expiring->token, "n2");
  ASSERT_FALSE(expired);
  EXPECT_EQ(expired.error().code, ErrorCode::kUnauthenticated);
  EXPECT_NE(expired.error().message.find("expired"), std::string::npos);

  ASSERT_TRUE(Revoke(admin_, IdOf(good)));
  auto revoked = Join(good, "n3");
  ASSERT_FALSE(revoked);
  EXPECT_EQ(revoked.error().code, ErrorCode::kUnauthenticated);
  EXPECT_NE(revoked.error().message.find("was revoked"), std::string::npos);
  // No refused join left a credential behind.
  EXPECT_TRUE(ViewOf(IdOf(good)).nodes.empty());
}

TEST_F(ControllerJoinTest, AnAgentActsOnlyForItsOwnNode) {
  const Caller agent = JoinOk(CreateOk(), "n1");
  ASSERT_TRUE(agent.IsAgent());
  ASSERT_TRUE(Register(agent, "n1"));
  ASSERT_TRUE(Register(admin_, "n2"));  // admins' keys keep working for agents
  auto other = Register(agent, "n3");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(other.error().message.find("node n1"), std::string::npos) << other.error().message;
  EXPECT_NE(other.error().message.find("register node n3"), std::string::npos);

  EXPECT_TRUE(c_->Heartbeat(agent, "n1", {}));
  EXPECT_TRUE(c_->Heartbeat(admin_, "n1", {}));
  EXPECT_EQ(c_->Heartbeat(agent, "n2", {}).error().code, ErrorCode::kPermissionDenied);
  EXPECT_TRUE(Watch(agent, "n1"));
  EXPECT_EQ(Watch(agent, "n2").error().code, ErrorCode::kPermissionDenied);

  const Task a = SubmitOneGpu();
  const Task b = SubmitOneGpu();
  ASSERT_EQ(c_->SchedulePass(), 2);
  const bool a_on_n1 = AwaitTask(*c_, admin_, a.id)->task.placement->node == "n1";
  const std::string mine = a_on_n1 ? a.id : b.id;
  const std::string theirs = a_on_n1 ? b.id : a.id;
  ASSERT_EQ(Watch(agent, "n1")->tasks.size(), 1u);
  auto running = Report(agent, mine, TaskState::kRunning);
  ASSERT_TRUE(running) << running.error().message;
  EXPECT_EQ(running->state, TaskState::kRunning);
  auto refused = Report(agent, theirs, TaskState::kFailed);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(refused.error().message.find("bound to node n2"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(AwaitTask(*c_, admin_, theirs)->task.state, TaskState::kScheduled);
  EXPECT_EQ(Report(agent, "t-999", TaskState::kRunning).error().code, ErrorCode::kNotFound);

  // A user who is not an admin may use no agent call at all.
  const Caller bo = Member();
  auto denied = c_->Heartbeat(bo, "n1", {});
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(denied.error().message.find("only an admin or a node's own agent"), std::string::npos);
  EXPECT_EQ(Register(bo, "n1").error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(Watch(bo, "n1").error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(Report(bo, mine, TaskState::kSucceeded).error().code, ErrorCode::kPermissionDenied);
}

TEST_F(ControllerJoinTest, RevokingATokenRevokesItsCredentialsAndTheirNodesGoLost) {
  const std::string token_a = CreateOk();
  const std::string token_b = CreateOk();
  const Caller n1 = JoinOk(token_a, "n1");
  const Caller n2 = JoinOk(token_a, "n2");
  const Caller n3 = JoinOk(token_b, "n3");
  for (const Caller* agent : {&n1, &n2, &n3}) ASSERT_TRUE(Register(*agent, agent->agent_node));

  auto revoked = Revoke(admin_, IdOf(token_a));
  ASSERT_TRUE(revoked);
  EXPECT_EQ(revoked->nodes, (std::vector<std::string>{"n1", "n2"}));
  for (const Caller* agent : {&n1, &n2}) {
    auto lookup = c_->LookupKey(agent->access_key);
    ASSERT_FALSE(lookup);
    EXPECT_EQ(lookup.error().code, ErrorCode::kUnauthenticated);
    EXPECT_NE(lookup.error().message.find("was revoked with its join token " + IdOf(token_a)),
              std::string::npos)
        << lookup.error().message;
  }
  EXPECT_TRUE(c_->LookupKey(n3.access_key)) << "another token's nodes are untouched";

  // Their agents cannot heartbeat any more (the API refuses their key): after the timeout the
  // nodes are lost, while n3, still heartbeating, stays ready.
  clock_.now_ms += kNodeTimeoutMs + 1;
  ASSERT_TRUE(c_->Heartbeat(n3, "n3", {}));
  c_->HousekeepingPass();
  EXPECT_EQ(c_->GetNode(admin_, "n1")->info.status, NodeStatus::kLost);
  EXPECT_EQ(c_->GetNode(admin_, "n2")->info.status, NodeStatus::kLost);
  EXPECT_EQ(c_->GetNode(admin_, "n3")->info.status, NodeStatus::kReady);

  Reopen();
  EXPECT_FALSE(c_->LookupKey(n1.access_key));
  EXPECT_TRUE(c_->LookupKey(n3.access_key));
}

TEST_F(ControllerJoinTest, ANodeThatJoinsAgainReplacesItsEarlierCredential) {
  const std::string token = CreateOk();
  const Caller first = JoinOk(token, "n1");
  const Caller second = JoinOk(token, "n1");
  ASSERT_NE(first.access_key, second.access_key);
  auto old = c_->LookupKey(first.access_key);
  ASSERT_FALSE(old);
  EXPECT_NE(old.error().message.find("(agent of node n1) was revoked"), std::string::npos)
      << old.error().message;
  EXPECT_EQ(old.error().message.find("join token"), std::string::npos) << old.error().message;
  EXPECT_TRUE(c_->LookupKey(second.access_key));
  EXPECT_TRUE(JoinOk(token, "n2").IsAgent()) << "other nodes keep their own";
  EXPECT_TRUE(c_->LookupKey(second.access_key));
}

}  // namespace
}  // namespace gpupool::server
