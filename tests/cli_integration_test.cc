// The real `gpupool` CLI binary against a real `gpupool server` on loopback: submit prints an id,
// ls/show/stop/rm/events, --json parses, usage errors exit 2 naming the flag, API errors exit 1
// with the server's message, `login` writes a 0600 profile that later commands use, `cp`
// round-trips files and directories of a pending task, resumes uploads and refuses escapes, the
// join-token verbs, and `sim replay --per-task` (no server).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "api/client.h"
#include "tests/cli_process.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

using nlohmann::json;
using testing::CliRun;
using testing::Credentials;
using testing::RunCli;
using testing::ServerProcess;

namespace fs = std::filesystem;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

json ParseJson(const CliRun& r) {
  json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << r;
  return j;
}

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_dir_ = new std::string(testing::MakeTempDir("gpupool-cli-server"));
    server_ = new ServerProcess(*data_dir_);
    credentials_ = new Credentials(server_->ReadCredentials());
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Terminate(), 0);
    delete server_;
    delete credentials_;
    fs::remove_all(*data_dir_);
    delete data_dir_;
  }

  void SetUp() override { home_ = testing::MakeTempDir("gpupool-cli-home"); }
  void TearDown() override { fs::remove_all(home_); }

  // The environment of a configured user: HOME (empty) and the admin's GPUPOOL_* variables.
  std::map<std::string, std::string> Env() const {
    return {{"HOME", home_},
            {"GPUPOOL_ENDPOINT", credentials_->endpoint},
            {"GPUPOOL_ACCESS_KEY", credentials_->access_key},
            {"GPUPOOL_SECRET_KEY", credentials_->secret_key}};
  }
  CliRun Cli(const std::vector<std::string>& args) const { return RunCli(args, Env()); }

  // Submits a task that no node can take and returns its id.
  std::string Submit(std::vector<std::string> flags) const {
    std::vector<std::string> args = {"submit"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "sleep", "600"});
    CliRun r = Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r;
    EXPECT_TRUE(std::regex_match(r.out, std::regex("t-[0-9]+\n"))) << r;
    return r.out.substr(0, r.out.size() - 1);
  }

  size_t TaskCount() const {
    CliRun r = Cli({"ls", "--all", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r;
    return ParseJson(r)["tasks"].size();
  }

  static std::string* data_dir_;
  static ServerProcess* server_;
  static Credentials* credentials_;
  std::string home_;
};

std::string* CliTest::data_dir_ = nullptr;
ServerProcess* CliTest::server_ = nullptr;
Credentials* CliTest::credentials_ = nullptr;

TEST_F(CliTest, SubmitPrintsAnIdThatLsShows) {
  const std::string id = Submit({"--name", "cli-train", "--gpus", "2", "--max-runtime", "1h30m"});
  CliRun ls = Cli({"ls"});
  ASSERT_EQ(ls.exit_code, 0) << ls;
  EXPECT_TRUE(ls.err.empty()) << ls;
  EXPECT_EQ(ls.out.rfind("ID ", 0), 0u) << ls;  // a header row
  EXPECT_TRUE(std::regex_search(ls.out, std::regex(id + " +cli-train +default +pending +2 ")))
      << ls;

  CliRun json_ls = Cli({"ls", "--state", "pending", "--json"});
  ASSERT_EQ(json_ls.exit_code, 0) << json_ls;
  bool found = false;
  const json listed = ParseJson(json_ls);
  for (const json& t : listed["tasks"]) {
    if (t["id"] == id) {
      found = true;
      EXPECT_EQ(t["gpu_count"], 2);
      EXPECT_EQ(t["max_runtime_ms"], 5'400'000);
      EXPECT_EQ(t["command"], json({"sleep", "600"}));
    }
  }
  EXPECT_TRUE(found) << json_ls;
}

TEST_F(CliTest, AnArrayIsOneSubmissionListedShownAndStoppedAsAWhole) {
  CliRun sub =
      Cli({"submit", "--array", "0-3,7%2", "--name", "lr", "--gpus", "1", "--", "sleep", "600"});
  ASSERT_EQ(sub.exit_code, 0) << sub;
  ASSERT_TRUE(std::regex_match(sub.out, std::regex("a-[0-9]+\n"))) << sub;
  const std::string id = sub.out.substr(0, sub.out.size() - 1);

  CliRun ls = Cli({"ls", "--array", id});
  ASSERT_EQ(ls.exit_code, 0) << ls;
  std::istringstream lines(ls.out);
  std::string line;
  std::getline(lines, line);
  EXPECT_TRUE(std::regex_search(line, std::regex("^ID +INDEX +NAME "))) << ls;
  std::vector<std::string> indexes;
  while (std::getline(lines, line)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(line, m,
                                  std::regex("^t-[0-9]+ +([0-9]+) +lr\\[\\1\\] +"
                                             "default +pending ")))
        << line;
    indexes.push_back(m[1]);
  }
  EXPECT_EQ(indexes, (std::vector<std::string>{"0", "1", "2", "3", "7"}));

  CliRun listed = Cli({"ls", "--array", id, "--metrics", "val_acc", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed;
  const json page = ParseJson(listed);
  ASSERT_EQ(page["tasks"].size(), 5u);
  EXPECT_EQ(page["tasks"][4]["array_index"], 7);
  EXPECT_EQ(page["tasks"][4]["array_id"], id);

  CliRun show = Cli({"show", id});
  ASSERT_EQ(show.exit_code, 0) << show;
  EXPECT_TRUE(std::regex_search(show.out, std::regex("Indexes: +0-3,7%2\n"))) << show;
  EXPECT_TRUE(std::regex_search(show.out, std::regex("At once: +at most 2\n"))) << show;
  EXPECT_TRUE(std::regex_search(show.out, std::regex("Tasks: +5 tasks t-[0-9]+\\.\\.t-[0-9]+ "
                                                     "\\(5 pending\\)\n")))
      << show;

  CliRun stop = Cli({"stop", id});
  ASSERT_EQ(stop.exit_code, 0) << stop;
  EXPECT_NE(stop.out.find("(5 stopped)"), std::string::npos) << stop;
  CliRun after = Cli({"ls", "--array", id, "--json"});
  // Named: a range-for over a member of a temporary reads it after its end (AddressSanitizer).
  const json stopped = ParseJson(after);
  for (const json& t : stopped["tasks"]) EXPECT_EQ(t["state"], "stopped") << t;
  CliRun unknown = Cli({"stop", "a-99999"});
  EXPECT_EQ(unknown.exit_code, 1) << unknown;
  EXPECT_NE(unknown.err.find("array a-99999 not found"), std::string::npos) << unknown;
}

TEST_F(CliTest, ShowExplainsWhyATaskIsPending) {
  const std::string id = Submit({"--gpus", "8", "--gpu-model", "H100-80GB"});
  CliRun show = Cli({"show", id});
  ASSERT_EQ(show.exit_code, 0) << show;
  EXPECT_TRUE(std::regex_search(show.out, std::regex("State: +pending\n"))) << show;
  EXPECT_TRUE(std::regex_search(show.out, std::regex("Queue position: +[1-9][0-9]*\n"))) << show;
  EXPECT_TRUE(std::regex_search(show.out, std::regex("Why pending: +\\S.*\n"))) << show;

  CliRun as_json = Cli({"show", id, "--json"});
  ASSERT_EQ(as_json.exit_code, 0) << as_json;
  const json t = ParseJson(as_json);
  EXPECT_EQ(t["state"], "pending");
  EXPECT_GE(t["queue_position"].get<int64_t>(), 1);
  EXPECT_FALSE(t["pending_reason"].get<std::string>().empty());
  EXPECT_NE(show.out.find(t["pending_reason"].get<std::string>()), std::string::npos) << show;
}

TEST_F(CliTest, EveryJsonOutputParses) {
  const std::string id = Submit({"--gpu-share", "250", "--gpu-mem", "4Gi"});
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"ls"},
           {"ls", "--all", "--page-size", "1"},
           {"show", id},
           {"events", id},
           {"nodes"},
           {"project", "ls"},
           {"user", "ls"},
           {"key", "ls"},
           {"price", "ls"},
           {"usage", "--project", "default"},
           {"bill", "balance", "--project", "default"},
           {"bill", "ledger", "--project", "default"},
           {"bill", "statement", "--project", "default", "--from", "-1d"},
           {"bill", "cost", id}}) {
    args.push_back("--json");
    CliRun r = Cli(args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << " " << r;
    EXPECT_TRUE(ParseJson(r).is_object()) << args[0] << " " << r;
  }
}

