// The web console's sessions (docs/api.md "Console sessions"): opened for a user's key by a
// signed login, looked up by the digest of their cookie on every request, together with their
// key (so a revoked key or a changed user takes effect at once), ended by logout, expiry (swept
// by housekeeping) or a newer session of the same key past the cap. In memory only, under
// auth_mu_ (controller.h "Locks").
#include <algorithm>
#include <iterator>
#include <mutex>
#include <string>
#include <utility>

#include "server/controller.h"
#include "server/secrets.h"

namespace gpupool::server {

void Controller::CreateSession(const Caller& caller, int64_t ttl_ms, Done<NewSession> done) {
  if (caller.IsAgent()) {
    return done(MakeError(ErrorCode::kPermissionDenied,
                          "access key " + caller.access_key + " is the agent credential of node " +
                              caller.agent_node + ": agents cannot open console sessions"));
  }
  if (ttl_ms <= 0) {
    return done(MakeError(ErrorCode::kInvalidArgument, "a session's ttl must be positive, got " +
                                                           std::to_string(ttl_ms) + " ms"));
  }
  // Batches commit in order: once this empty one is durable, so is the login's nonce.
  store_.Write(store::WriteBatch{},
               [this, access_key = caller.access_key, ttl_ms, done = std::move(done)](Status s) {
                 if (!s) return done(tl::unexpected(s.error()));
                 done(OpenSession(access_key, ttl_ms));
               });
}

Result<NewSession> Controller::OpenSession(const std::string& access_key, int64_t ttl_ms) {
  NewSession out;
  out.cookie = NewSessionToken();
  out.grant.csrf_token = NewSessionToken();
  const std::string digest = SecretDigest(out.cookie);
  std::lock_guard lock(auth_mu_);
  // The login was verified a moment ago, but the key may have been revoked since.
  Result<KeyGrant> grant = GrantOf(access_key);
  if (!grant) return tl::unexpected(grant.error());
  out.grant.caller = std::move(grant->caller);
  out.grant.expires_ms = clock_.NowMs() + ttl_ms;
  sessions_[digest] = {access_key, out.grant.csrf_token, out.grant.expires_ms};
  std::deque<std::string>& mine = sessions_of_key_[access_key];
  mine.push_back(digest);
  while (mine.size() > options_.max_sessions_per_key) EraseSession(sessions_.find(mine.front()));
  return out;
}

Result<SessionGrant> Controller::LookupSession(const std::string& cookie) {
  const std::string digest = SecretDigest(cookie);
  std::lock_guard lock(auth_mu_);  // not mu_: every request of a session comes here first
  auto it = sessions_.find(digest);
  if (it == sessions_.end() || it->second.expires_ms <= clock_.NowMs()) {
    if (it != sessions_.end()) EraseSession(it);
    return MakeError(ErrorCode::kUnauthenticated,
                     "the console session is unknown or expired: log in again");
  }
  Result<KeyGrant> grant = GrantOf(it->second.access_key);
  if (!grant) {
    // Kept until it expires, so that every request of it (the page's own, in parallel) is told
    // why, not only the first: a revoked key opens no new sessions, so this holds no more.
    return MakeError(grant.error().code,
                     "the console session ended: " + grant.error().message + "; log in again");
  }
  return SessionGrant{std::move(grant->caller), it->second.csrf_token, it->second.expires_ms};
}

void Controller::DeleteSession(const std::string& cookie) {
  const std::string digest = SecretDigest(cookie);
  std::lock_guard lock(auth_mu_);
  if (auto it = sessions_.find(digest); it != sessions_.end()) EraseSession(it);
}

void Controller::EraseSession(SessionMap::iterator it) {
  auto mine = sessions_of_key_.find(it->second.access_key);
  if (mine != sessions_of_key_.end()) {
    std::deque<std::string>& digests = mine->second;
    if (auto pos = std::find(digests.begin(), digests.end(), it->first); pos != digests.end()) {
      digests.erase(pos);
    }
    if (digests.empty()) sessions_of_key_.erase(mine);
  }
  sessions_.erase(it);
}

void Controller::SweepSessions(int64_t now_ms) {
  std::lock_guard lock(auth_mu_);
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    auto next = std::next(it);
    if (it->second.expires_ms <= now_ms) EraseSession(it);
    it = next;
  }
}

}  // namespace gpupool::server
