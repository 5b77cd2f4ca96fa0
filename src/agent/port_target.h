// Where the agent reaches a task's port for the tunnel's `port` streams (tunnel_agent.h): a
// docker task's container address, or for a process task (which shares the node's network) the
// local address of a socket listening on the port that belongs to the task's own uid — so a task
// never reaches another task's port, nor a service of the node, by declaring its number.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/runtime/runtime_router.h"
#include "agent/tunnel_agent.h"
#include "core/result.h"

namespace gpupool::agent {

// A listening TCP socket as /proc/net/tcp (or tcp6) lists it.
struct ListeningSocket {
  std::string address;  // the local address: "127.0.0.1", "0.0.0.0", "::1", "::"
  uint16_t port = 0;
  uid_t uid = 0;
};

// The LISTEN entries of one /proc/net/tcp or /proc/net/tcp6 text (`v6` for the latter).
std::vector<ListeningSocket> ParseListeningSockets(std::string_view text, bool v6);

// This host's listening TCP sockets of IPv6 (`v6`) or IPv4: from the kernel's sock_diag, or
// where that is unavailable from /proc/net/tcp[6].
std::vector<ListeningSocket> ListListeningSockets(bool v6);

// Where to dial a socket listening on `address` ("0.0.0.0" → 127.0.0.1, "::" → ::1).
std::string DialAddress(const std::string& listening_address);

// The target of task `task`'s port `port` on this node: kNotFound when the task does not run
// here, kFailedPrecondition when nothing of the task listens there (or the container has no
// address of its own).
Result<PortTarget> ResolveTaskPort(const RuntimeRouter& runtime, const std::string& task,
                                   int32_t port);

}  // namespace gpupool::agent
