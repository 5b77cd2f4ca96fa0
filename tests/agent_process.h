// A real `gpupool agent` process for the end-to-end tests (simulated GPUs, no docker daemon):
// started, waited for until ready, its output collected and waited on, stopped gracefully or
// killed, and what its tasks left behind cleaned up; with the helpers they share (a live
// process, a JSON file's contents); PoolProcesses: a server and its agents, as the e2e tests use
// them.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/server_process.h"

extern char** environ;

namespace gpupool::testing {

// What an agent prints once it is ready ("gpupool agent ready: node NAME").
inline constexpr const char* kAgentReady = "gpupool agent ready: node ";

// A live process (not a zombie).
inline bool Alive(pid_t pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  // The process may end while its stat is read: the read then fails (ESRCH), which means gone.
  const int fd = open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  if (n <= 0) return false;
  const std::string stat(buf, static_cast<size_t>(n));
  const auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

inline std::optional<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// A real `gpupool agent` process. Its stdout and stderr are collected (and echoed to the test's
// stderr) so that the test can wait for the lines it prints. Without an access key in `creds` it
// gets none in its environment (it joins with a token in `extra_args`, or uses its kept identity).
class AgentProcess {
 public:
  AgentProcess(Credentials creds, std::string name, std::string data_dir,
               std::vector<std::string> extra_args = {})
      : creds_(std::move(creds)),
        name_(std::move(name)),
        data_dir_(std::move(data_dir)),
        extra_args_(std::move(extra_args)) {
    Start();
  }
  ~AgentProcess() {
    Kill();
    if (reader_.joinable()) reader_.join();
  }

  const std::string& name() const { return name_; }
  const std::string& data_dir() const { return data_dir_; }
  std::string TaskDir(const std::string& id) const { return data_dir_ + "/runtime/tasks/" + id; }
  // The task's pid as the runtime recorded it; 0 when there is no record.
  pid_t TaskPid(const std::string& id) const {
    auto state = ReadJsonFile(TaskDir(id) + "/state.json");
    return state && (*state)["pid"].is_number_integer() ? (*state)["pid"].get<pid_t>() : 0;
  }

  // Starts the agent and waits for its readiness line.
  void Start() {
    if (reader_.joinable()) reader_.join();
    {
      std::lock_guard lock(mu_);
      output_.clear();
      eof_ = false;
    }
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    std::vector<std::string> args = {
        GPUPOOL_BINARY, "agent", "--server", creds_.endpoint, "--name", name_, "--data-dir",
        data_dir_, "--simulate-gpus", "A100-80GB:2", "--cpu-milli", "8000", "--memory-mib", "16384",
        "--heartbeat-ms", "500", "--disk-gib", "20", "--disk-check-ms", "100",
        // No daemon there: image tasks are not placed here (tests/docker_*_test run docker).
        "--docker-socket", data_dir_ + "/no-docker.sock"};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    std::vector<std::string> env;
    if (!creds_.access_key.empty()) {
      env = {"GPUPOOL_ACCESS_KEY=" + creds_.access_key, "GPUPOOL_SECRET_KEY=" + creds_.secret_key};
    }
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "GPUPOOL_", 8) != 0) env.push_back(*e);
    }
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      dup2(fds[1], STDERR_FILENO);
      close(fds[0]);
      close(fds[1]);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      std::vector<char*> envp;
      for (std::string& e : env) envp.push_back(e.data());
      envp.push_back(nullptr);
      execve(argv[0], argv.data(), envp.data());
      std::perror("execve");
      _exit(127);
    }
    close(fds[1]);
    reader_ = std::thread([this, fd = fds[0]] {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof buf)) > 0) {
        ssize_t ignored = write(STDERR_FILENO, buf, static_cast<size_t>(n));
        (void)ignored;
        std::lock_guard lock(mu_);
        output_.append(buf, static_cast<size_t>(n));
        cv_.notify_all();
      }
      close(fd);
      std::lock_guard lock(mu_);
      eof_ = true;
      cv_.notify_all();
    });
    ASSERT_TRUE(WaitForOutput(kAgentReady + name_, std::chrono::seconds(15)))
        << "agent " << name_ << " did not get ready; its output:\n"
        << Output();
  }

  // Waits until the agent has printed `text` (since its last start).
  bool WaitForOutput(const std::string& text,
                     std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] {
      return output_.find(text) != std::string::npos || eof_;
    }) && output_.find(text) != std::string::npos;
  }
  std::string Output() {
    std::lock_guard lock(mu_);
    return output_;
  }

  // SIGTERM (graceful: threads stop, tasks keep running), then waits: the exit status.
  int Terminate() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  // SIGKILL, then waits (its tasks keep running, orphaned).
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  // Kills whatever task processes are left under the data dir and removes their cgroups.
  void KillLeftoverTasks() {
    std::error_code ec;
    std::vector<nlohmann::json> states;
    for (const auto& entry :
         std::filesystem::directory_iterator(data_dir_ + "/runtime/tasks", ec)) {
      if (auto s = ReadJsonFile(entry.path().string() + "/state.json")) states.push_back(*s);
    }
    for (const nlohmann::json& s : states) {
      const pid_t pid = s.value("pid", 0);
      if (pid > 0 && !s.contains("exit") && Alive(pid)) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
      }
    }
    for (const nlohmann::json& s : states) {
      if (!s.contains("cgroup") || !s["cgroup"].contains("controllers")) continue;
      for (const auto& [controller, e] : s["cgroup"]["controllers"].items()) {
        const std::string dir = e.value("dir", std::string());
        if (dir.empty()) continue;
        Eventually([&] { return rmdir(dir.c_str()) == 0 || errno != EBUSY; },
                   std::chrono::seconds(2));
        // The runtime's own group (this node's), once its last task's is gone.
        rmdir(std::filesystem::path(dir).parent_path().c_str());
      }
    }
  }

 private:
  Credentials creds_;
  std::string name_;
  std::string data_dir_;
  std::vector<std::string> extra_args_;
  pid_t pid_ = -1;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string output_;
  bool eof_ = false;
};

