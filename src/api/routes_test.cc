// Tests for api/routes over the real Controller (an AsyncStore on a MemoryStore: write callbacks
// come from the store's writer thread, as in production): authentication failures (401 with the
// reason, nothing changed), every class of malformed input (4xx naming the problem, the nonce
// left unused, nothing written), routing (404, 405), every route's happy path (the nonce
// consumed, durably for writes, before the service's own write), rendering, error-code mapping,
// answers that wait for the durable write, latency reporting and /healthz's 503; join tokens,
// the public join, and agent credentials kept to the agent routes and their own node; telemetry:
// the agents' batches parsed strictly (metric lines into reported points) and taken by the
// controller, the logs, metrics and usage routes' queries and renderings.
#include "api/routes.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/signing.h"
#include "api/tunnel_hub.h"
#include "api/wire.h"
#include "core/base64.h"
#include "os/sha256.h"
#include "proto/openapi.h"
#include "server/controller_testing.h"

namespace gpupool::api {
namespace {

using nlohmann::json;
using server::testing::Await;
using server::testing::AwaitList;
using server::testing::AwaitMetrics;
using server::testing::AwaitTask;
using server::testing::kAnswerLimit;

constexpr int64_t kNow = 1'700'000'000'000;  // the fixture's clock
constexpr int64_t kNeverLostMs = int64_t{365} * 24 * 3600 * 1000;
constexpr int64_t kMinute = 60'000;

// Captures the one response a request gets and the thread that sent it; waits for it when it
// comes from another thread.
class Capture : public ResponseChannel {
 public:
  void Send(HttpResponse response) override {
    std::lock_guard lock(mu_);
    ++sends_;
    response_ = std::move(response);
    thread_ = std::this_thread::get_id();
    cv_.notify_all();
  }
  // A stream's head is captured as the response; its body is not (the stream is refused, as
  // for a client gone). Streams are tested over the real server (http_server_test.cc).
  std::shared_ptr<ResponseStream> Stream(HttpResponse head) override {
    Send(std::move(head));
    return nullptr;
  }
  bool has_response() {
    std::lock_guard lock(mu_);
    return response_.has_value();
  }
  // The response, or nullopt (with a test failure) when none came within kAnswerLimit.
  std::optional<HttpResponse> Wait() {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, kAnswerLimit, [this] { return response_.has_value(); })) {
      ADD_FAILURE() << "no response";
    }
    return response_;
  }
  int sends() {
    std::lock_guard lock(mu_);
    return sends_;
  }
  std::thread::id thread() {
    std::lock_guard lock(mu_);
    return thread_;
  }
  // What the Api told the HTTP server of the caller (Authenticated), if it did; answered with
  // `refusal` when set (the user has all its connections open).
  Status Authenticated(std::string_view user, bool privileged) override {
    std::lock_guard lock(mu_);
    privileged_ = privileged;
    user_ = std::string(user);
    if (refusal) return tl::unexpected(*refusal);
    return {};
  }
  std::optional<bool> privileged() {
    std::lock_guard lock(mu_);
    return privileged_;
  }
  std::string user() {
    std::lock_guard lock(mu_);
    return user_;
  }
  std::optional<Error> refusal;  // set before the request

 private:
  std::mutex mu_;
  std::optional<bool> privileged_;
  std::string user_;
  std::condition_variable cv_;
  std::optional<HttpResponse> response_;
  int sends_ = 0;
  std::thread::id thread_;
};

struct Credentials {
  std::string key;
  std::string secret;
};

