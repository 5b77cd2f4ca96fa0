// /metrics of a real `gpupool server` in a representative state — nodes with whole, shared and
// MIG-partitioned GPUs and a lost one, running, scheduled, pending, held and finished tasks of two
// projects, the agents' usage, billing on — checked by Prometheus' own linter (`promtool check
// metrics`), for labels that mean the same in every family, and against docs/monitoring/: every
// metric the Grafana dashboard, the alerting rules and their unit tests name is one the server
// exports, with a series in this state. promtool comes from Debian's prometheus package
// (scripts/install-deps.sh --test); without it the promtool test fails saying so.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/client.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

using nlohmann::json;
using testing::Eventually;
using testing::ServerProcess;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One sample line of the exposition: `name{labels} value`.
struct Series {
  std::string name;
  std::map<std::string, std::string> labels;
};

// The exposition, parsed: each family's type (from its TYPE line) and every sample.
struct Exposition {
  std::string text;
  std::map<std::string, std::string> types;
  std::vector<Series> series;
  // The family a sample belongs to: its name, or a histogram's name for _bucket/_sum/_count.
  std::string FamilyOf(const std::string& name) const {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (name.size() > s.size() && name.ends_with(s)) {
        const std::string base = name.substr(0, name.size() - s.size());
        const auto it = types.find(base);
        if (it != types.end() && it->second == "histogram") return base;
      }
    }
    return name;
  }
};

Exposition Parse(std::string text) {
  Exposition e;
  std::istringstream in(text);
  const std::regex label(R"re(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)")re");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream words(line.substr(7));
      std::string name, type;
      words >> name >> type;
      e.types[name] = type;
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    Series s;
    const size_t brace = line.find('{');
    const size_t space = line.find(' ');
    s.name = line.substr(0, std::min(brace, space));
    if (brace < space) {
      const std::string labels = line.substr(brace + 1, line.rfind('}') - brace - 1);
      for (std::sregex_iterator it(labels.begin(), labels.end(), label), end; it != end; ++it) {
        s.labels[(*it)[1]] = (*it)[2];
      }
    }
    e.series.push_back(std::move(s));
  }
  e.text = std::move(text);
  return e;
}

