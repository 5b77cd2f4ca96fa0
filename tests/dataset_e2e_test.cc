// End to end: datasets on a real server and two real agents (simulated GPUs, real processes), with
// the real CLI. A directory pushed once is mounted read-only by two tasks on two nodes, each
// reading the same bytes; a write into it fails with EROFS; a second push with a small part
// changed sends about that part, and a node that holds the first version fetches only the
// chunks the second one adds; another project's member cannot see or mount a private dataset
// (404) until an admin publishes it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "api/client.h"
#include "core/base64.h"
#include "core/test_bytes.h"
#include "tests/agent_process.h"
#include "tests/cli_process.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::seconds;
using testing::CliRun;
using testing::Eventually;

constexpr int64_t kBigBytes = 16 << 20;

void Write(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The chunk names in a node's chunk cache (DATA_DIR/chunks/<hh>/<sha256>).
std::set<std::string> CachedChunks(const std::string& data_dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(data_dir + "/chunks", ec);
       !ec && it != fs::end(it); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_regular_file() && name.size() == 64) out.insert(name);
  }
  return out;
}

class DatasetE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The test polls with the admin's key, which the agents use too: no request rate on it.
    pool_ = std::make_unique<testing::PoolProcesses>("dataset-e2e", 2,
                                                     std::vector<std::string>{"--key-rate", "0"});
    if (HasFatalFailure()) return;
    const testing::Credentials& creds = pool_->creds();
    client_ = std::make_unique<api::Client>(creds.endpoint, creds.access_key, creds.secret_key);
    home_ = testing::MakeTempDir("dataset-e2e-home");
    local_ = testing::MakeTempDir("dataset-e2e-local") + "/imagenet";
    big_ = RandomBytes(kBigBytes, 7);
    Write(local_ + "/train/big.bin", big_);
    Write(local_ + "/labels.csv", "id,label\n1,cat\n2,dog\n");
  }
  void TearDown() override {
    pool_.reset();
    std::error_code ec;
    fs::remove_all(home_, ec);
    fs::remove_all(fs::path(local_).parent_path(), ec);
  }

  json Call(const std::string& method, const std::string& path, const json& body = nullptr,
            api::Client* as = nullptr) {
    auto r = (as ? *as : *client_).CallJson(method, path, body.is_null() ? "" : body.dump());
    EXPECT_TRUE(r) << method << " " << path << ": " << (r ? "" : r.error().message);
    return r ? *r : json();
  }
  CliRun Cli(const std::vector<std::string>& args) {
    const testing::Credentials& creds = pool_->creds();
    return testing::RunCli(args, {{"HOME", home_},
                                  {"GPUPOOL_ENDPOINT", creds.endpoint},
                                  {"GPUPOOL_ACCESS_KEY", creds.access_key},
                                  {"GPUPOOL_SECRET_KEY", creds.secret_key}});
  }
  // A shell line in a task that mounts `datasets` ({"dataset", "version", "path"} objects); with
  // `gpus` 2 it fills a node.
  json Submit(const std::string& line, const json& datasets, int gpus = 0,
              api::Client* as = nullptr) {
    return Call("POST", "/v1/tasks",
                {{"command", {"sh", "-c", line}}, {"gpu_count", gpus}, {"datasets", datasets}}, as);
  }
  json WaitState(const std::string& id, const std::string& state) {
    json t;
    EXPECT_TRUE(Eventually(
        [&] {
          t = Call("GET", "/v1/tasks/" + id);
          return t.value("state", "") == state;
        },
        seconds(60)))
        << "task " << id << " is " << t.dump(2);
    return t;
  }
  // The task's output once it holds `expected` whole (or, after 10 s, what it holds then; with
  // `expected` empty: once it holds anything).
  std::string Output(const std::string& task, const std::string& stream = "stdout",
                     const std::string& expected = "") {
    std::string out;
    Eventually(
        [&] {
          const json slice = Call("GET", "/v1/tasks/" + task + "/logs?stream=" + stream);
          out = Base64Decode(slice.value("data_b64", "")).value_or("");
          return expected.empty() ? !out.empty() : out == expected;
        },
        seconds(10));
    return out;
  }
  // A member of a new project, with its own client.
  std::unique_ptr<api::Client> Member(const std::string& user, const std::string& project) {
    Call("POST", "/v1/projects", {{"id", project}, {"name", project}});
    Call("POST", "/v1/users",
         {{"id", user}, {"name", user}, {"role", "member"}, {"projects", {project}}});
    json key = Call("POST", "/v1/users/" + user + "/keys", {{"description", "test"}});
    const testing::Credentials& creds = pool_->creds();
    return std::make_unique<api::Client>(creds.endpoint, key["access_key"].get<std::string>(),
                                         key["secret_key"].get<std::string>());
  }

  std::unique_ptr<testing::PoolProcesses> pool_;
  std::unique_ptr<api::Client> client_;
  std::string home_;
  std::string local_;
  std::string big_;
};

