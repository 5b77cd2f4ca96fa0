// A real `gpupool server` process on loopback, driven over HTTP: the task lifecycle (with the
// agent-facing API standing in for an agent), quotas, preemption, billing, every auth failure,
// cross-project isolation, malformed input answered with a 4xx and no state change, graceful
// shutdown, kill -9 during a burst of submissions followed by a restart, and the web console
// the binary serves.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/client.h"
#include "api/signing.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

using nlohmann::json;
using testing::Credentials;
using testing::Eventually;
using testing::ServerProcess;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One raw HTTP/1.1 exchange on a fresh connection: for requests the client would never send
// (stale timestamps, replays, broken headers). Returns (status, body).
std::pair<int, std::string> RawHttp(const std::string& endpoint, const std::string& request) {
  const auto colon = endpoint.rfind(':');
  const int port = std::stoi(endpoint.substr(colon + 1));
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return {0, "connect failed"};
  }
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string response;
  char buf[4096];
  for (;;) {
    const auto header_end = response.find("\r\n\r\n");
    if (header_end != std::string::npos) {
      const auto cl = response.find("Content-Length: ");
      const size_t length =
          cl == std::string::npos ? 0 : std::stoul(response.substr(cl + 16));
      if (response.size() >= header_end + 4 + length) break;
    }
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (response.size() < 12) return {0, response};
  const auto header_end = response.find("\r\n\r\n");
  return {std::stoi(response.substr(9, 3)),
          header_end == std::string::npos ? "" : response.substr(header_end + 4)};
}

std::string SignedRequest(const Credentials& who, const std::string& method,
                          const std::string& target, const std::string& body,
                          int64_t timestamp_ms, const std::string& nonce) {
  auto auth = api::SignRequest(who.access_key, who.secret_key, method, target, body,
                               timestamp_ms, nonce);
  return method + " " + target + " HTTP/1.1\r\nHost: localhost\r\nAuthorization: " +
         auth.value() + "\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("gpupool-server");
    Start();
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Nodes here are registered by the test and send no heartbeats: a long node timeout keeps
  // them ready (node loss is covered by the controller's unit tests and the agent's tests).
  void Start(std::vector<std::string> args = {"--meter-interval", "1", "--node-timeout", "600"}) {
    server_ = std::make_unique<ServerProcess>(dir_, args);
    admin_ = server_->ReadCredentials();
    admin_.endpoint = server_->endpoint();
    client_ = std::make_unique<api::Client>(admin_.endpoint, admin_.access_key,
                                            admin_.secret_key);
  }

  json Call(const std::string& method, const std::string& path, const json& body = nullptr,
            api::Client* as = nullptr) {
    auto r = (as ? as : client_.get())
                 ->CallJson(method, path, body.is_null() ? std::string() : body.dump());
    EXPECT_TRUE(r) << method << " " << path << ": " << r.error().message;
    return r.value_or(json());
  }

  // Status and parsed body, whatever the status.
  std::pair<int, json> Try(const std::string& method, const std::string& path,
                           const std::string& body = "", api::Client* as = nullptr) {
    auto r = (as ? as : client_.get())->Call(method, path, body);
    EXPECT_TRUE(r) << r.error().message;
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }

  void AddNode(const std::string& name, int gpus, const std::string& model = "A100-80GB") {
    json g = json::array();
    for (int i = 0; i < gpus; ++i) g.push_back({{"model", model}});
    Call("POST", "/v1/agent/nodes",
         {{"name", name}, {"cpu_milli", 64000}, {"memory_mib", 262144}, {"gpus", g}});
  }

  json Submit(json body, api::Client* as = nullptr) {
    if (!body.contains("command")) body["command"] = {"python3", "train.py"};
    return Call("POST", "/v1/tasks", body, as);
  }

  std::string State(const std::string& id) { return Call("GET", "/v1/tasks/" + id)["state"]; }

  // A member of a new project, with its own client.
  std::unique_ptr<api::Client> Member(const std::string& user, const std::string& project) {
    Call("POST", "/v1/projects", {{"id", project}, {"name", project}});
    Call("POST", "/v1/users",
         {{"id", user}, {"name", user}, {"role", "member"}, {"projects", {project}}});
    json key = Call("POST", "/v1/users/" + user + "/keys", {{"description", "test"}});
    return std::make_unique<api::Client>(admin_.endpoint, key["access_key"].get<std::string>(),
                                         key["secret_key"].get<std::string>());
  }

  size_t TaskCount() { return Call("GET", "/v1/tasks?limit=1000")["tasks"].size(); }

  std::string dir_;
  std::unique_ptr<ServerProcess> server_;
  Credentials admin_;
  std::unique_ptr<api::Client> client_;
};

