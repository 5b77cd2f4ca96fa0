// The control plane as a running piece of the process (see running_server.h).
#include "cmd/running_server.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "api/gateway.h"
#include "api/http_server.h"
#include "api/routes.h"
#include "console/console.h"
#include "core/duration.h"
#include "core/task_ports.h"
#include "os/certificate.h"
#include "os/files.h"
#include "os/process_limits.h"
#include "proto/files.h"
#include "server/chunk_store.h"
#include "server/controller.h"
#include "server/task_files.h"
#include "store/sqlite_store.h"

namespace gpupool::cmd {
namespace {

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

// credentials.env: written with the admin key at the first start; later starts only refresh the
// endpoint and CA lines (the port or the scheme may differ), keeping the keys, and leave an
// unchanged file alone. A refresh that fails for a full disk only warns: the server runs on a
// full disk (refusing writes with 507) and the file's keys stay good.
Status WriteCredentials(const std::string& path, const std::string& endpoint,
                        const std::string& ca_file,
                        const std::optional<server::NewAccessKey>& bootstrap_key) {
  std::string access_key;
  std::string secret_key;
  std::string old;
  if (bootstrap_key) {
    access_key = bootstrap_key->key.access_key;
    secret_key = bootstrap_key->secret;
  } else {
    std::ifstream in(path);
    if (!in) return {};  // removed by the operator: nothing to refresh
    std::string line;
    while (std::getline(in, line)) {
      old += line + "\n";
      if (line.rfind("GPUPOOL_ACCESS_KEY=", 0) == 0) access_key = line.substr(19);
      if (line.rfind("GPUPOOL_SECRET_KEY=", 0) == 0) secret_key = line.substr(19);
    }
    if (access_key.empty()) return {};
  }
  const std::string text = "GPUPOOL_ENDPOINT=" + endpoint + "\nGPUPOOL_ACCESS_KEY=" + access_key +
                           "\nGPUPOOL_SECRET_KEY=" + secret_key + "\n" +
                           (ca_file.empty() ? "" : "GPUPOOL_CA_FILE=" + ca_file + "\n");
  if (text == old) return {};
  Status written = os::WriteFileAtomically(path, text, {.mode = 0600});
  if (!written && !bootstrap_key && written.error().code == ErrorCode::kInsufficientStorage) {
    std::fprintf(stderr, "gpupool: warning: the disk is full, %s keeps its old endpoint: %s\n",
                 path.c_str(), written.error().message.c_str());
    return {};
  }
  return written;
}

Credentials ParseCredentials(const std::string& path) {
  Credentials c;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq);
    if (key == "GPUPOOL_ENDPOINT") c.endpoint = line.substr(eq + 1);
    if (key == "GPUPOOL_ACCESS_KEY") c.access_key = line.substr(eq + 1);
    if (key == "GPUPOOL_SECRET_KEY") c.secret_key = line.substr(eq + 1);
    if (key == "GPUPOOL_CA_FILE") c.ca_file = line.substr(eq + 1);
  }
  return c;
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

// --tls-self-signed's pair in `dir` (DIR/tls): the files there when both exist, else a new
// self-signed certificate for localhost, 127.0.0.1, ::1, the listen host and this machine's name
// (the key 0600, in a 0700 directory). Returns the certificate's and the key's paths.
Result<std::pair<std::string, std::string>> SelfSignedPair(const std::string& dir,
                                                           const std::string& listen_host) {
  const std::string cert = dir + "/cert.pem";
  const std::string key = dir + "/key.pem";
  std::error_code ec;
  if (std::filesystem::exists(cert, ec) && std::filesystem::exists(key, ec)) {
    return std::make_pair(cert, key);
  }
  std::vector<std::string> names = {"localhost", "127.0.0.1", "::1"};
  const auto add = [&names](const std::string& name) {
    if (!name.empty() && name != "0.0.0.0" && name != "::" &&
        std::find(names.begin(), names.end(), name) == names.end()) {
      names.push_back(name);
    }
  };
  add(listen_host);
  char hostname[256] = {};
  if (::gethostname(hostname, sizeof(hostname) - 1) == 0) add(hostname);
  Result<os::CertificatePair> pair = os::MakeCertificate({.names = names, .ca = true});
  if (!pair) return tl::unexpected(pair.error());
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return MakeError(ErrorCode::kInternal, "cannot create " + dir + ": " + ec.message());
  }
  ::chmod(dir.c_str(), 0700);
  if (Status s = os::WriteFileAtomically(key, pair->key_pem, {.mode = 0600}); !s) {
    return tl::unexpected(s.error());
  }
  if (Status s = os::WriteFileAtomically(cert, pair->certificate_pem, {.mode = 0644}); !s) {
    return tl::unexpected(s.error());
  }
  return std::make_pair(cert, key);
}

}  // namespace

