// A task's declared TCP ports (gpupool submit --port; docs/api.md "The gateway"): their rules,
// their stored form, and the gateway's path and the environment variables each port gives the
// task. Pure string rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpupool {

inline constexpr size_t kMaxTaskPorts = 16;

// 1..65535 each, at most kMaxTaskPorts, no port twice. kInvalidArgument names the field "ports"
// and the offending value.
Status ValidateTaskPorts(const std::vector<int32_t>& ports);

// "8888,6006" ("" for none), and back; the parse refuses what ValidateTaskPorts refuses.
std::string FormatPortList(const std::vector<int32_t>& ports);
Result<std::vector<int32_t>> ParsePortList(std::string_view text);

// The gateway's path of a task's port, with the trailing slash: "/t/t-1/8888/". The app serves
// below it (its base path).
std::string GatewayBasePath(std::string_view task_id, int32_t port);

}  // namespace gpupool