TEST_F(CliTest, LsAllFollowsPages) {
  Submit({});
  Submit({});
  CliRun one_page = Cli({"ls", "--json", "--limit", "1000"});
  CliRun paged = Cli({"ls", "--all", "--page-size", "1", "--json"});
  ASSERT_EQ(paged.exit_code, 0) << paged;
  EXPECT_GE(ParseJson(paged)["tasks"].size(), 2u);
  EXPECT_EQ(ParseJson(paged)["tasks"], ParseJson(one_page)["tasks"]);
  EXPECT_TRUE(ParseJson(paged)["next_after"].is_null());
}

TEST_F(CliTest, StopThenRemove) {
  const std::string id = Submit({"--gpus", "1"});
  CliRun stop = Cli({"stop", id});
  ASSERT_EQ(stop.exit_code, 0) << stop;
  EXPECT_EQ(stop.out, id + ": stopped\n");
  CliRun show = Cli({"show", id, "--json"});
  EXPECT_EQ(ParseJson(show)["state"], "stopped");
  CliRun events = Cli({"events", id});
  EXPECT_TRUE(std::regex_search(events.out, std::regex("pending +stopped"))) << events;
  CliRun rm = Cli({"rm", id});
  ASSERT_EQ(rm.exit_code, 0) << rm;
  EXPECT_EQ(rm.out, "deleted " + id + "\n");
  EXPECT_EQ(Cli({"show", id}).exit_code, 1);
}

