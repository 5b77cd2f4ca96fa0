// The docker runtime against a real Docker daemon the test starts itself (its own data root and
// socket, no bridge, no iptables) and an image it builds from a static busybox: output and
// workspace files, exit codes, the image's default command, stop (SIGTERM honoured, SIGKILL after
// the grace), the memory limit (oom-killed), launch failures that leave nothing behind, and
// adoption after the runtime is dropped and reopened, and the supervisors that kill a container
// whose agent is gone for its lease (or, restartable, whose server stopped hearing from it).
// Skips only when dockerd cannot start.
#include "agent/runtime/docker_runtime.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "agent/runtime/docker_api.h"
#include "agent/runtime/linux_proc.h"
#include "agent/runtime/unix_http.h"
#include "tests/dockerd.h"
#include "tests/server_process.h"

namespace gpupool::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Eventually;

constexpr const char* kImage = "gpupool-test:1";

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

LaunchSpec Shell(const std::string& id, const std::string& script) {
  LaunchSpec s;
  s.task_id = id;
  s.image = kImage;
  s.command = {"/bin/sh", "-c", script};
  return s;
}

class DockerRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why_not;
    dockerd_ = testing::Dockerd::Start(&why_not);
    if (!dockerd_) GTEST_SKIP() << "dockerd cannot start here: " << why_not;
    const auto built = dockerd_->BuildTestImage(kImage);
    ASSERT_TRUE(built) << built.error().message;
    base_ = testing::MakeTempDir("gpupool-docker-rt");
    root_ = base_ + "/docker";
    options_.socket = dockerd_->socket();
    options_.network_mode = "none";  // the test daemon has no bridge
    options_.on_exit = [this] { ++exits_notified_; };
    Reopen();
  }

  void TearDown() override {
    if (rt_) {
      for (const RunningTask& t : rt_->Running()) {
        EXPECT_TRUE(rt_->Stop(t.task_id, milliseconds(0)));
      }
      EXPECT_TRUE(Eventually(
          [&] {
            rt_->Reap(milliseconds(100));
            return rt_->Running().empty();
          },
          seconds(30)));
      for (const std::string& id : rt_->Tasks()) {
        const auto st = rt_->Remove(id);
        EXPECT_TRUE(st) << st.error().message;
      }
      rt_.reset();
    }
    dockerd_.reset();
    std::error_code ec;
    if (!base_.empty()) fs::remove_all(base_, ec);
  }

  void Reopen() {
    rt_.reset();
    auto rt = DockerRuntime::Open(root_, options_);
    ASSERT_TRUE(rt) << rt.error().message;
    rt_ = std::move(*rt);
  }

  // The next end reported for `id` (Reap waits for it; no polling).
  ExitReport WaitExit(const std::string& id, milliseconds timeout = seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      for (ExitReport& r : rt_->Reap(milliseconds(500))) {
        if (r.task_id == id) return r;
        pending_.push_back(r);
      }
      for (auto it = pending_.begin(); it != pending_.end(); ++it) {
        if (it->task_id == id) {
          ExitReport r = *it;
          pending_.erase(it);
          return r;
        }
      }
    }
    ADD_FAILURE() << "no end reported for " << id;
    return {};
  }

  std::string Log(const std::string& id, LogStream s) {
    auto chunk = rt_->ReadLog(id, s, 0, 1 << 20);
    return chunk ? chunk->data : "<" + chunk.error().message + ">";
  }
  bool WaitLog(const std::string& id, const std::string& text) {
    return Eventually([&] { return Log(id, LogStream::kStdout).find(text) != std::string::npos; },
                      seconds(30));
  }

  // An Engine API call of the test's own.
  Result<HttpResponse> Api(const std::string& method, const std::string& path,
                           milliseconds timeout = seconds(30)) {
    UnixHttpOptions o;
    o.timeout = timeout;
    return UnixHttpClient(dockerd_->socket(), o).Call(method, std::string(docker::kApi) + path);
  }

  // Whether Docker says the container runs.
  bool ContainerRuns(const std::string& container) {
    auto r = Api("GET", "/containers/" + container + "/json");
    return r && r->status == 200 && json::parse(r->body)["State"]["Running"] == true;
  }

  std::unique_ptr<testing::Dockerd> dockerd_;
  std::string base_, root_;
  DockerOptions options_;
  std::unique_ptr<DockerRuntime> rt_;
  std::atomic<int> exits_notified_{0};
  std::vector<ExitReport> pending_;
};

