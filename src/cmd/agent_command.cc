// `gpupool agent`: runs the node agent (agent::Agent) against a server until SIGTERM / SIGINT.
// Wiring only: flags and environment in (server, credentials: a join token or an admin's key),
// banner and readiness line out.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "agent/agent.h"
#include "cmd/commands.h"
#include "cmd/running_server.h"

namespace gpupool::cmd {
namespace {

struct AgentFlags {
  std::string server;
  std::string ca_file;
  std::string join_token;
  std::string access_key;
  std::string secret_key;
  std::string name;
  std::string data_dir;
  std::string simulate_gpus;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t heartbeat_ms = 2000;
  int64_t disk_gib = 0;
  int64_t chunk_cache_gib = agent::AgentOptions().chunk_cache_bytes >> 30;
  int64_t dataset_cache_gib = agent::AgentOptions().dataset_cache_bytes >> 30;
  int64_t disk_check_ms = agent::AgentOptions().disk_check_interval.count();
  bool shared_uid = false;
  std::string docker_socket = agent::AgentOptions().docker_socket;
  std::string docker_network = agent::AgentOptions().docker_network;
  std::string cudashim;
  std::string advertise_addr;
  std::string shared_storage;
};

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

void RunAgent(const AgentFlags& f) {
  if (f.heartbeat_ms < 1) {
    return Fail("--heartbeat-ms must be ≥ 1, got " + std::to_string(f.heartbeat_ms));
  }
  if (f.disk_check_ms < 1) {
    return Fail("--disk-check-ms must be ≥ 1, got " + std::to_string(f.disk_check_ms));
  }
  if (f.disk_gib < 0) return Fail("--disk-gib must be ≥ 0, got " + std::to_string(f.disk_gib));
  if (f.chunk_cache_gib < 0) {
    return Fail("--chunk-cache-gib must be ≥ 0, got " + std::to_string(f.chunk_cache_gib));
  }
  if (f.dataset_cache_gib < 0) {
    return Fail("--dataset-cache-gib must be ≥ 0, got " + std::to_string(f.dataset_cache_gib));
  }
  agent::AgentOptions options;
  options.endpoint = f.server;
  options.ca_file = f.ca_file.empty() ? Env("GPUPOOL_CA_FILE") : f.ca_file;
  // Flags win over the environment, and a join token over an admin's key given the same way.
  // With neither, the agent uses the credentials its node got when it joined (its data dir).
  const bool key_flags = !f.access_key.empty();
  options.join_token = f.join_token;
  if (options.join_token.empty() && !key_flags) options.join_token = Env("GPUPOOL_JOIN_TOKEN");
  if (options.join_token.empty()) {
    options.access_key = key_flags ? f.access_key : Env("GPUPOOL_ACCESS_KEY");
    options.secret_key = key_flags ? f.secret_key : Env("GPUPOOL_SECRET_KEY");
  }
  options.node_name = f.name;
  options.data_dir = f.data_dir;
  options.simulate_gpus = f.simulate_gpus;
  options.cpu_milli = f.cpu_milli;
  options.memory_mib = f.memory_mib;
  options.heartbeat_interval = std::chrono::milliseconds(f.heartbeat_ms);
  options.disk_gib = f.disk_gib;
  options.chunk_cache_bytes = f.chunk_cache_gib << 30;
  options.dataset_cache_bytes = f.dataset_cache_gib << 30;
  options.disk_check_interval = std::chrono::milliseconds(f.disk_check_ms);
  options.runtime_own_uid = !f.shared_uid;
  options.docker_socket = f.docker_socket;
  options.docker_network = f.docker_network;
  options.cudashim = f.cudashim;
  options.advertise_addr = f.advertise_addr;
  options.shared_storage = f.shared_storage;

  // Before any thread starts, so that every thread inherits the mask (tasks get an empty one).
  const sigset_t signals = BlockShutdownSignals();

  std::string banner;
  auto agent = agent::Agent::Start(std::move(options), &banner);
  if (!agent) return Fail("agent: " + agent.error().message);
  std::cout << banner << "\n";
  std::cout << "gpupool agent ready: node " << (*agent)->node_name() << std::endl;

  const std::string signal_name = WaitForShutdown(signals);
  std::cerr << "gpupool agent: " << signal_name
            << ": stopping (tasks keep running; a restarted agent adopts them)\n";
  (*agent)->Stop();
  std::cerr << "gpupool agent: stopped\n";
}

}  // namespace

void AddAgentCommand(CLI::App& app) {
  auto flags = std::make_shared<AgentFlags>();
  CLI::App* cmd = app.add_subcommand(
      "agent",
      "Run the node agent: register this machine's CPUs, memory and GPUs with a server and run "
      "the tasks it places here. At its first start the node joins with a join token (--join-token "
      "or GPUPOOL_JOIN_TOKEN) and keeps its own credentials in the data dir; later starts need no "
      "token. An admin's key (--access-key/--secret-key, or GPUPOOL_ACCESS_KEY and "
      "GPUPOOL_SECRET_KEY) works too");
  cmd->add_option("--server", flags->server,
                  "Server endpoint, http://HOST:PORT or https://HOST:PORT")
      ->required();
  cmd->add_option("--ca-file", flags->ca_file,
                  "https: the PEM CA certificate(s) the server's certificate must chain to "
                  "(default: GPUPOOL_CA_FILE, else the system's store)")
      ->type_name("FILE");
  CLI::Option* token =
      cmd->add_option("--join-token", flags->join_token,
                      "Join token from `gpupool join-token create` (first start only; "
                      "default: GPUPOOL_JOIN_TOKEN)");
  CLI::Option* key = cmd->add_option("--access-key", flags->access_key,
                                     "An admin's access key instead of a join token (default: "
                                     "GPUPOOL_ACCESS_KEY)");
  CLI::Option* secret = cmd->add_option("--secret-key", flags->secret_key,
                                        "The admin access key's secret (default: "
                                        "GPUPOOL_SECRET_KEY; the environment keeps it out of ps)");
  key->needs(secret);
  secret->needs(key);
  token->excludes(key);
  token->excludes(secret);
  cmd->add_option("--name", flags->name, "Node name (default: the host name)");
  cmd->add_option("--data-dir", flags->data_dir,
                  "Directory of the agent's state and its tasks' workspaces and logs "
                  "(default ~/.local/share/gpupool-agent, as root /var/lib/gpupool-agent; as "
                  "root, every directory above it must be searchable by others, since tasks "
                  "run under their own uids)");
  cmd->add_option("--simulate-gpus", flags->simulate_gpus,
                  "Simulate GPUs instead of using NVML, e.g. 'A100-80GB:4,T4:2' or "
                  "'A100-80GB:1:mig=3g.40gb+3g.40gb'; ':links=4' groups GPUs by NVLink domain "
                  "('A100-80GB:8:links=4')");
  cmd->add_option("--cpu-milli", flags->cpu_milli,
                  "CPU offered, in milli-CPU (default: online cores × 1000)");
  cmd->add_option("--memory-mib", flags->memory_mib,
                  "Memory offered, in MiB (default: MemTotal of /proc/meminfo)");
  cmd->add_option("--heartbeat-ms", flags->heartbeat_ms,
                  "Milliseconds between heartbeats (keep well under the server's --node-timeout)")
      ->capture_default_str();
  cmd->add_option("--disk-gib", flags->disk_gib,
                  "Disk offered to task workspaces, in GiB (default: what is free on the data "
                  "dir's file system)");
  cmd->add_option("--chunk-cache-gib", flags->chunk_cache_gib,
                  "Snapshots' chunks kept on this node (data dir's chunks/), the least recently "
                  "used deleted first: a task resumed here fetches only what is not kept")
      ->capture_default_str();
  cmd->add_option("--dataset-cache-gib", flags->dataset_cache_gib,
                  "Dataset versions kept on this node (data dir's datasets/), the least recently "
                  "used that no task mounts removed first: a task mounting one kept here starts "
                  "without fetching it")
      ->capture_default_str();
  cmd->add_option("--disk-check-ms", flags->disk_check_ms,
                  "Milliseconds between measures of each workspace of a task with a disk size "
                  "(one that outgrows it is stopped)")
      ->capture_default_str();
  cmd->add_flag("--shared-uid", flags->shared_uid,
                "As root, run tasks under the agent's uid instead of one uid per task");
  cmd->add_option("--docker-socket", flags->docker_socket,
                  "The Docker Engine's unix socket, for tasks with an image (without a daemon "
                  "there the agent runs only tasks without one)")
      ->capture_default_str();
  AddTaskRuntimeFlags(cmd, &flags->docker_network, &flags->cudashim);
  cmd->add_option("--advertise-addr", flags->advertise_addr,
                  "Where other nodes reach this one (IP address or host name): distributed "
                  "jobs' MASTER_ADDR (default: this host's address on the route to the server)");
  cmd->add_option("--shared-storage", flags->shared_storage,
                  "A directory of a file system every node mounts (NFS, CephFS, Lustre): shared "
                  "volumes live there, and tasks with them run only on nodes that have it")
      ->check(CLI::ExistingDirectory);
  cmd->callback([flags] { RunAgent(*flags); });
}

}  // namespace gpupool::cmd
