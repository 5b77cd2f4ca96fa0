// Runs the real `gpupool` CLI binary for integration tests (see cli_process.h): its stdout and
// stderr come through pipes that one thread reads as they fill.
#include "tests/cli_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/server_process.h"

namespace gpupool::testing {

std::ostream& operator<<(std::ostream& os, const CliRun& r) {
  return os << "exit " << r.exit_code << "\n--- stdout ---\n"
            << r.out << "--- stderr ---\n"
            << r.err;
}

namespace {

std::vector<std::string> GpupoolArgv(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {GPUPOOL_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace

CliProcess::CliProcess(const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env, const std::string& input)
    : CliProcess(Program{GpupoolArgv(args)}, env, input) {}

CliProcess::CliProcess(const Program& program, const std::map<std::string, std::string>& env,
                       const std::string& input)
    : dir_(MakeTempDir("gpupool-cli-run")) {
  const std::string in_path = dir_ + "/in";
  std::ofstream(in_path) << input;
  std::vector<std::string> argv_text = program.argv;
  std::vector<std::string> env_text;
  for (const auto& [k, v] : env) env_text.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  // Close-on-exec: no other process the test starts keeps these pipes open.
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    std::perror("cli_process: pipe2");
    std::abort();
  }
  pid_ = ::fork();
  if (pid_ < 0) {
    std::perror("cli_process: fork");
    std::abort();
  }
  if (pid_ == 0) {
    const int in = ::open(in_path.c_str(), O_RDONLY);
    if (in < 0) _exit(126);
    ::dup2(in, STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  reader_ = std::thread([this, out = out[0], err = err[0]] {
    pollfd fds[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};
    int open_fds = 2;
    char buf[4096];
    while (open_fds > 0) {
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || fds[i].revents == 0) continue;
        const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          ::close(fds[i].fd);
          fds[i].fd = -1;  // poll skips it from now on
          --open_fds;
          continue;
        }
        std::lock_guard lock(mu_);
        (i == 0 ? out_ : err_).append(buf, static_cast<size_t>(n));
        cv_.notify_all();
      }
    }
    for (const pollfd& p : fds) {
      if (p.fd >= 0) ::close(p.fd);
    }
    std::lock_guard lock(mu_);
    closed_ = true;
    cv_.notify_all();
  });
}

CliProcess::~CliProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (reader_.joinable()) reader_.join();
  std::filesystem::remove_all(dir_);
}

bool CliProcess::WaitForStdout(const std::string& text, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return out_.find(text) != std::string::npos || closed_; });
  return out_.find(text) != std::string::npos;
}

CliRun CliProcess::Output() {
  std::lock_guard lock(mu_);
  return CliRun{exit_code_, out_, err_};
}

CliRun CliProcess::Wait(std::chrono::milliseconds timeout) {
  if (pid_ > 0) {
    bool ended = false;
    {
      std::unique_lock lock(mu_);
      ended = cv_.wait_for(lock, timeout, [&] { return closed_; });
    }
    if (!ended) ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    if (reader_.joinable()) reader_.join();
    std::lock_guard lock(mu_);
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return Output();
}

CliRun RunCli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
              const std::string& input) {
  return CliProcess(args, env, input).Wait();
}

CliRun RunProgram(const std::vector<std::string>& argv,
                  const std::map<std::string, std::string>& env, const std::string& input) {
  return CliProcess(CliProcess::Program{argv}, env, input).Wait();
}

}  // namespace gpupool::testing
