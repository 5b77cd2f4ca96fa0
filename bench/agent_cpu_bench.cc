// The node agent's own CPU use, measured (not a test): a real `gpupool server` and a real
// `gpupool agent --simulate-gpus A100-80GB:8` as separate processes; the agent's utime + stime
// (/proc/<pid>/stat fields 14 and 15: all its threads, not its tasks) over a window after a
// warm-up, first idle, then with TASKS running tasks that each hold one GPU and write a line of
// output and a metrics line per second (like a training loop). Also the telemetry requests per
// second the server counted (its /metrics) and the server's own CPU in the same window.
//   agent_cpu_bench [--seconds 30] [--warmup 10] [--tasks 8]
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "api/client.h"
#include "tests/server_process.h"

extern char** environ;

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kNode = "cpu-bench";
constexpr const char* kTelemetryCount =
    "gpupool_api_request_duration_seconds_count{route=\"/v1/agent/nodes/{name}/telemetry\",";

// A training loop's footprint: a line of output and a metrics line per second, for `seconds`
// (so that a run that fails half-way leaves nothing running for long).
std::string TaskScript(int seconds) {
  return "i=0; while [ $i -lt " + std::to_string(seconds) +
         " ]; do i=$((i+1)); l=0.$((1000 - i % 1000)); echo \"step $i: loss $l\"; "
         "echo \"{\\\"step\\\": $i, \\\"loss\\\": $l}\" >> \"$GPUPOOL_METRICS_FILE\"; sleep 1; "
         "done";
}

[[noreturn]] void Fail(const std::string& why) { throw std::runtime_error(why); }

// A real `gpupool agent` with 8 simulated A100s, its output in `log`; stopped (SIGTERM) when
// destroyed.
class AgentProcess {
 public:
  AgentProcess(const gpupool::testing::Credentials& creds, const std::string& data_dir,
               const std::string& log);
  ~AgentProcess() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// utime + stime of process `pid` in seconds: every thread it has or had, none of its children.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) Fail("cannot read /proc/" + std::to_string(pid) + "/stat");
  std::istringstream fields(stat.substr(paren + 2));  // field 3 (state) onwards
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int n = 3; n <= 15 && fields >> field; ++n) {
    if (n == 14) utime = std::stoull(field);
    if (n == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Telemetry requests the server has handled (any status), from its /metrics.
double TelemetryRequests(gpupool::api::Client& client) {
  auto r = client.Call("GET", "/metrics");
  if (!r || r->status != 200) Fail("GET /metrics failed");
  std::istringstream lines(r->body);
  std::string line;
  double total = 0;
  while (std::getline(lines, line)) {
    if (line.rfind(kTelemetryCount, 0) == 0) total += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return total;
}

AgentProcess::AgentProcess(const gpupool::testing::Credentials& creds, const std::string& data_dir,
                           const std::string& log) {
  std::vector<std::string> args = {GPUPOOL_BINARY, "agent",           "--server",
                                   creds.endpoint, "--name",          kNode,
                                   "--data-dir",   data_dir,          "--simulate-gpus",
                                   "A100-80GB:8",  "--docker-socket", data_dir + "/none.sock"};
  std::vector<std::string> env = {"GPUPOOL_ACCESS_KEY=" + creds.access_key,
                                  "GPUPOOL_SECRET_KEY=" + creds.secret_key};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "GPUPOOL_", 8) != 0) env.push_back(*e);
  }
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  for (std::string& e : env) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) Fail("cannot create " + log);
  pid_ = fork();
  if (pid_ < 0) Fail("fork failed");
  if (pid_ == 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execve(argv[0], argv.data(), envp.data());
    std::perror("execve");
    _exit(127);
  }
  close(fd);
}

