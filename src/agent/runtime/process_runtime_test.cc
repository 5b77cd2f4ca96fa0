// Tests of the process runtime on the real kernel: exit codes and output, environment, workspace
// and own uid, stopping process trees, cgroup limits, log rotation, adoption after a restart, the
// pid-reuse guard, each task's supervisor (its lease, the status it records, the task dying with
// it), and a state file that cannot be written. Tests needing what this machine lacks (root, a
// controller) skip, saying so.
#include "agent/runtime/process_runtime.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/runtime/cgroup.h"
#include "agent/runtime/linux_proc.h"
#include "agent/runtime/task_supervisor.h"

extern char** environ;

namespace gpupool::agent {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) out.push_back(line);
  return out;
}

// Whether `pid` is gone: no such process, or a zombie nobody reaped yet.
bool Gone(pid_t pid) {
  const auto st = ReadProcStat(pid);
  return !st || st->state == 'Z' || st->state == 'X';
}

// Waits (bounded) until `pred` holds; polling is the only way to observe other processes.
template <typename Pred>
bool Eventually(Pred pred, milliseconds timeout = seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// Starts argv as a child of the test, its stdout into a pipe whose read end goes to *out.
pid_t SpawnChild(const std::vector<std::string>& argv, int* out = nullptr) {
  std::vector<char*> args;
  std::vector<std::string> copy = argv;
  for (auto& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  int p[2] = {-1, -1};
  if (out) {
    EXPECT_EQ(pipe(p), 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_addclose(&fa, p[0]);
  }
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  if (out) {
    close(p[1]);
    *out = p[0];
  }
  return pid;
}

LaunchSpec Spec(const std::string& id, std::vector<std::string> command) {
  LaunchSpec s;
  s.task_id = id;
  s.command = std::move(command);
  return s;
}

LaunchSpec Shell(const std::string& id, const std::string& script) {
  return Spec(id, {"/bin/sh", "-c", script});
}

class ProcessRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpupool-rt-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    base_ = tmpl;
    chmod(base_.c_str(), 0711);  // task uids must reach their workspaces
    root_ = base_ + "/agent";
    static int counter = 0;
    options_.cgroup_name =
        "gpupool-test-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
    options_.on_exit = [this] { ++exits_notified_; };
    options_.on_warning = [this](const std::string& m) {
      std::lock_guard lock(warnings_mu_);
      warnings_.push_back(m);
    };
    Reopen();
  }

  void TearDown() override {
    if (rt_) {
      for (const RunningTask& t : rt_->Running()) {
        EXPECT_TRUE(rt_->Stop(t.task_id, milliseconds(0)));
      }
      EXPECT_TRUE(Eventually([&] {
        Collect(milliseconds(20));
        return rt_->Running().empty();
      }));
      for (const std::string& id : rt_->Tasks()) {
        const auto st = rt_->Remove(id);
        EXPECT_TRUE(st) << st.error().message;
      }
      rt_.reset();
    }
    std::error_code ec;
    fs::remove_all(base_, ec);
  }

  void Reopen() {
    rt_.reset();
    auto rt = ProcessRuntime::Open(root_, options_);
    ASSERT_TRUE(rt) << rt.error().message;
    rt_ = std::move(*rt);
  }

  void Collect(milliseconds wait) {
    for (ExitReport& r : rt_->Reap(wait)) seen_[r.task_id] = std::move(r);
  }

  // The task's exit report, waiting for it up to `timeout`.
  std::optional<ExitReport> WaitExit(const std::string& id, milliseconds timeout = seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!seen_.count(id) && std::chrono::steady_clock::now() < deadline) {
      Collect(milliseconds(50));
    }
    if (!seen_.count(id)) return std::nullopt;
    return seen_[id];
  }

  std::string Log(const std::string& id, LogStream stream) {
    auto chunk = rt_->ReadLog(id, stream, 0, 1 << 20);
    EXPECT_TRUE(chunk) << chunk.error().message;
    return chunk ? chunk->data : "";
  }

  // Waits until the task's stdout holds `text`.
  bool WaitLog(const std::string& id, const std::string& text) {
    return Eventually([&] { return Log(id, LogStream::kStdout).find(text) != std::string::npos; });
  }

  std::string base_;
  std::string root_;
  RuntimeOptions options_;
  std::unique_ptr<ProcessRuntime> rt_;
  std::map<std::string, ExitReport> seen_;
  std::atomic<int> exits_notified_{0};

  // What the runtime reported to on_warning: Stop reports on the caller's thread, the monitor on
  // its own.
  std::vector<std::string> Warnings() {
    std::lock_guard lock(warnings_mu_);
    return warnings_;
  }
  std::mutex warnings_mu_;
  std::vector<std::string> warnings_;
};

// ---- pure parts ----

TEST(ParseProcStat, ReadsStateGroupAndStartTimeWhateverTheCommandName) {
  const std::string text =
      "4242 (a) (b c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 "
      "18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n";
  const auto st = ParseProcStat(text);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state, 'S');
  EXPECT_EQ(st->ppid, 1);
  EXPECT_EQ(st->pgid, 4242);
  EXPECT_EQ(st->start_ticks, 987654u);
  EXPECT_FALSE(ParseProcStat("12 (x) R 1 2"));
  const auto self = ReadProcStat(getpid());
  ASSERT_TRUE(self);
  EXPECT_TRUE(ProcessAlive(getpid(), self->start_ticks));
  EXPECT_FALSE(ProcessAlive(getpid(), self->start_ticks + 1));
}

TEST(ParseCgroupLayout, FindsV1ControllersV2AndTheAgentsGroups) {
  struct Case {
    std::string name;
    std::string mountinfo;
    std::string proc_cgroup;
    std::map<std::string, std::string> v1_dirs;  // controller -> the agent's own group dir
    std::string v2_dir;                          // "" : no v2
  };
  const std::vector<Case> cases = {
      {"hybrid host (v1 controllers, empty unified)",
       "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
       "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
       "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
       "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
       "9:pids:/\n4:memory:/svc/a\n1:cpu,cpuacct:/svc/a\n0::/\n",
       {{"cpu", "/sys/fs/cgroup/cpu,cpuacct/svc/a"},
        {"cpuacct", "/sys/fs/cgroup/cpu,cpuacct/svc/a"},
        {"memory", "/sys/fs/cgroup/memory/svc/a"},
        {"pids", "/sys/fs/cgroup/pids"}},
       "/sys/fs/cgroup/unified"},
      {"v2 only, inside a container (mount root is the container's group)",
       "29 23 0:26 /kubepods/pod1 /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw\n",
       "0::/kubepods/pod1/agent\n",
       {},
       "/sys/fs/cgroup/agent"},
      {"mount point with an escaped space, freezer",
       "40 31 0:34 / /mnt/cg\\040x rw - cgroup cgroup rw,freezer\n",
       "6:freezer:/a\n",
       {{"freezer", "/mnt/cg x/a"}},
       ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const CgroupLayout layout = ParseCgroupLayout(c.mountinfo, c.proc_cgroup);
    std::map<std::string, std::string> dirs;
    for (const auto& [name, h] : layout.v1) dirs[name] = h.Dir(h.own);
    EXPECT_EQ(dirs, c.v1_dirs);
    EXPECT_EQ(layout.v2 ? layout.v2->Dir(layout.v2->own) : "", c.v2_dir);
  }
}

// The v2 path on whatever unified hierarchy this machine mounts (on a hybrid host it has no
// controllers: the group still holds the processes and cgroup.kill still kills them).
TEST(Cgroups, V2GroupHoldsKillsAndRemovesItsProcesses) {
  const CgroupLayout detected = Cgroups::Detect(true, "", "x").layout();
  if (!detected.v2) GTEST_SKIP() << "no cgroup v2 hierarchy mounted";
  CgroupLayout v2_only;
  v2_only.v2 = detected.v2;
  const Cgroups cgroups(v2_only, "", "gpupool-v2test-" + std::to_string(getpid()));
  LimitStatus status;
  const TaskCgroup tc = cgroups.Create("t-1", {500, 64, 16}, &status);
  if (tc.v2_dir.empty()) GTEST_SKIP() << "cannot make a v2 group here: " << status.not_enforced;
  EXPECT_TRUE(tc.v2_dir.ends_with("/gpupool-v2test-" + std::to_string(getpid()) + "/t-1"));
  for (const char* c : {"cpu", "memory", "pids"}) {
    SCOPED_TRACE(c);
    const bool enforced = std::string(c) == "cpu"      ? status.cpu
                          : std::string(c) == "memory" ? status.memory
                                                       : status.pids;
    EXPECT_EQ(enforced, tc.controllers.count(c) == 1);
    if (!enforced) {
      EXPECT_NE(status.not_enforced.find(std::string(c) + ": "), std::string::npos)
          << status.not_enforced;
    }
  }
  const pid_t pid = SpawnChild({"/bin/sleep", "30"});
  ASSERT_EQ(WriteControl(tc.v2_dir + "/cgroup.procs", std::to_string(pid)), 0);
  EXPECT_EQ(tc.Members(), std::vector<pid_t>{pid});
  tc.Kill(SIGKILL);
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL);
  EXPECT_TRUE(tc.Remove(2000));
  EXPECT_FALSE(fs::exists(tc.v2_dir));
}

