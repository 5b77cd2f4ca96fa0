// End to end with docker: `gpupool up` (a real server and its local agent) pointed at a private
// Docker daemon the test starts, with the image the test builds. Tasks with an image run in
// containers — to success, to a failure with its exit code, with the image's default command —
// while a task without one still runs as a process; finished containers are removed.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/runtime/docker_api.h"
#include "agent/runtime/unix_http.h"
#include "api/client.h"
#include "tests/cli_process.h"
#include "tests/dockerd.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using testing::Eventually;

constexpr const char* kImage = "gpupool-e2e:1";

TEST(DockerE2e, ImageTasksRunInContainersThroughServerAndAgent) {
  std::string why_not;
  auto dockerd = testing::Dockerd::Start(&why_not);
  if (!dockerd) GTEST_SKIP() << "dockerd cannot start here: " << why_not;
  const auto built = dockerd->BuildTestImage(kImage);
  ASSERT_TRUE(built) << built.error().message;

  const std::string dir = testing::MakeTempDir("gpupool-up-docker");
  chmod(dir.c_str(), 0711);  // process tasks run under their own uids
  {
    testing::ServerProcess up(dir,
                              {"--simulate-gpus", "A100-80GB:1", "--node-name", "local",
                               "--docker-socket", dockerd->socket(), "--docker-network", "none"},
                              "up");
    const testing::Credentials admin = up.ReadCredentials();
    api::Client client(up.endpoint(), admin.access_key, admin.secret_key);
    auto submit = [&](const json& body) {
      auto r = client.CallJson("POST", "/v1/tasks", body.dump());
      EXPECT_TRUE(r) << (r ? "" : r.error().message);
      return r ? (*r)["id"].get<std::string>() : std::string();
    };
    const std::string ok =
        submit({{"image", kImage},
                {"command", {"/bin/sh", "-c", "echo in a container; test \"$(pwd)\" = /root"}}});
    // A GPU task with an image on simulated GPUs: the environment alone, no NVIDIA devices
    // (asking Docker for them failed it with `could not select device driver "nvidia"`).
    const std::string gpu =
        submit({{"image", kImage},
                {"gpu_count", 1},
                {"command",
                 {"/bin/sh", "-c",
                  "test -n \"$CUDA_VISIBLE_DEVICES\" && test -n \"$NVIDIA_VISIBLE_DEVICES\""}}});
    const std::string bad = submit({{"image", kImage}, {"command", {"/bin/sh", "-c", "exit 3"}}});
    const std::string dflt = submit({{"image", kImage}});
    const std::string process = submit({{"command", {"/bin/sh", "-c", "exit 0"}}});

    auto final_task = [&](const std::string& id) {
      json task;
      EXPECT_TRUE(Eventually(
          [&] {
            auto t = client.CallJson("GET", "/v1/tasks/" + id);
            if (t) task = *t;
            const std::string state = t ? task.value("state", "") : "";
            return state == "succeeded" || state == "failed" || state == "stopped";
          },
          seconds(60)))
          << task.dump();
      return task;
    };
    EXPECT_EQ(final_task(ok)["state"], "succeeded") << final_task(ok).dump();
    EXPECT_EQ(final_task(gpu)["state"], "succeeded") << final_task(gpu).dump();
    auto nodes = client.CallJson("GET", "/v1/nodes");
    ASSERT_TRUE(nodes);
    const json& node = (*nodes)["nodes"][0];
    EXPECT_EQ(node["docker"], true) << node.dump();
    EXPECT_EQ(node["docker_gpus"], true) << node.dump();
    EXPECT_NE(node["runtime_note"].get<std::string>().find("simulated GPUs"), std::string::npos)
        << node.dump();
    const json failed = final_task(bad);
    EXPECT_EQ(failed["state"], "failed");
    EXPECT_EQ(failed["exit_code"], 3) << failed.dump();
    EXPECT_EQ(failed["reason"], "exited with code 3") << failed.dump();
    EXPECT_EQ(final_task(dflt)["state"], "succeeded") << final_task(dflt).dump();
    EXPECT_EQ(final_task(process)["state"], "succeeded") << final_task(process).dump();

    // Once their ends are reported, the agent removes the containers.
    agent::UnixHttpClient docker(dockerd->socket());
    std::string left;
    EXPECT_TRUE(Eventually(
        [&] {
          auto list =
              docker.Call("GET", std::string(agent::docker::kApi) + "/containers/json?all=1");
          left = list ? list->body : list.error().message;
          return list && json::parse(list->body, nullptr, false) == json::array();
        },
        seconds(30)))
        << left;
    EXPECT_EQ(up.Terminate(), 0);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// gpupool exec into a container (docker's own exec, through the Engine API): stdout and stderr
// apart, the exit status, stdin to its end, a terminal with -t, and a command not found.
TEST(DockerE2e, ExecRunsInTheTasksContainer) {
  std::string why_not;
  auto dockerd = testing::Dockerd::Start(&why_not);
  if (!dockerd) GTEST_SKIP() << "dockerd cannot start here: " << why_not;
  const auto built = dockerd->BuildTestImage(kImage);
  ASSERT_TRUE(built) << built.error().message;

  const std::string dir = testing::MakeTempDir("gpupool-up-docker-exec");
  chmod(dir.c_str(), 0711);
  {
    testing::ServerProcess up(dir,
                              {"--simulate-gpus", "A100-80GB:1", "--node-name", "local",
                               "--docker-socket", dockerd->socket(), "--docker-network", "none"},
                              "up");
    const testing::Credentials admin = up.ReadCredentials();
    const std::map<std::string, std::string> env = {{"GPUPOOL_ENDPOINT", admin.endpoint},
                                                    {"GPUPOOL_ACCESS_KEY", admin.access_key},
                                                    {"GPUPOOL_SECRET_KEY", admin.secret_key},
                                                    {"HOME", dir},
                                                    {"PATH", "/usr/bin:/bin"}};
    api::Client client(up.endpoint(), admin.access_key, admin.secret_key);
    auto task = client.CallJson(
        "POST", "/v1/tasks",
        json{{"image", kImage}, {"command", {"/bin/sh", "-c", "echo marker > m; exec sleep 600"}}}
            .dump());
    ASSERT_TRUE(task) << task.error().message;
    const std::string id = (*task)["id"];
    testing::CliRun r;
    ASSERT_TRUE(Eventually(
        [&] {
          r = testing::RunCli({"exec", id, "--", "cat", "m"}, env);
          return r.exit_code == 0;
        },
        seconds(60)))
        << r;
    EXPECT_EQ(r.out, "marker\n") << r;

    r = testing::RunCli({"exec", id, "--", "/bin/sh", "-c", "echo out; echo err >&2; pwd; exit 3"},
                        env);
    EXPECT_EQ(r.exit_code, 3) << r;
    EXPECT_EQ(r.out, "out\n/root\n") << r;
    EXPECT_EQ(r.err, "err\n") << r;

    r = testing::RunCli({"exec", "-i", id, "--", "cat"}, env, "through stdin\n");
    EXPECT_EQ(r.exit_code, 0) << r;
    EXPECT_EQ(r.out, "through stdin\n") << r;

    r = testing::RunCli({"exec", "-t", id, "--", "/bin/sh", "-c", "test -t 0 && echo a terminal"},
                        env);
    EXPECT_EQ(r.exit_code, 0) << r;
    EXPECT_EQ(r.out, "a terminal\r\n") << r;

    r = testing::RunCli({"exec", id, "--", "no-such-command"}, env);
    EXPECT_EQ(r.exit_code, 127) << r;
    EXPECT_NE(r.err.find("no-such-command"), std::string::npos) << r;

    // A client that goes away takes its command with it (Docker cannot stop an exec: the agent
    // kills the process Docker reports, seen here from the host).
    {
      testing::CliProcess left({"exec", id, "--", "/bin/sh", "-c", "echo started; exec sleep 77"},
                               env);
      ASSERT_TRUE(left.WaitForStdout("started\n")) << left.Output();
      EXPECT_EQ(std::system("pgrep -f 'slee[p] 77' > /dev/null"), 0);
    }
    EXPECT_TRUE(Eventually([] { return std::system("pgrep -f 'slee[p] 77' > /dev/null") != 0; }))
        << "the command of a client that went away still runs";
    EXPECT_EQ(up.Terminate(), 0);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace gpupool