TEST_F(ServerTest, FirstStartWritesPrivateCredentials) {
  const auto perms = std::filesystem::status(dir_ + "/credentials.env").permissions();
  EXPECT_EQ(perms & std::filesystem::perms::all, std::filesystem::perms::owner_read |
                                                      std::filesystem::perms::owner_write);
  EXPECT_EQ(admin_.access_key.substr(0, 2), "AK");
  EXPECT_EQ(server_->ReadCredentials().endpoint, server_->endpoint());
  EXPECT_EQ(Call("GET", "/v1/users")["users"][0]["role"], "admin");
}

TEST_F(ServerTest, TaskLifecycleThroughTheAgentApi) {
  AddNode("n1", 4);
  json t = Submit({{"name", "train"}, {"gpu_count", 2}, {"cpu_milli", 4000},
                   {"memory_mib", 8192}});
  const std::string id = t["id"];
  ASSERT_TRUE(Eventually([&] { return State(id) == "scheduled"; }));
  json shown = Call("GET", "/v1/tasks/" + id);
  EXPECT_EQ(shown["placement"]["node"], "n1");
  const int64_t start = NowMs();
  Call("POST", "/v1/agent/tasks/" + id + "/status", {{"state", "running"}, {"time_ms", start}});
  EXPECT_EQ(State(id), "running");
  Call("POST", "/v1/agent/tasks/" + id + "/status",
       {{"state", "succeeded"}, {"exit_code", 0}, {"time_ms", NowMs()}});
  EXPECT_EQ(State(id), "succeeded");
  std::vector<std::string> to;
  const json events = Call("GET", "/v1/tasks/" + id + "/events");
  for (const json& e : events["events"]) to.push_back(e["to"]);
  EXPECT_EQ(to, (std::vector<std::string>{"pending", "scheduled", "running", "succeeded"}));
  EXPECT_EQ(Call("GET", "/v1/nodes/n1")["gpu_milli_free"], 4000);
  auto [status, body] = Try("POST", "/v1/agent/tasks/" + id + "/status", R"({"state":"running"})");
  EXPECT_EQ(status, 409) << body.dump();
  Call("DELETE", "/v1/tasks/" + id);
  EXPECT_EQ(Try("GET", "/v1/tasks/" + id).first, 404);
}

TEST_F(ServerTest, PendingTaskShowsWhyAndItsPlace) {
  AddNode("n1", 2);
  json big = Submit({{"gpu_count", 4}});
  json small = Submit({{"gpu_count", 4}});
  const std::string id = big["id"];
  ASSERT_TRUE(Eventually([&] {
    return !Call("GET", "/v1/tasks/" + id)["pending_nodes"].empty();
  }));
  json shown = Call("GET", "/v1/tasks/" + id);
  EXPECT_EQ(shown["state"], "pending");
  EXPECT_EQ(shown["queue_position"], 1);
  EXPECT_EQ(Call("GET", "/v1/tasks/" + small["id"].get<std::string>())["queue_position"], 2);
  EXPECT_FALSE(shown["pending_reason"].get<std::string>().empty());
}

