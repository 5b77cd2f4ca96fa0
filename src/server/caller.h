// Who makes a request of the control plane's services (resolved by the API from the access key)
// and how the services answer: reads at once, writes through a callback once the change is
// durable (group commit), so that an I/O thread never waits on the disk.
#pragma once

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

  bool IsAdmin() const { return role == Role::kAdmin; }
  bool IsAgent() const { return !agent_node.empty(); }
  bool InProject(const std::string& project_id) const;  // admins are in every project
};

// What an access key resolves to; `secret` is the plain secret, for signature checks only.
struct KeyGrant {
  Caller caller;
  std::string secret;
};

}  // namespace gpupool::server
