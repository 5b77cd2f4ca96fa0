// FakeControlPlane's join tokens and joins (see fake_control_plane.h).
#include "api/fake_control_plane.h"

namespace gpupool::api::testing {

void FakeControlPlane::CreateJoinToken(const server::Caller& caller, std::string description,
                                       int64_t expires_in_ms,
                                       server::Done<server::NewJoinToken> done) {
  server::NewJoinToken created;
  {
    std::lock_guard lock(mu_);
    Record("CreateJoinToken", &caller);
    last_join_token_request_ = {description, expires_in_ms};
    const std::string n = std::to_string(next_id_++);
    created.view.token.id = "JTFAKE" + n;
    created.view.token.description = std::move(description);
    created.view.token.created_by = caller.user_id;
    created.view.token.created_ms = 1000;
    created.view.token.expires_ms = expires_in_ms > 0 ? 1000 + expires_in_ms : 0;
    created.token = created.view.token.id + ".secret" + n;
    join_tokens_[created.view.token.id] = created;
  }
  Finish([done = std::move(done), created]() { done(created); });
}

Result<std::vector<server::JoinTokenView>> FakeControlPlane::ListJoinTokens(
    const server::Caller& caller) {
  std::lock_guard lock(mu_);
  Record("ListJoinTokens", &caller);
  std::vector<server::JoinTokenView> out;
  for (const auto& [id, t] : join_tokens_) out.push_back(t.view);
  return out;
}

void FakeControlPlane::RevokeJoinToken(const server::Caller& caller, const std::string& id,
                                       server::Done<server::JoinTokenView> done) {
  Result<server::JoinTokenView> result = NotFound("join token " + id + " not found");
  {
    std::lock_guard lock(mu_);
    Record("RevokeJoinToken", &caller);
    if (auto it = join_tokens_.find(id); it != join_tokens_.end()) {
      it->second.view.token.revoked_ms = 2000;
      result = it->second.view;
    }
  }
  Finish([done = std::move(done), result]() { done(result); });
}

void FakeControlPlane::JoinNode(const std::string& token, const std::string& node,
                                server::Done<server::AgentCredentials> done) {
  Result<server::AgentCredentials> result =
      MakeError(ErrorCode::kUnauthenticated, "unknown join token");
  {
    std::lock_guard lock(mu_);
    Record("JoinNode");
    last_join_ = {token, node};
    for (auto& [id, t] : join_tokens_) {
      if (t.token != token || t.view.token.revoked_ms != 0) continue;
      const std::string n = std::to_string(next_id_++);
      server::AgentCredentials creds;
      creds.key.access_key = "AKAGENT" + n;
      creds.key.node = node;
      creds.key.join_token_id = id;
      creds.key.created_ms = 1000;
      creds.secret = "agent-secret-" + n;
      t.view.nodes.push_back(node);
      KeyEntry& e = keys_[creds.key.access_key];
      e.key = creds.key;
      e.secret = creds.secret;
      e.caller = server::Caller{.user_id = "agent:" + node,
                                .access_key = creds.key.access_key,
                                .role = Role::kMember,
                                .projects = {},
                                .agent_node = node};
      result = creds;
      break;
    }
  }
  Finish([done = std::move(done), result]() { done(result); });
}

std::pair<std::string, int64_t> FakeControlPlane::last_join_token_request() const {
  std::lock_guard lock(mu_);
  return last_join_token_request_;
}

std::pair<std::string, std::string> FakeControlPlane::last_join() const {
  std::lock_guard lock(mu_);
  return last_join_;
}

}  // namespace gpupool::api::testing
