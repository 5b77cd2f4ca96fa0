// Runs a real `gpupool server` process for integration tests (see server_process.h).
#include "tests/server_process.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace gpupool::testing {
namespace {

// The line each subcommand prints once it serves, followed by the endpoint.
std::string ReadyPrefix(const std::string& subcommand) {
  return subcommand == "up" ? "gpupool up: endpoint " : "gpupool server listening on ";
}

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "server_process: %s\n", why.c_str());
  std::abort();
}

}  // namespace

std::string MakeTempDir(const std::string& prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (mkdtemp(tmpl.data()) == nullptr) Die("mkdtemp failed: " + std::string(strerror(errno)));
  return tmpl;
}

bool Eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}

ServerProcess::ServerProcess(const std::string& data_dir, std::vector<std::string> extra_args,
                             const std::string& subcommand)
    : data_dir_(data_dir) {
  const std::string ready = ReadyPrefix(subcommand);
  int fds[2];
  if (pipe(fds) != 0) Die("pipe failed");
  std::vector<std::string> args = {GPUPOOL_BINARY, subcommand, "--data-dir",
                                   data_dir,       "--listen", "127.0.0.1:0"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  pid_ = fork();
  if (pid_ < 0) Die("fork failed");
  if (pid_ == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    std::perror("execv");
    _exit(127);
  }
  close(fds[1]);
  out_fd_ = fds[0];
  // Read the server's stdout line by line until it says where it listens.
  std::string line;
  std::string seen;
  char c;
  for (;;) {
    const ssize_t n = read(out_fd_, &c, 1);
    if (n <= 0) {
      int status = 0;
      waitpid(pid_, &status, 0);
      pid_ = -1;
      Die("gpupool " + subcommand + " exited before listening; its output:\n" + seen);
    }
    if (c != '\n') {
      line += c;
      continue;
    }
    seen += line + "\n";
    if (line.rfind(ready, 0) == 0) {
      endpoint_ = line.substr(ready.size());
      break;
    }
    line.clear();
  }
  drain_ = std::thread([fd = out_fd_] {
    char buf[4096];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
  });
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) Kill();
  if (drain_.joinable()) drain_.join();  // the pipe ends with the process
  if (out_fd_ >= 0) close(out_fd_);
}

Credentials ServerProcess::ReadCredentials() const {
  Credentials c;
  std::ifstream in(data_dir_ + "/credentials.env");
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq);
    const std::string value = line.substr(eq + 1);
    if (key == "GPUPOOL_ENDPOINT") c.endpoint = value;
    if (key == "GPUPOOL_ACCESS_KEY") c.access_key = value;
    if (key == "GPUPOOL_SECRET_KEY") c.secret_key = value;
    if (key == "GPUPOOL_CA_FILE") c.ca_file = value;
  }
  return c;
}

int ServerProcess::Terminate() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void ServerProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

}  // namespace gpupool::testing