// The world every route test starts from, built through the controller itself: project p-1
// (quotas 8000 / 10 / 60 s) with member u-member ("Mia") and a revoked key of hers, node n1
// (2 × A100-80GB), and three tasks of p-1: t-1 pending (it asks for more CPU than any node has),
// t-2 succeeded on n1 with its output shipped, t-3 running on n1 with usage and a reported
// metric.
class RoutesTest : public server::testing::ControllerFixture {
 protected:
  RoutesTest() {
    std::string tmpl =
        (std::filesystem::path(::testing::TempDir()) / "routes_test.XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) dir_ = tmpl;
    options_.node_timeout_ms = kNeverLostMs;
    options_.output_dir = dir_ + "/output";
  }

  void SetUp() override {
    ASSERT_FALSE(dir_.empty()) << "cannot make a temp dir";
    ControllerFixture::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(clock_.now_ms, kNow);
    api_ = std::make_unique<Api>(server::Services::Of(*c_),
                                 ApiOptions{[this] { return clock_.now_ms.load(); }});
    admin_creds_ = {admin_key_, admin_secret_};

    Project p1{"p-1", "vision", 8000, 10, 60'000, 0};
    ASSERT_TRUE(Await<Project>([&](server::Done<Project> d) { c_->CreateProject(admin_, p1, d); }));
    User mia{"u-member", "Mia", Role::kMember, {"p-1"}, 0, {}};
    ASSERT_TRUE(Await<User>([&](server::Done<User> d) { c_->CreateUser(admin_, mia, d); }));
    member_ = NewKey("u-member");
    revoked_ = NewKey("u-member");
    ASSERT_TRUE(Await<AccessKey>(
        [&](server::Done<AccessKey> d) { c_->RevokeAccessKey(admin_, revoked_.key, d); }));
    const Node n1 = Node::Make("n1", 64'000, 512 * 1024, 2, "A100-80GB");
    ASSERT_TRUE(Await<server::NodeView>(
        [&](server::Done<server::NodeView> d) { c_->RegisterNode(admin_, n1, d); }));

    ASSERT_EQ(SubmitTrain(100'000).id, "t-1");
    ASSERT_EQ(SubmitTrain(1000).id, "t-2");
    ASSERT_EQ(c_->SchedulePass(), 1) << "t-1 fits nowhere";
    Report("t-2", TaskState::kRunning);
    server::NodeTelemetry t2_output;
    t2_output.node = "n1";
    server::TaskTelemetry t2;
    t2.task_id = "t-2";
    t2.bound_ms = Get("t-2").bound_ms;
    t2.output = {{server::OutputStream::kStdout, 0, kStdoutLog},
                 {server::OutputStream::kStderr, 0, kStderrLog}};
    t2.output_complete = true;
    t2_output.tasks.push_back(t2);
    ASSERT_TRUE(Push(t2_output));
    Report("t-2", TaskState::kSucceeded);

    ASSERT_EQ(SubmitTrain(1000).id, "t-3");
    ASSERT_EQ(c_->SchedulePass(), 1);
    Report("t-3", TaskState::kRunning);
    // Usage 6 and 4 minutes and 30 s ago (node and t-3), and t-3's one metric line.
    server::NodeTelemetry usage;
    usage.node = "n1";
    server::TaskTelemetry t3;
    t3.task_id = "t-3";
    t3.bound_ms = Get("t-3").bound_ms;
    for (int64_t ago : {6 * kMinute, 4 * kMinute, kMinute / 2}) {
      const int64_t t = kNow - ago;
      usage.samples.push_back(
          server::NodeSample{{t, {2000, 4096, 50, server::kUnknown}},
                             {{t, {50, server::kUnknown}}, {t, {50, server::kUnknown}}}});
      t3.samples.push_back({t, {500, 128, server::kUnknown, 0}});
    }
    t3.output = {{server::OutputStream::kMetrics, 0, kMetricLine}};
    usage.tasks.push_back(t3);
    ASSERT_TRUE(Push(usage));
    writes_at_start_ = Writes();
  }

  // The fixture's TearDown has answered every write in flight (while the Apis lived) and closed
  // the controller; subclasses' members are gone too by now.
  ~RoutesTest() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  Task SubmitTrain(int64_t cpu_milli) {
    server::TaskSpec spec;
    spec.name = "train";
    spec.project_id = "p-1";
    spec.request.cpu_milli = cpu_milli;
    spec.request.gpu_milli = 470;
    spec.command = {"python", "train.py"};
    auto t = Await<Task>([&](server::Done<Task> d) { c_->SubmitTask(admin_, spec, d); });
    EXPECT_TRUE(t) << t.error().message;
    return t.value_or(Task{});
  }
  void Report(const std::string& id, TaskState to) {
    auto t =
        Await<Task>([&](server::Done<Task> d) { c_->ReportTask(admin_, id, to, 0, 0, "", 0, d); });
    EXPECT_TRUE(t) << id << ": " << t.error().message;
  }
  Credentials NewKey(const std::string& user) {
    auto key = Await<server::NewAccessKey>(
        [&](server::Done<server::NewAccessKey> d) { c_->CreateAccessKey(admin_, user, "", d); });
    EXPECT_TRUE(key) << key.error().message;
    return key ? Credentials{key->key.access_key, key->secret} : Credentials{};
  }
  Task Get(const std::string& id) { return AwaitTask(*c_, admin_, id)->task; }
  Result<std::vector<server::OutputOffsets>> Push(const server::NodeTelemetry& batch) {
    return Await<std::vector<server::OutputOffsets>>(
        [&](server::Done<std::vector<server::OutputOffsets>> d) {
          c_->PushTelemetry(admin_, batch, std::move(d));
        });
  }

  HttpResponse SendRequest(HttpRequest request) {
    auto capture = std::make_shared<Capture>();
    api_->Handle(std::move(request), Responder(capture));
    std::optional<HttpResponse> r = capture->Wait();
    EXPECT_EQ(capture->sends(), 1);
    return r.value_or(HttpResponse{});
  }

  HttpRequest Signed(std::string method, std::string target, std::string body = "",
                     std::optional<Credentials> as = std::nullopt, int64_t ts = kNow) {
    const Credentials& c = as ? *as : admin_creds_;
    HttpRequest r;
    r.method = std::move(method);
    r.target = std::move(target);
    r.body = std::move(body);
    const std::string nonce = "n" + std::to_string(++nonce_) + "-0123456789abcdef";
    Result<std::string> header =
        SignRequest(c.key, c.secret, r.method, r.target, r.body, ts, nonce);
    // A target that cannot be signed (bad percent-encoding) still goes out, with a well-formed
    // header whose signature is wrong: the server must reject the target itself.
    r.authorization =
        header ? *header : FormatAuthorization(Credential{c.key, ts, nonce, std::string(64, '0')});
    return r;
  }

  HttpResponse Send(std::string method, std::string target, std::string body = "") {
    return SendRequest(Signed(std::move(method), std::move(target), std::move(body)));
  }

  // Whether the controller took the request's nonce (probing takes it if it did not).
  bool NonceConsumed(const HttpRequest& r) {
    Result<Credential> c = ParseAuthorization(r.authorization);
    EXPECT_TRUE(c) << r.authorization;
    if (!c) return false;
    const Status fresh = c_->ConsumeNonce(c->access_key, c->nonce, c->timestamp_ms, false);
    if (!fresh) {
      EXPECT_NE(fresh.error().message.find("already used"), std::string::npos);
    }
    return !fresh;
  }
  // Whether the request's nonce is durable (in the store, after every write queued so far).
  bool NonceDurable(const HttpRequest& r) {
    Result<Credential> c = ParseAuthorization(r.authorization);
    EXPECT_TRUE(c) << r.authorization;
    const store::Snapshot s = Durable();
    return c && std::any_of(s.nonces.begin(), s.nonces.end(), [&](const Nonce& n) {
             return n.access_key == c->access_key && n.nonce == c->nonce;
           });
  }
  // What the store holds once every write queued so far is durable.
  store::Snapshot Durable() {
    EXPECT_TRUE(store_->WriteSync(store::WriteBatch{}));
    Result<store::Snapshot> s = store_->Load({});
    EXPECT_TRUE(s) << s.error().message;
    return s.value_or(store::Snapshot{});
  }
  // Batches that changed something, once every write queued so far is durable.
  size_t Writes() {
    EXPECT_TRUE(store_->WriteSync(store::WriteBatch{}));
    return store_->applied();
  }
  // Batches written since the world was built.
  size_t WritesSinceSetUp() { return Writes() - writes_at_start_; }

  static json Body(const HttpResponse& r) { return json::parse(r.body); }
  static std::string Message(const HttpResponse& r) {
    return Body(r)["error"]["message"].get<std::string>();
  }

  static inline const std::string kStdoutLog = "epoch 1\nepoch 2\ndone\n";
  static inline const std::string kStderrLog = "warning: slow disk\n";
  static inline const std::string kMetricLine = "{\"loss\": 0.25}\n";

  std::string dir_;
  std::unique_ptr<Api> api_;
  Credentials admin_creds_;
  Credentials member_;
  Credentials revoked_;
  size_t writes_at_start_ = 0;
  int nonce_ = 0;
};

// ------------------------------------------------------------------------------------------
// Authentication

TEST_F(RoutesTest, AuthFailuresAre401WithReasonAndChangeNothing) {
  struct Row {
    const char* name;
    HttpRequest request;
    std::string expect;
  };
  const std::string submit = R"({"command":["true"]})";
  HttpRequest missing{"POST", "/v1/tasks", "", "", submit};
  HttpRequest malformed = missing;
  malformed.authorization = "Basic YWRtaW46YWRtaW4=";
  HttpRequest tampered = Signed("POST", "/v1/tasks", submit);
  tampered.body = R"({"command":["rm"]})";
  const Row rows[] = {
      {"missing header", missing, "missing Authorization header"},
      {"malformed header", malformed, "scheme must be GPUPOOL-HMAC-SHA256"},
      {"unknown key", Signed("POST", "/v1/tasks", submit, Credentials{"AKNOBODY", "x"}),
       "unknown access key AKNOBODY"},
      {"revoked key", Signed("POST", "/v1/tasks", submit, revoked_),
       "access key " + revoked_.key + " was revoked"},
      {"stale timestamp", Signed("POST", "/v1/tasks", submit, std::nullopt, kNow - 412'000),
       "request timestamp 1699999588000 is 412 s from server time; allowed ±300 s"},
      {"wrong secret", Signed("POST", "/v1/tasks", submit, Credentials{admin_key_, "guess"}),
       "signature does not match"},
      {"tampered body", tampered, "signature does not match"},
  };
  for (const Row& row : rows) {
    const HttpResponse r = SendRequest(row.request);
    EXPECT_EQ(r.status, 401) << row.name;
    EXPECT_EQ(Body(r)["error"]["code"], "unauthenticated") << row.name;
    EXPECT_NE(Message(r).find(row.expect), std::string::npos) << row.name << ": " << r.body;
    EXPECT_EQ(r.body.find(admin_secret_), std::string::npos) << row.name;
    EXPECT_EQ(r.body.find(revoked_.secret), std::string::npos) << row.name;
    bool www_authenticate = false;
    for (const auto& [name, value] : r.headers) www_authenticate |= name == "WWW-Authenticate";
    EXPECT_TRUE(www_authenticate) << row.name;
    if (!row.request.authorization.empty() && row.request.authorization.starts_with("GPUPOOL")) {
      EXPECT_FALSE(NonceConsumed(row.request)) << row.name;
    }
  }
  EXPECT_EQ(WritesSinceSetUp(), 0u);
  EXPECT_EQ(AwaitList(*c_, admin_, server::TaskFilter{})->tasks.size(), 3u);
}

TEST_F(RoutesTest, ReplayedRequestIsRejectedAndNotExecutedTwice) {
  const HttpRequest request = Signed("POST", "/v1/tasks", R"({"command":["true"]})");
  EXPECT_EQ(SendRequest(request).status, 201);
  EXPECT_EQ(WritesSinceSetUp(), 2u) << "the nonce, then the task";
  const HttpResponse replay = SendRequest(request);
  EXPECT_EQ(replay.status, 401);
  EXPECT_NE(Message(replay).find("already used"), std::string::npos) << replay.body;
  EXPECT_EQ(WritesSinceSetUp(), 2u);
  EXPECT_EQ(AwaitList(*c_, admin_, server::TaskFilter{})->tasks.size(), 4u);
}

TEST_F(RoutesTest, PublicRoutesNeedNoSignature) {
  HttpResponse r = SendRequest(HttpRequest{"GET", "/healthz", "", "", ""});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Body(r)["status"], "ok");
  r = SendRequest(HttpRequest{"GET", "/metrics", "", "", ""});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/plain; version=0.0.4");
  EXPECT_NE(r.body.find("gpupool_tasks{project=\"p-1\",state=\"running\"} 1"), std::string::npos)
      << r.body;
  EXPECT_EQ(WritesSinceSetUp(), 0u);
  EXPECT_TRUE(Durable().nonces.empty());
}

// The controller as the operations service, except that it reports itself unhealthy. The real
// Controller cannot be brought there from a test: a failed durable write stops the process.
class UnhealthyOperations : public server::OperationsService {
 public:
  explicit UnhealthyOperations(server::OperationsService& real) : real_(real) {}
  std::string MetricsText() override { return real_.MetricsText(); }
  void ObserveRequest(const std::string& route, int status, int64_t micros) override {
    real_.ObserveRequest(route, status, micros);
  }
  bool Healthy() override { return false; }
  Status CheckDiskSpace() override { return real_.CheckDiskSpace(); }

 private:
  server::OperationsService& real_;
};

TEST_F(RoutesTest, HealthzAnswers503WhenTheServicesReportUnhealthy) {
  UnhealthyOperations unhealthy(*c_);
  server::Services services = server::Services::Of(*c_);
  api_ = std::make_unique<Api>(
      server::Services{services.auth, services.tasks, services.nodes, services.agents,
                       services.accounts, services.billing, services.telemetry, services.files,
                       services.snapshots, services.volumes, services.datasets, services.events,
                       unhealthy},
      ApiOptions{[this] { return clock_.now_ms.load(); }});
  const HttpResponse r = SendRequest(HttpRequest{"GET", "/healthz", "", "", ""});
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(Body(r), json({{"status", "unhealthy"}})) << r.body;
  EXPECT_NE(c_->MetricsText().find(
                R"s(gpupool_api_request_duration_seconds_count{route="/healthz",code="503"} 1)s"),
            std::string::npos);
  EXPECT_EQ(WritesSinceSetUp(), 0u);
  api_.reset();  // before `unhealthy`, which it refers to
}

TEST_F(RoutesTest, ServesTheOpenApiDocument) {
  const HttpResponse r = SendRequest(HttpRequest{"GET", "/v1/openapi.json", "", "", ""});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_TRUE(r.body == proto::OpenApiText());
  EXPECT_EQ(Body(r)["openapi"], "3.1.0");
}

// ------------------------------------------------------------------------------------------
// Malformed input: 4xx naming the problem, the nonce left unused and nothing written.

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
  const HttpRequest request = Signed(row.method, row.target, row.body);
  const HttpResponse r = SendRequest(request);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  const json body = Body(r);
  EXPECT_EQ(body["error"]["code"], "invalid_argument");
  EXPECT_NE(body["error"]["message"].get<std::string>().find(row.expect), std::string::npos)
      << "message: " << body["error"]["message"];
  // Every service call comes after the nonce is taken: an unused nonce means none was made.
  EXPECT_FALSE(NonceConsumed(request)) << "a malformed request must not consume its nonce";
  EXPECT_EQ(WritesSinceSetUp(), 0u);
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
        BadInputRow{"POST", "/v1/tasks", R"({"command":["true"],"name":"\u001b[2JPWNED"})",
                    "name must not contain control characters (found one at byte 0)"},
        BadInputRow{"POST", "/v1/tasks", R"({"command":["true"],"name":"a\nb\r\nX: 1"})",
                    "name must not contain control characters (found one at byte 1)"},
        BadInputRow{"POST", "/v1/tasks", R"({"command":["true"],"name":"x\u0000"})",
                    "name must not contain control characters (found one at byte 1)"},
        BadInputRow{"POST", "/v1/tasks", R"({"command":["true"],"name":"\u009b2J"})",
                    "name must not contain control characters (found one at byte 0)"},
        BadInputRow{"POST", "/v1/projects/p-1/credits", R"({"amount_micros":1,"note":"ok\u0007"})",
                    "note must not contain control characters (found one at byte 2)"},
        BadInputRow{"POST", "/v1/tasks",
                    R"({"command":["true"],"max_runtime_ms":9223372036854775807})",
                    "max_runtime_ms must be 0..31536000000, got 9223372036854775807"},
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
        BadInputRow{"POST", "/v1/tasks", "{" + kCmd + R"(,"gang_id":"g","gang_size":2})",
                    "unknown field 'gang_id'"},
        BadInputRow{"POST", "/v1/jobs", "{" + kCmd + R"(,"nodes":1})", "nodes"},
        BadInputRow{"POST", "/v1/jobs", "{" + kCmd + R"(,"nodes":2,"topology":"required"})",
                    "topology: required needs a topology_label"},
        BadInputRow{"POST", "/v1/jobs", "{" + kCmd + R"(,"nodes":2,"topology":"strict"})",
                    "topology"}));

INSTANTIATE_TEST_SUITE_P(
    SubmitTaskArray, BadInputTest,
    ::testing::Values(
        BadInputRow{"POST", "/v1/arrays", "{" + kCmd + "}", "array is required"},
        BadInputRow{"POST", "/v1/arrays", "{" + kCmd + R"(,"array":"5-1"})",
                    "array '5-1': '5-1': the range ends below its start"},
        BadInputRow{"POST", "/v1/arrays", "{" + kCmd + R"(,"array":"0-9%0"})",
                    "array '0-9%0': the limit after % must be an integer in 1..10000"},
        BadInputRow{"POST", "/v1/arrays", "{" + kCmd + R"(,"array":"0-10000"})",
                    "array '0-10000' has more than 10000 indexes, the most one array may have"},
        BadInputRow{"POST", "/v1/arrays", R"({"array":"0-3"})", "command or image is required"},
        BadInputRow{"GET", "/v1/tasks?array=a%207", "", "array must be 1..128 characters"}));

INSTANTIATE_TEST_SUITE_P(
    FileRoutes, BadInputTest,
    ::testing::Values(
        BadInputRow{"GET", "/v1/tasks/t-1/files?path=..%2Fetc", "",
                    "path '../etc' has a '..' component"},
        BadInputRow{"GET", "/v1/tasks/t-1/files?path=%2Fetc%2Fpasswd", "",
                    "path '/etc/passwd' is outside the task's workspace /root"},
        BadInputRow{"GET", "/v1/tasks/t-1/files/content", "", "path is required"},
        BadInputRow{"GET", "/v1/tasks/t-1/files/content?path=a&length=0", "",
                    "length must be 1..4194304, got 0"},
        BadInputRow{"GET", "/v1/tasks/t-1/files/content?path=a&offset=-1", "",
                    "offset must be 0..9223372036854775807, got -1"},
        BadInputRow{"GET", "/v1/tasks/t-1/uploads?path=a%01b", "",
                    "contains a control character"},
        BadInputRow{"PUT", "/v1/tasks/t-1/uploads?path=a/../../x&offset=0", "",
                    "has a '..' component"},
        BadInputRow{"PUT", "/v1/tasks/t-1/uploads?path=a", "", "offset is required"},
        BadInputRow{"PUT", "/v1/tasks/t-1/uploads?path=a&offset=0&node=n%201", "",
                    "node must be 1..128 characters"},
        BadInputRow{"POST", "/v1/tasks/t-1/uploads/commit", R"({"path":"a","size":1})",
                    "sha256 is required"},
        BadInputRow{"POST", "/v1/tasks/t-1/uploads/commit",
                    R"({"path":"/abs","size":1,"sha256":"00"})",
                    "path '/abs' is outside the task's workspace /root"},
        BadInputRow{"POST", "/v1/tasks/t-1/uploads/commit",
                    R"({"path":"a","size":-1,"sha256":"00"})", "size must be >= 0, got -1"}));

INSTANTIATE_TEST_SUITE_P(
    OtherRoutes, BadInputTest,
    ::testing::Values(
        // Node registration.
        BadInputRow{"POST", "/v1/agent/nodes", R"({"cpu_milli":1000,"memory_mib":1024})",
                    "name is required"},
        BadInputRow{"POST", "/v1/agent/nodes",
                    R"({"name":"..","cpu_milli":1000,"memory_mib":1024})", "name must not be '..'"},
        BadInputRow{"POST", "/v1/agent/nodes", R"({"name":".","cpu_milli":1000,"memory_mib":1024})",
                    "name must not be '.'"},
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
                    "amount_micros must be 1..1000000000000000, got 0"},
        BadInputRow{"POST", "/v1/projects/p-1/credits", R"({"amount_micros":9223372036854775807})",
                    "amount_micros must be 1..1000000000000000, got 9223372036854775807"},
        BadInputRow{"PUT", "/v1/prices", R"({"resource":"disk","micros_per_hour":5})",
                    "resource must be cpu, memory, gpu:<model> or gpu:*, got 'disk'"},
        BadInputRow{"PUT", "/v1/prices", R"({"resource":"cpu"})", "micros_per_hour is required"},
        // Projects and users.
        BadInputRow{"POST", "/v1/projects", R"({"max_tasks":5})", "id is required"},
        BadInputRow{"PATCH", "/v1/projects/p-1", R"({})",
                    "name or max_gpu_milli or max_tasks or stop_grace_ms or max_storage_bytes is "
                    "required"},
        BadInputRow{"PATCH", "/v1/projects/p-1", R"({"max_tasks":-2})",
                    "max_tasks must be >= -1, got -2"},
        BadInputRow{"PATCH", "/v1/users/u-member", R"({"role":"root"})",
                    "role must be admin or member, got 'root'"},
        BadInputRow{"POST", "/v1/users/u-member/keys", R"({"secret":"mine"})",
                    "unknown field 'secret'"},
        // Bodies where none belongs.
        BadInputRow{"POST", "/v1/tasks/t-1/release", R"({"force":true})",
                    "POST /v1/tasks/t-1/release takes no request body (unknown field 'force')"},
        BadInputRow{"POST", "/v1/tasks/t-1/stop", R"({"force":true})", "unknown field 'force'"},
        BadInputRow{"PUT", "/v1/agent/tasks/t-1/chunks/abc", "x", "sha256 must be a SHA-256"},
        BadInputRow{"POST", "/v1/tasks", R"({"command":["x"],"snapshot_every_ms":5})",
                    "snapshot_every_ms must be 0 or at least 10000"},
        BadInputRow{"POST", "/v1/tasks", R"({"command":["x"],"checkpoint_signal":"SIGKILL"})",
                    "checkpoint_signal"},
        BadInputRow{"GET", "/v1/tasks", R"({"limit":5})", "takes no request body"},
        // Query parameters.
        BadInputRow{"GET", "/v1/tasks?limit=abc", "", "limit must be an integer, got 'abc'"},
        BadInputRow{"GET", "/v1/tasks?limit=0", "", "limit must be 1..1000, got 0"},
        BadInputRow{"GET", "/v1/tasks?limit=1001", "", "limit must be 1..1000, got 1001"},
        BadInputRow{"GET", "/v1/tasks?limit=99999999999999999999", "",
                    "limit must be 1..1000, got 99999999999999999999"},
        BadInputRow{"GET", "/v1/tasks?limit=", "", "limit must be an integer, got ''"},
        BadInputRow{"GET", "/v1/tasks?limt=5", "", "unknown query parameter 'limt'"},
        BadInputRow{"GET", "/v1/tasks/t-1?x=1", "", "unknown query parameter 'x'"},
        BadInputRow{"POST", "/v1/tasks", "\xEF\xBB\xBF{\"command\":[\"true\"]}",
                    "request body starts with a UTF-8 byte-order mark"},
        BadInputRow{"POST", "/v1/tasks", std::string("{\"command\":[\"true\"]}\0", 21),
                    "request body holds a NUL byte at offset 20"},
        BadInputRow{"GET", "/v1/tasks?limit=5&limit=6", "",
                    "query parameter 'limit' is given twice"},
        BadInputRow{"GET", "/v1/tasks?state=running,runing", "", "state must be pending, "},
        BadInputRow{"GET", "/v1/tasks?after=abc", "",
                    "after must be a cursor returned as next_after, got 'abc'"},
        BadInputRow{"GET", "/v1/tasks?after=-1", "",
                    "after must be a cursor returned as next_after, got '-1'"},
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
  const HttpRequest request = Signed("GET", "/v1/taskz");
  const HttpResponse r = SendRequest(request);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Body(r)["error"]["code"], "not_found");
  EXPECT_EQ(Message(r), "no route for GET /v1/taskz");
  EXPECT_FALSE(NonceConsumed(request));
}

TEST_F(RoutesTest, WrongMethodIs405WithAllow) {
  const HttpRequest request = Signed("PUT", "/v1/tasks/t-1");
  const HttpResponse r = SendRequest(request);
  EXPECT_EQ(r.status, 405);
  std::string allow;
  for (const auto& [name, value] : r.headers) {
    if (name == "Allow") allow = value;
  }
  EXPECT_EQ(allow, "GET, DELETE");
  EXPECT_NE(Message(r).find("method PUT is not allowed on /v1/tasks/{id}"), std::string::npos);
  EXPECT_FALSE(NonceConsumed(request));
  EXPECT_EQ(WritesSinceSetUp(), 0u);
}

TEST_F(RoutesTest, EveryRequestReportsItsLatencyUnderTheRoutePattern) {
  Send("GET", "/v1/tasks/t-1");
  Send("GET", "/v1/nope");
  Send("POST", "/v1/tasks", "{}");
  SendRequest(HttpRequest{"GET", "/healthz", "", "", ""});
  const std::string text = c_->MetricsText();
  for (const char* series :
       {R"s(route="/v1/tasks/{id}",code="200"} 1)s", R"s(route="(unmatched)",code="404"} 1)s",
        R"s(route="/v1/tasks",code="400"} 1)s", R"s(route="/healthz",code="200"} 1)s"}) {
    EXPECT_NE(text.find(std::string("gpupool_api_request_duration_seconds_count{") + series),
              std::string::npos)
        << series << "\n"
        << text;
  }
}

// ------------------------------------------------------------------------------------------
// Happy paths: every route, the nonce consumed (durably for writes) and the service's own
// write after it, and what it renders.

struct RouteRow {
  std::string method;
  std::string target;  // "{member_key}" stands for u-member's access key
  std::string body;
  int status;
  size_t service_writes;     // batches the service call itself commits
  std::string json_pointer;  // a field of the response to check
  json expected;
};

void PrintTo(const RouteRow& row, std::ostream* os) { *os << row.method << " " << row.target; }

class RouteTest : public RoutesTest, public ::testing::WithParamInterface<RouteRow> {};

TEST_P(RouteTest, ConsumesTheNonceThenCallsTheServiceAndRenders) {
  const RouteRow& row = GetParam();
  std::string target = row.target;
  if (const size_t at = target.find("{member_key}"); at != std::string::npos) {
    target.replace(at, std::string("{member_key}").size(), member_.key);
  }
  const HttpRequest request = Signed(row.method, target, row.body);
  const HttpResponse r = SendRequest(request);
  ASSERT_EQ(r.status, row.status) << r.body;
  const bool write = row.method != "GET";
  EXPECT_EQ(NonceDurable(request), write);
  EXPECT_EQ(WritesSinceSetUp(), (write ? 1 : 0) + row.service_writes)
      << "the nonce's batch for a write, then the service's";
  EXPECT_TRUE(NonceConsumed(request));
  const json body = Body(r);
  EXPECT_EQ(body.at(json::json_pointer(row.json_pointer)), row.expected) << r.body;
  EXPECT_EQ(r.body.find("sealed"), std::string::npos) << "sealed secrets are never rendered";
  EXPECT_EQ(r.body.find(member_.secret), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    AllRoutes, RouteTest,
    ::testing::Values(
        RouteRow{"POST", "/v1/tasks", R"({"command":["true"],"gpu_milli":500})", 201, 1, "/state",
                 "pending"},
        RouteRow{"GET", "/v1/tasks", "", 200, 0, "/tasks/0/id", "t-1"},
        RouteRow{"GET", "/v1/tasks/t-1", "", 200, 0, "/queue_position", 1},
        RouteRow{"POST", "/v1/tasks/t-1/stop", "", 200, 1, "/state", "stopped"},
        RouteRow{"DELETE", "/v1/tasks/t-2", "", 200, 1, "/deleted", true},
        RouteRow{"GET", "/v1/tasks/t-1/cost", "", 200, 0, "/cost_micros", 0},
        RouteRow{"GET", "/v1/nodes", "", 200, 0, "/nodes/0/name", "n1"},
        RouteRow{"GET", "/v1/nodes/n1", "", 200, 0, "/gpus/1/model", "A100-80GB"},
        RouteRow{"POST", "/v1/nodes/n1/cordon", "{}", 200, 1, "/cordoned", true},
        RouteRow{"POST", "/v1/nodes/n1/uncordon", "", 200, 1, "/cordoned", false},
        RouteRow{"POST", "/v1/nodes/n1/drain", "", 200, 1, "/draining", true},
        RouteRow{"POST", "/v1/agent/nodes",
                 R"({"name":"n2","cpu_milli":96000,"memory_mib":1048576,"labels":{"zone":"a"},
                     "gpus":[{"model":"nvidia a100-sxm4-80gb","uuid":"GPU-1","mig_enabled":true,
                     "mig_instances":[{"profile":"3g.40gb","start":4}]}]})",
                 200, 1, "/gpus/0/mig_instances/0/profile", "3g.40gb"},
        RouteRow{"POST", "/v1/agent/nodes/n1/heartbeat", "", 200, 0, "/ok", true},
        RouteRow{"POST", "/v1/agent/nodes/n1/heartbeat",
                 R"({"datasets":[")" + std::string(64, 'a') + R"("]})", 200, 0, "/ok", true},
        RouteRow{"POST", "/v1/datasets", R"({"name":"imagenet","project":"p-1"})", 201, 1, "/id",
                 "d-1"},
        RouteRow{"GET", "/v1/datasets?project=p-1", "", 200, 0, "/datasets", json::array()},
        RouteRow{"POST", "/v1/agent/tasks/t-3/status",
                 R"({"state":"succeeded","time_ms":5,"exit_code":0,"reason":"done"})", 200, 1,
                 "/state", "succeeded"},
        RouteRow{"POST", "/v1/projects", R"({"id":"p-2","name":"nlp","max_tasks":3})", 201, 1,
                 "/max_tasks", 3},
        RouteRow{"GET", "/v1/projects", "", 200, 0, "/projects/1/id", "p-1"},
        RouteRow{"GET", "/v1/projects/p-1", "", 200, 0, "/max_gpu_milli", 8000},
        RouteRow{"PATCH", "/v1/projects/p-1", R"({"max_gpu_milli":-1})", 200, 1, "/max_gpu_milli",
                 -1},
        RouteRow{"GET", "/v1/projects/p-1/balance", "", 200, 0, "/balance_micros", 0},
        RouteRow{"POST", "/v1/projects/p-1/credits", R"({"amount_micros":5000000,"note":"q3"})",
                 201, 1, "/kind", "credit"},
        RouteRow{"GET", "/v1/projects/p-1/ledger?from_ms=0&to_ms=10&offset=0&limit=5", "", 200, 0,
                 "/next_offset", nullptr},
        RouteRow{"GET", "/v1/projects/p-1/statement?from_ms=0", "", 200, 0, "/to_ms", kNow},
        RouteRow{"POST", "/v1/users",
                 R"({"id":"u-bo","name":"Bo","role":"member","projects":["p-1"]})", 201, 1, "/role",
                 "member"},
        RouteRow{"GET", "/v1/users", "", 200, 0, "/users/1/id", "u-member"},
        RouteRow{"PATCH", "/v1/users/u-member", R"({"role":"admin"})", 200, 1, "/role", "admin"},
        RouteRow{"POST", "/v1/users/u-member/keys", R"({"description":"laptop"})", 201, 1,
                 "/description", "laptop"},
        RouteRow{"GET", "/v1/users/u-member/keys", "", 200, 0, "/keys/0/user", "u-member"},
        RouteRow{"DELETE", "/v1/keys/{member_key}", "", 200, 1, "/active", false},
        RouteRow{"GET", "/v1/prices", "", 200, 0, "/prices", json::array()},
        RouteRow{"PUT", "/v1/prices", R"({"resource":"gpu:a100-80gb","micros_per_hour":2500000})",
                 200, 1, "/resource", "gpu:A100-80GB"}));

TEST_F(RoutesTest, WhoAmIDescribesTheCallerWithoutAServiceCall) {
  const HttpResponse r = SendRequest(Signed("GET", "/v1/whoami", "", member_));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(WritesSinceSetUp(), 0u);
  const json me = Body(r);
  EXPECT_EQ(me["user"], "u-member");
  EXPECT_EQ(me["access_key"], member_.key);
  EXPECT_EQ(me["role"], "member");
  EXPECT_EQ(me["projects"], json::array({"p-1"}));
  EXPECT_EQ(r.body.find(member_.secret), std::string::npos);
}

TEST_F(RoutesTest, AssignmentsLongPollPassesItsParametersAndRendersTheTasks) {
  const HttpResponse seen = Send("GET", "/v1/agent/nodes/n1/assignments?after=41&wait_ms=5000");
  ASSERT_EQ(seen.status, 200) << seen.body;
  const json now = Body(seen);
  EXPECT_EQ(now["node"], "n1");
  const int64_t version = now["version"];
  EXPECT_GT(version, 41) << "a newer version answers at once";
  ASSERT_EQ(now["tasks"].size(), 1u);
  EXPECT_EQ(now["tasks"][0]["id"], "t-3");
  EXPECT_EQ(now["tasks"][0]["state"], "running");
  EXPECT_EQ(Body(Send("GET", "/v1/agent/nodes/n1/assignments"))["version"], version)
      << "after defaults to 0";
  EXPECT_EQ(Body(Send("GET", "/v1/agent/nodes/n1/assignments?after=" + std::to_string(version) +
                                 "&wait_ms=0"))["version"],
            version)
      << "wait_ms=0 answers at once";

  // Polls at the current version wait: one with the default wait (25 s), one for 5 s. The
  // loop answers a poll whose wait is over; the default one was registered first, so had it
  // been due too it would have been answered before the other.
  const std::string current = "/v1/agent/nodes/n1/assignments?after=" + std::to_string(version);
  auto by_default = std::make_shared<Capture>();
  api_->Handle(Signed("GET", current), Responder(by_default));
  auto five_s = std::make_shared<Capture>();
  api_->Handle(Signed("GET", current + "&wait_ms=5000"), Responder(five_s));
  EXPECT_FALSE(by_default->has_response());
  EXPECT_FALSE(five_s->has_response());
  clock_.now_ms += 5'000;
  c_->Start();
  std::optional<HttpResponse> r = five_s->Wait();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Body(*r)["version"], version);
  EXPECT_FALSE(by_default->has_response()) << "its 25 s are not over";
  c_->Stop();
  r = by_default->Wait();
  ASSERT_TRUE(r);
  EXPECT_EQ(Body(*r)["version"], version) << "Stop answers every poll";

  HttpResponse bad = Send("GET", "/v1/agent/nodes/n1/assignments?wait_ms=60000");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(Message(bad).find("wait_ms"), std::string::npos);
  bad = Send("GET", "/v1/agent/nodes/nope/assignments");
  EXPECT_EQ(bad.status, 404);
  EXPECT_EQ(Message(bad), "node nope not found");
}

TEST_F(RoutesTest, TaskEventsRoute) {
  ASSERT_EQ(
      Send("POST", "/v1/agent/tasks/t-3/status", R"({"state":"failed","exit_code":3})").status,
      200);
  const HttpResponse r = Send("GET", "/v1/tasks/t-3/events");
  ASSERT_EQ(r.status, 200) << r.body;
  const json events = Body(r)["events"];
  ASSERT_EQ(events.size(), 4u) << "submitted, scheduled, running, failed";
  EXPECT_EQ(events[0]["reason"], "submitted");
  EXPECT_EQ(events[3]["from"], "running");
  EXPECT_EQ(events[3]["to"], "failed");
  EXPECT_EQ(events[3]["time_ms"], kNow) << "time_ms defaults to the server's clock";
  EXPECT_EQ(Send("GET", "/v1/tasks/t-99/events").status, 404);
}

TEST_F(RoutesTest, SubmitTaskPassesEveryFieldAndRendersTheTask) {
  const HttpResponse r = Send("POST", "/v1/tasks", R"({
      "name": "finetune", "project": "p-1", "cpu_milli": 8000, "memory_mib": 65536,
      "gpu_milli": 470, "gpu_mem_mib": 20000, "gpu_models": ["nvidia a100-sxm4-80gb"],
      "priority": 10, "image": "pytorch:2",
      "command": ["python", "ft.py"], "disk_gib": 50, "max_runtime_ms": 3600000,
      "stop_when": "val_acc > 0.95", "restartable": true})");
  ASSERT_EQ(r.status, 201) << r.body;
  const Task task = Get("t-4");
  EXPECT_EQ(task.name, "finetune");
  EXPECT_EQ(task.project_id, "p-1");
  EXPECT_EQ(task.user_id, "admin");
  EXPECT_EQ(task.request.cpu_milli, 8000);
  EXPECT_EQ(task.request.memory_mib, 65536);
  EXPECT_EQ(task.request.gpu_milli, 470);
  EXPECT_EQ(task.request.gpu_mem_mib, 20000);
  EXPECT_EQ(task.request.gpu_models, std::vector<std::string>{"A100-80GB"});
  EXPECT_EQ(task.request.priority, 10);
  EXPECT_EQ(task.image, "pytorch:2");
  EXPECT_EQ(task.command, (std::vector<std::string>{"python", "ft.py"}));
  EXPECT_EQ(task.disk_gib, 50);
  EXPECT_EQ(task.max_runtime_ms, 3'600'000);
  EXPECT_EQ(task.stop_when, "val_acc > 0.95");
  EXPECT_TRUE(task.restartable);
  EXPECT_FALSE(task.held);
  const store::Snapshot durable = Durable();
  EXPECT_TRUE(std::any_of(durable.tasks.begin(), durable.tasks.end(), [&](const Task& t) {
    return t == task;
  })) << "acknowledged: durable as memory shows it";
  const json t = Body(r);
  EXPECT_EQ(t["id"], "t-4");
  EXPECT_EQ(t["project"], "p-1");
  EXPECT_EQ(t["gpu_milli"], 470);
  EXPECT_EQ(t["gpu_models"], json::array({"A100-80GB"}));
  EXPECT_EQ(t["state"], "pending");
  EXPECT_EQ(t["placement"], nullptr);
  EXPECT_EQ(t["created_ms"], kNow);
}

