// The control plane's speed goals, measured (not a test): durable signed task submissions per
// second from 64 concurrent keep-alive clients against a real `gpupool server` process (SQLite,
// group commit), the latency of listing tasks when 10,000 exist, one scheduling pass with
// 10,000 pending tasks on 1,000 simulated nodes (in process, MemoryStore), and /metrics then.
// With --tls the server serves HTTPS (--tls-self-signed) and the clients verify it.
//   api_bench [--clients 64] [--seconds 5] [--tasks 10000] [--nodes 1000] [--tls]
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/client.h"
#include "bench/submit_load.h"
#include "server/controller.h"
#include "store/memory_store.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

using bench::Clock;
using bench::Percentile;

const char* kTaskBody = R"({"name":"bench","cpu_milli":1000,"memory_mib":2048,"gpu_count":1,)"
                        R"("command":["python3","train.py"]})";

void Submissions(const testing::Credentials& admin, int clients, int seconds) {
  bench::SubmitLoad load(admin, clients, INT64_MAX, Clock::now() + std::chrono::seconds(seconds),
                         [](int64_t) { return std::string(kTaskBody); });
  load.Wait();
  std::vector<double> all;
  for (const bench::SubmitLoad::Ack& a : load.acks()) all.push_back(a.latency_ms);
  std::printf("submissions: %d clients, %.1f s: %zu acknowledged (%lld errors), %.0f/s, "
              "latency p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
              clients, load.elapsed_s(), all.size(), static_cast<long long>(load.errors()),
              static_cast<double>(all.size()) / load.elapsed_s(), Percentile(all, 50),
              Percentile(all, 99), Percentile(all, 100));
}

void Listing(const testing::Credentials& admin, int tasks) {
  // Fill a fresh server with exactly `tasks` tasks, from 16 clients.
  constexpr int kFillers = 16;
  std::vector<std::thread> fillers;
  for (int f = 0; f < kFillers; ++f) {
    fillers.emplace_back([&, f] {
      api::Client client(admin.endpoint, admin.access_key, admin.secret_key,
                         {.ca_file = admin.ca_file});
      for (int i = f; i < tasks; i += kFillers) (void)client.Call("POST", "/v1/tasks", kTaskBody);
    });
  }
  for (auto& t : fillers) t.join();
  api::Client client(admin.endpoint, admin.access_key, admin.secret_key, {.ca_file = admin.ca_file});
  for (int limit : {100, 1000}) {
    std::vector<double> page_ms;
    std::vector<double> full_ms;
    for (int rep = 0; rep < 20; ++rep) {
      std::string after;
      const auto f0 = Clock::now();
      for (;;) {
        const auto t0 = Clock::now();
        auto page = client.CallJson("GET", "/v1/tasks?limit=" + std::to_string(limit) +
                                               (after.empty() ? "" : "&after=" + after));
        page_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        if (!page || (*page)["next_after"].is_null()) break;
        after = (*page)["next_after"].get<std::string>();
      }
      full_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - f0).count());
    }
    std::printf("list of %d tasks, pages of %d: page p50 %.2f ms, p99 %.2f ms; whole list "
                "p50 %.1f ms, p99 %.1f ms\n",
                tasks, limit, Percentile(page_ms, 50), Percentile(page_ms, 99),
                Percentile(full_ms, 50), Percentile(full_ms, 99));
  }
}

// A fixed clock: the pass's cost, not metering.
class FixedClock : public server::Clock {
 public:
  int64_t NowMs() override { return 1'700'000'000'000; }
};

