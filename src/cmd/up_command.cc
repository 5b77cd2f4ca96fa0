// `gpupool up`: a whole pool on one machine in one process — the control plane (embedded SQLite
// under --data-dir) and a node agent for this machine, using its real GPUs through NVML when
// the driver is there and simulated GPUs otherwise (the banner says which).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "agent/agent.h"
#include "agent/gpu/nvml_probe.h"
#include "api/resources.h"
#include "cmd/commands.h"
#include "cmd/running_server.h"

namespace gpupool::cmd {
namespace {

// What `up` simulates on a machine without NVIDIA GPUs: enough for whole, shared and multi-GPU
// tasks.
constexpr const char* kDefaultSimulatedGpus = "A100-80GB:4";

struct UpFlags {
  ServerFlags server;
  std::string simulate_gpus;
  std::string node_name;
  std::string docker_socket = agent::AgentOptions().docker_socket;
  std::string docker_network = agent::AgentOptions().docker_network;
  std::string cudashim;
};

void RunUp(UpFlags flags) {
  const sigset_t signals = BlockShutdownSignals();
  std::string gpu_line;
  if (flags.simulate_gpus.empty()) {
    std::string why_not;
    if (agent::NvmlProbe::Open(&why_not) == nullptr) {
      flags.simulate_gpus = kDefaultSimulatedGpus;
      gpu_line = "no NVIDIA driver here (" + why_not + "): SIMULATED GPUs " + flags.simulate_gpus +
                 " (choose with --simulate-gpus)";
    }
  } else {
    gpu_line = "SIMULATED GPUs " + flags.simulate_gpus + " (--simulate-gpus)";
  }
  auto server = RunningServer::Start(flags.server);
  if (!server) return Fail(server.error().message);
  const std::string& dir = (*server)->data_dir();
  const Credentials admin = (*server)->ReadCredentials();
  if (admin.access_key.empty()) {
    return Fail(dir + "/credentials.env is missing: the local agent needs the admin key it holds");
  }

  agent::AgentOptions options;
  options.endpoint = (*server)->endpoint();
  options.ca_file = (*server)->ca_file();
  options.access_key = admin.access_key;
  options.secret_key = admin.secret_key;
  options.node_name = flags.node_name;
  options.data_dir = dir + "/agent";
  options.simulate_gpus = flags.simulate_gpus;
  options.docker_socket = flags.docker_socket;
  options.docker_network = flags.docker_network;
  options.cudashim = flags.cudashim;
  // A pool of one node shares its storage with itself: shared volumes work here as well.
  options.shared_storage = dir + "/shared";
  std::error_code ec;
  std::filesystem::create_directories(options.shared_storage, ec);
  if (ec) return Fail("cannot create " + options.shared_storage + ": " + ec.message());
  std::string agent_banner;
  auto node = agent::Agent::Start(options, &agent_banner);
  if (!node) return Fail("the local agent did not start: " + node.error().message);

  std::cout << "gpupool up: a pool of one node (" << (*node)->node_name() << ") in " << dir << "\n";
  if (!gpu_line.empty()) std::cout << "gpupool up: " << gpu_line << "\n";
  std::cout << agent_banner;
  if (!agent_banner.empty() && agent_banner.back() != '\n') std::cout << "\n";
  // A new pool is free until prices are set: say so, since balances then gate nothing.
  api::Client client((*server)->endpoint(), admin.access_key, admin.secret_key,
                     {.ca_file = (*server)->ca_file()});
  if (Result<proto::PriceList> prices = client.Billing().Prices(); prices) {
    const bool free = std::none_of(prices->prices.begin(), prices->prices.end(),
                                   [](const proto::PriceView& p) { return p.micros_per_hour > 0; });
    if (free) {
      std::cout << "gpupool up: billing is off: every price is 0 (set one with "
                   "`gpupool price set gpu:A100-80GB 2.5/h`)\n";
    }
  }
  std::cout << "gpupool up: endpoint " << (*server)->endpoint() << "\n"
            << "gpupool up: " << (*server)->TransportLine() << "\n"
            << "gpupool up: " << (*server)->ConsoleLine() << "\n"
            << "gpupool up: in another terminal:\n"
            << "    set -a; . " << dir << "/credentials.env; set +a\n"
            << "    gpupool submit --gpus 1 -- python3 -c 'print(\"hello\")'\n"
            << "    gpupool ls\n"
            << "gpupool up: ready. Ctrl-C stops the pool; a task still running is stopped by "
               "its supervisor unless the next `gpupool up` is back within its lease (half of "
               "--node-timeout), which re-adopts it"
            << std::endl;

  const std::string signal_name = WaitForShutdown(signals);
  std::cerr << "gpupool up: " << signal_name << ": stopping\n";
  (*node)->Stop();
  (*server)->Shutdown();
  std::cerr << "gpupool up: stopped\n";
}

}  // namespace

void AddUpCommand(CLI::App& app) {
  auto flags = std::make_shared<UpFlags>();
  CLI::App* cmd = app.add_subcommand(
      "up",
      "Run a whole pool on this machine: the control plane and an agent for its GPUs "
      "(real through NVML, or simulated)");
  AddServerFlags(cmd, &flags->server);
  cmd->add_option("--simulate-gpus", flags->simulate_gpus,
                  "Simulate these GPUs instead of using real ones, e.g. 'A100-80GB:4,T4:2', "
                  "or MIG-partitioned: 'A100-80GB:1:mig=3g.40gb+3g.40gb' (default without an "
                  "NVIDIA driver: " +
                      std::string(kDefaultSimulatedGpus) + ")");
  cmd->add_option("--node-name", flags->node_name, "This node's name (default: the host name)");
  cmd->add_option("--docker-socket", flags->docker_socket,
                  "The Docker Engine's unix socket, for tasks with an image")
      ->capture_default_str();
  AddTaskRuntimeFlags(cmd, &flags->docker_network, &flags->cudashim);
  cmd->callback([flags] { RunUp(*flags); });
}

}  // namespace gpupool::cmd
