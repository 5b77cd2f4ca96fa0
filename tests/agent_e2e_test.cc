// End to end: a real server and two real agents (simulated GPUs) over the REST API: success and
// failure, max runtime, a shared GPU's limits, a killed agent's task gone (killed by its supervisor
// when the lease ran out) before it runs on the other node, a
// restarted agent adopting its task, a task's end reported once a network outage is over, and a
// task's files: inputs uploaded (resumed) before it starts, outputs downloaded after it ends; a
// node that joins with a join token and is cut off when the token is revoked; telemetry: logs
// followed live, usage and reported metrics arriving, a stop condition firing on a metric.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/client.h"
#include "api/file_transfer.h"
#include "core/base64.h"
#include "proto/files.h"
#include "tests/agent_process.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::AgentProcess;
using testing::Alive;
using testing::Credentials;
using testing::Eventually;
using testing::ReadJsonFile;
using testing::ServerProcess;

int64_t NowMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A TCP proxy on loopback between the agents and the server, to cut the network: while down it
// closes every connection and refuses new ones (accepts and closes them at once).
class Proxy {
 public:
  explicit Proxy(int target_port) : target_port_(target_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listen_fd_, 64) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        pipe2(wake_, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "proxy setup: " << std::strerror(errno);
      return;
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~Proxy() {
    {
      std::lock_guard lock(mu_);
      quit_ = true;
    }
    Wake();
    if (thread_.joinable()) thread_.join();
    for (auto& [a, b] : pairs_) {
      close(a);
      close(b);
    }
    close(listen_fd_);
    close(wake_[0]);
    close(wake_[1]);
  }

  int port() const { return port_; }
  void SetDown(bool down) {
    {
      std::lock_guard lock(mu_);
      down_ = down;
    }
    Wake();
  }

 private:
  void Wake() {
    ssize_t ignored = write(wake_[1], "x", 1);
    (void)ignored;
  }
  int Connect() {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(target_port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  }
  // Copies what `from` has to `to`; false on EOF or error.
  static bool Pump(int from, int to) {
    char buf[65536];
    const ssize_t n = read(from, buf, sizeof buf);
    if (n <= 0) return false;
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = send(to, buf + done, static_cast<size_t>(n - done), MSG_NOSIGNAL);
      if (w <= 0) return false;
      done += w;
    }
    return true;
  }
  void Run() {
    for (;;) {
      bool down;
      {
        std::lock_guard lock(mu_);
        if (quit_) return;
        down = down_;
      }
      if (down) {
        for (auto& [a, b] : pairs_) {
          close(a);
          close(b);
        }
        pairs_.clear();
      }
      const size_t watched = pairs_.size();  // pairs accepted below are polled next round
      std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      for (const auto& [a, b] : pairs_) {
        fds.push_back({a, POLLIN, 0});
        fds.push_back({b, POLLIN, 0});
      }
      if (poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents) {
        char buf[64];
        ssize_t ignored = read(wake_[0], buf, sizeof buf);
        (void)ignored;
      }
      if (fds[1].revents) {
        const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        const int server = client >= 0 && !down ? Connect() : -1;
        if (server >= 0) {
          pairs_.emplace_back(client, server);
        } else if (client >= 0) {
          close(client);
        }
      }
      std::vector<std::pair<int, int>> keep;
      for (size_t i = 0; i < pairs_.size(); ++i) {
        const auto [a, b] = pairs_[i];
        bool ok = true;
        if (i < watched && fds[2 + 2 * i].revents) ok = Pump(a, b);
        if (ok && i < watched && fds[3 + 2 * i].revents) ok = Pump(b, a);
        if (ok) {
          keep.emplace_back(a, b);
        } else {
          close(a);
          close(b);
        }
      }
      pairs_ = std::move(keep);
    }
  }

  const int target_port_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  std::mutex mu_;
  bool down_ = false;
  bool quit_ = false;
  std::vector<std::pair<int, int>> pairs_;  // (agent side, server side); the proxy thread's
  std::thread thread_;
};

class AgentE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_dir_ = testing::MakeTempDir("agent-e2e-server");
    server_ = std::make_unique<ServerProcess>(
        server_dir_, std::vector<std::string>{"--meter-interval", "1", "--node-timeout", "3"});
    creds_ = server_->ReadCredentials();
    client_ = std::make_unique<api::Client>(creds_.endpoint, creds_.access_key, creds_.secret_key);
    // The agents reach the server through a proxy the test can cut.
    proxy_ =
        std::make_unique<Proxy>(std::stoi(creds_.endpoint.substr(creds_.endpoint.rfind(':') + 1)));
    Credentials via_proxy = creds_;
    via_proxy.endpoint = "http://127.0.0.1:" + std::to_string(proxy_->port());
    // Node names unique per test process: agents of tests run in parallel share the machine.
    const std::string suffix = std::to_string(getpid());
    for (int i = 0; i < 2; ++i) {
      std::string dir = testing::MakeTempDir("agent-e2e-node");
      chmod(dir.c_str(), 0711);  // tasks run under their own uids and must reach their dirs
      agents_.push_back(std::make_unique<AgentProcess>(
          via_proxy, "n" + std::to_string(i + 1) + "-" + suffix, dir));
      if (HasFatalFailure()) return;
    }
  }

  void TearDown() override {
    for (auto& a : agents_) {
      if (a == nullptr) continue;
      a->Terminate();
      a->KillLeftoverTasks();
    }
    server_->Terminate();
    std::error_code ec;
    for (auto& a : agents_) {
      if (a != nullptr) fs::remove_all(a->data_dir(), ec);
    }
    fs::remove_all(server_dir_, ec);
  }

  json Call(const std::string& method, const std::string& path, const json& body = nullptr) {
    auto r = client_->CallJson(method, path, body.is_null() ? "" : body.dump());
    EXPECT_TRUE(r) << method << " " << path << ": " << (r ? "" : r.error().message);
    return r ? *r : json();
  }
  std::string Submit(json body) { return Call("POST", "/v1/tasks", body)["id"]; }
  json Task(const std::string& id) { return Call("GET", "/v1/tasks/" + id); }
  std::string State(const std::string& id) { return Task(id).value("state", ""); }
  json Events(const std::string& id) {
    return Call("GET", "/v1/tasks/" + id + "/events")["events"];
  }
  bool WaitState(const std::string& id, const std::string& state,
                 milliseconds timeout = seconds(10)) {
    return Eventually([&] { return State(id) == state; }, timeout);
  }
  AgentProcess* AgentOf(const json& task) {
    const std::string node = task["placement"]["node"];
    for (auto& a : agents_) {
      if (a->name() == node) return a.get();
    }
    ADD_FAILURE() << "no agent runs node " << node;
    return nullptr;
  }
  AgentProcess* Other(const AgentProcess* a) {
    return agents_[0].get() == a ? agents_[1].get() : agents_[0].get();
  }

  std::string server_dir_;
  std::unique_ptr<ServerProcess> server_;
  Credentials creds_;
  std::unique_ptr<api::Client> client_;
  std::unique_ptr<Proxy> proxy_;
  std::vector<std::unique_ptr<AgentProcess>> agents_;
};

