// Runs the real `gpupool` CLI binary for integration tests, with exactly the environment given and
// an optional stdin: to its end (RunCli: exit status, stdout, stderr), or in the background
// (CliProcess), where the test can wait for what it prints before it ends — `gpupool logs -f`;
// other programs the same way (RunProgram: ssh and scp through `gpupool tunnel`).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace gpupool::testing {

struct CliRun {
  int exit_code = -1;  // 128 + the signal when killed
  std::string out;
  std::string err;
};

std::ostream& operator<<(std::ostream& os, const CliRun& r);

class CliProcess {
 public:
  // Starts `gpupool ARGS…` with `env` as its whole environment and `input` on its stdin.
  CliProcess(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
             const std::string& input = "");
  // Starts `argv` itself: argv[0] is a program's path (/usr/bin/ssh).
  struct Program {
    std::vector<std::string> argv;
  };
  CliProcess(const Program& program, const std::map<std::string, std::string>& env,
             const std::string& input = "");
  // Kills it if it still runs.
  ~CliProcess();
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;

  // Waits until its stdout holds `text`; false when it closed its output first or the time ran out.
  bool WaitForStdout(const std::string& text,
                     std::chrono::milliseconds timeout = std::chrono::seconds(15));
  // What it printed so far.
  CliRun Output();
  // Waits for it to end (killing it after `timeout`: a hung CLI fails the test, not the run).
  CliRun Wait(std::chrono::milliseconds timeout = std::chrono::seconds(30));

 private:
  std::string dir_;  // holds its stdin
  pid_t pid_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string out_;
  std::string err_;
  bool closed_ = false;  // both of its output pipes reached their end
  int exit_code_ = -1;
  std::thread reader_;
};

// Runs `gpupool ARGS…` to its end (see CliProcess).
CliRun RunCli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
              const std::string& input = "");
// Runs another program (argv[0] its path) to its end, the same way.
CliRun RunProgram(const std::vector<std::string>& argv,
                  const std::map<std::string, std::string>& env, const std::string& input = "");

}  // namespace gpupool::testing
