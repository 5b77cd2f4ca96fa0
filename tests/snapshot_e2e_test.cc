// End to end: snapshots on a real server and two real agents (simulated GPUs, real processes).
// A training-like script counts steps in its workspace, saves its step when asked to checkpoint
// (docs/snapshots.md's protocol: the `ready` file, the signal, `request` and `done`) and prints
// where each run starts. It is (a) preempted by a higher-priority task and later resumes at the
// step it had reached, (b) resumed on the other node after its agent is killed, losing at most
// the work since its last periodic snapshot, (c) stopped and resumed by hand with its files
// intact, (d) drained off its node and continued on the other, (e) with `--moves on`, moved to
// the other node to make room for a task that fits nowhere else and continued there; and a
// corrupted chunk fails the resume with a clear reason instead of running on damaged files. Each
// checks that the step count continues rather than restarting at 1, and that the run before is
// gone.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/client.h"
#include "core/base64.h"
#include "tests/agent_process.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::seconds;
using testing::AgentProcess;
using testing::Alive;
using testing::Credentials;
using testing::Eventually;

// One step every 20 ms, each appended to $HOME/log; a checkpoint request saves the step to
// $HOME/step and answers it. A run starts at the saved step and says so.
constexpr const char* kTrainer = R"PY(
import os, signal, time
home, ck = os.environ["HOME"], os.environ["GPUPOOL_CHECKPOINT_DIR"]
state = os.path.join(home, "step")
step = int(open(state).read()) if os.path.exists(state) else 0
print(f"start {step}", flush=True)
asked = False
def ask(*_):
    global asked
    asked = True
signal.signal(signal.SIGUSR1, ask)
open(os.path.join(ck, "ready"), "w").write(str(os.getpid()))
while True:
    step += 1
    with open(os.path.join(home, "log"), "a") as f:
        f.write(f"{step}\n")
    time.sleep(0.02)
    if asked:
        asked = False
        with open(state + ".tmp", "w") as f:
            f.write(str(step))
        os.rename(state + ".tmp", state)
        request = open(os.path.join(ck, "request")).read().strip()
        with open(os.path.join(ck, "done.tmp"), "w") as f:
            f.write(request)
        os.rename(os.path.join(ck, "done.tmp"), os.path.join(ck, "done"))
        print(f"checkpoint {step}", flush=True)
)PY";