void AddServerFlags(CLI::App* cmd, ServerFlags* flags) {
  cmd->add_option("--data-dir", flags->data_dir,
                  "Directory of the database, master key and credentials.env "
                  "(default ~/.local/share/gpupool; as root /var/lib/gpupool)");
  cmd->add_option("--listen", flags->listen, "HOST:PORT to serve on (port 0: any free port)")
      ->capture_default_str();
  cmd->add_option("--policy", flags->policy, "Placement policy (see `gpupool sim`)")
      ->capture_default_str();
  cmd->add_option("--moves", flags->moves,
                  "Move instead of kill: a task that fits nowhere, even by preemption, may take "
                  "a node once running tasks there are snapshotted, stopped and resumed from "
                  "their snapshot elsewhere. off; on (tasks of at most the waiting task's "
                  "priority move); any-priority (any task). Worth it where tasks checkpoint "
                  "(docs/snapshots.md): a moved task starts its command again")
      ->check(CLI::IsMember({"off", "on", "any-priority"}))
      ->capture_default_str();
  cmd->add_option("--meter-interval", flags->meter_interval_s,
                  "Seconds between billing running tasks up to now")
      ->capture_default_str();
  cmd->add_option("--node-timeout", flags->node_timeout_s,
                  "Seconds without a heartbeat after which a node is lost")
      ->capture_default_str();
  cmd->add_option("--threads", flags->threads, "HTTP I/O threads (0: one per core)")
      ->capture_default_str();
  cmd->add_option("--files-max-task-mib", flags->files_max_task_mib,
                  "MiB of files (inputs, outputs, unfinished uploads) the server keeps per task")
      ->capture_default_str();
  cmd->add_option("--files-max-file-mib", flags->files_max_file_mib,
                  "MiB one file of a task may have")
      ->capture_default_str();
  cmd->add_option("--files-upload-expiry", flags->files_upload_expiry,
                  "How long an unfinished upload may receive nothing before its bytes are deleted "
                  "(e.g. 24h, 30m; 0s: never)")
      ->capture_default_str();
  cmd->add_option("--disk-reserve-mib", flags->disk_reserve_mib,
                  "MiB kept free on the data dir's file system for the database: below it, "
                  "writes, uploads and tasks' output are refused with 507 until space is freed")
      ->capture_default_str();
  cmd->add_option("--retain-finished", flags->retain_finished,
                  "How long a finished task stays in the server's memory after its end (e.g. 1h, "
                  "30m, at least 1s); older ones are read from the database")
      ->capture_default_str();
  cmd->add_option("--max-connections", flags->max_connections,
                  "Connections open at once; past it only agents and admins get in, up to "
                  "--reserved-connections more (default: 3/4 of the open-file limit after 256, "
                  "at most 16384)");
  cmd->add_option("--reserved-connections", flags->reserved_connections,
                  "Connections past --max-connections kept for agents and admins (default: "
                  "1/16 of --max-connections, at least 16)");
  cmd->add_option("--max-connections-per-peer", flags->max_connections_per_peer,
                  "Connections one address may have open before a request on them "
                  "authenticated (0: no limit; behind a reverse proxy every client has its "
                  "address)")
      ->capture_default_str();
  cmd->add_option("--max-connections-per-user", flags->max_connections_per_user,
                  "Connections one user (or one task's token) may have open once a request on "
                  "them authenticated; agents and admins are not held to it (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--key-rate", flags->key_rate,
                  "Signed requests per second an access key may make on average, past "
                  "--key-burst (0: no limit); past it: 429 with Retry-After")
      ->capture_default_str();
  cmd->add_option("--key-burst", flags->key_burst,
                  "Signed requests an access key may make at once before --key-rate applies")
      ->capture_default_str();
  cmd->add_option("--max-nonces", flags->max_nonces,
                  "Signed requests of the last 5 minutes whose nonces the server keeps (against "
                  "replays, ~60 bytes each); past it: 503 with Retry-After")
      ->capture_default_str();
  cmd->add_option("--tls-cert", flags->tls_cert,
                  "Serve HTTPS with this PEM certificate chain (with --tls-key)")
      ->type_name("FILE");
  cmd->add_option("--tls-key", flags->tls_key, "The PEM private key of --tls-cert")
      ->type_name("FILE");
  cmd->add_flag("--tls-self-signed", flags->tls_self_signed,
                "Serve HTTPS with a self-signed certificate made once in DIR/tls (clients trust "
                "it through GPUPOOL_CA_FILE, which credentials.env sets)");
  cmd->add_option("--gateway-domain", flags->gateway_domain,
                  "Serve each task's port at an origin of its own, <port>--<task>.DOMAIN[:PORT] "
                  "(a wildcard DNS name *.DOMAIN for this server; with HTTPS, a certificate that "
                  "covers it); tasks get those URLs. Default: under /t/<task>/<port>/ only")
      ->type_name("DOMAIN[:PORT]");
}