// disk_gib is scheduled (each node offers 20 GiB: --disk-gib) and enforced: a task whose
// workspace outgrows it is stopped saying so.
TEST_F(AgentE2eTest, DiskIsReservedAndATaskOutgrowingItIsStopped) {
  const std::string big = Submit({{"command", {"/bin/sh", "-c", "exit 0"}}, {"disk_gib", 21}});
  const std::string held = Submit({{"command", {"/bin/sh", "-c", "sleep 60"}}, {"disk_gib", 15}});
  const std::string grows =
      Submit({{"command", {"/bin/sh", "-c", "fallocate -l 1100M big && echo grown && sleep 60"}},
              {"disk_gib", 1}});
  ASSERT_TRUE(WaitState(held, "running")) << Task(held).dump();
  ASSERT_TRUE(WaitState(grows, "stopped")) << Task(grows).dump();
  const std::string reason = Task(grows)["reason"];
  EXPECT_EQ(reason.rfind("disk limit of 1 GB exceeded (the workspace holds 1.1 GiB)", 0), 0u)
      << reason;
  EXPECT_TRUE(Eventually([&] {
    return Task(big)["pending_reason"] == "no node fits: 2 nodes: less than 21 GiB disk free";
  })) << Task(big).dump();
  // What the running task reserves is not free for another on its node.
  const json node = Call("GET", "/v1/nodes/" + Task(held)["placement"]["node"].get<std::string>());
  EXPECT_EQ(node["disk_gib"], 20);
  EXPECT_EQ(node["disk_free_gib"], 5) << node.dump();
}

TEST_F(AgentE2eTest, TasksRunToSuccessOrFailure) {
  const std::string ok =
      Submit({{"command", {"/bin/sh", "-c", "echo hello; exit 0"}}, {"gpu_count", 1}});
  const std::string bad = Submit({{"command", {"/bin/sh", "-c", "exit 3"}}});
  const std::string image = Submit({{"image", "ubuntu:24.04"}});
  ASSERT_TRUE(WaitState(ok, "succeeded")) << Task(ok).dump();
  ASSERT_TRUE(WaitState(bad, "failed")) << Task(bad).dump();

  // submitted (pending) → scheduled → running → succeeded, at non-decreasing times.
  const json events = Events(ok);
  std::vector<std::string> to;
  std::map<std::string, int64_t> at;
  for (const json& e : events) {
    to.push_back(e["to"]);
    at[e["to"]] = e["time_ms"];
  }
  ASSERT_GE(to.size(), 3u) << events.dump();
  EXPECT_EQ(std::vector<std::string>(to.end() - 3, to.end()),
            (std::vector<std::string>{"scheduled", "running", "succeeded"}))
      << events.dump();
  EXPECT_GE(at["running"], at["scheduled"]);
  EXPECT_GE(at["succeeded"], at["running"]);

  const json failed = Task(bad);
  EXPECT_EQ(failed["exit_code"], 3);
  EXPECT_NE(failed["reason"].get<std::string>().find("exited with code 3"), std::string::npos)
      << failed.dump();
  // No node's docker works: the image task waits, saying so, and the nodes say why.
  EXPECT_TRUE(Eventually([&] {
    return Task(image)["pending_reason"] == "no node fits: 2 nodes: no docker runtime";
  })) << Task(image).dump();
  EXPECT_EQ(State(image), "pending");
  // Named: a range-for over a member of a temporary reads it after its end (AddressSanitizer).
  const json nodes = Call("GET", "/v1/nodes");
  for (const json& node : nodes["nodes"]) {
    EXPECT_EQ(node["docker"], false) << node.dump();
    const std::string note = node["runtime_note"];
    EXPECT_EQ(note.rfind("docker runtime unavailable: docker at ", 0), 0u) << note;
    EXPECT_NE(note.find("/no-docker.sock"), std::string::npos) << note;
  }

  // Once the end is reported, the node forgets the task.
  AgentProcess* agent = AgentOf(Task(ok));
  ASSERT_NE(agent, nullptr);
  EXPECT_TRUE(Eventually([&] { return !fs::exists(agent->TaskDir(ok)); }));
}

