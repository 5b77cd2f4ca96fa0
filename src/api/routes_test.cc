// Tests for api/routes over the fake control plane: authentication failures (401 with the reason,
// nothing changed), every class of malformed input (4xx naming the problem, no service call),
// routing (404, 405), every route's happy path (nonce consumed before the call, durable for
// writes), rendering, error-code mapping, asynchronous answers and latency reporting; join
// tokens, the public join, and agent credentials kept to the agent routes; telemetry: the agents'
// batches parsed strictly (metric lines into reported points), the logs, metrics and usage routes'
// queries and renderings.
#include "api/routes.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "api/fake_control_plane.h"
#include "api/signing.h"
#include "core/base64.h"
#include "proto/openapi.h"

namespace gpupool::api {
namespace {

using nlohmann::json;

constexpr int64_t kNow = 1'700'000'000'000;
constexpr char kAdminKey[] = "AKADMIN";
constexpr char kAdminSecret[] = "admin-secret-do-not-leak";
constexpr char kMemberKey[] = "AKMEMBER";
constexpr char kMemberSecret[] = "member-secret-do-not-leak";

// Captures the one response a request gets; waits for it when it comes from another thread.
class Capture : public ResponseChannel {
 public:
  void Send(HttpResponse response) override {
    std::lock_guard lock(mu_);
    ++sends_;
    response_ = std::move(response);
    cv_.notify_all();
  }
  bool has_response() {
    std::lock_guard lock(mu_);
    return response_.has_value();
  }
  HttpResponse Wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return response_.has_value(); });
    return *response_;
  }
  int sends() {
    std::lock_guard lock(mu_);
    return sends_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<HttpResponse> response_;
  int sends_ = 0;
};

class RoutesTest : public ::testing::Test {
 protected:
  RoutesTest() : api_(cp_, ApiOptions{[] { return kNow; }}) {}

  void SetUp() override {
    server::Caller admin;
    admin.user_id = "u-admin";
    admin.role = Role::kAdmin;
    cp_.AddKey(kAdminKey, kAdminSecret, admin);
    server::Caller member;
    member.user_id = "u-member";
    member.projects = {"p-1"};
    cp_.AddKey(kMemberKey, kMemberSecret, member);
    cp_.AddKey("AKREVOKED", "revoked-secret", member, /*revoked=*/true);
    cp_.AddProject(Project{"p-1", "vision", 8000, 10, 60'000, 5});
    cp_.AddUser(User{"u-member", "Mia", Role::kMember, {"p-1"}, 5});

    Task pending;
    pending.project_id = "p-1";
    pending.name = "train";
    pending.request.gpu_milli = 470;
    pending.command = {"python", "train.py"};
    cp_.AddTask(pending);  // t-1
    Task done = pending;
    done.state = TaskState::kSucceeded;
    done.placement = TaskPlacement{"n1", {0}, 470, 0, -1, -1};
    cp_.AddTask(done);  // t-2
    Task running = pending;
    running.state = TaskState::kRunning;
    running.placement = TaskPlacement{"n1", {1}, 470, 0, -1, -1};
    cp_.AddTask(running);  // t-3

    server::NodeView node;
    node.info.node = Node::Make("n1", 64000, 512 * 1024, 2, "A100-80GB");
    node.tasks = {"t-2"};
    cp_.AddNode(node);
    cp_.SetLog("t-2", "epoch 1\nepoch 2\ndone\n");
    cp_.ClearRecords();
  }

  HttpResponse SendRequest(HttpRequest request, Api* api = nullptr) {
    auto capture = std::make_shared<Capture>();
    (api != nullptr ? *api : api_).Handle(std::move(request), Responder(capture));
    EXPECT_TRUE(capture->has_response()) << "the fake answers at once unless writes are deferred";
    HttpResponse r = capture->Wait();
    EXPECT_EQ(capture->sends(), 1);
    return r;
  }

  HttpRequest Signed(std::string method, std::string target, std::string body = "",
                     const std::string& key = kAdminKey, const std::string& secret = kAdminSecret,
                     int64_t ts = kNow) {
    HttpRequest r;
    r.method = std::move(method);
    r.target = std::move(target);
    r.body = std::move(body);
    const std::string nonce = "n" + std::to_string(++nonce_) + "-0123456789abcdef";
    Result<std::string> header = SignRequest(key, secret, r.method, r.target, r.body, ts, nonce);
    // A target that cannot be signed (bad percent-encoding) still goes out, with a well-formed
    // header whose signature is wrong: the server must reject the target itself.
    r.authorization =
        header ? *header : FormatAuthorization(Credential{key, ts, nonce, std::string(64, '0')});
    return r;
  }

  HttpResponse Send(std::string method, std::string target, std::string body = "") {
    return SendRequest(Signed(std::move(method), std::move(target), std::move(body)));
  }

  static json Body(const HttpResponse& r) { return json::parse(r.body); }
  static std::string Message(const HttpResponse& r) {
    return Body(r)["error"]["message"].get<std::string>();
  }

  // Calls other than ObserveRequest, in order.
  std::vector<std::string> CallsExceptObserve() {
    std::vector<std::string> out;
    for (const std::string& c : cp_.Calls()) {
      if (c != "ObserveRequest") out.push_back(c);
    }
    return out;
  }

  testing::FakeControlPlane cp_;
  Api api_;
  int nonce_ = 0;
};

// ------------------------------------------------------------------------------------------
// Authentication

TEST_F(RoutesTest, AuthFailuresAre401WithReasonAndChangeNothing) {
  struct Row {
    const char* name;
    HttpRequest request;
    const char* expect;
  };
  HttpRequest missing{"POST", "/v1/tasks", "", "", R"({"command":["true"]})"};
  HttpRequest malformed = missing;
  malformed.authorization = "Basic YWRtaW46YWRtaW4=";
  HttpRequest tampered = Signed("POST", "/v1/tasks", R"({"command":["true"]})");
  tampered.body = R"({"command":["rm"]})";
  const Row rows[] = {
      {"missing header", missing, "missing Authorization header"},
      {"malformed header", malformed, "scheme must be GPUPOOL-HMAC-SHA256"},
      {"unknown key", Signed("POST", "/v1/tasks", R"({"command":["true"]})", "AKNOBODY", "x"),
       "unknown access key 'AKNOBODY'"},
      {"revoked key",
       Signed("POST", "/v1/tasks", R"({"command":["true"]})", "AKREVOKED", "revoked-secret"),
       "access key 'AKREVOKED' is revoked"},
      {"stale timestamp",
       Signed("POST", "/v1/tasks", R"({"command":["true"]})", kAdminKey, kAdminSecret,
              kNow - 412'000),
       "request timestamp 1699999588000 is 412 s from server time; allowed ±300 s"},
      {"wrong secret", Signed("POST", "/v1/tasks", R"({"command":["true"]})", kAdminKey, "guess"),
       "signature does not match"},
      {"tampered body", tampered, "signature does not match"},
  };
  for (const Row& row : rows) {
    const HttpResponse r = SendRequest(row.request);
    EXPECT_EQ(r.status, 401) << row.name;
    EXPECT_EQ(Body(r)["error"]["code"], "unauthenticated") << row.name;
    EXPECT_NE(Message(r).find(row.expect), std::string::npos) << row.name << ": " << r.body;
    EXPECT_EQ(r.body.find("do-not-leak"), std::string::npos) << row.name;
    bool www_authenticate = false;
    for (const auto& [name, value] : r.headers) www_authenticate |= name == "WWW-Authenticate";
    EXPECT_TRUE(www_authenticate) << row.name;
  }
  EXPECT_TRUE(cp_.ServiceCalls().empty());
  EXPECT_TRUE(cp_.Nonces().empty());
}

TEST_F(RoutesTest, ReplayedRequestIsRejectedAndNotExecutedTwice) {
  const HttpRequest request = Signed("POST", "/v1/tasks", R"({"command":["true"]})");
  EXPECT_EQ(SendRequest(request).status, 201);
  const HttpResponse replay = SendRequest(request);
  EXPECT_EQ(replay.status, 401);
  EXPECT_NE(Message(replay).find("already used"), std::string::npos) << replay.body;
  EXPECT_EQ(cp_.ServiceCalls(), std::vector<std::string>{"SubmitTask"});
}

TEST_F(RoutesTest, PublicRoutesNeedNoSignature) {
  HttpResponse r = SendRequest(HttpRequest{"GET", "/healthz", "", "", ""});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Body(r)["status"], "ok");
  cp_.SetHealthy(false);
  r = SendRequest(HttpRequest{"GET", "/healthz", "", "", ""});
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(Body(r)["status"], "unhealthy");
  r = SendRequest(HttpRequest{"GET", "/metrics", "", "", ""});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/plain; version=0.0.4");
  EXPECT_NE(r.body.find("gpupool_up 1"), std::string::npos);
  EXPECT_TRUE(cp_.Nonces().empty());
}

TEST_F(RoutesTest, ServesTheOpenApiDocument) {
  const HttpResponse r = SendRequest(HttpRequest{"GET", "/v1/openapi.json", "", "", ""});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_TRUE(r.body == proto::OpenApiText());
  EXPECT_EQ(Body(r)["openapi"], "3.1.0");
}

// ------------------------------------------------------------------------------------------
// Malformed input: 4xx naming the problem, and no service call (nor nonce) at all.

struct BadInputRow {
  std::string method;
  std::string target;
  std::string body;
  std::string expect;  // fragment of the error message
};

void PrintTo(const BadInputRow& row, std::ostream* os) {
  *os << row.method << " " << row.target << " " << row.body.substr(0, 80);
}

class BadInputTest : public RoutesTest, public ::testing::WithParamInterface<BadInputRow> {};

TEST_P(BadInputTest, Is400NamingTheProblemWithoutCallingTheControlPlane) {
  const BadInputRow& row = GetParam();
  const HttpResponse r = Send(row.method, row.target, row.body);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  const json body = Body(r);
  EXPECT_EQ(body["error"]["code"], "invalid_argument");
  EXPECT_NE(body["error"]["message"].get<std::string>().find(row.expect), std::string::npos)
      << "message: " << body["error"]["message"];
  EXPECT_TRUE(cp_.ServiceCalls().empty()) << cp_.ServiceCalls().front();
  EXPECT_TRUE(cp_.Nonces().empty()) << "a malformed request must not consume its nonce";
}

const std::string kCmd = R"("command":["true"])";

std::string Nested(int depth) {
  return "{" + kCmd + R"(,"name":)" + std::string(static_cast<size_t>(depth), '[') +
         std::string(static_cast<size_t>(depth), ']') + "}";
}

INSTANTIATE_TEST_SUITE_P(
    SubmitTask, BadInputTest,
    ::testing::Values(
        BadInputRow{"POST", "/v1/tasks", "", "request body is empty; expected a JSON object"},
        BadInputRow{"POST", "/v1/tasks", "  \n", "request body is empty"},
        BadInputRow{"POST", "/v1/tasks", R"({"command":["true"],)",
                    "request body is not valid JSON: parse error at line 1, column 21"},
        BadInputRow{"POST", "/v1/tasks", "{\n\"command\": [tru]}",
                    "parse error at line 2, column 16"},
        BadInputRow{"POST", "/v1/tasks", R"([{"command":["true"]}])",
                    "request body must be a JSON object, got array"},
        BadInputRow{"POST", "/v1/tasks", "42", "request body must be a JSON object, got number"},
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + R"(,"gpu_cnt":1})",
                    "unknown field 'gpu_cnt'"},
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + R"(,"gpu_count":"2"})",
                    "gpu_count must be an integer, got string"},
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + R"(,"gpu_count":1.5})",
                    "gpu_count must be an integer, got number 1.5"},
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + R"(,"priority":null})",
                    "priority must be an integer, got null"},
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + R"(,"gpu_count":3000000000})",
                    "gpu_count is out of range for a 32-bit integer, got 3000000000"},
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + R"(,"gpu_milli":-2147483649})",
                    "gpu_milli is out of range for a 32-bit integer, got -2147483649"},
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + R"(,"cpu_milli":9223372036854775808})",
                    "cpu_milli is out of range for a 64-bit integer, got 9223372036854775808"},
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + R"(,"cpu_milli":-9223372036854775809})",
                    "cpu_milli is out of range for a 64-bit integer"},
        BadInputRow{"POST", "/v1/tasks",
                    "{" + kCmd + R"(,"memory_mib":100000000000000000000000000})",
                    "memory_mib is out of range for a 64-bit integer"},
        BadInputRow{"POST", "/v1/tasks", R"({"name":"x"})", "command or image is required"},
        BadInputRow{"POST", "/v1/tasks", R"({"command":"echo hi"})",
                    "command must be an array of strings, got string"},
        BadInputRow{"POST", "/v1/tasks", R"({"command":["echo",1]})",
                    "command[1] must be a string, got number"},
        BadInputRow{"POST", "/v1/tasks", R"({"command":[]})",
                    "command must not be empty when no image is given"},
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + R"(,"restartable":"yes"})",
                    "restartable must be a boolean, got string"},
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + R"(,"gpu_models":"A100"})",
                    "gpu_models must be an array of strings, got string"},
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + R"(,"disk_gib":-1})",
                    "disk_gib must be >= 0, got -1"},
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + R"(,"project":"p 1"})",
                    "project must be 1..128 characters of A-Z a-z 0-9 - _ ., got 'p 1'"},
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + "," + kCmd + "}",
                    "request body has the key 'command' twice in one object"},
        BadInputRow{"POST", "/v1/tasks", Nested(40), "request body nests deeper than 32 levels"},
        // Validate(TaskRequest) speaks for the semantic checks.
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + R"(,"gpu_count":12})",
                    "gpu_count must be 0..8 per task"},
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + R"(,"gpu_count":1,"gpu_milli":500})",
                    "exactly one GPU form may be given"},
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + R"(,"mig_profile":"9g.1tb"})",
                    "mig_profile '9g.1tb' is not a MIG profile"},
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + R"(,"gang_id":"g","gang_size":1})",
                    "gang_size must be >= 2 when gang_id is set"}));

