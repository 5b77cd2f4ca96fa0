// `gpupool server`: the control plane alone (REST API, scheduler, metering) on a data dir, until
// SIGTERM / SIGINT.
#include <iostream>

#include "cmd/commands.h"
#include "cmd/running_server.h"

namespace gpupool::cmd {
namespace {

void RunServer(const ServerFlags& flags) {
  const sigset_t signals = BlockShutdownSignals();
  auto server = RunningServer::Start(flags);
  if (!server) return Fail(server.error().message);
  const std::string& dir = (*server)->data_dir();
  if ((*server)->bootstrapped_now()) {
    std::cout << "gpupool server: bootstrapped " << dir << ": admin key "
              << (*server)->ReadCredentials().access_key << " in " << dir << "/credentials.env\n";
  }
  std::cout << "gpupool server: data dir " << dir << ", policy " << flags.policy << "\n";
  std::cout << "gpupool server: " << (*server)->ConsoleLine() << "\n";
  std::cout << "gpupool server: " << (*server)->LimitsLine() << "\n";
  std::cout << "gpupool server: " << (*server)->TransportLine() << "\n";
  std::cout << "gpupool server listening on " << (*server)->endpoint() << std::endl;
  const std::string signal_name = WaitForShutdown(signals);
  std::cerr << "gpupool server: " << signal_name << ": finishing requests in flight\n";
  (*server)->Shutdown();
  std::cerr << "gpupool server: stopped\n";
}

}  // namespace

void AddServerCommand(CLI::App& app) {
  auto flags = std::make_shared<ServerFlags>();
  CLI::App* cmd = app.add_subcommand("server",
                                     "Run the control plane (REST API, scheduler, "
                                     "metering) on a data directory");
  AddServerFlags(cmd, flags.get());
  cmd->callback([flags] { RunServer(*flags); });
}

}  // namespace gpupool::cmd
