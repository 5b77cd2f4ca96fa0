// Node commands: `nodes` (the pool at a glance), `node show NAME`, and the admin verbs
// `node cordon|uncordon|drain NAME` (/v1/nodes…).
#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/commands_common.h"
#include "cli/format.h"

namespace gpupool::cli {
namespace {

std::string StatusCell(const proto::NodeView& n) {
  if (n.draining) return n.status + ",draining";
  if (n.cordoned) return n.status + ",cordoned";
  return n.status;
}

// "8xA100-80GB", "4xA100-80GB,2xT4", "-".
std::string GpuModelsCell(const proto::NodeView& n) {
  std::vector<std::pair<std::string, int>> counts;  // in first-seen order
  for (const proto::GpuView& g : n.gpus) {
    auto it = std::find_if(counts.begin(), counts.end(),
                           [&](const auto& c) { return c.first == g.model; });
    if (it == counts.end()) {
      counts.emplace_back(g.model, 1);
    } else {
      ++it->second;
    }
  }
  std::vector<std::string> cells;
  for (const auto& [model, count] : counts) cells.push_back(std::to_string(count) + "x" + model);
  return cells.empty() ? "-" : JoinList(cells);
}

void PrintNodes(const proto::NodeList& answer) {
  const int64_t now = NowMs();
  Table table({"NAME", "STATUS", "GPUS", "GPU FREE", "CPU FREE", "MEM FREE", "TASKS", "HEARTBEAT"});
  for (const proto::NodeView& n : answer.nodes) {
    table.AddRow({n.name, StatusCell(n), GpuModelsCell(n),
                  FormatMilli(n.gpu_milli_free) + "/" + std::to_string(n.gpus.size()),
                  FormatMilli(n.cpu_free_milli) + "/" + FormatMilli(n.cpu_milli),
                  FormatMib(n.memory_free_mib) + "/" + FormatMib(n.memory_mib),
                  std::to_string(n.tasks.size()), FormatAge(n.last_heartbeat_ms, now)});
  }
  if (table.rows() == 0) {
    std::cerr << "no nodes (start an agent on a GPU server to add one)\n";
    return;
  }
  std::cout << table.Render();
}

void PrintNode(const proto::NodeView& n) {
  const int64_t now = NowMs();
  Details d;
  d.Add("Name", n.name);
  d.Add("Status", StatusCell(n));
  d.Add("CPU free", FormatMilli(n.cpu_free_milli) + " of " + FormatMilli(n.cpu_milli));
  d.Add("Memory free", FormatMib(n.memory_free_mib) + " of " + FormatMib(n.memory_mib));
  if (n.disk_gib > 0) {
    d.Add("Disk free",
          std::to_string(n.disk_free_gib) + " of " + std::to_string(n.disk_gib) + " GiB");
  }
  d.Add("GPU free", FormatMilli(n.gpu_milli_free) + " of " + std::to_string(n.gpus.size()));
  d.Add("Docker", std::string(n.docker ? (n.docker_gpus ? "yes" : "yes, without GPUs") : "no") +
                      (n.runtime_note.empty() ? "" : " (" + n.runtime_note + ")"));
  d.Add("Shared storage",
        n.shared_storage ? "yes (tasks with shared volumes run here)" : "no (--shared-storage)");
  std::vector<std::string> labels;
  for (const auto& [key, value] : n.labels) labels.push_back(key + "=" + value);
  d.Add("Labels", JoinList(labels));
  d.Add("Registered", FormatTime(n.registered_ms));
  d.Add("Last heartbeat",
        n.last_heartbeat_ms > 0
            ? FormatTime(n.last_heartbeat_ms) + " (" + FormatAge(n.last_heartbeat_ms, now) + " ago)"
            : "");
  d.Add("Tasks", JoinList(n.tasks, " "));
  std::cout << d.Render();
  if (n.gpus.empty()) return;
  Table table({"GPU", "MODEL", "MEMORY", "MIG", "UUID"});
  table.AlignRight(0);
  for (const proto::GpuView& g : n.gpus) {
    std::string mig = g.mig_enabled ? "on" : "-";
    for (const proto::MigInstanceView& m : g.mig_instances) {
      mig += " " + m.profile + "@" + std::to_string(m.start) + (m.in_use ? "*" : "");
    }
    table.AddRow({std::to_string(g.index), g.model, FormatMib(g.mem_mib), mig, g.uuid});
  }
  std::cout << "\n" << table.Render();
}

struct NodeState {
  std::string name;
  CommonFlags common;
};

// A node verb: its call on the typed client, and whether it prints the whole node (show) or the
// status it leaves the node in.
using NodeCall = Result<proto::NodeView> (api::NodesApi::*)(std::string_view);

void AddNodeVerb(CLI::App* group, int& exit_code, const std::string& verb, const std::string& help,
                 NodeCall call, bool show) {
  auto f = std::make_shared<NodeState>();
  CLI::App* cmd = group->add_subcommand(verb, help);
  cmd->add_option("name", f->name, "Node name")->required()->type_name("NAME");
  AddCommonFlags(cmd, &f->common);
  OnRun(cmd, exit_code, [f, call, show] {
    if (Status ok = CheckIdentifier("node name", f->name); !ok) {
      return UsageError(ok.error().message);
    }
    return WithSession(f->common, [&](Session& s) {
      api::NodesApi nodes = s.client().Nodes();
      return PrintAnswer((nodes.*call)(f->name), f->common.json, [&](const proto::NodeView& n) {
        if (show) {
          PrintNode(n);
        } else {
          std::cout << "node " << n.name << ": " << StatusCell(n) << "\n";
        }
      });
    });
  });
}

}  // namespace

void AddNodeCommands(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<CommonFlags>();
  CLI::App* nodes = app.add_subcommand("nodes", "List the pool's nodes and what is free on them");
  AddCommonFlags(nodes, f.get());
  OnRun(nodes, exit_code, [f] {
    return WithSession(*f, [&](Session& s) {
      return PrintAnswer(s.client().Nodes().List(), f->json, PrintNodes);
    });
  });

  CLI::App* node = app.add_subcommand("node", "One node: show, cordon, uncordon, drain");
  node->require_subcommand(1);
  AddNodeVerb(node, exit_code, "show", "A node, its GPUs and its tasks", &api::NodesApi::Get,
              /*show=*/true);
  AddNodeVerb(node, exit_code, "cordon", "Take no new tasks on the node (admin)",
              &api::NodesApi::Cordon, /*show=*/false);
  AddNodeVerb(node, exit_code, "uncordon", "Take new tasks on the node again (admin)",
              &api::NodesApi::Uncordon, /*show=*/false);
  AddNodeVerb(node, exit_code, "drain",
              "Cordon the node and stop its tasks; restartable ones are re-queued (admin)",
              &api::NodesApi::Drain, /*show=*/false);
}

}  // namespace gpupool::cli
