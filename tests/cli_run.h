// Runs the real `gpupool` CLI binary for integration tests: with exactly the environment given and
// stdin from a string, its stdout, stderr and exit code captured.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace gpupool::testing {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::ostream& operator<<(std::ostream& os, const CliRun& r);

// The whole file, or "" when it cannot be read.
std::string ReadFile(const std::string& path);

// Runs the gpupool binary with exactly `env` as its environment and `input` on stdin; stdout and
// stderr are captured through files. Killed after 30 s (a hung CLI fails the test, not the run).
CliRun RunCli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
              const std::string& input = "");

}  // namespace gpupool::testing
