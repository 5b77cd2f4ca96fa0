// HTTPS as an operator sets it up: `gpupool server --tls-self-signed` makes its certificate once
// and writes an https endpoint and the CA to trust into credentials.env; a node joins with
// `gpupool agent --ca-file` (the join flow over TLS, then its tunnel and reports); the CLI, with
// GPUPOOL_CA_FILE, submits a task that runs there, and without it refuses the untrusted server;
// a task with a token gets the CA's text for the SDK inside it. The real binary throughout.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "tests/cli_process.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

using testing::CliProcess;
using testing::CliRun;
using testing::RunCli;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The value after "KEY: " (or "KEY:" and blanks) on a line of `text`.
std::string Field(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  if (at == std::string::npos) return "";
  size_t start = at + key.size();
  while (start < text.size() && text[start] == ' ') ++start;
  return text.substr(start, text.find('\n', start) - start);
}

TEST(TlsE2e, ANodeJoinsAndATaskRunsOverHttpsWithASelfSignedCertificate) {
  const std::string dir = testing::MakeTempDir("gpupool-tls");
  chmod(dir.c_str(), 0711);  // tasks run under their own uids and must reach their dirs
  const std::string cert = dir + "/server/tls/cert.pem";
  std::string first_cert;
  {
    testing::ServerProcess server(dir + "/server", {"--tls-self-signed"});
    ASSERT_EQ(server.endpoint().rfind("https://127.0.0.1:", 0), 0u) << server.endpoint();
    const testing::Credentials creds = server.ReadCredentials();
    EXPECT_EQ(creds.endpoint, server.endpoint());
    EXPECT_EQ(creds.ca_file, cert);
    first_cert = ReadFile(cert);
    ASSERT_NE(first_cert.find("BEGIN CERTIFICATE"), std::string::npos);
    EXPECT_EQ(std::filesystem::status(dir + "/server/tls/key.pem").permissions() &
                  std::filesystem::perms::group_all,
              std::filesystem::perms::none);
    std::map<std::string, std::string> env = {{"HOME", dir},
                                              {"GPUPOOL_ENDPOINT", creds.endpoint},
                                              {"GPUPOOL_ACCESS_KEY", creds.access_key},
                                              {"GPUPOOL_SECRET_KEY", creds.secret_key},
                                              {"GPUPOOL_CA_FILE", creds.ca_file}};

    // Without the CA the CLI does not trust the server, and says so.
    std::map<std::string, std::string> untrusting = env;
    untrusting.erase("GPUPOOL_CA_FILE");
    untrusting["SSL_CERT_FILE"] = "/nonexistent";  // nor does the system's store
    CliRun refused = RunCli({"ls"}, untrusting);
    EXPECT_NE(refused.exit_code, 0) << refused;
    EXPECT_NE(refused.err.find("certificate is not trusted"), std::string::npos) << refused;
    EXPECT_NE(refused.err.find("GPUPOOL_CA_FILE"), std::string::npos) << refused;

    // A join token; the printed command carries the CA.
    CliRun token = RunCli({"join-token", "create", "--description", "tls node"}, env);
    ASSERT_EQ(token.exit_code, 0) << token;
    const std::string secret = Field(token.out, "join token:");
    ASSERT_FALSE(secret.empty()) << token;
    EXPECT_NE(token.err.find("--ca-file " + cert), std::string::npos) << token;

    // The node joins over TLS, verifying the server with --ca-file.
    CliProcess agent({"agent", "--server", creds.endpoint, "--ca-file", cert, "--join-token",
                      secret, "--name", "tls-node", "--data-dir", dir + "/agent", "--simulate-gpus",
                      "A100-80GB:1", "--docker-socket", dir + "/no.sock"},
                     {{"HOME", dir}});
    ASSERT_TRUE(agent.WaitForStdout("gpupool agent ready")) << agent.Output();

    // A task that shows what the SDK inside it would use.
    CliRun submitted =
        RunCli({"submit", "--gpus", "1", "--", "/bin/sh", "-c",
                "echo endpoint=$GPUPOOL_ENDPOINT; echo \"$GPUPOOL_CA_PEM\" | head -1"},
               env);
    ASSERT_EQ(submitted.exit_code, 0) << submitted;
    const std::string id = submitted.out.substr(0, submitted.out.find('\n'));
    CliRun waited = RunCli({"wait", id}, env);
    EXPECT_EQ(waited.exit_code, 0) << waited;
    CliRun logs = RunCli({"logs", "-f", id}, env);
    ASSERT_EQ(logs.exit_code, 0) << logs;
    EXPECT_NE(logs.out.find("endpoint=" + creds.endpoint), std::string::npos) << logs;
    EXPECT_NE(logs.out.find("-----BEGIN CERTIFICATE-----"), std::string::npos) << logs;
    EXPECT_EQ(server.Terminate(), 0);
  }
  // A later start keeps the certificate (clients that trust it go on doing so).
  {
    testing::ServerProcess again(dir + "/server", {"--tls-self-signed"});
    EXPECT_EQ(again.endpoint().rfind("https://", 0), 0u);
    EXPECT_EQ(ReadFile(cert), first_cert);
    EXPECT_EQ(again.Terminate(), 0);
  }
  std::filesystem::remove_all(dir);
}

TEST(TlsE2e, TheServerRefusesHalfATlsConfiguration) {
  const std::string dir = testing::MakeTempDir("gpupool-tls-flags");
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--tls-cert", dir + "/c.pem"},
        std::vector<std::string>{"--tls-self-signed", "--tls-key", dir + "/k.pem"}}) {
    std::vector<std::string> args = {"server", "--data-dir", dir + "/d", "--listen", "127.0.0.1:0"};
    args.insert(args.end(), flags.begin(), flags.end());
    CliRun r = RunCli(args, {{"HOME", dir}});
    EXPECT_NE(r.exit_code, 0) << r;
    EXPECT_NE(r.err.find("--tls-"), std::string::npos) << r;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpupool
