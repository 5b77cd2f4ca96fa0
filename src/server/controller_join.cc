// Controller: join tokens (create, list, revoke), the join that exchanges one for a node's own
// agent credential, and what such a credential may do: act for its own node through the agent
// routes, and nothing else.
#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

#include "server/controller.h"

namespace gpupool::server {

// ---------------------------------------------------------------------------------------------
// Who may use the agent routes.

Status Controller::RequireAgent(const Caller& caller) const {
  if (caller.IsAdmin() || caller.IsAgent()) return {};
  return MakeError(ErrorCode::kPermissionDenied,
                   "only an admin or a node's own agent may use the agent routes; user " +
                       caller.user_id + " is a member");
}

Status Controller::RequireAgentOf(const Caller& caller, const std::string& node,
                                  const std::string& what) const {
  if (auto ok = RequireAgent(caller); !ok) return ok;
  if (caller.IsAdmin() || caller.agent_node == node) return {};
  return MakeError(ErrorCode::kPermissionDenied,
                   "the agent credential of node " + caller.agent_node +
                       " acts only for that node; it may not " + what);
}

Result<KeyGrant> Controller::AgentGrant(const AccessKey& key) const {
  const std::string who = "access key " + key.access_key + " (agent of node " + key.node + ")";
  if (key.revoked_ms != 0) {
    auto token = join_tokens_.find(key.join_token_id);
    const bool with_token = token != join_tokens_.end() && token->second.revoked_ms != 0;
    return MakeError(
        ErrorCode::kUnauthenticated,
        who + " was revoked" + (with_token ? " with its join token " + key.join_token_id : ""));
  }
  KeyGrant grant;
  grant.caller = Caller{.user_id = "agent:" + key.node,
                        .access_key = key.access_key,
                        .role = Role::kMember,
                        .projects = {},
                        .agent_node = key.node};
  grant.secret = plain_secrets_.at(key.access_key);
  return grant;
}

// ---------------------------------------------------------------------------------------------
// Join tokens.

JoinTokenView Controller::MakeJoinTokenView(const JoinToken& token, int64_t now_ms) const {
  JoinTokenView v;
  v.token = token;
  v.token.secret_digest.clear();  // never leaves the server
  v.expired = token.expires_ms > 0 && now_ms >= token.expires_ms;
  std::set<std::string> nodes;
  for (const auto& [ak, k] : keys_) {
    if (k.join_token_id == token.id) nodes.insert(k.node);
  }
  v.nodes.assign(nodes.begin(), nodes.end());
  return v;
}

void Controller::CreateJoinToken(const Caller& caller, std::string description,
                                 int64_t expires_in_ms, Done<NewJoinToken> done) {
  if (expires_in_ms < 0) {
    return done(InvalidArgument("expires_in_ms must be ≥ 0 (0: never), got " +
                                std::to_string(expires_in_ms)));
  }
  std::unique_lock lock(mu_);
  if (auto ok = RequireAdmin(caller); !ok) return lock.unlock(), done(tl::unexpected(ok.error()));
  const int64_t now = clock_.NowMs();
  const std::string secret = NewSecretKey();
  JoinToken token{.id = NewJoinTokenId(),
                  .secret_digest = SecretDigest(secret),
                  .description = std::move(description),
                  .created_by = caller.user_id,
                  .created_ms = now,
                  .expires_ms = expires_in_ms > 0 ? now + expires_in_ms : 0};
  {
    std::lock_guard auth(auth_mu_);
    join_tokens_[token.id] = token;
  }
  NewJoinToken created{.view = MakeJoinTokenView(token, now), .token = token.id + "." + secret};
  store::WriteBatch batch;
  Audit(caller, "join_token.create", token.id,
        token.expires_ms > 0 ? "expires " + std::to_string(token.expires_ms) : "never expires",
        batch);
  batch.join_tokens.push_back(std::move(token));
  Commit(std::move(batch), [done = std::move(done), created = std::move(created)](Status) mutable {
    done(std::move(created));
  });
}

Result<std::vector<JoinTokenView>> Controller::ListJoinTokens(const Caller& caller) {
  std::lock_guard lock(mu_);
  if (auto ok = RequireAdmin(caller); !ok) return tl::unexpected(ok.error());
  const int64_t now = clock_.NowMs();
  std::vector<JoinTokenView> out;
  for (const auto& [id, t] : join_tokens_) out.push_back(MakeJoinTokenView(t, now));
  std::stable_sort(out.begin(), out.end(), [](const JoinTokenView& a, const JoinTokenView& b) {
    return a.token.created_ms < b.token.created_ms;
  });
  return out;
}

void Controller::RevokeJoinToken(const Caller& caller, const std::string& id,
                                 Done<JoinTokenView> done) {
  std::unique_lock lock(mu_);
  if (auto ok = RequireAdmin(caller); !ok) return lock.unlock(), done(tl::unexpected(ok.error()));
  auto it = join_tokens_.find(id);
  if (it == join_tokens_.end()) {
    lock.unlock();
    return done(NotFound("join token " + id + " not found"));
  }
  const int64_t now = clock_.NowMs();
  JoinToken& token = it->second;
  store::WriteBatch batch;
  {
    std::lock_guard auth(auth_mu_);
    if (token.revoked_ms == 0) token.revoked_ms = now;
    // The credentials minted with it go too: their agents' next requests are refused.
    for (auto& [ak, k] : keys_) {
      if (k.join_token_id != id || k.revoked_ms != 0) continue;
      k.revoked_ms = token.revoked_ms;
      plain_secrets_.erase(ak);
      batch.access_keys.push_back(k);
    }
  }
  batch.join_tokens.push_back(token);
  Audit(caller, "join_token.revoke", id,
        std::to_string(batch.access_keys.size()) + " node credential" +
            (batch.access_keys.size() == 1 ? "" : "s") + " revoked with it",
        batch);
  JoinTokenView view = MakeJoinTokenView(token, now);
  Commit(std::move(batch), [done = std::move(done), view = std::move(view)](Status) mutable {
    done(std::move(view));
  });
}

void Controller::JoinNode(const std::string& token_text, const std::string& node,
                          Done<AgentCredentials> done) {
  if (node.empty()) return done(InvalidArgument("node is required"));
  const size_t dot = token_text.find('.');
  if (dot == 0 || dot == std::string::npos || dot + 1 == token_text.size()) {
    return done(
        InvalidArgument("token must be '<id>.<secret>', as gpupool join-token create printed it"));
  }
  const std::string id = token_text.substr(0, dot);
  const std::string_view secret = std::string_view(token_text).substr(dot + 1);
  std::unique_lock lock(mu_);
  const int64_t now = clock_.NowMs();
  auto it = join_tokens_.find(id);
  std::string refused;
  if (it == join_tokens_.end()) {
    refused = "unknown join token " + id;
  } else if (!MatchesDigest(secret, it->second.secret_digest)) {
    refused = "the secret of join token " + id + " does not match";
  } else if (it->second.revoked_ms != 0) {
    refused = "join token " + id + " was revoked";
  } else if (it->second.expires_ms > 0 && now >= it->second.expires_ms) {
    refused = "join token " + id + " expired at " + std::to_string(it->second.expires_ms) +
              " (ms since the epoch)";
  }
  if (!refused.empty()) {
    lock.unlock();
    return done(MakeError(ErrorCode::kUnauthenticated, std::move(refused)));
  }

  store::WriteBatch batch;
  std::lock_guard auth(auth_mu_);  // until the new credential is in place
  // One identity per node: a node that joins again (say, its data dir was lost) replaces the
  // credentials it had, so two agents never act for one node.
  for (auto& [ak, k] : keys_) {
    if (k.node != node || k.revoked_ms != 0) continue;
    k.revoked_ms = now;
    plain_secrets_.erase(ak);
    batch.access_keys.push_back(k);
  }
  AgentCredentials creds;
  creds.secret = NewSecretKey();
  creds.key = AccessKey{.access_key = NewAccessKeyId(),
                        .user_id = "",
                        .sealed_secret = secrets_.Seal(creds.secret),
                        .description = "agent of node " + node,
                        .created_ms = now,
                        .node = node,
                        .join_token_id = id};
  keys_[creds.key.access_key] = creds.key;
  plain_secrets_[creds.key.access_key] = creds.secret;
  batch.access_keys.push_back(creds.key);
  creds.key.sealed_secret.clear();
  Commit(std::move(batch), [done = std::move(done), creds = std::move(creds)](Status) mutable {
    done(std::move(creds));
  });
}

}  // namespace gpupool::server