// Declared ports are kept as given, and refused with the field named when out of range, repeated
// or too many.
TEST_F(RoutesTest, SubmittedPortsAreCheckedAndKept) {
  HttpResponse r = Send("POST", "/v1/tasks", "{" + kCmd + R"(,"ports":[8888,6006]})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Body(r)["ports"], json::array({8888, 6006}));
  EXPECT_EQ(Get(Body(r)["id"].get<std::string>()).ports, (std::vector<int32_t>{8888, 6006}));
  const std::pair<std::string, std::string> bad[] = {
      {"[0]", "ports"},
      {"[65536]", "ports"},
      {"[8888,8888]", "ports: 8888 is given twice"},
      {"[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]", "ports"},
  };
  for (const auto& [ports, message] : bad) {
    r = Send("POST", "/v1/tasks", "{" + kCmd + R"(,"ports":)" + ports + "}");
    EXPECT_EQ(r.status, 400) << ports;
    EXPECT_NE(Message(r).find(message), std::string::npos) << ports << ": " << Message(r);
  }
}

// A node's tunnel is its agent's (or an admin's) and a WebSocket; a task's port stream too.
TEST_F(RoutesTest, TunnelAndPortStreamRoutesCheckTheirCallerAndTheHandshake) {
  HttpResponse r = SendRequest(Signed("GET", "/v1/agent/nodes/n1/tunnel", "", member_));
  EXPECT_EQ(r.status, 403) << r.body;
  r = Send("GET", "/v1/agent/nodes/n1/tunnel");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(Message(r).find("is a WebSocket"), std::string::npos) << r.body;
  r = Send("GET", "/v1/tasks/t-3/ports/99999/stream");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(Message(r).find("path parameter 'port'"), std::string::npos) << r.body;
  EXPECT_FALSE(api_->tunnels().Connected("n1"));
}

// GPU models go by the names people write; one no node of the pool has is refused at once with
// what the pool has, instead of waiting for ever.
TEST_F(RoutesTest, GpuModelNamesResolveAndOnesThePoolLacksAreRefused) {
  HttpResponse r = Send("POST", "/v1/tasks", "{" + kCmd + R"(,"gpu_models":["a100"]})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Body(r)["gpu_models"], json::array({"A100-40GB", "A100-80GB"}));
  for (const char* name : {"RTX 3090", "H100"}) {
    r = Send("POST", "/v1/tasks", "{" + kCmd + R"(,"gpu_models":[")" + name + R"("]})");
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("no node of this pool has"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("(it has A100-80GB)"), std::string::npos) << r.body;
  }
  r = Send("POST", "/v1/tasks", "{" + kCmd + R"(,"gpu_models":["foo"]})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(Body(r)["error"]["message"],
            "gpu_models: 'foo' is not a GPU model of this pool (it has A100-80GB)");
  // 1g.5gb is an A100-40GB profile; the pool's A100-80GB offers 1g.10gb and up.
  r = Send("POST", "/v1/tasks", "{" + kCmd + R"(,"mig_profile":"1g.5gb"})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("mig_profile '1g.5gb' is not offered by this pool's GPUs (they offer "
                        "1g.10gb"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(Send("POST", "/v1/tasks", "{" + kCmd + R"(,"mig_profile":"1g.10gb"})").status, 201);
}

TEST_F(RoutesTest, GetTaskShowsWhyItIsPending) {
  const json t = Body(Send("GET", "/v1/tasks/t-1"));
  EXPECT_EQ(t["queue_position"], 1);
  EXPECT_EQ(t["pending_reason"], AwaitTask(*c_, admin_, "t-1")->pending_reason);
  EXPECT_NE(t["pending_reason"].get<std::string>().find("1 node: less than 100000 cpu milli free"),
            std::string::npos)
      << t["pending_reason"];
  EXPECT_EQ(t["pending_nodes"],
            json::parse(R"([{"reason":"less than 100000 cpu milli free","count":1}])"));
  const json running = Body(Send("GET", "/v1/tasks/t-3"));
  const TaskPlacement where = *Get("t-3").placement;
  EXPECT_EQ(running["queue_position"], 0);
  EXPECT_EQ(running["placement"]["node"], "n1");
  EXPECT_EQ(running["placement"]["gpus"], json(where.gpus));
  EXPECT_EQ(running["placement"]["mig_profile"], nullptr);
  const Task t3 = Get("t-3");
  ASSERT_GT(t3.started_ms, 0);
  EXPECT_EQ(running["runtime_ms"], clock_.now_ms - t3.started_ms) << "as of the answer";
  EXPECT_EQ(t["runtime_ms"], 0) << "a pending task has not run";
}

TEST_F(RoutesTest, ANodesGpusEachSayWhatIsFree) {
  // t-3 holds a 470-milli share of one of n1's two GPUs.
  const json node = Body(Send("GET", "/v1/nodes/n1"));
  const int shared = Get("t-3").placement->gpus.at(0);
  ASSERT_EQ(node["gpus"].size(), 2u);
  EXPECT_EQ(node["gpus"][shared]["milli_free"], 530);
  EXPECT_EQ(node["gpus"][1 - shared]["milli_free"], 1000);
  EXPECT_EQ(node["gpu_milli_free"], 1530) << "the node's sum over its GPUs";
}

TEST_F(RoutesTest, ListTasksPassesFiltersAndPaginates) {
  HttpResponse r = Send("GET", "/v1/tasks?project=p-1&state=pending,running&node=n1&limit=1");
  ASSERT_EQ(r.status, 200) << r.body;
  json page = Body(r);
  ASSERT_EQ(page["tasks"].size(), 1u) << "t-1 is pending but on no node";
  EXPECT_EQ(page["tasks"][0]["id"], "t-3");
  EXPECT_EQ(page["next_after"], nullptr);
  page = Body(Send("GET", "/v1/tasks?state=pending,running&limit=1"));
  ASSERT_EQ(page["tasks"].size(), 1u);
  EXPECT_EQ(page["tasks"][0]["id"], "t-1");
  EXPECT_EQ(page["next_after"], "1");
  page = Body(Send("GET", "/v1/tasks?state=succeeded"));
  ASSERT_EQ(page["tasks"].size(), 1u);
  EXPECT_EQ(page["tasks"][0]["id"], "t-2");
  EXPECT_EQ(Send("GET", "/v1/tasks?project=p-9").status, 404);

  r = Send("GET", "/v1/tasks?limit=2");
  page = Body(r);
  ASSERT_EQ(page["tasks"].size(), 2u);
  EXPECT_EQ(page["tasks"][1]["id"], "t-2");
  ASSERT_EQ(page["next_after"], "2");
  r = Send("GET", "/v1/tasks?limit=2&after=2");
  page = Body(r);
  ASSERT_EQ(page["tasks"].size(), 1u);
  EXPECT_EQ(page["tasks"][0]["id"], "t-3");
  EXPECT_EQ(page["next_after"], nullptr);

  // The member sees p-1's tasks; a user of another project none of them.
  EXPECT_EQ(Body(SendRequest(Signed("GET", "/v1/tasks", "", member_)))["tasks"].size(), 3u);
  const server::Caller outsider = server::testing::MakeMember(*c_, admin_, "u-out", "p-out");
  const Credentials out{outsider.access_key, c_->LookupKey(outsider.access_key)->secret};
  EXPECT_TRUE(Body(SendRequest(Signed("GET", "/v1/tasks", "", out)))["tasks"].empty());
  EXPECT_EQ(SendRequest(Signed("GET", "/v1/tasks/t-1", "", out)).status, 404);
}

TEST_F(RoutesTest, ArraysAreSubmittedListedStoppedAndReleasedAsAWhole) {
  HttpResponse r =
      Send("POST", "/v1/arrays",
           "{" + kCmd + R"(,"project":"default","name":"lr","hold":true,"array":"3,1,2%2"})");
  ASSERT_EQ(r.status, 201) << r.body;
  json a = Body(r);
  const std::string id = a["id"];
  EXPECT_EQ(a["array"], "1-3%2");
  EXPECT_EQ(a["limit"], 2);
  ASSERT_EQ(a["tasks"].size(), 3u);
  EXPECT_EQ(a["states"], json::parse(R"([{"state":"pending","count":3}])"));
  json page = Body(Send("GET", "/v1/tasks?array=" + id));
  ASSERT_EQ(page["tasks"].size(), 3u) << "only the array's elements";
  for (int k = 0; k < 3; ++k) {
    const json& t = page["tasks"][static_cast<size_t>(k)];
    EXPECT_EQ(t["id"], a["tasks"][static_cast<size_t>(k)]);
    EXPECT_EQ(t["array_id"], id);
    EXPECT_EQ(t["array_index"], k + 1);
    EXPECT_EQ(t["array_limit"], 2);
    EXPECT_EQ(t["name"], "lr[" + std::to_string(k + 1) + "]");
    EXPECT_EQ(t["held"], true);
  }
  EXPECT_EQ(Body(Send("GET", "/v1/tasks?array=" + id + "&metrics=val_acc"))["metrics"],
            json::array())
      << "no element reported anything yet";
  EXPECT_EQ(Body(Send("GET", "/v1/arrays/" + id)), a);
  a = Body(Send("POST", "/v1/arrays/" + id + "/release"));
  EXPECT_EQ(a["states"], json::parse(R"([{"state":"pending","count":3}])"));
  EXPECT_EQ(Body(Send("GET", "/v1/tasks?array=" + id))["tasks"][0]["held"], false);
  a = Body(Send("POST", "/v1/arrays/" + id + "/stop"));
  EXPECT_EQ(a["states"], json::parse(R"([{"state":"stopped","count":3}])"));
  EXPECT_EQ(Send("GET", "/v1/arrays/a-999").status, 404);
  EXPECT_EQ(SendRequest(Signed("GET", "/v1/arrays/" + id, "", member_)).status, 404)
      << "the admin's array is not in the member's project";
  // Any listing may carry the latest values of some metrics: t-3 reported loss.
  page = Body(Send("GET", "/v1/tasks?state=running&metrics=loss,nothing"));
  EXPECT_EQ(page["metrics"], json::parse(R"([{"task_id":"t-3","values":{"loss":0.25}}])"));
  EXPECT_EQ(Body(Send("GET", "/v1/tasks?state=running"))["metrics"], json::array());
}

TEST_F(RoutesTest, ATasksTokenReadsItsOwnUsageAndMetricsAndNothingElse) {
  const json assigned = Body(Send("GET", "/v1/agent/nodes/n1/assignments"));
  ASSERT_TRUE(assigned["task_tokens"].contains("t-3")) << assigned;
  EXPECT_FALSE(assigned["task_tokens"].contains("t-2")) << "an ended task has none";
  const std::string token = assigned["task_tokens"]["t-3"];
  auto with = [&](const std::string& method, const std::string& target, std::string t) {
    HttpRequest r;
    r.method = method;
    r.target = target;
    r.authorization = "GPUPOOL-TASK " + t;
    return SendRequest(std::move(r));
  };
  HttpResponse r = with("GET", "/v1/tasks/t-3/metrics", token);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["latest"]["loss"], 0.25) << r.body;
  EXPECT_EQ(with("GET", "/v1/tasks/t-3", token).status, 200);
  for (const auto& [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/v1/tasks/t-1/metrics"},
           {"GET", "/v1/tasks/t-1"},
           {"POST", "/v1/tasks/t-3/stop"},
           {"GET", "/v1/tasks"},
           {"GET", "/v1/tasks/t-3/logs"},
           {"GET", "/v1/whoami"},
           {"GET", "/v1/agent/nodes/n1/assignments"}}) {
    r = with(method, target, token);
    EXPECT_EQ(r.status, 403) << method << " " << target << ": " << r.body;
    EXPECT_EQ(Body(r)["error"]["code"], "permission_denied");
  }
  EXPECT_NE(with("POST", "/v1/tasks/t-3/stop", token)
                .body.find("the token of task t-3 reads only that task's usage and metrics"),
            std::string::npos);
  EXPECT_EQ(Get("t-3").state, TaskState::kRunning) << "its stop was refused";
  std::string forged = token;
  forged.back() = forged.back() == '0' ? '1' : '0';
  r = with("GET", "/v1/tasks/t-3/metrics", forged);
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.body.find("not issued by this server"), std::string::npos) << r.body;
  std::string other = token;
  other.replace(other.find("t-3"), 3, "t-1");  // the MAC covers the task id
  EXPECT_EQ(with("GET", "/v1/tasks/t-1/metrics", other).status, 401);
  EXPECT_EQ(with("GET", "/v1/tasks/t-3/metrics", "nonsense").status, 401);

  Report("t-3", TaskState::kSucceeded);
  r = with("GET", "/v1/tasks/t-3/metrics", token);
  EXPECT_EQ(r.status, 401) << "valid only while the task runs that binding";
  EXPECT_NE(r.body.find("task t-3 no longer runs the binding it was issued for"), std::string::npos)
      << r.body;
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
  const Node n = c_->GetNode(admin_, "gpu-7")->info.node;
  EXPECT_EQ(n.name, "gpu-7");
  EXPECT_EQ(n.labels.at("rack"), "r1");
  EXPECT_EQ(n.disk_gib, 3500);
  ASSERT_EQ(n.gpus.size(), 2u);
  EXPECT_EQ(n.gpus[0].uuid, "GPU-a");
  EXPECT_EQ(n.gpus[0].mem_mib, 81920) << "memory comes from the catalog when not given";
  EXPECT_FALSE(n.gpus[0].mig_enabled);
  ASSERT_EQ(n.gpus[1].mig_instances.size(), 2u);
  EXPECT_EQ(n.gpus[1].mig_instances[1].start, 4);
  const json body = Body(r);
  EXPECT_EQ(body["gpus"][1]["mig_instances"][1]["profile"], "1g.10gb");
  // What the console draws and counts without a catalog of its own: each instance's memory
  // slices of the model's slots, and each GPU's free share (MIG: less the instances in use).
  EXPECT_EQ(body["gpus"][1]["mig_memory_slots"], 8);
  EXPECT_EQ(body["gpus"][1]["mig_instances"][0]["memory_slices"], 4);
  EXPECT_EQ(body["gpus"][1]["mig_instances"][1]["memory_slices"], 1);
  EXPECT_EQ(body["gpus"][0]["mig_memory_slots"], 8) << "the model is MIG-capable, not in MIG mode";
  EXPECT_EQ(body["gpus"][0]["milli_free"], 1000);
  EXPECT_EQ(body["gpus"][1]["milli_free"], 1000) << "no instance in use yet";
  EXPECT_EQ(body["status"], "ready");
  EXPECT_EQ(body["disk_gib"], 3500);
}

TEST_F(RoutesTest, PatchProjectKeepsFieldsNotGiven) {
  const HttpResponse r = Send("PATCH", "/v1/projects/p-1", R"({"name":"vision-2"})");
  ASSERT_EQ(r.status, 200) << r.body;
  const Project p = *c_->GetProject(admin_, "p-1");
  EXPECT_EQ(p.name, "vision-2");
  EXPECT_EQ(p.max_gpu_milli, 8000);
  EXPECT_EQ(p.max_tasks, 10);
  EXPECT_EQ(p.stop_grace_ms, 60'000);
  EXPECT_EQ(Body(r)["name"], "vision-2");
}

TEST_F(RoutesTest, NewKeyShowsItsSecretOnceAndListingNever) {
  HttpResponse r = Send("POST", "/v1/users/u-member/keys", "");
  ASSERT_EQ(r.status, 201) << r.body;
  const json created = Body(r);
  const std::string key = created["access_key"];
  const std::string secret = created["secret_key"];
  EXPECT_FALSE(secret.empty());
  EXPECT_EQ(c_->LookupKey(key)->secret, secret) << "the key works with the secret shown";
  r = Send("GET", "/v1/users/u-member/keys");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(Body(r)["keys"].size(), 3u);
  EXPECT_EQ(r.body.find(secret), std::string::npos);
  EXPECT_EQ(r.body.find("secret"), std::string::npos);
  EXPECT_EQ(r.body.find(member_.secret), std::string::npos);
}

TEST_F(RoutesTest, ControlPlaneErrorsMapToStatuses) {
  HttpResponse r = Send("GET", "/v1/tasks/t-99");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Body(r)["error"]["code"], "not_found");
  EXPECT_EQ(Message(r), "task t-99 not found");
  r = Send("DELETE", "/v1/tasks/t-1");
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(Body(r)["error"]["code"], "failed_precondition");
  EXPECT_EQ(Message(r), "task t-1 is pending: stop it before deleting it");
  r = Send("POST", "/v1/projects", R"({"id":"p-1","name":"dup"})");
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(Body(r)["error"]["code"], "already_exists");
  r = Send("PATCH", "/v1/users/u-nobody", R"({"role":"admin"})");
  EXPECT_EQ(r.status, 404);
  r = SendRequest(Signed("POST", "/v1/projects", R"({"id":"p-3"})", member_));
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(Body(r)["error"]["code"], "permission_denied");
  EXPECT_EQ(Message(r), "only an admin may do this");
  r = SendRequest(Signed("POST", "/v1/agent/nodes/n1/heartbeat", "", member_));
  EXPECT_EQ(r.status, 403) << "a member is not an agent";
}

TEST_F(RoutesTest, TheServerHearsWhoAuthenticatedAndTheReserveServesOnlyAgentsAndAdmins) {
  struct Row {
    const char* name;
    HttpRequest request;
    bool reserved;
    int status;
    std::optional<bool> privileged;  // what the HTTP server is told
  };
  const HttpRequest healthz{"GET", "/healthz", "", "", ""};
  const HttpRequest console{"GET", "/index.html", "", "", ""};
  const Row rows[] = {
      {"public", healthz, false, 200, std::nullopt},
      {"member", Signed("GET", "/v1/whoami", "", member_), false, 200, false},
      {"admin", Signed("GET", "/v1/whoami"), false, 200, true},
      {"bad signature", Signed("GET", "/v1/whoami", "", Credentials{admin_key_, "guess"}), false,
       401, std::nullopt},
      {"malformed before the nonce", Signed("GET", "/v1/tasks?limit=x"), false, 400, std::nullopt},
      {"reserved public", healthz, true, 503, std::nullopt},
      {"reserved console", console, true, 503, std::nullopt},
      {"reserved member", Signed("GET", "/v1/whoami", "", member_), true, 503, std::nullopt},
      {"reserved admin", Signed("GET", "/v1/whoami"), true, 200, true},
  };
  for (const Row& row : rows) {
    HttpRequest request = row.request;
    request.reserved = row.reserved;
    auto capture = std::make_shared<Capture>();
    api_->Handle(request, Responder(capture));
    const std::optional<HttpResponse> r = capture->Wait();
    ASSERT_TRUE(r) << row.name;
    EXPECT_EQ(r->status, row.status) << row.name << ": " << r->body;
    EXPECT_EQ(capture->privileged(), row.privileged) << row.name;
    if (row.privileged) {
      EXPECT_EQ(capture->user(), *row.privileged ? "admin" : "u-member") << row.name;
    }
    if (row.status != 503) continue;
    EXPECT_EQ(Body(*r)["error"]["code"], "unavailable") << row.name;
    EXPECT_NE(Message(*r).find("kept for agents and admins"), std::string::npos) << r->body;
    EXPECT_NE(std::find(r->headers.begin(), r->headers.end(),
                        std::pair<std::string, std::string>{"Retry-After", "1"}),
              r->headers.end())
        << row.name;
    if (!row.request.authorization.empty()) {
      EXPECT_FALSE(NonceConsumed(request)) << row.name << ": refused before its nonce";
    }
  }
  EXPECT_EQ(WritesSinceSetUp(), 0u);
}

TEST_F(RoutesTest, AUserPastItsConnectionsIsRefusedAndNothingIsDone) {
  const size_t before = Body(SendRequest(Signed("GET", "/v1/tasks", "", member_)))["tasks"].size();
  auto capture = std::make_shared<Capture>();
  capture->refusal = Error{ErrorCode::kUnavailable, "user u-member has as many connections", 1000};
  api_->Handle(Signed("POST", "/v1/tasks", R"({"command":["true"]})", member_),
               Responder(capture));
  const std::optional<HttpResponse> r = capture->Wait();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_EQ(Message(*r), "user u-member has as many connections");
  EXPECT_EQ(capture->user(), "u-member");
  EXPECT_NE(std::find(r->headers.begin(), r->headers.end(),
                      std::pair<std::string, std::string>{"Retry-After", "1"}),
            r->headers.end());
  const HttpResponse listed = SendRequest(Signed("GET", "/v1/tasks", "", member_));
  EXPECT_EQ(Body(listed)["tasks"].size(), before) << "the refused request created no task";
}

// Keys allowed two signed requests at once, then one a second.
class RateLimitedRoutesTest : public RoutesTest {
 protected:
  RateLimitedRoutesTest() {
    options_.key_rate_per_s = 1;
    options_.key_burst = 2;
  }
};

TEST_F(RateLimitedRoutesTest, PastItsBurstAKeyGets429WithRetryAfterAndMaySendItAgainLater) {
  EXPECT_EQ(Send("GET", "/v1/whoami").status, 200);
  EXPECT_EQ(Send("GET", "/v1/whoami").status, 200);
  const HttpRequest third = Signed("POST", "/v1/tasks", R"({"command":["true"]})");
  HttpResponse r = SendRequest(third);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(Body(r)["error"]["code"], "resource_exhausted");
  EXPECT_EQ(Message(r), "access key " + admin_key_ +
                            " is past its rate of 1 signed requests per second (bursts of 2): "
                            "retry later");
  EXPECT_EQ(r.headers, (std::vector<std::pair<std::string, std::string>>{{"Retry-After", "1"}}));
  EXPECT_EQ(WritesSinceSetUp(), 0u) << "refused before its nonce and its task were written";
  EXPECT_EQ(ErrorCodeOfHttpStatus(429), ErrorCode::kResourceExhausted);

  // Another key has its own bucket.
  EXPECT_EQ(SendRequest(Signed("GET", "/v1/whoami", "", member_)).status, 200);
  // A second later the very same request (its nonce was not kept) is served, once.
  clock_.now_ms += 1000;
  r = SendRequest(third);
  EXPECT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(WritesSinceSetUp(), 2u) << "the nonce, then the task";
  clock_.now_ms += 1000;
  EXPECT_EQ(SendRequest(third).status, 401) << "then it is a replay";
  EXPECT_NE(c_->MetricsText().find("gpupool_api_requests_throttled_total{reason=\"rate\"} 1\n"),
            std::string::npos);
}

// ------------------------------------------------------------------------------------------
// Task files, over a real file store in a temp dir.

// The controller keeps the files (ControllerOptions::task_files), opened before it.
class FileRoutesTest : public RoutesTest {
 protected:
  FileRoutesTest() {
    root_ = dir_ + "/files";
    server::TaskFilesOptions options;
    options.max_task_bytes = 100'000;
    options.max_file_bytes = 50'000;
    auto files = server::DiskTaskFiles::Open(root_, options);
    if (!files) {
      ADD_FAILURE() << files.error().message;
      return;
    }
    files_ = std::move(*files);
    options_.task_files = files_.get();
  }
  void SetUp() override {
    ASSERT_NE(files_, nullptr);
    RoutesTest::SetUp();
  }
  HttpResponse Files(std::string method, std::string target, std::string body = "",
                     std::optional<Credentials> as = std::nullopt) {
    return SendRequest(Signed(std::move(method), std::move(target), std::move(body), as));
  }
  std::string Commit(const std::string& path, const std::string& data) {
    return json{{"path", path}, {"size", data.size()}, {"sha256", os::Sha256Hex(data)}}.dump();
  }

  std::string root_;
  std::unique_ptr<server::DiskTaskFiles> files_;  // the fixture's TearDown stops the controller
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
  EXPECT_EQ(Body(r)["sha256"], os::Sha256Hex(data));

  r = Files("GET", "/v1/tasks/t-1/files");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["type"], "dir");
  EXPECT_EQ(Body(r)["files"], json::parse(R"([{"path":"in/x.bin","size":6000,"sha256":")" +
                                          os::Sha256Hex(data) + R"("}])"));
  r = Files("GET", "/v1/tasks/t-1/files?path=in%2Fx.bin");
  EXPECT_EQ(Body(r)["type"], "file");

  r = Files("GET", "/v1/tasks/t-1/files/content?path=in%2Fx.bin&offset=2990&length=20");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/octet-stream");
  EXPECT_EQ(r.body, data.substr(2990, 20));
  const std::vector<std::pair<std::string, std::string>> headers = {
      {"X-Gpupool-File-Size", "6000"}, {"X-Gpupool-File-Sha256", os::Sha256Hex(data)}};
  EXPECT_EQ(r.headers, headers);
  r = Files("GET", "/v1/tasks/t-1/files/content?path=in%2Fx.bin");
  EXPECT_EQ(r.body, data) << "the whole file when it fits one read";
  r = Files("GET", "/v1/tasks/t-1/files?path=out");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Message(r), "task t-1 has no file or directory 'out'");
}

