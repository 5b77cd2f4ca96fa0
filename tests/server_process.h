// Runs a real `gpupool server` (or `up`) process for integration tests: starts it on an ephemeral
// loopback port in a data directory, waits for its "listening" line (no sleeps), reads the
// bootstrap credentials, and stops it with SIGTERM (graceful) or SIGKILL (a crash). Plus the
// polling helper the process-level tests share.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace gpupool::testing {

struct Credentials {
  std::string endpoint;
  std::string access_key;
  std::string secret_key;
  std::string ca_file{};  // GPUPOOL_CA_FILE: a server's --tls-self-signed certificate
};

class ServerProcess {
 public:
  // Starts `gpupool SUBCOMMAND --data-dir DIR --listen 127.0.0.1:0 EXTRA…` (SUBCOMMAND: "server",
  // or "up" for the server with its local agent) and returns once it listens; aborts the test
  // binary if it exits first (its output is shown).
  ServerProcess(const std::string& data_dir, std::vector<std::string> extra_args = {},
                const std::string& subcommand = "server");
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  pid_t pid() const { return pid_; }
  // DIR/credentials.env as written at the first start.
  Credentials ReadCredentials() const;
  // SIGTERM, then waits: the exit status (0 after a graceful shutdown).
  int Terminate();
  // SIGKILL, then waits.
  void Kill();

 private:
  std::string data_dir_;
  std::string endpoint_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::thread drain_;  // keeps reading the server's stdout so that it never blocks on it
};

// A fresh empty directory under the test temp dir.
std::string MakeTempDir(const std::string& prefix);

// Polls `done` every few milliseconds until it holds or `timeout` passes; returns its last
// value. For state another process owns and shows only through its API (no event to wait on).
bool Eventually(const std::function<bool()>& done,
                std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace gpupool::testing
