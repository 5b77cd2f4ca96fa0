// snapshot_bench: snapshots and resumes through a real server and a real agent (simulated GPUs,
// real processes), the figures of docs/benchmarks.md "Snapshots". A task writes a workspace of
// --workspace-mib MiB (64 MiB files of random bytes) and, at every checkpoint request, rewrites
// --change-mib MiB of it before it answers (a training run saving its checkpoint). Measured:
//   - the first snapshot (everything new) and the next ones (only the changed bytes read and
//     sent): frozen time and total, from the snapshots' own records;
//   - what ten snapshots of such a run store, against one snapshot's size, and what a snapshot
//     of an unchanged workspace stores (a task that does not checkpoint);
//   - resume latency: from the resume request to the task's process running with its workspace
//     restored (the agent's start time of the new run), with the chunks cached on the node and
//     with the node's cache emptied first (every chunk fetched from the server over loopback).
//   build/bench/snapshot_bench [--workspace-mib 1024] [--change-mib 10] [--reps 3]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/client.h"
#include "tests/agent_process.h"
#include "tests/server_process.h"

namespace {

namespace fs = std::filesystem;
using gpupool::testing::AgentProcess;
using gpupool::testing::Eventually;
using gpupool::testing::ServerProcess;
using nlohmann::json;

// argv: total MiB, MiB rewritten per checkpoint (0: it never says it checkpoints).
constexpr const char* kTask = R"PY(
import os, signal, sys, time
home, ck = os.environ["HOME"], os.environ["GPUPOOL_CHECKPOINT_DIR"]
total, change = int(sys.argv[1]), int(sys.argv[2])
files = [os.path.join(home, f"shard-{i:03d}.bin") for i in range((total + 63) // 64)]
if not os.path.exists(files[-1]):
    for i, path in enumerate(files):
        with open(path, "wb") as f:
            f.write(os.urandom(min(64, total - 64 * i) << 20))
asked, at = False, 0
def ask(*_):
    global asked
    asked = True
signal.signal(signal.SIGUSR1, ask)
if change > 0:
    open(os.path.join(ck, "ready"), "w").write(str(os.getpid()))
print("written", flush=True)  # and ready to checkpoint
while True:
    time.sleep(0.01)
    if asked:
        asked = False
        left = change << 20
        while left > 0:  # rewrite `change` MiB, 1 MiB at a time, walking through the shards
            path = files[(at >> 26) % len(files)]
            with open(path, "r+b") as f:
                f.seek(at & ((64 << 20) - 1))
                f.write(os.urandom(1 << 20))
            at += 1 << 20
            left -= 1 << 20
        request = open(os.path.join(ck, "request")).read().strip()
        with open(os.path.join(ck, "done.tmp"), "w") as f:
            f.write(request)
        os.rename(os.path.join(ck, "done.tmp"), os.path.join(ck, "done"))
)PY";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Bench {
  gpupool::api::Client& client;
  AgentProcess& agent;

  json Call(const std::string& method, const std::string& path, const json& body = nullptr) {
    auto r = client.CallJson(method, path, body.is_null() ? "" : body.dump());
    if (!r) {
      std::fprintf(stderr, "%s %s: %s\n", method.c_str(), path.c_str(), r.error().message.c_str());
      std::exit(1);
    }
    return *r;
  }
  json Task(const std::string& id) { return Call("GET", "/v1/tasks/" + id); }
  void WaitRunning(const std::string& id, int run) {
    if (!Eventually(
            [&] {
              const json t = Task(id);
              return t["state"] == "running" && t["run"] == run;
            },
            std::chrono::seconds(120))) {
      std::fprintf(stderr, "%s did not run: %s\n", id.c_str(), Task(id).dump().c_str());
      std::exit(1);
    }
  }
  void WaitWritten(const std::string& id) {
    if (!Eventually(
            [&] {
              const json s = Call("GET", "/v1/tasks/" + id + "/logs?stream=stdout");
              return !s.value("data_b64", "").empty();
            },
            std::chrono::seconds(300))) {
      std::fprintf(stderr, "%s did not write its workspace\n", id.c_str());
      std::exit(1);
    }
  }
  std::string Submit(int total_mib, int change_mib) {
    const json t =
        Call("POST", "/v1/tasks",
             {{"command",
               {"python3", "-c", kTask, std::to_string(total_mib), std::to_string(change_mib)}},
              {"gpu_count", 1},
              {"checkpoint_timeout_ms", 120'000}});
    const std::string id = t["id"];
    WaitRunning(id, 1);
    WaitWritten(id);
    return id;
  }
  json Snapshot(const std::string& id) { return Call("POST", "/v1/tasks/" + id + "/snapshots"); }
  // Stops (snapshotted first), then resumes, after `prepare`; the resume latency in ms.
  int64_t StopAndResume(const std::string& id, int next_run, bool empty_cache) {
    Call("POST", "/v1/tasks/" + id + "/stop");
    if (!Eventually(
            [&] {
              return Task(id)["state"] == "stopped" &&
                     Call("GET", "/v1/snapshots?task=" + id)["snapshots"].back()["trigger"] ==
                         "stop";
            },
            std::chrono::seconds(300))) {
      std::fprintf(stderr, "%s: no stop snapshot\n", id.c_str());
      std::exit(1);
    }
    // The stopped run's process and workspace gone from the node (its runner retired).
    Eventually([&] { return !fs::exists(agent.TaskDir(id)); }, std::chrono::seconds(60));
    if (empty_cache) fs::remove_all(agent.data_dir() + "/chunks");
    const int64_t asked = NowMs();
    Call("POST", "/v1/tasks/" + id + "/resume", json::object());
    WaitRunning(id, next_run);
    return Task(id)["started_ms"].get<int64_t>() - asked;
  }
};

}  // namespace

int main(int argc, char** argv) {
  int workspace_mib = 1024;
  int change_mib = 10;
  int reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--workspace-mib")
      workspace_mib = value;
    else if (flag == "--change-mib")
      change_mib = value;
    else if (flag == "--reps")
      reps = value;
    else {
      std::fprintf(stderr,
                   "usage: snapshot_bench [--workspace-mib N] [--change-mib N] [--reps N]\n");
      return 2;
    }
  }
  const std::string server_dir = gpupool::testing::MakeTempDir("snapshot-bench-server");
  const std::string node_dir = gpupool::testing::MakeTempDir("snapshot-bench-node");
  fs::permissions(node_dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  int rc = 0;
  {
    ServerProcess server(server_dir, {"--key-rate", "0"});  // it polls with the agent's key
    const gpupool::testing::Credentials creds = server.ReadCredentials();
    AgentProcess agent(creds, "bench-node", node_dir);
    gpupool::api::Client client(creds.endpoint, creds.access_key, creds.secret_key);
    Bench b{client, agent};

    std::printf("== workspace %d MiB, %d MiB rewritten per checkpoint\n", workspace_mib,
                change_mib);
    const std::string id = b.Submit(workspace_mib, change_mib);
    const json first = b.Snapshot(id);
    std::printf("first snapshot: %.1f MiB new, frozen %lld ms, %lld ms in all\n",
                first["new_bytes"].get<double>() / (1 << 20),
                static_cast<long long>(first["frozen_ms"]),
                static_cast<long long>(first["duration_ms"]));
    int64_t frozen = INT64_MAX, total = INT64_MAX, stored = first["new_bytes"];
    for (int i = 1; i < 10; ++i) {
      const json s = b.Snapshot(id);
      frozen = std::min<int64_t>(frozen, s["frozen_ms"]);
      total = std::min<int64_t>(total, s["duration_ms"]);
      stored += s["new_bytes"].get<int64_t>();
    }
    std::printf("incremental snapshot (best of 9): frozen %lld ms, %lld ms in all\n",
                static_cast<long long>(frozen), static_cast<long long>(total));
    std::printf("10 snapshots store %.2f x one snapshot's size (%.1f of %.1f MiB)\n",
                static_cast<double>(stored) / first["bytes"].get<double>(),
                static_cast<double>(stored) / (1 << 20), first["bytes"].get<double>() / (1 << 20));

    int64_t cached = INT64_MAX, fetched = INT64_MAX;
    int run = 1;
    for (int i = 0; i < reps; ++i) {
      cached = std::min(cached, b.StopAndResume(id, ++run, false));
      fetched = std::min(fetched, b.StopAndResume(id, ++run, true));
    }
    std::printf("resume latency, chunks cached on the node (best of %d): %lld ms\n", reps,
                static_cast<long long>(cached));
    std::printf("resume latency, every chunk fetched from the server (best of %d): %lld ms\n", reps,
                static_cast<long long>(fetched));
    b.Call("POST", "/v1/tasks/" + id + "/stop", {{"discard", true}});

    const std::string still = b.Submit(64, 0);
    b.Snapshot(still);
    const json again = b.Snapshot(still);
    std::printf("snapshot of an unchanged workspace: %lld new bytes\n",
                static_cast<long long>(again["new_bytes"]));
    b.Call("POST", "/v1/tasks/" + still + "/stop", {{"discard", true}});
    agent.Terminate();
    agent.KillLeftoverTasks();
    rc = server.Terminate() == 0 ? 0 : 1;
  }
  std::error_code ec;
  fs::remove_all(server_dir, ec);
  fs::remove_all(node_dir, ec);
  return rc;
}
