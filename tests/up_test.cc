// `gpupool up` as a user meets it: one process with the control plane and a local agent on
// simulated GPUs; a submitted command runs to success on this machine, and SIGTERM stops it all.
// And what the real CLI shows of the tasks there: `gpupool logs` (a finished task's output, its
// last lines, a running task's followed until it ends), `gpupool top`, and the stop conditions
// `gpupool submit` takes. And the live events (GET /v1/events) read off the socket as a browser's
// EventSource reads them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "api/client.h"
#include "api/socket_testing.h"
#include "core/base64.h"
#include "tests/cli_process.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

using nlohmann::json;
using testing::CliProcess;
using testing::CliRun;
using testing::Eventually;
using testing::RunCli;

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
    })) << "last state: "
        << state;
    EXPECT_EQ(state, "succeeded");
    EXPECT_EQ(up.Terminate(), 0);
  }
  std::filesystem::remove_all(dir);
}

TEST(Up, StreamsATasksChangesAndItsStdoutAsTheyHappen) {
  const std::string dir = testing::MakeTempDir("gpupool-up-events");
  {
    testing::ServerProcess up(dir, {"--simulate-gpus", "A100-80GB:1", "--node-name", "local"},
                              "up");
    const testing::Credentials admin = up.ReadCredentials();
    api::Client client(up.endpoint(), admin.access_key, admin.secret_key);
    // Held, so that the stream is open before the task runs.
    auto submitted = client.CallJson(
        "POST", "/v1/tasks",
        json{{"command", {"/bin/sh", "-c", "echo hello; echo bye"}}, {"hold", true}}.dump());
    ASSERT_TRUE(submitted) << submitted.error().message;
    const std::string id = (*submitted)["id"];
    const std::string port = up.endpoint().substr(up.endpoint().rfind(':') + 1);
    api::testing::RawSocket sock(static_cast<uint16_t>(std::stoi(port)));
    sock.Write(api::testing::SignedGet("/v1/events?task=" + id + "&logs_from=0", admin.access_key,
                                       admin.secret_key));
    std::optional<api::testing::StreamEvent> hello = api::testing::NextEvent(sock);
    ASSERT_TRUE(hello);
    EXPECT_EQ(hello->name, "hello");
    ASSERT_TRUE(client.CallJson("POST", "/v1/tasks/" + id + "/release"));

    std::vector<std::string> states;
    std::string stdout_bytes;
    while (states.empty() || states.back() != "succeeded" || stdout_bytes != "hello\nbye\n") {
      std::optional<api::testing::StreamEvent> e = api::testing::NextEvent(sock);
      ASSERT_TRUE(e) << "the stream ended; states so far: " << json(states).dump()
                     << ", stdout: " << json(stdout_bytes).dump();
      const json data = json::parse(e->data);
      if (e->name == "task" && data["id"] == id) states.push_back(data["state"]);
      if (e->name == "log") {
        EXPECT_EQ(data["offset"], stdout_bytes.size()) << "contiguous";
        stdout_bytes += Base64Decode(data["data_b64"].get<std::string>()).value_or("?");
      }
    }
    // Released (still pending), then each state the task went through, in order.
    EXPECT_EQ(states.front(), "pending");
    EXPECT_NE(std::find(states.begin(), states.end(), "running"), states.end())
        << json(states).dump();
    EXPECT_EQ(up.Terminate(), 0);  // with the stream still open
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

// One `gpupool up` for the suite; each test runs the CLI against it as a configured user.
class UpCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeTempDir("gpupool-up-cli"));
    up_ = new testing::ServerProcess(
        *dir_, {"--simulate-gpus", "A100-80GB:2", "--node-name", "local"}, "up");
    creds_ = new testing::Credentials(up_->ReadCredentials());
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(up_->Terminate(), 0);
    delete up_;
    delete creds_;
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  void SetUp() override {
    home_ = testing::MakeTempDir("gpupool-up-home");
    client_ =
        std::make_unique<api::Client>(creds_->endpoint, creds_->access_key, creds_->secret_key);
  }
  void TearDown() override { std::filesystem::remove_all(home_); }

  // The environment of a configured user: HOME (empty) and the admin's GPUPOOL_* variables.
  std::map<std::string, std::string> Env() const {
    return {{"HOME", home_},
            {"GPUPOOL_ENDPOINT", creds_->endpoint},
            {"GPUPOOL_ACCESS_KEY", creds_->access_key},
            {"GPUPOOL_SECRET_KEY", creds_->secret_key}};
  }
  CliRun Cli(const std::vector<std::string>& args) const { return RunCli(args, Env()); }

  json Call(const std::string& method, const std::string& target) {
    auto r = client_->CallJson(method, target);
    EXPECT_TRUE(r) << method << " " << target << ": " << r.error().message;
    return r.value_or(json());
  }
  // Submits `sh -c script` through the API; its id.
  std::string SubmitScript(const std::string& name, const std::string& script) {
    auto t = client_->CallJson(
        "POST", "/v1/tasks",
        json{{"name", name}, {"command", {"/bin/sh", "-c", script}}, {"gpu_count", 1}}.dump());
    EXPECT_TRUE(t) << t.error().message;
    return t ? (*t)["id"].get<std::string>() : "";
  }
  bool WaitState(const std::string& id, const std::string& state) {
    return Eventually([&] { return Call("GET", "/v1/tasks/" + id)["state"] == state; },
                      std::chrono::seconds(20));
  }

  static std::string* dir_;
  static testing::ServerProcess* up_;
  static testing::Credentials* creds_;
  std::string home_;
  std::unique_ptr<api::Client> client_;
};