TEST_F(CliTest, UsageErrorsExitTwoNamingTheFlagAndSendNothing) {
  const size_t before = TaskCount();
  const struct {
    std::vector<std::string> args;
    std::vector<std::string> named;
  } cases[] = {
      {{"submit", "--gpus", "1", "--bogus", "--", "true"}, {"--bogus"}},
      {{"ls", "--bogus"}, {"--bogus"}},
      {{"submit", "--gpus", "1", "--mig", "3g.40gb", "--", "true"}, {"--gpus", "--mig"}},
      {{"submit", "--gpus", "1", "--gpu-share", "500", "--", "true"}, {"--gpus", "--gpu-share"}},
      {{"submit", "--max-runtime", "2x", "--", "true"}, {"--max-runtime", "'2x'"}},
      {{"submit", "--gpus", "9", "--", "true"}, {"--gpus", "1..8"}},
      {{"submit", "--gpus", "1"}, {"nothing to run"}},
      {{"ls", "--state", "sleeping"}, {"--state", "sleeping"}},
      {{"ls", "--limit", "0"}, {"--limit"}},
      {{"show"}, {"id"}},
      {{"credit", "add", "default", "1.1234567"}, {"six decimals"}},
      {{"submit", "--array", "5-1", "--", "true"}, {"--array '5-1'", "ends below its start"}},
      {{"submit", "--array", "0-9%0", "--", "true"}, {"--array", "limit after %"}},
      {{"submit", "--array", "0-10000", "--", "true"}, {"--array", "more than 10000 indexes"}},
      {{"submit", "--array", "", "--", "true"}, {"--array is empty"}},
      {{"submit", "--array", "0-3", "--input", "x", "--", "true"}, {"--input", "--array"}},
      {{"ls", "--array", "t-3"}, {"--array must be an array id"}},
      {{"ls", "--metrics", "a,,b"}, {"--metrics"}},
  };
  for (const auto& c : cases) {
    CliRun r = Cli(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args[0] << " " << c.args[1] << " " << r;
    EXPECT_EQ(r.err.rfind("gpupool: ", 0), 0u) << r;
    EXPECT_TRUE(r.out.empty()) << r;
    for (const std::string& name : c.named) {
      EXPECT_NE(r.err.find(name), std::string::npos) << name << " not in " << r;
    }
  }
  EXPECT_EQ(TaskCount(), before);
}

TEST_F(CliTest, ApiErrorExitsOneWithTheServersMessage) {
  api::Client client(credentials_->endpoint, credentials_->access_key, credentials_->secret_key);
  Result<json> direct = client.CallJson("GET", "/v1/tasks/t-999");
  ASSERT_FALSE(direct);
  CliRun r = Cli({"show", "t-999"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_EQ(r.err, "gpupool: " + direct.error().message + "\n");
  EXPECT_TRUE(r.out.empty()) << r;
  // With --json the error is a JSON object on stderr, the exit code the same.
  CliRun json_too = Cli({"show", "t-999", "--json"});
  EXPECT_EQ(json_too.exit_code, 1) << json_too;
  EXPECT_TRUE(json_too.out.empty()) << json_too;
  const json error = json::parse(json_too.err, nullptr, /*allow_exceptions=*/false);
  EXPECT_EQ(error,
            (json{{"code", "not_found"}, {"message", direct.error().message}, {"exit_code", 1}}))
      << json_too;
}

TEST_F(CliTest, WithJsonUsageErrorsAreJsonToo) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"ls", "--limit", "0", "--json"},  // the command's own check
           {"ls", "--bogus", "--json"},       // the parser's
       }) {
    CliRun r = Cli(args);
    EXPECT_EQ(r.exit_code, 2) << r;
    const json error = json::parse(r.err, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(error.is_object()) << r;
    EXPECT_EQ(error["code"], "usage") << r;
    EXPECT_EQ(error["exit_code"], 2) << r;
    EXPECT_NE(error["message"].get<std::string>().find(args[1]), std::string::npos) << r;
  }
}

TEST_F(CliTest, TaskIdsMayBeGivenAsBareNumbers) {
  const std::string id = Submit({"--gpus", "1"});
  CliRun show = Cli({"show", id.substr(2), "--json"});
  ASSERT_EQ(show.exit_code, 0) << show;
  EXPECT_EQ(ParseJson(show)["id"], id);
  CliRun stop = Cli({"stop", id.substr(2)});
  EXPECT_EQ(stop.exit_code, 0) << stop;
  EXPECT_EQ(stop.out, id + ": stopped\n");
}