struct RunningServer::Impl {
  std::string dir;
  std::string endpoint;
  std::string ca_file;
  std::string transport_line;
  bool bootstrapped_now = false;
  server::SystemClock clock;
  std::unique_ptr<store::SqliteStore> store;
  std::unique_ptr<server::DiskTaskFiles> files;  // before the controller, which uses it
  std::unique_ptr<server::ChunkStore> chunks;    // likewise: the snapshots' chunks
  std::unique_ptr<server::Controller> controller;
  std::unique_ptr<api::Api> rest;
  std::unique_ptr<api::HttpServer> http;
  std::string limits_line;
  bool stopped = false;
};

RunningServer::RunningServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RunningServer::~RunningServer() { Shutdown(); }

const std::string& RunningServer::data_dir() const { return impl_->dir; }
const std::string& RunningServer::endpoint() const { return impl_->endpoint; }
const std::string& RunningServer::ca_file() const { return impl_->ca_file; }
std::string RunningServer::TransportLine() const { return impl_->transport_line; }
bool RunningServer::bootstrapped_now() const { return impl_->bootstrapped_now; }

std::string RunningServer::ConsoleLine() const {
  if (console::EmbeddedAssets().empty()) {
    return "no web console in this build (node and npm were missing: scripts/install-deps.sh, "
           "then build again)";
  }
  return "console " + impl_->endpoint + "/";
}

std::string RunningServer::LimitsLine() const { return impl_->limits_line; }

Credentials RunningServer::ReadCredentials() const {
  return ParseCredentials(impl_->dir + "/credentials.env");
}

