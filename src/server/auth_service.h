// AuthService: what the API asks before any other call — the caller and secret behind an access
// key, the replay check of a signed request's nonce, and the web console's sessions (opened by a
// signed login, then presented as a cookie; docs/api.md "Console sessions").
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"
#include "server/caller.h"

namespace gpupool::server {

class AuthService {
 public:
  virtual ~AuthService() = default;

  // The caller and plain secret of an active key; kUnauthenticated when unknown or revoked
  // (the message says which).
  virtual Result<KeyGrant> LookupKey(const std::string& access_key) = 0;
  // Records a request nonce; kUnauthenticated when this (key, nonce) was seen within the window.
  // Refused, with Error::retry_after_ms and nothing recorded (the same request may be sent
  // again), when the key is past its request rate (kResourceExhausted) or the cache is full
  // (kUnavailable). `durable`: also persist it (mutating requests), ordered before the request's
  // own write.
  virtual Status ConsumeNonce(const std::string& access_key, const std::string& nonce,
                              int64_t timestamp_ms, bool durable) = 0;

  // Opens a console session acting as `caller`'s key for `ttl_ms`, once every write queued
  // before it is durable (the login's nonce: a login replayed after a crash is refused). Sessions
  // live in memory only (a restart ends them), at most a few per key (the oldest is dropped).
  // kPermissionDenied for an agent's credential, kUnauthenticated when the key is no longer
  // active.
  virtual void CreateSession(const Caller& caller, int64_t ttl_ms, Done<NewSession> done) = 0;
  // The live session whose cookie value is `cookie`, with its key's caller as of now (a revoked
  // key or a changed user takes effect at once). kUnauthenticated, saying why, when the session is
  // unknown or expired or its key no longer active; such a session is gone afterwards.
  virtual Result<SessionGrant> LookupSession(const std::string& cookie) = 0;
  // Ends the session whose cookie value is `cookie` (logout); none such: nothing happens.
  virtual void DeleteSession(const std::string& cookie) = 0;

  // A task's own credential (GPUPOOL_TASK_TOKEN, issued with its assignment): the caller it
  // stands for (Caller::task_id set), while the binding it was issued for lasts — the task holds
  // resources with that bound_ms. kUnauthenticated, saying why, for a token that is malformed, not
  // the server's (its MAC does not verify), or of a binding that ended.
  virtual Result<Caller> LookupTaskToken(const std::string& token) = 0;
};

}  // namespace gpupool::server