TEST_F(FileRoutesTest, UsersUploadWhilePendingAndTheNodesAgentWhileItRunsThere) {
  const std::string chunk = "bytes";
  // t-3 runs on n1: a user's calls go to its node's workspace, through the node's tunnel (which
  // n1, without an agent here, does not have; tests/live_files_e2e_test.cc has one).
  HttpResponse r = Files("PUT", "/v1/tasks/t-3/uploads?path=a&offset=0", chunk);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(Message(r),
            "the files of task t-3 on node n1: node n1 has no tunnel: its agent is not connected");
  r = Files("GET", "/v1/tasks/t-3/files?path=out");
  EXPECT_EQ(r.status, 503);
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
  r = Files("PUT", "/v1/tasks/t-3/uploads?path=out2&offset=0&node=n1", chunk, member_);
  EXPECT_EQ(r.status, 403);
  // The server keeps the outputs (downloads read them once the task has ended).
  Result<server::FileChunk> kept = files_->Read("t-3", "out", 0, 100);
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_EQ(kept->bytes, chunk);
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
  const std::string mismatch = "the commit says " + os::Sha256Hex("fake") +
                               ", the 4 bytes received hash to " + os::Sha256Hex("real");
  EXPECT_NE(Message(r).find(mismatch), std::string::npos) << Message(r);
  EXPECT_EQ(Body(Files("GET", "/v1/tasks/t-1/uploads?path=a"))["received"], 0);
}

