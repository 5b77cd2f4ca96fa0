// Adds the user-facing commands to the `gpupool` binary and maps parse errors to exit status 2
// (see user_commands.h).
#include "cli/user_commands.h"

#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/commands_common.h"

namespace gpupool::cli {

namespace {

// The groups in the order of --help; the most used ones are found first all the same, as each
// group is cheap next to all of them.
constexpr void (*kGroups[])(CLI::App&, int&) = {
    AddLoginCommand,    AddTaskCommands,      AddSnapshotCommands, AddVolumeCommands,
    AddDatasetCommands, AddObserveCommands,   AddFileCommands,     AddExecCommands,
    AddPortCommands,    AddSshCommands,       AddNodeCommands,     AddBillingCommands,
    AddAccountCommands, AddJoinTokenCommands,
};

}  // namespace

void AddUserCommands(CLI::App& app, int& exit_code) {
  for (auto add : kGroups) add(app, exit_code);
}

bool AddUserCommandsFor(CLI::App& app, int& exit_code, std::string_view command) {
  const std::string name(command);
  for (auto add : kGroups) {
    add(app, exit_code);
    if (!name.empty() && name[0] != '-' &&
        !app.get_subcommands([&](CLI::App* sub) { return sub->check_name(name); }).empty()) {
      return true;
    }
  }
  return false;
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
