// The `gpupool` subcommands main() wires in, and the exit status they share.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace gpupool::cmd {

// `gpupool sim …`: the trace simulator.
void AddSimCommands(CLI::App& app);
// `gpupool server`: the control plane.
void AddServerCommand(CLI::App& app);
// `gpupool agent`: the node agent.
void AddAgentCommand(CLI::App& app);
// `gpupool up`: the control plane and an agent in one process.
void AddUpCommand(CLI::App& app);
// `gpupool openapi`: the REST API's OpenAPI document.
void AddOpenApiCommand(CLI::App& app);

// The task-runtime flags `agent` and `up` share: --docker-network (the containers' network mode)
// and --cudashim (the GPU-memory interposer for shares of real GPUs).
void AddTaskRuntimeFlags(CLI::App* cmd, std::string* docker_network, std::string* cudashim);

// Prints "gpupool: <message>" to stderr and makes the process exit non-zero.
void Fail(const std::string& message);

// The process exit code set by the command that ran (0 on success).
int ExitCode();

}  // namespace gpupool::cmd
