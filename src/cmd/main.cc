// gpupool: one binary, subcommands. Wiring only: parse flags, call the modules, print.
#include <CLI/CLI.hpp>

#include "cli/user_commands.h"
#include "cmd/commands.h"
#include "os/openssl_init.h"

int main(int argc, char** argv) {
  CLI::App app{"gpupool: a self-hosted GPU compute cloud"};
  app.require_subcommand(1);
  int cli_exit_code = 0;
  // A user command registers only its group (the CPU of a CLI invocation is mostly the setup of
  // every command's options); anything else — help, the server's commands, a typo — all of them.
  const bool user_command =
      argc >= 2 && gpupool::cli::AddUserCommandsFor(app, cli_exit_code, argv[1]);
  if (user_command) {
    gpupool::os::InitOpenSslForClient();
  } else {
    gpupool::cmd::AddSimCommands(app);
    gpupool::cmd::AddServerCommand(app);
    gpupool::cmd::AddAgentCommand(app);
    gpupool::cmd::AddUpCommand(app);
    gpupool::cmd::AddOpenApiCommand(app);
    if (argc < 2) gpupool::cli::AddUserCommands(app, cli_exit_code);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return gpupool::cli::ParseErrorExit(app, e);  // --help: 0; otherwise "gpupool: …", exit 2
  }
  return cli_exit_code != 0 ? cli_exit_code : gpupool::cmd::ExitCode();
}