TEST_F(ServerTest, EveryAuthFailureIs401WithItsReason) {
  const std::string target = "/v1/tasks";
  const std::string body = R"({"gpu_count":1,"command":["true"]})";
  auto expect_401 = [&](const std::string& request, const std::string& reason) {
    auto [status, response] = RawHttp(admin_.endpoint, request);
    EXPECT_EQ(status, 401) << reason << ": " << response;
    EXPECT_NE(response.find(reason), std::string::npos) << response;
  };
  expect_401("POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
             "missing Authorization");
  expect_401("GET /v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Basic abc\r\n\r\n",
             "GPUPOOL-HMAC-SHA256");
  Credentials unknown = admin_;
  unknown.access_key = "AKNOSUCHKEY0000000";
  expect_401(SignedRequest(unknown, "POST", target, body, NowMs(), api::NewNonce()),
             "unknown access key");
  Credentials wrong = admin_;
  wrong.secret_key = std::string(40, 'A');
  expect_401(SignedRequest(wrong, "POST", target, body, NowMs(), api::NewNonce()), "signature");
  expect_401(SignedRequest(admin_, "POST", target, body, NowMs() - 6 * 60'000, api::NewNonce()),
             "timestamp");
  expect_401(SignedRequest(admin_, "POST", target, body, NowMs() + 6 * 60'000, api::NewNonce()),
             "timestamp");
  // A body changed after signing fails the signature.
  std::string tampered = SignedRequest(admin_, "POST", target, body, NowMs(), api::NewNonce());
  tampered.replace(tampered.find(R"("gpu_count":1)"), 13, R"("gpu_count":8)");
  expect_401(tampered, "signature");
  EXPECT_EQ(TaskCount(), 0u) << "no refused request may change anything";
  // A replay: the first is accepted, the identical second refused.
  const std::string once = SignedRequest(admin_, "POST", target, body, NowMs(), "nonce-1234567890");
  EXPECT_EQ(RawHttp(admin_.endpoint, once).first, 201);
  expect_401(once, "nonce");
  EXPECT_EQ(TaskCount(), 1u);
  // A revoked key.
  auto member = Member("carol", "lab");
  json keys = Call("GET", "/v1/users/carol/keys");
  const std::string ak = keys["keys"][0]["access_key"];
  EXPECT_TRUE(member->CallJson("GET", "/v1/tasks"));
  Call("DELETE", "/v1/keys/" + ak);
  auto refused = member->Call("GET", "/v1/tasks");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  EXPECT_NE(refused->body.find("revoked"), std::string::npos) << refused->body;
  EXPECT_EQ(keys.dump().find("secret"), std::string::npos) << "listing keys shows no secret";
}

TEST_F(ServerTest, ProjectsCannotSeeEachOther) {
  auto alice = Member("alice", "vision");
  auto bob = Member("bob", "speech");
  json t = Submit({{"gpu_count", 1}}, alice.get());
  const std::string id = t["id"];
  EXPECT_EQ(t["project"], "vision");
  EXPECT_EQ(Try("GET", "/v1/tasks/" + id, "", bob.get()).first, 404);
  EXPECT_EQ(Try("POST", "/v1/tasks/" + id + "/stop", "", bob.get()).first, 404);
  EXPECT_EQ(Try("GET", "/v1/tasks/" + id + "/events", "", bob.get()).first, 404);
  EXPECT_EQ(Try("GET", "/v1/projects/vision/balance", "", bob.get()).first, 404);
  EXPECT_EQ(Try("GET", "/v1/projects/vision/ledger", "", bob.get()).first, 404);
  EXPECT_TRUE(Call("GET", "/v1/tasks", nullptr, bob.get())["tasks"].empty());
  EXPECT_EQ(Call("GET", "/v1/tasks", nullptr, alice.get())["tasks"].size(), 1u);
  EXPECT_EQ(Try("POST", "/v1/projects", R"({"id":"mine"})", bob.get()).first, 403);
  EXPECT_EQ(State(id), "pending") << "bob's stop must not have reached alice's task";
}

TEST_F(ServerTest, MalformedInputIs4xxNamingTheProblemAndChangesNothing) {
  struct Case {
    std::string name, method, path, body;
    int status;
    std::string mentions;
  };
  const std::vector<Case> cases = {
      {"bad json", "POST", "/v1/tasks", R"({"gpu_count": )", 400, "not valid JSON"},
      {"not an object", "POST", "/v1/tasks", "[1,2]", 400, "object"},
      {"unknown field", "POST", "/v1/tasks", R"({"gpu_cnt":1,"command":["x"]})", 400,
       "gpu_cnt"},
      {"wrong type", "POST", "/v1/tasks", R"({"gpu_count":"two","command":["x"]})", 400,
       "gpu_count"},
      {"out of range", "POST", "/v1/tasks", R"({"gpu_milli":1200,"command":["x"]})", 400,
       "gpu_milli"},
      {"overflow", "POST", "/v1/tasks",
       R"({"cpu_milli":99999999999999999999999,"command":["x"]})", 400, "cpu_milli"},
      {"two gpu forms", "POST", "/v1/tasks", R"({"gpu_count":1,"gpu_milli":500,"command":["x"]})",
       400, "gpu"},
      {"missing command", "POST", "/v1/tasks", R"({"gpu_count":1})", 400, "command"},
      {"empty body", "POST", "/v1/tasks", "", 400, "body"},
      {"bad limit", "GET", "/v1/tasks?limit=abc", "", 400, "limit"},
      {"limit out of range", "GET", "/v1/tasks?limit=5000", "", 400, "limit"},
      {"bad state filter", "GET", "/v1/tasks?state=sleeping", "", 400, "state"},
      {"unknown path", "GET", "/v1/nope", "", 404, "/v1/nope"},
      {"wrong method", "PUT", "/v1/tasks", "", 405, "PUT"},
      {"unknown task", "GET", "/v1/tasks/t-999", "", 404, "t-999"},
      {"bad price", "PUT", "/v1/prices", R"({"resource":"gpu:","micros_per_hour":5})", 400,
       "resource"},
      {"negative credit", "POST", "/v1/projects/default/credits", R"({"amount_micros":-5})", 400,
       "amount_micros"},
      {"bad node", "POST", "/v1/agent/nodes", R"({"name":"n","cpu_milli":-1,"memory_mib":1})",
       400, "cpu_milli"},
  };
  for (const Case& c : cases) {
    auto [status, body] = Try(c.method, c.path, c.body);
    EXPECT_EQ(status, c.status) << c.name << ": " << body.dump();
    ASSERT_TRUE(body.is_object() && body.contains("error")) << c.name << ": " << body.dump();
    const std::string message = body["error"]["message"];
    EXPECT_NE(message.find(c.mentions), std::string::npos) << c.name << ": " << message;
  }
  // An oversized body is refused before it is read in full.
  auto [status, body] = Try("POST", "/v1/tasks", std::string(8 << 20, ' '));  // > 4 MiB
  EXPECT_EQ(status, 413) << body.dump();
  EXPECT_EQ(TaskCount(), 0u);
  EXPECT_TRUE(Call("GET", "/v1/prices")["prices"].empty());
  EXPECT_TRUE(Call("GET", "/v1/nodes")["nodes"].empty());
}

TEST_F(ServerTest, QuotasAreEnforced) {
  AddNode("n1", 8);
  auto alice = Member("alice", "vision");
  Call("PATCH", "/v1/projects/vision", {{"max_tasks", 2}, {"max_gpu_milli", 1000}});
  json a = Submit({{"gpu_count", 1}}, alice.get());
  json b = Submit({{"gpu_count", 1}}, alice.get());
  auto [status, body] = Try("POST", "/v1/tasks", R"({"gpu_count":1,"command":["x"]})",
                            alice.get());
  EXPECT_EQ(status, 429) << body.dump();
  EXPECT_NE(body["error"]["message"].get<std::string>().find("max_tasks"), std::string::npos);
  const std::string second = b["id"];
  ASSERT_TRUE(Eventually([&] {
    return Call("GET", "/v1/tasks/" + second)["pending_reason"].get<std::string>().find(
               "quota") != std::string::npos;
  }));
  EXPECT_EQ(State(a["id"]), "scheduled");
  Call("POST", "/v1/tasks/" + a["id"].get<std::string>() + "/stop");
  EXPECT_TRUE(Eventually([&] { return State(second) == "scheduled"; }));
}

TEST_F(ServerTest, HigherPriorityPreemptsLowerPriority) {
  AddNode("n1", 4);
  json low = Submit({{"gpu_count", 4}, {"priority", 0}, {"restartable", true}});
  const std::string low_id = low["id"];
  ASSERT_TRUE(Eventually([&] { return State(low_id) == "scheduled"; }));
  json high = Submit({{"gpu_count", 4}, {"priority", 100}});
  const std::string high_id = high["id"];
  ASSERT_TRUE(Eventually([&] { return State(high_id) == "scheduled"; }));
  json victim = Call("GET", "/v1/tasks/" + low_id);
  EXPECT_EQ(victim["state"], "pending");
  EXPECT_EQ(victim["preemptions"], 1);
  bool saw_reason = false;
  const json events = Call("GET", "/v1/tasks/" + low_id + "/events");
  for (const json& e : events["events"]) {
    if (e["to"] == "preempted") {
      saw_reason = e["reason"].get<std::string>().find(high_id) != std::string::npos;
    }
  }
  EXPECT_TRUE(saw_reason);
}

TEST_F(ServerTest, UsageIsBilledPerSecondAgainstTheBalance) {
  AddNode("n1", 4);
  Call("PUT", "/v1/prices", {{"resource", "gpu:A100-80GB"}, {"micros_per_hour", 3600000}});
  auto [refused, why] = Try("POST", "/v1/tasks", R"({"gpu_count":1,"command":["x"]})");
  EXPECT_EQ(refused, 429) << "no balance, no new work: " << why.dump();
  Call("POST", "/v1/projects/default/credits", {{"amount_micros", 10'000'000}});
  json t = Submit({{"gpu_count", 2}});
  const std::string id = t["id"];
  ASSERT_TRUE(Eventually([&] { return State(id) == "scheduled"; }));
  // The meter runs every second: wait for its first entry, then stop.
  ASSERT_TRUE(Eventually([&] {
    return Call("GET", "/v1/tasks/" + id + "/cost")["cost_micros"].get<int64_t>() > 0;
  }));
  json stopped = Call("POST", "/v1/tasks/" + id + "/stop");
  const int64_t seconds = (stopped["finished_ms"].get<int64_t>() -
                           Call("GET", "/v1/tasks/" + id)["created_ms"].get<int64_t>()) /
                          1000;
  json cost = Call("GET", "/v1/tasks/" + id + "/cost");
  // 2 GPUs × 1000 micros per GPU-second, whole seconds begun since binding.
  EXPECT_EQ(cost["cost_micros"].get<int64_t>() % 2000, 0);
  EXPECT_LE(cost["cost_micros"].get<int64_t>(), (seconds + 1) * 2000);
  EXPECT_GE(cost["entries"].size(), 1u);
  json balance = Call("GET", "/v1/projects/default/balance");
  EXPECT_EQ(balance["balance_micros"].get<int64_t>(),
            10'000'000 - cost["cost_micros"].get<int64_t>());
  json statement = Call("GET", "/v1/projects/default/statement");
  EXPECT_EQ(statement["usage_micros"], cost["cost_micros"]);
}

// A task bound across a kill -9 is billed for every second it held its GPU, exactly once: the
// ledger entries written before the crash, the ones after, and the final one add up to F(stop).
TEST_F(ServerTest, BillingAcrossKill9LosesAndRepeatsNoSecond) {
  AddNode("n1", 4);
  Call("PUT", "/v1/prices", {{"resource", "gpu:*"}, {"micros_per_hour", 3'600'000}});
  Call("POST", "/v1/projects/default/credits", {{"amount_micros", 1'000'000'000}});
  const std::string id = Submit({{"gpu_count", 1}})["id"];
  ASSERT_TRUE(Eventually([&] { return State(id) == "scheduled"; }));
  ASSERT_TRUE(Eventually([&] {
    return Call("GET", "/v1/tasks/" + id + "/cost")["entries"].size() >= 2;
  }));
  server_->Kill();
  Start();
  ASSERT_TRUE(Eventually([&] {
    return Call("GET", "/v1/tasks/" + id + "/cost")["entries"].size() >= 3;
  })) << "metering resumes after the restart";
  const json stopped = Call("POST", "/v1/tasks/" + id + "/stop");
  int64_t bound_ms = 0;
  const json events = Call("GET", "/v1/tasks/" + id + "/events");
  for (const json& e : events["events"]) {
    if (e["to"] == "scheduled") bound_ms = e["time_ms"];
  }
  ASSERT_GT(bound_ms, 0);
  const int64_t held_ms = stopped["finished_ms"].get<int64_t>() - bound_ms;
  const int64_t seconds_begun = (held_ms + 999) / 1000;
  const json cost = Call("GET", "/v1/tasks/" + id + "/cost");
  EXPECT_EQ(cost["cost_micros"].get<int64_t>(), seconds_begun * 1000)
      << "1000 micros per GPU-second over " << held_ms << " ms";
  // Intervals never overlap (an interval that costs nothing, inside a second already billed,
  // has no entry, so they may leave gaps of less than a second).
  int64_t covered_until = bound_ms;
  for (const json& e : cost["entries"]) {
    EXPECT_GE(e["from_ms"].get<int64_t>(), covered_until) << "an interval billed twice";
    EXPECT_LT(e["from_ms"].get<int64_t>() - covered_until, 1000) << "a second left unbilled";
    covered_until = e["to_ms"];
  }
  EXPECT_LE(covered_until, stopped["finished_ms"].get<int64_t>());
}

TEST_F(ServerTest, HealthAndMetricsNeedNoKey) {
  api::Client anonymous(admin_.endpoint, "", "");
  auto health = anonymous.Call("GET", "/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  AddNode("n1", 2);
  Submit({{"gpu_count", 1}});
  auto metrics = anonymous.Call("GET", "/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  for (const char* series : {"gpupool_queue_depth", "gpupool_tasks{state=",
                             "gpupool_gpu_milli_total{model=\"A100-80GB\"} 2000",
                             "gpupool_api_request_duration_seconds_bucket{",
                             "gpupool_scheduler_cycle_seconds_count"}) {
    EXPECT_NE(metrics->body.find(series), std::string::npos) << series;
  }
}

TEST_F(ServerTest, ServesTheConsoleBuiltIntoTheBinaryUnsigned) {
  api::Client anonymous(admin_.endpoint, "", "");
  auto page = anonymous.Call("GET", "/tasks/t-1");
  ASSERT_TRUE(page) << page.error().message;
  EXPECT_EQ(page->content_type, "text/html; charset=utf-8");
  if (!GPUPOOL_CONSOLE_BUILT) {
    EXPECT_EQ(page->status, 404);
    EXPECT_NE(page->body.find("built without its web console"), std::string::npos) << page->body;
    return;
  }
  ASSERT_EQ(page->status, 200) << page->body;
  // index.html, whatever the client route; it names its hashed script, which is served too.
  std::smatch script;
  ASSERT_TRUE(std::regex_search(page->body, script, std::regex(R"re(src="(/assets/[^"]+\.js)")re")))
      << page->body;
  auto js = anonymous.Call("GET", script[1].str());
  ASSERT_TRUE(js) << js.error().message;
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->content_type, "text/javascript; charset=utf-8");
  EXPECT_FALSE(js->body.empty());
  auto missing = anonymous.Call("GET", "/assets/none-0000.js");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST_F(ServerTest, SigtermShutsDownGracefullyAndKeepsEverything) {
  AddNode("n1", 2);
  json t = Submit({{"gpu_count", 1}});
  EXPECT_EQ(server_->Terminate(), 0);
  Start();
  EXPECT_EQ(Call("GET", "/v1/tasks/" + t["id"].get<std::string>())["id"], t["id"]);
  EXPECT_EQ(Call("GET", "/v1/nodes")["nodes"].size(), 1u);
}

// kill -9 in the middle of a burst of submissions from 16 clients: after a restart every
// acknowledged task is there exactly once, nothing placed twice, and the ledger adds up.
TEST_F(ServerTest, Kill9DuringABurstLosesNoAcknowledgedWrite) {
  AddNode("n1", 8);
  AddNode("n2", 8);
  Call("PUT", "/v1/prices", {{"resource", "gpu:*"}, {"micros_per_hour", 3600000}});
  Call("POST", "/v1/projects/default/credits", {{"amount_micros", 1'000'000'000}});
  constexpr int kClients = 16;
  constexpr int kAcksBeforeKill = 300;
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::string> acked;  // names of acknowledged submissions
  std::atomic<bool> killed{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      api::Client client(admin_.endpoint, admin_.access_key, admin_.secret_key);
      for (int i = 0; !killed; ++i) {
        const std::string name = "burst-" + std::to_string(c) + "-" + std::to_string(i);
        json body = {{"name", name}, {"command", {"x"}}, {"cpu_milli", 100}};
        if (i % 4 == 0) body["gpu_count"] = 1;
        auto r = client.Call("POST", "/v1/tasks", body.dump());
        if (!r || r->status != 201) break;  // the server is gone
        std::lock_guard lock(mu);
        acked.insert(name);
        cv.notify_all();
      }
    });
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return acked.size() >= kAcksBeforeKill; });
  }
  server_->Kill();
  killed = true;
  for (auto& t : clients) t.join();
  Start();
  std::map<std::string, int> seen;
  std::map<std::string, std::set<int>> gpus_taken;  // node -> whole GPUs held
  std::string after;
  for (;;) {
    json page = Call("GET", "/v1/tasks?limit=1000" + (after.empty() ? "" : "&after=" + after));
    for (const json& t : page["tasks"]) {
      ++seen[t["name"].get<std::string>()];
      const std::string state = t["state"];
      if (state == "scheduled" || state == "running") {
        for (int g : t["placement"]["gpus"]) {
          EXPECT_TRUE(gpus_taken[t["placement"]["node"]].insert(g).second)
              << "GPU " << g << " of " << t["placement"]["node"] << " held twice";
        }
      }
    }
    if (page["next_after"].is_null()) break;
    after = page["next_after"];
  }
  for (const std::string& name : acked) EXPECT_EQ(seen[name], 1) << name;
  for (const auto& [name, n] : seen) EXPECT_EQ(n, 1) << name;
  json balance = Call("GET", "/v1/projects/default/balance");
  json statement = Call("GET", "/v1/projects/default/statement");
  EXPECT_EQ(balance["balance_micros"].get<int64_t>(),
            statement["credits_micros"].get<int64_t>() -
                statement["usage_micros"].get<int64_t>());
  EXPECT_EQ(statement["credits_micros"], 1'000'000'000);
}

}  // namespace
}  // namespace gpupool