INSTANTIATE_TEST_SUITE_P(
    FileRoutes, BadInputTest,
    ::testing::Values(
        BadInputRow{"GET", "/v1/tasks/t-1/files?path=..%2Fetc", "",
                    "path '../etc' has a '..' component"},
        BadInputRow{"GET", "/v1/tasks/t-1/files?path=%2Fetc%2Fpasswd", "",
                    "path '/etc/passwd' is absolute"},
        BadInputRow{"GET", "/v1/tasks/t-1/files/content", "", "path is required"},
        BadInputRow{"GET", "/v1/tasks/t-1/files/content?path=a&length=0", "",
                    "length must be 1..4194304, got 0"},
        BadInputRow{"GET", "/v1/tasks/t-1/files/content?path=a&offset=-1", "",
                    "offset must be 0..9223372036854775807, got -1"},
        BadInputRow{"GET", "/v1/tasks/t-1/uploads?path=a%2F%2Fb", "", "has an empty component"},
        BadInputRow{"PUT", "/v1/tasks/t-1/uploads?path=a/../../x&offset=0", "",
                    "has a '..' component"},
        BadInputRow{"PUT", "/v1/tasks/t-1/uploads?path=a", "", "offset is required"},
        BadInputRow{"PUT", "/v1/tasks/t-1/uploads?path=a&offset=0&node=n%201", "",
                    "node must be 1..128 characters"},
        BadInputRow{"POST", "/v1/tasks/t-1/uploads/commit", R"({"path":"a","size":1})",
                    "sha256 is required"},
        BadInputRow{"POST", "/v1/tasks/t-1/uploads/commit",
                    R"({"path":"/abs","size":1,"sha256":"00"})", "path '/abs' is absolute"},
        BadInputRow{"POST", "/v1/tasks/t-1/uploads/commit",
                    R"({"path":"a","size":-1,"sha256":"00"})", "size must be >= 0, got -1"}));