// Issue 11 finding 3/4: a project's storage quota (PATCH max_storage_bytes) covers all its tasks'
// files and unfinished uploads; past it an upload is 413 at its first chunk, naming the quota.
TEST_F(FileRoutesTest, AProjectsStorageQuotaIs413PastItAtTheFirstChunk) {
  HttpResponse r = Files("PATCH", "/v1/projects/p-1", R"({"max_storage_bytes":100})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["max_storage_bytes"], 100);
  // t-3's agent uploads 60 bytes of outputs; t-1's input of a declared 41 more is refused.
  r = Files("PUT", "/v1/tasks/t-3/uploads?path=out&offset=0&node=n1", std::string(60, 'o'));
  ASSERT_EQ(r.status, 200) << r.body;
  r = Files("PUT", "/v1/tasks/t-1/uploads?path=in&offset=0&size=41", "x");
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_EQ(Body(r)["error"]["code"], "resource_exhausted");
  EXPECT_NE(Message(r).find("project p-1's files would take 101 bytes; its storage quota is 100 "
                            "bytes"),
            std::string::npos)
      << Message(r);
  EXPECT_EQ(Body(Files("GET", "/v1/tasks/t-1/uploads?path=in"))["received"], 0);
  r = Files("PUT", "/v1/tasks/t-1/uploads?path=in&offset=0&size=40", std::string(40, 'i'));
  EXPECT_EQ(r.status, 200) << r.body;
  r = Files("PATCH", "/v1/projects/p-1", R"({"max_storage_bytes":-2})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(Message(r).find("max_storage_bytes"), std::string::npos) << Message(r);
}

TEST_F(FileRoutesTest, DeletingTheTaskDeletesItsFiles) {
  ASSERT_TRUE(files_->Append("t-2", "out", 0, "result", std::nullopt));
  ASSERT_TRUE(files_->Commit("t-2", "out", 6, os::Sha256Hex("result")));
  ASSERT_EQ(Files("GET", "/v1/tasks/t-2/files").status, 200);
  HttpResponse r = Files("DELETE", "/v1/tasks/t-2");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Files("GET", "/v1/tasks/t-2/files").status, 404);
  EXPECT_TRUE(files_->List("t-2", "")->files.empty());
}

TEST_F(FileRoutesTest, UnknownTasksAre404) {
  EXPECT_EQ(Files("GET", "/v1/tasks/t-99/files").status, 404);
}

TEST_F(RoutesTest, AServerWithoutFilesSays503) {
  const HttpResponse r = Send("GET", "/v1/tasks/t-1/files");  // no ControllerOptions::task_files
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(Message(r), "this server keeps no files");
}

// A full disk (issue 11, finding 3), by fault injection: the controller reads the free space
// from the test (ControllerOptions::free_bytes), at most once a second of its clock.
class DiskFullRoutesTest : public FileRoutesTest {
 protected:
  static constexpr int64_t kReserve = 1 << 20;
  DiskFullRoutesTest() {
    options_.free_bytes = [this]() -> Result<int64_t> { return free_.load(); };
    options_.disk_reserve_bytes = kReserve;
  }
  // The disk now has `bytes` free, as the controller sees it from its next reading on.
  void SetFree(int64_t bytes) {
    free_ = bytes;
    clock_.now_ms += 1000;
  }
  std::atomic<int64_t> free_{int64_t{1} << 40};
};

TEST_F(DiskFullRoutesTest, WritesGet507WhileReadsDeletionsAndAgentsGoOnThenTheyResume) {
  SetFree(kReserve - 1);
  const size_t writes = Writes();
  const HttpRequest submit = Signed("POST", "/v1/tasks", "{" + kCmd + "}");
  HttpResponse r = SendRequest(submit);
  ASSERT_EQ(r.status, 507) << r.body;
  EXPECT_EQ(Body(r)["error"]["code"], "insufficient_storage");
  EXPECT_NE(Message(r).find("the server's disk is full: 1048575 bytes free on the file system of "
                            "its data directory, and it keeps 1 MiB in reserve for its "
                            "database; writes are refused until space is freed"),
            std::string::npos)
      << Message(r);
  EXPECT_FALSE(NonceConsumed(submit)) << "refused before anything happened";
  EXPECT_EQ(Send("POST", "/v1/projects", R"({"id":"p-2","name":"two"})").status, 507);
  EXPECT_EQ(Files("PUT", "/v1/tasks/t-1/uploads?path=a&offset=0", "abc").status, 507);
  EXPECT_EQ(Writes(), writes) << "nothing was written";

  EXPECT_EQ(Send("GET", "/v1/tasks").status, 200);
  EXPECT_EQ(Send("GET", "/v1/tasks/t-1").status, 200);
  EXPECT_EQ(Send("GET", "/v1/tasks/t-2/logs").status, 200);
  EXPECT_EQ(Send("POST", "/v1/agent/nodes/n1/heartbeat").status, 200) << "agents go on";
  r = Send("DELETE", "/v1/tasks/t-2");
  EXPECT_EQ(r.status, 200) << "a deletion frees space: " << r.body;

  SetFree(kReserve + (10 << 20));
  r = Send("POST", "/v1/tasks", "{" + kCmd + "}");
  EXPECT_EQ(r.status, 201) << "writes resume by themselves once space is back: " << r.body;
}

TEST_F(DiskFullRoutesTest, AnUploadIsRefusedAtItsStartWhenItsDeclaredSizeWouldEatTheReserve) {
  // Room for the request itself (DiskReserve::kRequestBytes) and 34464 bytes more.
  SetFree(kReserve + server::DiskReserve::kRequestBytes + 34'464);
  HttpResponse r =
      Files("PUT", "/v1/tasks/t-1/uploads?path=a&offset=0&size=40000", std::string(100, 'a'));
  ASSERT_EQ(r.status, 507) << r.body;
  EXPECT_NE(Message(r).find("(40000 bytes more asked for), and it keeps 1 MiB in reserve for "
                            "its database; the upload of 'a' is refused until space is freed"),
            std::string::npos)
      << Message(r);
  SetFree(kReserve + server::DiskReserve::kRequestBytes + 34'464);
  r = Files("PUT", "/v1/tasks/t-1/uploads?path=a&offset=0&size=5000", std::string(100, 'a'));
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(DiskFullRoutesTest, OutputWaitsForSpaceWithTheAgentsOffsetsKept) {
  server::NodeTelemetry batch;
  batch.node = "n1";
  server::TaskTelemetry t3;
  t3.task_id = "t-3";
  t3.bound_ms = Get("t-3").bound_ms;
  t3.output = {{server::OutputStream::kStdout, 0, "step 1\n"}};
  batch.tasks.push_back(t3);
  SetFree(kReserve);
  Result<std::vector<server::OutputOffsets>> offsets = Push(batch);
  ASSERT_TRUE(offsets) << offsets.error().message;
  ASSERT_EQ(offsets->size(), 1u);
  EXPECT_EQ(offsets->at(0).stdout_bytes, 0) << "nothing stored: the agent ships it again";
  EXPECT_FALSE(offsets->at(0).refused);

  SetFree(kReserve + (10 << 20));
  offsets = Push(batch);
  ASSERT_TRUE(offsets) << offsets.error().message;
  EXPECT_EQ(offsets->at(0).stdout_bytes, 7);
  const HttpResponse logs = Send("GET", "/v1/tasks/t-3/logs");
  EXPECT_EQ(Body(logs)["size"], 7) << logs.body;
}

// Issue 11, finding 4: a file that would break a limit is refused at its first chunk, from the
// size it declares, and what it had received is dropped.
TEST_F(FileRoutesTest, AnUploadDeclaringASizeOverTheLimitIsRefusedAtItsFirstChunk) {
  HttpResponse r = Files("PUT", "/v1/tasks/t-1/uploads?path=big&offset=0", std::string(1000, 'b'));
  ASSERT_EQ(r.status, 200) << r.body;
  r = Files("PUT", "/v1/tasks/t-1/uploads?path=big&offset=0&size=50001", std::string(10, 'b'));
  ASSERT_EQ(r.status, 413) << r.body;
  EXPECT_NE(Message(r).find("'big' would be 50001 bytes; the limit is 50000 bytes per file"),
            std::string::npos)
      << Message(r);
  r = Files("GET", "/v1/tasks/t-1/uploads?path=big");
  EXPECT_EQ(Body(r)["received"], 0) << "the refused upload keeps nothing";
  r = Files("PUT", "/v1/tasks/t-1/uploads?path=big&offset=0&size=10", std::string(11, 'b'));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(Message(r).find("ends at byte 11, past the declared size=10"), std::string::npos)
      << Message(r);
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
  EXPECT_EQ(HttpStatusOf(ErrorCode::kInsufficientStorage), 507);
  EXPECT_EQ(HttpStatusOf(ErrorCode::kInternal), 500);
  EXPECT_EQ(ErrorCodeOfHttpStatus(200), std::nullopt);
  EXPECT_EQ(ErrorCodeOfHttpStatus(413), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ErrorCodeOfHttpStatus(429), ErrorCode::kResourceExhausted);
  EXPECT_EQ(ErrorCodeOfHttpStatus(502), ErrorCode::kUnavailable);
  EXPECT_EQ(ErrorCodeOfHttpStatus(507), ErrorCode::kInsufficientStorage);
  EXPECT_EQ(ParseErrorCodeName("insufficient_storage"), ErrorCode::kInsufficientStorage);
  EXPECT_EQ(ParseErrorCodeName("permission_denied"), ErrorCode::kPermissionDenied);
  EXPECT_EQ(ParseErrorCodeName("nope"), std::nullopt);
}

TEST_F(RoutesTest, AWriteIsAnsweredFromTheStoresThreadOnceDurableWithItsNonceBeforeIt) {
  store_->Hold();
  const HttpRequest request = Signed("POST", "/v1/tasks/t-1/stop");
  auto capture = std::make_shared<Capture>();
  api_->Handle(request, Responder(capture));
  const std::vector<store::WriteBatch> held = store_->AwaitHeld(2);
  ASSERT_EQ(held.size(), 2u) << "the nonce's batch and the stop's";
  ASSERT_EQ(held[0].nonces.size(), 1u);
  EXPECT_EQ(held[0].nonces[0].access_key, admin_key_);
  EXPECT_TRUE(held[0].tasks.empty());
  ASSERT_EQ(held[1].tasks.size(), 1u);
  EXPECT_EQ(held[1].tasks[0].id, "t-1");
  EXPECT_EQ(held[1].tasks[0].state, TaskState::kStopped);
  EXPECT_EQ(Get("t-1").state, TaskState::kStopped) << "memory runs ahead of the disk";
  EXPECT_FALSE(capture->has_response()) << "not acknowledged before it is durable";

  store_->Step(1);  // the nonce becomes durable; the stop is still held
  ASSERT_EQ(store_->AwaitHeld(1).size(), 1u);
  EXPECT_FALSE(capture->has_response());
  store_->Release();
  const std::optional<HttpResponse> r = capture->Wait();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Body(*r)["state"], "stopped");
  EXPECT_EQ(capture->sends(), 1);
  EXPECT_NE(capture->thread(), std::this_thread::get_id()) << "sent by the store's writer thread";
  EXPECT_TRUE(NonceDurable(request));
  EXPECT_NE(
      c_->MetricsText().find(
          R"(gpupool_api_request_duration_seconds_count{route="/v1/tasks/{id}/stop",code="200"} 1)"),
      std::string::npos);
}

// ------------------------------------------------------------------------------------------
// Join tokens and the agents' own credentials

INSTANTIATE_TEST_SUITE_P(
    JoinTokens, RouteTest,
    ::testing::Values(RouteRow{"POST", "/v1/join-tokens",
                               R"({"description":"rack 7","expires_in_ms":60000})", 201, 1,
                               "/state", "active"},
                      RouteRow{"GET", "/v1/join-tokens", "", 200, 0, "/join_tokens", json::array()},
                      RouteRow{"DELETE", "/v1/join-tokens/JT1", "", 404, 0, "/error/message",
                               "join token JT1 not found"}));

// The audit log: the fixture's world was made through the controller, so it is in the log.
INSTANTIATE_TEST_SUITE_P(
    Audit, RouteTest,
    ::testing::Values(RouteRow{"GET", "/v1/audit?target=p-1&limit=1", "", 200, 0,
                               "/entries/0/action", "project.create"},
                      RouteRow{"GET", "/v1/audit?actor=nobody", "", 200, 0, "/entries",
                               json::array()}));

INSTANTIATE_TEST_SUITE_P(
    Audit, BadInputTest,
    ::testing::Values(BadInputRow{"GET", "/v1/audit?limit=0", "", "limit must be 1..1000, got 0"},
                      BadInputRow{"GET", "/v1/audit?after=-1", "", "after must be 0..9223372036854775807, got -1"},
                      BadInputRow{"GET", "/v1/audit?actor=a%20b", "", "actor must be 1..128"},
                      BadInputRow{"GET", "/v1/audit?who=me", "", "unknown query parameter 'who'"}));

const std::string kSha = std::string(64, 'a');

INSTANTIATE_TEST_SUITE_P(
    Datasets, BadInputTest,
    ::testing::Values(
        BadInputRow{"POST", "/v1/datasets", R"({"project":"default"})", "name is required"},
        BadInputRow{"PATCH", "/v1/datasets/d-1", "{}", "published is required"},
        BadInputRow{"DELETE", "/v1/datasets/d-1/versions/0", "", "path parameter 'version'"},
        BadInputRow{"DELETE", "/v1/datasets/d-1/versions/x", "", "path parameter 'version'"},
        BadInputRow{"DELETE", "/v1/datasets/d-1/versions/99999999999", "",
                    "path parameter 'version'"},
        BadInputRow{"POST", "/v1/datasets/d-1/chunks/missing", R"({"chunks":["abc"]})",
                    "each of chunks must be a SHA-256"},
        BadInputRow{"PUT", "/v1/datasets/d-1/chunks/ABC", "x", "sha256 must be a SHA-256"},
        BadInputRow{"POST", "/v1/datasets/d-1/versions", R"({"manifest":"00"})",
                    "manifest must be a SHA-256"},
        BadInputRow{"POST", "/v1/datasets/d-1/versions",
                    R"({"manifest":")" + kSha + R"(","files":-1})", "files must be >= 0"},
        BadInputRow{"GET", "/v1/agent/datasets/d-1/chunks/abc", "", "sha256 must be a SHA-256"},
        BadInputRow{"POST", "/v1/agent/nodes/n1/heartbeat", R"({"datasets":["nope"]})",
                    "each of datasets must be a SHA-256"},
        BadInputRow{
            "POST", "/v1/tasks",
            R"({"command":["x"],"datasets":[{"dataset":"a","version":-1,"path":"/root/a"}]})",
            "version must be >= 0"}));

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
  const json created = Body(r);
  const std::string id = created["id"];
  const std::string token = created["token"];
  EXPECT_EQ(token.substr(0, id.size() + 1), id + ".");
  EXPECT_EQ(created["description"], "rack 7");
  EXPECT_EQ(created["created_by"], "admin");
  EXPECT_EQ(created["expires_ms"], kNow + 3'600'000);
  EXPECT_EQ(created["revoked_ms"], 0);
  EXPECT_EQ(created["nodes"], json::array());
  const std::vector<server::JoinTokenView> tokens = *c_->ListJoinTokens(admin_);
  ASSERT_EQ(tokens.size(), 1u);
  EXPECT_EQ(tokens[0].token.id, id);
  EXPECT_EQ(tokens[0].token.description, "rack 7");

  r = Send("GET", "/v1/join-tokens");
  ASSERT_EQ(r.status, 200) << r.body;
  const json list = Body(r)["join_tokens"];
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["id"], id);
  EXPECT_FALSE(list[0].contains("token"));
  EXPECT_EQ(r.body.find(token), std::string::npos);

  clock_.now_ms += 2000;
  r = Send("DELETE", "/v1/join-tokens/" + id);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["state"], "revoked");
  EXPECT_EQ(Body(r)["revoked_ms"], kNow + 2000);
  EXPECT_EQ(r.body.find(token), std::string::npos);
}