class SnapshotE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { StartPool({}); }
  // The server, with `server_args` besides the test's own, and two agents.
  void StartPool(std::vector<std::string> server_args) {
    // The test polls with the admin's key, which the agents use too: no request rate on it.
    server_args.insert(server_args.end(), {"--node-timeout", "3", "--key-rate", "0"});
    pool_ = std::make_unique<testing::PoolProcesses>("snapshot-e2e", 2, std::move(server_args));
    if (HasFatalFailure()) return;
    const Credentials& creds = pool_->creds();
    client_ = std::make_unique<api::Client>(creds.endpoint, creds.access_key, creds.secret_key);
  }
  void TearDown() override { pool_.reset(); }

  json Call(const std::string& method, const std::string& path, const json& body = nullptr) {
    auto r = client_->CallJson(method, path, body.is_null() ? "" : body.dump());
    EXPECT_TRUE(r) << method << " " << path << ": " << (r ? "" : r.error().message);
    return r ? *r : json();
  }
  // The trainer on both of a node's GPUs (so that one task fills a node).
  std::string SubmitTrainer(json extra = json::object()) {
    json body = {{"command", {"python3", "-c", kTrainer}}, {"gpu_count", 2}};
    body.update(extra);
    return Call("POST", "/v1/tasks", body)["id"];
  }
  std::string SubmitSleeper(int priority) {
    return Call("POST", "/v1/tasks",
                {{"command", {"sleep", "300"}}, {"gpu_count", 2}, {"priority", priority}})["id"];
  }
  json Task(const std::string& id) { return Call("GET", "/v1/tasks/" + id); }
  bool WaitState(const std::string& id, const std::string& state, seconds within = seconds(30)) {
    return Eventually([&] { return Task(id).value("state", "") == state; }, within);
  }
  std::string Stdout(const std::string& task) {
    const json slice = Call("GET", "/v1/tasks/" + task + "/logs?stream=stdout");
    return Base64Decode(slice.value("data_b64", "")).value_or("");
  }
  // The step a run printed it starts at: the `nth` "start N" line of the task's output.
  std::optional<int> StartOfRun(const std::string& task, int nth) {
    std::optional<int> found;
    Eventually(
        [&] {
          const std::string out = Stdout(task);
          int seen = 0;
          for (size_t at = out.find("start "); at != std::string::npos;
               at = out.find("start ", at + 1)) {
            if (++seen == nth) {
              found = std::stoi(out.substr(at + 6));
              return true;
            }
          }
          return false;
        },
        seconds(20));
    return found;
  }
  // The last "checkpoint N" the task printed (its output reaches the server about a second after
  // it is written).
  int LastCheckpoint(const std::string& task) {
    std::string out;
    Eventually(
        [&] {
          out = Stdout(task);
          return out.find("checkpoint ") != std::string::npos;
        },
        seconds(10));
    const size_t at = out.rfind("checkpoint ");
    return at == std::string::npos ? 0 : std::stoi(out.substr(at + 11));
  }
  json Snapshots(const std::string& task) {
    return Call("GET", "/v1/snapshots?task=" + task)["snapshots"];
  }
  AgentProcess* AgentOf(const std::string& node) { return pool_->AgentOf(node); }
  std::string NodeOf(const std::string& task) { return Task(task)["placement"]["node"]; }
  // Whether the task comes to run on a node other than `node` (its next run, elsewhere).
  bool RunsOnAnotherNode(const std::string& task, const std::string& node) {
    return Eventually(
        [&] {
          const json t = Task(task);
          return t["state"] == "running" && t["placement"]["node"] != node;
        },
        seconds(40));
  }
  // Waits until the trainer has taken `steps` steps in its current run.
  void RunSteps(const std::string& task) {
    ASSERT_TRUE(WaitState(task, "running")) << Task(task).dump(2);
    const int runs = static_cast<int>(Task(task)["run"]);
    const std::optional<int> start = StartOfRun(task, runs);
    ASSERT_TRUE(start.has_value()) << Stdout(task);
    // At least five steps into this run (its log, on its node), however busy the machine is.
    ASSERT_TRUE(Eventually(
        [&] {
          const std::vector<int> log = WorkspaceLog(task);
          return !log.empty() && log.back() >= *start + 5;
        },
        seconds(30)));
  }
  // The workspace log of the task's current run, read on its node: its steps, in order.
  std::vector<int> WorkspaceLog(const std::string& task) {
    AgentProcess* a = AgentOf(NodeOf(task));
    std::vector<int> steps;
    if (a == nullptr) return steps;
    std::ifstream in(a->TaskDir(task) + "/workspace/log");
    for (int step; in >> step;) steps.push_back(step);
    return steps;
  }
  // The workspace log as the resumed run sees it: the first run's steps 1, 2, … k (those it took
  // after its checkpoint included: they are in the snapshot), then the next run's from
  // `resumed_at` + 1 on — never from 1 again.
  static void ExpectContinues(const std::vector<int>& steps, int resumed_at) {
    std::string all;
    for (int step : steps) all += std::to_string(step) + " ";
    SCOPED_TRACE("the workspace log: " + all + "; resumed at " + std::to_string(resumed_at));
    ASSERT_FALSE(steps.empty());
    size_t i = 0;
    int step = 1;
    for (; i < steps.size() && steps[i] == step; ++i, ++step) {
    }
    ASSERT_GE(step - 1, resumed_at) << "the first run's steps reach its checkpoint";
    if (i == steps.size()) {
      // No step between the checkpoint and the freeze: the next run's follow on seamlessly.
      ASSERT_GT(steps.size(), static_cast<size_t>(resumed_at)) << "the next run took no step";
      return;
    }
    for (step = resumed_at + 1; i < steps.size(); ++i, ++step) {
      ASSERT_EQ(steps[i], step) << "entry " << i << " of the workspace log";
    }
  }

  std::unique_ptr<testing::PoolProcesses> pool_;
  std::unique_ptr<api::Client> client_;
};

TEST_F(SnapshotE2eTest, APreemptedTaskResumesAtTheStepItReached) {
  const std::string trainer = SubmitTrainer();
  ASSERT_NO_FATAL_FAILURE(RunSteps(trainer));
  const std::string first_node = NodeOf(trainer);
  const pid_t first_pid = AgentOf(first_node)->TaskPid(trainer);
  const std::string filler = SubmitSleeper(5);  // the other node, above the trainer's priority
  ASSERT_TRUE(WaitState(filler, "running"));
  const std::string urgent = SubmitSleeper(10);  // preempts the lowest: the trainer
  ASSERT_TRUE(WaitState(urgent, "running")) << Task(urgent).dump(2);
  // Checkpointed when asked, frozen, stored, then stopped; back in the queue from that snapshot.
  ASSERT_TRUE(Eventually([&] { return Snapshots(trainer).size() == 1; }, seconds(30)));
  const json snap = Snapshots(trainer)[0];
  EXPECT_EQ(snap["trigger"], "preempt");
  EXPECT_EQ(snap["consistency"], "application");
  EXPECT_TRUE(Eventually([&] { return !Alive(first_pid); }, seconds(20)));
  json t = Task(trainer);
  EXPECT_EQ(t["state"], "pending");
  EXPECT_EQ(t["resume_from"], snap["id"]);
  EXPECT_EQ(t["preemptions"], 1);
  Call("POST", "/v1/tasks/" + urgent + "/stop");
  ASSERT_NO_FATAL_FAILURE(RunSteps(trainer));
  EXPECT_EQ(Task(trainer)["run"], 2);
  // It starts at the step it had checkpointed (the preempted run's output after its preemption
  // is not the server's to keep, so the workspace log is the witness): not at 0.
  const std::optional<int> reached = StartOfRun(trainer, 2);
  ASSERT_TRUE(reached.has_value());
  EXPECT_GT(*reached, 1);
  ExpectContinues(WorkspaceLog(trainer), *reached);
}

