// Memory per node: the resident set (VmRSS, and the peak VmHWM, from /proc/self/status) that a
// ClusterState plus a policy adds once openb-shaped tasks fill half of the cluster's GPU capacity,
// divided by the node count, at 1k / 5k / 20k synthetic 8-GPU nodes. Flat figures across sizes
// mean memory grows linearly with the cluster, with no quadratic index or cache.
//
// Each (policy, size) runs in a forked child so that one measurement's freed-but-kept heap does
// not hide the next one's growth. Usage: memory_bench [policy...] (default: best-fit fgd).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "openb_shapes.h"
#include "sched/cluster_state.h"
#include "sched/policy.h"
#include "sched/schedule.h"

namespace gpupool::bench {
namespace {

constexpr int64_t kFillPct = 50;

// The value in kB of `field` ("VmRSS", "VmHWM") in /proc/self/status, or -1.
int64_t StatusKb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t len = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, len, field) == 0 && line.size() > len && line[len] == ':') {
      return std::stoll(line.substr(len + 1));
    }
  }
  return -1;
}

// Runs in the child: builds, fills, prints one table row.
int Measure(const std::string& policy_name, int nodes) {
  sched::PolicyOptions options;
  options.seed = 42;
  options.typical = ShapeTypicalTasks();
  // The task stream is input, not scheduler state: made before the baseline is read.
  const std::vector<sched::QueuedTask> stream = DrawTasks(static_cast<size_t>(nodes) * 8, 42);
  sched::ScheduleOptions no_preemption;
  no_preemption.allow_preemption = false;

  const int64_t rss_before = StatusKb("VmRSS");
  const int64_t hwm_before = StatusKb("VmHWM");
  auto policy = sched::MakePolicy(policy_name, options);
  if (!policy) {
    std::fprintf(stderr, "%s\n", policy.error().message.c_str());
    return 1;
  }
  sched::ClusterState state(SyntheticNodes(nodes));
  const int64_t target = state.TotalGpuMilli() * kFillPct / 100;
  int64_t placed = 0;
  for (size_t i = 0; i < stream.size() && state.AllocatedGpuMilli() < target; ++i) {
    placed += static_cast<int64_t>(
        sched::ScheduleOnce(state, std::span(&stream[i], 1), **policy, no_preemption)
            .assignments.size());
  }
  const int64_t rss_after = StatusKb("VmRSS");
  const int64_t hwm_after = StatusKb("VmHWM");
  std::printf("%-12s %7d %8lld %14.0f %14.0f\n", policy_name.c_str(), nodes,
              static_cast<long long>(placed),
              static_cast<double>(rss_after - rss_before) * 1024.0 / nodes,
              static_cast<double>(hwm_after - hwm_before) * 1024.0 / nodes);
  return 0;
}

}  // namespace
}  // namespace gpupool::bench

int main(int argc, char** argv) {
  std::vector<std::string> policies(argv + 1, argv + argc);
  if (policies.empty()) policies = {"best-fit", "fgd"};
  std::printf("%-12s %7s %8s %14s %14s\n", "policy", "nodes", "tasks", "rss_B_per_node",
              "hwm_B_per_node");
  std::fflush(stdout);
  int failures = 0;
  for (const std::string& p : policies) {
    for (int nodes : {1000, 5000, 20000}) {
      const pid_t child = fork();
      if (child == 0) {
        const int rc = gpupool::bench::Measure(p, nodes);
        std::fflush(stdout);
        _exit(rc);
      }
      int status = 0;
      if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
          WEXITSTATUS(status) != 0) {
        ++failures;
      }
    }
  }
  return failures == 0 ? 0 : 1;
}