TEST_F(DatasetE2eTest, PushedOnceItIsMountedReadOnlyByTasksOnBothNodes) {
  const CliRun push = Cli({"dataset", "push", local_, "imagenet"});
  ASSERT_EQ(push.exit_code, 0) << push;
  EXPECT_NE(push.out.find("imagenet@1 (d-1): 2 file(s)"), std::string::npos) << push;
  const json dataset = Call("GET", "/v1/datasets/imagenet");
  ASSERT_EQ(dataset["versions"].size(), 1u);
  EXPECT_EQ(dataset["versions"][0]["bytes"], kBigBytes + 21);
  EXPECT_GE(dataset["versions"][0]["new_bytes"], kBigBytes);  // everything was new

  // Two tasks that each fill a node: one on each, both reading the same bytes.
  const json mount = {{{"dataset", "imagenet"}, {"path", "/root/data"}}};
  const std::string read =
      "cat /root/data/labels.csv && cksum < /root/data/train/big.bin && sleep 300";
  const json first = Submit(read, mount, 2);
  EXPECT_EQ(first["datasets"][0]["version"], 1);  // the latest, named at submission
  EXPECT_EQ(first["datasets"][0]["dataset_id"], "d-1");
  const json a = WaitState(first["id"], "running");
  const json second = Submit(read, mount, 2);
  const json b = WaitState(second["id"], "running");
  EXPECT_NE(a["placement"]["node"], b["placement"]["node"]);
  const CliRun local_sum =
      testing::RunProgram({"/bin/sh", "-c", "cksum < " + local_ + "/train/big.bin"}, {});
  const std::string expected = "id,label\n1,cat\n2,dog\n" + local_sum.out;
  EXPECT_EQ(Output(first["id"], "stdout", expected), expected);
  EXPECT_EQ(Output(second["id"], "stdout", expected), expected);
  Call("POST", "/v1/tasks/" + first["id"].get<std::string>() + "/stop", {{"discard", true}});
  Call("POST", "/v1/tasks/" + second["id"].get<std::string>() + "/stop", {{"discard", true}});

  // Read-only: a write fails with EROFS.
  const json writer = Submit("echo x > /root/data/new.txt", mount);
  WaitState(writer["id"], "failed");
  EXPECT_NE(Output(writer["id"], "stderr").find("Read-only file system"), std::string::npos);
}

