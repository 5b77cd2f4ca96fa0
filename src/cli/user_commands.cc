// Adds the user-facing commands to the `gpupool` binary and maps parse errors to exit status 2
// (see user_commands.h).
#include "cli/user_commands.h"

#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/commands_common.h"

namespace gpupool::cli {

void AddUserCommands(CLI::App& app, int& exit_code) {
  AddLoginCommand(app, exit_code);
  AddTaskCommands(app, exit_code);
  AddObserveCommands(app, exit_code);
  AddFileCommands(app, exit_code);
  AddPortCommands(app, exit_code);
  AddNodeCommands(app, exit_code);
  AddBillingCommands(app, exit_code);
  AddAccountCommands(app, exit_code);
  AddJoinTokenCommands(app, exit_code);
}

int ParseErrorExit(CLI::App& app, const CLI::ParseError& error) {
  if (error.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
    return app.exit(error);  // --help, --help-all, --version
  }
  std::string command = "gpupool";
  const CLI::App* current = &app;
  for (;;) {
    const std::vector<CLI::App*> selected = current->get_subcommands();
    if (selected.empty()) break;
    current = selected.front();
    command += " " + current->get_name();
  }
  // Parsing stopped before the command's --json callback could run: look for the flag itself.
  const CLI::Option* json = current->get_option_no_throw("--json");
  if (json != nullptr && json->count() > 0) {
    SetJsonErrors(true);
    return UsageError(error.what() + std::string(" (run '") + command + " --help' for usage)");
  }
  std::cerr << "gpupool: " << error.what() << "\n"
            << "Run '" << command << " --help' for usage.\n";
  return kExitUsage;
}

}  // namespace gpupool::cli
