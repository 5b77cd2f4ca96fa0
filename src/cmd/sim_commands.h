// `gpupool sim …` subcommands: the FGD experiment (`fgd`), the policy comparison (`compare`) and
// the replay on a simulated clock (`replay`). Each lives in its own file; this header wires them.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace gpupool::cmd {

// Adds `sim` and all its subcommands to `app`.
void AddSimCommands(CLI::App& app);

void AddSimFgdCommand(CLI::App& sim);
void AddSimCompareCommand(CLI::App& sim);
void AddSimReplayCommand(CLI::App& sim);

// Prints "gpupool: <message>" to stderr and makes the process exit non-zero.
void Fail(const std::string& message);

// The process exit code set by the command that ran (0 on success).
int ExitCode();

}  // namespace gpupool::cmd