TEST(TaskEnvironment, SharesGetMpsLimitsAndCpuTasksSeeNoGpu) {
  struct Case {
    std::string name;
    std::vector<std::string> gpus;
    int32_t milli;
    int64_t mem_mib;
    std::string visible;
    std::string percentage;  // "" : unset
    std::string mem_limit;   // "" : unset
  };
  const std::vector<Case> cases = {
      {"cpu only", {}, 0, 0, "", "", ""},
      {"two whole GPUs", {"GPU-aaa", "GPU-bbb"}, 0, 0, "GPU-aaa,GPU-bbb", "", ""},
      {"whole GPU given as 1000 milli", {"GPU-aaa"}, 1000, 0, "GPU-aaa", "", ""},
      {"MIG instance", {"MIG-5c8e-01"}, 0, 0, "MIG-5c8e-01", "", ""},
      {"quarter share", {"GPU-aaa"}, 250, 1024, "GPU-aaa", "25", "0=1024M"},
      {"a third rounds up", {"GPU-aaa"}, 333, 0, "GPU-aaa", "34", ""},
      {"tiny share is at least 1", {"GPU-aaa"}, 1, 512, "GPU-aaa", "1", "0=512M"},
      {"memory limit per visible GPU",
       {"GPU-a", "GPU-b"},
       500,
       256,
       "GPU-a,GPU-b",
       "50",
       "0=256M,1=256M"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    LaunchSpec s = Spec("t-1", {"true"});
    s.gpu_uuids = c.gpus;
    s.gpu_milli_per_gpu = c.milli;
    s.gpu_mem_mib = c.mem_mib;
    const auto env = TaskEnvironment(s, "/w", "/w/m");
    ASSERT_TRUE(env.count("CUDA_VISIBLE_DEVICES"));
    EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), c.visible);
    auto get = [&](const char* k) { return env.count(k) ? env.at(k) : ""; };
    EXPECT_EQ(get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), c.percentage);
    EXPECT_EQ(get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), c.mem_limit);
  }
}

TEST(WriteTrouble, ReportsWhenAWriteStartsFailingAndWhenItWorksAgainOnly) {
  std::vector<std::string> seen;
  const RuntimeWarning warn = [&](const std::string& m) { seen.push_back(m); };
  WriteTrouble trouble;
  const Status ok;
  const Status full = MakeError(ErrorCode::kUnavailable, "cannot write x: No space left on device");
  for (const Status* written : {&ok, &full, &full, &full, &ok, &ok, &full}) {
    trouble.Observe(*written, "t-1", "stdout log", warn);
  }
  EXPECT_EQ(seen, (std::vector<std::string>{
                      "task t-1: stdout log cannot be written (cannot write x: No space left on "
                      "device); the task runs on, and it is tried again at the next write",
                      "task t-1: stdout log is written again",
                      "task t-1: stdout log cannot be written (cannot write x: No space left on "
                      "device); the task runs on, and it is tried again at the next write",
                  }));
}

// ---- the runtime ----

TEST_F(ProcessRuntimeTest, ReportsExitCodeAndCapturesOutput) {
  const int64_t before = WallMs();
  auto t = rt_->Launch(Shell("t-exit", "echo hi; echo err >&2; exit 3"));
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_GT(t->pid, 0);
  EXPECT_GE(t->started_ms, before);
  const auto r = WaitExit("t-exit");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kExited);
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->reason, "exited with code 3");
  EXPECT_EQ(r->started_ms, t->started_ms);
  EXPECT_GE(r->finished_ms, r->started_ms);
  EXPECT_LE(r->finished_ms, WallMs());
  EXPECT_TRUE(r->finish_exact);
  EXPECT_EQ(Log("t-exit", LogStream::kStdout), "hi\n");
  EXPECT_EQ(Log("t-exit", LogStream::kStderr), "err\n");
  EXPECT_EQ(ReadWhole(rt_->LogPath("t-exit", LogStream::kStdout)), "hi\n");
  EXPECT_EQ(ReadWhole(rt_->LogPath("t-exit", LogStream::kStderr)), "err\n");
  EXPECT_TRUE(rt_->Running().empty());
  // The callback runs on the runtime's thread just after the report is queued.
  EXPECT_TRUE(Eventually([&] { return exits_notified_.load() >= 1; }));
  EXPECT_TRUE(rt_->Reap().empty());  // reported once
}

TEST_F(ProcessRuntimeTest, ReportsTheSignalThatEndedIt) {
  ASSERT_TRUE(rt_->Launch(Shell("t-sig", "kill -KILL $$")));
  const auto r = WaitExit("t-sig");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kSignaled);
  EXPECT_EQ(r->signal, SIGKILL);
  EXPECT_EQ(r->reason, "killed by signal 9");
}

TEST(TaskEnvironment, AGpuMemoryShareIsPreloadedWithTheInterposerAndItsLimit) {
  LaunchSpec share = Spec("t-1", {"true"});
  share.gpu_uuids = {"GPU-a", "GPU-b"};
  share.gpu_milli_per_gpu = 500;
  share.gpu_mem_mib = 4096;
  auto env = TaskEnvironment(share, "/w", "/w/m", "/run/gpupool/libgpupool_cudashim.so");
  EXPECT_EQ(env["GPUPOOL_GPU_MEM_LIMIT_BYTES"], std::to_string(4096LL << 20));
  EXPECT_EQ(env["LD_PRELOAD"], "/run/gpupool/libgpupool_cudashim.so");
  // The task's own preload comes after the interposer.
  share.env["LD_PRELOAD"] = "/opt/libmine.so";
  env = TaskEnvironment(share, "/w", "/w/m", "/run/gpupool/libgpupool_cudashim.so");
  EXPECT_EQ(env["LD_PRELOAD"], "/run/gpupool/libgpupool_cudashim.so:/opt/libmine.so");
  // Without an interposer given (simulated GPUs) the environment is today's.
  env = TaskEnvironment(share, "/w", "/w/m");
  EXPECT_EQ(env.count("GPUPOOL_GPU_MEM_LIMIT_BYTES"), 0u);
  EXPECT_EQ(env["LD_PRELOAD"], "/opt/libmine.so");
  // Whole GPUs, and a share without memory, hold no GPU-memory share.
  for (auto [milli, mib] : {std::pair{0, int64_t{4096}}, {1000, 4096}, {500, 0}}) {
    LaunchSpec s = Spec("t-2", {"true"});
    s.gpu_uuids = {"GPU-a"};
    s.gpu_milli_per_gpu = milli;
    s.gpu_mem_mib = mib;
    EXPECT_FALSE(HoldsGpuMemoryShare(s)) << milli << " " << mib;
    EXPECT_EQ(TaskEnvironment(s, "/w", "/w/m", "/x.so").count("LD_PRELOAD"), 0u);
  }
  // A task may not set the limit itself.
  LaunchSpec own = Spec("t-3", {"true"});
  own.env["GPUPOOL_GPU_MEM_LIMIT_BYTES"] = "999999999999";
  EXPECT_FALSE(ValidateLaunchSpec(own));
}

TEST(TaskEnvironment, AShareThatMustBeHeldIsRefusedWithoutTheInterposer) {
  LaunchSpec share = Spec("t-1", {"true"});
  share.gpu_uuids = {"GPU-a"};
  share.gpu_milli_per_gpu = 250;
  share.gpu_mem_mib = 1024;
  const Status refused = CheckGpuMemoryShare(share, {.enforce = true, .cudashim = ""});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(refused.error().message.find("found no libgpupool_cudashim.so"), std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("--cudashim PATH"), std::string::npos);
  EXPECT_TRUE(CheckGpuMemoryShare(share, {.enforce = false, .cudashim = ""}));
  EXPECT_TRUE(CheckGpuMemoryShare(share, {.enforce = true, .cudashim = "/x.so"}));
}