TEST_F(AgentE2eTest, MaxRuntimeStopsTheProcessOnTheNode) {
  const std::string id =
      Submit({{"command", {"sleep", "300"}}, {"max_runtime_ms", 1500}, {"gpu_count", 1}});
  ASSERT_TRUE(WaitState(id, "running"));
  AgentProcess* agent = AgentOf(Task(id));
  ASSERT_NE(agent, nullptr);
  const pid_t pid = agent->TaskPid(id);
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(Alive(pid));
  ASSERT_TRUE(WaitState(id, "stopped")) << Task(id).dump();
  EXPECT_TRUE(Eventually([&] { return !Alive(pid); })) << "pid " << pid << " still runs";
  EXPECT_TRUE(Eventually([&] { return !fs::exists(agent->TaskDir(id)); }));
  EXPECT_EQ(State(id), "stopped");  // the agent did not report the stop it carried out
}

TEST_F(AgentE2eTest, ASharedGpuTaskSeesItsShare) {
  const std::string id = Submit(
      {{"command", {"/bin/sh", "-c", "env > env.tmp && mv env.tmp env.txt && exec sleep 300"}},
       {"gpu_milli", 500},
       {"gpu_mem_mib", 1024}});
  ASSERT_TRUE(WaitState(id, "running"));
  const json task = Task(id);
  AgentProcess* agent = AgentOf(task);
  ASSERT_NE(agent, nullptr);
  const std::string file = agent->TaskDir(id) + "/workspace/env.txt";
  ASSERT_TRUE(Eventually([&] { return fs::exists(file); })) << file;
  std::map<std::string, std::string> env;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  const int gpu = task["placement"]["gpus"][0];
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "GPU-sim-" + agent->name() + "-" + std::to_string(gpu));
  EXPECT_EQ(env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "50");
  EXPECT_EQ(env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=1024M");
  EXPECT_EQ(env["GPUPOOL_TASK_ID"], id);

  const pid_t pid = agent->TaskPid(id);
  Call("POST", "/v1/tasks/" + id + "/stop");
  EXPECT_EQ(State(id), "stopped");
  EXPECT_TRUE(Eventually([&] { return !Alive(pid); })) << "pid " << pid << " still runs";
}

// A task never runs twice: after a kill -9 of its agent, the task's processes (its first one and
// a child) are gone before its re-queued run starts on the other node.
TEST_F(AgentE2eTest, AKilledAgentsTaskIsGoneBeforeItRunsOnTheOtherNode) {
  const std::string id =
      Submit({{"command", {"/bin/sh", "-c", "sleep 300 & echo $! > child; wait"}},
              {"gpu_count", 1},
              {"restartable", true}});
  ASSERT_TRUE(WaitState(id, "running"));
  AgentProcess* dead = AgentOf(Task(id));
  ASSERT_NE(dead, nullptr);
  AgentProcess* alive = Other(dead);
  // --node-timeout 3 with heartbeats every 500 ms: a lease of 1.5 s.
  ASSERT_TRUE(dead->WaitForOutput("tasks' lease: 1500 ms")) << dead->Output();
  const pid_t orphan = dead->TaskPid(id);
  ASSERT_GT(orphan, 0);
  pid_t child = 0;
  ASSERT_TRUE(Eventually([&] {
    std::ifstream in(dead->TaskDir(id) + "/workspace/child");
    return static_cast<bool>(in >> child) && child > 0;
  }));
  ASSERT_TRUE(Alive(orphan));
  ASSERT_TRUE(Alive(child));
  dead->Kill();

  // Other processes' ends can only be polled: note when both were seen gone.
  ASSERT_TRUE(Eventually([&] { return !Alive(orphan) && !Alive(child); }, seconds(10)))
      << "the old run survived its agent: pids " << orphan << ", " << child;
  const int64_t gone_ms = NowMs();
  EXPECT_EQ(State(id), "running");  // the server has not given up on the node yet

  // --node-timeout 3: lost within ~4 s, re-queued, placed on the other node and running there.
  ASSERT_TRUE(Eventually(
      [&] {
        const json t = Task(id);
        return t["state"] == "running" && t["placement"]["node"] == alive->name();
      },
      seconds(12)))
      << Task(id).dump();
  bool lost = false;
  for (const json& e : Events(id)) lost = lost || e["to"] == "lost";
  EXPECT_TRUE(lost) << Events(id).dump();
  const int64_t restarted_ms = Task(id)["started_ms"];  // the new run's true start, on `alive`
  EXPECT_LT(gone_ms, restarted_ms);
  EXPECT_TRUE(Alive(alive->TaskPid(id)));

  // The killed agent comes back: its supervisor recorded why the task ended, and the server,
  // which moved the task, keeps it running where it is.
  dead->Start();
  EXPECT_TRUE(dead->WaitForOutput(id + " ended while the agent was away: lost: the server had "
                                       "not heard from its node (or its agent was away) for "
                                       "longer than its lease"))
      << dead->Output();
  ASSERT_TRUE(dead->WaitForOutput("in sync with the server"));
  const json t = Task(id);
  EXPECT_EQ(t["state"], "running");
  EXPECT_EQ(t["placement"]["node"], alive->name());
}

