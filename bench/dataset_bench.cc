// dataset_bench: datasets through a real server, a real agent and the real CLI, the figures of
// docs/benchmarks.md "Datasets". A directory of --mib MiB (64 MiB files of random bytes) is
// pushed (`gpupool dataset push`); then pushed again unchanged; then again after --change-mib
// MiB were rewritten in one piece (and a small file added), and again after as much was rewritten
// in 1 MiB pieces spread over the files. Measured: each
// push's time and what it sent (the version's new_bytes), and the time from a task's submission
// to its process running with the dataset mounted — the first on the node (every chunk fetched
// from the server over loopback and written) and a second one (the version already there).
//   build/bench/dataset_bench [--mib 1024] [--change-mib 10]
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "api/client.h"
#include "tests/agent_process.h"
#include "tests/cli_process.h"
#include "tests/server_process.h"

namespace {

namespace fs = std::filesystem;
using gpupool::testing::AgentProcess;
using gpupool::testing::Eventually;
using gpupool::testing::ServerProcess;
using nlohmann::json;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

void FillRandom(const std::string& path, int64_t bytes, std::mt19937_64& rng) {
  std::ofstream out(path, std::ios::binary);
  std::vector<uint64_t> block(1 << 17);  // 1 MiB
  for (int64_t left = bytes; left > 0; left -= 1 << 20) {
    for (uint64_t& w : block) w = rng();
    out.write(reinterpret_cast<const char*>(block.data()), std::min<int64_t>(left, 1 << 20));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int mib = 1024;
  int change_mib = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--mib") {
      mib = value;
    } else if (flag == "--change-mib") {
      change_mib = value;
    } else {
      std::fprintf(stderr, "usage: dataset_bench [--mib N] [--change-mib N]\n");
      return 2;
    }
  }
  const std::string server_dir = gpupool::testing::MakeTempDir("dataset-bench-server");
  const std::string node_dir = gpupool::testing::MakeTempDir("dataset-bench-node");
  const std::string home = gpupool::testing::MakeTempDir("dataset-bench-home");
  const std::string local = gpupool::testing::MakeTempDir("dataset-bench-local");
  fs::permissions(node_dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  std::mt19937_64 rng(42);
  const int files = (mib + 63) / 64;
  for (int f = 0; f < files; ++f) {
    FillRandom(local + "/shard-" + std::to_string(f) + ".bin",
               int64_t{std::min(64, mib - 64 * f)} << 20, rng);
  }
  int rc = 0;
  {
    ServerProcess server(server_dir, {"--key-rate", "0"});  // it polls with the agent's key
    const gpupool::testing::Credentials creds = server.ReadCredentials();
    AgentProcess agent(creds, "bench-node", node_dir);
    gpupool::api::Client client(creds.endpoint, creds.access_key, creds.secret_key);
    const std::map<std::string, std::string> env = {{"HOME", home},
                                                    {"GPUPOOL_ENDPOINT", creds.endpoint},
                                                    {"GPUPOOL_ACCESS_KEY", creds.access_key},
                                                    {"GPUPOOL_SECRET_KEY", creds.secret_key}};
    auto push = [&](const char* what) {
      const auto start = std::chrono::steady_clock::now();
      const gpupool::testing::CliRun r =
          gpupool::testing::RunCli({"dataset", "push", local, "bench"}, env);
      const double s = Seconds(start);
      if (r.exit_code != 0) {
        std::fprintf(stderr, "push failed: %s\n", r.err.c_str());
        rc = 1;
        return;
      }
      const json d = *client.CallJson("GET", "/v1/datasets/bench", "");
      const json& v = d["versions"].back();
      std::printf("%s: %.2f s (%.0f MB/s of the directory), sent %.1f MiB of %.1f MiB (%.2f%%)\n",
                  what, s, v["bytes"].get<double>() / 1e6 / s,
                  v["new_bytes"].get<double>() / (1 << 20), v["bytes"].get<double>() / (1 << 20),
                  100.0 * v["new_bytes"].get<double>() / v["bytes"].get<double>());
    };
    std::printf("== a directory of %d MiB in %d file(s)\n", mib, files);
    push("first push (everything new)");
    push("second push, unchanged (no new version: the figures are the first's)");
    // Rewrites `mib` MiB of the directory: in one piece in the first file, or in 1 MiB pieces
    // spread over the files (each at a different offset).
    auto rewrite = [&](bool spread) {
      std::vector<char> piece(1 << 20);
      for (int c = 0; c < change_mib; ++c) {
        const int file = spread ? c % files : 0;
        const off_t at = spread ? (off_t{c / files} * 5 + 3) << 20 : (off_t{c} + 20) << 20;
        const std::string path = local + "/shard-" + std::to_string(file) + ".bin";
        const int fd = ::open(path.c_str(), O_WRONLY);
        for (char& ch : piece) ch = static_cast<char>(rng());
        if (::pwrite(fd, piece.data(), piece.size(), at) != static_cast<ssize_t>(piece.size())) {
          rc = 1;
        }
        ::close(fd);
      }
    };
    rewrite(/*spread=*/false);
    std::ofstream(local + "/README") << "bench\n";
    push(("third push, " + std::to_string(change_mib) + " MiB rewritten in one piece").c_str());
    rewrite(/*spread=*/true);
    push(("fourth push, " + std::to_string(change_mib) + " MiB rewritten in 1 MiB pieces over " +
          std::to_string(std::min(change_mib, files)) + " files")
             .c_str());

    auto mount = [&](int version) {
      const auto start = std::chrono::steady_clock::now();
      const json task = *client.CallJson(
          "POST", "/v1/tasks",
          json{{"command", {"sleep", "300"}},
               {"datasets", {{{"dataset", "bench"}, {"version", version}, {"path", "/root/d"}}}}}
              .dump());
      const std::string id = task["id"];
      json t;
      Eventually(
          [&] {
            t = *client.CallJson("GET", "/v1/tasks/" + id, "");
            return t["state"] == "running" || t["state"] == "failed";
          },
          std::chrono::seconds(600));
      const double s = Seconds(start);
      (void)client.CallJson("POST", "/v1/tasks/" + id + "/stop", R"({"discard":true})");
      if (t["state"] != "running") {
        std::fprintf(stderr, "task %s: %s\n", id.c_str(), t.dump().c_str());
        rc = 1;
      }
      return s;
    };
    const double first = mount(1);
    std::printf("mount, first task on the node (every chunk fetched): %.2f s (%.0f MB/s)\n", first,
                mib * 1.048576 / first);
    std::printf("mount, second task (the version on the node): %.2f s\n", mount(1));
    std::printf("mount, the next version (its new chunks fetched): %.2f s\n", mount(2));
  }
  std::error_code ec;
  for (const std::string& d : {server_dir, node_dir, home, local}) fs::remove_all(d, ec);
  return rc;
}
