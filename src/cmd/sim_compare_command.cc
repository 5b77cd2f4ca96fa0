// `gpupool sim compare`: placeholder until the comparison lands.
#include "cmd/sim_commands.h"

namespace gpupool::cmd {
void AddSimCompareCommand(CLI::App&) {}
}  // namespace gpupool::cmd