TEST_F(DatasetE2eTest, ASecondPushSendsWhatChangedAndANodeFetchesOnlyTheNewChunks) {
  ASSERT_EQ(Cli({"dataset", "push", local_, "imagenet"}).exit_code, 0);
  // By its id, unchanged: no version, nothing sent.
  const CliRun unchanged = Cli({"dataset", "push", local_, "d-1"});
  EXPECT_EQ(unchanged.exit_code, 0) << unchanged;
  EXPECT_NE(unchanged.out.find("imagenet@1 (d-1) is unchanged"), std::string::npos) << unchanged;
  // Version 1 on a node: its chunks come into that node's cache.
  const json v1 = Submit("cksum < /root/data/train/big.bin",
                         {{{"dataset", "imagenet"}, {"path", "/root/data"}}});
  const json ran = WaitState(v1["id"], "succeeded");
  testing::AgentProcess* node = pool_->AgentOf(ran["placement"]["node"]);
  ASSERT_NE(node, nullptr);
  const std::set<std::string> before = CachedChunks(node->data_dir());
  EXPECT_GE(before.size(), 4u);  // 16 MiB in chunks of 4 MiB at most

  // 64 KiB changed in the middle of 16 MiB, and a new file: about that much is sent.
  std::string edited = big_;
  edited.replace(8 << 20, 64 << 10, RandomBytes(64 << 10, 9));
  Write(local_ + "/train/big.bin", edited);
  Write(local_ + "/train/new.txt", "fresh\n");
  const CliRun push = Cli({"dataset", "push", local_, "imagenet"});
  ASSERT_EQ(push.exit_code, 0) << push;
  const json dataset = Call("GET", "/v1/datasets/imagenet");
  ASSERT_EQ(dataset["versions"].size(), 2u);
  const int64_t sent = dataset["versions"][1]["new_bytes"];
  EXPECT_GT(sent, 0);
  EXPECT_LE(sent, int64_t{8} << 20) << "at most the two chunks around the edit, and the manifest";

  // The same node mounts version 2 (pinned there by filling the other node first is not
  // needed: it is the node that holds the dataset, which the scheduler prefers).
  const json v2 = Submit("cksum < /root/data/train/big.bin && cat /root/data/train/new.txt",
                         {{{"dataset", "imagenet"}, {"version", 2}, {"path", "/root/data"}}});
  const json ran2 = WaitState(v2["id"], "succeeded");
  EXPECT_EQ(ran2["placement"]["node"], ran["placement"]["node"]);
  const std::set<std::string> after = CachedChunks(node->data_dir());
  int64_t fetched = 0;
  for (const std::string& sha : after) {
    if (!before.contains(sha)) {
      std::error_code ec;
      fetched += static_cast<int64_t>(
          fs::file_size(node->data_dir() + "/chunks/" + sha.substr(0, 2) + "/" + sha, ec));
    }
  }
  EXPECT_LE(fetched, sent) << "the node fetched more than the push added";
  EXPECT_NE(Output(v2["id"]).find("fresh\n"), std::string::npos);
  // Version 1 still reads as it was.
  const json again = Submit("cksum < /root/data/train/big.bin",
                            {{{"dataset", "imagenet"}, {"version", 1}, {"path", "/root/data"}}});
  WaitState(again["id"], "succeeded");
  EXPECT_EQ(Output(again["id"]), Output(v1["id"]));
}

TEST_F(DatasetE2eTest, AnotherProjectSeesAPrivateDatasetOnlyOnceAnAdminPublishesIt) {
  ASSERT_EQ(Cli({"dataset", "push", local_, "imagenet"}).exit_code, 0);
  std::unique_ptr<api::Client> mallory = Member("mallory", "other");
  auto raw = mallory->CallJson("GET", "/v1/datasets/imagenet", "");
  ASSERT_FALSE(raw);
  EXPECT_EQ(raw.error().code, ErrorCode::kNotFound) << raw.error().message;
  const json mount = {{{"dataset", "imagenet"}, {"path", "/root/data"}}};
  auto submitted = mallory->CallJson(
      "POST", "/v1/tasks",
      json{{"command", {"cat", "/root/data/labels.csv"}}, {"datasets", mount}}.dump());
  ASSERT_FALSE(submitted);
  EXPECT_EQ(submitted.error().code, ErrorCode::kNotFound) << submitted.error().message;

  const CliRun publish = Cli({"dataset", "publish", "imagenet"});
  ASSERT_EQ(publish.exit_code, 0) << publish;
  EXPECT_EQ(Call("GET", "/v1/datasets", nullptr, mallory.get())["datasets"].size(), 1u);
  const json task = Submit("cat /root/data/labels.csv", mount, 0, mallory.get());
  WaitState(task["id"], "succeeded");
  EXPECT_EQ(Output(task["id"]), "id,label\n1,cat\n2,dog\n");
  // Published is not theirs: they may not delete it.
  auto deleted = mallory->CallJson("DELETE", "/v1/datasets/imagenet", "");
  EXPECT_FALSE(deleted);
}

}  // namespace
}  // namespace gpupool
