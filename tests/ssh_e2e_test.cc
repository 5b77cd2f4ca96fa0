// SSH into a running task end to end: a real `gpupool up` (its agent runs Debian's dropbear per
// connection), the real CLI (`gpupool ssh-key add`, `ssh-config`, and `tunnel` as the
// ProxyCommand) and the real OpenSSH client: ssh runs a command in the task as its user, in its
// cgroup, with its environment; scp copies files both ways (SFTP and the legacy protocol); the
// node's host key is pinned (another key is refused); a key not registered, a key removed and
// another project's user are refused.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli_process.h"
#include "tests/up_fixture.h"

namespace gpupool {
namespace {

using nlohmann::json;
using testing::CliRun;
using testing::Eventually;
using testing::RunProgram;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class SshTest : public testing::UpTest {
 protected:
  void SetUp() override {
    UpTest::SetUp();
    if (::testing::Test::IsSkipped() || HasFatalFailure()) return;
    for (const char* tool : {"/usr/bin/ssh", "/usr/bin/scp", "/usr/bin/ssh-keygen"}) {
      ASSERT_TRUE(std::filesystem::exists(tool))
          << tool << " is missing: scripts/install-deps.sh --test installs openssh-client";
    }
    key_ = MakeKey("mine");
  }

  // A new ed25519 key pair under the test's dir; the private key's path.
  std::string MakeKey(const std::string& name) {
    const std::string path = dir_ + "/" + name;
    const CliRun made = RunProgram({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                                    name + "@laptop", "-f", path},
                                   {{"PATH", "/usr/bin:/bin"}});
    EXPECT_EQ(made.exit_code, 0) << made;
    return path;
  }

  // A task that records its uid and cgroup in its workspace, then waits; once it has. Its HOME
  // is elsewhere: SSH's home is the workspace all the same (the task's passwd entry).
  std::string Running() {
    const json task =
        Call("POST", "/v1/tasks",
             {{"command",
               {"/bin/sh", "-c",
                "export HOME=/tmp; id -u > uid; cat /proc/self/cgroup > cgroup; exec sleep 600"}}});
    const std::string id = task["id"];
    EXPECT_TRUE(Eventually(
        [&] {
          const CliRun r = Cli({"exec", id, "--", "cat", "cgroup"});
          return r.exit_code == 0 && !r.out.empty();
        },
        std::chrono::seconds(30)))
        << id << " runs and wrote its files";
    return id;
  }

  // `gpupool ssh-config` into dir/ssh_config; its text.
  std::string WriteSshConfig(const std::map<std::string, std::string>& env) {
    const CliRun r = testing::RunCli({"ssh-config"}, env);
    EXPECT_EQ(r.exit_code, 0) << r;
    std::ofstream(dir_ + "/ssh_config") << r.out;
    return r.out;
  }

  // ssh or scp with the printed config, one identity, never a prompt; the CLI's environment, so
  // that the ProxyCommand finds the credentials.
  CliRun Ssh(const std::string& program, const std::string& key, std::vector<std::string> args,
             const std::map<std::string, std::string>& env) {
    std::vector<std::string> argv = {
        program, "-F",           dir_ + "/ssh_config", "-i", key, "-o", "IdentitiesOnly=yes",
        "-o",    "BatchMode=yes"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProgram(argv, env);
  }
  CliRun Ssh(std::vector<std::string> args) {
    return Ssh("/usr/bin/ssh", key_, std::move(args), CliEnv());
  }
  CliRun Scp(std::vector<std::string> args) {
    return Ssh("/usr/bin/scp", key_, std::move(args), CliEnv());
  }

  std::string key_;
};

TEST_F(SshTest, RunsACommandInTheTaskAndCopiesFilesBothWays) {
  ASSERT_EQ(Cli({"ssh-key", "add", key_ + ".pub"}).exit_code, 0);
  const std::string id = Running();
  // The user's own lines of authorized_keys stay; the agent manages its marked ones.
  ASSERT_EQ(Cli({"exec", id, "--", "/bin/sh", "-c",
                 "mkdir -p .ssh && echo 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOwn own' > "
                 ".ssh/authorized_keys"})
                .exit_code,
            0);
  const std::string config = WriteSshConfig(CliEnv());
  EXPECT_NE(config.find("Host " + id + ".gpupool\n"), std::string::npos) << config;
  EXPECT_NE(config.find("ProxyCommand " GPUPOOL_BINARY " tunnel %h"), std::string::npos) << config;
  const std::string host = id + ".gpupool";

  CliRun r = Ssh({host,
                  "[ \"$(cat uid)\" = \"$(id -u)\" ] && echo same-uid; "
                  "[ \"$(cat cgroup)\" = \"$(cat /proc/self/cgroup)\" ] && echo same-cgroup; "
                  "pwd; echo \"$GPUPOOL_TASK_ID\"; exit 3"});
  EXPECT_EQ(r.exit_code, 3) << r;
  EXPECT_EQ(r.out, "same-uid\nsame-cgroup\n/root\n" + id + "\n") << r;
  r = Cli({"exec", id, "--", "cat", ".ssh/authorized_keys"});
  EXPECT_EQ(r.out, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOwn own\n" +
                       ReadAll(key_ + ".pub").substr(0, ReadAll(key_ + ".pub").rfind(' ')) +
                       " gpupool-managed\n")
      << r;

  // 3 MB each way, by SFTP (scp's default) and by the legacy protocol (-O).
  std::string data;
  for (int i = 0; i < 300'000; ++i) data += "line " + std::to_string(i) + "\n";
  data.resize(3'000'000);
  std::ofstream(dir_ + "/up.bin", std::ios::binary) << data;
  for (const std::string& mode : {std::string("-s"), std::string("-O")}) {
    SCOPED_TRACE(mode);
    r = Scp({mode, dir_ + "/up.bin", host + ":copied" + mode});
    ASSERT_EQ(r.exit_code, 0) << r;
    r = Cli({"exec", id, "--", "cat", "copied" + mode});
    EXPECT_TRUE(r.out == data) << r.out.size() << " bytes in the task of " << data.size();
    std::filesystem::remove(dir_ + "/down.bin");
    r = Scp({mode, host + ":copied" + mode, dir_ + "/down.bin"});
    ASSERT_EQ(r.exit_code, 0) << r;
    EXPECT_TRUE(ReadAll(dir_ + "/down.bin") == data);
  }
}

TEST_F(SshTest, TheNodesHostKeyIsPinnedAndOnlyRegisteredKeysLogIn) {
  ASSERT_EQ(Cli({"ssh-key", "add", "--name", "laptop", key_ + ".pub"}).exit_code, 0);
  const std::string id = Running();
  const std::string host = id + ".gpupool";
  WriteSshConfig(CliEnv());
  const std::string node_key = Call("GET", "/v1/nodes/local")["ssh_host_key"];
  ASSERT_EQ(node_key.rfind("ssh-ed25519 ", 0), 0u) << node_key;
  const std::string known_hosts = dir_ + "/.config/gpupool/known_hosts";
  EXPECT_EQ(ReadAll(known_hosts), "gpupool-node-local " + node_key + "\n");

  const std::string stranger = MakeKey("stranger");
  CliRun r = Ssh("/usr/bin/ssh", stranger, {host, "true"}, CliEnv());
  EXPECT_EQ(r.exit_code, 255) << r;
  EXPECT_NE(r.err.find("Permission denied (publickey)"), std::string::npos) << r;
  ASSERT_EQ(Ssh({host, "true"}).exit_code, 0);

  // Another host key for the node: ssh refuses to talk to it.
  std::ofstream(known_hosts) << "gpupool-node-local " << ReadAll(stranger + ".pub").substr(0, 80)
                             << "\n";
  r = Ssh({host, "true"});
  EXPECT_EQ(r.exit_code, 255) << r;
  EXPECT_NE(r.err.find("Host key verification failed"), std::string::npos) << r;
  WriteSshConfig(CliEnv());
  ASSERT_EQ(Ssh({host, "true"}).exit_code, 0) << "ssh-config pins the node's key again";

  // A key removed logs in no more; with none left the server says what to do.
  ASSERT_EQ(Cli({"ssh-key", "rm", "laptop"}).exit_code, 0);
  r = Ssh({host, "true"});
  EXPECT_EQ(r.exit_code, 255) << r;
  EXPECT_NE(r.err.find("you have no SSH key: add your public key first"), std::string::npos) << r;
}

TEST_F(SshTest, AnotherProjectsUserCannotTunnelIntoTheTask) {
  const std::string id = Running();
  const testing::Credentials other = OtherProjectsMember();
  std::map<std::string, std::string> env = CliEnv();
  env["GPUPOOL_ACCESS_KEY"] = other.access_key;
  env["GPUPOOL_SECRET_KEY"] = other.secret_key;
  ASSERT_EQ(testing::RunCli({"ssh-key", "add", key_ + ".pub"}, env).exit_code, 0);
  const CliRun r = testing::RunCli({"tunnel", id + ".gpupool"}, env);
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_NE(r.err.find("task " + id + " not found"), std::string::npos) << r;
  EXPECT_TRUE(r.out.empty()) << "no byte of the task's SSH server reaches them";
}

}  // namespace
}  // namespace gpupool
