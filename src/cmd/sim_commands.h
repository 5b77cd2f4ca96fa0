// `gpupool sim …` subcommands: the FGD experiment (`fgd`), the policy comparison (`compare`) and
// the replay on a simulated clock (`replay`). Each lives in its own file; this header wires them.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cmd/commands.h"

namespace gpupool::cmd {

void AddSimFgdCommand(CLI::App& sim);
void AddSimCompareCommand(CLI::App& sim);
void AddSimReplayCommand(CLI::App& sim);

}  // namespace gpupool::cmd
