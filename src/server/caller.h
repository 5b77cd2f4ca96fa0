// Who makes a request of the control plane's services (resolved by the API from the access key
// or the console session)
// and how the services answer: reads at once, writes through a callback once the change is
// durable (group commit), so that an I/O thread never waits on the disk.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/records.h"
#include "core/result.h"

namespace gpupool::server {

template <typename T>
using Done = std::function<void(Result<T>)>;
using DoneStatus = std::function<void(Status)>;

struct Caller {
  std::string user_id;
  std::string access_key;
  Role role = Role::kMember;
  std::vector<std::string> projects;
  // Set for a node's own agent credential (see JoinNode): it acts only for this node, through the
  // agent routes. Such a caller is no user: user_id is "agent:<node>" (no user id has a ':'),
  // its role member and its projects none.
  std::string agent_node{};
  // Set for a task's own token (GPUPOOL_TASK_TOKEN, see LookupTaskToken): it reads this task's
  // usage and metrics and nothing else. user_id is "task:<id>", its projects none.
  std::string task_id{};

  bool IsAdmin() const { return role == Role::kAdmin; }
  bool IsAgent() const { return !agent_node.empty(); }
  bool IsTask() const { return !task_id.empty(); }
  bool InProject(const std::string& project_id) const;  // admins are in every project
};

// What an access key resolves to; `secret` is the plain secret, for signature checks only.
struct KeyGrant {
  Caller caller;
  std::string secret;
};

// What a console session resolves to: its key's caller, and the token that every request of the
// session but GET and HEAD must carry (X-CSRF-Token).
struct SessionGrant {
  Caller caller;
  std::string csrf_token;
  int64_t expires_ms = 0;
};

// A session just opened; `cookie` is its cookie's value, which the server keeps only as a digest.
struct NewSession {
  std::string cookie;
  SessionGrant grant;
};

}  // namespace gpupool::server