TEST_F(DockerRuntimeTest, RunsATaskWhoseOutputAndWorkspaceFilesReachTheHost) {
  const int64_t before = WallMs();
  auto t = rt_->Launch(Shell("t-ok",
                             "echo hello out; echo hello err >&2; echo data > /root/result.txt; "
                             "echo \"$GPUPOOL_TASK_ID $GPUPOOL_WORKSPACE $GPUPOOL_METRICS_FILE "
                             "[$CUDA_VISIBLE_DEVICES] [$NVIDIA_VISIBLE_DEVICES] $(pwd) $HOME\"; "
                             "echo '{\"step\":1}' >> \"$GPUPOOL_METRICS_FILE\""));
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_FALSE(t->container.empty());
  EXPECT_GE(t->started_ms, before - 1000);  // Docker's clock is the host's (ms truncation)
  EXPECT_EQ(t->workspace, rt_->Workspace("t-ok"));

  const ExitReport r = WaitExit("t-ok");
  EXPECT_EQ(r.kind, ExitKind::kExited);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.reason, "exited with code 0");
  EXPECT_EQ(r.started_ms, t->started_ms);
  EXPECT_GE(r.finished_ms, r.started_ms);
  EXPECT_LE(r.finished_ms, WallMs());
  EXPECT_TRUE(r.finish_exact);
  // The owner is told after the report is ready for Reap, so it may come a moment later.
  EXPECT_TRUE(Eventually([&] { return exits_notified_.load() >= 1; }));

  EXPECT_EQ(Log("t-ok", LogStream::kStdout),
            "hello out\nt-ok /root /gpupool/metrics.jsonl [] [void] /root /root\n");
  EXPECT_EQ(Log("t-ok", LogStream::kStderr), "hello err\n");
  EXPECT_EQ(ReadWhole(rt_->Workspace("t-ok") + "/result.txt"), "data\n");
  EXPECT_EQ(ReadWhole(rt_->MetricsPath("t-ok")), "{\"step\":1}\n");
  EXPECT_EQ(ReadWhole(rt_->LogPath("t-ok", LogStream::kStdout)), Log("t-ok", LogStream::kStdout));

  // The container is labelled with the task and this runtime's instance.
  auto inspect = Api("GET", "/containers/" + t->container + "/json");
  ASSERT_TRUE(inspect) << inspect.error().message;
  const json j = json::parse(inspect->body);
  EXPECT_EQ(j["Config"]["Labels"]["gpupool.task"], "t-ok");
  EXPECT_EQ(j["Config"]["Labels"]["gpupool.agent"], rt_->instance());
  EXPECT_EQ(j["Name"], "/gpupool-" + rt_->instance() + "-t-ok");

  // Remove takes the container and the directory.
  ASSERT_TRUE(rt_->Remove("t-ok"));
  EXPECT_FALSE(fs::exists(rt_->TaskDir("t-ok")));
  inspect = Api("GET", "/containers/" + t->container + "/json");
  ASSERT_TRUE(inspect);
  EXPECT_EQ(inspect->status, 404);
}

