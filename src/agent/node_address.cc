// Implementation of node_address.h over getaddrinfo(3), connect(2) on a UDP socket and
// getifaddrs(3).
#include "agent/node_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <set>

#include "core/unique_fd.h"

namespace gpupool::agent {
namespace {

// The numeric form of a socket address ("10.0.0.7", "fe80::1"); "" for another family.
std::string Numeric(const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof text);
  } else if (sa->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text, sizeof text);
  }
  return text;
}

}  // namespace

Result<std::string> LocalAddressToward(const std::string& endpoint) {
  const size_t scheme = endpoint.find("://");
  std::string rest = scheme == std::string::npos ? endpoint : endpoint.substr(scheme + 3);
  rest = rest.substr(0, rest.find('/'));
  std::string host = rest;
  std::string port = "80";
  if (!rest.empty() && rest.front() == '[') {  // [v6]:port
    const size_t close = rest.find(']');
    host = rest.substr(1, close == std::string::npos ? std::string::npos : close - 1);
    if (close != std::string::npos && close + 1 < rest.size() && rest[close + 1] == ':') {
      port = rest.substr(close + 2);
    }
  } else if (const size_t colon = rest.rfind(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return MakeError(ErrorCode::kUnavailable, "cannot resolve the server's host '" + host +
                                                  "' of " + endpoint + ": " + ::gai_strerror(rc));
  }
  std::string address;
  for (addrinfo* ai = found; ai != nullptr && address.empty(); ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd.ok() || ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0) continue;
    address = Numeric(reinterpret_cast<const sockaddr*>(&local));
  }
  ::freeaddrinfo(found);
  if (address.empty()) {
    return MakeError(ErrorCode::kUnavailable,
                     "no route from this host toward the server " + endpoint +
                         ": give the node's address with --advertise-addr");
  }
  return address;
}

std::string InterfaceOf(const std::string& address) {
  std::set<std::string> numeric;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(address.c_str(), nullptr, &hints, &found) != 0) return "";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) numeric.insert(Numeric(ai->ai_addr));
  ::freeaddrinfo(found);
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string name;
  for (ifaddrs* i = list; i != nullptr && name.empty(); i = i->ifa_next) {
    if (i->ifa_addr != nullptr && numeric.count(Numeric(i->ifa_addr))) name = i->ifa_name;
  }
  ::freeifaddrs(list);
  return name;
}

}  // namespace gpupool::agent