INSTANTIATE_TEST_SUITE_P(
    OtherRoutes, BadInputTest,
    ::testing::Values(
        // Node registration.
        BadInputRow{"POST", "/v1/agent/nodes", R"({"cpu_milli":1000,"memory_mib":1024})",
                    "name is required"},
        BadInputRow{"POST", "/v1/agent/nodes",
                    R"({"name":"n2","cpu_milli":"lots","memory_mib":1024})",
                    "cpu_milli must be an integer, got string"},
        BadInputRow{"POST", "/v1/agent/nodes",
                    R"({"name":"n2","cpu_milli":1000,"memory_mib":1024,"disk_gib":-1})",
                    "disk_gib must be"},
        BadInputRow{"POST", "/v1/agent/nodes",
                    R"({"name":"n2","cpu_milli":1000,"memory_mib":1024,"gpus":[{"modle":"T4"}]})",
                    "unknown field 'gpus[0].modle'"},
        BadInputRow{"POST", "/v1/agent/nodes",
                    R"({"name":"n2","cpu_milli":1000,"memory_mib":1024,"gpus":[{"model":"A100-80GB",
                        "mig_enabled":true,"mig_instances":[{"profile":"3g.41gb","start":0}]}]})",
                    "gpus[0].mig_instances[0].profile '3g.41gb' is not a MIG profile of A100-80GB"},
        BadInputRow{"POST", "/v1/agent/nodes",
                    R"({"name":"n2","cpu_milli":1000,"memory_mib":1024,"gpus":[{"model":"A100-80GB",
                        "mig_enabled":true,"mig_instances":[{"profile":"3g.40gb","start":0},
                        {"profile":"3g.40gb","start":0}]}]})",
                    "gpus[0].mig_instances[1]: 3g.40gb cannot start at slot 0"},
        BadInputRow{"POST", "/v1/agent/nodes",
                    R"({"name":"n2","cpu_milli":1000,"memory_mib":1024,"labels":{"zone":1}})",
                    "labels.zone must be a string, got number"},
        BadInputRow{"POST", "/v1/agent/nodes", R"({"name":"n2","cpu_milli":0,"memory_mib":1024})",
                    "cpu_milli must be >= 1, got 0"},
        BadInputRow{"POST", "/v1/agent/tasks/t-1/status", R"({"state":"runing"})",
                    "state must be pending, scheduled, starting, running, succeeded, failed, "
                    "stopped, preempted or lost, got 'runing'"},
        BadInputRow{"POST", "/v1/agent/tasks/t-1/status", R"({"time_ms":5})", "state is required"},
        // Billing.
        BadInputRow{"POST", "/v1/projects/p-1/credits", R"({})", "amount_micros is required"},
        BadInputRow{"POST", "/v1/projects/p-1/credits", R"({"amount_micros":"10"})",
                    "amount_micros must be an integer, got string"},
        BadInputRow{"POST", "/v1/projects/p-1/credits", R"({"amount_micros":0})",
                    "amount_micros must be >= 1, got 0"},
        BadInputRow{"PUT", "/v1/prices", R"({"resource":"disk","micros_per_hour":5})",
                    "resource must be cpu, memory, gpu:<model> or gpu:*, got 'disk'"},
        BadInputRow{"PUT", "/v1/prices", R"({"resource":"cpu"})", "micros_per_hour is required"},
        // Projects and users.
        BadInputRow{"POST", "/v1/projects", R"({"max_tasks":5})", "id is required"},
        BadInputRow{"PATCH", "/v1/projects/p-1", R"({})",
                    "name or max_gpu_milli or max_tasks or stop_grace_ms is required"},
        BadInputRow{"PATCH", "/v1/projects/p-1", R"({"max_tasks":-2})",
                    "max_tasks must be >= -1, got -2"},
        BadInputRow{"PATCH", "/v1/users/u-member", R"({"role":"root"})",
                    "role must be admin or member, got 'root'"},
        BadInputRow{"POST", "/v1/users/u-member/keys", R"({"secret":"mine"})",
                    "unknown field 'secret'"},
        // Bodies where none belongs.
        BadInputRow{"POST", "/v1/tasks/t-1/stop", R"({"force":true})",
                    "POST /v1/tasks/t-1/stop takes no request body (unknown field 'force')"},
        BadInputRow{"GET", "/v1/tasks", R"({"limit":5})", "takes no request body"},
        // Query parameters.
        BadInputRow{"GET", "/v1/tasks?limit=abc", "", "limit must be an integer, got 'abc'"},
        BadInputRow{"GET", "/v1/tasks?limit=0", "", "limit must be 1..1000, got 0"},
        BadInputRow{"GET", "/v1/tasks?limit=1001", "", "limit must be 1..1000, got 1001"},
        BadInputRow{"GET", "/v1/tasks?limit=99999999999999999999", "",
                    "limit must be 1..1000, got 99999999999999999999"},
        BadInputRow{"GET", "/v1/tasks?limit=", "", "limit must be an integer, got ''"},
        BadInputRow{"GET", "/v1/tasks?limt=5", "", "unknown query parameter 'limt'"},
        BadInputRow{"GET", "/v1/tasks?limit=5&limit=6", "",
                    "query parameter 'limit' is given twice"},
        BadInputRow{"GET", "/v1/tasks?state=running,runing", "", "state must be pending, "},
        BadInputRow{"GET", "/v1/tasks?after=abc", "",
                    "after must be an integer, got 'abc'"},
        BadInputRow{"GET", "/v1/tasks?project=a%2", "", "query parameter 'project'"},
        BadInputRow{"GET", "/v1/projects/p-1/ledger?from_ms=10&to_ms=5", "",
                    "from_ms must be <= to_ms"},
        BadInputRow{"GET", "/v1/projects/p-1/statement?to_ms=-1", "",
                    "to_ms must be 0..9223372036854775807, got -1"},
        // Path parameters.
        BadInputRow{
            "GET", "/v1/tasks/t%201", "",
            "path parameter 'id' must be 1..128 characters of A-Z a-z 0-9 - _ ., got 't 1'"},
        BadInputRow{"GET", "/v1/tasks/t%2F1", "", "path parameter 'id' must not contain '/'"},
        BadInputRow{"POST", "/v1/nodes/n%zz/cordon", "",
                    "path parameter 'name' has a bad percent-escape"}));

// ------------------------------------------------------------------------------------------
// Routing

TEST_F(RoutesTest, UnknownPathIs404Json) {
  const HttpResponse r = Send("GET", "/v1/taskz");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Body(r)["error"]["code"], "not_found");
  EXPECT_EQ(Message(r), "no route for GET /v1/taskz");
  EXPECT_TRUE(cp_.ServiceCalls().empty());
}

TEST_F(RoutesTest, WrongMethodIs405WithAllow) {
  const HttpResponse r = Send("PUT", "/v1/tasks/t-1");
  EXPECT_EQ(r.status, 405);
  std::string allow;
  for (const auto& [name, value] : r.headers) {
    if (name == "Allow") allow = value;
  }
  EXPECT_EQ(allow, "GET, DELETE");
  EXPECT_NE(Message(r).find("method PUT is not allowed on /v1/tasks/{id}"), std::string::npos);
  EXPECT_TRUE(cp_.ServiceCalls().empty());
}

TEST_F(RoutesTest, EveryRequestReportsItsLatencyUnderTheRoutePattern) {
  Send("GET", "/v1/tasks/t-1");
  Send("GET", "/v1/nope");
  Send("POST", "/v1/tasks", "{}");
  SendRequest(HttpRequest{"GET", "/healthz", "", "", ""});
  const auto obs = cp_.Observations();
  ASSERT_EQ(obs.size(), 4u);
  EXPECT_EQ(obs[0].route, "/v1/tasks/{id}");
  EXPECT_EQ(obs[0].status, 200);
  EXPECT_GE(obs[0].micros, 0);
  EXPECT_EQ(obs[1].route, "(unmatched)");
  EXPECT_EQ(obs[1].status, 404);
  EXPECT_EQ(obs[2].route, "/v1/tasks");
  EXPECT_EQ(obs[2].status, 400);
  EXPECT_EQ(obs[3].route, "/healthz");
}

// ------------------------------------------------------------------------------------------
// Happy paths: every route, its service call after the nonce, and what it renders.

struct RouteRow {
  std::string method;
  std::string target;
  std::string body;
  int status;
  std::vector<std::string> service_calls;
  std::string json_pointer;  // a field of the response to check
  json expected;
};

void PrintTo(const RouteRow& row, std::ostream* os) { *os << row.method << " " << row.target; }

class RouteTest : public RoutesTest, public ::testing::WithParamInterface<RouteRow> {};

TEST_P(RouteTest, ConsumesTheNonceThenCallsTheServiceAndRenders) {
  const RouteRow& row = GetParam();
  const HttpResponse r = Send(row.method, row.target, row.body);
  ASSERT_EQ(r.status, row.status) << r.body;
  std::vector<std::string> expected_calls = {"LookupKey", "ConsumeNonce"};
  expected_calls.insert(expected_calls.end(), row.service_calls.begin(), row.service_calls.end());
  EXPECT_EQ(CallsExceptObserve(), expected_calls);
  ASSERT_EQ(cp_.Nonces().size(), 1u);
  EXPECT_EQ(cp_.Nonces()[0].durable, row.method != "GET");
  EXPECT_EQ(cp_.Nonces()[0].access_key, kAdminKey);
  const json body = Body(r);
  EXPECT_EQ(body.at(json::json_pointer(row.json_pointer)), row.expected) << r.body;
  EXPECT_EQ(r.body.find("sealed"), std::string::npos) << "sealed secrets are never rendered";
}

INSTANTIATE_TEST_SUITE_P(
    AllRoutes, RouteTest,
    ::testing::Values(
        RouteRow{"POST",
                 "/v1/tasks",
                 R"({"command":["true"],"gpu_milli":500})",
                 201,
                 {"SubmitTask"},
                 "/state",
                 "pending"},
        RouteRow{"GET", "/v1/tasks", "", 200, {"ListTasks"}, "/tasks/0/id", "t-1"},
        RouteRow{"GET", "/v1/tasks/t-1", "", 200, {"GetTask"}, "/queue_position", 1},
        RouteRow{"POST", "/v1/tasks/t-1/stop", "", 200, {"StopTask"}, "/state", "stopped"},
        RouteRow{"DELETE", "/v1/tasks/t-2", "", 200, {"DeleteTask"}, "/deleted", true},
        RouteRow{"GET", "/v1/tasks/t-1/cost", "", 200, {"GetTaskCost"}, "/cost_micros", 0},
        RouteRow{"GET", "/v1/nodes", "", 200, {"ListNodes"}, "/nodes/0/name", "n1"},
        RouteRow{"GET", "/v1/nodes/n1", "", 200, {"GetNode"}, "/gpus/1/model", "A100-80GB"},
        RouteRow{"POST", "/v1/nodes/n1/cordon", "{}", 200, {"Cordon"}, "/cordoned", true},
        RouteRow{"POST", "/v1/nodes/n1/uncordon", "", 200, {"Uncordon"}, "/cordoned", false},
        RouteRow{"POST", "/v1/nodes/n1/drain", "", 200, {"DrainNode"}, "/draining", true},
        RouteRow{"POST",
                 "/v1/agent/nodes",
                 R"({"name":"n2","cpu_milli":96000,"memory_mib":1048576,"labels":{"zone":"a"},
                     "gpus":[{"model":"nvidia a100-sxm4-80gb","uuid":"GPU-1","mig_enabled":true,
                     "mig_instances":[{"profile":"3g.40gb","start":4}]}]})",
                 200,
                 {"RegisterNode"},
                 "/gpus/0/mig_instances/0/profile",
                 "3g.40gb"},
        RouteRow{"POST", "/v1/agent/nodes/n1/heartbeat", "", 200, {"Heartbeat"}, "/ok", true},
        RouteRow{"POST",
                 "/v1/agent/tasks/t-1/status",
                 R"({"state":"scheduled","time_ms":5,"exit_code":0,"reason":"bound"})",
                 200,
                 {"ReportTask"},
                 "/state",
                 "scheduled"},
        RouteRow{"POST",
                 "/v1/projects",
                 R"({"id":"p-2","name":"nlp","max_tasks":3})",
                 201,
                 {"CreateProject"},
                 "/max_tasks",
                 3},
        RouteRow{"GET", "/v1/projects", "", 200, {"ListProjects"}, "/projects/0/id", "p-1"},
        RouteRow{"GET", "/v1/projects/p-1", "", 200, {"GetProject"}, "/max_gpu_milli", 8000},
        RouteRow{"PATCH",
                 "/v1/projects/p-1",
                 R"({"max_gpu_milli":-1})",
                 200,
                 {"GetProject", "UpdateProject"},
                 "/max_gpu_milli",
                 -1},
        RouteRow{"GET", "/v1/projects/p-1/balance", "", 200, {"GetBalance"}, "/balance_micros", 0},
        RouteRow{"POST",
                 "/v1/projects/p-1/credits",
                 R"({"amount_micros":5000000,"note":"q3"})",
                 201,
                 {"Credit"},
                 "/kind",
                 "credit"},
        RouteRow{"GET",
                 "/v1/projects/p-1/ledger?from_ms=0&to_ms=10&offset=0&limit=5",
                 "",
                 200,
                 {"Ledger"},
                 "/next_offset",
                 nullptr},
        RouteRow{"GET",
                 "/v1/projects/p-1/statement?from_ms=0",
                 "",
                 200,
                 {"GetStatement"},
                 "/to_ms",
                 kNow},
        RouteRow{"POST",
                 "/v1/users",
                 R"({"id":"u-bo","name":"Bo","role":"member","projects":["p-1"]})",
                 201,
                 {"CreateUser"},
                 "/role",
                 "member"},
        RouteRow{"GET", "/v1/users", "", 200, {"ListUsers"}, "/users/0/id", "u-member"},
        RouteRow{"PATCH",
                 "/v1/users/u-member",
                 R"({"role":"admin"})",
                 200,
                 {"ListUsers", "UpdateUser"},
                 "/role",
                 "admin"},
        RouteRow{"POST",
                 "/v1/users/u-member/keys",
                 R"({"description":"laptop"})",
                 201,
                 {"CreateAccessKey"},
                 "/description",
                 "laptop"},
        RouteRow{"GET",
                 "/v1/users/u-member/keys",
                 "",
                 200,
                 {"ListAccessKeys"},
                 "/keys/0/access_key",
                 "AKMEMBER"},
        RouteRow{"DELETE", "/v1/keys/AKMEMBER", "", 200, {"RevokeAccessKey"}, "/active", false},
        RouteRow{"GET", "/v1/prices", "", 200, {"ListPrices"}, "/prices", json::array()},
        RouteRow{"PUT",
                 "/v1/prices",
                 R"({"resource":"gpu:a100-80gb","micros_per_hour":2500000})",
                 200,
                 {"SetPrice"},
                 "/resource",
                 "gpu:A100-80GB"}));