std::string* UpCliTest::dir_ = nullptr;
testing::ServerProcess* UpCliTest::up_ = nullptr;
testing::Credentials* UpCliTest::creds_ = nullptr;

TEST_F(UpCliTest, LogsPrintsAFinishedTasksStdoutAndStderrApart) {
  const std::string id = SubmitScript("printer", "echo one; echo two; echo oops >&2");
  ASSERT_TRUE(WaitState(id, "succeeded"));
  // Its agent ships the last bytes after the end; the server says when it has them all.
  ASSERT_TRUE(Eventually(
      [&] { return Call("GET", "/v1/tasks/" + id + "/logs?stream=stderr")["complete"] == true; },
      std::chrono::seconds(20)));

  CliRun all = Cli({"logs", id});
  EXPECT_EQ(all.exit_code, 0) << all;
  EXPECT_EQ(all.out, "one\ntwo\n") << all;
  EXPECT_EQ(all.err, "oops\n") << all;
  CliRun last = Cli({"logs", id, "--tail", "1"});
  EXPECT_EQ(last.exit_code, 0) << last;
  EXPECT_EQ(last.out, "two\n") << last;
  EXPECT_EQ(last.err, "oops\n") << last;
  CliRun err_only = Cli({"logs", id, "--stream", "stderr"});
  EXPECT_EQ(err_only.exit_code, 0) << err_only;
  EXPECT_EQ(err_only.out, "") << err_only;
  EXPECT_EQ(err_only.err, "oops\n") << err_only;
}

