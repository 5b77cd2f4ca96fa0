// JSON <-> telemetry for the REST API (docs/api.md, "Telemetry"): the agent's batch (strictly
// parsed; task output travels as base64, metric lines are parsed here, one value map per
// complete line) and the renderings of logs, metrics histories and the usage overview.
#pragma once

#include <cstdint>

#include "api/json_mapping.h"
#include "server/control_plane.h"

namespace gpupool::api {

// POST /v1/agent/nodes/{name}/telemetry. Malformed metric lines are skipped (a task's file is
// its own business); everything else malformed is an error naming the field.
Result<server::NodeTelemetry> ParseNodeTelemetry(const Json& body, const std::string& node);

Json ToJson(const std::vector<server::OutputOffsets>& offsets);  // {"tasks": [...]}
Json ToJson(const server::LogSlice& slice, server::OutputStream stream);
Json ToJson(const server::TaskMetrics& metrics);
Json ToJson(const server::NodeMetrics& metrics);
Json ToJson(const server::UsageOverview& overview);

}  // namespace gpupool::api