TEST_F(RoutesTest, WhoAmIDescribesTheCallerWithoutAServiceCall) {
  const HttpResponse r = SendRequest(Signed("GET", "/v1/whoami", "", kMemberKey, kMemberSecret));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(cp_.ServiceCalls().empty());
  const json me = Body(r);
  EXPECT_EQ(me["user"], "u-member");
  EXPECT_EQ(me["access_key"], kMemberKey);
  EXPECT_EQ(me["role"], "member");
  EXPECT_EQ(me["projects"], json::array({"p-1"}));
  EXPECT_EQ(r.body.find(kMemberSecret), std::string::npos);
}

TEST_F(RoutesTest, AssignmentsLongPollPassesItsParametersAndRendersTheTasks) {
  ASSERT_EQ(Send("POST", "/v1/agent/nodes",
                 R"({"name":"n9","cpu_milli":1000,"memory_mib":1024})").status,
            200);
  HttpResponse r = Send("GET", "/v1/agent/nodes/n9/assignments?after=41&wait_ms=5000");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(cp_.LastWatch(), (std::pair<int64_t, int64_t>{41, 5000}));
  EXPECT_EQ(Body(r)["node"], "n9");
  EXPECT_EQ(Body(r)["version"], 1);
  EXPECT_TRUE(Body(r)["tasks"].is_array());
  r = Send("GET", "/v1/agent/nodes/n9/assignments");
  EXPECT_EQ(cp_.LastWatch(), (std::pair<int64_t, int64_t>{0, 25'000})) << "the defaults";
  r = Send("GET", "/v1/agent/nodes/n9/assignments?wait_ms=60000");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(Message(r).find("wait_ms"), std::string::npos);
  r = Send("GET", "/v1/agent/nodes/nope/assignments");
  EXPECT_EQ(r.status, 404);
}

TEST_F(RoutesTest, TaskEventsRoute) {
  ASSERT_EQ(Send("POST", "/v1/agent/tasks/t-1/status", R"({"state":"scheduled"})").status, 200);
  cp_.ClearRecords();
  const HttpResponse r = Send("GET", "/v1/tasks/t-1/events");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(cp_.ServiceCalls(), std::vector<std::string>{"TaskEvents"});
  const json events = Body(r)["events"];
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["from"], "pending");
  EXPECT_EQ(events[0]["to"], "scheduled");
  EXPECT_EQ(events[0]["time_ms"], kNow) << "time_ms defaults to the server's clock";
}

TEST_F(RoutesTest, SubmitTaskPassesEveryFieldAndRendersTheTask) {
  const HttpResponse r = Send("POST", "/v1/tasks", R"({
      "name": "finetune", "project": "p-1", "cpu_milli": 8000, "memory_mib": 65536,
      "gpu_milli": 470, "gpu_mem_mib": 20000, "gpu_models": ["nvidia a100-sxm4-80gb"],
      "priority": 10, "gang_id": "g1", "gang_size": 2, "image": "pytorch:2",
      "command": ["python", "ft.py"], "disk_gib": 50, "max_runtime_ms": 3600000,
      "stop_when": "val_acc > 0.95", "restartable": true})");
  ASSERT_EQ(r.status, 201) << r.body;
  const server::TaskSpec spec = cp_.last_spec();
  EXPECT_EQ(spec.name, "finetune");
  EXPECT_EQ(spec.project_id, "p-1");
  EXPECT_EQ(spec.request.cpu_milli, 8000);
  EXPECT_EQ(spec.request.memory_mib, 65536);
  EXPECT_EQ(spec.request.gpu_milli, 470);
  EXPECT_EQ(spec.request.gpu_mem_mib, 20000);
  EXPECT_EQ(spec.request.gpu_models, std::vector<std::string>{"A100-80GB"});
  EXPECT_EQ(spec.request.priority, 10);
  EXPECT_EQ(spec.request.gang_id, "g1");
  EXPECT_EQ(spec.request.gang_size, 2);
  EXPECT_EQ(spec.image, "pytorch:2");
  EXPECT_EQ(spec.command, (std::vector<std::string>{"python", "ft.py"}));
  EXPECT_EQ(spec.disk_gib, 50);
  EXPECT_EQ(spec.max_runtime_ms, 3'600'000);
  EXPECT_EQ(spec.stop_when, "val_acc > 0.95");
  EXPECT_TRUE(spec.restartable);
  EXPECT_EQ(cp_.last_caller().user_id, "u-admin");
  const json t = Body(r);
  EXPECT_EQ(t["id"], "t-4");
  EXPECT_EQ(t["project"], "p-1");
  EXPECT_EQ(t["gpu_milli"], 470);
  EXPECT_EQ(t["gpu_models"], json::array({"A100-80GB"}));
  EXPECT_EQ(t["state"], "pending");
  EXPECT_EQ(t["placement"], nullptr);
  EXPECT_EQ(t["created_ms"], 1000);
}

TEST_F(RoutesTest, GetTaskShowsWhyItIsPending) {
  const json t = Body(Send("GET", "/v1/tasks/t-1"));
  EXPECT_EQ(t["queue_position"], 1);
  EXPECT_EQ(t["pending_reason"], "3 nodes: no GPU with 470 milli free");
  EXPECT_EQ(t["pending_nodes"],
            json::parse(R"([{"reason":"no GPU with 470 milli free","count":3}])"));
  const json running = Body(Send("GET", "/v1/tasks/t-3"));
  EXPECT_EQ(running["queue_position"], 0);
  EXPECT_EQ(running["placement"]["node"], "n1");
  EXPECT_EQ(running["placement"]["gpus"], json::array({1}));
  EXPECT_EQ(running["placement"]["mig_profile"], nullptr);
}

TEST_F(RoutesTest, ListTasksPassesFiltersAndPaginates) {
  HttpResponse r = Send("GET", "/v1/tasks?project=p-1&state=pending,running&node=n1&limit=1");
  ASSERT_EQ(r.status, 200) << r.body;
  const server::TaskFilter f = cp_.last_filter();
  EXPECT_EQ(f.project_id, "p-1");
  EXPECT_EQ(f.states, (std::vector<TaskState>{TaskState::kPending, TaskState::kRunning}));
  EXPECT_EQ(f.node, "n1");
  EXPECT_EQ(f.limit, 1);

  r = Send("GET", "/v1/tasks?limit=2");
  json page = Body(r);
  ASSERT_EQ(page["tasks"].size(), 2u);
  EXPECT_EQ(page["tasks"][1]["id"], "t-2");
  ASSERT_EQ(page["next_after"], "2");
  r = Send("GET", "/v1/tasks?limit=2&after=2");
  page = Body(r);
  ASSERT_EQ(page["tasks"].size(), 1u);
  EXPECT_EQ(page["tasks"][0]["id"], "t-3");
  EXPECT_EQ(page["next_after"], nullptr);
  EXPECT_EQ(cp_.last_filter().after_seq, 2);
  EXPECT_EQ(cp_.last_filter().limit, 2);
}

TEST_F(RoutesTest, RegisterNodeParsesGpusAndMigLayout) {
  const HttpResponse r = Send("POST", "/v1/agent/nodes", R"({
      "name": "gpu-7", "cpu_milli": 96000, "memory_mib": 1048576, "disk_gib": 3500,
      "labels": {"rack": "r1"},
      "gpus": [{"model": "A100-80GB", "uuid": "GPU-a"},
               {"model": "A100-80GB", "uuid": "GPU-b", "mig_enabled": true,
                "mig_instances": [{"profile": "3g.40gb", "start": 0},
                                  {"profile": "1g.10gb", "start": 4}]}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  const Node n = cp_.last_node();
  EXPECT_EQ(n.name, "gpu-7");
  EXPECT_EQ(n.labels.at("rack"), "r1");
  EXPECT_EQ(n.disk_gib, 3500);
  ASSERT_EQ(n.gpus.size(), 2u);
  EXPECT_EQ(n.gpus[0].mem_mib, 81920) << "memory comes from the catalog when not given";
  EXPECT_FALSE(n.gpus[0].mig_enabled);
  ASSERT_EQ(n.gpus[1].mig_instances.size(), 2u);
  EXPECT_EQ(n.gpus[1].mig_instances[1].start, 4);
  const json body = Body(r);
  EXPECT_EQ(body["gpus"][1]["mig_instances"][1]["profile"], "1g.10gb");
  EXPECT_EQ(body["status"], "ready");
  EXPECT_EQ(body["disk_gib"], 3500);
}

TEST_F(RoutesTest, PatchProjectKeepsFieldsNotGiven) {
  const HttpResponse r = Send("PATCH", "/v1/projects/p-1", R"({"name":"vision-2"})");
  ASSERT_EQ(r.status, 200) << r.body;
  const Project p = cp_.last_project();
  EXPECT_EQ(p.name, "vision-2");
  EXPECT_EQ(p.max_gpu_milli, 8000);
  EXPECT_EQ(p.max_tasks, 10);
  EXPECT_EQ(p.stop_grace_ms, 60'000);
}

TEST_F(RoutesTest, NewKeyShowsItsSecretOnceAndListingNever) {
  HttpResponse r = Send("POST", "/v1/users/u-member/keys", "");
  ASSERT_EQ(r.status, 201) << r.body;
  const json created = Body(r);
  const std::string secret = created["secret_key"];
  EXPECT_FALSE(secret.empty());
  r = Send("GET", "/v1/users/u-member/keys");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body.find(secret), std::string::npos);
  EXPECT_EQ(r.body.find("secret"), std::string::npos);
  EXPECT_EQ(r.body.find("do-not-leak"), std::string::npos);
}

TEST_F(RoutesTest, ControlPlaneErrorsMapToStatuses) {
  HttpResponse r = Send("GET", "/v1/tasks/t-99");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Body(r)["error"]["code"], "not_found");
  EXPECT_EQ(Message(r), "task 't-99' not found");
  r = Send("DELETE", "/v1/tasks/t-1");
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(Body(r)["error"]["code"], "failed_precondition");
  r = Send("POST", "/v1/projects", R"({"id":"p-1","name":"dup"})");
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(Body(r)["error"]["code"], "already_exists");
  r = Send("PATCH", "/v1/users/u-nobody", R"({"role":"admin"})");
  EXPECT_EQ(r.status, 404);
}

// ------------------------------------------------------------------------------------------
// Task files, over a real file store in a temp dir.

class FileRoutesTest : public RoutesTest {
 protected:
  void SetUp() override {
    RoutesTest::SetUp();
    root_ = ::testing::TempDir() + "routes-files-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(root_);
    server::TaskFilesOptions options;
    options.max_task_bytes = 100'000;
    options.max_file_bytes = 50'000;
    auto files = server::DiskTaskFiles::Open(root_, options);
    ASSERT_TRUE(files) << files.error().message;
    files_ = std::move(*files);
    ApiOptions api_options{[] { return kNow; }};
    api_options.task_files = files_.get();
    files_api_ = std::make_unique<Api>(cp_, std::move(api_options));
  }
  void TearDown() override {
    files_api_.reset();
    files_.reset();
    std::filesystem::remove_all(root_);
  }

  HttpResponse Files(std::string method, std::string target, std::string body = "",
                     const std::string& key = kAdminKey, const std::string& secret = kAdminSecret) {
    return SendRequest(Signed(std::move(method), std::move(target), std::move(body), key, secret),
                       files_api_.get());
  }
  std::string Commit(const std::string& path, const std::string& data) {
    return json{{"path", path}, {"size", data.size()}, {"sha256", Sha256Hex(data)}}.dump();
  }

  std::string root_;
  std::unique_ptr<server::DiskTaskFiles> files_;
  std::unique_ptr<Api> files_api_;
};

TEST_F(FileRoutesTest, AnUploadResumesCommitsAndReadsBackWithItsHash) {
  const std::string data = std::string(3000, 'a') + std::string(3000, 'b');
  HttpResponse r = Files("GET", "/v1/tasks/t-1/uploads?path=in%2Fx.bin");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["received"], 0);
  r = Files("PUT", "/v1/tasks/t-1/uploads?path=in%2Fx.bin&offset=0", data.substr(0, 3000));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["received"], 3000);
  r = Files("PUT", "/v1/tasks/t-1/uploads?path=in%2Fx.bin&offset=1000", data.substr(1000));
  EXPECT_EQ(r.status, 409);
  EXPECT_NE(Message(r).find("has received 3000 bytes; continue with offset=3000"),
            std::string::npos)
      << Message(r);
  r = Files("GET", "/v1/tasks/t-1/uploads?path=in%2Fx.bin");
  EXPECT_EQ(Body(r)["received"], 3000);
  r = Files("PUT", "/v1/tasks/t-1/uploads?path=in%2Fx.bin&offset=3000", data.substr(3000));
  ASSERT_EQ(r.status, 200) << r.body;
  r = Files("POST", "/v1/tasks/t-1/uploads/commit", Commit("in/x.bin", data));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["sha256"], Sha256Hex(data));

  r = Files("GET", "/v1/tasks/t-1/files");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["type"], "dir");
  EXPECT_EQ(Body(r)["files"], json::parse(R"([{"path":"in/x.bin","size":6000,"sha256":")" +
                                          Sha256Hex(data) + R"("}])"));
  r = Files("GET", "/v1/tasks/t-1/files?path=in%2Fx.bin");
  EXPECT_EQ(Body(r)["type"], "file");

  r = Files("GET", "/v1/tasks/t-1/files/content?path=in%2Fx.bin&offset=2990&length=20");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/octet-stream");
  EXPECT_EQ(r.body, data.substr(2990, 20));
  const std::vector<std::pair<std::string, std::string>> headers = {
      {"X-Gpupool-File-Size", "6000"}, {"X-Gpupool-File-Sha256", Sha256Hex(data)}};
  EXPECT_EQ(r.headers, headers);
  r = Files("GET", "/v1/tasks/t-1/files/content?path=in%2Fx.bin");
  EXPECT_EQ(r.body, data) << "the whole file when it fits one read";
  r = Files("GET", "/v1/tasks/t-1/files?path=out");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Message(r), "task t-1 has no file or directory 'out'");
}

