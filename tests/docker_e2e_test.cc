// End to end with docker: `gpupool up` (a real server and its local agent) pointed at a private
// Docker daemon the test starts, with the image the test builds. Tasks with an image run in
// containers — to success, to a failure with its exit code, with the image's default command —
// while a task without one still runs as a process; finished containers are removed; exec runs
// in a task's container; a container saved as an image with a snapshot runs a new task (on a
// node that had to load it) and the task's own resumed run; and a volume is bind-mounted into a
// container, read-write or read-only.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/runtime/docker_api.h"
#include "agent/runtime/unix_http.h"
#include "api/client.h"
#include "core/base64.h"
#include "tests/cli_process.h"
#include "tests/dockerd.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using testing::Eventually;

constexpr const char* kImage = "gpupool-e2e:1";

// A private dockerd with the test image, and `gpupool up` (one simulated GPU) using it.
class DockerE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why_not;
    dockerd_ = testing::Dockerd::Start(&why_not);
    if (!dockerd_) GTEST_SKIP() << "dockerd cannot start here: " << why_not;
    const auto built = dockerd_->BuildTestImage(kImage);
    ASSERT_TRUE(built) << built.error().message;
    dir_ = testing::MakeTempDir("gpupool-up-docker");
    chmod(dir_.c_str(), 0711);  // process tasks run under their own uids
    up_ = std::make_unique<testing::ServerProcess>(
        dir_,
        std::vector<std::string>{"--simulate-gpus", "A100-80GB:1", "--node-name", "local",
                                 "--docker-socket", dockerd_->socket(), "--docker-network", "none"},
        "up");
    const testing::Credentials admin = up_->ReadCredentials();
    env_ = {{"GPUPOOL_ENDPOINT", admin.endpoint},
            {"GPUPOOL_ACCESS_KEY", admin.access_key},
            {"GPUPOOL_SECRET_KEY", admin.secret_key},
            {"HOME", dir_},
            {"PATH", "/usr/bin:/bin"}};
    client_ = std::make_unique<api::Client>(up_->endpoint(), admin.access_key, admin.secret_key);
  }
  void TearDown() override {
    if (up_) {
      EXPECT_EQ(up_->Terminate(), 0);
    }
    up_.reset();
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }

  // `gpupool exec TASK -- COMMAND…`, tried until it succeeds (the task's container runs and its
  // command got that far) or a minute passed: the last try.
  testing::CliRun ExecOnceItRuns(const std::string& task, const std::vector<std::string>& command) {
    std::vector<std::string> args = {"exec", task, "--"};
    args.insert(args.end(), command.begin(), command.end());
    testing::CliRun r;
    (void)Eventually(
        [&] {
          r = testing::RunCli(args, env_);
          return r.exit_code == 0;
        },
        seconds(60));
    return r;
  }

  std::unique_ptr<testing::Dockerd> dockerd_;
  std::string dir_;
  std::unique_ptr<testing::ServerProcess> up_;
  std::map<std::string, std::string> env_;  // the CLI's
  std::unique_ptr<api::Client> client_;
};

