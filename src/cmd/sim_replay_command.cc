// `gpupool sim replay`: placeholder until the replay lands.
#include "cmd/sim_commands.h"

namespace gpupool::cmd {
void AddSimReplayCommand(CLI::App&) {}
}  // namespace gpupool::cmd
