// A task's declared ports (see task_ports.h).
#include "core/task_ports.h"

#include <algorithm>
#include <charconv>

namespace gpupool {

Status ValidateTaskPorts(const std::vector<int32_t>& ports) {
  if (ports.size() > kMaxTaskPorts) {
    return InvalidArgument("ports: at most " + std::to_string(kMaxTaskPorts) + " ports, not " +
                           std::to_string(ports.size()));
  }
  for (size_t i = 0; i < ports.size(); ++i) {
    if (ports[i] < 1 || ports[i] > 65535) {
      return InvalidArgument("ports: " + std::to_string(ports[i]) +
                             " is not a TCP port (1..65535)");
    }
    if (std::find(ports.begin(), ports.begin() + static_cast<std::ptrdiff_t>(i), ports[i]) !=
        ports.begin() + static_cast<std::ptrdiff_t>(i)) {
      return InvalidArgument("ports: " + std::to_string(ports[i]) + " is given twice");
    }
  }
  return {};
}

std::string FormatPortList(const std::vector<int32_t>& ports) {
  std::string out;
  for (int32_t p : ports) {
    if (!out.empty()) out += ',';
    out += std::to_string(p);
  }
  return out;
}

Result<std::vector<int32_t>> ParsePortList(std::string_view text) {
  std::vector<int32_t> ports;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    int32_t port = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), port);
    if (ec != std::errc() || end != item.data() + item.size()) {
      return InvalidArgument("ports: '" + std::string(item) + "' is not a number");
    }
    ports.push_back(port);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) return InvalidArgument("ports: a list must not end with ','");
  }
  if (Status valid = ValidateTaskPorts(ports); !valid) return tl::unexpected(valid.error());
  return ports;
}

std::string GatewayBasePath(std::string_view task_id, int32_t port) {
  return "/t/" + std::string(task_id) + "/" + std::to_string(port) + "/";
}

namespace {

constexpr std::string_view kHostSeparator = "--";

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// A DNS label: 1..63 of a-z, 0-9, '-', not at either end.
bool IsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

// The host of an origin ("http://apps.example.com:8640" → "apps.example.com").
std::string_view OriginHost(std::string_view origin) {
  const size_t scheme = origin.find("://");
  std::string_view rest = scheme == std::string_view::npos ? origin : origin.substr(scheme + 3);
  return rest.substr(0, rest.find(':'));
}

}  // namespace

std::string GatewayPortUrl(std::string_view origin, std::string_view task_id, int32_t port) {
  if (origin.empty()) return GatewayBasePath(task_id, port);
  const size_t scheme = origin.find("://");
  const size_t at = scheme == std::string_view::npos ? 0 : scheme + 3;
  return std::string(origin.substr(0, at)) + std::to_string(port) + std::string(kHostSeparator) +
         std::string(task_id) + "." + std::string(origin.substr(at)) + "/";
}

std::optional<GatewayHost> ParseGatewayHost(std::string_view origin, std::string_view host) {
  const std::string_view domain = OriginHost(origin);
  if (domain.empty()) return std::nullopt;
  std::string name;
  for (char c : host.substr(0, host.find(':'))) name += Lower(c);
  if (name.size() <= domain.size() + 1 || !name.ends_with(domain) ||
      name[name.size() - domain.size() - 1] != '.') {
    return std::nullopt;
  }
  const std::string label = name.substr(0, name.size() - domain.size() - 1);
  const size_t separator = label.find(kHostSeparator);
  if (label.find('.') != std::string::npos || separator == std::string::npos) return std::nullopt;
  GatewayHost target;
  const std::string digits = label.substr(0, separator);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), target.port);
  if (ec != std::errc() || end != digits.data() + digits.size() || target.port < 1 ||
      target.port > 65535) {
    return std::nullopt;
  }
  target.task = label.substr(separator + kHostSeparator.size());
  if (!IsLabel(target.task)) return std::nullopt;
  return target;
}

Result<std::string> GatewayOrigin(std::string_view domain, bool tls) {
  const size_t colon = domain.find(':');
  const std::string_view name = domain.substr(0, colon);
  bool labels_ok = name.find('.') != std::string_view::npos;
  for (size_t start = 0; labels_ok && start <= name.size();) {
    const size_t dot = std::min(name.find('.', start), name.size());
    labels_ok = IsLabel(name.substr(start, dot - start));
    start = dot + 1;
  }
  if (!labels_ok) {
    return InvalidArgument("--gateway-domain '" + std::string(domain) +
                           "' must be a lower-case DNS name of two labels or more "
                           "(apps.example.com), optionally with :PORT");
  }
  if (colon != std::string_view::npos) {
    const std::string_view digits = domain.substr(colon + 1);
    int32_t port = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (ec != std::errc() || end != digits.data() + digits.size() || port < 1 || port > 65535) {
      return InvalidArgument("--gateway-domain '" + std::string(domain) + "': '" +
                             std::string(digits) + "' is not a port (1..65535)");
    }
  }
  return std::string(tls ? "https://" : "http://") + std::string(domain);
}

}  // namespace gpupool