// Both of its streams are read at once; a wrong id is still said once.
TEST_F(CliTest, LogsOfAnUnknownTaskSaysSoOnce) {
  CliRun r = Cli({"logs", "t-999"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_EQ(r.err, "gpupool: task t-999 not found\n") << r;
  CliRun as_json = Cli({"logs", "t-999", "--json"});
  EXPECT_EQ(as_json.exit_code, 1) << as_json;
  EXPECT_EQ(json::parse(as_json.err, nullptr, false)["code"], "not_found") << as_json;
}

TEST_F(CliTest, SizeFlagsTakeUnits) {
  CliRun r = Cli({"submit", "--disk", "50G", "--mem", "16G", "--json", "--", "true"});
  ASSERT_EQ(r.exit_code, 0) << r;
  const json task = ParseJson(r);
  EXPECT_EQ(task["disk_gib"], 50);
  EXPECT_EQ(task["memory_mib"], 16384);
}

TEST_F(CliTest, UnreachableServerExitsOne) {
  std::map<std::string, std::string> env = Env();
  env["GPUPOOL_ENDPOINT"] = "http://127.0.0.1:1";
  CliRun r = RunCli({"ls"}, env);
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_NE(r.err.find("127.0.0.1:1"), std::string::npos) << r;
}

TEST_F(CliTest, MissingConfigurationSaysHowToSetIt) {
  CliRun r = RunCli({"ls"}, {{"HOME", home_}});
  EXPECT_EQ(r.exit_code, 1) << r;
  for (const char* needle :
       {"GPUPOOL_ENDPOINT", "GPUPOOL_ACCESS_KEY", "GPUPOOL_SECRET_KEY", "gpupool login"}) {
    EXPECT_NE(r.err.find(needle), std::string::npos) << needle << " " << r;
  }
}

TEST_F(CliTest, LoginWritesAPrivateProfileThatLaterCommandsUse) {
  const std::string id = Submit({});
  const std::map<std::string, std::string> home_only = {{"HOME", home_}};
  // The secret comes on stdin, as a script would pipe it.
  CliRun login = RunCli(
      {"login", "--endpoint", credentials_->endpoint, "--access-key", credentials_->access_key},
      home_only, credentials_->secret_key + "\n");
  ASSERT_EQ(login.exit_code, 0) << login;
  const std::string path = home_ + "/.config/gpupool/config";
  EXPECT_NE(login.out.find(path), std::string::npos) << login;
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(ReadFile(path).find("[default]"), std::string::npos);

  CliRun show = RunCli({"show", id, "--json"}, home_only);
  ASSERT_EQ(show.exit_code, 0) << show;
  EXPECT_EQ(ParseJson(show)["id"], id);

  // The environment overrides the profile: a dead endpoint in GPUPOOL_ENDPOINT wins.
  CliRun overridden =
      RunCli({"show", id}, {{"HOME", home_}, {"GPUPOOL_ENDPOINT", "http://127.0.0.1:1"}});
  EXPECT_EQ(overridden.exit_code, 1) << overridden;
  // A profile that does not exist is named.
  CliRun other = RunCli({"ls", "--profile", "other"}, home_only);
  EXPECT_EQ(other.exit_code, 1) << other;
  EXPECT_NE(other.err.find("profile 'other'"), std::string::npos) << other;
}

TEST_F(CliTest, LoginWithAWrongSecretSavesNothing) {
  CliRun login = RunCli({"login", "--endpoint", credentials_->endpoint, "--access-key",
                         credentials_->access_key, "--secret-key", "not-the-secret"},
                        {{"HOME", home_}});
  EXPECT_EQ(login.exit_code, 1) << login;
  EXPECT_NE(login.err.find("nothing saved"), std::string::npos) << login;
  EXPECT_FALSE(fs::exists(home_ + "/.config/gpupool/config"));
}

TEST_F(CliTest, AdminVerbsRoundTrip) {
  CliRun project = Cli({"project", "create", "cli-team", "--max-gpus", "2", "--max-tasks", "5"});
  ASSERT_EQ(project.exit_code, 0) << project;
  CliRun credit = Cli({"credit", "add", "cli-team", "12.5", "--note", "welcome"});
  ASSERT_EQ(credit.exit_code, 0) << credit;
  CliRun balance = Cli({"bill", "balance", "--project", "cli-team"});
  EXPECT_EQ(balance.out, "cli-team: 12.500000 (credits 12.500000, usage 0.000000)\n") << balance;
  CliRun user = Cli({"user", "create", "cli-bob", "--projects", "cli-team"});
  ASSERT_EQ(user.exit_code, 0) << user;
  CliRun key = Cli({"key", "create", "--user", "cli-bob", "--json"});
  ASSERT_EQ(key.exit_code, 0) << key;
  const json k = ParseJson(key);
  // Bob's new key works, and his only project is his default.
  std::map<std::string, std::string> bob = {
      {"HOME", home_},
      {"GPUPOOL_ENDPOINT", credentials_->endpoint},
      {"GPUPOOL_ACCESS_KEY", k["access_key"].get<std::string>()},
      {"GPUPOOL_SECRET_KEY", k["secret_key"].get<std::string>()}};
  CliRun bob_usage = RunCli({"usage"}, bob);
  EXPECT_EQ(bob_usage.exit_code, 0) << bob_usage;
  EXPECT_NE(bob_usage.out.find("12.500000"), std::string::npos) << bob_usage;
  CliRun bob_submit = RunCli({"submit", "--", "true"}, bob);
  EXPECT_EQ(bob_submit.exit_code, 0) << bob_submit;
  // Members may not create projects: the server's refusal, exit 1.
  CliRun refused = RunCli({"project", "create", "nope"}, bob);
  EXPECT_EQ(refused.exit_code, 1) << refused;
  CliRun revoke = Cli({"key", "revoke", k["access_key"].get<std::string>()});
  EXPECT_EQ(revoke.exit_code, 0) << revoke;
  EXPECT_EQ(RunCli({"ls"}, bob).exit_code, 1);
}

// ---- cp ----

std::string Pattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>((i * 131 + static_cast<size_t>(seed)) % 251);
  return s;
}

void WriteFile(const std::string& path, const std::string& data) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << data;
}

