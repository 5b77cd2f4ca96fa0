// `gpupool openapi`: prints the REST API's OpenAPI 3.1 document (what GET /v1/openapi.json
// serves and docs/openapi.json holds), or with --markdown the reference docs/api-reference.md,
// both generated from proto's operations and wire types.
#include <iostream>
#include <memory>

#include "cmd/commands.h"
#include "proto/openapi.h"
#include "proto/reference.h"

namespace gpupool::cmd {

void AddOpenApiCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "openapi", "Print the REST API's OpenAPI 3.1 document (regenerates docs/openapi.json)");
  auto markdown = std::make_shared<bool>(false);
  cmd->add_flag("--markdown", *markdown,
                "The reference for people instead (regenerates docs/api-reference.md)");
  cmd->callback([markdown] {
    std::cout << (*markdown ? proto::ApiReferenceMarkdown() : proto::OpenApiText());
  });
}

}  // namespace gpupool::cmd
