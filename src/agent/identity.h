// The agent's own identity: the access key and secret a node gets when it joins the pool with a
// join token (POST /v1/agent/join), kept in DATA_DIR/identity.json (0600) so that a restarted
// agent reuses it and needs the token only at its first start.
#pragma once

#include <optional>
#include <string>

#include "core/result.h"

namespace gpupool::agent {

struct AgentIdentity {
  std::string node;
  std::string access_key;
  std::string secret_key;
  std::string join_token_id;  // the token the node joined with
};

// DATA_DIR/identity.json.
std::string IdentityPath(const std::string& data_dir);

// The identity kept in `data_dir`; nullopt when there is none. An error, naming the file, when it
// cannot be read, is readable or writable by group or others, is malformed, or belongs to another
// node than `node` (its credentials would be refused for this one).
Result<std::optional<AgentIdentity>> LoadIdentity(const std::string& data_dir,
                                                  const std::string& node);

// Joins node `node` at `endpoint` ("http://host:port", or https verified against `ca_file` or
// the system's store when it is empty) with `join_token` and keeps the answer in `data_dir`
// (written atomically, 0600) before returning it. The server's refusal (an unknown, revoked or
// expired token: kUnauthenticated) comes back with its message.
Result<AgentIdentity> JoinPool(const std::string& endpoint, const std::string& ca_file,
                               const std::string& join_token, const std::string& node,
                               const std::string& data_dir);

// What the agent starts with when it has no admin key: the identity kept in `data_dir`, or else a
// join with `join_token` (kInvalidArgument saying how to get one when that is empty too). A kept
// identity wins over the token, which is only for the first start. `how` gets a line for the
// banner saying which it was.
Result<AgentIdentity> LoadOrJoin(const std::string& endpoint, const std::string& ca_file,
                                 const std::string& join_token, const std::string& node,
                                 const std::string& data_dir, std::string* how);

}  // namespace gpupool::agent