TEST_F(FileRoutesTest, UsersUploadWhilePendingAndTheNodesAgentWhileItRunsThere) {
  const std::string chunk = "bytes";
  // t-3 runs on n1: a user's upload would never reach its workspace.
  HttpResponse r = Files("PUT", "/v1/tasks/t-3/uploads?path=a&offset=0", chunk);
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(Message(r),
            "task t-3 is running: files can be uploaded while it is pending, before it starts; "
            "its outputs are uploaded by its node when it ends");
  r = Files("PUT", "/v1/tasks/t-2/uploads?path=a&offset=0", chunk);
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(Message(r),
            "task t-2 has ended (succeeded): its files can be downloaded but no longer uploaded");
  // Its node's agent uploads its outputs.
  r = Files("PUT", "/v1/tasks/t-3/uploads?path=out&offset=0&node=n1", chunk);
  ASSERT_EQ(r.status, 200) << r.body;
  r = Files("POST", "/v1/tasks/t-3/uploads/commit?node=n1", Commit("out", chunk));
  ASSERT_EQ(r.status, 200) << r.body;
  r = Files("PUT", "/v1/tasks/t-3/uploads?path=out2&offset=0&node=n2", chunk);
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(Message(r),
            "task t-3 is running and not bound to node n2: its outputs are not taken from there");
  r = Files("PUT", "/v1/tasks/t-3/uploads?path=out2&offset=0&node=n1", chunk, kMemberKey,
            kMemberSecret);
  EXPECT_EQ(r.status, 403);
  // Downloads work in every state, for members too.
  r = Files("GET", "/v1/tasks/t-3/files/content?path=out", "", kMemberKey, kMemberSecret);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, chunk);
}

