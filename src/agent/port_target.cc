// Where a task's port is reached (see port_target.h).
#include "agent/port_target.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <fstream>
#include <sstream>

#include "core/unique_fd.h"

namespace gpupool::agent {
namespace {

// /proc/net/tcp's hex address: IPv4 as one little-endian 32-bit word, IPv6 as four of them.
std::string AddressOf(std::string_view hex, bool v6) {
  unsigned char bytes[16] = {};
  const size_t n = v6 ? 16 : 4;
  if (hex.size() != 2 * n) return "";
  for (size_t word = 0; word < n / 4; ++word) {
    uint32_t value = 0;
    const std::string_view part = hex.substr(word * 8, 8);
    if (std::from_chars(part.data(), part.data() + 8, value, 16).ec != std::errc()) return "";
    // The kernel prints each 32-bit word in host (little-endian) order.
    for (int b = 0; b < 4; ++b) bytes[word * 4 + b] = static_cast<unsigned char>(value >> (8 * b));
  }
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(v6 ? AF_INET6 : AF_INET, bytes, text, sizeof(text)) == nullptr) return "";
  return text;
}

// The kernel's listening TCP sockets of one family through sock_diag (what ss(8) asks): only
// they come back, however many connections the node has, where /proc/net/tcp formats every one
// of them (thousands in TIME_WAIT on a busy gateway). nullopt where sock_diag is unavailable.
std::optional<std::vector<ListeningSocket>> ListeningByNetlink(bool v6) {
  const UniqueFd fd(socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!fd.ok()) return std::nullopt;
  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } ask{};
  ask.header.nlmsg_len = sizeof ask;
  ask.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  ask.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  ask.request.sdiag_family = v6 ? AF_INET6 : AF_INET;
  ask.request.sdiag_protocol = IPPROTO_TCP;
  ask.request.idiag_states = 1u << TCP_LISTEN;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd.get(), &ask, sizeof ask, 0, reinterpret_cast<const sockaddr*>(&kernel),
             sizeof kernel) < 0) {
    return std::nullopt;
  }
  std::vector<ListeningSocket> out;
  alignas(nlmsghdr) char buffer[32 * 1024];
  while (true) {
    const ssize_t got = recv(fd.get(), buffer, sizeof buffer, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return std::nullopt;
    int left = static_cast<int>(got);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buffer); NLMSG_OK(h, left);
         h = NLMSG_NEXT(h, left)) {
      if (h->nlmsg_type == NLMSG_DONE) return out;
      if (h->nlmsg_type == NLMSG_ERROR) return std::nullopt;
      const auto* d = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
      char text[INET6_ADDRSTRLEN] = {};
      if (inet_ntop(v6 ? AF_INET6 : AF_INET, d->id.idiag_src, text, sizeof text) == nullptr) {
        continue;
      }
      out.push_back({text, ntohs(d->id.idiag_sport), static_cast<uid_t>(d->idiag_uid)});
    }
  }
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::vector<ListeningSocket> ParseListeningSockets(std::string_view text, bool v6) {
  std::vector<ListeningSocket> out;
  std::istringstream lines{std::string(text)};
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits;
    uid_t uid = 0;
    if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid)) {
      continue;
    }
    if (state != "0A") continue;  // TCP_LISTEN
    const size_t colon = local.find(':');
    if (colon == std::string::npos) continue;
    uint32_t port = 0;
    const std::string_view port_hex = std::string_view(local).substr(colon + 1);
    if (std::from_chars(port_hex.data(), port_hex.data() + port_hex.size(), port, 16).ec !=
        std::errc()) {
      continue;
    }
    ListeningSocket s;
    s.address = AddressOf(std::string_view(local).substr(0, colon), v6);
    if (s.address.empty()) continue;
    s.port = static_cast<uint16_t>(port);
    s.uid = uid;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<ListeningSocket> ListListeningSockets(bool v6) {
  if (auto sockets = ListeningByNetlink(v6)) return std::move(*sockets);
  return ParseListeningSockets(ReadAll(v6 ? "/proc/net/tcp6" : "/proc/net/tcp"), v6);
}

std::string DialAddress(const std::string& listening_address) {
  if (listening_address == "0.0.0.0") return "127.0.0.1";
  if (listening_address == "::") return "::1";
  return listening_address;
}

Result<PortTarget> ResolveTaskPort(const RuntimeRouter& runtime, const std::string& task,
                                   int32_t port) {
  const Result<RunningTask> it = runtime.RunningTaskOf(task);
  if (!it) return tl::unexpected(it.error());
  if (!it->container.empty()) {
    if (runtime.docker() == nullptr) return NotFound("task " + task + " does not run on this node");
    Result<std::string> address = runtime.docker()->Address(task);
    if (!address) return tl::unexpected(address.error());
    return PortTarget{*address, static_cast<uint16_t>(port)};
  }
  // A process task: a socket of its uid listening on the port. IPv4 first (what most apps bind).
  for (const bool v6 : {false, true}) {
    for (const ListeningSocket& s : ListListeningSockets(v6)) {
      if (s.port == port && s.uid == it->uid) {
        return PortTarget{DialAddress(s.address), static_cast<uint16_t>(port)};
      }
    }
  }
  return MakeError(ErrorCode::kFailedPrecondition, "nothing of task " + task + " listens on port " +
                                                       std::to_string(port) + " (yet?)");
}

}  // namespace gpupool::agent