// /metrics of that state: its gauges are computed at each scrape from the indexes, one series per
// bound task and per node status, the GPUs per model.
void Scrapes(server::Controller& controller, int tasks, int nodes, int bound) {
  std::vector<double> ms;
  size_t bytes = 0;
  for (int i = 0; i < 11; ++i) {
    const auto t0 = Clock::now();
    bytes = controller.MetricsText().size();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::printf(
      "/metrics: %d tasks (%d bound) on %d nodes: %.1f ms per scrape (median of 11, "
      "max %.1f ms), %zu bytes\n",
      tasks, bound, nodes, Percentile(ms, 50), Percentile(ms, 100), bytes);
}

void SchedulerCycle(int tasks, int nodes) {
  store::MemoryStore store;
  FixedClock clock;
  std::array<uint8_t, server::SecretBox::kKeyBytes> key{};
  auto c = server::Controller::Open(store, clock, server::SecretBox::FromKey(key), {});
  if (!c) {
    std::printf("scheduler: %s\n", c.error().message.c_str());
    return;
  }
  auto& controller = **c;
  auto admin_key = controller.Bootstrap();
  const server::Caller admin = controller.LookupKey((**admin_key).key.access_key)->caller;
  for (int i = 0; i < nodes; ++i) {
    controller.RegisterNode(admin,
                            Node::Make("node-" + std::to_string(i), 96'000, 786'432, 8,
                                       i % 4 == 0 ? "V100-32GB" : "A100-80GB"),
                            [](Result<server::NodeView>) {});
  }
  // A mix in the proportions of the Alibaba trace: shares, single and multi-GPU, CPU-only.
  for (int i = 0; i < tasks; ++i) {
    server::TaskSpec spec;
    spec.command = {"x"};
    spec.request.cpu_milli = 4000 + (i % 7) * 1000;
    spec.request.memory_mib = 16'384;
    switch (i % 10) {
      case 0: case 1: case 2: case 3: spec.request.gpu_milli = 250 + (i % 3) * 250; break;
      case 4: case 5: case 6: spec.request.gpu_count = 1; break;
      case 7: spec.request.gpu_count = 2; break;
      case 8: spec.request.gpu_count = 8; break;
      default: break;
    }
    controller.SubmitTask(admin, spec, [](Result<Task>) {});
  }
  const auto t0 = Clock::now();
  const int placed = controller.SchedulePass();
  const double first_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  Scrapes(controller, tasks, nodes, placed);
  // One task ends: resources freed, so the next pass retries every waiting task.
  server::TaskFilter scheduled;
  scheduled.states = {TaskState::kScheduled};
  scheduled.limit = 1;
  // A filter of live states is answered from memory, at once.
  std::string bound;
  controller.ListTasks(admin, scheduled, [&](Result<server::TaskPage> page) {
    if (page && !page->tasks.empty()) bound = page->tasks.front().id;
  });
  controller.StopTask(admin, bound, /*discard=*/false, [](Result<Task>) {});
  const auto t1 = Clock::now();
  const int placed_again = controller.SchedulePass();
  const double retry_ms = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
  std::printf("scheduler cycle: %d pending tasks on %d nodes (8 GPUs each): first pass %.0f ms "
              "(%d placed); after a task ends, a pass retrying all %d waiting %.0f ms "
              "(%d placed)\n",
              tasks, nodes, first_ms, placed, tasks - placed, retry_ms, placed_again);
}

}  // namespace
}  // namespace gpupool

int main(int argc, char** argv) {
  using namespace gpupool;
  using bench::Flag;
  const int clients = Flag(argc, argv, "--clients", 64);
  const int seconds = Flag(argc, argv, "--seconds", 5);
  const int tasks = Flag(argc, argv, "--tasks", 10'000);
  const int nodes = Flag(argc, argv, "--nodes", 1'000);
  const bool tls = bench::HasFlag(argc, argv, "--tls");
  // Each measurement on a fresh server and data dir.
  for (bool listing : {false, true}) {
    const std::string dir = testing::MakeTempDir("gpupool-api-bench");
    {
      // Its clients share the admin key: no per-key rate, which would measure the limit.
      std::vector<std::string> flags = {"--key-rate", "0"};
      if (tls) flags.push_back("--tls-self-signed");
      testing::ServerProcess server(dir, flags);
      testing::Credentials admin = server.ReadCredentials();
      admin.endpoint = server.endpoint();
      if (listing) {
        Listing(admin, tasks);
      } else {
        Submissions(admin, clients, seconds);
      }
    }
    std::filesystem::remove_all(dir);
  }
  SchedulerCycle(tasks, nodes);
  return 0;
}