#ifdef CUDASHIM_LIBRARY
// A real CUDA program (the interposer's probe, over the fake driver's 16 GiB devices) in a task
// holding 4 GiB of a GPU: the runtime gives it the interposer, which holds it to that.
TEST_F(ProcessRuntimeTest, ATaskHoldingAGpuMemoryShareIsHeldToItByThePreloadedInterposer) {
  options_.gpu_memory = {.enforce = true, .cudashim = CUDASHIM_LIBRARY};
  Reopen();
  LaunchSpec s = Spec("t-share", {CUDASHIM_PROBE, "link", "info", "alloc", "5Gi", "alloc", "3Gi"});
  s.gpu_uuids = {"GPU-fake-0"};
  s.gpu_milli_per_gpu = 500;
  s.gpu_mem_mib = 4096;
  s.env = {{"LD_LIBRARY_PATH", CUDASHIM_FAKE_DRIVER_DIR}};
  ASSERT_TRUE(rt_->Launch(s));
  // A whole GPU is the task's alone: no limit.
  LaunchSpec whole = Spec("t-whole", {CUDASHIM_PROBE, "link", "alloc", "5Gi"});
  whole.gpu_uuids = {"GPU-fake-1"};
  whole.env = s.env;
  ASSERT_TRUE(rt_->Launch(whole));
  for (const char* id : {"t-share", "t-whole"}) {
    const auto r = WaitExit(id);
    ASSERT_TRUE(r) << id;
    EXPECT_EQ(r->exit_code, 0) << id << ": " << Log(id, LogStream::kStderr);
  }
  const std::vector<std::string> lines = Lines(Log("t-share", LogStream::kStdout));
  ASSERT_EQ(lines.size(), 3u) << Log("t-share", LogStream::kStdout);
  EXPECT_EQ(lines[0], "info 0 " + std::to_string(4LL << 30) + " " + std::to_string(4LL << 30))
      << "the GPU it sees is its reservation";
  EXPECT_EQ(lines[1].rfind("alloc 2", 0), 0u) << lines[1] << ": CUDA_ERROR_OUT_OF_MEMORY";
  EXPECT_EQ(lines[2].rfind("alloc 0 ", 0), 0u) << lines[2];
  EXPECT_NE(Log("t-share", LogStream::kStderr).find("GPUPOOL_GPU_MEM_LIMIT_BYTES"),
            std::string::npos)
      << "the interposer says why it refused";
  EXPECT_EQ(Lines(Log("t-whole", LogStream::kStdout)).at(0).rfind("alloc 0 ", 0), 0u);

  // Without the library the same task is refused before anything is made.
  options_.gpu_memory.cudashim.clear();
  Reopen();
  s.task_id = "t-refused";
  const auto refused = rt_->Launch(s);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_FALSE(fs::exists(rt_->TaskDir("t-refused")));
}
#endif

TEST_F(ProcessRuntimeTest, EnvironmentIsCleanAndCarriesTheTaskVariables) {
  setenv("GPUPOOL_TEST_AGENT_SECRET", "do-not-leak", 1);
  struct Case {
    std::string id;
    std::vector<std::string> gpus;
    int32_t milli;
    int64_t mem_mib;
    std::map<std::string, std::string> gpu_vars;
  };
  const std::vector<Case> cases = {
      {"t-env-cpu", {}, 0, 0, {{"CUDA_VISIBLE_DEVICES", ""}}},
      {"t-env-whole", {"GPU-aaa", "GPU-bbb"}, 0, 0, {{"CUDA_VISIBLE_DEVICES", "GPU-aaa,GPU-bbb"}}},
      {"t-env-share",
       {"GPU-aaa"},
       250,
       1024,
       {{"CUDA_VISIBLE_DEVICES", "GPU-aaa"},
        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25"},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=1024M"}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.id);
    LaunchSpec s = Spec(c.id, {"env"});
    s.gpu_uuids = c.gpus;
    s.gpu_milli_per_gpu = c.milli;
    s.gpu_mem_mib = c.mem_mib;
    s.env = {{"FOO", "bar baz"}};
    ASSERT_TRUE(rt_->Launch(s));
    const auto r = WaitExit(c.id);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->exit_code, 0);
    std::map<std::string, std::string> got;
    for (const std::string& line : Lines(Log(c.id, LogStream::kStdout))) {
      const size_t eq = line.find('=');
      if (eq != std::string::npos) got[line.substr(0, eq)] = line.substr(eq + 1);
    }
    // In its own mount namespace the task's paths are its own view's; without, the host's.
    const bool view = rt_->task_view();
    std::map<std::string, std::string> want = {
        {"PATH", "/usr/local/bin:/usr/bin:/bin"},
        {"HOME", view ? "/root" : rt_->Workspace(c.id)},
        {"LANG", "C.UTF-8"},
        {"FOO", "bar baz"},
        {"GPUPOOL_TASK_ID", c.id},
        {"GPUPOOL_WORKSPACE", view ? "/root" : rt_->Workspace(c.id)},
        {"GPUPOOL_METRICS_FILE", view ? "/run/gpupool/metrics.jsonl" : rt_->MetricsPath(c.id)},
        {"GPUPOOL_CHECKPOINT_DIR",
         view ? "/run/gpupool/checkpoint" : rt_->TaskDir(c.id) + "/checkpoint"},
        {"GPUPOOL_CHECKPOINT_SIGNAL", "SIGUSR1"},
    };
    if (view && rt_->own_uids()) want.insert({{"USER", "gpupool"}, {"LOGNAME", "gpupool"}});
    want.insert(c.gpu_vars.begin(), c.gpu_vars.end());
    EXPECT_EQ(got, want);  // exactly these: nothing inherited from the agent
  }
  unsetenv("GPUPOOL_TEST_AGENT_SECRET");
}

