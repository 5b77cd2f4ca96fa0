// AuthService: what the API asks before any other call — the caller and secret behind an access
// key, and the replay check of a signed request's nonce.
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
  // `durable`: also persist it (mutating requests), ordered before the request's own write.
  virtual Status ConsumeNonce(const std::string& access_key, const std::string& nonce,
                              int64_t timestamp_ms, bool durable) = 0;
};

}  // namespace gpupool::server
