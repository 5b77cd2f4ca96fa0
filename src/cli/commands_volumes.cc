// Volumes (docs/volumes.md): `gpupool volume create NAME --size 200Gi [--shared] [--node N]`,
// `volume ls`, `volume show V`, `volume resize V --size S`, `volume rm V` (V: a name, or an id
// v-12). Tasks mount them with `gpupool submit --volume NAME:/root/data[:ro]`.
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/commands_common.h"
#include "cli/format.h"
#include "cli/output.h"

namespace gpupool::cli {
namespace {

struct VolumeState {
  std::string volume;  // a name or an id
  std::string size;    // --size as typed
  bool shared = false;
  std::optional<std::string> node;
  std::optional<std::string> project;
  CommonFlags common;
};

std::string Where(const proto::VolumeView& v) {
  if (v.shared) return "shared storage";
  return v.node.empty() ? "(its first task's node)" : v.node;
}

void PrintVolume(const proto::VolumeView& v) {
  Details d;
  d.Add("ID", v.id);
  d.Add("Name", v.name);
  d.Add("Project", v.project);
  d.Add("Size", FormatBytes(v.size_bytes));
  d.Add("Kind", v.shared ? "shared" : "node-local");
  d.Add("Where", Where(v));
  d.Add("State", v.state);
  d.Add("Created", TimeWithAge(v.created_ms, NowMs()) + " by " + v.created_by);
  d.Add("Used by", FewOf(v.used_by));
  std::cout << d.Render();
}

void PrintVolumes(const proto::VolumeList& list) {
  Table table({"ID", "NAME", "PROJECT", "SIZE", "WHERE", "STATE", "USED BY"});
  for (const proto::VolumeView& v : list.volumes) {
    table.AddRow(
        {v.id, v.name, v.project, FormatBytes(v.size_bytes), Where(v), v.state, FewOf(v.used_by)});
  }
  std::cout << table.Render();
}

// --size as bytes: "200Gi", "512M", "1T" (binary units), or MiB.
Result<int64_t> SizeBytes(const std::string& text) {
  if (text.empty()) return InvalidArgument("--size is required, e.g. --size 200Gi");
  Result<int64_t> mib = ParseMib(text);
  if (!mib) return InvalidArgument("--size: " + mib.error().message);
  if (*mib <= 0) return InvalidArgument("--size must be larger than 0");
  return *mib << 20;
}

CLI::App* AddCommand(CLI::App& parent, int& exit_code, const std::string& name,
                     const std::string& help, const std::shared_ptr<VolumeState>& f,
                     const std::string& arg_help,
                     std::function<int(Session&, const VolumeState&)> run) {
  CLI::App* cmd = parent.add_subcommand(name, help);
  if (!arg_help.empty()) cmd->add_option("volume", f->volume, arg_help)->required();
  AddCommonFlags(cmd, &f->common);
  OnRun(cmd, exit_code, [f, run = std::move(run)] {
    return WithSession(f->common, [&](Session& s) { return run(s, *f); });
  });
  return cmd;
}

}  // namespace

void AddVolumeCommands(CLI::App& app, int& exit_code) {
  CLI::App* volume =
      app.add_subcommand("volume", "Volumes: a project's data that outlives its tasks");
  volume->require_subcommand(1);
  const std::string which = "The volume: its name, or its id (v-12)";

  auto create = std::make_shared<VolumeState>();
  CLI::App* c = AddCommand(
      *volume, exit_code, "create",
      "Create a volume. Node-local by default: on one node's disk (the node of the first task "
      "that mounts it, or --node), where its tasks then run; --shared: on the shared storage of "
      "every node started with --shared-storage",
      create, "", [](Session& s, const VolumeState& f) {
        Result<int64_t> size = SizeBytes(f.size);
        if (!size) return UsageError(size.error().message);
        proto::VolumeCreate body;
        body.name = f.volume;
        body.size_bytes = *size;
        body.shared = f.shared;
        body.node = f.node;
        body.project = f.project;
        return PrintAnswer(s.client().Volumes().Create(body), f.common.json,
                           [](const proto::VolumeView& v) {
                             std::cout << "created " << v.id << " (" << v.name << ", "
                                       << FormatBytes(v.size_bytes) << ", " << Where(v) << ")\n";
                           });
      });
  c->add_option("name", create->volume, "Its name: a-z 0-9 _ . -, unique in the project")
      ->required();
  c->add_option("--size", create->size, "What it may hold: 200Gi, 512M, 1T")->required();
  c->add_flag("--shared", create->shared, "On the shared storage, mountable on every node with it");
  AddOptional(c, "--node", &create->node, "NODE", "A node-local volume's node");
  AddOptional(c, "--project", &create->project, "PROJECT", "Its project (default: your only one)");

  auto list = std::make_shared<VolumeState>();
  CLI::App* ls =
      AddCommand(*volume, exit_code, "ls", "The volumes of your projects", list, "",
                 [](Session& s, const VolumeState& f) {
                   proto::VolumeListQuery q;
                   q.project = f.project.value_or("");
                   return PrintAnswer(s.client().Volumes().List(q), f.common.json, PrintVolumes);
                 });
  AddOptional(ls, "--project", &list->project, "PROJECT", "Only this project's");

  AddCommand(*volume, exit_code, "show", "A volume in detail", std::make_shared<VolumeState>(),
             which, [](Session& s, const VolumeState& f) {
               return PrintAnswer(s.client().Volumes().Get(f.volume), f.common.json, PrintVolume);
             });

  auto resize = std::make_shared<VolumeState>();
  CLI::App* r =
      AddCommand(*volume, exit_code, "resize",
                 "Change a volume's size (a task that holds more than a smaller size is stopped)",
                 resize, which, [](Session& s, const VolumeState& f) {
                   Result<int64_t> size = SizeBytes(f.size);
                   if (!size) return UsageError(size.error().message);
                   proto::VolumeUpdate body;
                   body.size_bytes = *size;
                   return PrintAnswer(s.client().Volumes().Update(f.volume, body), f.common.json,
                                      [](const proto::VolumeView& v) {
                                        std::cout << v.id << " (" << v.name
                                                  << "): " << FormatBytes(v.size_bytes) << "\n";
                                      });
                 });
  r->add_option("--size", resize->size, "Its new size: 300Gi")->required();

  AddCommand(*volume, exit_code, "rm",
             "Delete a volume that no live task mounts: its files are removed by its node",
             std::make_shared<VolumeState>(), which, [](Session& s, const VolumeState& f) {
               return PrintAnswer(
                   s.client().Volumes().Delete(f.volume), f.common.json,
                   [](const proto::Deleted& d) { std::cout << "deleted " << d.id << "\n"; });
             });
}

}  // namespace gpupool::cli
