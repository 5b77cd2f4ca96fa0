// gpupool: one binary, subcommands. Wiring only: parse flags, call the modules, print.
#include <CLI/CLI.hpp>

#include "cli/user_commands.h"
#include "cmd/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"gpupool: a self-hosted GPU compute cloud"};
  app.require_subcommand(1);
  int cli_exit_code = 0;
  gpupool::cmd::AddSimCommands(app);
  gpupool::cmd::AddServerCommand(app);
  gpupool::cmd::AddAgentCommand(app);
  gpupool::cmd::AddUpCommand(app);
  gpupool::cmd::AddOpenApiCommand(app);
  gpupool::cli::AddUserCommands(app, cli_exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return gpupool::cli::ParseErrorExit(app, e);  // --help: 0; otherwise "gpupool: …", exit 2
  }
  return cli_exit_code != 0 ? cli_exit_code : gpupool::cmd::ExitCode();
}
