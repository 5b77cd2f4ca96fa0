// Where other nodes reach this one (a distributed job's MASTER_ADDR and member hosts), and the
// network interface that carries it (NCCL_SOCKET_IFNAME): the agent's --advertise-addr, or the
// local address of the route toward the server.
#pragma once

#include <string>

#include "core/result.h"

namespace gpupool::agent {

// The local IP address this host would use to reach the host of `endpoint`
// ("http(s)://host:port"): a UDP socket connected toward it (nothing is sent), then its own
// address. Errors name the endpoint.
Result<std::string> LocalAddressToward(const std::string& endpoint);

// The name of the interface that holds `address` (an IP address, or a host name resolved to
// one); "" when no interface of this host holds it.
std::string InterfaceOf(const std::string& address);

}  // namespace gpupool::agent