// The same promise through a network cut (issue 11 finding 9): the agent lives on and renews its
// tasks' leases, but a restartable task's lease runs from the last heartbeat the server
// acknowledged, so it is gone before the server declares its node lost and runs it again; a task
// that is not restartable (the server will not run it again) keeps running through the cut.
TEST_F(AgentE2eTest, ANetworkCutEndsARestartableTaskBeforeTheServerRunsItAgain) {
  const std::string fenced = Submit({{"command", {"sleep", "300"}}, {"restartable", true}});
  const std::string plain = Submit({{"command", {"sleep", "300"}}});
  ASSERT_TRUE(WaitState(fenced, "running"));
  ASSERT_TRUE(WaitState(plain, "running"));
  AgentProcess* fenced_agent = AgentOf(Task(fenced));
  AgentProcess* plain_agent = AgentOf(Task(plain));
  ASSERT_NE(fenced_agent, nullptr);
  ASSERT_NE(plain_agent, nullptr);
  // --node-timeout 3 with heartbeats every 500 ms: a lease of 1.5 s.
  ASSERT_TRUE(fenced_agent->WaitForOutput("tasks' lease: 1500 ms")) << fenced_agent->Output();
  const pid_t fenced_pid = fenced_agent->TaskPid(fenced);
  const pid_t plain_pid = plain_agent->TaskPid(plain);
  ASSERT_GT(fenced_pid, 0);
  ASSERT_GT(plain_pid, 0);

  proxy_->SetDown(true);  // every agent is cut off from the server; the test still reaches it
  ASSERT_TRUE(Eventually([&] { return !Alive(fenced_pid); }, seconds(10)))
      << "the restartable task outlived its lease through the cut: pid " << fenced_pid;
  const int64_t gone_ms = NowMs();
  EXPECT_EQ(State(fenced), "running") << "gone before the server gave up on its node";
  // The server declares the nodes lost (3 s without a heartbeat): long past the lease, so a
  // fenced plain task would be dead by now.
  ASSERT_TRUE(WaitState(plain, "lost")) << Task(plain).dump();
  EXPECT_TRUE(Alive(plain_pid)) << "a task the server will not run again keeps running";

  // Reachable again: the restartable task runs again, its new run after the old one was gone.
  proxy_->SetDown(false);
  ASSERT_TRUE(WaitState(fenced, "running", seconds(15))) << Task(fenced).dump();
  const int64_t restarted_ms = Task(fenced)["started_ms"];
  EXPECT_LT(gone_ms, restarted_ms);
  bool lost = false;
  for (const json& e : Events(fenced)) lost = lost || e["to"] == "lost";
  EXPECT_TRUE(lost) << Events(fenced).dump();
}

TEST_F(AgentE2eTest, ARestartedAgentAdoptsItsRunningTask) {
  const std::string id = Submit({{"command", {"sleep", "300"}}, {"gpu_count", 1}});
  ASSERT_TRUE(WaitState(id, "running"));
  AgentProcess* agent = AgentOf(Task(id));
  ASSERT_NE(agent, nullptr);
  const pid_t pid = agent->TaskPid(id);
  ASSERT_GT(pid, 0);
  const int64_t started = Task(id)["started_ms"];

  EXPECT_EQ(agent->Terminate(), 0);
  EXPECT_TRUE(Alive(pid));  // stopping the agent leaves its tasks running
  agent->Start();
  ASSERT_TRUE(agent->WaitForOutput("adopted " + id + " pid " + std::to_string(pid)));
  ASSERT_TRUE(agent->WaitForOutput("in sync with the server"));
  EXPECT_EQ(agent->Output().find("launched " + id), std::string::npos) << agent->Output();

  EXPECT_TRUE(Alive(pid));
  EXPECT_EQ(agent->TaskPid(id), pid);
  const json t = Task(id);
  EXPECT_EQ(t["state"], "running");
  EXPECT_EQ(t["started_ms"], started);
  int runs = 0;
  for (const json& e : Events(id)) runs += e["to"] == "running" ? 1 : 0;
  EXPECT_EQ(runs, 1) << Events(id).dump();

  // The new agent watches the adopted process: a stop ends it.
  Call("POST", "/v1/tasks/" + id + "/stop");
  EXPECT_TRUE(Eventually([&] { return !Alive(pid); })) << "pid " << pid << " still runs";
}

