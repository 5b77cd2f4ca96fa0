// Snapshots (docs/snapshots.md): `gpupool snapshot t-1 [--image]` takes one of a running task
// (answered once it is stored; --image saves its container as an image too), `snapshot ls [TASK]`,
// `snapshot show S`, `snapshot rm S`, and `gpupool resume t-1 [--snapshot S]` queues an ended task
// again from one.
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/commands_common.h"
#include "cli/format.h"
#include "cli/output.h"
#include "core/snapshot.h"

namespace gpupool::cli {
namespace {

struct SnapshotState {
  std::string id;  // a task's (take, ls, resume) or a snapshot's (show, rm)
  CommonFlags common;
};

// "sha256:0123456789ab (12.0 MiB over pytorch:2.1, saved here)".
std::string ImageText(const proto::SnapshotImage& image) {
  return image.id.substr(0, 19) + " (" + FormatBytes(image.bytes) + " over " + image.base +
         (image.saved ? ", saved here)" : ", its run's)");
}

std::string SnapshotLine(const proto::Snapshot& s) {
  return s.id + ": " + std::to_string(s.files) + " file(s), " + FormatBytes(s.bytes) + " (" +
         FormatBytes(s.new_bytes) + " new), " + s.consistency + "-consistent, frozen " +
         std::to_string(s.frozen_ms) + " ms, " + std::to_string(s.duration_ms) + " ms in all" +
         (s.image && s.image->saved ? "; container saved as image " + ImageText(*s.image) : "");
}

void PrintSnapshot(const proto::Snapshot& s) {
  Details d;
  d.Add("ID", s.id);
  d.Add("Task", s.task_id + " (run " + std::to_string(s.run) + ")");
  d.Add("Project", s.project);
  d.Add("Taken", TimeWithAge(s.taken_ms, NowMs()) + " on " + s.node);
  d.Add("Trigger", s.trigger);
  d.Add("Consistency", s.consistency);
  d.Add("Files", std::to_string(s.files) + ", " + FormatBytes(s.bytes));
  d.Add("New bytes", FormatBytes(s.new_bytes));
  d.Add("Frozen", std::to_string(s.frozen_ms) + " ms");
  d.Add("Took", std::to_string(s.duration_ms) + " ms");
  d.Add("Manifest", s.manifest);
  if (s.image) d.Add("Image", ImageText(*s.image));
  std::cout << d.Render();
}

void PrintSnapshots(const proto::SnapshotList& list) {
  Table table({"ID", "TASK", "RUN", "TAKEN", "TRIGGER", "FILES", "SIZE", "NEW", "FROZEN"});
  for (const proto::Snapshot& s : list.snapshots) {
    table.AddRow({s.id, s.task_id, std::to_string(s.run), FormatAge(s.taken_ms, NowMs()), s.trigger,
                  std::to_string(s.files), FormatBytes(s.bytes), FormatBytes(s.new_bytes),
                  std::to_string(s.frozen_ms) + " ms"});
  }
  std::cout << table.Render();
}

// A task id as typed (t-42 or 42) in its canonical form, or why not.
Result<std::string> TaskArg(const std::string& text) { return ParseTaskId(text); }

Result<std::string> SnapshotArg(const std::string& text) {
  const std::string id = text.starts_with("s-") ? text : "s-" + text;
  if (!SnapshotSeq(id)) return InvalidArgument("'" + text + "' is not a snapshot id (s-12, or 12)");
  return id;
}

CLI::App* AddCommand(CLI::App& parent, int& exit_code, const std::string& name,
                     const std::string& help, const std::string& arg, const std::string& arg_help,
                     bool arg_required, std::function<int(Session&, const SnapshotState&)> run) {
  auto f = std::make_shared<SnapshotState>();
  CLI::App* cmd = parent.add_subcommand(name, help);
  CLI::Option* o = cmd->add_option(arg, f->id, arg_help)->type_name("ID");
  if (arg_required) o->required();
  AddCommonFlags(cmd, &f->common);
  OnRun(cmd, exit_code, [f, cmd, &exit_code, run = std::move(run)] {
    // `snapshot ls|show|rm` ran already: the parent command has nothing of its own to do.
    if (!cmd->get_subcommands().empty()) return exit_code;
    int code = kExitOk;
    auto session = Session::Open(f->common, &code);
    if (!session) return code;
    return run(*session, *f);
  });
  return cmd;
}

}  // namespace

void AddSnapshotCommands(CLI::App& app, int& exit_code) {
  auto take = std::make_shared<proto::TaskSnapshotRequest>();
  CLI::App* snapshot = AddCommand(
      app, exit_code, "snapshot",
      "Snapshot a running task's workspace now (frozen while its changed files are read; "
      "first asked to checkpoint when it handles the signal). Prints the snapshot once stored",
      "task", "Task id (t-42, or 42)", false, [take](Session& s, const SnapshotState& f) {
        if (f.id.empty()) return UsageError("give a task: gpupool snapshot t-42 (or ls, show, rm)");
        Result<std::string> id = TaskArg(f.id);
        if (!id) return UsageError(id.error().message);
        return PrintAnswer(
            s.client().Snapshots().Take(*id, *take), f.common.json,
            [](const proto::Snapshot& snap) { std::cout << SnapshotLine(snap) << "\n"; });
      });
  snapshot->add_flag("--image", take->image,
                     "Also save the task's container as an image (a task with an image): the "
                     "task resumed from this snapshot, or started from it with --from-snapshot, "
                     "runs in it");
  auto list = AddCommand(
      *snapshot, exit_code, "ls", "Snapshots of a task, or of every task", "task",
      "Task id (t-42); default: every task", false, [](Session& s, const SnapshotState& f) {
        proto::SnapshotListQuery q;
        if (!f.id.empty()) {
          Result<std::string> id = TaskArg(f.id);
          if (!id) return UsageError(id.error().message);
          q.task = *id;
        }
        return PrintAnswer(s.client().Snapshots().List(q), f.common.json, PrintSnapshots);
      });
  (void)list;
  AddCommand(*snapshot, exit_code, "show", "A snapshot in detail", "snapshot",
             "Snapshot id (s-12, or 12)", true, [](Session& s, const SnapshotState& f) {
               Result<std::string> id = SnapshotArg(f.id);
               if (!id) return UsageError(id.error().message);
               return PrintAnswer(s.client().Snapshots().Get(*id), f.common.json, PrintSnapshot);
             });
  AddCommand(*snapshot, exit_code, "rm", "Delete a snapshot (the storage it alone holds is freed)",
             "snapshot", "Snapshot id (s-12, or 12)", true, [](Session& s, const SnapshotState& f) {
               Result<std::string> id = SnapshotArg(f.id);
               if (!id) return UsageError(id.error().message);
               return PrintAnswer(
                   s.client().Snapshots().Delete(*id), f.common.json,
                   [](const proto::Deleted& d) { std::cout << "deleted " << d.id << "\n"; });
             });
  auto resume_state = std::make_shared<std::string>();
  AddCommand(app, exit_code, "resume",
             "Queue an ended (stopped, failed) task again: its next run starts from its latest "
             "snapshot, or --snapshot S",
             "task", "Task id (t-42, or 42)", true,
             [resume_state](Session& s, const SnapshotState& f) {
               Result<std::string> id = TaskArg(f.id);
               if (!id) return UsageError(id.error().message);
               proto::TaskResume body;
               if (!resume_state->empty()) {
                 Result<std::string> snap = SnapshotArg(*resume_state);
                 if (!snap) return UsageError(snap.error().message);
                 body.snapshot = *snap;
               }
               return PrintAnswer(s.client().Snapshots().Resume(*id, body), f.common.json,
                                  [](const proto::Task& t) {
                                    std::cout << t.id << ": " << t.state << ", resumes from "
                                              << t.resume_from << "\n";
                                  });
             })
      ->add_option("--snapshot", *resume_state, "A snapshot of the task (default: its latest)")
      ->type_name("SNAPSHOT");
}

}  // namespace gpupool::cli
