// JSON <-> join tokens and agent credentials for the REST API (docs/api.md, "Join tokens"): the
// request bodies of POST /v1/join-tokens and POST /v1/agent/join, read strictly with FieldReader,
// and the rendering of tokens (never their secret) and of the credentials a join hands out.
#pragma once

#include <cstdint>
#include <string>

#include "api/json_mapping.h"
#include "core/result.h"
#include "server/control_plane.h"

namespace gpupool::api {

// Longest join token text accepted ("JT" + 16 + "." + 40 characters as minted; room to spare).
inline constexpr size_t kMaxJoinTokenBytes = 256;
// The longest expiry a token may have: ten years.
inline constexpr int64_t kMaxJoinTokenExpiryMs = int64_t{10} * 365 * 24 * 3600 * 1000;

struct JoinTokenRequest {
  std::string description;
  int64_t expires_in_ms = 0;  // 0: never expires
};
// POST /v1/join-tokens: an optional description and expires_in_ms.
Result<JoinTokenRequest> ParseJoinTokenRequest(const Json& body);

struct JoinRequest {
  std::string token;
  std::string node;
};
// POST /v1/agent/join: token and node, both required.
Result<JoinRequest> ParseJoinRequest(const Json& body);

// A token as admins see it, with its state ("active", "expired" or "revoked") and the nodes that
// joined with it.
Json ToJson(const server::JoinTokenView& view);
// The same with "token": the text agents join with, shown once.
Json ToJson(const server::NewJoinToken& created);
// A join's answer: the node's access key and secret key, shown once.
Json ToJson(const server::AgentCredentials& credentials);

}  // namespace gpupool::api
