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

// --typical-coverage PCT of `sim fgd` and `sim compare`: how much of the pod list the typical
// tasks cover (fragmentation-aware policies read them).
void AddTypicalCoverageOption(CLI::App& command, double& pct);

}  // namespace gpupool::cmd
