// Scheduling at cluster scale, measured (not a test): a real `gpupool server` process (SQLite in a
// temp dir, loopback only) with N registered nodes × 8 A100-80GB, then tasks submitted by
// keep-alive signed clients and placed by the server's scheduling loop as they come — 90 % quarter
// GPU shares, 8 % one GPU, 2 % four GPUs. Reports durable submissions/s, their latency, the
// scheduling passes (time per pass from the server's own histogram: mean, p99 as the bucket it
// falls in, and per window of submissions, to show whether it grows with bound tasks; nodes the
// pass copied into its snapshot) and the server's resident memory. Stops by itself: after
// --tasks submissions or --seconds per size, whichever comes first.
//   scale_bench [--nodes 1000,10000] [--tasks 200000] [--clients 64] [--seconds 120]
//               [--policy default]
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/client.h"
#include "bench/submit_load.h"
#include "tests/server_process.h"

namespace gpupool::bench {
namespace {

constexpr const char* kCycle = "gpupool_scheduler_cycle_seconds";

std::string TaskBody(int64_t i) {
  const int64_t k = i % 50;
  const char* gpu = k < 45   ? R"("gpu_milli":250)"
                    : k < 49 ? R"("gpu_count":1)"
                             : R"("gpu_count":4)";
  return std::string(R"({"name":"scale","cpu_milli":1000,"memory_mib":2048,)") + gpu +
         R"(,"command":["python3","train.py"]})";
}

// Registers `nodes` nodes of 8 A100-80GB from 16 clients; returns the seconds it took.
double RegisterNodes(const testing::Credentials& admin, int nodes) {
  constexpr int kRegistrars = 16;
  const auto t0 = Clock::now();
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kRegistrars; ++r) {
    threads.emplace_back([&, r] {
      api::Client client(admin.endpoint, admin.access_key, admin.secret_key);
      nlohmann::json gpus = nlohmann::json::array();
      for (int g = 0; g < 8; ++g) gpus.push_back({{"model", "A100-80GB"}});
      for (int i = r; i < nodes; i += kRegistrars) {
        const nlohmann::json body = {{"name", "node-" + std::to_string(i)},
                                     {"cpu_milli", 128'000},
                                     {"memory_mib", 1'048'576},
                                     {"gpus", gpus}};
        auto res = client.Call("POST", "/v1/agent/nodes", body.dump());
        if (!res || res->status / 100 != 2) ++failed;
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failed > 0) {
    std::fprintf(stderr, "scale_bench: %d node registrations failed\n", failed.load());
    std::exit(1);
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The scheduling figures of one /metrics scrape.
struct Passes {
  double count = 0;
  double sum_s = 0;
  double placed = 0;
  double nodes_copied = 0;
  std::map<double, double> buckets;  // upper bound (s) → cumulative count

  static Passes Scrape(const testing::Credentials& admin) {
    Passes p;
    const std::string bucket = std::string(kCycle) + "_bucket{le=\"";
    for (const auto& [name, value] : ScrapeMetrics(admin)) {
      if (name == std::string(kCycle) + "_count") p.count = value;
      if (name == std::string(kCycle) + "_sum") p.sum_s = value;
      if (name == "gpupool_scheduler_placed_total") p.placed = value;
      if (name == "gpupool_scheduler_snapshot_nodes_copied_total") p.nodes_copied = value;
      if (name.rfind(bucket, 0) == 0) {
        const std::string le = name.substr(bucket.size(), name.size() - bucket.size() - 2);
        p.buckets[le == "+Inf" ? 1e300 : std::strtod(le.c_str(), nullptr)] = value;
      }
    }
    return p;
  }

  // The passes since `before`: mean time (ms) and the upper bound (ms) of the bucket holding
  // their 99th percentile.
  std::pair<double, double> Since(const Passes& before) const {
    const double n = count - before.count;
    if (n <= 0) return {0, 0};
    const double mean_ms = (sum_s - before.sum_s) / n * 1000;
    for (const auto& [le, cumulative] : buckets) {
      const auto it = before.buckets.find(le);
      const double earlier = it == before.buckets.end() ? 0 : it->second;
      if (cumulative - earlier >= 0.99 * n) return {mean_ms, le * 1000};
    }
    return {mean_ms, 0};
  }
};

void RunSize(int nodes, int64_t tasks, int clients, int seconds, const std::string& policy) {
  const std::string dir = testing::MakeTempDir("gpupool-scale-bench");
  {
    // Nodes never heartbeat here: a day's timeout keeps them ready through the run.
    testing::ServerProcess server(
        dir, {"--node-timeout", "86400", "--policy", policy, "--key-rate", "0"});
    testing::Credentials admin = server.ReadCredentials();
    admin.endpoint = server.endpoint();
    const double register_s = RegisterNodes(admin, nodes);
    const Rss idle = ProcessRss(server.pid());
    std::printf("\n== %d nodes × 8 A100-80GB, policy %s (registered in %.1f s; server RSS %.0f "
                "MiB) ==\n",
                nodes, policy.c_str(), register_s, idle.rss_mib);
    std::printf("%10s %10s %9s %8s %10s %10s %12s %9s\n", "submitted", "placed", "subm/s", "passes",
                "pass mean", "pass p99≤", "copied/pass", "RSS MiB");
    const Passes start = Passes::Scrape(admin);
    Passes window = start;
    int64_t window_acks = 0;
    auto window_t = Clock::now();
    SubmitLoad load(admin, clients, tasks, Clock::now() + std::chrono::seconds(seconds), TaskBody);
    const int64_t step = std::max<int64_t>(1, tasks / 10);
    auto report = [&](int64_t acked) {
      const Passes now = Passes::Scrape(admin);
      const auto [mean_ms, p99_ms] = now.Since(window);
      const double secs = std::chrono::duration<double>(Clock::now() - window_t).count();
      const double passes = now.count - window.count;
      std::printf("%10lld %10.0f %9.0f %8.0f %8.2fms %8.1fms %12.1f %9.0f\n",
                  static_cast<long long>(acked), now.placed,
                  static_cast<double>(acked - window_acks) / secs, passes, mean_ms, p99_ms,
                  passes > 0 ? (now.nodes_copied - window.nodes_copied) / passes : 0,
                  ProcessRss(server.pid()).rss_mib);
      std::fflush(stdout);
      window = now;
      window_acks = acked;
      window_t = Clock::now();
    };
    // A row per tenth of the submissions (the benchmark watches another process: it polls).
    for (int64_t next = step; !load.done();) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const int64_t acked = load.acknowledged();
      if (acked >= next) {
        report(acked);
        next = (acked / step + 1) * step;
      }
    }
    load.Wait();
    // The loop places what is still queued; wait (at most a minute) until a scrape shows no
    // pass since the last.
    const auto drain_deadline = Clock::now() + std::chrono::minutes(1);
    for (Passes last = Passes::Scrape(admin); Clock::now() < drain_deadline;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      const Passes now = Passes::Scrape(admin);
      if (now.count == last.count) break;
      last = now;
    }
    if (Passes::Scrape(admin).count > window.count) report(load.acknowledged());
    const Passes end = Passes::Scrape(admin);
    std::vector<double> latency;
    for (const SubmitLoad::Ack& a : load.acks()) latency.push_back(a.latency_ms);
    const auto [mean_ms, p99_ms] = end.Since(start);
    const Rss rss = ProcessRss(server.pid());
    std::printf("%d nodes: %lld submissions acknowledged in %.1f s (%lld errors): %.0f/s; "
                "latency p50 %.2f ms, p99 %.2f ms, max %.1f ms; %.0f placed; %.0f passes, "
                "mean %.2f ms, p99 ≤ %.1f ms, %.1f nodes copied per pass; server RSS %.0f MiB "
                "(peak %.0f MiB)\n",
                nodes, static_cast<long long>(load.acknowledged()), load.elapsed_s(),
                static_cast<long long>(load.errors()),
                static_cast<double>(load.acknowledged()) / load.elapsed_s(),
                Percentile(latency, 50), Percentile(latency, 99), Percentile(latency, 100),
                end.placed, end.count - start.count, mean_ms, p99_ms,
                end.count > start.count
                    ? (end.nodes_copied - start.nodes_copied) / (end.count - start.count)
                    : 0,
                rss.rss_mib, rss.peak_mib);
  }
  std::filesystem::remove_all(dir);
}

std::string StringFlag(int argc, char** argv, const char* name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == name) return argv[i + 1];
  }
  return fallback;
}

std::vector<int> IntList(int argc, char** argv, const char* name, std::vector<int> fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) != name) continue;
    std::vector<int> values;
    std::stringstream list(argv[i + 1]);
    for (std::string item; std::getline(list, item, ',');) {
      values.push_back(std::atoi(item.c_str()));
    }
    return values;
  }
  return fallback;
}

}  // namespace
}  // namespace gpupool::bench

int main(int argc, char** argv) {
  using namespace gpupool::bench;
  const std::vector<int> sizes = IntList(argc, argv, "--nodes", {1'000, 10'000});
  const int tasks = Flag(argc, argv, "--tasks", 200'000);
  const int clients = Flag(argc, argv, "--clients", 64);
  const int seconds = Flag(argc, argv, "--seconds", 120);
  const std::string policy = StringFlag(argc, argv, "--policy", "default");
  for (int nodes : sizes) RunSize(nodes, tasks, clients, seconds, policy);
  return 0;
}
