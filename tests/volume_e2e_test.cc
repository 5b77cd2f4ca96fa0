// End to end: volumes on a real server and two real agents (simulated GPUs, real processes under
// their own uids) that share one directory as their --shared-storage. A node-local volume
// written by one task is read by the next, on the same node; a shared volume written on one node
// is read on the other; a file copied into a running task's volume path lands in the volume, where
// the task sees it; a read-only mount refuses writes (EROFS); a task that fills its volume
// past its size is stopped with the reason; a deleted volume's files are removed by its node.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/client.h"
#include "api/file_transfer.h"
#include "core/base64.h"
#include "tests/agent_process.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::seconds;
using testing::Credentials;
using testing::Eventually;

class VolumeE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shared_ = testing::MakeTempDir("volume-e2e-shared");
    chmod(shared_.c_str(), 0711);
    // The test polls with the admin's key, which the agents use too: no request rate on it.
    pool_ = std::make_unique<testing::PoolProcesses>(
        "volume-e2e", 2, std::vector<std::string>{"--key-rate", "0"},
        std::vector<std::string>{"--shared-storage", shared_});
    if (HasFatalFailure()) return;
    const Credentials& creds = pool_->creds();
    client_ = std::make_unique<api::Client>(creds.endpoint, creds.access_key, creds.secret_key);
  }
  void TearDown() override {
    pool_.reset();
    std::error_code ec;
    fs::remove_all(shared_, ec);
  }

  json Call(const std::string& method, const std::string& path, const json& body = nullptr) {
    auto r = client_->CallJson(method, path, body.is_null() ? "" : body.dump());
    EXPECT_TRUE(r) << method << " " << path << ": " << (r ? "" : r.error().message);
    return r ? *r : json();
  }
  json CreateVolume(const std::string& name, int64_t bytes, bool shared = false) {
    return Call("POST", "/v1/volumes", {{"name", name}, {"size_bytes", bytes}, {"shared", shared}});
  }
  // A shell line in a task that mounts `volumes` ({"volume", "path", "read_only"} objects); with
  // `gpus` 2 it fills a node.
  std::string Submit(const std::string& line, const json& volumes, int gpus = 0) {
    return Call("POST", "/v1/tasks",
                {{"command", {"sh", "-c", line}}, {"gpu_count", gpus}, {"volumes", volumes}})["id"];
  }
  json Task(const std::string& id) { return Call("GET", "/v1/tasks/" + id); }
  // Waits until the task is in `state`; its record then.
  json WaitState(const std::string& id, const std::string& state) {
    json t;
    EXPECT_TRUE(Eventually(
        [&] {
          t = Task(id);
          return t.value("state", "") == state;
        },
        seconds(30)))
        << "task " << id << " is " << t.dump(2);
    return t;
  }
  std::string Output(const std::string& task, const std::string& stream = "stdout") {
    std::string out;
    Eventually(
        [&] {
          const json slice = Call("GET", "/v1/tasks/" + task + "/logs?stream=" + stream);
          out = Base64Decode(slice.value("data_b64", "")).value_or("");
          return !out.empty();
        },
        seconds(10));
    return out;
  }

  std::string shared_;
  std::unique_ptr<testing::PoolProcesses> pool_;
  std::unique_ptr<api::Client> client_;
};

TEST_F(VolumeE2eTest, ANodeLocalVolumeKeepsWhatOneTaskWroteForTheNextAndGoesWhenDeleted) {
  const std::string id = CreateVolume("data", 1 << 30)["id"];
  const json mount = {{{"volume", "data"}, {"path", "/root/data"}}};
  const std::string writer =
      Submit("mkdir -p /root/data/run && echo hello > /root/data/run/x", mount);
  const json wrote = WaitState(writer, "succeeded");
  const std::string node = wrote["placement"]["node"];
  EXPECT_EQ(Call("GET", "/v1/volumes/data")["node"], node);  // bound to its first task's node
  const std::string reader = Submit("cat /root/data/run/x", mount);
  const json read = WaitState(reader, "succeeded");
  EXPECT_EQ(read["placement"]["node"], node);
  EXPECT_EQ(Output(reader), "hello\n");
  // Not in the task's workspace: its files stay the volume's alone.
  testing::AgentProcess* agent = pool_->AgentOf(node);
  ASSERT_NE(agent, nullptr);
  const std::string dir = agent->data_dir() + "/volumes/" + id;
  EXPECT_TRUE(fs::exists(dir + "/run/x"));

  EXPECT_EQ(Call("DELETE", "/v1/volumes/data")["id"], id);
  ASSERT_TRUE(
      Eventually([&] { return Call("GET", "/v1/volumes")["volumes"].empty(); }, seconds(30)))
      << Call("GET", "/v1/volumes").dump(2);
  EXPECT_FALSE(fs::exists(dir));
}

TEST_F(VolumeE2eTest, ASharedVolumeWrittenOnOneNodeIsReadOnTheOther) {
  CreateVolume("common", 1 << 30, /*shared=*/true);
  const json mount = {{{"volume", "common"}, {"path", "/root/common"}}};
  // The writer fills its node (both GPUs) and stays, so the reader runs on the other node.
  const std::string writer =
      Submit("echo from-$GPUPOOL_TASK_ID > /root/common/note && sleep 300", mount, 2);
  const json wrote = WaitState(writer, "running");
  const std::string reader = Submit(
      "until [ -s /root/common/note ]; do sleep 0.05; done; cat /root/common/note", mount, 2);
  const json read = WaitState(reader, "succeeded");
  EXPECT_NE(read["placement"]["node"], wrote["placement"]["node"]);
  EXPECT_EQ(Output(reader), "from-" + writer + "\n");
  Call("POST", "/v1/tasks/" + writer + "/stop");
}

TEST_F(VolumeE2eTest, AFileCopiedIntoARunningTasksVolumeLandsInTheVolume) {
  const std::string id = CreateVolume("inbox", 1 << 30)["id"];
  const std::string task =
      Submit("until [ -s /root/inbox/in.txt ]; do sleep 0.05; done; cat /root/inbox/in.txt",
             json{{{"volume", "inbox"}, {"path", "/root/inbox"}}});
  WaitState(task, "running");
  const std::string local = testing::MakeTempDir("volume-e2e-upload") + "/in.txt";
  { std::ofstream(local) << "uploaded"; }
  const int fd = open(local.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  // The agent's tunnel may still be on its way when the task starts: the upload is retried until
  // the node serves it.
  Result<api::UploadResult> up = MakeError(ErrorCode::kUnavailable, "not tried");
  Eventually(
      [&] {
        up = api::UploadTaskFile(*client_, task, "inbox/in.txt", fd);
        return up.has_value() || up.error().code != ErrorCode::kUnavailable;
      },
      seconds(10));
  close(fd);
  ASSERT_TRUE(up) << up.error().message;
  const json done = WaitState(task, "succeeded");
  EXPECT_EQ(Output(task), "uploaded");
  testing::AgentProcess* agent = pool_->AgentOf(done["placement"]["node"]);
  ASSERT_NE(agent, nullptr);
  EXPECT_TRUE(fs::exists(agent->data_dir() + "/volumes/" + id + "/in.txt"));
  fs::remove_all(fs::path(local).parent_path());
}

TEST_F(VolumeE2eTest, AReadOnlyMountRefusesWrites) {
  CreateVolume("ref", 1 << 30);
  const std::string task =
      Submit("ls /root/ref && echo x > /root/ref/y",
             json{{{"volume", "ref"}, {"path", "/root/ref"}, {"read_only", true}}});
  const json failed = WaitState(task, "failed");
  EXPECT_NE(failed["exit_code"], 0);
  EXPECT_NE(Output(task, "stderr").find("Read-only file system"), std::string::npos)
      << Output(task, "stderr");
}

TEST_F(VolumeE2eTest, ATaskThatFillsItsVolumePastItsSizeIsStoppedSayingWhy) {
  CreateVolume("small", 1 << 20);
  const std::string task = Submit("head -c 3000000 /dev/zero > /root/data/big && sleep 300",
                                  json{{{"volume", "small"}, {"path", "/root/data"}}});
  const json stopped = WaitState(task, "stopped");
  EXPECT_NE(stopped["reason"].get<std::string>().find(
                "volume small is over its size of 1.0 MiB (it holds "),
            std::string::npos)
      << stopped["reason"];
}

TEST_F(VolumeE2eTest, AVolumeThatLiveTasksMountIsNotDeleted) {
  CreateVolume("busy", 1 << 30);
  const std::string task = Submit("sleep 300", json{{{"volume", "busy"}, {"path", "/root/b"}}});
  WaitState(task, "running");
  auto refused = client_->CallJson("DELETE", "/v1/volumes/busy");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(refused.error().message.find(task), std::string::npos) << refused.error().message;
  Call("POST", "/v1/tasks/" + task + "/stop");
}

}  // namespace
}  // namespace gpupool
