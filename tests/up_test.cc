// `gpupool up` as a user meets it: one process with the control plane and a local agent on
// simulated GPUs; a submitted command runs to success on this machine, and SIGTERM stops it all.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "api/client.h"
#include "tests/cli_run.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

using nlohmann::json;
using testing::Eventually;

// Whether this machine lets the agent enforce memory limits: root, and a memory controller (v1,
// or v2 with memory delegated below the root group).
bool MemoryCgroupAvailable() {
  if (::geteuid() != 0) return false;
  if (std::filesystem::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes")) return true;
  std::ifstream controllers("/sys/fs/cgroup/cgroup.subtree_control");
  std::string word;
  while (controllers >> word) {
    if (word == "memory") return true;
  }
  return false;
}

TEST(Up, RunsASubmittedCommandOnTheLocalNode) {
  const std::string dir = testing::MakeTempDir("gpupool-up");
  {
    testing::ServerProcess up(dir, {"--simulate-gpus", "A100-80GB:2", "--node-name", "local"},
                              "up");
    const testing::Credentials admin = up.ReadCredentials();
    EXPECT_EQ(admin.endpoint, up.endpoint());
    api::Client client(up.endpoint(), admin.access_key, admin.secret_key);
    auto node = [&] { return client.CallJson("GET", "/v1/nodes/local"); };
    ASSERT_TRUE(Eventually([&] { return node().has_value(); })) << "the local agent registers";
    EXPECT_EQ((*node())["status"], "ready");
    EXPECT_EQ((*node())["gpus"].size(), 2u);
    auto submitted = client.CallJson(
        "POST", "/v1/tasks",
        json{{"command", {"/bin/sh", "-c", "echo hello"}}, {"gpu_count", 1}}.dump());
    ASSERT_TRUE(submitted) << submitted.error().message;
    const std::string id = (*submitted)["id"];
    std::string state;
    ASSERT_TRUE(Eventually([&] {
      auto t = client.CallJson("GET", "/v1/tasks/" + id);
      state = t ? (*t)["state"].get<std::string>() : "?";
      return state == "succeeded" || state == "failed";
    })) << "last state: " << state;
    EXPECT_EQ(state, "succeeded");
    EXPECT_EQ(up.Terminate(), 0);
  }
  std::filesystem::remove_all(dir);
}

// Resources are isolated end to end: a task over its memory limit is killed by the kernel and the
// server hears why.
TEST(Up, ATaskOverItsMemoryLimitIsKilledAndReportedAsSuch) {
  if (!MemoryCgroupAvailable()) {
    GTEST_SKIP() << "no writable memory cgroup controller here (need root and cgroup v1 "
                    "memory or v2 with memory enabled): the limit cannot be enforced";
  }
  const std::string dir = testing::MakeTempDir("gpupool-up-oom");
  {
    testing::ServerProcess up(dir, {"--simulate-gpus", "A100-80GB:1", "--node-name", "local"},
                              "up");
    const testing::Credentials admin = up.ReadCredentials();
    api::Client client(up.endpoint(), admin.access_key, admin.secret_key);
    auto submitted = client.CallJson(
        "POST", "/v1/tasks",
        json{{"command", {"python3", "-c", "a = bytearray(512 << 20); print(len(a))"}},
             {"memory_mib", 64},
             {"cpu_milli", 500}}
            .dump());
    ASSERT_TRUE(submitted) << submitted.error().message;
    const std::string id = (*submitted)["id"];
    json task;
    ASSERT_TRUE(Eventually(
        [&] {
          auto t = client.CallJson("GET", "/v1/tasks/" + id);
          if (t) task = *t;
          return t && (task["state"] == "succeeded" || task["state"] == "failed");
        },
        std::chrono::seconds(20)))
        << task.dump();
    EXPECT_EQ(task["state"], "failed");
    EXPECT_NE(task["reason"].get<std::string>().find("oom-killed"), std::string::npos)
        << task["reason"];
    EXPECT_EQ(up.Terminate(), 0);
  }
  std::filesystem::remove_all(dir);
}

// Inputs given at submission reach the task on an idle pool (it is held while they upload), and a
// held task waits, with a free GPU, until it is released: the real CLI, server and agent.
TEST(Up, SubmitWithAnInputRunsOnItAndAHeldTaskWaitsForItsRelease) {
  const std::string dir = testing::MakeTempDir("gpupool-up-input");
  const std::string home = testing::MakeTempDir("gpupool-up-input-home");
  {
    testing::ServerProcess up(dir, {"--simulate-gpus", "A100-80GB:1", "--node-name", "local"},
                              "up");
    const testing::Credentials admin = up.ReadCredentials();
    api::Client client(up.endpoint(), admin.access_key, admin.secret_key);
    ASSERT_TRUE(Eventually([&] { return client.CallJson("GET", "/v1/nodes/local").has_value(); }))
        << "the local agent registers";
    const std::map<std::string, std::string> env = {{"HOME", home},
                                                    {"GPUPOOL_ENDPOINT", up.endpoint()},
                                                    {"GPUPOOL_ACCESS_KEY", admin.access_key},
                                                    {"GPUPOOL_SECRET_KEY", admin.secret_key}};
    const auto submit = [&](std::vector<std::string> args) {
      args.insert(args.begin(), "submit");
      testing::CliRun r = testing::RunCli(args, env);
      EXPECT_EQ(r.exit_code, 0) << r;
      return r.out.empty() ? std::string() : r.out.substr(0, r.out.size() - 1);
    };
    const auto state = [&](const std::string& id) {
      auto t = client.CallJson("GET", "/v1/tasks/" + id);
      return t ? (*t)["state"].get<std::string>() + ((*t)["held"] == true ? " (held)" : "") : "?";
    };
    const auto ended = [&](const std::string& id) {
      std::string last;
      EXPECT_TRUE(Eventually(
          [&] {
            last = state(id);
            return last == "succeeded" || last == "failed";
          },
          std::chrono::seconds(30)))
          << id << " is still " << last;
      return last;
    };
    // Its output, once the agent has shipped all of it (-f waits for that).
    const auto stdout_of = [&](const std::string& id) {
      testing::CliRun logs = testing::RunCli({"logs", "-f", id, "--stream", "stdout"}, env);
      EXPECT_EQ(logs.exit_code, 0) << logs;
      return logs.out;
    };

    const std::string held = submit({"--hold", "--", "sh", "-c", "echo released"});
    ASSERT_FALSE(held.empty());
    std::filesystem::create_directories(home + "/data");
    std::ofstream(home + "/data/x") << "hello from an input\n";
    const std::string with_input =
        submit({"--input", home + "/data:data", "--", "sh", "-c", "cat data/x"});
    ASSERT_FALSE(with_input.empty());
    EXPECT_EQ(ended(with_input), "succeeded");
    EXPECT_EQ(stdout_of(with_input), "hello from an input\n");

    EXPECT_EQ(state(held), "pending (held)")
        << "the scheduler placed the other task on the idle GPU and left this one alone";
    testing::CliRun released = testing::RunCli({"release", held}, env);
    ASSERT_EQ(released.exit_code, 0) << released;
    EXPECT_EQ(ended(held), "succeeded");
    EXPECT_EQ(stdout_of(held), "released\n");
    EXPECT_EQ(up.Terminate(), 0);
  }
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(home);
}

}  // namespace
}  // namespace gpupool