// Simulated GPUs are no devices: the container gets their environment alone. Asking Docker for
// NVIDIA devices here failed every GPU task with `could not select device driver "nvidia"`.
TEST_F(DockerRuntimeTest, AGpuTaskOnSimulatedGpusRunsWithTheirEnvironment) {
  options_.gpu_devices = false;
  Reopen();
  EXPECT_FALSE(rt_->nvidia()) << "the test daemon has no NVIDIA runtime";
  LaunchSpec s = Shell("t-simgpu", "echo \"[$CUDA_VISIBLE_DEVICES] [$NVIDIA_VISIBLE_DEVICES]\"");
  s.gpu_uuids = {"GPU-sim-0", "GPU-sim-1"};
  auto t = rt_->Launch(s);
  ASSERT_TRUE(t) << t.error().message;
  const ExitReport r = WaitExit("t-simgpu");
  EXPECT_EQ(r.reason, "exited with code 0") << Log("t-simgpu", LogStream::kStderr);
  EXPECT_EQ(Log("t-simgpu", LogStream::kStdout), "[GPU-sim-0,GPU-sim-1] [GPU-sim-0,GPU-sim-1]\n");
  // With devices asked for (real GPUs), this daemon refuses: what the agent no longer does for
  // simulated ones.
  options_.gpu_devices = true;
  Reopen();
  s.task_id = "t-realgpu";
  const auto refused = rt_->Launch(s);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("nvidia"), std::string::npos) << refused.error().message;
}

TEST_F(DockerRuntimeTest, ReportsTheExitCodeAndRunsTheImagesDefaultCommand) {
  ASSERT_TRUE(rt_->Launch(Shell("t-3", "echo failing; exit 3")));
  LaunchSpec dflt;
  dflt.task_id = "t-default";
  dflt.image = kImage;  // no command: the image's CMD
  ASSERT_TRUE(rt_->Launch(dflt));
  const ExitReport r = WaitExit("t-3");
  EXPECT_EQ(r.kind, ExitKind::kExited);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.reason, "exited with code 3");
  EXPECT_EQ(Log("t-3", LogStream::kStdout), "failing\n");
  EXPECT_EQ(WaitExit("t-default").exit_code, 0);
  EXPECT_EQ(Log("t-default", LogStream::kStdout), "default command\n");
}