// Builds the state through the API (the agent-facing routes standing in for agents) and scrapes
// /metrics once; the tests below read what it returned.
class MetricsExpositionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeTempDir("gpupool-metrics"));
    // Nodes heartbeat from a thread below; the one that does not is lost after 2 s.
    server_ = new ServerProcess(*dir_, {"--meter-interval", "1", "--node-timeout", "2"});
    auto creds = server_->ReadCredentials();
    client_ = new api::Client(server_->endpoint(), creds.access_key, creds.secret_key);
    tasks_ = new json(json::array());
    BuildState(creds);
    auto text = api::Client(server_->endpoint(), "", "").Call("GET", "/metrics");
    ASSERT_TRUE(text) << text.error().message;
    ASSERT_EQ(text->status, 200) << text->body;
    exposition_ = new Exposition(Parse(text->body));
    *tasks_ = Call("GET", "/v1/tasks?limit=1000")["tasks"];
  }
  static void TearDownTestSuite() {
    StopHeartbeats();
    delete exposition_;
    delete tasks_;
    delete client_;
    delete server_;
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  static json Call(const std::string& method, const std::string& path, const json& body = nullptr) {
    auto r = client_->CallJson(method, path, body.is_null() ? std::string() : body.dump());
    EXPECT_TRUE(r) << method << " " << path << ": " << r.error().message;
    return r.value_or(json());
  }

  static void AddNode(const std::string& name, json gpus) {
    Call("POST", "/v1/agent/nodes",
         {{"name", name}, {"cpu_milli", 64000}, {"memory_mib", 262144}, {"gpus", gpus}});
  }

  static std::string Submit(const std::string& project, json body) {
    body["project"] = project;
    body["command"] = {"python3", "train.py"};
    return Call("POST", "/v1/tasks", body)["id"];
  }

  static json Task(const std::string& id) { return Call("GET", "/v1/tasks/" + id); }

  static void Running(const std::string& id) {
    ASSERT_TRUE(Eventually([&] { return Task(id)["state"] == "scheduled"; })) << id;
    Call("POST", "/v1/agent/tasks/" + id + "/status", {{"state", "running"}});
  }

  // One batch of the node's usage and its running tasks' (`util` per task: GPU utilisation, or
  // null for a CPU task); the first sample is 30 s old, so an idle task has a 30 s streak.
  static void Telemetry(const std::string& node, int gpus,
                        const std::vector<std::pair<std::string, json>>& tasks) {
    const int64_t now = NowMs();
    json samples = json::array();
    for (int64_t t : {now - 30'000, now}) {
      json g = json::array();
      for (int i = 0; i < gpus; ++i) {
        g.push_back({{"index", i}, {"util_pct", 40 + i}, {"mem_used_mib", 1024 * (i + 1)}});
      }
      samples.push_back({{"time_ms", t},
                         {"cpu_milli", 12000},
                         {"memory_mib", 90000},
                         {"gpu_util_pct", 41},
                         {"gpu_mem_mib", 2048},
                         {"gpus", g}});
    }
    json batch_tasks = json::array();
    for (const auto& [id, util] : tasks) {
      json ts = json::array();
      for (int64_t t : {now - 30'000, now}) {
        json s = {{"time_ms", t}, {"cpu_milli", 980}, {"memory_mib", 2048}};
        if (!util.is_null()) {
          s["gpu_util_pct"] = util;
          s["gpu_mem_mib"] = 30500;
        }
        ts.push_back(s);
      }
      batch_tasks.push_back({{"task_id", id}, {"bound_ms", Task(id)["bound_ms"]}, {"samples", ts}});
    }
    Call("POST", "/v1/agent/nodes/" + node + "/telemetry",
         {{"samples", samples}, {"tasks", batch_tasks}});
  }

  static void BuildState(const testing::Credentials& creds) {
    for (const char* project : {"vision", "speech"}) {
      Call("POST", "/v1/projects", {{"id", project}, {"name", project}});
      Call("POST", "/v1/projects/" + std::string(project) + "/credits",
           {{"amount_micros", 1'000'000'000}});
    }
    Call("PUT", "/v1/prices", {{"resource", "gpu:*"}, {"micros_per_hour", 3'600'000}});
    AddNode("gpu-gone", {{{"model", "V100-32GB"}}});
    ASSERT_TRUE(Eventually([] { return Call("GET", "/v1/nodes/gpu-gone")["status"] == "lost"; },
                           std::chrono::seconds(10)));
    const std::vector<std::string> live = {"gpu-a100", "gpu-mig", "gpu-t4"};
    AddNode("gpu-a100", {{{"model", "A100-80GB"}},
                         {{"model", "A100-80GB"}},
                         {{"model", "A100-80GB"}},
                         {{"model", "A100-80GB"}}});
    AddNode("gpu-mig",
            {{{"model", "A100-80GB"},
              {"mig_enabled", true},
              {"mig_instances",
               {{{"profile", "3g.40gb"}, {"start", 0}}, {{"profile", "3g.40gb"}, {"start", 4}}}}}});
    AddNode("gpu-t4", {{{"model", "T4"}}, {{"model", "T4"}}});
    heartbeats_ = new std::thread([endpoint = server_->endpoint(), creds, live] {
      api::Client beat(endpoint, creds.access_key, creds.secret_key);
      while (!stop_heartbeats_) {
        for (const std::string& node : live) {
          // A beat that fails is sent again in the next round, well within the timeout.
          (void)beat.Call("POST", "/v1/agent/nodes/" + node + "/heartbeat", "");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(250));  // the agents' period
      }
    });

    const std::string train =
        Submit("vision", {{"name", "train"}, {"gpu_count", 2}, {"gpu_models", {"A100-80GB"}}});
    const std::string sliced = Submit("vision", {{"name", "mig"}, {"mig_profile", "3g.40gb"}});
    const std::string shared =
        Submit("vision", {{"name", "share"}, {"gpu_milli", 500}, {"gpu_models", {"T4"}}});
    Submit("vision", {{"name", "too-big"}, {"gpu_count", 8}});
    const std::string asr =
        Submit("speech", {{"name", "asr"}, {"gpu_count", 1}, {"gpu_models", {"T4"}}});
    const std::string cpu = Submit("speech", {{"name", "cpu"}, {"cpu_milli", 1000}});
    Submit("speech", {{"name", "held"}, {"gpu_count", 1}, {"hold", true}});
    Submit("speech", {{"name", "too-big"}, {"gpu_count", 8}});
    const std::string done = Submit("speech", {{"name", "done"}, {"gpu_count", 1}});
    for (const std::string& id : {train, sliced, asr, cpu, done}) Running(id);
    Call("POST", "/v1/agent/tasks/" + done + "/status", {{"state", "succeeded"}, {"exit_code", 0}});
    ASSERT_TRUE(Eventually([&] { return Task(shared)["state"] == "scheduled"; }));
    // Each node's batch with the running tasks bound there (the CPU task may be on any).
    const std::vector<std::pair<std::string, json>> utilisation = {
        {train, 0}, {sliced, 80}, {asr, 95}, {cpu, nullptr}};
    for (const auto& [node, gpus] :
         std::vector<std::pair<std::string, int>>{{"gpu-a100", 4}, {"gpu-mig", 1}, {"gpu-t4", 2}}) {
      std::vector<std::pair<std::string, json>> here;
      for (const auto& [id, util] : utilisation) {
        if (Task(id)["placement"]["node"] == node) here.emplace_back(id, util);
      }
      Telemetry(node, gpus, here);
    }
    // The meter bills every second: wait until both projects have been charged.
    ASSERT_TRUE(Eventually([] {
      return Call("GET", "/v1/projects/vision/balance")["usage_micros"].get<int64_t>() > 0 &&
             Call("GET", "/v1/projects/speech/balance")["usage_micros"].get<int64_t>() > 0;
    }));
  }

  static void StopHeartbeats() {
    if (!heartbeats_) return;
    stop_heartbeats_ = true;
    heartbeats_->join();
    delete heartbeats_;
    heartbeats_ = nullptr;
  }

  // Every `gpupool_…` metric name in a file of docs/monitoring/.
  static std::set<std::string> NamesIn(const std::string& file) {
    const std::string text = ReadFile(std::string(GPUPOOL_SOURCE_DIR) + "/docs/monitoring/" + file);
    const std::regex name(R"(\bgpupool_[a-z0-9_]*[a-z0-9])");
    std::set<std::string> names;
    for (std::sregex_iterator it(text.begin(), text.end(), name), end; it != end; ++it) {
      names.insert(it->str());
    }
    EXPECT_FALSE(names.empty()) << file << " names no metric";
    return names;
  }

  // Each name is a family the server exports (a histogram's by its _bucket, _sum or _count), and
  // the representative state has a series of it, so the panel or the rule has data to show.
  static void ExpectExported(const std::string& file) {
    const Exposition& e = *exposition_;
    for (const std::string& name : NamesIn(file)) {
      const std::string family = e.FamilyOf(name);
      EXPECT_TRUE(e.types.count(family)) << file << " uses " << name << ", which /metrics lacks";
      bool has_series = false;
      for (const Series& s : e.series) has_series = has_series || e.FamilyOf(s.name) == family;
      EXPECT_TRUE(has_series) << file << " uses " << name << ", which has no series here";
    }
  }

  static std::string* dir_;
  static ServerProcess* server_;
  static api::Client* client_;
  static json* tasks_;
  static Exposition* exposition_;
  static std::thread* heartbeats_;
  static std::atomic<bool> stop_heartbeats_;
};

std::string* MetricsExpositionTest::dir_ = nullptr;
ServerProcess* MetricsExpositionTest::server_ = nullptr;
api::Client* MetricsExpositionTest::client_ = nullptr;
json* MetricsExpositionTest::tasks_ = nullptr;
Exposition* MetricsExpositionTest::exposition_ = nullptr;
std::thread* MetricsExpositionTest::heartbeats_ = nullptr;
std::atomic<bool> MetricsExpositionTest::stop_heartbeats_ = false;

// The path of promtool, or a failure saying how to get it.
std::string Promtool() {
  const std::string promtool = GPUPOOL_PROMTOOL;
  EXPECT_FALSE(promtool.empty())
      << "promtool was not found when the build was configured: install Debian's prometheus "
         "package (scripts/install-deps.sh --test), then configure again";
  return promtool;
}

// Runs `promtool ARGS` (a shell command line's tail); its exit status and output.
std::pair<int, std::string> RunPromtool(const std::string& promtool, const std::string& args) {
  FILE* out = popen((promtool + " " + args + " 2>&1").c_str(), "r");
  if (out == nullptr) return {-1, "popen failed"};
  std::string output;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), out)) > 0;) output.append(buf, n);
  const int status = pclose(out);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

TEST_F(MetricsExpositionTest, PromtoolFindsNoProblem) {
  const std::string promtool = Promtool();
  if (promtool.empty()) return;
  const std::string file = *dir_ + "/metrics.txt";
  std::ofstream(file) << exposition_->text;
  const auto [status, findings] = RunPromtool(promtool, "check metrics < " + file);
  EXPECT_EQ(status, 0) << findings;
  EXPECT_EQ(findings, "") << "in\n" << exposition_->text;
}

// The state is what it claims to be: each kind of series is there.
TEST_F(MetricsExpositionTest, TheStateIsRepresentative) {
  const std::string& text = exposition_->text;
  for (const char* line :
       {"gpupool_node_status{node=\"gpu-gone\",status=\"lost\"} 1\n",
        "gpupool_gpus_allocated{model=\"A100-80GB\"} 2.428\n",
        "gpupool_gpus_allocated{model=\"T4\"} 1.5\n", "gpupool_gpus{model=\"T4\"} 2\n",
        "gpupool_queue_depth{project=\"vision\"} 1\n",
        "gpupool_queue_depth{project=\"speech\"} 1\n",
        "gpupool_tasks{project=\"speech\",state=\"succeeded\"} 1\n",
        "gpupool_tasks{project=\"speech\",state=\"pending\"} 2\n",
        "gpupool_project_balance_micros{project=\"vision\"} ",
        "gpupool_queue_oldest_task_timestamp_seconds{project=\"speech\"} ",
        ",node=\"gpu-mig\"} 0.428\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << " in\n" << text;
  }
}

// Label names mean one thing: each family's series all carry the same names, from the one
// vocabulary, and the values are spelled as the API spells them (a task's id, its project and
// its node as GET /v1/tasks shows them; a node's name; a GPU's index).
TEST_F(MetricsExpositionTest, LabelsAreConsistentAcrossFamilies) {
  const Exposition& e = *exposition_;
  const std::set<std::string> vocabulary = {"project", "task",  "node", "gpu",  "model",  "state",
                                            "status",  "route", "code", "auth", "reason", "le"};
  std::map<std::string, json> task_by_id;
  for (const json& t : *tasks_) task_by_id[t["id"]] = t;
  std::set<std::string> nodes, projects, models;
  const json node_list = Call("GET", "/v1/nodes");
  const json project_list = Call("GET", "/v1/projects");
  for (const json& n : node_list["nodes"]) {
    nodes.insert(n["name"]);
    for (const json& g : n["gpus"]) models.insert(g["model"]);
  }
  for (const json& p : project_list["projects"]) projects.insert(p["id"]);
  std::map<std::string, std::set<std::string>> names_of;  // family -> its label names
  for (const Series& s : e.series) {
    std::set<std::string> names;
    for (const auto& [k, v] : s.labels) {
      EXPECT_TRUE(vocabulary.count(k)) << s.name << " has label " << k;
      if (k != "le") names.insert(k);
    }
    const std::string family = e.FamilyOf(s.name);
    const auto it = names_of.emplace(family, names).first;
    EXPECT_EQ(it->second, names) << family << ": series with different label names";
    if (s.labels.count("task")) {
      const auto t = task_by_id.find(s.labels.at("task"));
      ASSERT_NE(t, task_by_id.end()) << s.name << ": no task " << s.labels.at("task");
      EXPECT_EQ(s.labels.at("project"), t->second["project"]) << s.name;
      EXPECT_EQ(s.labels.at("node"), t->second["placement"]["node"]) << s.name;
    }
    if (s.labels.count("node")) {
      EXPECT_TRUE(nodes.count(s.labels.at("node")))
          << s.name << ": no node " << s.labels.at("node");
    }
    if (s.labels.count("model")) {
      EXPECT_TRUE(models.count(s.labels.at("model"))) << s.name << ": " << s.labels.at("model");
    }
    if (s.labels.count("state")) {  // a task state, as the API names it
      EXPECT_TRUE(std::regex_match(s.labels.at("state"),
                                   std::regex("pending|scheduled|starting|running|succeeded|"
                                              "failed|stopped|preempted|lost")))
          << s.name << ": " << s.labels.at("state");
    }
    if (s.labels.count("status")) {  // a node status, as the API names it
      EXPECT_TRUE(std::regex_match(s.labels.at("status"), std::regex("ready|lost"))) << s.name;
    }
    if (s.labels.count("code")) {
      EXPECT_TRUE(std::regex_match(s.labels.at("code"), std::regex("[1-5][0-9][0-9]"))) << s.name;
    }
    if (s.labels.count("gpu")) {
      EXPECT_TRUE(std::regex_match(s.labels.at("gpu"), std::regex("[0-9]+"))) << s.name;
    }
    if (s.labels.count("auth")) {
      EXPECT_TRUE(std::regex_match(s.labels.at("auth"), std::regex("anonymous|authenticated")))
          << s.name;
    }
    if (s.labels.count("reason")) {  // why a connection or a signed request was refused
      EXPECT_TRUE(
          std::regex_match(s.labels.at("reason"), std::regex("peer|full|reserve|user|rate|cache")))
          << s.name;
    }
    if (s.labels.count("project")) {
      EXPECT_TRUE(projects.count(s.labels.at("project")))
          << s.name << ": no project " << s.labels.at("project");
    }
  }
}

TEST_F(MetricsExpositionTest, TheDashboardUsesOnlyExportedMetrics) {
  ExpectExported("gpupool-dashboard.json");
  // And it is a dashboard: panels with queries.
  const json dashboard = json::parse(
      ReadFile(std::string(GPUPOOL_SOURCE_DIR) + "/docs/monitoring/gpupool-dashboard.json"));
  ASSERT_TRUE(dashboard.contains("panels"));
  for (const json& panel : dashboard["panels"]) {
    if (panel["type"] == "row") continue;
    ASSERT_TRUE(panel.contains("targets")) << panel["title"];
    for (const json& target : panel["targets"]) {
      EXPECT_NE(target.value("expr", "").find("gpupool_"), std::string::npos) << panel["title"];
    }
  }
}

// Each query parses as PromQL: promtool checks them as recording rules, with Grafana's
// variables replaced by values they take.
TEST_F(MetricsExpositionTest, TheDashboardQueriesAreValidPromQL) {
  const std::string promtool = Promtool();
  if (promtool.empty()) return;
  const json dashboard = json::parse(
      ReadFile(std::string(GPUPOOL_SOURCE_DIR) + "/docs/monitoring/gpupool-dashboard.json"));
  json rules = json::array();
  for (const json& panel : dashboard["panels"]) {
    for (const json& target : panel.value("targets", json::array())) {
      std::string expr = target["expr"];
      expr = std::regex_replace(expr, std::regex(R"(\$__rate_interval)"), "5m");
      expr = std::regex_replace(expr, std::regex(R"(\$project)"), ".*");
      rules.push_back(
          {{"record", "dashboard:query_" + std::to_string(rules.size())}, {"expr", expr}});
    }
  }
  ASSERT_GE(rules.size(), 20u);
  const std::string file = *dir_ + "/dashboard-queries.json";  // JSON is YAML
  std::ofstream(file) << json{{"groups", {{{"name", "dashboard"}, {"rules", rules}}}}}.dump(2);
  const auto [status, output] = RunPromtool(promtool, "check rules " + file);
  EXPECT_EQ(status, 0) << output;
}

// docs/monitoring/README.md describes every family /metrics has.
TEST_F(MetricsExpositionTest, TheReadmeDescribesEveryFamily) {
  const std::string readme =
      ReadFile(std::string(GPUPOOL_SOURCE_DIR) + "/docs/monitoring/README.md");
  for (const auto& [family, type] : exposition_->types) {
    EXPECT_NE(readme.find("| `" + family + "` | " + type + " |"), std::string::npos)
        << family << " (" << type << ") is not in the README's table";
  }
}

TEST_F(MetricsExpositionTest, TheAlertsAndTheirTestsUseOnlyExportedMetrics) {
  ExpectExported("gpupool-alerts.yml");
  ExpectExported("gpupool-alerts.test.yml");
  ExpectExported("README.md");
}

}  // namespace
}  // namespace gpupool