TEST_F(RoutesTest, AJoinNeedsNoSignatureAndItsCredentialMayCallOnlyAgentRoutesForItsNode) {
  const std::string token = Body(Send("POST", "/v1/join-tokens", ""))["token"];
  const size_t writes = Writes();

  HttpRequest join{"POST", "/v1/agent/join", "", "", R"({"token":")" + token + R"(","node":"n7"})"};
  HttpResponse r = SendRequest(join);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Writes(), writes + 1) << "the credential, and no nonce";
  const json creds = Body(r);
  EXPECT_EQ(creds["node"], "n7");
  EXPECT_EQ(creds["join_token"], token.substr(0, token.find('.')));
  const Credentials agent{creds["access_key"].get<std::string>(),
                          creds["secret_key"].get<std::string>()};
  ASSERT_FALSE(agent.key.empty());
  ASSERT_FALSE(agent.secret.empty());
  EXPECT_EQ(c_->LookupKey(agent.key)->caller.agent_node, "n7");
  EXPECT_EQ(c_->LookupKey(agent.key)->secret, agent.secret);

  join.body = R"({"token":"JTNOPE.x","node":"n7"})";
  r = SendRequest(join);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(Message(r), "unknown join token JTNOPE");

  // The agent routes reach the controller with the node's agent as the caller: it registers and
  // heartbeats its own node, and may not act for another.
  r = SendRequest(Signed("POST", "/v1/agent/nodes",
                         R"({"name":"n7","cpu_milli":1000,"memory_mib":1024})", agent));
  ASSERT_EQ(r.status, 200) << r.body;
  r = SendRequest(Signed("POST", "/v1/agent/nodes/n7/heartbeat", "", agent));
  ASSERT_EQ(r.status, 200) << r.body;
  r = SendRequest(Signed("POST", "/v1/agent/nodes/n1/heartbeat", "", agent));
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(Message(r),
            "the agent credential of node n7 acts only for that node; it may not heartbeat for "
            "node n1");

  // … everything else is refused before any service call or nonce.
  const size_t before = Writes();
  for (const auto& [method, target] :
       std::vector<std::pair<std::string, std::string>>{{"GET", "/v1/whoami"},
                                                        {"GET", "/v1/tasks"},
                                                        {"GET", "/v1/nodes"},
                                                        {"POST", "/v1/nodes/n1/cordon"},
                                                        {"GET", "/v1/join-tokens"},
                                                        {"DELETE", "/v1/keys/" + agent.key}}) {
    const HttpRequest request = Signed(method, target, "", agent);
    r = SendRequest(request);
    EXPECT_EQ(r.status, 403) << method << " " << target << ": " << r.body;
    EXPECT_EQ(Message(r), "access key " + agent.key +
                              " is the agent credential of node n7: it may call only the agent "
                              "routes (/v1/agent/…)");
    EXPECT_FALSE(NonceConsumed(request)) << method << " " << target;
  }
  EXPECT_EQ(Writes(), before);
  EXPECT_TRUE(c_->GetNode(admin_, "n1")->info.node.schedulable) << "n1 was not cordoned";
  EXPECT_TRUE(c_->LookupKey(agent.key)) << "the key was not revoked";
}

// ------------------------------------------------------------------------------------------
// Telemetry: the agents' batches, task logs, metrics histories, the usage overview

INSTANTIATE_TEST_SUITE_P(
    Telemetry, RouteTest,
    ::testing::Values(RouteRow{"POST", "/v1/agent/nodes/n1/telemetry",
                               R"({"samples":[],"tasks":[]})", 200, 0, "/tasks", json::array()},
                      RouteRow{"GET", "/v1/tasks/t-2/logs", "", 200, 0, "/complete", true},
                      RouteRow{"GET", "/v1/tasks/t-3/metrics", "", 200, 0, "/resolution", "raw"},
                      RouteRow{"GET", "/v1/nodes/n1/metrics", "", 200, 0, "/node", "n1"},
                      RouteRow{"GET", "/v1/usage", "", 200, 0, "/nodes/0/name", "n1"}));

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

// The batch as the telemetry route reads it: decoded strictly, then turned into the control
// plane's input.
Result<server::NodeTelemetry> ParseNodeTelemetry(const json& body, const std::string& node) {
  auto batch = proto::Decode<proto::TelemetryBatch>(body);
  if (!batch) return tl::unexpected(batch.error());
  return FromWire(std::move(*batch), node);
}

TEST(ParseNodeTelemetry, ReadsABatchWithItsOutputChunksRaw) {
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
  const Result<server::NodeTelemetry> parsed = ParseNodeTelemetry(batch, "n1");
  ASSERT_TRUE(parsed) << parsed.error().message;
  const server::NodeTelemetry& got = *parsed;
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

  const server::TaskTelemetry& ended = got.tasks[1];
  EXPECT_TRUE(ended.output_complete);
  EXPECT_EQ(ended.output[1].data, step2 + last) << "the metrics chunk, raw: the server parses it";
}

TEST_F(RoutesTest, ATelemetryBatchReachesTheHistoriesTheOutputAndTheReportedMetrics) {
  const std::string step1 = "{\"step\": 1, \"loss\": 0.5}\n";
  const std::string bad = "not json\n";
  const std::string step2 = "{\"step\": 2}\n";
  const std::string partial = "{\"step\": 3}";
  const std::string metrics = step1 + bad + step2 + partial;
  const auto metrics_at = static_cast<int64_t>(kMetricLine.size());  // t-3's stream so far
  const int64_t at = kNow - 1000;
  const json batch = {
      {"samples",
       {{{"time_ms", at},
         {"cpu_milli", 2000},
         {"memory_mib", 4096},
         {"gpus", {{{"index", 0}, {"util_pct", 30}, {"mem_used_mib", 100}}, {{"index", 1}}}}}}},
      {"tasks",
       {{{"task_id", "t-3"},
         {"bound_ms", Get("t-3").bound_ms},
         {"samples", {{{"time_ms", at}, {"cpu_milli", 700}, {"gpu_util_pct", 100}}}},
         {"output", {Chunk("stdout", 0, "hello\n"), Chunk("metrics", metrics_at, metrics)}}},
        {{"task_id", "t-1"}, {"output", {Chunk("stdout", 0, "not mine\n")}}}}}};
  const HttpResponse r = Send("POST", kTelemetry, batch.dump());
  ASSERT_EQ(r.status, 200) << r.body;

  // The answer: how much of each stream the server holds, and the task that is not n1's.
  const json answer = Body(r);
  std::map<std::string, json> acks;
  for (const json& ack : answer["tasks"]) acks[ack["task_id"]] = ack;
  ASSERT_EQ(acks.size(), 2u) << r.body;
  EXPECT_EQ(acks["t-3"],
            json::parse(R"({"task_id":"t-3","stdout":6,"stderr":0,"metrics":)" +
                        std::to_string(metrics_at + metrics.size()) + R"(,"refused":false})"));
  EXPECT_EQ(acks["t-1"],
            json::parse(R"({"task_id":"t-1","stdout":0,"stderr":0,"metrics":0,"refused":true})"));

  const server::NodeMetrics node =
      *c_->GetNodeMetrics(admin_, "n1", at, kNow, server::Resolution::kRaw);
  ASSERT_EQ(node.usage.size(), 1u);
  EXPECT_EQ(node.usage[0].mean,
            (std::array<int64_t, 4>{2000, 4096, server::kUnknown, server::kUnknown}))
      << "null and absent gauges are unknown";
  ASSERT_EQ(node.gpus.size(), 2u);
  ASSERT_EQ(node.gpus[0].size(), 1u);
  EXPECT_EQ(node.gpus[0][0].mean, (std::array<int64_t, 2>{30, 100}));
  EXPECT_EQ(node.gpus[1][0].mean, (std::array<int64_t, 2>{server::kUnknown, server::kUnknown}));

  const server::TaskMetrics task =
      *AwaitMetrics(*c_, admin_, "t-3", at, kNow, server::Resolution::kRaw);
  ASSERT_EQ(task.usage.size(), 1u);
  EXPECT_EQ(task.usage[0].mean,
            (std::array<int64_t, 4>{700, server::kUnknown, 100, server::kUnknown}));
  // The complete lines only: the bad one skipped, the one being written left for later.
  ASSERT_EQ(task.reported.size(), 3u) << "the line from before, step 1 and step 2";
  EXPECT_EQ(task.reported[1].values, (MetricValues{{"loss", 0.5}, {"step", 1}}));
  EXPECT_EQ(task.reported[2].values, (MetricValues{{"step", 2}}));
  EXPECT_EQ(task.latest.at("step"), 2);
  EXPECT_EQ(task.latest.at("loss"), 0.5);

  const json log = Body(Send("GET", "/v1/tasks/t-3/logs"));
  EXPECT_EQ(Base64Decode(log["data_b64"].get<std::string>()), "hello\n");
  EXPECT_EQ(log["complete"], false) << "t-3 still runs";
}