TEST_F(DockerRuntimeTest, StopSendsSigtermWhichTheTaskHonours) {
  auto t = rt_->Launch(Shell(
      "t-stop", "trap 'echo got TERM; exit 0' TERM; echo ready; while true; do sleep 0.1; done"));
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_GT(t->pid, 0);  // its init process on the host (0 only for a task already gone)
  ASSERT_TRUE(WaitLog("t-stop", "ready\n"));
  const int64_t asked = WallMs();
  ASSERT_TRUE(rt_->Stop("t-stop", seconds(30)));
  const ExitReport r = WaitExit("t-stop");
  EXPECT_EQ(r.kind, ExitKind::kStopped);
  EXPECT_EQ(r.reason, "stopped");
  EXPECT_EQ(r.exit_code, 0);  // its own exit, from its trap
  EXPECT_LT(r.finished_ms - asked, 10'000) << "it waited for the SIGKILL instead";
  EXPECT_EQ(Log("t-stop", LogStream::kStdout), "ready\ngot TERM\n");
  EXPECT_TRUE(rt_->Stop("t-stop", seconds(1)));  // an ended task: a no-op
}

TEST_F(DockerRuntimeTest, StopEscalatesToSigkillAfterTheGrace) {
  ASSERT_TRUE(
      rt_->Launch(Shell("t-stubborn", "trap '' TERM; echo ready; while true; do sleep 0.1; done")));
  ASSERT_TRUE(WaitLog("t-stubborn", "ready\n"));
  const int64_t asked = WallMs();
  ASSERT_TRUE(rt_->Stop("t-stubborn", milliseconds(1000)));
  const ExitReport r = WaitExit("t-stubborn");
  EXPECT_EQ(r.kind, ExitKind::kStopped);
  EXPECT_EQ(r.exit_code, 137);  // SIGKILL
  EXPECT_GE(r.finished_ms - asked, 900);
}

TEST_F(DockerRuntimeTest, TaskOverItsMemoryLimitIsReportedOomKilled) {
  LaunchSpec s = Shell("t-oom", "echo filling; tail /dev/zero");  // tail buffers a line forever
  s.memory_mib = 16;
  auto t = rt_->Launch(s);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_TRUE(t->limits.memory);
  const ExitReport r = WaitExit("t-oom");
  EXPECT_EQ(r.kind, ExitKind::kOomKilled);
  EXPECT_EQ(r.reason, "oom-killed: memory limit 16 MiB");
  EXPECT_EQ(r.exit_code, 137);
}

TEST_F(DockerRuntimeTest, FailedLaunchesSayWhyAndLeaveNothingBehind) {
  LaunchSpec missing = Shell("t-missing", "true");
  missing.image = "localhost:1/gpupool-missing:1";  // not here, and no registry answers
  auto r = rt_->Launch(missing);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(r.error().message.find("is not on this node and cannot be pulled"), std::string::npos)
      << r.error().message;
  EXPECT_FALSE(fs::exists(rt_->TaskDir("t-missing")));

  LaunchSpec bad_network = Shell("t-nonet", "true");
  options_.network_mode = "no-such-network";
  Reopen();
  r = rt_->Launch(bad_network);
  ASSERT_FALSE(r);
  // Docker creates the container and refuses to start it: the container goes again.
  EXPECT_NE(r.error().message.find("task t-nonet: starting its container: docker answered HTTP"),
            std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("no-such-network"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(rt_->TaskDir("t-nonet")));
  options_.network_mode = "none";
  Reopen();

  LaunchSpec no_image = Shell("t-noimage", "true");
  no_image.image.clear();
  r = rt_->Launch(no_image);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);

  // No container of this runtime is left over.
  auto list = Api("GET", "/containers/json?all=1");
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ(json::parse(list->body).size(), 0u) << list->body;
  EXPECT_TRUE(rt_->Tasks().empty());

  // A command the image lacks runs, and its init process says why it ended (as docker run --init).
  LaunchSpec no_binary = Shell("t-nobin", "");
  no_binary.command = {"/no/such/binary"};
  ASSERT_TRUE(rt_->Launch(no_binary));
  const ExitReport nobin = WaitExit("t-nobin");
  EXPECT_EQ(nobin.exit_code, 127);
  EXPECT_NE(Log("t-nobin", LogStream::kStderr).find("/no/such/binary"), std::string::npos)
      << Log("t-nobin", LogStream::kStderr);
  ASSERT_TRUE(rt_->Remove("t-nobin"));

  ASSERT_TRUE(rt_->Launch(Shell("t-dup", "sleep 30")));
  r = rt_->Launch(Shell("t-dup", "true"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(rt_->Remove("t-dup").error().code, ErrorCode::kFailedPrecondition);
}

TEST_F(DockerRuntimeTest, AdoptAfterRestartWatchesRunningTasksAndReportsEndedOnes) {
  const std::string wait_for_go = "while [ ! -e /root/go ]; do sleep 0.05; done; ";
  auto a = rt_->Launch(Shell("t-a", "echo a-before; " + wait_for_go + "echo a-after; exit 5"));
  auto b = rt_->Launch(Shell("t-b", "echo b-before; " + wait_for_go + "echo b-after; exit 7"));
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(b) << b.error().message;
  ASSERT_TRUE(WaitLog("t-a", "a-before\n"));
  ASSERT_TRUE(WaitLog("t-b", "b-before\n"));
  const std::string instance = rt_->instance();

  rt_.reset();  // the agent goes away; the containers keep running
  // t-b ends while nobody watches: Docker's wait answers when it has.
  std::ofstream(root_ + "/tasks/t-b/workspace/go").put('\n');
  auto waited = Api("POST", "/containers/" + b->container + "/wait", seconds(60));
  ASSERT_TRUE(waited) << waited.error().message;
  EXPECT_EQ(json::parse(waited->body)["StatusCode"], 7);

  // Another agent's runtime on the same daemon sees none of these containers.
  {
    DockerOptions other = options_;
    auto stranger = DockerRuntime::Open(base_ + "/other", other);
    ASSERT_TRUE(stranger) << stranger.error().message;
    EXPECT_NE((*stranger)->instance(), instance);
    auto found = (*stranger)->Adopt();
    ASSERT_TRUE(found) << found.error().message;
    EXPECT_TRUE(found->running.empty());
    EXPECT_TRUE(found->ended.empty());
  }

  Reopen();
  EXPECT_EQ(rt_->instance(), instance);
  auto adopted = rt_->Adopt();
  ASSERT_TRUE(adopted) << adopted.error().message;
  ASSERT_EQ(adopted->running.size(), 1u);
  EXPECT_EQ(adopted->running[0].task_id, "t-a");
  EXPECT_EQ(adopted->running[0].container, a->container);
  EXPECT_EQ(adopted->running[0].started_ms, a->started_ms);
  EXPECT_TRUE(adopted->running[0].adopted);
  ASSERT_EQ(adopted->ended.size(), 1u);
  const ExitReport& eb = adopted->ended[0];
  EXPECT_EQ(eb.task_id, "t-b");
  EXPECT_EQ(eb.kind, ExitKind::kExited);
  EXPECT_EQ(eb.exit_code, 7);
  EXPECT_TRUE(eb.finish_exact);  // Docker recorded the real end
  EXPECT_EQ(eb.started_ms, b->started_ms);
  // What it wrote while nobody watched is in its log, and nothing twice.
  EXPECT_EQ(Log("t-b", LogStream::kStdout), "b-before\nb-after\n");
  // A second Adopt finds nothing new.
  auto again = rt_->Adopt();
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->running.empty() && again->ended.empty());

  std::ofstream(rt_->Workspace("t-a") + "/go").put('\n');
  const ExitReport ea = WaitExit("t-a");
  EXPECT_EQ(ea.kind, ExitKind::kExited);
  EXPECT_EQ(ea.exit_code, 5);
  EXPECT_EQ(Log("t-a", LogStream::kStdout), "a-before\na-after\n");

  for (const char* id : {"t-a", "t-b"}) ASSERT_TRUE(rt_->Remove(id)) << id;
  auto list = Api("GET", "/containers/json?all=1");
  ASSERT_TRUE(list);
  EXPECT_EQ(json::parse(list->body).size(), 0u) << list->body;
}

TEST_F(DockerRuntimeTest, AContainerWhoseAgentIsGoneForItsLeaseIsKilledAndReportedLost) {
  options_.lease = milliseconds(1000);
  Reopen();
  auto a = rt_->Launch(Shell("t-orphan", "echo up; sleep 600"));
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(WaitLog("t-orphan", "up\n"));
  const auto gone = std::chrono::steady_clock::now();
  rt_.reset();  // the agent dies: nothing renews the lease
  // Docker's wait answers when the container has stopped: its supervisor killed it.
  auto waited = Api("POST", "/containers/" + a->container + "/wait", seconds(30));
  ASSERT_TRUE(waited) << waited.error().message;
  const auto after = std::chrono::steady_clock::now() - gone;
  EXPECT_EQ(json::parse(waited->body)["StatusCode"], 137) << "SIGKILL";
  // Renewed every quarter lease until the agent went: at least 3/4 of a lease after that.
  EXPECT_GE(after, milliseconds(700));
  EXPECT_LT(after, seconds(10));

  Reopen();
  auto adopted = rt_->Adopt();
  ASSERT_TRUE(adopted) << adopted.error().message;
  EXPECT_TRUE(adopted->running.empty());
  ASSERT_EQ(adopted->ended.size(), 1u);
  EXPECT_EQ(adopted->ended[0].kind, ExitKind::kLost);
  EXPECT_EQ(adopted->ended[0].reason,
            "lost: its agent was away for longer than its lease of 1000 ms, so its supervisor "
            "killed it");
}

TEST_F(DockerRuntimeTest, AnAgentBackWithinTheLeaseKeepsItsContainerAndRenewsIt) {
  options_.lease = milliseconds(1000);
  Reopen();
  // One tick every 100 ms: 30 ticks are three leases.
  auto a = rt_->Launch(Shell("t-kept", "i=0; while true; do i=$((i+1)); echo tick $i; "
                                       "sleep 0.1; done"));
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(WaitLog("t-kept", "tick 1\n"));
  rt_.reset();
  Reopen();  // within the lease
  auto adopted = rt_->Adopt();
  ASSERT_TRUE(adopted) << adopted.error().message;
  ASSERT_EQ(adopted->running.size(), 1u);
  ASSERT_TRUE(WaitLog("t-kept", "tick 30\n")) << "it outlived three leases";
  EXPECT_TRUE(ContainerRuns(a->container));
  EXPECT_TRUE(rt_->Reap().empty());
}

TEST_F(DockerRuntimeTest, ARestartableContainerEndsALeaseAfterTheServerLastHeardItsNode) {
  options_.lease = milliseconds(1000);
  Reopen();
  const auto heard = std::chrono::steady_clock::now();
  rt_->ServerHeard(heard);  // and never again: the network is cut from here on
  LaunchSpec fenced = Shell("t-fenced", "echo up; sleep 600");
  fenced.restartable = true;
  auto f = rt_->Launch(fenced);
  ASSERT_TRUE(f) << f.error().message;
  auto p = rt_->Launch(Shell("t-plain", "i=0; while true; do i=$((i+1)); echo tick $i; "
                                        "sleep 0.1; done"));
  ASSERT_TRUE(p) << p.error().message;
  const ExitReport r = WaitExit("t-fenced");
  EXPECT_GE(std::chrono::steady_clock::now() - heard, milliseconds(990));
  EXPECT_EQ(r.kind, ExitKind::kLost);
  EXPECT_EQ(r.reason,
            "lost: the server had not heard from its node (or its agent was away) for longer "
            "than its lease, so its supervisor killed it before the server could run it "
            "elsewhere");
  // The task the server will not run again keeps running through the cut.
  ASSERT_TRUE(WaitLog("t-plain", "tick 30\n"));
  EXPECT_TRUE(ContainerRuns(p->container));
}

TEST_F(DockerRuntimeTest, LogsRotateAtTheConfiguredSizeAndReadByLogicalOffset) {
  options_.log_max_bytes = 100;
  options_.log_keep = 2;
  Reopen();
  // 41 lines of 10 bytes: 410 bytes in files of 100, of which the current and 2 rotated stay.
  ASSERT_TRUE(rt_->Launch(
      Shell("t-rot", "i=0; while [ $i -lt 41 ]; do printf 'line %04d\\n' $i; i=$((i+1)); done")));
  EXPECT_EQ(WaitExit("t-rot").exit_code, 0);
  auto chunk = rt_->ReadLog("t-rot", LogStream::kStdout, 0, 1000);
  ASSERT_TRUE(chunk) << chunk.error().message;
  EXPECT_EQ(chunk->end, 410);
  EXPECT_EQ(chunk->offset, 200);  // the first 200 bytes were rotated away
  EXPECT_EQ(chunk->data.substr(0, 10), "line 0020\n");
  EXPECT_EQ(chunk->data.size(), 210u);
  EXPECT_EQ(ReadWhole(rt_->LogPath("t-rot", LogStream::kStdout) + ".2").substr(0, 10),
            "line 0020\n");
}

}  // namespace
}  // namespace gpupool::agent
