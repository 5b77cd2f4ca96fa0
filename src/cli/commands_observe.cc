// Watching what runs: `gpupool logs ID [-f] [--tail N] [--stream S]` (a task's output, followed
// live by long-polling GET /v1/tasks/{id}/logs until the task's output is complete), `gpupool
// wait ID` (the same long-poll, until the task has ended; exits with its status) and
// `gpupool top` (nodes' and running tasks' latest usage from GET /v1/usage, refreshed in place).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/commands_common.h"
#include "cli/format.h"
#include "core/base64.h"
#include "core/duration.h"
#include "core/records.h"

namespace gpupool::cli {
namespace {

constexpr int64_t kFollowWaitMs = 20'000;  // each long-poll of `logs -f`

struct LogsFlags {
  std::string id;
  bool follow = false;
  int64_t tail = -1;
  std::string stream = "all";
  CommonFlags common;
};

// Reads one stream to its end (or, following, until the task's output is complete), writing
// the bytes to `out` as they come — with --json, each answer's wire JSON on a line of stdout
// (under `json_mu`, which both streams share). Its own session: `logs -f` follows two streams at
// once.
int CopyStream(const LogsFlags& f, const std::string& id, const std::string& stream,
               std::ostream& out, std::mutex& json_mu) {
  return WithSession(f.common, [&](Session& s) {
    int64_t offset = 0;
    bool first = true;
    for (;;) {
      proto::LogQuery q;
      q.stream = stream;
      if (first && f.tail >= 0) {
        q.tail = f.tail;
      } else {
        q.offset = offset;
      }
      if (f.follow && !first) q.wait_ms = kFollowWaitMs;
      first = false;
      Result<proto::LogSlice> slice = s.client().Tasks().Logs(id, q);
      if (!slice) return ApiFailure(slice.error());
      if (f.common.json) {
        std::lock_guard lock(json_mu);
        std::cout << proto::Encode(*slice).dump(-1, ' ', false, Json::error_handler_t::replace)
                  << "\n"
                  << std::flush;
      } else {
        const std::optional<std::string> data = Base64Decode(slice->data_b64);
        if (!data) return Failure("the server sent output that is not base64");
        out << *data << std::flush;
      }
      offset = slice->next_offset;
      const bool at_end = offset >= slice->size;
      if (at_end && (!f.follow || slice->complete)) return kExitOk;
    }
  });
}

// The task once it has ended. Waits by long-polling its output (the answer comes as soon as the
// output is complete, i.e. the run has ended), not by polling its state; the end report travels
// apart from the output and may land a moment after it, so once the output is complete the
// state is read again after short pauses until it is terminal.
Result<proto::TaskDetail> AwaitEnd(Session& s, const std::string& id) {
  std::optional<int64_t> offset;  // unknown until the first answer: start at the end
  int64_t pause_ms = 20;
  for (;;) {
    Result<proto::TaskDetail> task = s.client().Tasks().Get(id);
    if (!task) return task;
    // A state this CLI does not know (a newer server) cannot be waited on: it is answered as is.
    const std::optional<TaskState> state = ParseTaskState(task->state);
    if (!state || IsTerminal(*state)) return task;
    proto::LogQuery q;
    q.stream = "metrics";  // the smallest stream; its bytes are skipped, not printed
    q.max_bytes = 1;
    if (offset) {
      q.offset = *offset;
      q.wait_ms = kFollowWaitMs;
    } else {
      q.tail = 0;
    }
    Result<proto::LogSlice> slice = s.client().Tasks().Logs(id, q);
    if (!slice) return tl::unexpected(slice.error());
    offset = slice->size;
    if (slice->complete) {
      std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
      pause_ms = std::min<int64_t>(pause_ms * 2, 1000);
    }
  }
}

int RunLogs(const LogsFlags& f) {
  Result<std::string> id = ParseTaskId(f.id);
  if (!id) return UsageError(id.error().message);
  if (f.stream != "all" && f.stream != "stdout" && f.stream != "stderr" && f.stream != "metrics") {
    return UsageError("--stream must be all, stdout, stderr or metrics, got '" + f.stream + "'");
  }
  std::mutex json_mu;
  int code = kExitOk;
  if (f.stream != "all") {
    code = CopyStream(f, *id, f.stream, f.stream == "stderr" ? std::cerr : std::cout, json_mu);
  } else {
    // The task first, so that a wrong id is said once (not once per stream).
    code = WithSession(f.common, [&](Session& s) {
      Result<proto::TaskDetail> task = s.client().Tasks().Get(*id);
      return task ? kExitOk : ApiFailure(task.error());
    });
    if (code != kExitOk) return code;
    // Both: stdout to stdout and stderr to stderr, each followed on its own connection.
    int err_code = kExitOk;
    std::thread err([&] { err_code = CopyStream(f, *id, "stderr", std::cerr, json_mu); });
    code = CopyStream(f, *id, "stdout", std::cout, json_mu);
    err.join();
    if (code == kExitOk) code = err_code;
  }
  if (code != kExitOk || !f.follow) return code;
  // Followed to its end: exit as the task did, as `gpupool wait` does.
  return WithSession(f.common, [&](Session& s) {
    Result<proto::TaskDetail> task = AwaitEnd(s, *id);
    if (!task) return ApiFailure(task.error());
    return TaskExitStatus(task->state, task->exit_code);
  });
}

void AddLogs(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<LogsFlags>();
  CLI::App* cmd = app.add_subcommand(
      "logs",
      "A task's output; -f follows it live until the task has ended, then exits with the task's "
      "status (0 if it succeeded, its exit code if it failed with one, else 1)");
  cmd->add_option("id", f->id, "Task id (t-42, or 42)")->required()->type_name("ID");
  cmd->add_flag("-f,--follow", f->follow, "Keep printing new output until the task ended");
  cmd->add_option("--tail", f->tail, "Start at the last N lines (of each stream)")
      ->type_name("N")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--stream", f->stream,
                  "all (stdout to stdout, stderr to stderr), stdout, stderr, or metrics (the "
                  "lines the task wrote to $GPUPOOL_METRICS_FILE)")
      ->type_name("S");
  AddCommonFlags(cmd, &f->common);
  OnRun(cmd, exit_code, [f] { return RunLogs(*f); });
}

// --- wait ---

struct WaitFlags {
  std::string id;
  CommonFlags common;
};

// Waits for the task to end (AwaitEnd), then prints how it ended.
int RunWait(const WaitFlags& f) {
  Result<std::string> id = ParseTaskId(f.id);
  if (!id) return UsageError(id.error().message);
  return WithSession(f.common, [&](Session& s) {
    Result<proto::TaskDetail> task = AwaitEnd(s, *id);
    if (!task) return ApiFailure(task.error());
    if (f.common.json) {
      PrintJson(proto::Encode(*task));
    } else {
      std::cout << task->id << ": " << task->state;
      if (task->state == "failed") std::cout << " (exit code " << task->exit_code << ")";
      if (!task->reason.empty()) std::cout << ": " << task->reason;
      std::cout << "\n";
    }
    return TaskExitStatus(task->state, task->exit_code);
  });
}

void AddWait(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<WaitFlags>();
  CLI::App* cmd = app.add_subcommand(
      "wait",
      "Wait until a task has ended and exit with its status (0 if it succeeded, its exit code if "
      "it failed with one, else 1)");
  cmd->add_option("id", f->id, "Task id (t-42, or 42)")->required()->type_name("ID");
  AddCommonFlags(cmd, &f->common);
  OnRun(cmd, exit_code, [f] { return RunWait(*f); });
}

// --- top ---

struct TopFlags {
  bool once = false;
  std::string interval = "2s";
  CommonFlags common;
};

// A gauge for a cell: "-" where not measured.
std::string Gauge(const std::optional<int64_t>& value, const std::string& unit = "") {
  return value ? std::to_string(*value) + unit : "-";
}

std::string Memory(const std::optional<int64_t>& mib) { return mib ? FormatMib(*mib) : "-"; }

std::string Cpu(const std::optional<int64_t>& milli) { return milli ? FormatMilli(*milli) : "-"; }

std::string Reported(const std::map<std::string, double>& values) {
  std::string out;
  for (const auto& [name, v] : values) {
    if (!out.empty()) out += " ";
    std::string text = FormatNumber(v);
    if (text.size() > 10) text = text.substr(0, 10);
    out += name + "=" + text;
  }
  return out.size() > 60 ? out.substr(0, 57) + "..." : out;
}

std::string RenderTop(const proto::UsageOverview& usage) {
  std::string out = "gpupool top — " + FormatTime(NowMs()) + "\n\n";
  Table nodes({"NODE", "STATUS", "CPU", "MEMORY", "GPU%", "GPU MEMORY", "PER GPU %"});
  for (const proto::NodeUsage& n : usage.nodes) {
    const proto::NodeSample latest = n.latest.value_or(proto::NodeSample{});
    std::vector<std::string> per_gpu;
    for (const proto::GpuSample& g : latest.gpus) per_gpu.push_back(Gauge(g.util_pct));
    nodes.AddRow({n.name, n.status, Cpu(latest.cpu_milli), Memory(latest.memory_mib),
                  Gauge(latest.gpu_util_pct, "%"), Memory(latest.gpu_mem_mib),
                  JoinList(per_gpu, " ")});
  }
  out += nodes.Render() + "\n";
  Table tasks(
      {"TASK", "NAME", "NODE", "GPU IDS", "CPU", "MEMORY", "GPU%", "GPU MEMORY", "METRICS"});
  for (const proto::TaskUsageRow& t : usage.tasks) {
    const proto::UsageSample latest = t.latest.value_or(proto::UsageSample{});
    std::vector<std::string> gpus;
    for (int32_t g : t.gpus) gpus.push_back(std::to_string(g));
    tasks.AddRow({t.id, t.name, t.node, gpus.empty() ? "-" : JoinList(gpus), Cpu(latest.cpu_milli),
                  Memory(latest.memory_mib), Gauge(latest.gpu_util_pct, "%"),
                  Memory(latest.gpu_mem_mib), Reported(t.reported)});
  }
  out += tasks.rows() > 0 ? tasks.Render() : "No running tasks.\n";
  return out;
}

int RunTop(const TopFlags& f) {
  auto interval = ParseDurationMs(f.interval);
  if (!interval || *interval < 500) {
    return UsageError("--interval must be a duration of at least 500ms, got '" + f.interval + "'");
  }
  const bool refresh = !f.once && !f.common.json && ::isatty(STDOUT_FILENO);
  return WithSession(f.common, [&](Session& s) {
    for (;;) {
      Result<proto::UsageOverview> usage = s.client().Nodes().Usage();
      if (!usage) return ApiFailure(usage.error());
      if (f.common.json) {
        PrintJson(proto::Encode(*usage));
        return kExitOk;
      }
      // Home and clear, then the frame: the terminal shows one view, refreshed in place.
      std::cout << (refresh ? "\x1b[H\x1b[2J" : "") << RenderTop(*usage) << std::flush;
      if (!refresh) return kExitOk;
      std::this_thread::sleep_for(std::chrono::milliseconds(*interval));
    }
  });
}

void AddTop(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<TopFlags>();
  CLI::App* cmd = app.add_subcommand(
      "top", "Live usage of the nodes and running tasks, refreshed in place (Ctrl-C to quit)");
  cmd->add_flag("--once", f->once, "Print one view and exit (the default when not on a terminal)");
  cmd->add_option("--interval", f->interval, "Refresh interval (default 2s)")
      ->type_name("DURATION");
  AddCommonFlags(cmd, &f->common);
  OnRun(cmd, exit_code, [f] { return RunTop(*f); });
}

}  // namespace

void AddObserveCommands(CLI::App& app, int& exit_code) {
  AddLogs(app, exit_code);
  AddWait(app, exit_code);
  AddTop(app, exit_code);
}

}  // namespace gpupool::cli