TEST_F(RoutesTest, TheLogsRouteReadsItsQueryAndRendersTheSlice) {
  HttpResponse r = Send("GET", "/v1/tasks/t-2/logs");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r),
            json::parse(R"({"task_id":"t-2","stream":"stdout","offset":0,"next_offset":)" +
                        std::to_string(kStdoutLog.size()) + R"(,"size":)" +
                        std::to_string(kStdoutLog.size()) + R"(,"data_b64":")" +
                        Base64Encode(kStdoutLog) + R"(","truncated":false,"complete":true})"));

  r = Send("GET", "/v1/tasks/t-2/logs?stream=stderr&offset=8&max_bytes=5&wait_ms=30000");
  ASSERT_EQ(r.status, 200) << r.body;
  json slice = Body(r);
  EXPECT_EQ(slice["stream"], "stderr");
  EXPECT_EQ(slice["offset"], 8);
  EXPECT_EQ(Base64Decode(slice["data_b64"].get<std::string>()), kStderrLog.substr(8, 5));
  EXPECT_EQ(slice["next_offset"], 13);
  EXPECT_EQ(slice["size"], kStderrLog.size());
  EXPECT_EQ(slice["complete"], true) << "a complete task's log is answered without waiting";

  r = Send("GET", "/v1/tasks/t-3/logs?stream=metrics&tail=0");
  ASSERT_EQ(r.status, 200) << r.body;
  slice = Body(r);
  EXPECT_EQ(slice["stream"], "metrics");
  EXPECT_EQ(slice["data_b64"], "");
  EXPECT_EQ(slice["offset"], kMetricLine.size());
  r = Send("GET", "/v1/tasks/t-3/logs?stream=metrics&tail=1");
  EXPECT_EQ(Base64Decode(Body(r)["data_b64"].get<std::string>()), kMetricLine);

  // A follower of t-3's (empty) stdout waits for the next bytes.
  auto follow = std::make_shared<Capture>();
  api_->Handle(Signed("GET", "/v1/tasks/t-3/logs?wait_ms=30000"), Responder(follow));
  EXPECT_FALSE(follow->has_response());
  server::NodeTelemetry more;
  more.node = "n1";
  server::TaskTelemetry t3;
  t3.task_id = "t-3";
  t3.bound_ms = Get("t-3").bound_ms;
  t3.output = {{server::OutputStream::kStdout, 0, "step 1\n"}};
  more.tasks.push_back(t3);
  ASSERT_TRUE(Push(more));
  const std::optional<HttpResponse> followed = follow->Wait();
  ASSERT_TRUE(followed);
  EXPECT_EQ(Base64Decode(Body(*followed)["data_b64"].get<std::string>()), "step 1\n");

  r = Send("GET", "/v1/tasks/t-99/logs");
  EXPECT_EQ(r.status, 404) << "the control plane's error";
  EXPECT_EQ(Message(r), "task t-99 not found");
}

TEST_F(RoutesTest, MetricsRoutesDefaultTheirSpanToTheResolutionsWindow) {
  // What the controller answers for a span, rendered: the route must have asked for that span.
  auto task = [&](int64_t from, int64_t to, server::Resolution res) {
    return proto::Encode(ToWire(*AwaitMetrics(*c_, admin_, "t-3", from, to, res)));
  };
  HttpResponse r = Send("GET", "/v1/tasks/t-3/metrics");
  ASSERT_EQ(r.status, 200) << r.body;
  json m = Body(r);
  EXPECT_EQ(m, task(kNow - 5 * kMinute, kNow, server::Resolution::kRaw))
      << "the last five minutes, raw";
  ASSERT_EQ(m["usage"].size(), 2u) << "the samples of 4 min and 30 s ago, not the one of 6 min";
  EXPECT_EQ(m["task_id"], "t-3");
  EXPECT_EQ(m["resolution"], "raw");
  EXPECT_EQ(m["usage"][1], json::parse(R"({"time_ms":)" + std::to_string(kNow - kMinute / 2) +
                                       R"(,"samples":1,
          "mean":{"cpu_milli":500,"memory_mib":128,"gpu_util_pct":null,"gpu_mem_mib":0},
          "max":{"cpu_milli":500,"memory_mib":128,"gpu_util_pct":null,"gpu_mem_mib":0}})"));
  EXPECT_EQ(m["reported"][0]["values"], json::parse(R"({"loss":0.25})"));
  EXPECT_EQ(m["latest"]["loss"], 0.25);

  r = Send("GET", "/v1/tasks/t-3/metrics?resolution=1m");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r), task(kNow - 24 * 3'600'000, kNow, server::Resolution::kMinute))
      << "the last day, a point a minute";
  EXPECT_EQ(Body(r)["resolution"], "1m");
  EXPECT_FALSE(Body(r)["usage"].empty());
  r = Send("GET", "/v1/tasks/t-3/metrics?from_ms=" + std::to_string(kNow - 7 * kMinute) +
                      "&to_ms=" + std::to_string(kNow - 5 * kMinute) + "&resolution=raw");
  EXPECT_EQ(Body(r), task(kNow - 7 * kMinute, kNow - 5 * kMinute, server::Resolution::kRaw));
  EXPECT_EQ(Body(r)["usage"].size(), 1u) << "only the sample of 6 minutes ago";
  r = Send("GET", "/v1/tasks/t-3/metrics?to_ms=" + std::to_string(kNow - kMinute));
  EXPECT_EQ(Body(r), task(kNow - 6 * kMinute, kNow - kMinute, server::Resolution::kRaw))
      << "the window ends at to_ms";
  EXPECT_EQ(Body(r)["usage"].size(), 2u) << "6 and 4 minutes ago";
  r = Send("GET", "/v1/tasks/t-3/metrics?from_ms=" + std::to_string(kNow - kMinute));
  EXPECT_EQ(Body(r), task(kNow - kMinute, kNow, server::Resolution::kRaw));
  EXPECT_EQ(Body(r)["usage"].size(), 1u) << "30 s ago";

  r = Send("GET", "/v1/nodes/n1/metrics?resolution=1m&from_ms=0");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r), proto::Encode(ToWire(
                         *c_->GetNodeMetrics(admin_, "n1", 0, kNow, server::Resolution::kMinute))));
  EXPECT_EQ(Body(r)["gpus"].size(), 2u);
  r = Send("GET", "/v1/nodes/n1/metrics");
  EXPECT_EQ(Body(r), proto::Encode(ToWire(*c_->GetNodeMetrics(admin_, "n1", kNow - 5 * kMinute,
                                                              kNow, server::Resolution::kRaw))));
  EXPECT_EQ(Body(r)["usage"].size(), 2u);
  r = Send("GET", "/v1/nodes/n9/metrics");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Message(r), "node n9 not found");
}

TEST_F(RoutesTest, TheUsageOverviewRendersNodesAndRunningTasks) {
  const HttpResponse r = SendRequest(Signed("GET", "/v1/usage", "", member_));
  ASSERT_EQ(r.status, 200) << r.body;
  const json usage = Body(r);
  const std::string at = std::to_string(kNow - kMinute / 2);
  ASSERT_EQ(usage["nodes"].size(), 1u);
  EXPECT_EQ(usage["nodes"][0], json::parse(R"({"name":"n1","status":"ready","gpus":2,
      "latest":{"time_ms":)" + at + R"(,"cpu_milli":2000,"memory_mib":4096,"gpu_util_pct":50,
                "gpu_mem_mib":null,
                "gpus":[{"index":0,"util_pct":50,"mem_used_mib":null},
                        {"index":1,"util_pct":50,"mem_used_mib":null}]}})"));
  ASSERT_EQ(usage["tasks"].size(), 1u) << "the running one";
  EXPECT_EQ(usage["tasks"][0], json::parse(R"({"id":"t-3","name":"train","project":"p-1",
      "node":"n1","gpus":)" + json(Get("t-3").placement->gpus).dump() +
                                           R"(,
      "latest":{"time_ms":)" + at + R"(,"cpu_milli":500,"memory_mib":128,"gpu_util_pct":null,
                "gpu_mem_mib":0},
      "reported":{"loss":0.25}})"));
  const server::Caller outsider = server::testing::MakeMember(*c_, admin_, "u-out", "p-out");
  const Credentials out{outsider.access_key, c_->LookupKey(outsider.access_key)->secret};
  EXPECT_TRUE(Body(SendRequest(Signed("GET", "/v1/usage", "", out)))["tasks"].empty())
      << "another project's tasks are not shown";
}

// Held tasks: "hold" on submission, the release route.

TEST_F(RoutesTest, HoldIsParsedStrictlyAndRenderedAsHeld) {
  HttpResponse r = Send("POST", "/v1/tasks", R"({"command":["true"],"hold":true})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_TRUE(Get("t-4").held);
  EXPECT_EQ(Body(r)["held"], true);

  r = Send("POST", "/v1/tasks", R"({"command":["true"]})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_FALSE(Get("t-5").held) << "not held unless asked";
  EXPECT_EQ(Body(r)["held"], false);

  const size_t writes = Writes();
  const HttpRequest bad = Signed("POST", "/v1/tasks", R"({"command":["true"],"hold":"yes"})");
  r = SendRequest(bad);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Message(r), "hold must be a boolean, got string");
  EXPECT_EQ(Writes(), writes);
  EXPECT_FALSE(NonceConsumed(bad)) << "a malformed request does not consume its nonce";
}

TEST_F(RoutesTest, ReleaseTakesNoBodyCallsTheServiceAndRendersTheTask) {
  ASSERT_EQ(Send("POST", "/v1/tasks", R"({"command":["true"],"hold":true})").status, 201);
  const size_t writes = Writes();
  const HttpRequest release = Signed("POST", "/v1/tasks/t-4/release");
  HttpResponse r = SendRequest(release);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(NonceDurable(release)) << "a release is a write";
  EXPECT_EQ(Writes(), writes + 2) << "the nonce, then the release";
  EXPECT_EQ(Body(r)["id"], "t-4");
  EXPECT_EQ(Body(r)["held"], false);
  EXPECT_EQ(Body(r)["reason"], "released by admin");
  EXPECT_FALSE(Get("t-4").held);
  EXPECT_EQ(AwaitTask(*c_, admin_, "t-4")->queue_position, 2) << "queued after t-1";

  r = Send("POST", "/v1/tasks/t-4/release");
  EXPECT_EQ(r.status, 409) << "only a held task can be released";
  EXPECT_EQ(Body(r)["error"]["code"], "failed_precondition");
  EXPECT_EQ(Message(r), "task t-4 is not held: it is already in the queue");
  EXPECT_EQ(Send("POST", "/v1/tasks/t-99/release").status, 404);

  const size_t before = Writes();
  HttpRequest bad = Signed("POST", "/v1/tasks/t-4/release", R"({"now":true})");
  r = SendRequest(bad);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Message(r), "POST /v1/tasks/t-4/release takes no request body (unknown field 'now')");
  EXPECT_FALSE(NonceConsumed(bad));
  bad = Signed("GET", "/v1/tasks/t-4/release");
  r = SendRequest(bad);
  EXPECT_EQ(r.status, 405);
  EXPECT_FALSE(NonceConsumed(bad));
  EXPECT_EQ(Writes(), before);
}

// One blocking-work thread with room for one job.
class SmallExecutorRoutesTest : public RoutesTest {
 protected:
  SmallExecutorRoutesTest() {
    options_.blocking_threads = 1;
    options_.blocking_queue = 1;
  }
};

TEST_F(SmallExecutorRoutesTest, AFullBlockingQueueAnswers503UnavailableInsteadOfABacklog) {
  store_->Hold();
  auto first = std::make_shared<Capture>();
  // Handle returns while the read waits for its barrier: the I/O thread does not wait for it.
  api_->Handle(Signed("GET", "/v1/tasks/t-3/events"), Responder(first));
  ASSERT_EQ(store_->AwaitHeld(1).size(), 1u) << "the read's barrier";
  EXPECT_FALSE(first->has_response());
  const HttpResponse r = Send("GET", "/v1/projects/p-1/ledger");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(Body(r)["error"]["code"], "unavailable");
  EXPECT_NE(Message(r).find("blocking-work queue is full"), std::string::npos) << r.body;
  store_->Release();
  const std::optional<HttpResponse> answered = first->Wait();
  ASSERT_TRUE(answered);
  EXPECT_EQ(answered->status, 200) << answered->body;
  EXPECT_NE(first->thread(), std::this_thread::get_id());
  EXPECT_EQ(Send("GET", "/v1/projects/p-1/ledger").status, 200) << "room again";
}

TEST_F(FileRoutesTest, AHeldStoreWriteDoesNotHoldBackFileReads) {
  ASSERT_EQ(Files("PUT", "/v1/tasks/t-1/uploads?path=a&offset=0", "data").status, 200);
  ASSERT_EQ(Files("POST", "/v1/tasks/t-1/uploads/commit", Commit("a", "data")).status, 200);
  store_->Hold();
  auto stop = std::make_shared<Capture>();
  api_->Handle(Signed("POST", "/v1/tasks/t-3/stop"), Responder(stop));
  ASSERT_EQ(store_->AwaitHeld(2).size(), 2u) << "the stop's nonce and its write";
  const HttpResponse listed = Files("GET", "/v1/tasks/t-1/files");
  EXPECT_EQ(listed.status, 200) << listed.body;
  EXPECT_EQ(Body(listed)["files"].size(), 1u);
  const HttpResponse read = Files("GET", "/v1/tasks/t-1/files/content?path=a");
  EXPECT_EQ(read.body, "data");
  EXPECT_FALSE(stop->has_response()) << "the write is still held";
  store_->Release();
  ASSERT_TRUE(stop->Wait());
}

