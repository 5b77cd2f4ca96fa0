// Submit → process running on an idle node, measured (not a test): `gpupool up` with simulated
// GPUs in a child process; tasks submitted one at a time, each waited for; the latency is the
// agent's true start time (the "running" event) minus the task's creation time, both taken on
// this machine's clock. With --docker 1 the tasks have an image: a private dockerd is started
// (tests/dockerd.h: own data root and socket, no bridge) with the busybox test image built
// locally, so the figure is an image task's cold start on an idle node with the image present —
// the container's process running (Docker's StartedAt) minus the submission.
//   agent_bench [--tasks 200] [--docker 1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/client.h"
#include "bench/submit_load.h"
#include "tests/dockerd.h"
#include "tests/server_process.h"

namespace {

using gpupool::bench::Percentile;
using nlohmann::json;

}  // namespace

int main(int argc, char** argv) {
  const int tasks = gpupool::bench::Flag(argc, argv, "--tasks", 200);
  const bool docker = gpupool::bench::Flag(argc, argv, "--docker", 0) != 0;
  constexpr const char* kImage = "gpupool-bench:1";
  std::unique_ptr<gpupool::testing::Dockerd> dockerd;
  std::vector<std::string> args = {"--simulate-gpus", "A100-80GB:8", "--node-name", "b"};
  if (docker) {
    std::string why_not;
    dockerd = gpupool::testing::Dockerd::Start(&why_not);
    if (!dockerd) {
      std::fprintf(stderr, "dockerd cannot start here: %s\n", why_not.c_str());
      return 1;
    }
    if (auto built = dockerd->BuildTestImage(kImage); !built) {
      std::fprintf(stderr, "building %s: %s\n", kImage, built.error().message.c_str());
      return 1;
    }
    args.insert(args.end(), {"--docker-socket", dockerd->socket(), "--docker-network", "none"});
  }
  const std::string dir = gpupool::testing::MakeTempDir("gpupool-agent-bench");
  std::vector<double> latency_ms;
  {
    gpupool::testing::ServerProcess up(dir, args, "up");
    const auto admin = up.ReadCredentials();
    gpupool::api::Client client(up.endpoint(), admin.access_key, admin.secret_key);
    while (!client.CallJson("GET", "/v1/nodes/b")) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the agent registers
    }
    json request = {{"command", {"/bin/true"}}, {"gpu_count", 1}};
    if (docker) request["image"] = kImage;
    const std::string body = request.dump();
    for (int i = 0; i < tasks; ++i) {
      auto t = client.CallJson("POST", "/v1/tasks", body);
      if (!t) {
        std::fprintf(stderr, "submit: %s\n", t.error().message.c_str());
        return 1;
      }
      const std::string id = (*t)["id"];
      const int64_t created = (*t)["created_ms"];
      for (;;) {  // one task at a time: the node is idle when the next arrives
        auto now = client.CallJson("GET", "/v1/tasks/" + id);
        const std::string state = now ? (*now)["state"].get<std::string>() : "";
        if (state == "succeeded" || state == "failed") break;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      auto events = client.CallJson("GET", "/v1/tasks/" + id + "/events");
      for (const json& e : (*events)["events"]) {
        if (e["to"] == "running") {
          latency_ms.push_back(static_cast<double>(e["time_ms"].get<int64_t>() - created));
        }
      }
    }
    up.Terminate();
  }
  std::filesystem::remove_all(dir);
  std::printf(
      "submit -> process running on an idle node (gpupool up, simulated GPUs, %s), "
      "%zu tasks: p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
      docker ? "docker runtime, image present" : "process runtime", latency_ms.size(),
      Percentile(latency_ms, 50), Percentile(latency_ms, 99), Percentile(latency_ms, 100));
  return 0;
}
