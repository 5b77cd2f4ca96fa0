// `gpupool sim …` subcommands: the FGD experiment, the policy comparison and the replay.
#pragma once

#include <CLI/CLI.hpp>

namespace gpupool::cmd {

void AddSimCommands(CLI::App& app);

// The process exit code set by the command that ran (0 on success).
int ExitCode();

}  // namespace gpupool::cmd
