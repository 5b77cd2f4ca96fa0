// The exit status the subcommands share, and the flags more than one of them takes (commands.h).
#include "cmd/commands.h"

#include <iostream>

namespace gpupool::cmd {
namespace {
int exit_code = 0;
}  // namespace

void Fail(const std::string& message) {
  std::cerr << "gpupool: " << message << "\n";
  exit_code = 1;
}

int ExitCode() { return exit_code; }

void AddTaskRuntimeFlags(CLI::App* cmd, std::string* docker_network, std::string* cudashim) {
  cmd->add_option("--docker-network", *docker_network,
                  "Network mode of the tasks' containers: bridge, host, none or a network's name")
      ->capture_default_str();
  cmd->add_option("--cudashim", *cudashim,
                  "The GPU-memory interposer (libgpupool_cudashim.so) preloaded into tasks that "
                  "hold a share of a real GPU (default: beside the gpupool binary, in "
                  "../lib/gpupool/ or the build tree's ../cudashim/)");
}

}  // namespace gpupool::cmd