// A task that ends after its agent restarted keeps its true exit status (issue 12 §3: it was
// marked failed, exit -1, "status unknown: the task was adopted"): the per-task supervisor, which
// outlives the agent, records it for the new agent.
TEST_F(AgentE2eTest, AnAdoptedTaskEndsWithItsTrueExitStatus) {
  const std::string gate = "while [ ! -e go ]; do sleep 0.05; done; rm -f go; exit ";
  const std::string ok = Submit({{"command", {"/bin/sh", "-c", gate + "0"}}});
  const std::string bad = Submit({{"command", {"/bin/sh", "-c", gate + "5"}}});
  ASSERT_TRUE(WaitState(ok, "running"));
  ASSERT_TRUE(WaitState(bad, "running"));
  for (const std::string& id : {ok, bad}) {
    AgentProcess* agent = AgentOf(Task(id));
    ASSERT_NE(agent, nullptr);
    EXPECT_EQ(agent->Terminate(), 0);
    agent->Start();
    ASSERT_TRUE(agent->WaitForOutput("adopted " + id)) << agent->Output();
    std::ofstream(agent->TaskDir(id) + "/workspace/go").put('\n');
  }
  ASSERT_TRUE(WaitState(ok, "succeeded")) << Task(ok).dump();
  EXPECT_EQ(Task(ok)["exit_code"], 0);
  EXPECT_EQ(Task(ok)["reason"], "exited with code 0") << Task(ok).dump();
  ASSERT_TRUE(WaitState(bad, "failed")) << Task(bad).dump();
  EXPECT_EQ(Task(bad)["exit_code"], 5);
  EXPECT_EQ(Task(bad)["reason"], "exited with code 5") << Task(bad).dump();
}

TEST_F(AgentE2eTest, AnEndIsReportedOnceTheServerIsReachableAgain) {
  const std::string id =
      Submit({{"command", {"/bin/sh", "-c", "while [ ! -e go ]; do sleep 0.05; done; exit 0"}}});
  ASSERT_TRUE(WaitState(id, "running"));
  AgentProcess* agent = AgentOf(Task(id));
  ASSERT_NE(agent, nullptr);

  // The task ends while its agent cannot reach the server: the report waits, it is not lost.
  proxy_->SetDown(true);
  std::ofstream(agent->TaskDir(id) + "/workspace/go").put('\n');
  ASSERT_TRUE(agent->WaitForOutput(id + " ended: exited with code 0 → succeeded"))
      << agent->Output();
  const int64_t reconnected_ms = NowMs();
  EXPECT_EQ(State(id), "running");
  EXPECT_TRUE(fs::exists(agent->TaskDir(id)));  // kept until the report is delivered
  proxy_->SetDown(false);

  ASSERT_TRUE(WaitState(id, "succeeded")) << Task(id).dump();
  int64_t succeeded_ms = 0;
  for (const json& e : Events(id)) {
    if (e["to"] == "succeeded") succeeded_ms = e["time_ms"];
  }
  EXPECT_GT(succeeded_ms, 0);
  EXPECT_LE(succeeded_ms, reconnected_ms);  // the true end, not when the report arrived
  EXPECT_TRUE(Eventually([&] { return !fs::exists(agent->TaskDir(id)); }));
}

// ---- task files ----

// A file under a temp dir holding `data`, open for reading.
class TempFile {
 public:
  explicit TempFile(const std::string& data) : dir_(testing::MakeTempDir("e2e-file")) {
    std::ofstream(dir_ + "/f", std::ios::binary) << data;
    fd_ = open((dir_ + "/f").c_str(), O_RDONLY | O_CLOEXEC);
  }
  ~TempFile() {
    close(fd_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  int fd() const { return fd_; }

 private:
  std::string dir_;
  int fd_ = -1;
};

std::string RandomBytes(size_t n) {
  std::string s(n, '\0');
  uint32_t x = 2463534242u;
  for (char& c : s) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x & 0xFF);
  }
  return s;
}

