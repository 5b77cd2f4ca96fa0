// The exit status the subcommands share (see commands.h).
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

}  // namespace gpupool::cmd