TEST_F(CliTest, AProjectsStorageQuotaRefusesAnUploadPastItUntilItIsLifted) {
  CliRun bad = Cli({"project", "create", "cli-store", "--max-storage", "lots"});
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_NE(bad.err.find("--max-storage"), std::string::npos) << bad;
  CliRun project = Cli({"project", "create", "cli-store", "--max-storage", "1M"});
  ASSERT_EQ(project.exit_code, 0) << project;
  EXPECT_NE(project.out.find("max storage 1.0 MiB"), std::string::npos) << project;
  // The admin's task in that project; a 2 MiB file would pass the project's 1 MiB.
  const std::string id = Submit({"--project", "cli-store"});
  WriteFile(home_ + "/big.bin", Pattern(2 << 20, 3));
  CliRun refused = Cli({"cp", home_ + "/big.bin", id + ":"});
  EXPECT_EQ(refused.exit_code, 1) << refused;
  EXPECT_NE(refused.err.find("project cli-store's files would take 2097152 bytes (2 MiB); its "
                             "storage quota is 1048576 bytes (1 MiB)"),
            std::string::npos)
      << refused;
  CliRun lifted = Cli({"project", "set-quota", "cli-store", "--max-storage", "unlimited"});
  ASSERT_EQ(lifted.exit_code, 0) << lifted;
  EXPECT_NE(lifted.out.find("max storage unlimited"), std::string::npos) << lifted;
  CliRun up = Cli({"cp", home_ + "/big.bin", id + ":"});
  EXPECT_EQ(up.exit_code, 0) << up;
}

TEST_F(CliTest, CpRoundTripsADirectoryAndAFileOfAPendingTask) {
  const std::string id = Submit({"--gpus", "1"});
  const std::string big = Pattern((4 << 20) + 1000, 7);  // more than one chunk
  WriteFile(home_ + "/data/a.txt", "alpha\n");
  WriteFile(home_ + "/data/sub/big.bin", big);
  fs::create_symlink("/etc/passwd", home_ + "/data/link");

  CliRun up = Cli({"cp", home_ + "/data", id + ":"});
  ASSERT_EQ(up.exit_code, 0) << up;
  EXPECT_EQ(up.out, "uploaded 2 file(s) (4.0 MiB) to " + id + ":data\n");
  EXPECT_NE(up.err.find("skipped " + home_ + "/data/link: a symbolic link (not followed)"),
            std::string::npos)
      << up;
  // A single file into an existing directory, under its own name.
  WriteFile(home_ + "/extra.txt", "extra");
  ASSERT_EQ(Cli({"cp", home_ + "/extra.txt", id + ":data/sub"}).exit_code, 0);

  // The directory back into a new local directory, byte for byte.
  CliRun down = Cli({"cp", id + ":data", home_ + "/back", "--json"});
  ASSERT_EQ(down.exit_code, 0) << down;
  const json summary = ParseJson(down);
  EXPECT_EQ(summary["direction"], "download");
  EXPECT_EQ(summary["files"].size(), 3u) << summary.dump();
  EXPECT_EQ(ReadFile(home_ + "/back/a.txt"), "alpha\n");
  EXPECT_TRUE(ReadFile(home_ + "/back/sub/big.bin") == big);
  EXPECT_EQ(ReadFile(home_ + "/back/sub/extra.txt"), "extra");
  EXPECT_FALSE(fs::exists(home_ + "/back/link"));
  // A file into an existing local directory; the task's root into one.
  ASSERT_EQ(Cli({"cp", id + ":data/a.txt", home_ + "/back"}).exit_code, 0);
  CliRun root = Cli({"cp", id + ":", home_ + "/root"});
  ASSERT_EQ(root.exit_code, 0) << root;
  EXPECT_TRUE(ReadFile(home_ + "/root/data/sub/big.bin") == big);
  for (const auto& entry : fs::recursive_directory_iterator(home_ + "/root")) {
    EXPECT_EQ(entry.path().string().find(".gpupool-part"), std::string::npos) << entry.path();
  }
}

TEST_F(CliTest, CpRefusesPathsThatLeaveTheWorkspaceAndTasksOutOfReach) {
  const std::string id = Submit({"--gpus", "1"});
  WriteFile(home_ + "/x", "x");
  const struct {
    std::vector<std::string> args;
    std::string message;
  } usage[] = {
      {{"cp", home_ + "/x", id + ":../evil"},
       "destination " + id + ": path '../evil' has a '..' component"},
      {{"cp", id + ":dir/../../etc/passwd", home_ + "/y"}, "has a '..' component"},
      {{"cp", id + "://etc/passwd", home_ + "/y"}, "is outside the task's workspace /root"},
      {{"cp", home_ + "/x", home_ + "/y"}, "neither source nor destination names a task's files"},
      {{"cp", id + ":a", id + ":b"}, "both tasks' files"},
  };
  for (const auto& c : usage) {
    CliRun r = Cli(c.args);
    EXPECT_EQ(r.exit_code, 2) << r;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r;
  }
  EXPECT_FALSE(fs::exists(home_ + "/y"));

  // The server's refusals exit 1 with its message.
  CliRun missing = Cli({"cp", home_ + "/x", "t-999999:x"});
  EXPECT_EQ(missing.exit_code, 1) << missing;
  EXPECT_EQ(missing.err, "gpupool: task t-999999 not found\n");
  ASSERT_EQ(Cli({"stop", id}).exit_code, 0);
  CliRun ended = Cli({"cp", home_ + "/x", id + ":x"});
  EXPECT_EQ(ended.exit_code, 1) << ended;
  EXPECT_EQ(ended.err, "gpupool: task " + id +
                           " has ended (stopped): its files can be downloaded but no longer "
                           "uploaded\n");
  // Another project's member does not see the task at all.
  ASSERT_EQ(Cli({"project", "create", "cp-other"}).exit_code, 0);
  ASSERT_EQ(Cli({"user", "create", "cp-eve", "--projects", "cp-other"}).exit_code, 0);
  const json key = ParseJson(Cli({"key", "create", "--user", "cp-eve", "--json"}));
  std::map<std::string, std::string> eve = Env();
  eve["GPUPOOL_ACCESS_KEY"] = key["access_key"].get<std::string>();
  eve["GPUPOOL_SECRET_KEY"] = key["secret_key"].get<std::string>();
  CliRun hidden = RunCli({"cp", id + ":", home_ + "/eve"}, eve);
  EXPECT_EQ(hidden.exit_code, 1) << hidden;
  EXPECT_EQ(hidden.err, "gpupool: task " + id + " not found\n");
}