TEST_F(AgentE2eTest, FilesRoundTripByteExactlyAndPathEscapesAreRefused) {
  // Cordoned nodes keep the task pending while its inputs are uploaded.
  for (auto& a : agents_) Call("POST", "/v1/nodes/" + a->name() + "/cordon");
  const std::string script =
      "set -e\n"
      "test \"$(cat dir/a.txt)\" = alpha\n"
      "test \"$(cat dir/sub/b.txt)\" = beta\n"
      "mkdir out\n"
      "cat big.bin big.bin > out/double.bin\n"
      "echo result > out/result.txt\n"
      "ln -s /etc/passwd out/passwd-link\n"
      "echo changed > dir/a.txt\n";
  const std::string id = Submit({{"command", {"/bin/sh", "-c", script}}});
  ASSERT_EQ(State(id), "pending");

  // An input larger than one chunk, its upload interrupted after the first chunk: the rest
  // continues from the server's offset.
  const std::string big = RandomBytes(proto::kFileChunkBytes + 12'345);
  auto first = client_->Call("PUT", "/v1/tasks/" + id + "/uploads?path=big.bin&offset=0",
                             big.substr(0, proto::kFileChunkBytes));
  ASSERT_TRUE(first && first->status == 200) << (first ? first->body : first.error().message);
  TempFile big_file(big);
  auto uploaded = api::UploadTaskFile(*client_, id, "big.bin", big_file.fd());
  ASSERT_TRUE(uploaded) << uploaded.error().message;
  EXPECT_EQ(uploaded->resumed_from, proto::kFileChunkBytes);
  for (const auto& [path, text] : {std::pair{"dir/a.txt", "alpha"}, {"dir/sub/b.txt", "beta"}}) {
    TempFile f(text);
    ASSERT_TRUE(api::UploadTaskFile(*client_, id, path, f.fd())) << path;
  }

  // The workspace is the task's /root: a path below it names the same files.
  auto listed = client_->Call("GET", "/v1/tasks/" + id + "/files?path=%2Froot%2Fdir%2F");
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->status, 200) << listed->body;
  EXPECT_NE(listed->body.find("\"dir/sub/b.txt\""), std::string::npos) << listed->body;

  // Paths that would leave the workspace are refused, naming the path and the rule.
  const std::vector<std::pair<std::string, std::string>> escapes = {
      {"PUT /v1/tasks/" + id + "/uploads?path=..%2Fevil&offset=0",
       "'../evil' has a '..' component"},
      {"PUT /v1/tasks/" + id + "/uploads?path=%2Fetc%2Fcron.d%2Fx&offset=0",
       "'/etc/cron.d/x' is outside the task's workspace /root"},
      {"GET /v1/tasks/" + id + "/files/content?path=dir%2F..%2F..%2F..%2Fetc%2Fpasswd",
       "'dir/../../../etc/passwd' has a '..' component"},
  };
  for (const auto& [request, message] : escapes) {
    const std::string method = request.substr(0, request.find(' '));
    auto r = client_->Call(method, request.substr(method.size() + 1), method == "PUT" ? "x" : "");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << request << ": " << r->body;
    EXPECT_NE(r->body.find(message), std::string::npos) << request << ": " << r->body;
  }
  auto commit = client_->CallJson(
      "POST", "/v1/tasks/" + id + "/uploads/commit",
      json{{"path", "../../evil"}, {"size", 0}, {"sha256", std::string(64, '0')}}.dump());
  ASSERT_FALSE(commit);
  EXPECT_EQ(commit.error().code, ErrorCode::kInvalidArgument) << commit.error().message;

  Call("POST", "/v1/nodes/" + agents_[0]->name() + "/uncordon");
  ASSERT_TRUE(WaitState(id, "succeeded", seconds(20))) << Task(id).dump();
  // The link pointing out of the workspace was not followed, and the task's reason says so.
  EXPECT_NE(Task(id)["reason"].get<std::string>().find(
                "outputs not saved: 'out/passwd-link': a symbolic link (not followed)"),
            std::string::npos)
      << Task(id).dump();

  // Downloads read the server's copy: byte for byte what the task left, inputs included.
  auto listing = api::ListTaskFiles(*client_, id, "");
  ASSERT_TRUE(listing) << listing.error().message;
  std::map<std::string, std::string> expected = {{"big.bin", big},
                                                 {"dir/a.txt", "changed\n"},
                                                 {"dir/sub/b.txt", "beta"},
                                                 {"out/double.bin", big + big},
                                                 {"out/result.txt", "result\n"}};
  std::map<std::string, std::string> got;
  const std::string sink = testing::MakeTempDir("e2e-download") + "/f";
  for (const proto::FileEntry& f : listing->files) {
    const int out = open(sink.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(out, 0);
    Status ok = api::DownloadTaskFile(*client_, id, f, out);
    close(out);
    ASSERT_TRUE(ok) << f.path << ": " << ok.error().message;
    std::ifstream in(sink, std::ios::binary);
    got[f.path] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  fs::remove_all(fs::path(sink).parent_path());
  EXPECT_EQ(got.size(), expected.size());
  for (const auto& [path, data] : expected) {
    EXPECT_TRUE(got[path] == data)
        << path << ": " << got[path].size() << " bytes, expected " << data.size();
  }

  // Once ended, a task takes no more uploads; deleting it deletes its files.
  auto late = client_->Call("PUT", "/v1/tasks/" + id + "/uploads?path=late&offset=0", "x");
  ASSERT_TRUE(late);
  EXPECT_EQ(late->status, 409) << late->body;
  Call("DELETE", "/v1/tasks/" + id);
  auto gone = client_->Call("GET", "/v1/tasks/" + id + "/files");
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 404);
  EXPECT_FALSE(fs::exists(server_dir_ + "/files/tasks/" + id));
}

// A third node joins with a join token instead of an admin's key, runs a task with its own
// credentials, restarts without the token, and is cut off (401, then lost) when the token is
// revoked.
TEST_F(AgentE2eTest, ANodeJoinsWithATokenAndIsCutOffWhenItIsRevoked) {
  const json created = Call("POST", "/v1/join-tokens", {{"description", "e2e"}});
  const std::string token = created.value("token", "");
  const std::string token_id = created.value("id", "");
  ASSERT_FALSE(token.empty()) << created.dump();

  const std::string name = "joined-" + std::to_string(getpid());
  const std::string dir = testing::MakeTempDir("agent-e2e-joined");
  chmod(dir.c_str(), 0711);
  const Credentials endpoint_only{creds_.endpoint, "", ""};
  agents_.push_back(std::make_unique<AgentProcess>(
      endpoint_only, name, dir, std::vector<std::string>{"--join-token", token}));
  ASSERT_FALSE(HasFatalFailure());
  AgentProcess* joined = agents_.back().get();
  EXPECT_TRUE(joined->WaitForOutput("joined the pool with join token " + token_id))
      << joined->Output();
  const std::string identity_path = dir + "/identity.json";
  struct stat st {};
  ASSERT_EQ(stat(identity_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::optional<json> identity = ReadJsonFile(identity_path);
  ASSERT_TRUE(identity.has_value());
  EXPECT_EQ((*identity)["node"], name);
  EXPECT_EQ(Call("GET", "/v1/nodes/" + name)["status"], "ready");

  // With the other nodes cordoned, a task runs here: assignments and reports use the node's own
  // credentials.
  for (size_t i = 0; i < 2; ++i) Call("POST", "/v1/nodes/" + agents_[i]->name() + "/cordon");
  const std::string id = Submit({{"command", {"/bin/sh", "-c", "exit 0"}}, {"gpu_count", 1}});
  ASSERT_TRUE(WaitState(id, "succeeded")) << Task(id).dump();
  EXPECT_EQ(Task(id)["placement"]["node"], name);

  // Restarted without the token, it uses the credentials it kept.
  EXPECT_EQ(joined->Terminate(), 0);
  agents_.back() = std::make_unique<AgentProcess>(endpoint_only, name, dir);
  ASSERT_FALSE(HasFatalFailure());
  joined = agents_.back().get();
  EXPECT_TRUE(joined->WaitForOutput("own credentials from " + identity_path)) << joined->Output();
  const json tokens = Call("GET", "/v1/join-tokens")["join_tokens"];
  ASSERT_EQ(tokens.size(), 1u) << tokens.dump();
  EXPECT_EQ(tokens[0]["nodes"], json::array({name}));

  // Revoked: the token joins nobody any more, the node's credentials are refused, and the node
  // goes lost (--node-timeout 3).
  EXPECT_EQ(Call("DELETE", "/v1/join-tokens/" + token_id)["state"], "revoked");
  api::Client agent_client(creds_.endpoint, (*identity)["access_key"].get<std::string>(),
                           (*identity)["secret_key"].get<std::string>());
  auto heartbeat = agent_client.CallJson("POST", "/v1/agent/nodes/" + name + "/heartbeat");
  ASSERT_FALSE(heartbeat);
  EXPECT_EQ(heartbeat.error().code, ErrorCode::kUnauthenticated);
  EXPECT_NE(heartbeat.error().message.find("revoked with its join token " + token_id),
            std::string::npos)
      << heartbeat.error().message;
  api::Client anonymous(creds_.endpoint, "", "");
  auto again = anonymous.CallJson("POST", "/v1/agent/join",
                                  json{{"token", token}, {"node", name + "-2"}}.dump());
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kUnauthenticated);
  EXPECT_TRUE(Eventually([&] { return Call("GET", "/v1/nodes/" + name)["status"] == "lost"; }))
      << Call("GET", "/v1/nodes/" + name).dump();
  EXPECT_TRUE(joined->WaitForOutput("heartbeat refused: HTTP 401")) << joined->Output();
}

// ---- telemetry ----

// Follows a task's stream from *offset for up to `timeout` (as `gpupool logs -f` does) until
// `want` is in what arrived; appends to *out.
bool FollowUntil(api::Client& client, const std::string& id, const std::string& stream,
                 const std::string& want, int64_t* offset, std::string* out,
                 milliseconds timeout = seconds(15)) {
  return Eventually(
      [&] {
        auto r = client.CallJson("GET", "/v1/tasks/" + id + "/logs?stream=" + stream +
                                            "&offset=" + std::to_string(*offset) + "&wait_ms=2000");
        if (!r) return false;
        *out += Base64Decode((*r)["data_b64"].get<std::string>()).value_or("<bad base64>");
        *offset = (*r)["next_offset"].get<int64_t>();
        return out->find(want) != std::string::npos;
      },
      timeout);
}

TEST_F(AgentE2eTest, LogsStreamLiveAndUsageAndReportedMetricsArrive) {
  const std::string script =
      "echo first; echo oops >&2; "
      "echo '{\"step\": 1, \"loss\": 0.5, \"note\": \"text is ignored\"}' "
      ">> \"$GPUPOOL_METRICS_FILE\"; "
      "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; exec sleep 60";
  const std::string id = Submit({{"command", {"/bin/sh", "-c", script}}, {"gpu_count", 1}});

  // "first" arrives while the task still runs: the log streams, it is not shipped at the end.
  int64_t offset = 0;
  std::string out;
  ASSERT_TRUE(FollowUntil(*client_, id, "stdout", "first\n", &offset, &out)) << out;
  EXPECT_EQ(out, "first\n");
  EXPECT_EQ(State(id), "running");
  int64_t err_offset = 0;
  std::string err;
  ASSERT_TRUE(FollowUntil(*client_, id, "stderr", "oops\n", &err_offset, &err)) << err;

  // Usage sampled at 1 Hz (CPU from the task's cgroup, its simulated GPU at 100 %) and the
  // metric line it wrote.
  json metrics;
  ASSERT_TRUE(Eventually(
      [&] {
        metrics = Call("GET", "/v1/tasks/" + id + "/metrics");
        return metrics["latest"].value("step", 0.0) == 1.0 && metrics["usage"].size() >= 3;
      },
      seconds(20)))
      << metrics.dump();
  EXPECT_EQ(metrics["latest"]["loss"], 0.5);
  EXPECT_FALSE(metrics["latest"].contains("note"));
  EXPECT_EQ(metrics["latest"]["gpu_util"], 100.0);
  EXPECT_EQ(metrics["latest"]["gpu_idle_s"], 0.0);
  ASSERT_EQ(metrics["reported"].size(), 1u) << metrics.dump();
  EXPECT_EQ(metrics["reported"][0]["values"]["step"], 1.0);
  const json& point = metrics["usage"].back();
  EXPECT_EQ(point["mean"]["gpu_util_pct"], 100);
  EXPECT_EQ(point["mean"]["gpu_mem_mib"], 81920);  // the whole A100-80GB's memory
  EXPECT_TRUE(point["mean"]["memory_mib"].is_number()) << point.dump();

  // The node's history has each GPU; the overview and /metrics show the task.
  const std::string node = Task(id)["placement"]["node"];
  const json node_metrics = Call("GET", "/v1/nodes/" + node + "/metrics?resolution=1m");
  EXPECT_EQ(node_metrics["resolution"], "1m");
  EXPECT_FALSE(node_metrics["usage"].empty()) << node_metrics.dump();
  EXPECT_EQ(node_metrics["gpus"].size(), 2u) << node_metrics.dump();
  const json usage = Call("GET", "/v1/usage");
  bool listed = false;
  for (const json& t : usage["tasks"]) {
    if (t["id"] == id) listed = !t["latest"].is_null() && t["reported"]["step"] == 1.0;
  }
  EXPECT_TRUE(listed) << usage.dump();
  api::Client anonymous(creds_.endpoint, "", "");
  auto text = anonymous.Call("GET", "/metrics");
  ASSERT_TRUE(text);
  const std::string project = Task(id)["project"];
  EXPECT_NE(text->body.find("gpupool_task_gpu_utilization_ratio{project=\"" + project +
                            "\",task=\"" + id + "\",node=\"" + node + "\"}"),
            std::string::npos)
      << text->body;
  EXPECT_NE(text->body.find("gpupool_gpu_utilization_ratio{node=\"" + node), std::string::npos);

  // Stopped: its output completes, and a follower is told so.
  Call("POST", "/v1/tasks/" + id + "/stop");
  ASSERT_TRUE(WaitState(id, "stopped"));
  ASSERT_TRUE(Eventually(
      [&] {
        auto r = client_->CallJson(
            "GET", "/v1/tasks/" + id + "/logs?offset=" + std::to_string(offset) + "&wait_ms=2000");
        return r && (*r)["complete"] == true && (*r)["next_offset"] == offset;
      },
      seconds(20)));
  const json tail = Call("GET", "/v1/tasks/" + id + "/logs?tail=1");
  EXPECT_EQ(Base64Decode(tail["data_b64"].get<std::string>()), "first\n");
}

TEST_F(AgentE2eTest, StopConditionFiresOnAMetricTheTaskWrites) {
  // A bad condition is refused at submission, with where it is wrong.
  auto bad = client_->CallJson("POST", "/v1/tasks",
                               json{{"command", {"true"}}, {"stop_when", "val_acc > high"}}.dump());
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("stop_when: at column 11"), std::string::npos)
      << bad.error().message;

  // val_acc climbs 0.90, 0.91, … every 0.2 s; the task is stopped once it passes 0.95.
  const std::string script =
      "i=90; while true; do echo \"{\\\"val_acc\\\": 0.$i}\" >> \"$GPUPOOL_METRICS_FILE\"; "
      "echo $i > checkpoint.txt; i=$((i+1)); sleep 0.2; done";
  const std::string id = Submit(
      {{"command", {"/bin/sh", "-c", script}}, {"gpu_count", 1}, {"stop_when", "val_acc>0.95"}});
  EXPECT_EQ(Task(id)["stop_when"], "val_acc > 0.95");  // stored in its canonical form
  ASSERT_TRUE(WaitState(id, "stopped", seconds(30))) << Task(id).dump();
  const std::string reason = Task(id)["reason"];
  EXPECT_EQ(reason.rfind("stop condition met: val_acc > 0.95 (val_acc = 0.9", 0), 0u) << reason;
  const json metrics = Call("GET", "/v1/tasks/" + id + "/metrics");
  // The task may write a few more lines between the condition and its SIGTERM; among them, one
  // passed 0.95.
  double best = 0;
  for (const json& p : metrics["reported"])
    best = std::max(best, p["values"]["val_acc"].get<double>());
  EXPECT_GT(best, 0.95) << metrics.dump();
  EXPECT_GE(metrics["reported"].size(), 6u) << metrics.dump();
  // The server ended the run itself; its outputs are saved all the same.
  json listing;
  EXPECT_TRUE(Eventually(
      [&] {
        auto r = client_->CallJson("GET", "/v1/tasks/" + id + "/files?path=checkpoint.txt");
        return r && (listing = *r)["files"].size() == 1;
      },
      seconds(20)))
      << listing.dump();
}

}  // namespace
}  // namespace gpupool
