// `gpupool up` as a user meets it: one process with the control plane and a local agent on
// simulated GPUs; a submitted command runs to success on this machine, and SIGTERM stops it all.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "api/client.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

using nlohmann::json;
using testing::Eventually;

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

}  // namespace
}  // namespace gpupool