Result<std::unique_ptr<RunningServer>> RunningServer::Start(const ServerFlags& f) {
  auto impl = std::make_unique<Impl>();
  impl->dir = f.data_dir.empty() ? os::DefaultDataDir("gpupool") : f.data_dir;
  const std::string& dir = impl->dir;
  auto listen = ParseListen(f.listen);
  if (!listen) return tl::unexpected(listen.error());
  if (f.meter_interval_s < 1) {
    return InvalidArgument("--meter-interval must be ≥ 1 s, got " +
                           std::to_string(f.meter_interval_s));
  }
  if (f.node_timeout_s < 1) {
    return InvalidArgument("--node-timeout must be ≥ 1 s, got " + std::to_string(f.node_timeout_s));
  }
  Result<int64_t> retain_ms = ParseDurationMs(f.retain_finished);
  if (!retain_ms) {
    return InvalidArgument("--retain-finished: " + retain_ms.error().message);
  }
  if (*retain_ms < 1000) {
    return InvalidArgument("--retain-finished must be at least 1s, got '" + f.retain_finished +
                           "'");
  }
  Result<int64_t> upload_expiry_ms = ParseDurationMs(f.files_upload_expiry);
  if (!upload_expiry_ms) {
    return InvalidArgument("--files-upload-expiry: " + upload_expiry_ms.error().message);
  }
  if (f.max_connections < -1 || f.reserved_connections < -1 || f.max_connections == 0 ||
      f.max_connections_per_peer < 0 || f.max_connections_per_user < 0) {
    return InvalidArgument(
        "--max-connections must be ≥ 1, --reserved-connections, --max-connections-per-peer and "
        "--max-connections-per-user ≥ 0, got " +
        std::to_string(f.max_connections) + ", " + std::to_string(f.reserved_connections) + ", " +
        std::to_string(f.max_connections_per_peer) + ", " +
        std::to_string(f.max_connections_per_user));
  }
  if (f.max_nonces < 1) {  // the controller checks the rest of its options
    return InvalidArgument("--max-nonces must be ≥ 1, got " + std::to_string(f.max_nonces));
  }
  if (f.tls_self_signed && (!f.tls_cert.empty() || !f.tls_key.empty())) {
    return InvalidArgument(
        "--tls-self-signed makes its own certificate: give it or "
        "--tls-cert and --tls-key, not both");
  }
  if (f.tls_cert.empty() != f.tls_key.empty()) {
    return InvalidArgument(f.tls_cert.empty() ? "--tls-key needs --tls-cert"
                                              : "--tls-cert needs --tls-key");
  }
  constexpr int64_t kMaxFilesMib = int64_t{1} << 30;  // 1 PiB: far beyond any disk, no overflow
  for (const auto& [flag, mib] : {std::pair{"--files-max-task-mib", f.files_max_task_mib},
                                  std::pair{"--files-max-file-mib", f.files_max_file_mib},
                                  std::pair{"--disk-reserve-mib", f.disk_reserve_mib}}) {
    if (mib < 0 || mib > kMaxFilesMib) {
      return InvalidArgument(std::string(flag) + " must be 0.." + std::to_string(kMaxFilesMib) +
                             ", got " + std::to_string(mib));
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return MakeError(ErrorCode::kInternal, "cannot create data dir " + dir + ": " + ec.message());
  }
  // Others may pass through (an agent's task workspaces may live below) but not list it; every
  // file in it is the owner's alone.
  ::chmod(dir.c_str(), 0711);

  auto secrets = server::SecretBox::LoadOrCreate(dir + "/master.key");
  if (!secrets) return tl::unexpected(secrets.error());
  // Create the database 0600 before SQLite opens it: its -wal and -shm files take its mode.
  const std::string db_path = dir + "/gpupool.db";
  if (const int fd = ::open(db_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600); fd >= 0) {
    ::fchmod(fd, 0600);
    ::close(fd);
  }
  auto store = store::SqliteStore::Open(db_path);
  if (!store) return tl::unexpected(store.error());
  impl->store = std::move(*store);
  server::TaskFilesOptions files_options;
  files_options.max_task_bytes = f.files_max_task_mib << 20;
  files_options.max_file_bytes = f.files_max_file_mib << 20;
  files_options.upload_expiry_ms = *upload_expiry_ms;
  auto files = server::DiskTaskFiles::Open(dir + "/files", files_options);
  if (!files) return tl::unexpected(files.error());
  impl->files = std::move(*files);
  impl->chunks = std::make_unique<server::ChunkStore>(dir + "/chunks");
  if (Status opened = impl->chunks->Open(); !opened) return tl::unexpected(opened.error());
  server::ControllerOptions options;
  options.policy = f.policy;
  options.allow_moves = f.moves != "off";
  options.move_any_priority = f.moves == "any-priority";
  options.meter_interval_ms = f.meter_interval_s * 1000;
  options.node_timeout_ms = f.node_timeout_s * 1000;
  options.output_dir = impl->dir + "/output";  // tasks' logs and metric lines
  options.task_files = impl->files.get();
  options.chunks = impl->chunks.get();
  options.retain_finished_ms = *retain_ms;
  options.free_bytes = [dir] { return os::FreeBytes(dir); };
  options.disk_reserve_bytes = f.disk_reserve_mib << 20;
  options.key_rate_per_s = f.key_rate;
  options.key_burst = f.key_burst;
  options.max_nonces = static_cast<size_t>(f.max_nonces);
  auto controller =
      server::Controller::Open(*impl->store, impl->clock, std::move(*secrets), options);
  if (!controller) return tl::unexpected(controller.error());
  impl->controller = std::move(*controller);
  auto bootstrap_key = impl->controller->Bootstrap();
  if (!bootstrap_key) return tl::unexpected(bootstrap_key.error());
  impl->bootstrapped_now = bootstrap_key->has_value();

  // Files of tasks deleted while a crash kept their removal from happening. The store knows
  // every task (memory only the recent ones); a failed read keeps the files.
  impl->files->Sweep([&](const std::string& id) {
    Result<std::optional<Task>> task = impl->store->ReadTask(id);
    return !task || task->has_value();
  });

  api::ApiOptions api_options;
  api_options.console = [](const api::HttpRequest& request) {
    return console::Serve(console::EmbeddedAssets(), request);
  };
  if (!f.gateway_domain.empty()) {
    Result<std::string> origin =
        GatewayOrigin(f.gateway_domain, !f.tls_cert.empty() || f.tls_self_signed);
    if (!origin) return tl::unexpected(origin.error());
    api_options.gateway_origin = *origin;
  }
  const std::string gateway_origin = api_options.gateway_origin;
  impl->rest =
      std::make_unique<api::Api>(server::Services::Of(*impl->controller), std::move(api_options));
  api::HttpServerOptions http_options;
  if (f.tls_self_signed) {
    Result<std::pair<std::string, std::string>> pair = SelfSignedPair(dir + "/tls", listen->first);
    if (!pair) return tl::unexpected(pair.error());
    http_options.tls_cert_file = pair->first;
    http_options.tls_key_file = pair->second;
    impl->ca_file = pair->first;
  } else {
    http_options.tls_cert_file = f.tls_cert;
    http_options.tls_key_file = f.tls_key;
  }
  http_options.host = listen->first;
  http_options.port = listen->second;
  http_options.threads = f.threads;
  // A request body is at most one upload chunk (JSON bodies are far smaller).
  http_options.max_body_bytes = proto::kFileChunkBytes;
  // The gateway passes every header on, and may hand the connection to a task's port.
  http_options.all_headers = [gateway_origin](std::string_view path, std::string_view host) {
    return api::IsGatewayPath(path) || api::IsGatewayHost(gateway_origin, host);
  };
  const api::ConnectionLimits limits = api::ConnectionLimitsFor(os::RaiseOpenFileLimit());
  http_options.max_connections =
      f.max_connections < 0 ? limits.max_connections : static_cast<size_t>(f.max_connections);
  http_options.reserved_connections =
      f.reserved_connections >= 0 ? static_cast<size_t>(f.reserved_connections)
      : f.max_connections < 0     ? limits.reserved_connections
                                  : std::max<size_t>(16, http_options.max_connections / 16);
  http_options.max_anonymous_per_peer = static_cast<size_t>(f.max_connections_per_peer);
  http_options.max_connections_per_user = static_cast<size_t>(f.max_connections_per_user);
  char rate[32];
  std::snprintf(rate, sizeof(rate), "%g", f.key_rate);
  impl->limits_line =
      "connections: at most " + std::to_string(http_options.max_connections) + " (+" +
      std::to_string(http_options.reserved_connections) + " for agents and admins), " +
      (f.max_connections_per_peer == 0 ? std::string("any number")
                                       : std::to_string(f.max_connections_per_peer)) +
      " per address before they authenticate, " +
      (f.max_connections_per_user == 0 ? std::string("any number")
                                       : std::to_string(f.max_connections_per_user)) +
      " per user after; signed requests: " +
      (f.key_rate == 0
           ? std::string("no limit per key")
           : std::string(rate) + "/s per key, bursts of " + std::to_string(f.key_burst));
  impl->http = std::make_unique<api::HttpServer>(http_options, impl->rest->AsHandler());
  impl->controller->SetConnectionFigures(
      [http = impl->http.get()] { return http->connection_figures(); });
  if (auto ok = impl->http->Start(); !ok) return tl::unexpected(ok.error());
  const std::string host =
      listen->first == "0.0.0.0" || listen->first == "::" ? "127.0.0.1" : listen->first;
  const bool tls = !http_options.tls_cert_file.empty();
  const std::string bracketed =
      host.find(':') != std::string::npos && host.front() != '[' ? "[" + host + "]" : host;
  impl->endpoint =
      (tls ? "https://" : "http://") + bracketed + ":" + std::to_string(impl->http->port());
  if (tls) {
    impl->transport_line = "HTTPS with " + http_options.tls_cert_file +
                           (f.tls_self_signed ? " (self-signed: clients trust it through "
                                                "GPUPOOL_CA_FILE, as credentials.env says)"
                                              : "");
  } else if (IsLoopback(listen->first)) {
    impl->transport_line =
        "plain HTTP on loopback (--tls-cert/--tls-key or --tls-self-signed "
        "for HTTPS)";
  } else {
    impl->transport_line =
        "WARNING: plain HTTP on " + listen->first +
        ": requests are signed, but what they carry (task specs, logs, files) crosses the "
        "network readable; serve HTTPS with --tls-cert/--tls-key or --tls-self-signed";
  }
  if (!gateway_origin.empty()) {
    impl->transport_line += "; tasks' ports also at their own origins (" + gateway_origin +
                            ": <port>--<task>." + f.gateway_domain + ")";
  }
  if (auto ok =
          WriteCredentials(dir + "/credentials.env", impl->endpoint, impl->ca_file, *bootstrap_key);
      !ok) {
    return tl::unexpected(ok.error());
  }
  impl->controller->Start();
  return std::unique_ptr<RunningServer>(new RunningServer(std::move(impl)));
}

void RunningServer::Shutdown() {
  if (impl_ == nullptr || impl_->stopped) return;
  impl_->stopped = true;
  impl_->controller->Stop();  // the scheduling loop ends; agents' long-polls are answered
  impl_->http->Stop();        // in-flight requests are answered, including their durable writes
  impl_->controller->SetConnectionFigures(nullptr);  // no scrape comes any more
  impl_->store->Close();                             // queued writes commit
}

sigset_t BlockShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

std::string WaitForShutdown(const sigset_t& signals) {
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  return signal_number == SIGTERM ? "SIGTERM" : "SIGINT";
}

}  // namespace gpupool::cmd