TEST_F(CliTest, CpResumesAnInterruptedUpload) {
  const std::string id = Submit({"--gpus", "1"});
  const std::string data = Pattern((4 << 20) + 5000, 3);
  WriteFile(home_ + "/big.bin", data);
  // The first chunk arrived before the connection broke.
  api::Client client(credentials_->endpoint, credentials_->access_key, credentials_->secret_key);
  auto first = client.Call("PUT", "/v1/tasks/" + id + "/uploads?path=big.bin&offset=0",
                           data.substr(0, 4 << 20));
  ASSERT_TRUE(first && first->status == 200);

  CliRun up = Cli({"cp", home_ + "/big.bin", id + ":", "--json"});
  ASSERT_EQ(up.exit_code, 0) << up;
  const json summary = ParseJson(up);
  ASSERT_EQ(summary["files"].size(), 1u);
  EXPECT_EQ(summary["files"][0]["path"], "big.bin");
  EXPECT_EQ(summary["files"][0]["resumed_from"], 4 << 20);
  CliRun down = Cli({"cp", id + ":big.bin", home_ + "/copy.bin"});
  ASSERT_EQ(down.exit_code, 0) << down;
  EXPECT_TRUE(ReadFile(home_ + "/copy.bin") == data);

  // A server copy that is not this file's beginning: the commit's hash tells, it starts over.
  const std::string other = Pattern((4 << 20) + 5000, 9);
  ASSERT_EQ(client
                .Call("PUT", "/v1/tasks/" + id + "/uploads?path=again.bin&offset=0",
                      other.substr(0, 4 << 20))
                ->status,
            200);
  CliRun again = Cli({"cp", home_ + "/big.bin", id + ":again.bin", "--json"});
  ASSERT_EQ(again.exit_code, 0) << again;
  EXPECT_EQ(ParseJson(again)["files"][0]["resumed_from"], 0);
  ASSERT_EQ(Cli({"cp", id + ":again.bin", home_ + "/again.bin"}).exit_code, 0);
  EXPECT_TRUE(ReadFile(home_ + "/again.bin") == data);
}