TEST_F(ProcessRuntimeTest, RejectsBadSpecsNamingTheField) {
  struct Case {
    std::string name;
    std::function<void(LaunchSpec&)> change;
    ErrorCode code;
    std::string mentions;
  };
  const std::vector<Case> cases = {
      {"empty id", [](LaunchSpec& s) { s.task_id = ""; }, ErrorCode::kInvalidArgument, "task_id"},
      {"path in id", [](LaunchSpec& s) { s.task_id = "../x"; }, ErrorCode::kInvalidArgument,
       "task_id"},
      {"slash in id", [](LaunchSpec& s) { s.task_id = "a/b"; }, ErrorCode::kInvalidArgument,
       "task_id"},
      {"empty command", [](LaunchSpec& s) { s.command.clear(); }, ErrorCode::kInvalidArgument,
       "command"},
      {"runtime's variable", [](LaunchSpec& s) { s.env["CUDA_VISIBLE_DEVICES"] = "0"; },
       ErrorCode::kInvalidArgument, "CUDA_VISIBLE_DEVICES"},
      {"bad variable name", [](LaunchSpec& s) { s.env["A=B"] = "1"; }, ErrorCode::kInvalidArgument,
       "A=B"},
      {"share above a GPU", [](LaunchSpec& s) { s.gpu_milli_per_gpu = 1001; },
       ErrorCode::kInvalidArgument, "gpu_milli_per_gpu 1001"},
      {"negative memory", [](LaunchSpec& s) { s.memory_mib = -1; }, ErrorCode::kInvalidArgument,
       "memory_mib -1"},
      {"comma in uuid", [](LaunchSpec& s) { s.gpu_uuids = {"GPU-a,GPU-b"}; },
       ErrorCode::kInvalidArgument, "GPU-a,GPU-b"},
      {"unknown command", [](LaunchSpec& s) { s.command = {"no-such-command-xyz"}; },
       ErrorCode::kNotFound, "no-such-command-xyz"},
      {"missing absolute path", [](LaunchSpec& s) { s.command = {"/no/such/binary"}; },
       ErrorCode::kNotFound, "/no/such/binary"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    LaunchSpec s = Spec("t-bad", {"true"});
    c.change(s);
    const auto r = rt_->Launch(s);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, c.code);
    EXPECT_NE(r.error().message.find(c.mentions), std::string::npos) << r.error().message;
  }
  // A failed launch leaves nothing behind: the id can be launched again.
  EXPECT_FALSE(fs::exists(rt_->TaskDir("t-bad")));
  ASSERT_TRUE(rt_->Launch(Spec("t-bad", {"true"})));
  const auto dup = rt_->Launch(Spec("t-bad", {"true"}));
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(rt_->Stop("t-none", milliseconds(0)).error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(rt_->Launch(Spec("t-long", {"sleep", "30"})));
  EXPECT_EQ(rt_->Remove("t-long").error().code, ErrorCode::kFailedPrecondition);
}

TEST_F(ProcessRuntimeTest, RunsInItsWorkspaceAsItsOwnUnprivilegedUid) {
  const std::string script =
      "pwd; id -u; id -g\n"
      "echo data > file && echo ws-ok\n"
      "echo '{\"loss\":1}' >> \"$GPUPOOL_METRICS_FILE\" && echo metrics-ok\n"
      "for f in \"$ROOT/evil\" \"$ROOT/tasks/evil\" \"$TASK_DIR/evil\" \"$TASK_DIR/state.json\" "
      "\"$TASK_DIR/stdout.log\" \"$ROOT/uid_next\"; do\n"
      "  (echo x >> \"$f\") 2>/dev/null && echo \"writable $f\"\n"
      "done\n"
      "true\n";
  LaunchSpec s = Shell("t-uid", script);
  s.env = {{"ROOT", root_}, {"TASK_DIR", rt_->TaskDir("t-uid")}};
  auto t = rt_->Launch(s);
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_TRUE(WaitExit("t-uid"));
  const auto lines = Lines(Log("t-uid", LogStream::kStdout));
  ASSERT_GE(lines.size(), 5u) << Log("t-uid", LogStream::kStderr);
  EXPECT_EQ(lines[0], rt_->task_view() ? "/root" : rt_->Workspace("t-uid"));
  EXPECT_EQ(ReadWhole(rt_->Workspace("t-uid") + "/file"), "data\n");
  EXPECT_EQ(ReadWhole(rt_->MetricsPath("t-uid")), "{\"loss\":1}\n");
  if (!rt_->own_uids()) {
    GTEST_SKIP() << "not root: tasks run as the agent's own uid, so no uid isolation to check";
  }
  EXPECT_EQ(lines[1], std::to_string(t->uid));
  EXPECT_EQ(lines[2], std::to_string(t->gid));
  EXPECT_GE(t->uid, options_.uid_base);
  EXPECT_TRUE(t->own_uid);
  const std::vector<std::string> rest(lines.begin() + 3, lines.end());
  EXPECT_EQ(rest, (std::vector<std::string>{"ws-ok", "metrics-ok"}));  // nothing else writable
  // Each task has a uid of its own.
  auto other = rt_->Launch(Spec("t-uid-2", {"true"}));
  ASSERT_TRUE(other);
  EXPECT_NE(other->uid, t->uid);
}

// The workspace is the task's /root (its HOME), in a mount namespace of its own: each task sees
// its own files there, a /tmp of its own, and a passwd entry for its uid; the namespace is its
// first process's, and survives the runtime (adoption).
TEST_F(ProcessRuntimeTest, EachTaskSeesItsWorkspaceAsRootWithAPrivateTmpAndAUserName) {
  if (!rt_->task_view()) GTEST_SKIP() << "no mount namespaces: " << rt_->task_view_unavailable();
  const std::string script =
      "echo '{\"step\":1}' >> \"$GPUPOOL_METRICS_FILE\"\n"
      "pwd; echo \"$HOME\"; echo ~; ls /root; whoami; id -un; getent passwd \"$(id -u)\"\n"
      "echo mine > /tmp/from-$GPUPOOL_TASK_ID; ls /tmp\n"
      "while [ ! -e /root/go ]; do sleep 0.02; done; echo after > /root/after.txt\n";
  std::map<std::string, RunningTask> launched;
  for (const std::string id : {"t-view-a", "t-view-b"}) {
    const std::string inputs = base_ + "/in-" + id;
    fs::create_directories(inputs);
    std::ofstream(inputs + "/input-of-" + id) << id;
    LaunchSpec s = Shell(id, script);
    s.workspace_from = inputs;
    auto t = rt_->Launch(s);
    ASSERT_TRUE(t) << t.error().message;
    launched[id] = *t;
  }
  for (const auto& [id, t] : launched) {
    SCOPED_TRACE(id);
    ASSERT_TRUE(WaitLog(id, "from-" + id)) << Log(id, LogStream::kStderr);
    const std::string user = rt_->own_uids() ? "gpupool" : "root";
    std::string passwd = "root:x:0:0:root:/root:/bin/bash";
    if (rt_->own_uids()) {
      passwd = "gpupool:x:" + std::to_string(t.uid) + ":" + std::to_string(t.gid) +
               ":gpupool task:/root:/bin/sh";
    }
    // Its own input and nothing of the other task's; its /tmp holds its own file only.
    EXPECT_EQ(Log(id, LogStream::kStdout), "/root\n/root\n/root\ninput-of-" + id + "\n" + user +
                                               "\n" + user + "\n" + passwd + "\nfrom-" + id + "\n")
        << Log(id, LogStream::kStderr);
    EXPECT_EQ(ReadWhole(rt_->MetricsPath(id)), "{\"step\":1}\n");
    EXPECT_EQ(ReadWhole(rt_->TaskDir(id) + "/tmp/from-" + id), "mine\n");
    EXPECT_FALSE(fs::exists("/tmp/from-" + id)) << "the host's /tmp is not the task's";
    // Its first process is in a mount namespace that is not the agent's.
    EXPECT_NE(fs::read_symlink("/proc/" + std::to_string(t.pid) + "/ns/mnt"),
              fs::read_symlink("/proc/self/ns/mnt"));
  }
  // The namespace outlives the runtime: adopted, the task still writes its /root.
  rt_.reset();
  Reopen();
  ASSERT_TRUE(rt_->Adopt());
  for (const auto& [id, t] : launched) {
    std::ofstream(rt_->Workspace(id) + "/go").put('\n');
    const auto r = WaitExit(id);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->exit_code, 0) << Log(id, LogStream::kStderr);
    EXPECT_EQ(ReadWhole(rt_->Workspace(id) + "/after.txt"), "after\n");
  }
}

