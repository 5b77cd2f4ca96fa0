// `gpupool openapi`: prints the REST API's OpenAPI 3.1 document (what GET /v1/openapi.json
// serves and docs/openapi.json holds), generated from proto's operations and wire types.
#include <iostream>

#include "cmd/commands.h"
#include "proto/openapi.h"

namespace gpupool::cmd {

void AddOpenApiCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "openapi", "Print the REST API's OpenAPI 3.1 document (regenerates docs/openapi.json)");
  cmd->callback([] { std::cout << proto::OpenApiText(); });
}

}  // namespace gpupool::cmd