// Polls `done` every 50 ms for up to `seconds`; fails saying `what` (and showing the agent's log)
// when it never holds.
template <typename F>
void WaitFor(F done, int seconds, const std::string& what, const std::string& log) {
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  while (!done()) {
    if (Clock::now() > deadline) {
      std::ifstream in(log);
      std::fprintf(stderr, "%s", std::string(std::istreambuf_iterator<char>(in), {}).c_str());
      Fail(what);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Waits `warmup`, then measures the agent's and the server's CPU and the telemetry requests over
// `window` seconds, and prints them as one line.
void Measure(const char* label, pid_t agent, pid_t server, gpupool::api::Client& client, int warmup,
             int window) {
  std::this_thread::sleep_for(std::chrono::seconds(warmup));
  const double agent0 = CpuSeconds(agent), server0 = CpuSeconds(server);
  const double requests0 = TelemetryRequests(client);
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(window));
  const double agent1 = CpuSeconds(agent), server1 = CpuSeconds(server);
  const double requests1 = TelemetryRequests(client);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf(
      "  %-8s agent %.2f %% of one core (%.2f s CPU in %.1f s); telemetry %.2f requests/s;"
      " server %.2f %%\n",
      label, 100 * (agent1 - agent0) / wall, agent1 - agent0, wall, (requests1 - requests0) / wall,
      100 * (server1 - server0) / wall);
  std::fflush(stdout);
}

// Both measurements against a server and an agent in `dir`.
void Run(const std::string& dir, int window, int warmup, int tasks) {
  const std::string log = dir + "/agent.log";
  gpupool::testing::ServerProcess server(dir + "/server");
  const auto creds = server.ReadCredentials();
  gpupool::api::Client client(server.endpoint(), creds.access_key, creds.secret_key);
  AgentProcess agent(creds, dir + "/agent", log);
  WaitFor([&] { return client.CallJson("GET", std::string("/v1/nodes/") + kNode).has_value(); }, 30,
          "the agent did not register", log);
  std::printf(
      "agent CPU, 8 simulated A100-80GB, usage sampled at 1 Hz; %d s window after %d s "
      "warm-up; %ld cores online\n",
      window, warmup, sysconf(_SC_NPROCESSORS_ONLN));
  Measure("idle", agent.pid(), server.pid(), client, warmup, window);

  // Each runs well past the measurement, and ends on its own if this run fails half-way.
  const std::string body = json{
      {"command", {"/bin/sh", "-c", TaskScript(warmup + window + 120)}},
      {"gpu_count", 1}}.dump();
  std::vector<std::string> ids;
  for (int i = 0; i < tasks; ++i) {
    auto t = client.CallJson("POST", "/v1/tasks", body);
    if (!t) Fail("submit: " + t.error().message);
    ids.push_back((*t)["id"]);
  }
  auto all_in = [&](const char* state) {
    for (const std::string& id : ids) {
      auto t = client.CallJson("GET", "/v1/tasks/" + id);
      if (!t || (*t)["state"] != state) return false;
    }
    return true;
  };
  WaitFor([&] { return all_in("running"); }, 30, "the tasks did not all start", log);
  Measure((std::to_string(tasks) + " tasks").c_str(), agent.pid(), server.pid(), client, warmup,
          window);
  // What reached the server, so that the figure is that of an agent doing its whole job.
  double min_step = std::numeric_limits<double>::max();
  size_t min_usage = std::numeric_limits<size_t>::max();
  for (const std::string& id : ids) {
    auto m = client.CallJson("GET", "/v1/tasks/" + id + "/metrics");
    if (!m) Fail("metrics: " + m.error().message);
    min_step = std::min(min_step, (*m)["latest"].value("step", 0.0));
    min_usage = std::min(min_usage, (*m)["usage"].size());
  }
  std::printf(
      "  on the server: every task's latest reported step ≥ %.0f, usage points per task "
      "≥ %zu\n",
      min_step, min_usage);

  for (const std::string& id : ids) {
    if (auto r = client.CallJson("POST", "/v1/tasks/" + id + "/stop"); !r) {
      Fail("stop: " + r.error().message);
    }
  }
  // Stopped on the server at once; gone from the node once the agent has killed them, shipped
  // the rest of their output and removed them (and their cgroups).
  WaitFor(
      [&] {
        std::error_code ec;
        return all_in("stopped") &&
               std::filesystem::directory_iterator(dir + "/agent/runtime/tasks", ec) ==
                   std::filesystem::directory_iterator();
      },
      30, "the tasks did not all end on the node", log);
}

}  // namespace

int main(int argc, char** argv) {
  int window = 30, warmup = 10, tasks = 8;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0) window = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--warmup") == 0) warmup = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--tasks") == 0) tasks = std::atoi(argv[i + 1]);
  }
  if (window < 1 || warmup < 0 || tasks < 1 || tasks > 8) {
    std::fprintf(stderr, "agent_cpu_bench: --seconds must be ≥ 1, --warmup ≥ 0, --tasks 1..8\n");
    return 2;
  }
  const std::string dir = gpupool::testing::MakeTempDir("gpupool-agent-cpu-bench");
  chmod(dir.c_str(), 0711);  // tasks run under their own uids and must reach their workspaces
  int status = 0;
  try {
    Run(dir, window, warmup, tasks);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "agent_cpu_bench: %s\n", e.what());
    status = 1;
  }
  std::filesystem::remove_all(dir);
  return status;
}