TEST_F(DockerE2e, ImageTasksRunInContainersThroughServerAndAgent) {
  auto submit = [&](const json& body) {
    auto r = client_->CallJson("POST", "/v1/tasks", body.dump());
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
          auto t = client_->CallJson("GET", "/v1/tasks/" + id);
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
  auto nodes = client_->CallJson("GET", "/v1/nodes");
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
  agent::UnixHttpClient docker(dockerd_->socket());
  std::string left;
  EXPECT_TRUE(Eventually(
      [&] {
        auto list = docker.Call("GET", std::string(agent::docker::kApi) + "/containers/json?all=1");
        left = list ? list->body : list.error().message;
        return list && json::parse(list->body, nullptr, false) == json::array();
      },
      seconds(30)))
      << left;
}

// Volumes in containers (docs/volumes.md): a bind mount at the path asked for, so what a container
// wrote there a process task reads after it; a read-only mount refuses the container's writes.
TEST_F(DockerE2e, AContainerWritesAVolumeThatAProcessTaskReadsAndAReadOnlyMountRefusesWrites) {
  auto call = [&](const std::string& method, const std::string& path, const json& body) {
    auto r = client_->CallJson(method, path, body.is_null() ? "" : body.dump());
    EXPECT_TRUE(r) << method << " " << path << ": " << (r ? "" : r.error().message);
    return r ? *r : json();
  };
  auto ended = [&](const std::string& id) {
    json task;
    EXPECT_TRUE(Eventually(
        [&] {
          task = call("GET", "/v1/tasks/" + id, nullptr);
          const std::string state = task.value("state", "");
          return state == "succeeded" || state == "failed" || state == "stopped";
        },
        seconds(60)))
        << task.dump();
    return task;
  };
  auto output = [&](const std::string& id, const std::string& stream) {
    std::string out;
    (void)Eventually(
        [&] {
          out = Base64Decode(call("GET", "/v1/tasks/" + id + "/logs?stream=" + stream, nullptr)
                                 .value("data_b64", ""))
                    .value_or("");
          return !out.empty();
        },
        seconds(10));
    return out;
  };
  call("POST", "/v1/volumes", {{"name", "data"}, {"size_bytes", 1 << 30}});
  const json rw = {{{"volume", "data"}, {"path", "/root/data"}}};
  const json ro = {{{"volume", "data"}, {"path", "/root/data"}, {"read_only", true}}};
  const std::string writer = call("POST", "/v1/tasks",
                                  {{"image", kImage},
                                   {"command", {"/bin/sh", "-c", "echo from-container > data/x"}},
                                   {"volumes", rw}})["id"];
  EXPECT_EQ(ended(writer)["state"], "succeeded");
  const std::string reader =
      call("POST", "/v1/tasks", {{"command", {"cat", "/root/data/x"}}, {"volumes", rw}})["id"];
  EXPECT_EQ(ended(reader)["state"], "succeeded");
  EXPECT_EQ(output(reader, "stdout"), "from-container\n");
  const std::string refused = call("POST", "/v1/tasks",
                                   {{"image", kImage},
                                    {"command", {"/bin/sh", "-c", "cat data/x; echo y > data/y"}},
                                    {"volumes", ro}})["id"];
  const json failed = ended(refused);
  EXPECT_EQ(failed["state"], "failed") << failed.dump();
  EXPECT_EQ(output(refused, "stdout"), "from-container\n");
  EXPECT_NE(output(refused, "stderr").find("Read-only file system"), std::string::npos)
      << output(refused, "stderr");
}

// gpupool exec into a container (docker's own exec, through the Engine API): stdout and stderr
// apart, the exit status, stdin to its end, a terminal with -t, and a command not found.
TEST_F(DockerE2e, ExecRunsInTheTasksContainer) {
  auto task = client_->CallJson(
      "POST", "/v1/tasks",
      json{{"image", kImage}, {"command", {"/bin/sh", "-c", "echo marker > m; exec sleep 600"}}}
          .dump());
  ASSERT_TRUE(task) << task.error().message;
  const std::string id = (*task)["id"];
  testing::CliRun r = ExecOnceItRuns(id, {"cat", "m"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out, "marker\n") << r;

  r = testing::RunCli({"exec", id, "--", "/bin/sh", "-c", "echo out; echo err >&2; pwd; exit 3"},
                      env_);
  EXPECT_EQ(r.exit_code, 3) << r;
  EXPECT_EQ(r.out, "out\n/root\n") << r;
  EXPECT_EQ(r.err, "err\n") << r;

  r = testing::RunCli({"exec", "-i", id, "--", "cat"}, env_, "through stdin\n");
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out, "through stdin\n") << r;

  r = testing::RunCli({"exec", "-t", id, "--", "/bin/sh", "-c", "test -t 0 && echo a terminal"},
                      env_);
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out, "a terminal\r\n") << r;

  r = testing::RunCli({"exec", id, "--", "no-such-command"}, env_);
  EXPECT_EQ(r.exit_code, 127) << r;
  EXPECT_NE(r.err.find("no-such-command"), std::string::npos) << r;

  // A client that goes away takes its command with it (Docker cannot stop an exec: the agent
  // kills the process Docker reports, seen here from the host).
  {
    testing::CliProcess left({"exec", id, "--", "/bin/sh", "-c", "echo started; exec sleep 77"},
                             env_);
    ASSERT_TRUE(left.WaitForStdout("started\n")) << left.Output();
    EXPECT_EQ(std::system("pgrep -f 'slee[p] 77' > /dev/null"), 0);
  }
  EXPECT_TRUE(Eventually([] { return std::system("pgrep -f 'slee[p] 77' > /dev/null") != 0; }))
      << "the command of a client that went away still runs";
}

