// Job arrays, measured (not a test): a real `gpupool server` process (SQLite in a temp dir,
// loopback only) with an idle pool of N nodes × 8 A100-80GB registered through the API. First
// the latency of accepting one array in one request (POST /v1/arrays, answered once its one batch
// is durable) for 2,000 and 10,000 elements, held so that nothing is placed meanwhile, each
// stopped again after; then one array of 10,000 one-GPU elements submitted to be run: the time
// from the request until the scheduler placed all of them (the server's placed counter, scraped
// every 5 ms) and the passes it took.
//   array_bench [--nodes 1250] [--elements 10000] [--repeat 5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/client.h"
#include "bench/submit_load.h"
#include "tests/server_process.h"

namespace gpupool::bench {
namespace {

std::string ArrayBody(int elements, bool hold) {
  return std::string(R"({"name":"sweep","cpu_milli":1000,"memory_mib":2048,"gpu_count":1,)") +
         R"("command":["python3","train.py"],"hold":)" + (hold ? "true" : "false") +
         R"(,"array":"0-)" + std::to_string(elements - 1) + R"("})";
}

void RegisterNodes(const testing::Credentials& admin, int nodes) {
  constexpr int kRegistrars = 16;
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
        if (!res || res->status / 100 != 2) {
          std::fprintf(stderr, "array_bench: registering node-%d failed\n", i);
          std::exit(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
}

// POSTs the array and returns (milliseconds to the answer, the array's id).
std::pair<double, std::string> Submit(api::Client& client, int elements, bool hold) {
  const auto t0 = Clock::now();
  auto res = client.Call("POST", "/v1/arrays", ArrayBody(elements, hold));
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!res || res->status != 201) {
    std::fprintf(stderr, "array_bench: POST /v1/arrays failed: %s\n",
                 res ? res->body.c_str() : res.error().message.c_str());
    std::exit(1);
  }
  return {ms, nlohmann::json::parse(res->body)["id"].get<std::string>()};
}

double Metric(const testing::Credentials& admin, const std::string& name) {
  const auto m = ScrapeMetrics(admin);
  const auto it = m.find(name);
  return it == m.end() ? 0 : it->second;
}

void Run(int nodes, int elements, int repeat) {
  const std::string dir = testing::MakeTempDir("gpupool-array-bench");
  {
    testing::ServerProcess server(dir, {"--node-timeout", "86400", "--key-rate", "0"});
    testing::Credentials admin = server.ReadCredentials();
    admin.endpoint = server.endpoint();
    RegisterNodes(admin, nodes);
    api::Client client(admin.endpoint, admin.access_key, admin.secret_key);
    std::printf("idle pool: %d nodes × 8 A100-80GB\n", nodes);
    for (int size : {2000, elements}) {
      std::vector<double> ms;
      for (int r = 0; r < repeat; ++r) {
        auto [took, id] = Submit(client, size, /*hold=*/true);
        ms.push_back(took);
        auto stopped = client.Call("POST", "/v1/arrays/" + id + "/stop", "");
        if (!stopped || stopped->status != 200) {
          std::fprintf(stderr, "array_bench: stopping %s failed\n", id.c_str());
          std::exit(1);
        }
      }
      std::printf(
          "accept one array of %5d elements (one request, durable): p50 %.1f ms, "
          "min %.1f ms, max %.1f ms over %d\n",
          size, Percentile(ms, 50), Percentile(ms, 0), Percentile(ms, 100), repeat);
    }
    const double placed0 = Metric(admin, "gpupool_scheduler_placed_total");
    const double passes0 = Metric(admin, "gpupool_scheduler_cycle_seconds_count");
    const auto t0 = Clock::now();
    auto [accept_ms, id] = Submit(client, elements, /*hold=*/false);
    double placed = 0;
    while ((placed = Metric(admin, "gpupool_scheduler_placed_total") - placed0) < elements) {
      if (Clock::now() - t0 > std::chrono::seconds(120)) {
        std::fprintf(stderr, "array_bench: only %.0f of %d placed after 120 s\n", placed, elements);
        std::exit(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const double all_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    std::printf(
        "array %s of %d one-GPU elements: accepted in %.1f ms, all placed %.0f ms after "
        "the request, in %.0f scheduling passes\n",
        id.c_str(), elements, accept_ms, all_ms,
        Metric(admin, "gpupool_scheduler_cycle_seconds_count") - passes0);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpupool::bench

int main(int argc, char** argv) {
  using gpupool::bench::Flag;
  gpupool::bench::Run(Flag(argc, argv, "--nodes", 1250), Flag(argc, argv, "--elements", 10000),
                      Flag(argc, argv, "--repeat", 5));
  return 0;
}
