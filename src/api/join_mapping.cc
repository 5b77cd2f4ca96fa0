// JSON <-> join tokens and agent credentials (see join_mapping.h).
#include "api/join_mapping.h"

#include <string_view>
#include <utility>

namespace gpupool::api {
namespace {

std::string_view StateOf(const server::JoinTokenView& v) {
  if (v.token.revoked_ms != 0) return "revoked";
  return v.expired ? "expired" : "active";
}

}  // namespace

Result<JoinTokenRequest> ParseJoinTokenRequest(const Json& body) {
  JoinTokenRequest request;
  FieldReader r(body);
  r.Allow({"description", "expires_in_ms"});
  r.String("description", &request.description, false, 1024);
  r.Int("expires_in_ms", &request.expires_in_ms, false, 0, kMaxJoinTokenExpiryMs);
  if (!r.ok()) return tl::unexpected(r.error());
  return request;
}

Result<JoinRequest> ParseJoinRequest(const Json& body) {
  JoinRequest request;
  FieldReader r(body);
  r.Allow({"token", "node"});
  r.String("token", &request.token, true, kMaxJoinTokenBytes);
  r.Identifier("node", &request.node, true);
  if (!r.ok()) return tl::unexpected(r.error());
  return request;
}

Json ToJson(const server::JoinTokenView& v) {
  const JoinToken& t = v.token;
  return {{"id", t.id},
          {"description", t.description},
          {"created_by", t.created_by},
          {"created_ms", t.created_ms},
          {"expires_ms", t.expires_ms},
          {"revoked_ms", t.revoked_ms},
          {"state", StateOf(v)},
          {"nodes", v.nodes}};
}

Json ToJson(const server::NewJoinToken& created) {
  Json j = ToJson(created.view);
  j["token"] = created.token;
  return j;
}

Json ToJson(const server::AgentCredentials& c) {
  return {{"node", c.key.node},
          {"access_key", c.key.access_key},
          {"secret_key", c.secret},
          {"join_token", c.key.join_token_id},
          {"created_ms", c.key.created_ms}};
}

}  // namespace gpupool::api
