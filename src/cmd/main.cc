// gpupool: one binary, subcommands. Wiring only: parse flags, call the modules, print.
#include <CLI/CLI.hpp>

#include "cmd/sim_commands.h"

int main(int argc, char** argv) {
  CLI::App app{"gpupool: a self-hosted GPU compute cloud"};
  app.require_subcommand(1);
  gpupool::cmd::AddSimCommands(app);
  CLI11_PARSE(app, argc, argv);
  return gpupool::cmd::ExitCode();
}
