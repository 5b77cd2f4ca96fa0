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

}  // namespace gpupool
