// An image task's cold start in the docker runtime, measured (not a test): a private dockerd
// (tests/dockerd.h: own data root and socket, no bridge) with the busybox test image built
// locally, so the image is present; tasks launched one at a time on an otherwise idle daemon,
// each removed before the next. The figure is DockerRuntime::Launch's start request to the
// container's process running (Docker's State.StartedAt), and the time Launch takes to return
// (create, start, inspect). `agent_bench --docker 1` measures the whole path through a server.
//   docker_launch_bench [--tasks 50]
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "agent/runtime/docker_runtime.h"
#include "agent/runtime/linux_proc.h"
#include "bench/submit_load.h"
#include "tests/dockerd.h"

int main(int argc, char** argv) {
  using gpupool::bench::Percentile;
  namespace agent = gpupool::agent;
  const int tasks = gpupool::bench::Flag(argc, argv, "--tasks", 50);
  constexpr const char* kImage = "gpupool-bench:1";
  std::string why_not;
  auto dockerd = gpupool::testing::Dockerd::Start(&why_not);
  if (!dockerd) {
    std::fprintf(stderr, "dockerd cannot start here: %s\n", why_not.c_str());
    return 1;
  }
  if (auto built = dockerd->BuildTestImage(kImage); !built) {
    std::fprintf(stderr, "building %s: %s\n", kImage, built.error().message.c_str());
    return 1;
  }
  std::string dir = (std::filesystem::temp_directory_path() / "gpupool-docker-bench-XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) return 1;
  std::vector<double> running_ms, returned_ms;
  {
    agent::DockerOptions o;
    o.socket = dockerd->socket();
    o.network_mode = "none";  // the private daemon has no bridge
    o.gpu_devices = false;    // simulated GPUs: the environment alone
    auto rt = agent::DockerRuntime::Open(dir + "/docker", o);
    if (!rt) {
      std::fprintf(stderr, "%s\n", rt.error().message.c_str());
      return 1;
    }
    for (int i = 0; i < tasks; ++i) {
      agent::LaunchSpec s;
      s.task_id = "t-" + std::to_string(i);
      s.image = kImage;
      s.command = {"/bin/true"};
      s.gpu_uuids = {"GPU-sim-0"};
      s.memory_mib = 512;
      s.cpu_milli = 1000;
      const int64_t asked = agent::WallMs();
      const auto t0 = std::chrono::steady_clock::now();
      auto t = (*rt)->Launch(s);
      const auto t1 = std::chrono::steady_clock::now();
      if (!t) {
        std::fprintf(stderr, "launch: %s\n", t.error().message.c_str());
        return 1;
      }
      running_ms.push_back(static_cast<double>(t->started_ms - asked));
      returned_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      while ((*rt)->Running().size() > 0) (*rt)->Reap(std::chrono::milliseconds(100));
      if (auto removed = (*rt)->Remove(s.task_id); !removed) {
        std::fprintf(stderr, "remove: %s\n", removed.error().message.c_str());
      }
    }
  }
  std::filesystem::remove_all(dir);
  std::printf("docker runtime cold start (image present, idle daemon), %zu tasks: start request -> "
              "container process running p50 %.0f ms, p99 %.0f ms, max %.0f ms; Launch returned "
              "p50 %.0f ms\n",
              running_ms.size(), Percentile(running_ms, 50), Percentile(running_ms, 99),
              Percentile(running_ms, 100), Percentile(returned_ms, 50));
  return 0;
}