// A real server and real agents on this machine, each in a temporary directory of its own: the
// e2e tests' pool. Agent i is named "<prefix's first letter><i + 1>-<pid>". When it goes the
// agents stop first (their tasks' leftovers killed), then the server, and the directories are
// removed.
class PoolProcesses {
 public:
  PoolProcesses(const std::string& prefix, int agents, std::vector<std::string> server_args,
                std::vector<std::string> agent_args = {})
      : server_dir_(MakeTempDir(prefix + "-server")),
        server_(server_dir_, std::move(server_args)),
        creds_(server_.ReadCredentials()) {
    const std::string suffix = std::to_string(getpid());
    for (int i = 0; i < agents; ++i) {
      std::string dir = MakeTempDir(prefix + "-node");
      chmod(dir.c_str(), 0711);  // tasks run under their own uids and must reach their dirs
      agents_.push_back(std::make_unique<AgentProcess>(
          creds_, prefix.substr(0, 1) + std::to_string(i + 1) + "-" + suffix, dir, agent_args));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  ~PoolProcesses() {
    for (auto& a : agents_) {
      a->Terminate();
      a->KillLeftoverTasks();
    }
    server_.Terminate();
    std::error_code ec;
    for (auto& a : agents_) std::filesystem::remove_all(a->data_dir(), ec);
    std::filesystem::remove_all(server_dir_, ec);
  }
  PoolProcesses(const PoolProcesses&) = delete;
  PoolProcesses& operator=(const PoolProcesses&) = delete;

  const std::string& server_dir() const { return server_dir_; }
  const Credentials& creds() const { return creds_; }
  std::vector<std::unique_ptr<AgentProcess>>& agents() { return agents_; }
  // The agent that runs `node`; null (and a failure) when none does.
  AgentProcess* AgentOf(const std::string& node) {
    for (auto& a : agents_) {
      if (a->name() == node) return a.get();
    }
    ADD_FAILURE() << "no agent runs node " << node;
    return nullptr;
  }

 private:
  std::string server_dir_;
  ServerProcess server_;
  Credentials creds_;
  std::vector<std::unique_ptr<AgentProcess>> agents_;
};

}  // namespace gpupool::testing