// ------------------------------------------------------------------------------------------
// Console sessions (docs/api.md "Console sessions")

class SessionRoutesTest : public RoutesTest {
 protected:
  struct Session {
    std::string cookie;  // the gpupool_session cookie's value
    std::string csrf;
  };

  // Logs in with a signed POST /v1/console/sessions; the session, or empty fields (with a test
  // failure) when the login was refused.
  Session Login(const Credentials& as, std::string body = "") {
    const HttpResponse r = SendRequest(Signed("POST", "/v1/console/sessions", body, as));
    EXPECT_EQ(r.status, 201) << r.body;
    if (r.status != 201) return {};
    const std::optional<std::string> set_cookie = HeaderOf(r, "Set-Cookie");
    EXPECT_TRUE(set_cookie);
    const std::string prefix = "gpupool_session=";
    if (!set_cookie || !set_cookie->starts_with(prefix)) return {};
    return {set_cookie->substr(prefix.size(), set_cookie->find(';') - prefix.size()),
            Body(r)["csrf_token"].get<std::string>()};
  }

  // A request of the session: its cookie (among others, as a browser sends them), no signature,
  // and `csrf` as X-CSRF-Token when given.
  HttpRequest OfSession(std::string method, std::string target, const Session& s,
                        std::string csrf = "", std::string body = "") {
    HttpRequest r;
    r.method = std::move(method);
    r.target = std::move(target);
    r.body = std::move(body);
    r.cookie = "theme=dark; gpupool_session=" + s.cookie + "; lang=en";
    r.csrf_token = std::move(csrf);
    return r;
  }

  static std::optional<std::string> HeaderOf(const HttpResponse& r, std::string_view name) {
    for (const auto& [n, v] : r.headers) {
      if (n == name) return v;
    }
    return std::nullopt;
  }
};

TEST_F(SessionRoutesTest, LoginCookieReadsWritesWithTheCsrfTokenOnlyThenLogout) {
  const HttpRequest login = Signed("POST", "/v1/console/sessions", R"({"ttl_s":3600})", member_);
  HttpResponse r = SendRequest(login);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_TRUE(NonceDurable(login)) << "answered once the login's nonce is durable";
  const json session = Body(r);
  EXPECT_EQ(session["user_id"], "u-member");
  EXPECT_EQ(session["access_key"], member_.key);
  EXPECT_EQ(session["role"], "member");
  EXPECT_EQ(session["projects"], json::array({"p-1"}));
  EXPECT_EQ(session["expires_ms"], kNow + 3'600'000);
  const std::string csrf = session["csrf_token"];
  EXPECT_EQ(csrf.size(), 43u) << "256 random bits, base64url";
  const std::optional<std::string> set_cookie = HeaderOf(r, "Set-Cookie");
  ASSERT_TRUE(set_cookie);
  const std::regex cookie_re(
      "gpupool_session=([A-Za-z0-9_-]{43}); Path=/; HttpOnly; SameSite=Strict; Max-Age=3600");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(*set_cookie, m, cookie_re)) << *set_cookie;
  const Session s{m[1], csrf};
  EXPECT_NE(s.cookie, csrf);
  EXPECT_EQ(r.body.find(s.cookie), std::string::npos) << "the cookie is not in the body";
  EXPECT_EQ(HeaderOf(r, "Cache-Control"), "no-store");
  EXPECT_EQ(HeaderOf(r, "Access-Control-Allow-Origin"), std::nullopt) << "no CORS, ever";
  const size_t writes = Writes();

  // Reads need the cookie only, and consume no nonce.
  r = SendRequest(OfSession("GET", "/v1/tasks", s));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["tasks"].size(), 3u);
  r = SendRequest(OfSession("GET", "/v1/console/sessions/current", s));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r), session) << "a reloaded page recovers its CSRF token";
  EXPECT_EQ(Writes(), writes);

  // A write needs the CSRF token as well: without it (or with another) it is refused before
  // anything happens.
  r = SendRequest(OfSession("POST", "/v1/tasks/t-1/stop", s));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(Body(r)["error"]["code"], "permission_denied");
  EXPECT_NE(Message(r).find("missing X-CSRF-Token header"), std::string::npos) << r.body;
  r = SendRequest(OfSession("POST", "/v1/tasks/t-1/stop", s, std::string(43, 'A')));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(Message(r).find("wrong X-CSRF-Token header"), std::string::npos) << r.body;
  EXPECT_EQ(Get("t-1").state, TaskState::kPending);
  EXPECT_EQ(Writes(), writes);
  r = SendRequest(OfSession("POST", "/v1/tasks/t-1/stop", s, csrf));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["state"], "stopped");
  EXPECT_EQ(Writes(), writes + 1) << "the stop itself; a session has no nonce";

  // Logout is a write too; it clears the cookie, and the session is gone.
  r = SendRequest(OfSession("DELETE", "/v1/console/sessions/current", s));
  EXPECT_EQ(r.status, 403) << r.body;
  r = SendRequest(OfSession("DELETE", "/v1/console/sessions/current", s, csrf));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r), json({{"deleted", true}}));
  EXPECT_EQ(HeaderOf(r, "Set-Cookie"),
            "gpupool_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
  for (const char* target : {"/v1/tasks", "/v1/console/sessions/current"}) {
    r = SendRequest(OfSession("GET", target, s));
    EXPECT_EQ(r.status, 401) << target << ": " << r.body;
    EXPECT_EQ(Message(r), "the console session is unknown or expired: log in again") << target;
  }
}

TEST_F(SessionRoutesTest, ASessionExpiresAtItsTtl) {
  const Session s = Login(member_, R"({"ttl_s":60})");
  clock_.now_ms = kNow + 59'999;
  EXPECT_EQ(SendRequest(OfSession("GET", "/v1/whoami", s)).status, 200);
  clock_.now_ms = kNow + 60'000;
  const HttpResponse r = SendRequest(OfSession("GET", "/v1/whoami", s));
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(Message(r), "the console session is unknown or expired: log in again");
  // The default lifetime is twelve hours.
  clock_.now_ms = kNow;
  const HttpResponse fresh = SendRequest(Signed("POST", "/v1/console/sessions", "", member_));
  ASSERT_EQ(fresh.status, 201) << fresh.body;
  EXPECT_EQ(Body(fresh)["expires_ms"], kNow + 12 * 3'600'000);
  EXPECT_NE(HeaderOf(fresh, "Set-Cookie")->find("; Max-Age=43200"), std::string::npos);
}

TEST_F(SessionRoutesTest, RevokingTheKeyEndsItsSessionsAndAChangedUserShowsAtOnce) {
  const Session a = Login(member_);
  const Session b = Login(member_);
  const Session admins = Login(admin_creds_);
  HttpResponse r = SendRequest(Signed("PATCH", "/v1/users/u-member", R"({"projects":[]})"));
  ASSERT_EQ(r.status, 200) << r.body;
  r = SendRequest(OfSession("GET", "/v1/console/sessions/current", a));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["projects"], json::array()) << "the key is looked up on every request";
  EXPECT_EQ(Body(SendRequest(OfSession("GET", "/v1/tasks", a)))["tasks"], json::array());

  r = SendRequest(Signed("DELETE", "/v1/keys/" + member_.key));
  ASSERT_EQ(r.status, 200) << r.body;
  for (const Session* s : {&a, &b}) {
    r = SendRequest(OfSession("GET", "/v1/tasks", *s));
    EXPECT_EQ(r.status, 401) << r.body;
    EXPECT_EQ(Message(r), "the console session ended: access key " + member_.key +
                              " was revoked; log in again");
    r = SendRequest(OfSession("GET", "/v1/tasks", *s));
    EXPECT_EQ(r.status, 401) << "and stays gone: " << r.body;
    EXPECT_EQ(Message(r),
              "the console session ended: access key " + member_.key + " was revoked; log in again")
        << "every request of it is told why (the page sends several at once), not only the first";
  }
  EXPECT_EQ(SendRequest(OfSession("GET", "/v1/tasks", admins)).status, 200)
      << "another key's session lives on";
}

TEST_F(SessionRoutesTest, ASessionSeesExactlyWhatItsKeySees) {
  Project p2{"p-2", "nlp", -1, -1, 0, 0};
  ASSERT_TRUE(Await<Project>([&](server::Done<Project> d) { c_->CreateProject(admin_, p2, d); }));
  User other{"u-other", "Otto", Role::kMember, {"p-2"}, 0, {}};
  ASSERT_TRUE(Await<User>([&](server::Done<User> d) { c_->CreateUser(admin_, other, d); }));
  const Session s = Login(NewKey("u-other"));

  HttpResponse r = SendRequest(OfSession("GET", "/v1/tasks/t-1", s));
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(Message(r), "task t-1 not found") << "the same answer as for a task that never was";
  r = SendRequest(OfSession("GET", "/v1/tasks", s));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["tasks"], json::array());
  r = SendRequest(OfSession("POST", "/v1/tasks/t-1/stop", s, s.csrf));
  EXPECT_EQ(r.status, 404) << r.body;
  r = SendRequest(OfSession("GET", "/v1/users", s));
  EXPECT_EQ(r.status, 403) << "admin routes stay the admins': " << r.body;
  r = SendRequest(
      OfSession("POST", "/v1/tasks", s, s.csrf, R"({"project":"p-2","command":["true"]})"));
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Body(r)["project"], "p-2");
  EXPECT_EQ(Body(r)["user"], "u-other");
  EXPECT_EQ(AwaitList(*c_, admin_, server::TaskFilter{})->tasks.size(), 4u);
}

TEST_F(SessionRoutesTest, WhoMayLogInAndHow) {
  const std::string token = Body(Send("POST", "/v1/join-tokens", ""))["token"];
  HttpResponse r = SendRequest(
      HttpRequest{"POST", "/v1/agent/join", "", "", R"({"token":")" + token + R"(","node":"n7"})"});
  ASSERT_EQ(r.status, 201) << r.body;
  const Credentials agent{Body(r)["access_key"].get<std::string>(),
                          Body(r)["secret_key"].get<std::string>()};
  const HttpRequest agent_login = Signed("POST", "/v1/console/sessions", "", agent);
  r = SendRequest(agent_login);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(HeaderOf(r, "Set-Cookie"), std::nullopt);
  EXPECT_FALSE(NonceConsumed(agent_login));

  // A session cannot open another one, nor can an unsigned request; the session routes take
  // the cookie only.
  const Session s = Login(member_);
  r = SendRequest(OfSession("POST", "/v1/console/sessions", s, s.csrf));
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_NE(Message(r).find("missing Authorization header"), std::string::npos) << r.body;
  r = SendRequest(Signed("GET", "/v1/console/sessions/current", "", member_));
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_NE(Message(r).find("the gpupool_session cookie is missing"), std::string::npos);

  // With an Authorization header the signature decides, whatever the cookie.
  HttpRequest both = Signed("GET", "/v1/whoami", "", Credentials{member_.key, "wrong"});
  both.cookie = "gpupool_session=" + s.cookie;
  r = SendRequest(both);
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_NE(Message(r).find("signature does not match"), std::string::npos) << r.body;
  // An unknown cookie is no session.
  r = SendRequest(OfSession("GET", "/v1/whoami", Session{std::string(43, 'x'), ""}));
  EXPECT_EQ(r.status, 401) << r.body;
}

TEST_F(SessionRoutesTest, ALoginIsAnsweredOnlyOnceItsNonceIsDurable) {
  store_->Hold();
  const HttpRequest login = Signed("POST", "/v1/console/sessions", "", member_);
  auto capture = std::make_shared<Capture>();
  api_->Handle(login, Responder(capture));
  const std::vector<store::WriteBatch> held = store_->AwaitHeld(2);
  ASSERT_EQ(held.size(), 2u) << "the nonce's batch and the barrier behind it";
  ASSERT_EQ(held[0].nonces.size(), 1u);
  EXPECT_FALSE(capture->has_response()) << "a replay after a crash must find the nonce";
  store_->Release();
  const std::optional<HttpResponse> r = capture->Wait();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201) << r->body;
  EXPECT_NE(capture->thread(), std::this_thread::get_id()) << "sent by the store's writer thread";
}

INSTANTIATE_TEST_SUITE_P(
    Sessions, BadInputTest,
    ::testing::Values(
        BadInputRow{"POST", "/v1/console/sessions", R"({"ttl_s":59})", "ttl_s must be 60..604800"},
        BadInputRow{"POST", "/v1/console/sessions", R"({"ttl_s":604801})",
                    "ttl_s must be 60..604800"},
        BadInputRow{"POST", "/v1/console/sessions", R"({"ttl":60})", "unknown field 'ttl'"},
        BadInputRow{"POST", "/v1/console/sessions?ttl_s=60", "", "ttl_s"}));

// Sessions past the per-key cap push out the key's oldest.
class SessionCapRoutesTest : public SessionRoutesTest {
 protected:
  SessionCapRoutesTest() { options_.max_sessions_per_key = 2; }
};

TEST_F(SessionCapRoutesTest, TheOldestSessionOfAKeyGoesPastTheCap) {
  const Session first = Login(member_), second = Login(member_), third = Login(member_);
  const Session admins = Login(admin_creds_);
  EXPECT_EQ(SendRequest(OfSession("GET", "/v1/whoami", first)).status, 401);
  for (const Session* s : {&second, &third, &admins}) {
    EXPECT_EQ(SendRequest(OfSession("GET", "/v1/whoami", *s)).status, 200);
  }
}

// The console's files: GET and HEAD outside the API go to ApiOptions::console, the rest as
// before.
class ConsoleRoutesTest : public RoutesTest {
 protected:
  void SetUp() override {
    RoutesTest::SetUp();
    if (HasFatalFailure()) return;
    ApiOptions options{[this] { return clock_.now_ms.load(); }};
    options.console = [](const HttpRequest& request) {
      HttpResponse r;
      r.content_type = "text/html";
      r.body = "console: " + request.method + " " + request.target;
      return r;
    };
    api_ = std::make_unique<Api>(server::Services::Of(*c_), std::move(options));
  }
};

TEST_F(ConsoleRoutesTest, PagesOutsideTheApiGoToTheConsoleUnsignedAndAreCounted) {
  for (const char* target : {"/", "/tasks/t-12?tab=logs", "/assets/app-1.js", "/metricsx"}) {
    for (const char* method : {"GET", "HEAD"}) {
      const HttpResponse r = SendRequest(HttpRequest{method, target, "", "", ""});
      EXPECT_EQ(r.status, 200) << method << " " << target;
      EXPECT_EQ(r.body, std::string("console: ") + method + " " + target);
    }
  }
  EXPECT_NE(c_->MetricsText().find(
                R"s(gpupool_api_request_duration_seconds_count{route="(console)",code="200"} 8)s"),
            std::string::npos)
      << c_->MetricsText();
  // The API's own paths keep their answers; other methods are no page.
  EXPECT_EQ(SendRequest(HttpRequest{"GET", "/healthz", "", "", ""}).status, 200);
  EXPECT_EQ(SendRequest(HttpRequest{"GET", "/metrics", "", "", ""}).content_type,
            "text/plain; version=0.0.4");
  EXPECT_EQ(Message(SendRequest(HttpRequest{"GET", "/v1/nope", "", "", ""})),
            "no route for GET /v1/nope");
  EXPECT_EQ(Message(SendRequest(HttpRequest{"POST", "/tasks", "", "", ""})),
            "no route for POST /tasks");
}

}  // namespace
}  // namespace gpupool::api