TEST_F(CliTest, JoinTokenVerbsCreateListAndRevoke) {
  CliRun created =
      Cli({"join-token", "create", "--description", "cli rack", "--expires-in", "1d", "--json"});
  ASSERT_EQ(created.exit_code, 0) << created;
  const json t = ParseJson(created);
  const std::string id = t["id"];
  const std::string token = t["token"];
  EXPECT_EQ(t["state"], "active");
  EXPECT_EQ(t["description"], "cli rack");
  EXPECT_GT(t["expires_ms"].get<int64_t>(), 0);

  CliRun human = Cli({"join-token", "create"});
  ASSERT_EQ(human.exit_code, 0) << human;
  EXPECT_TRUE(std::regex_search(human.out, std::regex("join token: JT[A-Z2-7]+\\.[A-Z2-7]+\n")))
      << human;
  EXPECT_NE(human.out.find("expires:    never"), std::string::npos) << human;
  EXPECT_NE(human.err.find("gpupool agent --server " + credentials_->endpoint + " --join-token"),
            std::string::npos)
      << human;

  // A node joins with it; the listing names the node and never shows a token.
  api::Client anonymous(credentials_->endpoint, "", "");
  Result<json> joined = anonymous.CallJson("POST", "/v1/agent/join",
                                           json{{"token", token}, {"node", "cli-node"}}.dump());
  ASSERT_TRUE(joined) << joined.error().message;
  CliRun list = Cli({"join-token", "list"});
  ASSERT_EQ(list.exit_code, 0) << list;
  EXPECT_TRUE(std::regex_search(list.out, std::regex(id + " +active +cli-node +20"))) << list;
  EXPECT_NE(list.out.find("cli rack"), std::string::npos) << list;
  EXPECT_EQ(list.out.find(token), std::string::npos) << list;
  CliRun list_json = Cli({"join-token", "ls", "--json"});
  ASSERT_EQ(list_json.exit_code, 0) << list_json;
  EXPECT_EQ(ParseJson(list_json)["join_tokens"].size(), 2u) << list_json;

  CliRun revoke = Cli({"join-token", "revoke", id});
  ASSERT_EQ(revoke.exit_code, 0) << revoke;
  EXPECT_EQ(revoke.out, "revoked join token " + id + "; nodes that joined with it: cli-node\n");
  api::Client node(credentials_->endpoint, (*joined)["access_key"].get<std::string>(),
                   (*joined)["secret_key"].get<std::string>());
  Result<json> refused = node.CallJson("POST", "/v1/agent/nodes/cli-node/heartbeat");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("revoked"), std::string::npos);

  // Usage errors exit 2 naming the flag; the server's refusals exit 1 with its message.
  const struct {
    std::vector<std::string> args;
    std::string named;
  } usage[] = {
      {{"join-token", "create", "--expires-in", "2x"}, "--expires-in"},
      {{"join-token", "create", "--bogus"}, "--bogus"},
      {{"join-token", "revoke"}, "id"},
      {{"join-token", "revoke", "not an id"}, "join token id"},
      {{"join-token"}, "subcommand"},
  };
  for (const auto& c : usage) {
    CliRun r = Cli(c.args);
    EXPECT_EQ(r.exit_code, 2) << r;
    EXPECT_NE(r.err.find(c.named), std::string::npos) << c.named << " not in " << r;
  }
  CliRun unknown = Cli({"join-token", "revoke", "JTNOSUCH"});
  EXPECT_EQ(unknown.exit_code, 1) << unknown;
  EXPECT_EQ(unknown.err, "gpupool: join token JTNOSUCH not found\n");
  CliRun user = Cli({"user", "create", "cli-jo", "--projects", "default"});
  ASSERT_EQ(user.exit_code, 0) << user;
  const json k = ParseJson(Cli({"key", "create", "--user", "cli-jo", "--json"}));
  CliRun member =
      RunCli({"join-token", "list"}, {{"HOME", home_},
                                      {"GPUPOOL_ENDPOINT", credentials_->endpoint},
                                      {"GPUPOOL_ACCESS_KEY", k["access_key"].get<std::string>()},
                                      {"GPUPOOL_SECRET_KEY", k["secret_key"].get<std::string>()}});
  EXPECT_EQ(member.exit_code, 1) << member;
  EXPECT_EQ(member.err, "gpupool: only an admin may do this\n");
}

// --- held tasks: submit --hold, release, submit --input ---

TEST_F(CliTest, AHeldTaskWaitsOutOfTheQueueUntilReleased) {
  CliRun held = Cli({"submit", "--hold", "--json", "--", "sleep", "600"});
  ASSERT_EQ(held.exit_code, 0) << held;
  const std::string id = ParseJson(held)["id"];
  EXPECT_EQ(ParseJson(held)["held"], true);
  const std::string why =
      "held: release it with POST /v1/tasks/" + id + "/release (gpupool release " + id + ")";
  CliRun show = Cli({"show", id});
  ASSERT_EQ(show.exit_code, 0) << show;
  EXPECT_TRUE(std::regex_search(show.out, std::regex("Why pending: +held: release it with")))
      << show;
  EXPECT_NE(show.out.find(why + "\n"), std::string::npos) << show;
  EXPECT_EQ(show.out.find("Queue position"), std::string::npos) << show;
  CliRun ls = Cli({"ls", "--state", "pending"});
  EXPECT_TRUE(std::regex_search(ls.out, std::regex(id + " +\\S+ +default +pending \\(held\\) ")))
      << ls;

  CliRun released = Cli({"release", id});
  ASSERT_EQ(released.exit_code, 0) << released;
  EXPECT_EQ(released.out, id + ": released\n");
  const json t = ParseJson(Cli({"show", id, "--json"}));
  EXPECT_EQ(t["held"], false);
  EXPECT_GE(t["queue_position"].get<int64_t>(), 1);
  CliRun again = Cli({"release", id, "--json"});
  EXPECT_EQ(again.exit_code, 1) << again;
  EXPECT_EQ(json::parse(again.err, nullptr, /*allow_exceptions=*/false),
            (json{{"code", "failed_precondition"},
                  {"message", "task " + id + " is not held: it is already in the queue"},
                  {"exit_code", 1}}))
      << again;
  EXPECT_EQ(Cli({"release"}).exit_code, 2);
  const json events = ParseJson(Cli({"events", id, "--json"}))["events"];
  ASSERT_EQ(events.size(), 2u) << events.dump();
  EXPECT_EQ(events[0]["reason"], "submitted, " + why);
  EXPECT_EQ(events[1]["reason"], "released by admin");
}

