// `gpupool server`: wires the SQLite store, the sealed-secret box, the Controller and the HTTP
// API together, bootstraps an empty data dir (admin, default project, credentials.env), and
// shuts down gracefully on SIGTERM / SIGINT.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "api/http_server.h"
#include "api/routes.h"
#include "cmd/commands.h"
#include "server/controller.h"
#include "store/sqlite_store.h"

namespace gpupool::cmd {
namespace {

struct ServerFlags {
  std::string data_dir;
  std::string listen = "127.0.0.1:8640";
  std::string policy = "default";
  int64_t meter_interval_s = 60;
  int64_t node_timeout_s = 10;
  int threads = 0;
};

std::string DefaultDataDir() {
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.local/share/gpupool";
}

Result<std::pair<std::string, uint16_t>> ParseListen(const std::string& listen) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument("--listen must be HOST:PORT, got '" + listen + "'");
  }
  const std::string port_text = listen.substr(colon + 1);
  char* end = nullptr;
  const long port = std::strtol(port_text.c_str(), &end, 10);
  if (port_text.empty() || *end != '\0' || port < 0 || port > 65535) {
    return InvalidArgument("--listen port must be 0..65535, got '" + port_text + "'");
  }
  return std::make_pair(listen.substr(0, colon), static_cast<uint16_t>(port));
}

// Writes `text` to `path` with mode 0600, atomically (temp file, fsync, rename).
Status WritePrivateFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return MakeError(ErrorCode::kInternal, "cannot write " + tmp);
  bool ok = ::fchmod(fd, 0600) == 0 &&
            ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    return MakeError(ErrorCode::kInternal, "cannot write " + path);
  }
  return {};
}

// credentials.env: written with the admin key at the first start; later starts only refresh the
// endpoint line (the port may differ), keeping the keys.
Status WriteCredentials(const std::string& path, const std::string& endpoint,
                        const std::optional<server::NewAccessKey>& bootstrap_key) {
  std::string access_key;
  std::string secret_key;
  if (bootstrap_key) {
    access_key = bootstrap_key->key.access_key;
    secret_key = bootstrap_key->secret;
  } else {
    std::ifstream in(path);
    if (!in) return {};  // removed by the operator: nothing to refresh
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("GPUPOOL_ACCESS_KEY=", 0) == 0) access_key = line.substr(19);
      if (line.rfind("GPUPOOL_SECRET_KEY=", 0) == 0) secret_key = line.substr(19);
    }
    if (access_key.empty()) return {};
  }
  return WritePrivateFile(path, "GPUPOOL_ENDPOINT=" + endpoint + "\nGPUPOOL_ACCESS_KEY=" +
                                    access_key + "\nGPUPOOL_SECRET_KEY=" + secret_key + "\n");
}

void RunServer(const ServerFlags& f) {
  const std::string dir = f.data_dir.empty() ? DefaultDataDir() : f.data_dir;
  auto listen = ParseListen(f.listen);
  if (!listen) return Fail(listen.error().message);
  if (f.meter_interval_s < 1) {
    return Fail("--meter-interval must be ≥ 1 s, got " + std::to_string(f.meter_interval_s));
  }
  if (f.node_timeout_s < 1) {
    return Fail("--node-timeout must be ≥ 1 s, got " + std::to_string(f.node_timeout_s));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Fail("cannot create data dir " + dir + ": " + ec.message());
  ::chmod(dir.c_str(), 0700);

  // Block the shutdown signals before any thread starts, so that every thread inherits the mask
  // and sigwait below is the one place they arrive.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto secrets = server::SecretBox::LoadOrCreate(dir + "/master.key");
  if (!secrets) return Fail(secrets.error().message);
  auto store = store::SqliteStore::Open(dir + "/gpupool.db");
  if (!store) return Fail(store.error().message);
  server::SystemClock clock;
  server::ControllerOptions options;
  options.policy = f.policy;
  options.meter_interval_ms = f.meter_interval_s * 1000;
  options.node_timeout_ms = f.node_timeout_s * 1000;
  auto controller = server::Controller::Open(**store, clock, std::move(*secrets), options);
  if (!controller) return Fail(controller.error().message);
  auto bootstrap_key = (*controller)->Bootstrap();
  if (!bootstrap_key) return Fail(bootstrap_key.error().message);

  api::Api rest(**controller);
  api::HttpServerOptions http_options;
  http_options.host = listen->first;
  http_options.port = listen->second;
  http_options.threads = f.threads;
  api::HttpServer http(http_options, rest.AsHandler());
  if (auto ok = http.Start(); !ok) return Fail(ok.error().message);
  const std::string host =
      listen->first == "0.0.0.0" || listen->first == "::" ? "127.0.0.1" : listen->first;
  const std::string endpoint = "http://" + host + ":" + std::to_string(http.port());
  if (auto ok = WriteCredentials(dir + "/credentials.env", endpoint, *bootstrap_key); !ok) {
    return Fail(ok.error().message);
  }
  (*controller)->Start();

  if (bootstrap_key->has_value()) {
    std::cout << "gpupool server: bootstrapped " << dir << ": admin key "
              << (**bootstrap_key).key.access_key << " in " << dir << "/credentials.env\n";
  }
  std::cout << "gpupool server: data dir " << dir << ", policy " << f.policy << "\n";
  std::cout << "gpupool server listening on " << endpoint << std::endl;

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::cerr << "gpupool server: " << (signal_number == SIGTERM ? "SIGTERM" : "SIGINT")
            << ": finishing requests in flight\n";
  (*controller)->Stop();     // the scheduling loop ends; agents' long-polls are answered
  http.Stop();               // in-flight requests are answered, including their durable writes
  (*store)->Close();         // queued writes commit
  std::cerr << "gpupool server: stopped\n";
}

}  // namespace

void AddServerCommand(CLI::App& app) {
  auto flags = std::make_shared<ServerFlags>();
  CLI::App* cmd = app.add_subcommand("server", "Run the control plane (REST API, scheduler, "
                                               "metering) on a data directory");
  cmd->add_option("--data-dir", flags->data_dir,
                  "Directory of the database, master key and credentials.env "
                  "(default ~/.local/share/gpupool)");
  cmd->add_option("--listen", flags->listen, "HOST:PORT to serve on (port 0: any free port)")
      ->capture_default_str();
  cmd->add_option("--policy", flags->policy, "Placement policy (see `gpupool sim`)")
      ->capture_default_str();
  cmd->add_option("--meter-interval", flags->meter_interval_s,
                  "Seconds between billing running tasks up to now")
      ->capture_default_str();
  cmd->add_option("--node-timeout", flags->node_timeout_s,
                  "Seconds without a heartbeat after which a node is lost")
      ->capture_default_str();
  cmd->add_option("--threads", flags->threads, "HTTP I/O threads (0: one per core)")
      ->capture_default_str();
  cmd->callback([flags] { RunServer(*flags); });
}

}  // namespace gpupool::cmd