// Without root no mount namespace can be made: the task runs as the agent's uid and sees the
// host's file system, its HOME and GPUPOOL_WORKSPACE being the workspace's host path.
TEST(ProcessRuntimeNotRoot, TasksSeeTheirWorkspaceAtItsHostPath) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to become another, unprivileged user";
  std::string tmpl = (fs::temp_directory_path() / "gpupool-rt-nonroot-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string base = tmpl;
  chmod(base.c_str(), 0777);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // As nobody: a runtime of its own, one task, its answers down the pipe.
    close(p[0]);
    std::string out;
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    RuntimeOptions o;
    o.use_cgroups = false;
    auto rt = ProcessRuntime::Open(base + "/agent", o);
    if (!rt) {
      out = "open: " + rt.error().message;
    } else {
      out = std::string((*rt)->task_view() ? "view" : "no view: ") +
            (*rt)->task_view_unavailable() + "\n" + (*rt)->Workspace("t-1") + "\n";
      auto t = (*rt)->Launch(Shell("t-1", "echo \"$HOME\"; pwd; echo \"$GPUPOOL_WORKSPACE\""));
      if (!t) out += "launch: " + t.error().message;
      for (int i = 0; t && i < 100 && (*rt)->Reap(milliseconds(100)).empty(); ++i) {
      }
      if (auto log = (*rt)->ReadLog("t-1", LogStream::kStdout, 0, 4096)) out += log->data;
    }
    ssize_t ignored = write(p[1], out.data(), out.size());
    (void)ignored;
    _exit(0);
  }
  close(p[1]);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = read(p[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  close(p[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const auto lines = Lines(got);
  ASSERT_EQ(lines.size(), 5u) << got;
  EXPECT_EQ(lines[0], "no view: the agent is not root, and only root can make a mount namespace");
  const std::string ws = lines[1];
  EXPECT_EQ(ws, base + "/agent/tasks/t-1/workspace");
  EXPECT_EQ(std::vector<std::string>(lines.begin() + 2, lines.end()),
            (std::vector<std::string>{ws, ws, ws}));
  std::error_code ec;
  fs::remove_all(base, ec);
}

TEST(TaskPasswd, NamesTheTasksUidGpupoolWithHomeRoot) {
  const std::string host =
      "root:x:0:0:root:/root:/bin/bash\nold:x:200001:200001::/home/old:/bin/sh\n"
      "gpupool:x:5:5::/x:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin";
  EXPECT_EQ(TaskPasswd(host, 200001, 200001),
            "root:x:0:0:root:/root:/bin/bash\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
            "gpupool:x:200001:200001:gpupool task:/root:/bin/sh\n");
  EXPECT_EQ(TaskGroup("root:x:0:\nusers:x:100:\n", 100), "root:x:0:\ngpupool:x:100:\n");
}

TEST_F(ProcessRuntimeTest, APreparedDirectoryBecomesTheWorkspaceOwnedByTheTask) {
  const std::string inputs = base_ + "/inputs";
  fs::create_directories(inputs + "/data/sub");
  std::ofstream(inputs + "/data/sub/in.txt") << "input\n";
  LaunchSpec s = Shell("t-inputs", "cat data/sub/in.txt && echo out > data/sub/out.txt && echo ok");
  s.workspace_from = inputs;
  auto t = rt_->Launch(s);
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_TRUE(WaitExit("t-inputs"));
  EXPECT_EQ(Log("t-inputs", LogStream::kStdout), "input\nok\n")
      << Log("t-inputs", LogStream::kStderr);
  EXPECT_FALSE(fs::exists(inputs)) << "moved, not copied";
  const std::string ws = rt_->Workspace("t-inputs");
  EXPECT_EQ(ReadWhole(ws + "/data/sub/out.txt"), "out\n");
  struct stat st {};
  ASSERT_EQ(stat(ws.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  for (const std::string& p : {ws, ws + "/data", ws + "/data/sub", ws + "/data/sub/in.txt"}) {
    ASSERT_EQ(lstat(p.c_str(), &st), 0) << p;
    EXPECT_EQ(st.st_uid, t->uid) << p;
    EXPECT_EQ(st.st_gid, t->gid) << p;
  }
}

// A read-only bind, as a dataset is mounted (its files the agent's, 0444 in 0555 directories,
// shared by every task that mounts it): the task reads it, and a write into it fails with EROFS
// whatever the task's uid.
TEST_F(ProcessRuntimeTest, AReadOnlyBindIsReadAndAWriteIntoItFailsWithErofs) {
  if (!rt_->task_view()) GTEST_SKIP() << "no mount namespaces: " << rt_->task_view_unavailable();
  const std::string data = base_ + "/dataset";
  fs::create_directories(data + "/sub");
  std::ofstream(data + "/sub/a.txt") << "cat\n";
  fs::permissions(data + "/sub/a.txt", fs::perms{0444});
  fs::permissions(data + "/sub", fs::perms{0555});
  fs::permissions(data, fs::perms{0555});
  LaunchSpec s = Shell("t-ro",
                       "cat /root/data/sub/a.txt\n"
                       "touch /root/data/new 2>&1\n"
                       "{ echo x > /root/data/sub/a.txt; } 2>&1\n"
                       "echo done\n");
  s.volumes = {{data, std::string(kTaskHome) + "/data", /*read_only=*/true}};
  auto t = rt_->Launch(s);
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_TRUE(WaitExit("t-ro"));
  const std::string out = Log("t-ro", LogStream::kStdout);
  EXPECT_EQ(out.rfind("cat\n", 0), 0u) << out << Log("t-ro", LogStream::kStderr);
  size_t refused = 0;
  for (size_t at = out.find("Read-only file system"); at != std::string::npos;
       at = out.find("Read-only file system", at + 1)) {
    ++refused;
  }
  EXPECT_EQ(refused, 2u) << out;
  EXPECT_TRUE(out.ends_with("done\n")) << out;
  EXPECT_EQ(ReadWhole(data + "/sub/a.txt"), "cat\n");
  EXPECT_FALSE(fs::exists(data + "/new"));
}

TEST_F(ProcessRuntimeTest, StopSendsSigtermToTheWholeTree) {
  // Two children in the task's process group and one that left it (own session): only the
  // cgroup finds that one.
  auto t = rt_->Launch(Shell("t-tree",
                             "sleep 60 & echo $!; sleep 60 & echo $!; setsid sleep 60 & echo $!; "
                             "echo ready; wait"));
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_TRUE(WaitLog("t-tree", "ready"));
  const auto lines = Lines(Log("t-tree", LogStream::kStdout));
  ASSERT_EQ(lines.size(), 4u);
  std::vector<pid_t> pids = {t->pid};
  for (int i = 0; i < 3; ++i) pids.push_back(std::stoi(lines[i]));
  for (pid_t p : pids) EXPECT_FALSE(Gone(p)) << p;

  ASSERT_TRUE(rt_->Stop("t-tree", seconds(30)));
  const auto r = WaitExit("t-tree", seconds(10));  // far sooner than the grace: SIGTERM did it
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kStopped);
  EXPECT_EQ(r->reason, "stopped");
  EXPECT_EQ(r->signal, SIGTERM);
  for (pid_t p : pids) {
    if (p == pids.back() && t->cgroup.empty()) continue;  // no cgroup: out of reach
    EXPECT_TRUE(Eventually([&] { return Gone(p); })) << "pid " << p << " survived";
  }
}

TEST_F(ProcessRuntimeTest, StopEscalatesToSigkillAfterTheGrace) {
  // The shell traps SIGTERM (and says so), its child ignores it.
  auto t = rt_->Launch(Shell("t-stubborn",
                             "trap 'echo got-term' TERM; (trap '' TERM; exec sleep 60) & echo $!; "
                             "echo ready; while :; do sleep 0.05; done"));
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_TRUE(WaitLog("t-stubborn", "ready"));
  const pid_t child = std::stoi(Lines(Log("t-stubborn", LogStream::kStdout))[0]);
  const int64_t stop_ms = WallMs();
  ASSERT_TRUE(rt_->Stop("t-stubborn", milliseconds(300)));
  const auto r = WaitExit("t-stubborn");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kStopped);
  EXPECT_EQ(r->signal, SIGKILL);
  EXPECT_GE(r->finished_ms - stop_ms, 290);  // not before the grace
  EXPECT_NE(Log("t-stubborn", LogStream::kStdout).find("got-term"), std::string::npos);
  EXPECT_TRUE(Eventually([&] { return Gone(child); }));
  EXPECT_TRUE(Gone(t->pid));
}

TEST_F(ProcessRuntimeTest, TaskOverItsMemoryLimitIsKilledAndReportedAsOom) {
  LaunchSpec s = Shell("t-oom", "head -c 300M /dev/zero | tail; echo tail ended $?; sleep 30");
  s.memory_mib = 64;
  auto t = rt_->Launch(s);
  ASSERT_TRUE(t) << t.error().message;
  if (!t->limits.memory) {
    GTEST_SKIP() << "no memory controller here: " << t->limits.not_enforced;
  }
  const auto r = WaitExit("t-oom", seconds(10));  // killed whole: not left to its `sleep 30`
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kOomKilled) << r->reason;
  EXPECT_EQ(r->reason, "oom-killed: memory limit 64 MiB");
}

TEST_F(ProcessRuntimeTest, PidsLimitStopsForks) {
  LaunchSpec s = Shell("t-pids",
                       "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 "
                       "21 22 23 24 25 26 27 28 29 30; do sleep 30 & echo $!; done; "
                       "echo all-forked");
  s.pids_max = 8;
  auto t = rt_->Launch(s);
  ASSERT_TRUE(t) << t.error().message;
  if (!t->limits.pids) GTEST_SKIP() << "no pids limit here: " << t->limits.not_enforced;
  const auto r = WaitExit("t-pids");
  ASSERT_TRUE(r);
  const std::string out = Log("t-pids", LogStream::kStdout);
  EXPECT_EQ(out.find("all-forked"), std::string::npos);
  EXPECT_LT(Lines(out).size(), 8u);  // the shell counts too
  EXPECT_NE(Log("t-pids", LogStream::kStderr).find("fork"), std::string::npos)
      << Log("t-pids", LogStream::kStderr);
}

TEST_F(ProcessRuntimeTest, CgroupFilesHoldTheLimitsAndTheProcess) {
  LaunchSpec s = Spec("t-limits", {"sleep", "30"});
  s.cpu_milli = 500;
  s.memory_mib = 128;
  s.pids_max = 64;
  auto t = rt_->Launch(s);
  ASSERT_TRUE(t) << t.error().message;
  if (t->cgroup.empty()) GTEST_SKIP() << "no cgroups here: " << t->limits.not_enforced;
  auto file = [](const std::string& path) {
    std::string v = ReadWhole(path);
    while (!v.empty() && v.back() == '\n') v.pop_back();
    return v;
  };
  for (const auto& [controller, e] : t->cgroup.controllers) {
    SCOPED_TRACE(controller + " " + e.dir);
    EXPECT_EQ(Lines(ReadWhole(e.dir + "/cgroup.procs")),
              std::vector<std::string>{std::to_string(t->pid)});
    const bool v1 = e.version == CgroupVersion::kV1;
    EXPECT_NE(rt_->cgroups().Describe().find(controller + (v1 ? ":v1" : ":v2")), std::string::npos)
        << rt_->cgroups().Describe();
    if (controller == "cpu" && t->limits.cpu) {
      if (v1) {
        EXPECT_EQ(file(e.dir + "/cpu.cfs_quota_us"), "50000");
        EXPECT_EQ(file(e.dir + "/cpu.cfs_period_us"), "100000");
      } else {
        EXPECT_EQ(file(e.dir + "/cpu.max"), "50000 100000");
      }
    }
    if (controller == "memory" && t->limits.memory) {
      EXPECT_EQ(file(e.dir + (v1 ? "/memory.limit_in_bytes" : "/memory.max")), "134217728");
    }
    if (controller == "pids" && t->limits.pids) {
      EXPECT_EQ(file(e.dir + "/pids.max"), "64");
    }
  }
  EXPECT_EQ(t->limits.cpu && t->limits.memory && t->limits.pids, t->limits.not_enforced.empty())
      << t->limits.not_enforced;
}

TEST_F(ProcessRuntimeTest, CgroupCountsTheTasksCpuTimeAndMemory) {
  // Busy for a while, then idle: its CPU time grows past 50 ms and its memory is counted.
  auto t = rt_->Launch(
      Spec("t-usage", {"sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; sleep 30"}));
  ASSERT_TRUE(t) << t.error().message;
  if (t->cgroup.empty()) GTEST_SKIP() << "no cgroups here: " << t->limits.not_enforced;
  EXPECT_TRUE(
      Eventually([&] { return t->cgroup.CpuUsageNs().value_or(0) > 50'000'000; }, seconds(20)))
      << "cpu ns: " << t->cgroup.CpuUsageNs().value_or(-1);
  EXPECT_GT(t->cgroup.MemoryBytes().value_or(0), 0);
  TaskCgroup none;
  EXPECT_FALSE(none.CpuUsageNs().has_value());
  EXPECT_FALSE(none.MemoryBytes().has_value());
}

TEST_F(ProcessRuntimeTest, LogsRotateAtTheConfiguredSizeAndReadByLogicalOffset) {
  options_.log_max_bytes = 1000;
  options_.log_keep = 2;
  Reopen();
  std::string expected;
  for (int i = 1; i <= 2000; ++i) expected += std::to_string(i) + "\n";
  ASSERT_EQ(expected.size(), 8893u);
  ASSERT_TRUE(rt_->Launch(Spec("t-rot", {"seq", "1", "2000"})));
  ASSERT_TRUE(WaitExit("t-rot"));
  const std::string path = rt_->LogPath("t-rot", LogStream::kStdout);
  EXPECT_EQ(ReadWhole(path), expected.substr(8000));
  EXPECT_EQ(ReadWhole(path + ".1"), expected.substr(7000, 1000));
  EXPECT_EQ(ReadWhole(path + ".2"), expected.substr(6000, 1000));
  EXPECT_FALSE(fs::exists(path + ".3"));

  auto check = [&](ProcessRuntime& rt) {
    auto all = rt.ReadLog("t-rot", LogStream::kStdout, 0, 1 << 20);
    ASSERT_TRUE(all) << all.error().message;
    EXPECT_EQ(all->offset, 6000);  // older bytes were rotated away
    EXPECT_EQ(all->data, expected.substr(6000));
    EXPECT_EQ(all->next_offset, 8893);
    EXPECT_EQ(all->end, 8893);
    auto across = rt.ReadLog("t-rot", LogStream::kStdout, 7950, 100);  // .1 into the current
    ASSERT_TRUE(across);
    EXPECT_EQ(across->offset, 7950);
    EXPECT_EQ(across->data, expected.substr(7950, 100));
    EXPECT_EQ(across->next_offset, 8050);
    auto at_end = rt.ReadLog("t-rot", LogStream::kStdout, 8893, 100);
    ASSERT_TRUE(at_end);
    EXPECT_EQ(at_end->data, "");
    EXPECT_FALSE(rt.ReadLog("t-rot", LogStream::kStdout, 9000, 100));
  };
  check(*rt_);
  // The logical offsets survive a restart (the state file keeps where the current file starts).
  Reopen();
  ASSERT_TRUE(rt_->Adopt());
  check(*rt_);
}

TEST_F(ProcessRuntimeTest, AdoptAfterRestartKeepsWatchingARunningTask) {
  auto t = rt_->Launch(Shell("t-adopt",
                             "echo before; while [ ! -e go ]; do sleep 0.02; done; "
                             "echo during; touch during-done; "
                             "while [ ! -e go2 ]; do sleep 0.02; done; echo after; exit 4"));
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_TRUE(WaitLog("t-adopt", "before"));
  const std::string ws = rt_->Workspace("t-adopt");
  rt_.reset();  // the agent goes away; the task keeps running and writing
  std::ofstream(ws + "/go").put('\n');
  ASSERT_TRUE(Eventually([&] { return fs::exists(ws + "/during-done"); }));
  Reopen();
  EXPECT_TRUE(rt_->Running().empty());
  auto adopted = rt_->Adopt();
  ASSERT_TRUE(adopted) << adopted.error().message;
  ASSERT_EQ(adopted->running.size(), 1u);
  EXPECT_TRUE(adopted->ended.empty());
  EXPECT_EQ(adopted->running[0].task_id, "t-adopt");
  EXPECT_EQ(adopted->running[0].pid, t->pid);
  EXPECT_EQ(adopted->running[0].started_ms, t->started_ms);
  EXPECT_EQ(adopted->running[0].cgroup, t->cgroup);
  EXPECT_EQ(adopted->running[0].uid, t->uid);
  EXPECT_TRUE(adopted->running[0].adopted);
  EXPECT_TRUE(rt_->Adopt()->running.empty());  // adopting twice finds nothing new

  std::ofstream(ws + "/go2").put('\n');
  const auto r = WaitExit("t-adopt");
  ASSERT_TRUE(r);
  // Its supervisor saw it exit, so the status is known after a restart too (a task that a
  // runtime without supervisors left behind gets kUnknown: AdoptWatchesAProcessThatIsNotItsChild).
  EXPECT_EQ(r->kind, ExitKind::kExited);
  EXPECT_EQ(r->exit_code, 4);
  EXPECT_EQ(r->started_ms, t->started_ms);
  EXPECT_TRUE(r->finish_exact);
  // What it wrote while no agent read its pipe was kept for the next one.
  EXPECT_EQ(Log("t-adopt", LogStream::kStdout), "before\nduring\nafter\n");
}

// Writes a state file as a runtime would have before a restart.
void WriteState(const std::string& task_dir, pid_t pid, uint64_t start_ticks) {
  fs::create_directories(task_dir + "/workspace");
  std::ofstream(task_dir + "/state.json")
      << "{\"version\":1,\"task_id\":\"" << fs::path(task_dir).filename().string()
      << "\",\"pid\":" << pid << ",\"start_ticks\":" << start_ticks
      << ",\"started_ms\":1700000000000,\"memory_mib\":0}\n";
}

// The supervisor's pid from the task's state file.
pid_t SupervisorOf(const std::string& task_dir) {
  std::ifstream in(task_dir + "/state.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find("\"supervisor\"");
  const size_t pid = at == std::string::npos ? at : text.find("\"pid\":", at);
  return pid == std::string::npos ? 0 : std::atoi(text.c_str() + pid + 6);
}

TEST_F(ProcessRuntimeTest, ASupervisorKillsItsTaskTreeWhenTheLeaseRunsOutWithoutItsAgent) {
  options_.lease = milliseconds(300);
  Reopen();
  auto t = rt_->Launch(Shell("t-fenced",
                             "sleep 60 & echo $!; setsid sleep 60 & echo $!; "
                             "echo ready; wait"));
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_TRUE(WaitLog("t-fenced", "ready"));
  const auto lines = Lines(Log("t-fenced", LogStream::kStdout));
  std::vector<pid_t> pids = {t->pid, std::stoi(lines[0])};
  if (!t->cgroup.empty()) pids.push_back(std::stoi(lines[1]));  // only its cgroup holds that one
  const pid_t supervisor = SupervisorOf(rt_->TaskDir("t-fenced"));
  ASSERT_GT(supervisor, 0);
  // The supervisor binds its socket once it runs, which may be after the task printed.
  EXPECT_TRUE(Eventually(
      [&] { return fs::exists(rt_->TaskDir("t-fenced") + "/" + kSupervisorSocketName); }));

  // The agent goes (as a kill -9 would take it: the lease's socket closes, renewals stop).
  const auto gone_at = std::chrono::steady_clock::now();
  rt_.reset();
  for (pid_t p : pids) {
    EXPECT_TRUE(Eventually([&] { return Gone(p); })) << "pid " << p << " survived its lease";
  }
  EXPECT_TRUE(Eventually([&] { return Gone(supervisor); }));
  // Not before the lease (less the quarter between renewals) was over.
  EXPECT_GE(std::chrono::steady_clock::now() - gone_at, milliseconds(300 - 75));

  // The next agent finds the end the supervisor recorded, and why.
  Reopen();
  auto adopted = rt_->Adopt();
  ASSERT_TRUE(adopted) << adopted.error().message;
  EXPECT_TRUE(adopted->running.empty());
  ASSERT_EQ(adopted->ended.size(), 1u);
  const ExitReport& r = adopted->ended[0];
  EXPECT_EQ(r.kind, ExitKind::kLost);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_EQ(r.reason,
            "lost: its agent was away for longer than its lease of 300 ms, so its supervisor "
            "killed it");
  EXPECT_TRUE(r.finish_exact);
  EXPECT_GE(r.finished_ms, t->started_ms + 225);
}

TEST_F(ProcessRuntimeTest, AnAgentBackWithinTheLeaseKeepsItsTaskAndGetsItsExitStatus) {
  options_.lease = milliseconds(400);
  Reopen();
  // It runs well past the lease, ending by its own clock: killed, it would be reported lost.
  auto t = rt_->Launch(Shell("t-kept", "echo ready; sleep 1.5; exit 7"));
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_TRUE(WaitLog("t-kept", "ready"));
  Reopen();  // an agent restart: the new runtime reconnects to the supervisor and renews
  auto adopted = rt_->Adopt();
  ASSERT_TRUE(adopted) << adopted.error().message;
  ASSERT_EQ(adopted->running.size(), 1u);
  EXPECT_EQ(adopted->running[0].pid, t->pid);
  const auto r = WaitExit("t-kept");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kExited) << r->reason;
  EXPECT_EQ(r->exit_code, 7);
  EXPECT_EQ(r->reason, "exited with code 7");
  EXPECT_TRUE(r->finish_exact);
  EXPECT_GE(r->finished_ms, t->started_ms + 1500);
  EXPECT_TRUE(Gone(t->pid));
}

// The supervisor's socket is there as soon as Launch returns (the agent makes it before the
// supervisor starts, which takes a while on a loaded node or under a sanitizer): an agent that
// restarts at once re-adopts its task rather than losing it when the first lease runs out.
TEST_F(ProcessRuntimeTest, AnAgentRestartedRightAfterALaunchKeepsItsTask) {
  options_.lease = milliseconds(400);
  Reopen();
  auto t = rt_->Launch(Shell("t-early", "sleep 1; exit 3"));
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_TRUE(fs::exists(root_ + "/tasks/t-early/" + kSupervisorSocketName));
  Reopen();
  auto adopted = rt_->Adopt();
  ASSERT_TRUE(adopted) << adopted.error().message;
  ASSERT_EQ(adopted->running.size(), 1u);
  EXPECT_TRUE(Warnings().empty()) << Warnings().front();
  const auto r = WaitExit("t-early");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kExited) << r->reason;
  EXPECT_EQ(r->exit_code, 3);
}