TEST_F(CliTest, SubmitWithInputsUploadsThemThenReleasesTheTask) {
  WriteFile(home_ + "/data/x", "input x\n");
  WriteFile(home_ + "/data/sub/y", "input y\n");
  WriteFile(home_ + "/train.yaml", "lr: 0.1\n");
  CliRun submitted = Cli({"submit", "--input", home_ + "/data:inputs/data", "--input",
                          home_ + "/train.yaml", "--", "sh", "-c", "cat inputs/data/x"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted;
  ASSERT_TRUE(std::regex_match(submitted.out, std::regex("t-[0-9]+\n"))) << submitted;
  const std::string id = submitted.out.substr(0, submitted.out.size() - 1);
  const json t = ParseJson(Cli({"show", id, "--json"}));
  EXPECT_EQ(t["state"], "pending");
  EXPECT_EQ(t["held"], false) << "released once its inputs were uploaded";

  ASSERT_EQ(Cli({"cp", id + ":", home_ + "/back"}).exit_code, 0);
  EXPECT_EQ(ReadFile(home_ + "/back/inputs/data/x"), "input x\n");
  EXPECT_EQ(ReadFile(home_ + "/back/inputs/data/sub/y"), "input y\n");
  EXPECT_EQ(ReadFile(home_ + "/back/train.yaml"), "lr: 0.1\n");
  const json events = ParseJson(Cli({"events", id, "--json"}))["events"];
  ASSERT_EQ(events.size(), 2u) << events.dump();
  EXPECT_EQ(events[1]["reason"], "released by admin");

  // --hold with --input: the inputs are uploaded and the task stays held.
  CliRun kept = Cli({"submit", "--hold", "--input", home_ + "/train.yaml", "--json", "--", "true"});
  ASSERT_EQ(kept.exit_code, 0) << kept;
  EXPECT_EQ(ParseJson(kept)["held"], true);
  const std::string kept_id = ParseJson(kept)["id"];
  ASSERT_EQ(Cli({"cp", kept_id + ":train.yaml", home_ + "/kept.yaml"}).exit_code, 0);
  EXPECT_EQ(ReadFile(home_ + "/kept.yaml"), "lr: 0.1\n");
}

TEST_F(CliTest, SubmitInputsAreCheckedBeforeAnythingIsSubmitted) {
  WriteFile(home_ + "/x", "x");
  const size_t before = TaskCount();
  const struct {
    std::vector<std::string> args;
    std::string message;
  } usage[] = {
      {{"--input", home_ + "/missing:m"},
       "gpupool: --input '" + home_ + "/missing:m': " + home_ +
           "/missing: No such file or directory\n"},
      {{"--input", home_ + "/x:../x"},
       "gpupool: --input '" + home_ +
           "/x:../x': path '../x' has a '..' component; paths may not leave the workspace\n"},
      {{"--input", home_ + "/x:a", "--input", home_ + "/x:a"},
       "gpupool: --input '" + home_ + "/x:a' and --input '" + home_ +
           "/x:a' would both become 'a' in the workspace; give one of them another PATH\n"},
  };
  for (const auto& c : usage) {
    std::vector<std::string> args = {"submit"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    args.insert(args.end(), {"--", "true"});
    CliRun r = Cli(args);
    EXPECT_EQ(r.exit_code, 2) << r;
    EXPECT_EQ(r.err, c.message);
  }
  EXPECT_EQ(TaskCount(), before) << "nothing was submitted";
}

TEST_F(CliTest, AFailedInputUploadStopsTheTaskAndSaysWhich) {
  WriteFile(home_ + "/one.txt", "1");
  WriteFile(home_ + "/dir/f", "f");
  // The second input needs 'x' to be a directory, the first made it a file: the server refuses.
  CliRun r =
      Cli({"submit", "--input", home_ + "/one.txt:x", "--input", home_ + "/dir:x/y", "--", "true"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(r.out.empty()) << r;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex("task (t-[0-9]+) was stopped\n$"))) << r;
  const std::string id = m[1];
  const std::string refused =
      "task " + id + " has a file 'x', so 'x/y/f' cannot be created below it";
  EXPECT_EQ(r.err, "gpupool: --input '" + home_ + "/dir:x/y': uploading " + home_ +
                       "/dir/f failed: " + refused + "; task " + id + " was stopped\n");
  const json t = ParseJson(Cli({"show", id, "--json"}));
  EXPECT_EQ(t["state"], "stopped");
  EXPECT_EQ(t["held"], false);
}

// `sim replay --per-task FILE` writes the per-task records of the golden replay (the rows of
// tests/data/replay/expected.txt that are not comments or summary); an unwritable path is an
// error naming it.
TEST(CliSimTest, ReplayWritesPerTaskRecords) {
  const std::string data = std::string(GPUPOOL_SOURCE_DIR) + "/tests/data/replay/";
  const std::string out = testing::MakeTempDir("gpupool-cli-sim") + "/tasks.txt";
  const CliRun run = RunCli({"sim", "replay", "--nodes", data + "nodes.csv", "--pods",
                             data + "pods.csv", "--policy", "best-fit", "--per-task", out},
                            {});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::string want;
  std::istringstream expected(ReadFile(data + "expected.txt"));
  for (std::string line; std::getline(expected, line);) {
    // Task rows: names p01, p02, … (summary lines start with words).
    if (line.size() > 1 && line[0] == 'p' && std::isdigit(static_cast<unsigned char>(line[1]))) {
      want += line + "\n";
    }
  }
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(ReadFile(out), want);

  const CliRun bad = RunCli({"sim", "replay", "--nodes", data + "nodes.csv", "--pods",
                             data + "pods.csv", "--per-task", "/nonexistent-dir/tasks.txt"},
                            {});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("--per-task: cannot write /nonexistent-dir/tasks.txt"), std::string::npos)
      << bad.err;
}

}  // namespace
}  // namespace gpupool
