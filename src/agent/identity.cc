// The agent's identity file and the join (see identity.h).
#include "agent/identity.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

#include "agent/runtime/linux_proc.h"
#include "api/client.h"
#include "api/resources.h"
#include "os/files.h"

namespace gpupool::agent {
namespace {

// identity.json is this agent's own file, not an API body: plain JSON.
using nlohmann::json;

// The string `key` of `j`, or empty when it is missing or not a string.
std::string StringField(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

std::string IdentityPath(const std::string& data_dir) { return data_dir + "/identity.json"; }

Result<std::optional<AgentIdentity>> LoadIdentity(const std::string& data_dir,
                                                  const std::string& node) {
  const std::string path = IdentityPath(data_dir);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<AgentIdentity>();
    return MakeError(ErrorCode::kInternal, "cannot read " + path + ": " + ErrnoText(errno));
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
    return MakeError(ErrorCode::kFailedPrecondition,
                     path + " holds the node's secret key but group or others may access it " +
                         "(mode " + mode + "); chmod 600 it");
  }
  const std::optional<std::string> text = ReadFile(path);
  if (!text) return MakeError(ErrorCode::kInternal, "cannot read " + path);
  const json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  AgentIdentity id;
  if (j.is_object()) {
    id.node = StringField(j, "node");
    id.access_key = StringField(j, "access_key");
    id.secret_key = StringField(j, "secret_key");
    id.join_token_id = StringField(j, "join_token");
  }
  if (id.node.empty() || id.access_key.empty() || id.secret_key.empty()) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     path +
                         " is not an agent identity (node, access_key and secret_key are "
                         "required); remove it to join again with a join token");
  }
  if (id.node != node) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     path + " is the identity of node " + id.node + ", not of " + node +
                         ": run the agent with --name " + id.node + ", or give another data dir");
  }
  return std::optional<AgentIdentity>(std::move(id));
}

Result<AgentIdentity> JoinPool(const std::string& endpoint, const std::string& ca_file,
                               const std::string& join_token, const std::string& node,
                               const std::string& data_dir) {
  // Unsigned: the token is the credential.
  api::Client client(endpoint, "", "", {.ca_file = ca_file});
  Result<proto::AgentCredentials> answer = client.Agent().Join({join_token, node});
  if (!answer) {
    Error e = answer.error();
    e.message = "joining node " + node + " at " + endpoint + ": " + e.message;
    return tl::unexpected(std::move(e));
  }
  AgentIdentity id{.node = node,
                   .access_key = answer->access_key,
                   .secret_key = answer->secret_key,
                   .join_token_id = answer->join_token};
  if (id.access_key.empty() || id.secret_key.empty()) {
    return MakeError(ErrorCode::kInternal, "joining node " + node + " at " + endpoint +
                                               ": the answer has no access_key and secret_key");
  }
  const std::string path = IdentityPath(data_dir);
  const json saved = {{"node", id.node},
                      {"access_key", id.access_key},
                      {"secret_key", id.secret_key},
                      {"join_token", id.join_token_id}};
  if (Status saved_ok = os::WriteFileAtomically(path, saved.dump(2) + "\n", {.mode = 0600});
      !saved_ok) {
    return MakeError(saved_ok.error().code,
                     "node " + node + " joined, but its identity could not be saved (" +
                         saved_ok.error().message +
                         "); fix that and start the agent again to join again");
  }
  return id;
}

Result<AgentIdentity> LoadOrJoin(const std::string& endpoint, const std::string& ca_file,
                                 const std::string& join_token, const std::string& node,
                                 const std::string& data_dir, std::string* how) {
  Result<std::optional<AgentIdentity>> kept = LoadIdentity(data_dir, node);
  if (!kept) return tl::unexpected(kept.error());
  if (*kept) {
    *how = "node " + node + "'s own credentials from " + IdentityPath(data_dir) +
           " (joined with token " + (*kept)->join_token_id + ")";
    return std::move(**kept);
  }
  if (join_token.empty()) {
    return InvalidArgument("no credentials: " + IdentityPath(data_dir) +
                           " does not exist yet; join with a join token (gpupool join-token "
                           "create) or give an admin's access key");
  }
  Result<AgentIdentity> joined = JoinPool(endpoint, ca_file, join_token, node, data_dir);
  if (!joined) return joined;
  *how = "joined the pool with join token " + joined->join_token_id + "; node " + node +
         "'s own credentials are kept in " + IdentityPath(data_dir);
  return joined;
}

}  // namespace gpupool::agent
