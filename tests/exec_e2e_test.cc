// `gpupool exec` and `gpupool shell` end to end: a real `gpupool up` (server and agent in one
// process, the agent's tunnel over loopback) and the real CLI. A command runs inside the task —
// its uid, cgroup, environment and /root — with its stdout, stderr, stdin and exit status carried
// through the server; with -t in a terminal; one that cannot start says why (127); the session
// ends when the task does (the command killed with it) and the command ends when the client goes;
// anonymous clients, another project's user and a task that does not run are refused.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/client.h"
#include "api/socket_testing.h"
#include "tests/cli_process.h"
#include "tests/up_fixture.h"

namespace gpupool {
namespace {

using nlohmann::json;
using testing::CliProcess;
using testing::CliRun;
using testing::Eventually;

class ExecTest : public testing::UpTest {
 protected:
  // A task that records its uid and cgroup in its workspace, then waits; once it has.
  std::string Running() {
    const json task =
        Call("POST", "/v1/tasks",
             {{"command",
               {"/bin/sh", "-c", "id -u > uid; cat /proc/self/cgroup > cgroup; exec sleep 600"}}});
    const std::string id = task["id"];
    EXPECT_TRUE(Eventually(
        [&] {
          const CliRun r = Exec({id, "--", "cat", "cgroup"});
          return r.exit_code == 0 && !r.out.empty();
        },
        std::chrono::seconds(30)))
        << id << " runs and wrote its files";
    return id;
  }

  CliRun Exec(std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), "exec");
    return Cli(args, input);
  }
};

TEST_F(ExecTest, RunsInTheTaskAsItsUserInItsCgroupWithItsEnvironmentAndExitStatus) {
  const std::string id = Running();
  const CliRun r = Exec({id, "--", "/bin/sh", "-c",
                         "echo out; echo err >&2; [ \"$(cat uid)\" = \"$(id -u)\" ] && "
                         "echo same-uid; [ \"$(cat cgroup)\" = \"$(cat /proc/self/cgroup)\" ] && "
                         "echo same-cgroup; pwd; "
                         "echo \"$HOME $GPUPOOL_TASK_ID\"; exit 3"});
  EXPECT_EQ(r.exit_code, 3) << r;
  EXPECT_EQ(r.out, "out\nsame-uid\nsame-cgroup\n/root\n/root " + id + "\n") << r;
  EXPECT_EQ(r.err, "err\n") << r;
}

TEST_F(ExecTest, CarriesStdinAndGivesATerminalWithTty) {
  const std::string id = Running();
  std::string big;
  for (int i = 0; i < 20000; ++i) big += "line " + std::to_string(i) + "\n";  // ~200 KB
  CliRun r = Exec({"-i", id, "--", "cat"}, big);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out == big) << r.out.size() << " bytes back of " << big.size();

  r = Exec({"-t", id, "--", "tty"});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out.rfind("/dev/pts/", 0), 0u) << r;
  r = Exec({id, "--", "tty"});  // without -t: pipes
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_EQ(r.out, "not a tty\n") << r;

  // `shell`: a terminal, input from the client, the shell's exit status.
  r = Cli({"shell", id}, "echo shell-$((6*7)); exit 4\n");
  EXPECT_EQ(r.exit_code, 4) << r;
  EXPECT_NE(r.out.find("shell-42"), std::string::npos) << r;
}

TEST_F(ExecTest, ACommandThatCannotStartSaysWhy) {
  const std::string id = Running();
  CliRun r = Exec({id, "--", "no-such-command"});
  EXPECT_EQ(r.exit_code, 127) << r;
  EXPECT_EQ(r.err, "gpupool: command 'no-such-command': No such file or directory\n") << r;
  r = Exec({id, "--", "./uid"});  // a file of its workspace, not executable
  EXPECT_EQ(r.exit_code, 126) << r;
  EXPECT_EQ(r.err, "gpupool: command './uid': Permission denied\n") << r;
}

TEST_F(ExecTest, TheSessionEndsWithTheTaskAndTheCommandWithTheClient) {
  const std::string id = Running();
  {
    CliProcess left({"exec", id, "--", "/bin/sh", "-c", "echo started; exec sleep 77"}, CliEnv());
    ASSERT_TRUE(left.WaitForStdout("started\n")) << left.Output();
  }  // the client is killed: its command goes with it
  EXPECT_TRUE(Eventually([&] {
    return Exec({id, "--", "/bin/sh", "-c", "pgrep -f 'slee[p] 77' || echo none"}).out == "none\n";
  })) << "the command of a client that went away still runs";

  CliProcess waiting({"exec", id, "--", "/bin/sh", "-c", "echo started; exec sleep 78"}, CliEnv());
  ASSERT_TRUE(waiting.WaitForStdout("started\n")) << waiting.Output();
  Call("POST", "/v1/tasks/" + id + "/stop");
  const CliRun r = waiting.Wait();
  // The task's stop reached it: SIGTERM, or the SIGKILL its supervisor sends what is left of a
  // task once the task's first process has ended (the kernel delivers a pending SIGKILL first).
  EXPECT_TRUE(r.exit_code == 128 + SIGTERM || r.exit_code == 128 + SIGKILL) << r;

  const CliRun after = Exec({id, "--", "true"});
  EXPECT_EQ(after.exit_code, 1) << after;
  EXPECT_NE(after.err.find("task " + id + " is stopped: commands run in it while it runs"),
            std::string::npos)
      << after;
}

TEST_F(ExecTest, ACommandIsTheUsersActivityOnTheTask) {
  const std::string id = Running();
  const auto interactive_idle = [&] {
    return Call("GET", "/v1/tasks/" + id + "/metrics")
        .value("/latest/interactive_idle_s"_json_pointer, -1.0);
  };
  ASSERT_TRUE(Eventually([&] { return interactive_idle() >= 2; }, std::chrono::seconds(30)));
  ASSERT_EQ(Exec({id, "--", "true"}).exit_code, 0);
  EXPECT_LT(interactive_idle(), 2) << "idle_s, and --stop-when-idle, count from the command";
}

TEST_F(ExecTest, RefusesAnonymousClientsAndOtherProjectsUsers) {
  const std::string id = Running();
  api::IoLoop loop;
  auto anonymous = api::DialWebSocket(loop, {admin_.endpoint, "", "", "/v1/tasks/" + id + "/exec"});
  ASSERT_FALSE(anonymous);
  EXPECT_EQ(anonymous.error().code, ErrorCode::kUnauthenticated) << anonymous.error().message;

  const testing::Credentials other = OtherProjectsMember();
  auto mallory = api::DialWebSocket(
      loop, {admin_.endpoint, other.access_key, other.secret_key, "/v1/tasks/" + id + "/exec"});
  ASSERT_FALSE(mallory);
  EXPECT_EQ(mallory.error().code, ErrorCode::kNotFound) << mallory.error().message;

  // A plain GET is no WebSocket.
  auto plain = client_->Call("GET", "/v1/tasks/" + id + "/exec");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->status, 400) << plain->body;
}

}  // namespace
}  // namespace gpupool