// Issue 11: a network cut must not leave a restartable task running twice (the server runs it
// elsewhere once it loses the node). Its lease runs from the last heartbeat the server
// acknowledged: while acknowledgements come it outlives its lease many times over; when they
// stop, its supervisor kills it a lease after the last one although the agent is alive and
// renewing, while a task the server would not run elsewhere keeps running.
TEST_F(ProcessRuntimeTest, ARestartableTaskEndsALeaseAfterTheServerLastHeardItsNode) {
  options_.lease = milliseconds(600);
  Reopen();
  rt_->ServerHeard(std::chrono::steady_clock::now());
  LaunchSpec fenced = Shell("t-cut", "echo ready; exec sleep 60");
  fenced.restartable = true;
  auto f = rt_->Launch(fenced);
  ASSERT_TRUE(f) << f.error().message;
  auto plain = rt_->Launch(Shell("t-plain", "echo ready; exec sleep 60"));
  ASSERT_TRUE(plain) << plain.error().message;
  const auto acked_until = std::chrono::steady_clock::now() + milliseconds(1500);
  auto last_heard = std::chrono::steady_clock::now();
  while (last_heard < acked_until) {
    Collect(milliseconds(100));
    last_heard = std::chrono::steady_clock::now();
    rt_->ServerHeard(last_heard);
  }
  EXPECT_FALSE(seen_.count("t-cut")) << "acknowledged heartbeats renew it past its lease";
  EXPECT_FALSE(Gone(f->pid));

  const auto r = WaitExit("t-cut");
  ASSERT_TRUE(r);
  EXPECT_GE(std::chrono::steady_clock::now() - last_heard, milliseconds(590));
  EXPECT_EQ(r->kind, ExitKind::kLost);
  EXPECT_EQ(r->signal, SIGKILL);
  EXPECT_EQ(r->reason,
            "lost: the server had not heard from its node (or its agent was away) for longer than "
            "its lease, so its supervisor killed it before the server could run it elsewhere");
  EXPECT_TRUE(Eventually([&] { return Gone(f->pid); }));
  // The plain task's supervisor had the same deadline were it fenced too: give it as long again.
  EXPECT_FALSE(WaitExit("t-plain", milliseconds(600))) << "an unfenced task keeps its lease";
  EXPECT_FALSE(Gone(plain->pid));
}

