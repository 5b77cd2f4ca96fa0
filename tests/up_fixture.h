// The fixture of the end-to-end tests that reach into running tasks (the gateway, exec, a running
// task's files): a real `gpupool up` in a temp dir (server and agent in one process, node
// "local" with one simulated GPU, the agent's tunnel over loopback), its admin's client and the
// CLI's environment, and another project's member for the tests that prove isolation.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/client.h"
#include "tests/cli_process.h"
#include "tests/server_process.h"

namespace gpupool::testing {

class UpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("gpupool-up");
    std::vector<std::string> args = {"--simulate-gpus", "A100-80GB:1", "--node-name", "local"};
    for (std::string& a : ExtraUpArgs()) args.push_back(std::move(a));
    up_ = std::make_unique<ServerProcess>(dir_, args, "up");
    admin_ = up_->ReadCredentials();
    client_ = std::make_unique<api::Client>(admin_.endpoint, admin_.access_key, admin_.secret_key);
    ASSERT_TRUE(Eventually([&] { return client_->CallJson("GET", "/v1/nodes/local").has_value(); },
                           std::chrono::seconds(20)));
  }
  void TearDown() override {
    client_.reset();
    up_.reset();
    std::filesystem::remove_all(dir_);
  }

  // More flags for `gpupool up` (a fixture's own configuration).
  virtual std::vector<std::string> ExtraUpArgs() const { return {}; }

  // The admin's call, expected to succeed; its JSON answer.
  nlohmann::json Call(const std::string& method, const std::string& path,
                      const nlohmann::json& body = nullptr) {
    auto r = client_->CallJson(method, path, body.is_null() ? "" : body.dump());
    EXPECT_TRUE(r) << method << " " << path << ": " << r.error().message;
    return r ? *r : nlohmann::json();
  }

  // The CLI's whole environment: the admin's key, HOME in the test's dir.
  std::map<std::string, std::string> CliEnv() const {
    return {{"GPUPOOL_ENDPOINT", admin_.endpoint},
            {"GPUPOOL_ACCESS_KEY", admin_.access_key},
            {"GPUPOOL_SECRET_KEY", admin_.secret_key},
            {"HOME", dir_},
            {"PATH", "/usr/bin:/bin"}};
  }
  CliRun Cli(const std::vector<std::string>& args, const std::string& input = "") {
    return RunCli(args, CliEnv(), input);
  }

  // A member of another project ("other"), made once: its key.
  Credentials OtherProjectsMember() {
    Call("POST", "/v1/projects", {{"id", "other"}, {"name", "other"}});
    Call("POST", "/v1/users", {{"id", "mallory"}, {"role", "member"}, {"projects", {"other"}}});
    const nlohmann::json key = Call("POST", "/v1/users/mallory/keys", {{"description", "test"}});
    return {admin_.endpoint, key["access_key"], key["secret_key"]};
  }

  std::string dir_;
  std::unique_ptr<ServerProcess> up_;
  Credentials admin_;
  std::unique_ptr<api::Client> client_;
};

}  // namespace gpupool::testing
