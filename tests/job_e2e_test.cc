// End to end: distributed jobs on a real server and three real agents (simulated GPUs, real
// processes). A 3-member job runs a small distributed program in pure Python — every member
// connects to MASTER_ADDR:MASTER_PORT, rank 0 gathers every rank's number over TCP and sends the
// sum back, every member checks it and its own RANK, WORLD_SIZE and LOCAL_RANK — and succeeds;
// a member's failure stops the others and is the job's exit code; a killed agent's member is
// lost and the restartable job is queued again whole, then runs again once the node is back.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
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

// Each member: checks its rendezvous variables, meets the others at MASTER_ADDR:MASTER_PORT
// (rank 0 listens, the others connect, retrying until it does), rank 0 adds every rank's number
// ((rank + 1) * 10) and sends the sum to all, each checks it and prints it, and once every
// member has printed (each tells rank 0, which tells all to go on) argv[1] says what to do:
// "exit" ends with 0, except rank argv[2] which exits with 7; "sleep" sleeps.
constexpr const char* kProgram = R"PY(
import os, socket, sys, time
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
assert os.environ["LOCAL_RANK"] == "0" and os.environ["LOCAL_WORLD_SIZE"] == "1"
assert os.environ["NODE_RANK"] == str(rank) == os.environ["GPUPOOL_MEMBER_INDEX"]
assert os.environ["PET_NNODES"] == str(world) and os.environ["GPUPOOL_JOB_ID"].startswith("j-")
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
hosts = os.environ["GPUPOOL_MEMBER_HOSTS"].split(",")
assert len(hosts) == world and hosts[0] == addr, hosts
number = (rank + 1) * 10
want = sum((r + 1) * 10 for r in range(world))
def say(total):
    assert total == want, (total, want)
    print(f"rank {rank} of {world}: sum {total}", flush=True)
if rank == 0:
    server = socket.create_server((addr, port))
    peers, total = [], number
    while len(peers) < world - 1:
        conn, _ = server.accept()
        f = conn.makefile("rw")
        total += int(f.readline())
        peers.append(f)
    say(total)
    for f in peers:
        f.write(f"{total}\n")
        f.flush()
    for f in peers:  # every member has said its line: all may go on
        assert f.readline() == "said\n"
    for f in peers:
        f.write("go\n")
        f.flush()
else:
    deadline = time.time() + 60
    while True:
        try:
            conn = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)
    f = conn.makefile("rw")
    f.write(f"{number}\n")
    f.flush()
    say(int(f.readline()))
    f.write("said\n")
    f.flush()
    assert f.readline() == "go\n"
if sys.argv[1] == "sleep":
    time.sleep(300)
sys.exit(7 if sys.argv[2] == str(rank) else 0)
)PY";

class JobE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pool_ = std::make_unique<testing::PoolProcesses>(
        "job-e2e", 3, std::vector<std::string>{"--node-timeout", "3"},
        std::vector<std::string>{"--advertise-addr", "127.0.0.1"});
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
  json SubmitJob(const std::string& mode, int failing_rank, bool restartable) {
    return Call("POST", "/v1/jobs",
                {{"command", {"python3", "-c", kProgram, mode, std::to_string(failing_rank)}},
                 {"gpu_count", 1},
                 {"nodes", 3},
                 {"restartable", restartable}});
  }
  json Job(const std::string& id) { return Call("GET", "/v1/jobs/" + id); }
  bool WaitJob(const std::string& id, const std::string& state) {
    return Eventually([&] { return Job(id).value("state", "") == state; }, seconds(30));
  }
  std::string Stdout(const std::string& task) {
    const json slice = Call("GET", "/v1/tasks/" + task + "/logs?stream=stdout");
    return Base64Decode(slice.value("data_b64", "")).value_or("");
  }
  // Whether the task's stdout becomes `want` (its output reaches the server about a second
  // after it is written).
  bool StdoutBecomes(const std::string& task, const std::string& want) {
    return Eventually([&] { return Stdout(task) == want; }, seconds(10));
  }
  AgentProcess* AgentOf(const std::string& node) { return pool_->AgentOf(node); }

  std::unique_ptr<testing::PoolProcesses> pool_;
  std::unique_ptr<api::Client> client_;
};

TEST_F(JobE2eTest, MembersMeetAtTheirRendezvousAndTheJobSucceeds) {
  const json submitted = SubmitJob("exit", -1, false);
  const std::string id = submitted["id"];
  ASSERT_EQ(submitted["members"].size(), 3u);
  ASSERT_TRUE(WaitJob(id, "succeeded")) << Job(id).dump(2);
  const json job = Job(id);
  std::set<std::string> nodes;
  for (const json& m : job["members"]) {
    nodes.insert(m["node"].get<std::string>());
    EXPECT_EQ(m["address"], "127.0.0.1");
    const int rank = m["index"];
    EXPECT_TRUE(StdoutBecomes(m["task"], "rank " + std::to_string(rank) + " of 3: sum 60\n"))
        << Stdout(m["task"]);
  }
  EXPECT_EQ(nodes.size(), 3u) << "one member per node";
}

