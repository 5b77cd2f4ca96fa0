// The CLI's command groups, one file each; user_commands.cc adds them all. `exit_code` is where a
// command that ran leaves its exit status.
#pragma once

#include <CLI/CLI.hpp>

namespace gpupool::cli {

// submit, release, ls, show, stop, rm, events (commands_tasks.cc).
void AddTaskCommands(CLI::App& app, int& exit_code);
// nodes, node show|cordon|uncordon|drain (commands_nodes.cc).
void AddNodeCommands(CLI::App& app, int& exit_code);
// project, user, key, price, credit (commands_accounts.cc).
void AddAccountCommands(CLI::App& app, int& exit_code);
// usage, bill balance|ledger|statement|cost (commands_billing.cc).
void AddBillingCommands(CLI::App& app, int& exit_code);
// logs, wait, top (commands_observe.cc).
void AddObserveCommands(CLI::App& app, int& exit_code);
// login (commands_login.cc).
void AddLoginCommand(CLI::App& app, int& exit_code);
// cp, sync, ls-files (commands_files.cc).
void AddFileCommands(CLI::App& app, int& exit_code);
// join-token create|list|revoke (commands_join.cc).
void AddJoinTokenCommands(CLI::App& app, int& exit_code);
// open, port-forward (commands_ports.cc).
void AddPortCommands(CLI::App& app, int& exit_code);
// exec, shell (commands_exec.cc).
void AddExecCommands(CLI::App& app, int& exit_code);
// ssh-key add|ls|rm, ssh-config, tunnel (commands_ssh.cc).
void AddSshCommands(CLI::App& app, int& exit_code);
// snapshot [ls|show|rm], resume (commands_snapshots.cc).
void AddSnapshotCommands(CLI::App& app, int& exit_code);
// volume create|ls|show|resize|rm (commands_volumes.cc).
void AddVolumeCommands(CLI::App& app, int& exit_code);
// dataset push|ls|show|rm|publish (commands_datasets.cc).
void AddDatasetCommands(CLI::App& app, int& exit_code);

}  // namespace gpupool::cli