// The fence survives an agent restart: the new runtime renews an adopted restartable task only
// once the server has acknowledged one of its heartbeats, so it ends at the deadline the
// previous agent gave it.
TEST_F(ProcessRuntimeTest, AnAdoptedRestartableTaskIsRenewedOnlyOnceTheServerHearsTheNode) {
  options_.lease = milliseconds(600);
  Reopen();
  const auto heard = std::chrono::steady_clock::now();
  rt_->ServerHeard(heard);
  LaunchSpec fenced = Shell("t-away", "echo ready; exec sleep 60");
  fenced.restartable = true;
  auto f = rt_->Launch(fenced);
  ASSERT_TRUE(f) << f.error().message;
  ASSERT_TRUE(WaitLog("t-away", "ready"));
  Reopen();  // an agent restart while the server cannot be reached
  auto adopted = rt_->Adopt();
  ASSERT_TRUE(adopted) << adopted.error().message;
  ASSERT_EQ(adopted->running.size(), 1u);
  const auto r = WaitExit("t-away");
  ASSERT_TRUE(r);
  EXPECT_GE(std::chrono::steady_clock::now() - heard, milliseconds(590));
  EXPECT_EQ(r->kind, ExitKind::kLost) << r->reason;
  EXPECT_TRUE(Eventually([&] { return Gone(f->pid); }));
}

TEST_F(ProcessRuntimeTest, ATaskDiesWithItsSupervisor) {
  auto t = rt_->Launch(Shell("t-orphan", "echo ready; exec sleep 60"));
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_TRUE(WaitLog("t-orphan", "ready"));
  const pid_t supervisor = SupervisorOf(rt_->TaskDir("t-orphan"));
  ASSERT_GT(supervisor, 0);
  ASSERT_EQ(kill(supervisor, SIGKILL), 0);
  const auto r = WaitExit("t-orphan");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kLost);
  EXPECT_EQ(r->reason, "lost: its supervisor ended without recording how the task ended");
  EXPECT_TRUE(Eventually([&] { return Gone(t->pid); }));  // its parent-death signal
}

