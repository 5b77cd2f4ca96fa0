// Watching what runs: `gpupool logs ID [-f] [--tail N] [--stream S]` (a task's output, followed
// live by long-polling GET /v1/tasks/{id}/logs until the task's output is complete; a job's
// members' merged, or one member's with --member), `gpupool
// wait ID` (the same long-poll, until the task has ended; exits with its status) and
// `gpupool top` (nodes' and running tasks' latest usage from GET /v1/usage, refreshed in place).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
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
#include "core/task_job.h"

namespace gpupool::cli {
namespace {

constexpr int64_t kFollowWaitMs = 20'000;  // each long-poll of `logs -f`

struct LogsFlags {
  std::string id;
  std::optional<int> member;  // a job's member (its RANK)
  bool follow = false;
  int64_t tail = -1;
  std::string stream = "all";
  CommonFlags common;
};

using Sink = std::function<void(std::string_view)>;

// A job member's output, line by line with "[RANK] " in front, to `out` under `mu` (the members'
// lines interleave whole). Flush writes a last line that had no newline.
class LinePrefixer {
 public:
  LinePrefixer(std::string prefix, std::ostream& out, std::mutex& mu)
      : prefix_(std::move(prefix)), out_(out), mu_(mu) {}
  void Write(std::string_view data) {
    partial_.append(data);
    const size_t end = partial_.rfind('\n');
    if (end == std::string::npos) return;
    std::string lines;
    size_t begin = 0;
    while (begin <= end) {
      const size_t nl = partial_.find('\n', begin);
      lines += prefix_ + partial_.substr(begin, nl - begin + 1);
      begin = nl + 1;
    }
    partial_.erase(0, end + 1);
    std::lock_guard lock(mu_);
    out_ << lines << std::flush;
  }
  void Flush() {
    if (partial_.empty()) return;
    std::lock_guard lock(mu_);
    out_ << prefix_ << partial_ << "\n" << std::flush;
    partial_.clear();
  }

 private:
  std::string prefix_;
  std::ostream& out_;
  std::mutex& mu_;
  std::string partial_;
};

// Reads one stream to its end (or, following, until the task's output is complete), handing the
// bytes to `sink` as they come — with --json, each answer's wire JSON on a line of stdout
// (under `json_mu`, which every stream shares). Its own session: `logs -f` follows two streams
// (of each member of a job) at once.
int CopyStream(const LogsFlags& f, const std::string& id, const std::string& stream,
               const Sink& sink, std::mutex& json_mu) {
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
        sink(*data);
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

Sink To(std::ostream& out) {
  return [&out](std::string_view data) { out << data << std::flush; };
}

// A distributed job's output (logs j-7): one member's as a task's (--member), or every member's
// with "[RANK] " before each line, merged as the lines come.
int RunJobLogs(const LogsFlags& f, const std::string& job_id) {
  std::optional<proto::Job> job;
  if (int code = WithSession(f.common,
                             [&](Session& s) {
                               Result<proto::Job> read = s.client().Tasks().GetJob(job_id);
                               if (!read) return ApiFailure(read.error());
                               job = std::move(*read);
                               return kExitOk;
                             });
      code != kExitOk) {
    return code;
  }
  std::vector<std::pair<int, std::string>> members;  // (rank, task id)
  for (const proto::JobMember& m : job->members) {
    if (!f.member || *f.member == m.index) members.emplace_back(m.index, m.task);
  }
  if (members.empty()) {
    return UsageError("--member " + std::to_string(*f.member) + ": job " + job_id + " has " +
                      std::to_string(job->members.size()) + " members (0.." +
                      std::to_string(job->members.size() - 1) + ")");
  }
  std::mutex json_mu;
  std::mutex out_mu;
  std::vector<std::string> streams;
  if (f.stream == "all") {
    streams = {"stdout", "stderr"};
  } else {
    streams = {f.stream};
  }
  std::vector<std::unique_ptr<LinePrefixer>> prefixers;
  std::vector<std::thread> threads;
  std::vector<int> codes;
  codes.reserve(members.size() * streams.size());
  for (const auto& [rank, task] : members) {
    for (const std::string& stream : streams) {
      std::ostream& out = stream == "stderr" ? std::cerr : std::cout;
      const bool prefix = !f.member;
      prefixers.push_back(std::make_unique<LinePrefixer>(
          prefix ? "[" + std::to_string(rank) + "] " : "", out, out_mu));
      LinePrefixer* p = prefixers.back().get();
      int& code = codes.emplace_back(kExitOk);
      threads.emplace_back([&f, &json_mu, &code, p, task, stream] {
        code = CopyStream(
            f, task, stream, [p](std::string_view data) { p->Write(data); }, json_mu);
        p->Flush();
      });
    }
  }
  for (std::thread& t : threads) t.join();
  for (const int code : codes) {
    if (code != kExitOk) return code;
  }
  if (!f.follow) return kExitOk;
  // Followed to its end: exit as the job (or the member) did. The members' end reports may land
  // a moment after their output is complete.
  return WithSession(f.common, [&](Session& s) {
    for (int64_t pause_ms = 20;; pause_ms = std::min<int64_t>(pause_ms * 2, 1000)) {
      if (f.member) {
        Result<proto::TaskDetail> task = AwaitEnd(s, members.front().second);
        if (!task) return ApiFailure(task.error());
        return TaskExitStatus(task->state, task->exit_code);
      }
      Result<proto::Job> now = s.client().Tasks().GetJob(job_id);
      if (!now) return ApiFailure(now.error());
      const std::optional<TaskState> state = ParseTaskState(now->state);
      if (!state || IsTerminal(*state)) return TaskExitStatus(now->state, now->exit_code);
      std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    }
  });
}

int RunLogs(const LogsFlags& f) {
  if (f.stream != "all" && f.stream != "stdout" && f.stream != "stderr" && f.stream != "metrics") {
    return UsageError("--stream must be all, stdout, stderr or metrics, got '" + f.stream + "'");
  }
  if (IsJobId(f.id)) return RunJobLogs(f, f.id);
  if (f.member) return UsageError("--member needs a job id (j-7), got '" + f.id + "'");
  Result<std::string> id = ParseTaskId(f.id);
  if (!id) return UsageError(id.error().message);
  std::mutex json_mu;
  int code = kExitOk;
  if (f.stream != "all") {
    code = CopyStream(f, *id, f.stream, To(f.stream == "stderr" ? std::cerr : std::cout), json_mu);
  } else {
    // The task first, so that a wrong id is said once (not once per stream).
    code = WithSession(f.common, [&](Session& s) {
      Result<proto::TaskDetail> task = s.client().Tasks().Get(*id);
      return task ? kExitOk : ApiFailure(task.error());
    });
    if (code != kExitOk) return code;
    // Both: stdout to stdout and stderr to stderr, each followed on its own connection.
    int err_code = kExitOk;
    std::thread err([&] { err_code = CopyStream(f, *id, "stderr", To(std::cerr), json_mu); });
    code = CopyStream(f, *id, "stdout", To(std::cout), json_mu);
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
  cmd->add_option("id", f->id,
                  "Task id (t-42, or 42), or a job id (j-7): every member's lines "
                  "with [RANK] before them")
      ->required()
      ->type_name("ID");
  cmd->add_option("--member", f->member, "With a job id: only this member's output (its RANK)")
      ->type_name("RANK")
      ->check(CLI::NonNegativeNumber);
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