// "save image": the changes a task made outside its workspace, saved with a snapshot, are there
// in a new task started from it — after the image was removed from Docker, so that the agent
// loads it from the snapshot's chunks — and in the task's own run resumed after a stop; the
// image carries the task's image's configuration, not the container's variables.
TEST_F(DockerE2e, AContainerSavedAsAnImageRunsANewTaskAndTheResumedRun) {
  agent::UnixHttpClient docker(dockerd_->socket());
  const std::string api = std::string(agent::docker::kApi);
  auto get_task = [&](const std::string& id) {
    auto t = client_->CallJson("GET", "/v1/tasks/" + id);
    return t ? *t : json::object();
  };
  auto ends = [&](const std::string& id, const std::string& state) {
    json t;
    const bool ok = Eventually(
        [&] {
          t = get_task(id);
          return t.value("state", "") == state;
        },
        seconds(60));
    EXPECT_TRUE(ok) << t.dump();
    return t;
  };

  // Installs something outside its workspace and runs on; a run that finds it there ends at
  // once.
  auto task =
      client_->CallJson("POST", "/v1/tasks",
                        json{{"image", kImage},
                             {"command",
                              {"/bin/sh", "-c",
                               "if [ -f /installed ]; then exit 0; fi; "
                               "echo tool-1.0 > /installed; echo 7 > step; exec sleep 600"}}}
                            .dump());
  ASSERT_TRUE(task) << task.error().message;
  const std::string id = (*task)["id"];
  testing::CliRun r = ExecOnceItRuns(id, {"cat", "/installed"});
  ASSERT_EQ(r.exit_code, 0) << r;

  r = testing::RunCli({"snapshot", id, "--image", "--json"}, env_);
  ASSERT_EQ(r.exit_code, 0) << r;
  const json saved = json::parse(r.out);
  ASSERT_TRUE(saved.contains("image")) << saved.dump();
  const std::string image_id = saved["image"]["id"];
  EXPECT_EQ(saved["image"]["base"], kImage);
  EXPECT_EQ(saved["image"]["saved"], true);
  EXPECT_GT(saved["image"]["bytes"].get<int64_t>(), 0);
  auto inspect = docker.Call("GET", api + "/images/" + image_id + "/json");
  ASSERT_TRUE(inspect && inspect->status == 200) << (inspect ? inspect->body : "");
  EXPECT_EQ(inspect->body.find("GPUPOOL_TASK_TOKEN"), std::string::npos)
      << "the saved image keeps the container's variables: " << inspect->body;

  // Gone from Docker: a task started from the snapshot loads it from the chunks.
  auto removed = docker.Call("DELETE", api + "/images/" + image_id + "?force=1");
  ASSERT_TRUE(removed && removed->status == 200) << (removed ? removed->body : "");
  auto fresh = client_->CallJson(
      "POST", "/v1/tasks",
      json{{"from_snapshot", saved["id"]},
           {"command",
            {"/bin/sh", "-c", "test \"$(cat /installed)\" = tool-1.0 && test \"$(cat step)\" = 7"}}}
          .dump());
  ASSERT_TRUE(fresh) << fresh.error().message;
  EXPECT_EQ((*fresh)["image"], kImage) << "it runs in the image the snapshot was saved over";
  const json done = ends((*fresh)["id"], "succeeded");
  EXPECT_EQ(done.value("resume_from", ""), saved["id"]) << done.dump();

  // Stopped (its last snapshot keeps the run's image) and resumed: the new run runs in it.
  r = testing::RunCli({"stop", id}, env_);
  ASSERT_EQ(r.exit_code, 0) << r;
  ends(id, "stopped");
  json last;  // the stop's snapshot, recorded once the node took it
  ASSERT_TRUE(Eventually(
      [&] {
        auto list = client_->CallJson("GET", "/v1/snapshots?task=" + id);
        if (list && !(*list)["snapshots"].empty()) last = (*list)["snapshots"].back();
        return last.value("trigger", "") == "stop";
      },
      seconds(60)))
      << last.dump();
  EXPECT_EQ(last["image"]["id"], image_id) << last.dump();
  EXPECT_EQ(last["image"]["saved"], false) << last.dump();
  r = testing::RunCli({"resume", id}, env_);
  ASSERT_EQ(r.exit_code, 0) << r;
  const json resumed = ends(id, "succeeded");
  EXPECT_EQ(resumed["run"], 2) << resumed.dump();
}

}  // namespace
}  // namespace gpupool