TEST_F(UpCliTest, LogsFollowsARunningTaskUntilItEndsAndTopShowsIt) {
  // The task prints a line, then waits for the test's word before its last one: a file in a
  // directory its own uid may search, not under /tmp (a task has a /tmp of its own): in the
  // test's working directory.
  namespace fs = std::filesystem;
  std::string gate = (fs::current_path() / "gpupool-up-gate-XXXXXX").string();
  ASSERT_NE(mkdtemp(gate.data()), nullptr) << strerror(errno);
  fs::permissions(gate,
                  fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                      fs::perms::others_exec,
                  fs::perm_options::add);
  const std::string go = gate + "/go";
  const std::string id = SubmitScript(
      "follow-me", "echo started; while [ ! -e " + go + " ]; do sleep 0.1; done; echo finished");
  ASSERT_TRUE(WaitState(id, "running"));
  CliProcess follow({"logs", "-f", id}, Env());
  ASSERT_TRUE(follow.WaitForStdout("started\n")) << follow.Output();
  EXPECT_EQ(Call("GET", "/v1/tasks/" + id)["state"], "running");

  // top: the node, and the task with its usage once the agent shipped a sample of it.
  ASSERT_TRUE(Eventually(
      [&] {
        const json usage = Call("GET", "/v1/usage");
        for (const json& t : usage["tasks"]) {
          if (t["id"] == id) return !t["latest"].is_null();
        }
        return false;
      },
      std::chrono::seconds(20)));
  CliRun top = Cli({"top", "--once"});
  EXPECT_EQ(top.exit_code, 0) << top;
  EXPECT_TRUE(std::regex_search(top.out, std::regex("\nlocal +ready +"))) << top;
  // TASK NAME NODE GPU IDS CPU MEMORY GPU% …: its simulated GPU is busy. The column names the
  // GPUs it is on, not how many it asked for (ls's GPUS).
  EXPECT_TRUE(std::regex_search(top.out, std::regex("\nTASK +NAME +NODE +GPU IDS +CPU "))) << top;
  const std::regex task_row("\n" + id + " +follow-me +local +[01] +\\S+ +\\S+ +100% ");
  EXPECT_TRUE(std::regex_search(top.out, task_row)) << top;

  // It ends promptly: the agent's word that the output is complete ends the follow, well before
  // the 20 s long-poll it may be in.
  std::ofstream(go).close();
  const CliRun followed = follow.Wait(std::chrono::seconds(15));
  EXPECT_EQ(followed.exit_code, 0) << followed;
  EXPECT_EQ(followed.out, "started\nfinished\n") << followed;
  EXPECT_EQ(followed.err, "") << followed;
  // Its end report travels apart from its output, so it may land a moment after.
  EXPECT_TRUE(Eventually([&] { return Call("GET", "/v1/tasks/" + id)["state"] == "succeeded"; }));
  fs::remove_all(gate);
}

// `wait` and `logs -f` end when the task does and exit with its status.
TEST_F(UpCliTest, WaitAndFollowedLogsExitWithTheTasksStatus) {
  const std::string failing = SubmitScript("fails", "echo bye; exit 3");
  CliRun waited = Cli({"wait", failing.substr(2)});  // a bare number is a task id too
  EXPECT_EQ(waited.exit_code, 3) << waited;
  EXPECT_EQ(waited.out.rfind(failing + ": failed (exit code 3)", 0), 0u) << waited;
  CliRun followed = Cli({"logs", "-f", failing});
  EXPECT_EQ(followed.exit_code, 3) << followed;
  EXPECT_EQ(followed.out, "bye\n") << followed;

  const std::string ok = SubmitScript("succeeds", "true");
  CliRun ok_wait = Cli({"wait", ok, "--json"});
  EXPECT_EQ(ok_wait.exit_code, 0) << ok_wait;
  const json task = json::parse(ok_wait.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_EQ(task["state"], "succeeded") << ok_wait;

  CliRun show = Cli({"show", ok});
  EXPECT_TRUE(std::regex_search(show.out, std::regex("\nRuntime: +[0-9]+(ms|s)\n"))) << show;
}

TEST_F(UpCliTest, SubmitTakesStopConditionsAndRefusesABadOne) {
  const size_t before = Call("GET", "/v1/tasks?limit=1000")["tasks"].size();
  CliRun bad = Cli({"submit", "--stop-when", "val_acc >", "--", "true"});
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_NE(bad.err.find("--stop-when"), std::string::npos) << bad;
  EXPECT_NE(bad.err.find("at column 10"), std::string::npos) << bad;
  EXPECT_EQ(Call("GET", "/v1/tasks?limit=1000")["tasks"].size(), before) << "nothing submitted";

  auto submitted = [&](const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"submit"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "true"});
    CliRun r = Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r;
    EXPECT_TRUE(std::regex_match(r.out, std::regex("t-[0-9]+\n"))) << r;
    return Call("GET", "/v1/tasks/" + r.out.substr(0, r.out.size() - 1));
  };
  EXPECT_EQ(submitted({"--stop-when-idle", "30m"})["stop_when"], "idle_s >= 1800");
  EXPECT_EQ(submitted({"--stop-when", "val_acc>0.95", "--stop-when-idle", "1h"})["stop_when"],
            "val_acc > 0.95 || idle_s >= 3600");
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