TEST_F(JobE2eTest, AFailingMemberStopsTheOthersAndItsExitCodeIsTheJobs) {
  // Rank 2 exits with 7 after the rendezvous; ranks 0 and 1 sleep there.
  const json job = Call("POST", "/v1/jobs",
                        {{"command",
                          {"/bin/sh", "-c",
                           "if [ \"$RANK\" = 2 ]; then exec python3 -c \"$0\" exit 2; "
                           "else exec python3 -c \"$0\" sleep -1; fi",
                           kProgram}},
                         {"gpu_count", 1},
                         {"nodes", 3}});
  const std::string job_id = job["id"];
  ASSERT_TRUE(WaitJob(job_id, "failed")) << Job(job_id).dump(2);
  const json ended = Job(job_id);
  const std::string failed = ended["members"][2]["task"];
  EXPECT_EQ(ended["exit_code"], 7);
  EXPECT_EQ(ended["first_failed"], failed);
  for (int rank : {0, 1}) {
    const json& m = ended["members"][rank];
    EXPECT_EQ(m["state"], "stopped") << m.dump();
    EXPECT_EQ(m["ended_by"], failed);
    EXPECT_TRUE(StdoutBecomes(m["task"], "rank " + std::to_string(rank) + " of 3: sum 60\n"))
        << Stdout(m["task"]);
  }
  // The stopped members' processes are gone from their nodes.
  for (int rank : {0, 1}) {
    const json& m = ended["members"][rank];
    AgentProcess* a = AgentOf(m["node"]);
    ASSERT_NE(a, nullptr);
    const std::string task = m["task"];
    EXPECT_TRUE(Eventually([&] { return !Alive(a->TaskPid(task)); }, seconds(20))) << task;
  }
}

TEST_F(JobE2eTest, AKilledAgentRequeuesTheRestartableJobWhole) {
  const std::string id = SubmitJob("sleep", -1, true)["id"];
  ASSERT_TRUE(WaitJob(id, "running")) << Job(id).dump(2);
  json job = Job(id);
  // Every member past the rendezvous, sleeping.
  for (const json& m : job["members"]) {
    const std::string task = m["task"];
    ASSERT_TRUE(
        Eventually([&] { return Stdout(task).find("sum 60") != std::string::npos; }, seconds(30)))
        << task;
  }
  AgentProcess* dead = AgentOf(job["members"][1]["node"]);
  ASSERT_NE(dead, nullptr);
  std::map<std::string, pid_t> survivors;  // task → pid on a live node
  for (const json& m : job["members"]) {
    AgentProcess* a = AgentOf(m["node"]);
    if (a != dead) survivors[m["task"]] = a->TaskPid(m["task"]);
  }
  dead->Kill();
  // --node-timeout 3: the node is lost, its member with it, and the job queued again whole; two
  // nodes cannot hold three members one per node, so it waits.
  ASSERT_TRUE(Eventually(
      [&] {
        job = Job(id);
        for (const json& m : job["members"]) {
          if (m["state"] != "pending") return false;
        }
        return true;
      },
      seconds(20)))
      << job.dump(2);
  EXPECT_EQ(job["state"], "pending");
  EXPECT_EQ(job["members"][0]["ended_by"], job["members"][1]["task"]);
  const json member0 = Call("GET", "/v1/tasks/" + job["members"][0]["task"].get<std::string>());
  EXPECT_NE(member0["reason"].get<std::string>().find("re-queued with job " + id),
            std::string::npos)
      << member0.dump();
  // Two nodes cannot hold three members one per node: the job says so while it waits.
  EXPECT_TRUE(Eventually(
      [&] {
        job = Job(id);
        return job["reason"].get<std::string>().find("node(s) that fit hold 1 member(s) already") !=
               std::string::npos;
      },
      seconds(10)))
      << job.dump(2);
  for (const auto& [task, pid] : survivors) {
    EXPECT_TRUE(Eventually([&, pid = pid] { return !Alive(pid); }, seconds(20)))
        << task << "'s old run still runs";
  }
  // The node comes back: the whole job runs again, its members meeting once more.
  dead->Start();
  ASSERT_TRUE(WaitJob(id, "running")) << Job(id).dump(2);
  job = Job(id);
  for (const json& m : job["members"]) EXPECT_TRUE(m["ended_by"].get<std::string>().empty());
}

}  // namespace
}  // namespace gpupool
