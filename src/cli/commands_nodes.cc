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

std::string StatusCell(const Json& n) {
  std::string s = Str(n, "status");
  if (Bool(n, "draining")) {
    s += ",draining";
  } else if (Bool(n, "cordoned")) {
    s += ",cordoned";
  }
  return s;
}

// "8xA100-80GB", "4xA100-80GB,2xT4", "-".
std::string GpuModelsCell(const Json& n) {
  std::vector<std::pair<std::string, int>> counts;  // in first-seen order
  for (const Json& g : Array(n, "gpus")) {
    const std::string model = Str(g, "model");
    auto it =
        std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == model; });
    if (it == counts.end()) {
      counts.emplace_back(model, 1);
    } else {
      ++it->second;
    }
  }
  std::string out;
  for (const auto& [model, count] : counts) {
    out += (out.empty() ? "" : ",") + std::to_string(count) + "x" + model;
  }
  return out.empty() ? "-" : out;
}

void PrintNodes(const Json& answer) {
  const int64_t now = NowMs();
  Table table({"NAME", "STATUS", "GPUS", "GPU FREE", "CPU FREE", "MEM FREE", "TASKS", "HEARTBEAT"});
  for (const Json& n : Array(answer, "nodes")) {
    const size_t gpus = Array(n, "gpus").size();
    table.AddRow({Str(n, "name"), StatusCell(n), GpuModelsCell(n),
                  FormatMilli(Int(n, "gpu_milli_free")) + "/" + std::to_string(gpus),
                  FormatMilli(Int(n, "cpu_free_milli")) + "/" + FormatMilli(Int(n, "cpu_milli")),
                  FormatMib(Int(n, "memory_free_mib")) + "/" + FormatMib(Int(n, "memory_mib")),
                  std::to_string(Array(n, "tasks").size()),
                  FormatAge(Int(n, "last_heartbeat_ms"), now)});
  }
  if (table.rows() == 0) {
    std::cerr << "no nodes (start an agent on a GPU server to add one)\n";
    return;
  }
  std::cout << table.Render();
}

void PrintNode(const Json& n) {
  const int64_t now = NowMs();
  Details d;
  d.Add("Name", Str(n, "name"));
  d.Add("Status", StatusCell(n));
  d.Add("CPU free",
        FormatMilli(Int(n, "cpu_free_milli")) + " of " + FormatMilli(Int(n, "cpu_milli")));
  d.Add("Memory free",
        FormatMib(Int(n, "memory_free_mib")) + " of " + FormatMib(Int(n, "memory_mib")));
  if (Int(n, "disk_gib") > 0) d.Add("Disk", std::to_string(Int(n, "disk_gib")) + " GiB");
  d.Add("GPU free",
        FormatMilli(Int(n, "gpu_milli_free")) + " of " + std::to_string(Array(n, "gpus").size()));
  std::string labels;
  if (n.contains("labels") && n["labels"].is_object()) {
    for (const auto& item : n["labels"].items()) {
      if (item.value().is_string()) {
        labels += (labels.empty() ? "" : ",") + item.key() + "=" + item.value().get<std::string>();
      }
    }
  }
  d.Add("Labels", labels);
  d.Add("Registered", FormatTime(Int(n, "registered_ms")));
  d.Add("Last heartbeat", Int(n, "last_heartbeat_ms") > 0
                              ? FormatTime(Int(n, "last_heartbeat_ms")) + " (" +
                                    FormatAge(Int(n, "last_heartbeat_ms"), now) + " ago)"
                              : "");
  std::string tasks;
  for (const Json& t : Array(n, "tasks")) {
    if (t.is_string()) tasks += (tasks.empty() ? "" : " ") + t.get<std::string>();
  }
  d.Add("Tasks", tasks);
  std::cout << d.Render();
  const Json& gpus = Array(n, "gpus");
  if (gpus.empty()) return;
  Table table({"GPU", "MODEL", "MEMORY", "MIG", "UUID"});
  table.AlignRight(0);
  for (const Json& g : gpus) {
    std::string mig = Bool(g, "mig_enabled") ? "on" : "-";
    for (const Json& m : Array(g, "mig_instances")) {
      mig += " " + Str(m, "profile") + "@" + std::to_string(Int(m, "start")) +
             (Bool(m, "in_use") ? "*" : "");
    }
    table.AddRow({std::to_string(Int(g, "index")), Str(g, "model"), FormatMib(Int(g, "mem_mib")),
                  mig, Str(g, "uuid")});
  }
  std::cout << "\n" << table.Render();
}

struct NodeState {
  std::string name;
  CommonFlags common;
};

void AddNodeVerb(CLI::App* group, int& exit_code, const std::string& verb, const std::string& help,
                 const std::string& method, const std::string& suffix) {
  auto f = std::make_shared<NodeState>();
  CLI::App* cmd = group->add_subcommand(verb, help);
  cmd->add_option("name", f->name, "Node name")->required()->type_name("NAME");
  AddCommonFlags(cmd, &f->common);
  OnRun(cmd, exit_code, [f, method, suffix] {
    if (Status ok = CheckIdentifier("node name", f->name); !ok) {
      return UsageError(ok.error().message);
    }
    int code = kExitOk;
    auto session = Session::Open(f->common, &code);
    if (!session) return code;
    Result<Json> node = session->Call(method, "/v1/nodes/" + PathPart(f->name) + suffix);
    if (!node) return ApiFailure(node.error());
    if (f->common.json) {
      PrintJson(*node);
    } else if (suffix.empty()) {
      PrintNode(*node);
    } else {
      std::cout << "node " << Str(*node, "name") << ": " << StatusCell(*node) << "\n";
    }
    return kExitOk;
  });
}

}  // namespace

void AddNodeCommands(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<CommonFlags>();
  CLI::App* nodes = app.add_subcommand("nodes", "List the pool's nodes and what is free on them");
  AddCommonFlags(nodes, f.get());
  OnRun(nodes, exit_code, [f] {
    int code = kExitOk;
    auto session = Session::Open(*f, &code);
    if (!session) return code;
    Result<Json> answer = session->Call("GET", "/v1/nodes");
    if (!answer) return ApiFailure(answer.error());
    if (f->json) {
      PrintJson(*answer);
    } else {
      PrintNodes(*answer);
    }
    return kExitOk;
  });

  CLI::App* node = app.add_subcommand("node", "One node: show, cordon, uncordon, drain");
  node->require_subcommand(1);
  AddNodeVerb(node, exit_code, "show", "A node, its GPUs and its tasks", "GET", "");
  AddNodeVerb(node, exit_code, "cordon", "Take no new tasks on the node (admin)", "POST",
              "/cordon");
  AddNodeVerb(node, exit_code, "uncordon", "Take new tasks on the node again (admin)", "POST",
              "/uncordon");
  AddNodeVerb(node, exit_code, "drain",
              "Cordon the node and stop its tasks; restartable ones are re-queued (admin)", "POST",
              "/drain");
}

}  // namespace gpupool::cli