TEST_F(SnapshotE2eTest, AKilledAgentsTaskResumesElsewhereFromItsLastPeriodicSnapshot) {
  const std::string trainer = SubmitTrainer({{"restartable", true}, {"snapshot_every_ms", 10'000}});
  ASSERT_NO_FATAL_FAILURE(RunSteps(trainer));
  ASSERT_TRUE(Eventually([&] { return !Snapshots(trainer).empty(); }, seconds(30)));
  const json periodic = Snapshots(trainer).back();
  EXPECT_EQ(periodic["trigger"], "periodic");
  const int saved = LastCheckpoint(trainer);
  ASSERT_GT(saved, 1);
  const std::string first_node = NodeOf(trainer);
  AgentProcess* dead = AgentOf(first_node);
  const pid_t first_pid = dead->TaskPid(trainer);
  dead->Kill();
  // --node-timeout 3: lost, queued again, run on the other node from the periodic snapshot.
  ASSERT_TRUE(RunsOnAnotherNode(trainer, first_node)) << Task(trainer).dump(2);
  const json t = Task(trainer);
  EXPECT_EQ(t["run"], 2);
  const std::optional<int> start = StartOfRun(trainer, 2);
  ASSERT_TRUE(start.has_value()) << Stdout(trainer);
  // From the last periodic snapshot (or a later one): never from the start.
  EXPECT_GE(*start, saved);
  EXPECT_LE(t["work_lost_ms"].get<int64_t>(), 10'000 + 5'000) << t.dump(2);
  // The agent's task supervisor ended the first run when its lease lapsed, before the server
  // ran it again.
  EXPECT_FALSE(Alive(first_pid));
}

TEST_F(SnapshotE2eTest, AStoppedTaskResumesByHandWithItsFilesIntact) {
  const std::string trainer = SubmitTrainer();
  ASSERT_NO_FATAL_FAILURE(RunSteps(trainer));
  const pid_t first_pid = AgentOf(NodeOf(trainer))->TaskPid(trainer);
  Call("POST", "/v1/tasks/" + trainer + "/stop");
  ASSERT_TRUE(Eventually([&] { return Snapshots(trainer).size() == 1; }, seconds(30)));
  EXPECT_EQ(Snapshots(trainer)[0]["trigger"], "stop");
  EXPECT_TRUE(Eventually([&] { return !Alive(first_pid); }, seconds(20)));
  const int reached = LastCheckpoint(trainer);
  ASSERT_GT(reached, 1);
  EXPECT_EQ(Task(trainer)["state"], "stopped");
  const json resumed = Call("POST", "/v1/tasks/" + trainer + "/resume", json::object());
  EXPECT_EQ(resumed["state"], "pending");
  EXPECT_EQ(resumed["resume_from"], Snapshots(trainer)[0]["id"]);
  ASSERT_NO_FATAL_FAILURE(RunSteps(trainer));
  EXPECT_EQ(StartOfRun(trainer, 2), reached);
  ExpectContinues(WorkspaceLog(trainer), reached);
  // A stop with discard takes none, and an unknown snapshot is refused by name.
  Call("POST", "/v1/tasks/" + trainer + "/stop", {{"discard", true}});
  ASSERT_TRUE(WaitState(trainer, "stopped"));
  auto bad = client_->CallJson("POST", "/v1/tasks/" + trainer + "/resume",
                               json({{"snapshot", "s-999"}}).dump());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("snapshot s-999 not found"), std::string::npos)
      << bad.error().message;
  EXPECT_EQ(Snapshots(trainer).size(), 1u);
}

TEST_F(SnapshotE2eTest, ADrainedTaskContinuesOnAnotherNode) {
  const std::string trainer = SubmitTrainer({{"restartable", true}});
  ASSERT_NO_FATAL_FAILURE(RunSteps(trainer));
  const std::string first_node = NodeOf(trainer);
  const pid_t first_pid = AgentOf(first_node)->TaskPid(trainer);
  Call("POST", "/v1/nodes/" + first_node + "/drain");
  ASSERT_TRUE(RunsOnAnotherNode(trainer, first_node)) << Task(trainer).dump(2);
  EXPECT_FALSE(Alive(first_pid));
  ASSERT_EQ(Snapshots(trainer).size(), 1u);
  EXPECT_EQ(Snapshots(trainer)[0]["trigger"], "drain");
  EXPECT_EQ(Snapshots(trainer)[0]["consistency"], "application");
  const std::optional<int> reached = StartOfRun(trainer, 2);
  ASSERT_TRUE(reached.has_value());
  EXPECT_GT(*reached, 1);
  ExpectContinues(WorkspaceLog(trainer), *reached);
}

class SnapshotMovesE2eTest : public SnapshotE2eTest {
 protected:
  void SetUp() override { StartPool({"--moves", "on"}); }
};

TEST_F(SnapshotMovesE2eTest, ATaskMovedToMakeRoomContinuesOnTheOtherNode) {
  const std::string trainer = SubmitTrainer({{"gpu_count", 1}});
  ASSERT_NO_FATAL_FAILURE(RunSteps(trainer));
  const std::string first_node = NodeOf(trainer);
  const pid_t first_pid = AgentOf(first_node)->TaskPid(trainer);
  // One GPU taken on the other node (the trainer's is cordoned meanwhile), by a task of a higher
  // priority than the one to come: it may not move for it.
  Call("POST", "/v1/nodes/" + first_node + "/cordon");
  const std::string filler =
      Call("POST", "/v1/tasks",
           {{"command", {"sleep", "300"}}, {"gpu_count", 1}, {"priority", 5}})["id"];
  ASSERT_TRUE(WaitState(filler, "running")) << Task(filler).dump(2);
  Call("POST", "/v1/nodes/" + first_node + "/uncordon");
  // Two GPUs: one is free on each node and nothing is below its priority to preempt; the
  // trainer moves to the other node's free GPU, the new task takes its node.
  const std::string wide = SubmitSleeper(0);
  ASSERT_TRUE(WaitState(wide, "running")) << Task(wide).dump(2);
  EXPECT_EQ(NodeOf(wide), first_node);
  ASSERT_TRUE(RunsOnAnotherNode(trainer, first_node)) << Task(trainer).dump(2);
  EXPECT_FALSE(Alive(first_pid));
  ASSERT_EQ(Snapshots(trainer).size(), 1u);
  EXPECT_EQ(Snapshots(trainer)[0]["trigger"], "move");
  EXPECT_EQ(Snapshots(trainer)[0]["consistency"], "application");
  const json t = Task(trainer);
  EXPECT_EQ(t["run"], 2);
  EXPECT_EQ(t["preemptions"], 0) << "a move is not a preemption";
  EXPECT_EQ(t["resume_from"], Snapshots(trainer)[0]["id"]);
  const std::optional<int> reached = StartOfRun(trainer, 2);
  ASSERT_TRUE(reached.has_value());
  EXPECT_GT(*reached, 1);
  ExpectContinues(WorkspaceLog(trainer), *reached);
}

TEST_F(SnapshotE2eTest, ACorruptedChunkFailsTheResumeWithItsReason) {
  const std::string trainer = SubmitTrainer();
  ASSERT_NO_FATAL_FAILURE(RunSteps(trainer));
  Call("POST", "/v1/tasks/" + trainer + "/stop");
  ASSERT_TRUE(Eventually([&] { return Snapshots(trainer).size() == 1; }, seconds(30)));
  ASSERT_TRUE(WaitState(trainer, "stopped"));
  // No node has the chunks any more, and the server's copy of each is damaged.
  for (auto& a : pool_->agents()) fs::remove_all(a->data_dir() + "/chunks");
  const std::string manifest = Snapshots(trainer)[0]["manifest"];
  int damaged = 0;
  for (const auto& e : fs::recursive_directory_iterator(pool_->server_dir() + "/chunks")) {
    if (!e.is_regular_file() || e.path().filename() == manifest) continue;
    std::ofstream(e.path(), std::ios::binary | std::ios::trunc) << "bit rot";
    ++damaged;
  }
  ASSERT_GT(damaged, 0);
  Call("POST", "/v1/tasks/" + trainer + "/resume", json::object());
  ASSERT_TRUE(WaitState(trainer, "failed")) << Task(trainer).dump(2);
  const std::string reason = Task(trainer)["reason"];
  EXPECT_NE(reason.find("cannot restore its workspace from snapshot"), std::string::npos) << reason;
  EXPECT_NE(reason.find("corrupt"), std::string::npos) << reason;
  EXPECT_EQ(Stdout(trainer).find("start", Stdout(trainer).find("start") + 1), std::string::npos)
      << "the second run never started";
}

}  // namespace
}  // namespace gpupool