TEST_F(FileRoutesTest, LimitsAre413AndAHashMismatchIs400NamingBothHashes) {
  HttpResponse r =
      Files("PUT", "/v1/tasks/t-1/uploads?path=big&offset=0", std::string(50'001, 'x'));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(Body(r)["error"]["code"], "resource_exhausted");
  EXPECT_NE(Message(r).find("the limit is 50000 bytes per file"), std::string::npos);

  ASSERT_EQ(Files("PUT", "/v1/tasks/t-1/uploads?path=a&offset=0", "real").status, 200);
  r = Files("POST", "/v1/tasks/t-1/uploads/commit", Commit("a", "fake"));
  EXPECT_EQ(r.status, 400);
  const std::string mismatch = "the commit says " + Sha256Hex("fake") +
                               ", the 4 bytes received hash to " + Sha256Hex("real");
  EXPECT_NE(Message(r).find(mismatch), std::string::npos) << Message(r);
  EXPECT_EQ(Body(Files("GET", "/v1/tasks/t-1/uploads?path=a"))["received"], 0);
}

TEST_F(FileRoutesTest, DeletingTheTaskDeletesItsFiles) {
  ASSERT_TRUE(files_->Append("t-2", "out", 0, "result"));
  ASSERT_TRUE(files_->Commit("t-2", "out", 6, Sha256Hex("result")));
  ASSERT_EQ(Files("GET", "/v1/tasks/t-2/files").status, 200);
  HttpResponse r = Files("DELETE", "/v1/tasks/t-2");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Files("GET", "/v1/tasks/t-2/files").status, 404);
  EXPECT_TRUE(files_->List("t-2", "")->files.empty());
}

TEST_F(FileRoutesTest, UnknownTasksAre404AndAServerWithoutFilesSays503) {
  HttpResponse r = Files("GET", "/v1/tasks/t-99/files");
  EXPECT_EQ(r.status, 404);
  r = Send("GET", "/v1/tasks/t-1/files");  // the Api without a file store
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(Message(r), "this server keeps no files");
}

TEST(HttpStatusOf, MapsEveryCode) {
  EXPECT_EQ(HttpStatusOf(ErrorCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusOf(ErrorCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusOf(ErrorCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusOf(ErrorCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusOf(ErrorCode::kAlreadyExists), 409);
  EXPECT_EQ(HttpStatusOf(ErrorCode::kFailedPrecondition), 409);
  EXPECT_EQ(HttpStatusOf(ErrorCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusOf(ErrorCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusOf(ErrorCode::kInternal), 500);
  EXPECT_EQ(ErrorCodeOfHttpStatus(200), std::nullopt);
  EXPECT_EQ(ErrorCodeOfHttpStatus(413), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ErrorCodeOfHttpStatus(429), ErrorCode::kResourceExhausted);
  EXPECT_EQ(ErrorCodeOfHttpStatus(502), ErrorCode::kUnavailable);
  EXPECT_EQ(ParseErrorCodeName("permission_denied"), ErrorCode::kPermissionDenied);
  EXPECT_EQ(ParseErrorCodeName("nope"), std::nullopt);
}

TEST_F(RoutesTest, WritesAnswerWhenTheControlPlaneCallsBackFromAnotherThread) {
  cp_.SetDeferWrites(true);
  auto capture = std::make_shared<Capture>();
  api_.Handle(Signed("POST", "/v1/tasks/t-1/stop"), Responder(capture));
  EXPECT_FALSE(capture->has_response());
  ASSERT_EQ(cp_.DeferredCount(), 1u);
  std::thread writer([this] { cp_.RunDeferred(); });
  const HttpResponse r = capture->Wait();
  writer.join();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Body(r)["state"], "stopped");
  EXPECT_EQ(capture->sends(), 1);
  const auto obs = cp_.Observations();
  ASSERT_EQ(obs.size(), 1u);
  EXPECT_EQ(obs[0].route, "/v1/tasks/{id}/stop");
}

// ------------------------------------------------------------------------------------------
// Join tokens and the agents' own credentials

INSTANTIATE_TEST_SUITE_P(
    JoinTokens, RouteTest,
    ::testing::Values(
        RouteRow{"POST",
                 "/v1/join-tokens",
                 R"({"description":"rack 7","expires_in_ms":60000})",
                 201,
                 {"CreateJoinToken"},
                 "/state",
                 "active"},
        RouteRow{
            "GET", "/v1/join-tokens", "", 200, {"ListJoinTokens"}, "/join_tokens", json::array()},
        RouteRow{"DELETE",
                 "/v1/join-tokens/JT1",
                 "",
                 404,
                 {"RevokeJoinToken"},
                 "/error/message",
                 "join token JT1 not found"}));

INSTANTIATE_TEST_SUITE_P(
    JoinTokens, BadInputTest,
    ::testing::Values(
        BadInputRow{"POST", "/v1/join-tokens", R"({"ttl":5})", "unknown field 'ttl'"},
        BadInputRow{"POST", "/v1/join-tokens", R"({"description":7})",
                    "description must be a string, got number"},
        BadInputRow{"POST", "/v1/join-tokens", R"({"expires_in_ms":-1})",
                    "expires_in_ms must be 0..315360000000, got -1"},
        BadInputRow{"GET", "/v1/join-tokens", R"({"all":true})", "takes no request body"},
        BadInputRow{"DELETE", "/v1/join-tokens/JT%20X", "", "path parameter 'id'"},
        BadInputRow{"POST", "/v1/agent/join", "", "request body is empty"},
        BadInputRow{"POST", "/v1/agent/join", R"({"node":"n1"})", "token is required"},
        BadInputRow{"POST", "/v1/agent/join", R"({"token":"JT1.s"})", "node is required"},
        BadInputRow{"POST", "/v1/agent/join", R"({"token":"JT1.s","node":"n 1"})",
                    "node must be 1..128 characters of A-Z a-z 0-9 - _ ., got 'n 1'"},
        BadInputRow{"POST", "/v1/agent/join", R"({"token":"JT1.s","node":"n1","name":"x"})",
                    "unknown field 'name'"}));

TEST_F(RoutesTest, ANewJoinTokenShowsItsTokenOnceAndListingNever) {
  HttpResponse r = Send("POST", "/v1/join-tokens", R"({"description":"rack 7",
                                                       "expires_in_ms":3600000})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(cp_.last_join_token_request(), (std::pair<std::string, int64_t>{"rack 7", 3'600'000}));
  EXPECT_EQ(cp_.last_caller().user_id, "u-admin");
  const json created = Body(r);
  const std::string id = created["id"];
  const std::string token = created["token"];
  EXPECT_EQ(token.substr(0, id.size() + 1), id + ".");
  EXPECT_EQ(created["description"], "rack 7");
  EXPECT_EQ(created["created_by"], "u-admin");
  EXPECT_EQ(created["expires_ms"], 1000 + 3'600'000);
  EXPECT_EQ(created["revoked_ms"], 0);
  EXPECT_EQ(created["nodes"], json::array());

  r = Send("GET", "/v1/join-tokens");
  ASSERT_EQ(r.status, 200) << r.body;
  const json list = Body(r)["join_tokens"];
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["id"], id);
  EXPECT_FALSE(list[0].contains("token"));
  EXPECT_EQ(r.body.find(token), std::string::npos);

  r = Send("DELETE", "/v1/join-tokens/" + id);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["state"], "revoked");
  EXPECT_EQ(Body(r)["revoked_ms"], 2000);
  EXPECT_EQ(r.body.find(token), std::string::npos);
}

TEST_F(RoutesTest, AJoinNeedsNoSignatureAndItsCredentialMayCallOnlyAgentRoutes) {
  const std::string token = Body(Send("POST", "/v1/join-tokens", ""))["token"];
  cp_.ClearRecords();

  HttpRequest join{"POST", "/v1/agent/join", "", "", R"({"token":")" + token + R"(","node":"n7"})"};
  HttpResponse r = SendRequest(join);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(cp_.ServiceCalls(), std::vector<std::string>{"JoinNode"});
  EXPECT_EQ(cp_.last_join(), (std::pair<std::string, std::string>{token, "n7"}));
  EXPECT_TRUE(cp_.Nonces().empty());
  const json creds = Body(r);
  EXPECT_EQ(creds["node"], "n7");
  EXPECT_EQ(creds["join_token"], token.substr(0, token.find('.')));
  const std::string key = creds["access_key"];
  const std::string secret = creds["secret_key"];
  ASSERT_FALSE(key.empty());
  ASSERT_FALSE(secret.empty());

  join.body = R"({"token":"JTNOPE.x","node":"n7"})";
  r = SendRequest(join);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(Message(r), "unknown join token");

  // The agent routes reach the control plane with the node's agent as the caller …
  cp_.ClearRecords();
  r = SendRequest(Signed("POST", "/v1/agent/nodes/n1/heartbeat", "", key, secret));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(cp_.ServiceCalls(), std::vector<std::string>{"Heartbeat"});
  EXPECT_EQ(cp_.last_caller().agent_node, "n7");
  EXPECT_EQ(cp_.last_caller().access_key, key);

  // … everything else is refused before any service call or nonce.
  cp_.ClearRecords();
  for (const auto& [method, target] :
       std::vector<std::pair<std::string, std::string>>{{"GET", "/v1/whoami"},
                                                        {"GET", "/v1/tasks"},
                                                        {"GET", "/v1/nodes"},
                                                        {"POST", "/v1/nodes/n1/cordon"},
                                                        {"GET", "/v1/join-tokens"},
                                                        {"DELETE", "/v1/keys/" + key}}) {
    r = SendRequest(Signed(method, target, "", key, secret));
    EXPECT_EQ(r.status, 403) << method << " " << target << ": " << r.body;
    EXPECT_EQ(Message(r), "access key " + key +
                              " is the agent credential of node n7: it may call only the agent "
                              "routes (/v1/agent/…)");
  }
  EXPECT_TRUE(cp_.ServiceCalls().empty());
  EXPECT_TRUE(cp_.Nonces().empty());
}

// ------------------------------------------------------------------------------------------
// Telemetry: the agents' batches, task logs, metrics histories, the usage overview

INSTANTIATE_TEST_SUITE_P(
    Telemetry, RouteTest,
    ::testing::Values(
        RouteRow{"POST",
                 "/v1/agent/nodes/n1/telemetry",
                 R"({"samples":[],"tasks":[]})",
                 200,
                 {"PushTelemetry"},
                 "/tasks",
                 json::array()},
        RouteRow{"GET", "/v1/tasks/t-2/logs", "", 200, {"ReadTaskLog"}, "/complete", true},
        RouteRow{"GET", "/v1/tasks/t-3/metrics", "", 200, {"GetTaskMetrics"}, "/resolution", "raw"},
        RouteRow{"GET", "/v1/nodes/n1/metrics", "", 200, {"GetNodeMetrics"}, "/node", "n1"},
        RouteRow{"GET", "/v1/usage", "", 200, {"GetUsage"}, "/nodes/0/name", "n1"}));

// One output chunk of a batch: `data` travels as base64.
json Chunk(const std::string& stream, int64_t offset, const std::string& data) {
  return {{"stream", stream}, {"offset", offset}, {"data_b64", Base64Encode(data)}};
}

const std::string kTelemetry = "/v1/agent/nodes/n1/telemetry";

std::string OneChunk(const json& chunk) {
  return json{{"tasks", {{{"task_id", "t-3"}, {"output", {chunk}}}}}}.dump();
}

INSTANTIATE_TEST_SUITE_P(
    Telemetry, BadInputTest,
    ::testing::Values(
        // The agents' batches.
        BadInputRow{"POST", kTelemetry, R"({"nodes":[]})", "unknown field 'nodes'"},
        BadInputRow{"POST", kTelemetry, R"({"samples":[{"time_ms":5,"cpu":1}]})",
                    "unknown field 'samples[0].cpu'"},
        BadInputRow{"POST", kTelemetry, R"({"tasks":[{"task_id":"t-3","stdout":"x"}]})",
                    "unknown field 'tasks[0].stdout'"},
        BadInputRow{"POST", kTelemetry, R"({"samples":[{"cpu_milli":1}]})",
                    "samples[0].time_ms is required"},
        BadInputRow{"POST", kTelemetry, R"({"tasks":[{"bound_ms":1}]})",
                    "tasks[0].task_id is required"},
        BadInputRow{"POST", kTelemetry,
                    R"({"tasks":[{"task_id":"t-3","samples":[{"time_ms":5,"gpu_util_pct":101}]}]})",
                    "tasks[0].samples[0].gpu_util_pct must be 0..100, got 101"},
        BadInputRow{"POST", kTelemetry,
                    R"({"samples":[{"time_ms":5,"gpu_util_pct":100,"gpus":[{"index":1}]}]})",
                    "samples[0].gpus[0].index must be 0 (GPUs in index order), got 1"},
        BadInputRow{"POST", kTelemetry,
                    R"({"samples":[{"time_ms":5,"gpus":[{"index":0},{"index":0}]}]})",
                    "samples[0].gpus[1].index must be 1 (GPUs in index order), got 0"},
        BadInputRow{"POST", kTelemetry,
                    OneChunk({{"stream", "stdout"}, {"offset", 0}, {"data_b64", "aGk=!"}}),
                    "tasks[0].output[0].data_b64 is not valid base64"},
        BadInputRow{"POST", kTelemetry, OneChunk(Chunk("stdin", 0, "hi")),
                    "tasks[0].output[0].stream must be stdout, stderr or metrics, got 'stdin'"},
        BadInputRow{"POST", kTelemetry, OneChunk(Chunk("stdout", -1, "hi")),
                    "tasks[0].output[0].offset must be >= 0, got -1"},
        // The logs' query.
        BadInputRow{"GET", "/v1/tasks/t-2/logs?offset=5&tail=2", "",
                    "give either offset or tail, not both"},
        BadInputRow{"GET", "/v1/tasks/t-2/logs?stream=stdin", "",
                    "stream must be stdout, stderr or metrics, got 'stdin'"},
        BadInputRow{"GET", "/v1/tasks/t-2/logs?offset=-1", "",
                    "offset must be 0..9223372036854775807, got -1"},
        BadInputRow{"GET", "/v1/tasks/t-2/logs?tail=1000001", "",
                    "tail must be 0..1000000, got 1000001"},
        BadInputRow{"GET", "/v1/tasks/t-2/logs?max_bytes=0", "",
                    "max_bytes must be 1..4194304, got 0"},
        BadInputRow{"GET", "/v1/tasks/t-2/logs?max_bytes=4194305", "",
                    "max_bytes must be 1..4194304, got 4194305"},
        BadInputRow{"GET", "/v1/tasks/t-2/logs?wait_ms=30001", "",
                    "wait_ms must be 0..30000, got 30001"},
        BadInputRow{"GET", "/v1/tasks/t-2/logs?follow=1", "", "unknown query parameter 'follow'"},
        // The metrics histories' query, and the overview.
        BadInputRow{"GET", "/v1/tasks/t-3/metrics?resolution=5m", "",
                    "resolution must be raw or 1m, got '5m'"},
        BadInputRow{"GET", "/v1/tasks/t-3/metrics?from_ms=10&to_ms=5", "",
                    "from_ms must not be after to_ms"},
        BadInputRow{"GET", "/v1/nodes/n1/metrics?from_ms=-1", "",
                    "from_ms must be 0..9223372036854775807, got -1"},
        BadInputRow{"GET", "/v1/nodes/n1/metrics?to_ms=soon", "",
                    "to_ms must be an integer, got 'soon'"},
        BadInputRow{"GET", "/v1/nodes/n1/metrics?step=60000", "", "unknown query parameter 'step'"},
        BadInputRow{"GET", "/v1/usage", R"({"all":true})", "takes no request body"}));

TEST_F(RoutesTest, ATelemetryBatchIsParsedWithItsCompleteMetricLines) {
  const std::string step1 = "{\"step\": 1, \"loss\": 0.5}\n";
  const std::string bad = "not json\n";
  const std::string no_values = "{\"note\": \"text only\"}\n";
  const std::string step2 = "{\"step\": 2}\n";
  const std::string partial = "{\"step\": 3}";  // its newline not written yet
  const std::string last = "{\"acc\": 1}";      // the end of a task that ended
  const json batch = {
      {"samples",
       {{{"time_ms", 1000},
         {"cpu_milli", 2000},
         {"memory_mib", 4096},
         {"gpu_util_pct", nullptr},
         {"gpus", {{{"index", 0}, {"util_pct", 30}, {"mem_used_mib", 100}}, {{"index", 1}}}}}}},
      {"tasks",
       {{{"task_id", "t-3"},
         {"bound_ms", 77},
         {"samples", {{{"time_ms", 1000}, {"cpu_milli", 500}, {"gpu_util_pct", 100}}}},
         {"output",
          {Chunk("stdout", 10, "hello\n"),
           Chunk("metrics", 100, step1 + bad + no_values + step2 + partial)}}},
        {{"task_id", "t-2"},
         {"bound_ms", 55},
         {"complete", true},
         {"output", {Chunk("stderr", 0, "bye\n"), Chunk("metrics", 0, step2 + last)}}}}}};
  const HttpResponse r = Send("POST", kTelemetry, batch.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(cp_.last_caller().user_id, "u-admin");

  const server::NodeTelemetry got = cp_.last_telemetry();
  EXPECT_EQ(got.node, "n1");
  ASSERT_EQ(got.samples.size(), 1u);
  const server::NodeSample& node = got.samples[0];
  EXPECT_EQ(node.usage.time_ms, 1000);
  EXPECT_EQ(node.usage.values,
            (std::array<int64_t, 4>{2000, 4096, server::kUnknown, server::kUnknown}))
      << "null and absent gauges are unknown";
  ASSERT_EQ(node.gpus.size(), 2u);
  EXPECT_EQ(node.gpus[0], (server::GpuSample{1000, {30, 100}}));
  EXPECT_EQ(node.gpus[1], (server::GpuSample{1000, {server::kUnknown, server::kUnknown}}));

  ASSERT_EQ(got.tasks.size(), 2u);
  const server::TaskTelemetry& running = got.tasks[0];
  EXPECT_EQ(running.task_id, "t-3");
  EXPECT_EQ(running.bound_ms, 77);
  EXPECT_FALSE(running.output_complete);
  ASSERT_EQ(running.samples.size(), 1u);
  EXPECT_EQ(running.samples[0].values,
            (std::array<int64_t, 4>{500, server::kUnknown, 100, server::kUnknown}));
  ASSERT_EQ(running.output.size(), 2u);
  EXPECT_EQ(running.output[0].stream, server::OutputStream::kStdout);
  EXPECT_EQ(running.output[0].offset, 10);
  EXPECT_EQ(running.output[0].data, "hello\n") << "decoded";
  EXPECT_EQ(running.output[1].stream, server::OutputStream::kMetrics);
  EXPECT_EQ(running.output[1].data, step1 + bad + no_values + step2 + partial) << "stored whole";
  // The complete lines, each with where it ends in the stream; the bad one and the one without
  // values skipped, the one being written left for a later batch.
  ASSERT_EQ(running.reported.size(), 2u);
  EXPECT_EQ(running.reported[0].end_offset, 100 + static_cast<int64_t>(step1.size()));
  EXPECT_EQ(running.reported[0].values, (MetricValues{{"loss", 0.5}, {"step", 1}}));
  EXPECT_EQ(
      running.reported[1].end_offset,
      100 + static_cast<int64_t>(step1.size() + bad.size() + no_values.size() + step2.size()));
  EXPECT_EQ(running.reported[1].values, (MetricValues{{"step", 2}}));

  const server::TaskTelemetry& ended = got.tasks[1];
  EXPECT_TRUE(ended.output_complete);
  ASSERT_EQ(ended.reported.size(), 2u) << "complete: the last line needs no newline";
  EXPECT_EQ(ended.reported[0].end_offset, static_cast<int64_t>(step2.size()));
  EXPECT_EQ(ended.reported[1].end_offset, static_cast<int64_t>(step2.size() + last.size()));
  EXPECT_EQ(ended.reported[1].values, (MetricValues{{"acc", 1}}));

  // The answer: how much of each stream the server holds (the fake takes every chunk whole).
  const json acks = Body(r)["tasks"];
  ASSERT_EQ(acks.size(), 2u);
  EXPECT_EQ(acks[0],
            json::parse(R"({"task_id":"t-3","stdout":16,"stderr":0,"metrics":)" +
                        std::to_string(100 + (step1 + bad + no_values + step2 + partial).size()) +
                        R"(,"refused":false})"));
  EXPECT_EQ(acks[1]["stderr"], 4);
}

TEST_F(RoutesTest, TheLogsRouteReadsItsQueryAndRendersTheSlice) {
  const std::string log = "epoch 1\nepoch 2\ndone\n";
  HttpResponse r = Send("GET", "/v1/tasks/t-2/logs");
  ASSERT_EQ(r.status, 200) << r.body;
  server::LogRequest q = cp_.last_log_request();
  EXPECT_EQ(q.stream, server::OutputStream::kStdout);
  EXPECT_EQ(q.offset, 0);
  EXPECT_EQ(q.tail_lines, -1);
  EXPECT_EQ(q.max_bytes, 1 << 20);
  EXPECT_EQ(q.wait_ms, 0);
  EXPECT_EQ(Body(r), json::parse(R"({"task_id":"t-2","stream":"stdout","offset":0,"next_offset":)" +
                                 std::to_string(log.size()) + R"(,"size":)" +
                                 std::to_string(log.size()) + R"(,"data_b64":")" +
                                 Base64Encode(log) + R"(","truncated":false,"complete":true})"));

  r = Send("GET", "/v1/tasks/t-2/logs?stream=stderr&offset=8&max_bytes=5&wait_ms=30000");
  ASSERT_EQ(r.status, 200) << r.body;
  q = cp_.last_log_request();
  EXPECT_EQ(q.stream, server::OutputStream::kStderr);
  EXPECT_EQ(q.offset, 8);
  EXPECT_EQ(q.max_bytes, 5);
  EXPECT_EQ(q.wait_ms, 30'000);
  const json slice = Body(r);
  EXPECT_EQ(slice["stream"], "stderr");
  EXPECT_EQ(slice["offset"], 8);
  EXPECT_EQ(Base64Decode(slice["data_b64"].get<std::string>()), "epoch");
  EXPECT_EQ(slice["next_offset"], 13);

  r = Send("GET", "/v1/tasks/t-2/logs?stream=metrics&tail=0");
  ASSERT_EQ(r.status, 200) << r.body;
  q = cp_.last_log_request();
  EXPECT_EQ(q.stream, server::OutputStream::kMetrics);
  EXPECT_EQ(q.tail_lines, 0);
  EXPECT_EQ(q.offset, 0);

  r = Send("GET", "/v1/tasks/t-1/logs");
  EXPECT_EQ(r.status, 404) << "the control plane's error";
}

TEST_F(RoutesTest, MetricsRoutesDefaultTheirSpanToTheResolutionsWindow) {
  using Query = std::tuple<int64_t, int64_t, server::Resolution>;
  HttpResponse r = Send("GET", "/v1/tasks/t-3/metrics");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(cp_.last_history_query(), (Query{kNow - 5 * 60'000, kNow, server::Resolution::kRaw}))
      << "the last five minutes, raw";
  json m = Body(r);
  EXPECT_EQ(m["task_id"], "t-3");
  EXPECT_EQ(m["resolution"], "raw");
  ASSERT_EQ(m["usage"].size(), 1u);
  EXPECT_EQ(m["usage"][0], json::parse(R"({"time_ms":)" + std::to_string(kNow - 5 * 60'000) +
                                       R"(,"samples":1,
          "mean":{"cpu_milli":500,"memory_mib":128,"gpu_util_pct":null,"gpu_mem_mib":0},
          "max":{"cpu_milli":500,"memory_mib":128,"gpu_util_pct":null,"gpu_mem_mib":0}})"));
  EXPECT_EQ(m["reported"][0]["values"], json::parse(R"({"step":10.0,"val_acc":0.5})"));
  EXPECT_EQ(m["latest"]["val_acc"], 0.5);

  r = Send("GET", "/v1/tasks/t-3/metrics?resolution=1m");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(cp_.last_history_query(),
            (Query{kNow - 24 * 3'600'000, kNow, server::Resolution::kMinute}))
      << "the last day, a point a minute";
  EXPECT_EQ(Body(r)["resolution"], "1m");
  Send("GET", "/v1/tasks/t-3/metrics?from_ms=5&to_ms=10&resolution=raw");
  EXPECT_EQ(cp_.last_history_query(), (Query{5, 10, server::Resolution::kRaw}));
  Send("GET", "/v1/tasks/t-3/metrics?to_ms=" + std::to_string(kNow - 60'000));
  EXPECT_EQ(cp_.last_history_query(),
            (Query{kNow - 6 * 60'000, kNow - 60'000, server::Resolution::kRaw}))
      << "the window ends at to_ms";
  Send("GET", "/v1/tasks/t-3/metrics?from_ms=" + std::to_string(kNow - 1000));
  EXPECT_EQ(cp_.last_history_query(), (Query{kNow - 1000, kNow, server::Resolution::kRaw}));

  r = Send("GET", "/v1/nodes/n1/metrics?resolution=1m&from_ms=0");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(cp_.last_history_query(), (Query{0, kNow, server::Resolution::kMinute}));
  EXPECT_EQ(Body(r), json::parse(R"({"node":"n1","resolution":"1m","usage":[],"gpus":[]})"));
  EXPECT_EQ(Send("GET", "/v1/nodes/n9/metrics").status, 404);
}

TEST_F(RoutesTest, TheUsageOverviewRendersNodesAndRunningTasks) {
  const HttpResponse r = SendRequest(Signed("GET", "/v1/usage", "", kMemberKey, kMemberSecret));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(cp_.last_caller().user_id, "u-member");
  const json usage = Body(r);
  ASSERT_EQ(usage["nodes"].size(), 1u);
  EXPECT_EQ(usage["nodes"][0], json::parse(R"({"name":"n1","status":"ready","gpus":2,
      "latest":{"time_ms":1000,"cpu_milli":2000,"memory_mib":4096,"gpu_util_pct":50,
                "gpu_mem_mib":null,
                "gpus":[{"index":0,"util_pct":50,"mem_used_mib":null},
                        {"index":1,"util_pct":50,"mem_used_mib":null}]}})"));
  ASSERT_EQ(usage["tasks"].size(), 1u);
  EXPECT_EQ(usage["tasks"][0], json::parse(R"({"id":"t-3","name":"train","project":"p-1",
      "node":"n1","gpus":[1],
      "latest":{"time_ms":1000,"cpu_milli":500,"memory_mib":128,"gpu_util_pct":null,
                "gpu_mem_mib":0},
      "reported":{"loss":0.25}})"));
}

// Held tasks: "hold" on submission, the release route.

TEST_F(RoutesTest, HoldIsParsedStrictlyAndRenderedAsHeld) {
  HttpResponse r = Send("POST", "/v1/tasks", R"({"command":["true"],"hold":true})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_TRUE(cp_.last_spec().hold);
  EXPECT_EQ(Body(r)["held"], true);

  r = Send("POST", "/v1/tasks", R"({"command":["true"]})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_FALSE(cp_.last_spec().hold) << "not held unless asked";
  EXPECT_EQ(Body(r)["held"], false);

  cp_.ClearRecords();
  r = Send("POST", "/v1/tasks", R"({"command":["true"],"hold":"yes"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Message(r), "hold must be a boolean, got string");
  EXPECT_TRUE(cp_.ServiceCalls().empty());
  EXPECT_TRUE(cp_.Nonces().empty()) << "a malformed request does not consume its nonce";
}

TEST_F(RoutesTest, ReleaseTakesNoBodyCallsTheServiceAndRendersTheTask) {
  ASSERT_EQ(Send("POST", "/v1/tasks", R"({"command":["true"],"hold":true})").status, 201);
  cp_.ClearRecords();
  HttpResponse r = Send("POST", "/v1/tasks/t-4/release");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(CallsExceptObserve(),
            (std::vector<std::string>{"LookupKey", "ConsumeNonce", "ReleaseTask"}));
  EXPECT_TRUE(cp_.Nonces().at(0).durable) << "a release is a write";
  EXPECT_EQ(Body(r)["id"], "t-4");
  EXPECT_EQ(Body(r)["held"], false);
  EXPECT_EQ(Body(r)["reason"], "released by u-admin");

  r = Send("POST", "/v1/tasks/t-4/release");
  EXPECT_EQ(r.status, 409) << "only a held task can be released";
  EXPECT_EQ(Body(r)["error"]["code"], "failed_precondition");
  EXPECT_EQ(Message(r), "task 't-4' is not held");
  EXPECT_EQ(Send("POST", "/v1/tasks/t-99/release").status, 404);

  cp_.ClearRecords();
  r = Send("POST", "/v1/tasks/t-4/release", R"({"now":true})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Message(r), "POST /v1/tasks/t-4/release takes no request body (unknown field 'now')");
  r = Send("GET", "/v1/tasks/t-4/release");
  EXPECT_EQ(r.status, 405);
  EXPECT_TRUE(cp_.ServiceCalls().empty());
}

}  // namespace
}  // namespace gpupool::api