TEST(SupervisorArgv, RoundTripsAndRefusesWhatIsMalformed) {
  SupervisorArgs a;
  a.task_dir = "/var/lib/gpupool/runtime/tasks/t-1";
  a.lease_fd = 7;
  a.listen_fd = 8;
  a.lease_ms = 5000;
  a.task_pid = 4242;
  a.cgroup.controllers["memory"] = {CgroupVersion::kV1, "/sys/fs/cgroup/memory/g/t-1"};
  a.cgroup.controllers["pids"] = {CgroupVersion::kV2, "/sys/fs/cgroup/g/t:1"};
  a.cgroup.v2_dir = "/sys/fs/cgroup/g/t:1";
  auto back = ParseSupervisorArgv(SupervisorArgv("/proc/self/exe", a));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->task_dir, a.task_dir);
  EXPECT_EQ(back->lease_fd, 7);
  EXPECT_EQ(back->listen_fd, 8);
  EXPECT_EQ(back->lease_ms, 5000);
  EXPECT_EQ(back->task_pid, 4242);
  EXPECT_EQ(back->cgroup, a.cgroup);
  // The pid is left as room for the forked child to fill in.
  a.task_pid = 0;
  const auto argv = SupervisorArgv("/proc/self/exe", a);
  EXPECT_EQ(argv[kSupervisorPidArg], std::string(kPidWidth, ' '));
  EXPECT_FALSE(ParseSupervisorArgv(argv));
  for (const auto& [i, bad] : std::vector<std::pair<size_t, std::string>>{{2, "relative/dir"},
                                                                          {3, "-1"},
                                                                          {5, "0"},
                                                                          {6, "listen:-1"},
                                                                          {6, "listen:x"},
                                                                          {7, "c:memory:3:/x"},
                                                                          {7, "memory"}}) {
    auto args = SupervisorArgv("/proc/self/exe", back.value());
    args[i] = bad;
    EXPECT_FALSE(ParseSupervisorArgv(args)) << i << " " << bad;
  }
}

TEST_F(ProcessRuntimeTest, AdoptWatchesAProcessThatIsNotItsChild) {
  // Left by a runtime without supervisors (its state file has none): a grandchild of the test,
  // orphaned, not our child, so only its pidfd tells when it ends.
  const std::string go = base_ + "/go";
  int out = -1;
  const pid_t sh = SpawnChild({"/bin/sh", "-c",
                               "setsid sh -c 'while [ ! -e \"$0\" ]; do sleep 0.02; done' '" + go +
                                   "' </dev/null >/dev/null 2>&1 & echo $!"},
                              &out);
  char buf[32] = {};
  ASSERT_GT(read(out, buf, sizeof buf - 1), 0);
  close(out);
  int status = 0;
  waitpid(sh, &status, 0);
  const pid_t pid = std::atoi(buf);
  const auto st = ReadProcStat(pid);
  ASSERT_TRUE(st);
  WriteState(root_ + "/tasks/t-foreign", pid, st->start_ticks);

  auto adopted = rt_->Adopt();
  ASSERT_TRUE(adopted) << adopted.error().message;
  ASSERT_EQ(adopted->running.size(), 1u);
  EXPECT_EQ(adopted->running[0].pid, pid);
  std::ofstream(go).put('\n');
  const auto r = WaitExit("t-foreign");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kUnknown);
  EXPECT_EQ(r->reason, "exited (status unknown: the task was adopted after an agent restart)");
  EXPECT_EQ(r->started_ms, 1700000000000);
  EXPECT_TRUE(Gone(pid));
}

TEST_F(ProcessRuntimeTest, ReusedPidIsReportedLostNotAdopted) {
  // A live process whose start time differs from the state file's: the pid was reused.
  const pid_t stranger = SpawnChild({"/bin/sleep", "30"});
  const auto st = ReadProcStat(stranger);
  ASSERT_TRUE(st);
  WriteState(root_ + "/tasks/t-reused", stranger, st->start_ticks + 12345);
  // A process that is gone.
  const pid_t gone = SpawnChild({"/bin/true"});
  int status = 0;
  waitpid(gone, &status, 0);
  WriteState(root_ + "/tasks/t-gone", gone, 1);
  // A launch the agent never finished (no state file).
  fs::create_directories(root_ + "/tasks/t-half");

  auto adopted = rt_->Adopt();
  ASSERT_TRUE(adopted) << adopted.error().message;
  EXPECT_TRUE(adopted->running.empty());
  std::map<std::string, ExitReport> ended;
  for (const ExitReport& r : adopted->ended) ended[r.task_id] = r;
  ASSERT_EQ(ended.size(), 3u);
  EXPECT_EQ(ended["t-reused"].kind, ExitKind::kLost);
  EXPECT_NE(ended["t-reused"].reason.find("belongs to another process"), std::string::npos)
      << ended["t-reused"].reason;
  EXPECT_FALSE(ended["t-reused"].finish_exact);
  EXPECT_EQ(ended["t-gone"].kind, ExitKind::kLost);
  EXPECT_NE(ended["t-gone"].reason.find("ended while the agent was not running"),
            std::string::npos);
  EXPECT_EQ(ended["t-half"].kind, ExitKind::kLost);
  // The stranger is not ours: untouched.
  EXPECT_FALSE(Gone(stranger));
  kill(stranger, SIGKILL);
  waitpid(stranger, &status, 0);
}

TEST_F(ProcessRuntimeTest, EndedTaskIsReportedAgainAfterRestartUntilRemoved) {
  ASSERT_TRUE(rt_->Launch(Shell("t-done", "exit 7")));
  const auto r = WaitExit("t-done");
  ASSERT_TRUE(r);
  Reopen();
  auto adopted = rt_->Adopt();
  ASSERT_TRUE(adopted);
  ASSERT_EQ(adopted->ended.size(), 1u);
  EXPECT_EQ(adopted->ended[0], *r);
  ASSERT_TRUE(rt_->Remove("t-done"));
  EXPECT_FALSE(fs::exists(rt_->TaskDir("t-done")));
  Reopen();
  adopted = rt_->Adopt();
  ASSERT_TRUE(adopted);
  EXPECT_TRUE(adopted->ended.empty());
  EXPECT_TRUE(adopted->running.empty());
}

TEST_F(ProcessRuntimeTest, AStateFileThatCannotBeWrittenIsReportedAndTheTaskRunsOn) {
  // It ignores SIGTERM (and so do its children), so that only the last Stop's SIGKILL ends it.
  ASSERT_TRUE(
      rt_->Launch(Shell("t-stuck", "trap '' TERM; echo ready; while :; do sleep 0.05; done")));
  ASSERT_TRUE(WaitLog("t-stuck", "ready"));
  // A directory where the state file was: no new one can be renamed over it, even by root.
  const std::string state = rt_->TaskDir("t-stuck") + "/state.json";
  ASSERT_TRUE(fs::remove(state));
  ASSERT_TRUE(fs::create_directory(state));

  ASSERT_TRUE(rt_->Stop("t-stuck", seconds(60)));  // persisting the stop fails
  ASSERT_TRUE(rt_->Stop("t-stuck", seconds(50)));  // and again: reported once
  auto w = Warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].rfind("task t-stuck: state file cannot be written (cannot write " + state, 0), 0u)
      << w[0];
  EXPECT_EQ(rt_->Running().size(), 1u) << "the task runs on";

  ASSERT_TRUE(fs::remove(state));
  ASSERT_TRUE(rt_->Stop("t-stuck", milliseconds(0)));  // persisted: the kill comes at once
  w = Warnings();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[1], "task t-stuck: state file is written again");
  const auto r = WaitExit("t-stuck");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExitKind::kStopped);
  EXPECT_EQ(Warnings().size(), 2u) << "the end was persisted";
  Reopen();  // a restarted agent finds how it ended
  auto adopted = rt_->Adopt();
  ASSERT_TRUE(adopted) << adopted.error().message;
  ASSERT_EQ(adopted->ended.size(), 1u);
  EXPECT_EQ(adopted->ended[0], *r);
}

}  // namespace
}  // namespace gpupool::agent
