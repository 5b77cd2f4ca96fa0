// The user-facing `gpupool` commands (submit, ls, show, stop, rm, events, logs, top, cp, nodes,
// node, usage, bill, project, user, key, price, credit, join-token, login), talking to the server
// over the signed REST API. main() adds them and turns their outcome into the process's exit
// status.
#pragma once

#include <CLI/CLI.hpp>
#include <string_view>

namespace gpupool::cli {

// Adds the commands to `app`. The command that runs leaves its exit status in `exit_code`
// (which must outlive app.parse): 0, 1 when the server, the network or the configuration failed,
// 2 for a usage error found after parsing (a malformed value, two exclusive flags). Errors are
// printed to stderr as "gpupool: <message>".
void AddUserCommands(CLI::App& app, int& exit_code);
// The same, but stopping after the group of commands that defines `command` (argv[1]): setting
// up every command's options costs more CPU than a submission itself (docs/benchmarks.md "CLI
// cost"), so an invocation registers what it runs. Returns whether `command` was found; when not
// (an option such as --help, a server command, a typo), every group is registered.
bool AddUserCommandsFor(CLI::App& app, int& exit_code, std::string_view command);

// The exit status for a CLI11 parse error: help and version requests are printed (stdout) and
// give 0; anything else is printed as "gpupool: <message>" with a hint to --help and gives 2.
int ParseErrorExit(CLI::App& app, const CLI::ParseError& error);

}  // namespace gpupool::cli
