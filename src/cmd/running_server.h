// The control plane as a running piece of the process, shared by `gpupool server` and `gpupool
// up`: the SQLite store, the sealed-secret box, the Controller and the HTTP API on a data dir,
// bootstrapped on first start (admin, default project, credentials.env), stopped in order.
#pragma once

#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "core/result.h"

namespace gpupool::cmd {

struct ServerFlags {
  std::string data_dir;  // empty: ~/.local/share/gpupool
  std::string listen = "127.0.0.1:8640";
  std::string policy = "default";
  std::string moves = "off";  // off, on, any-priority (server::ControllerOptions::allow_moves)
  int64_t meter_interval_s = 60;
  int64_t node_timeout_s = 10;
  int threads = 0;
  int64_t files_max_task_mib = 1024;  // a task's files (inputs and outputs) together
  int64_t files_max_file_mib = 1024;
  std::string retain_finished = "1h";       // a duration (core/duration.h)
  std::string files_upload_expiry = "24h";  // an unfinished upload idle this long is deleted
  int64_t disk_reserve_mib = 64;  // free space kept on the data dir's file system for the database
  // Connections (api::HttpServerOptions); -1: from the open-file limit (ConnectionLimitsFor).
  int64_t max_connections = -1;
  int64_t reserved_connections = -1;
  int64_t max_connections_per_peer = 128;
  int64_t max_connections_per_user = 256;
  // Signed requests per access key, and the nonce cache's bound (server::ControllerOptions).
  double key_rate = 100;
  int64_t key_burst = 1000;
  int64_t max_nonces = 2'000'000;
  // HTTPS (api::HttpServerOptions): the operator's PEM pair, or one made once under DIR/tls.
  std::string tls_cert;
  std::string tls_key;
  bool tls_self_signed = false;
  // DOMAIN[:PORT]: tasks' ports also at <port>--<task>.DOMAIN (api::ApiOptions::gateway_origin).
  std::string gateway_domain;
};

// Adds --data-dir, --listen, --policy, --moves, --meter-interval, --node-timeout, --threads,
// --files-max-task-mib, --files-max-file-mib, --retain-finished, --files-upload-expiry,
// --disk-reserve-mib, --max-connections, --reserved-connections, --max-connections-per-peer,
// --key-rate, --key-burst, --max-nonces, --tls-cert, --tls-key, --tls-self-signed,
// --gateway-domain.
void AddServerFlags(CLI::App* cmd, ServerFlags* flags);

// DIR/credentials.env, as written at the first start (the endpoint and CA lines at every start).
struct Credentials {
  std::string endpoint;
  std::string access_key;
  std::string secret_key;
  std::string ca_file;  // GPUPOOL_CA_FILE: the self-signed certificate clients must trust
};

class RunningServer {
 public:
  // Opens the data dir, rebuilds the state, serves HTTP and starts the scheduling loop.
  static Result<std::unique_ptr<RunningServer>> Start(const ServerFlags& flags);
  ~RunningServer();  // Shutdown()

  const std::string& data_dir() const;
  const std::string& endpoint() const;  // http://HOST:PORT, or https:// with TLS
  // The certificate a client must trust to reach endpoint() (--tls-self-signed's); empty: the
  // system's store does, or plain HTTP.
  const std::string& ca_file() const;
  // The banner's line about transport security: HTTPS and its certificate, or plain HTTP (with a
  // warning when it listens beyond loopback).
  std::string TransportLine() const;
  bool bootstrapped_now() const;  // this start created the admin key
  // The banner's line about the web console: "console http://127.0.0.1:8640/", or why there is
  // none in this build.
  std::string ConsoleLine() const;
  // The banner's line about the limits: "connections: at most 576 (+36 for agents and admins),
  // 128 per address before they authenticate, 256 per user after; signed requests: 100/s per
  // key, bursts of 1000".
  std::string LimitsLine() const;
  // The admin credentials from DIR/credentials.env (empty fields when the file is gone).
  Credentials ReadCredentials() const;
  // The loop stops (agents' long-polls answered), requests in flight are answered, queued
  // writes commit. Idempotent.
  void Shutdown();

 private:
  struct Impl;
  explicit RunningServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Blocks SIGTERM and SIGINT in this thread (call it before any thread starts, so that every
// thread inherits the mask) and returns the set; WaitForShutdown waits for one and names it.
sigset_t BlockShutdownSignals();
std::string WaitForShutdown(const sigset_t& signals);

}  // namespace gpupool::cmd
