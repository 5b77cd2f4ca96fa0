// Tests of the wire contract's machinery: the strict decoder (messages name the field), the
// encoder (round trips, nulls), the query codec, the schemas the descriptions generate, and that
// the names the API speaks agree with core's enums.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/chunker.h"
#include "core/records.h"
#include "core/result.h"
#include "proto/events.h"
#include "proto/exec.h"
#include "proto/json_codec.h"
#include "proto/openapi.h"
#include "proto/operations.h"
#include "proto/query_codec.h"
#include "proto/schema.h"
#include "proto/snapshots.h"

namespace gpupool::proto {
namespace {

template <typename T>
std::string DecodeError(std::string_view body) {
  Result<T> r = DecodeBody<T>(body, /*required=*/true);
  EXPECT_FALSE(r) << body;
  return r ? "" : r.error().message;
}

struct DecodeErrorRow {
  std::string body;
  std::string expect;
};

class NodeRegistrationErrors : public ::testing::TestWithParam<DecodeErrorRow> {};

TEST_P(NodeRegistrationErrors, NameTheField) {
  EXPECT_EQ(DecodeError<NodeRegistration>(GetParam().body), GetParam().expect);
}

INSTANTIATE_TEST_SUITE_P(
    Decoder, NodeRegistrationErrors,
    ::testing::Values(
        DecodeErrorRow{R"({"cpu_milli":1,"memory_mib":1})", "name is required"},
        DecodeErrorRow{R"({"name":"n","cpu_milli":1,"memory_mib":1,"x":1})", "unknown field 'x'"},
        DecodeErrorRow{R"({"name":"n 1","cpu_milli":1,"memory_mib":1})",
                       "name must be 1..128 characters of A-Z a-z 0-9 - _ ., got 'n 1'"},
        DecodeErrorRow{R"({"name":"n","cpu_milli":0,"memory_mib":1})",
                       "cpu_milli must be >= 1, got 0"},
        DecodeErrorRow{R"({"name":"n","cpu_milli":1.5,"memory_mib":1})",
                       "cpu_milli must be an integer, got number 1.5"},
        DecodeErrorRow{R"({"name":"n","cpu_milli":1,"memory_mib":1,"gpus":{}})",
                       "gpus must be an array, got object"},
        DecodeErrorRow{R"({"name":"n","cpu_milli":1,"memory_mib":1,"gpus":[7]})",
                       "gpus[0] must be an object, got number"},
        DecodeErrorRow{R"({"name":"n","cpu_milli":1,"memory_mib":1,"gpus":[{"modle":"T4"}]})",
                       "unknown field 'gpus[0].modle'"},
        DecodeErrorRow{R"({"name":"n","cpu_milli":1,"memory_mib":1,"gpus":[{"model":"T4",
                           "mig_instances":[{"profile":"1g","start":64}]}]})",
                       "gpus[0].mig_instances[0].start must be 0..63, got 64"},
        DecodeErrorRow{R"({"name":"n","cpu_milli":1,"memory_mib":1,"labels":{"z":1}})",
                       "labels.z must be a string, got number"},
        DecodeErrorRow{R"({"name":"n","cpu_milli":1,"memory_mib":1,"labels":{"":"a"}})",
                       "labels.: keys are 1..256 bytes"}));

TEST(Decoder, ThirtyTwoBitFieldsSayTheirWidth) {
  EXPECT_EQ(DecodeError<TaskSubmit>(R"({"command":["x"],"gpu_count":3000000000})"),
            "gpu_count is out of range for a 32-bit integer, got 3000000000");
  EXPECT_EQ(DecodeError<TaskSubmit>(R"({"command":["x"],"cpu_milli":9223372036854775808})"),
            "cpu_milli is out of range for a 64-bit integer, got 9223372036854775808");
}

TEST(Decoder, RequireOneOfComesBeforeTheFields) {
  EXPECT_EQ(DecodeError<TaskSubmit>(R"({"name":"x","gpu_count":"two"})"),
            "command or image is required");
}

TEST(Decoder, ClosedSetsListTheirValues) {
  EXPECT_EQ(DecodeError<UserPatch>(R"({"role":"root"})"),
            "role must be admin or member, got 'root'");
  EXPECT_EQ(DecodeError<TaskReport>(R"({"state":"runing"})"),
            "state must be pending, scheduled, starting, running, succeeded, failed, stopped, "
            "preempted or lost, got 'runing'");
}

TEST(Decoder, OptionalFieldsKnowWhetherTheyWereGiven) {
  Result<ProjectPatch> p = DecodeBody<ProjectPatch>(R"({"max_tasks":0})", true);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_FALSE(p->name.has_value());
  EXPECT_FALSE(p->max_gpu_milli.has_value());
  ASSERT_TRUE(p->max_tasks.has_value());
  EXPECT_EQ(*p->max_tasks, 0);
  // null is a value only where the field is nullable.
  EXPECT_EQ(DecodeError<ProjectPatch>(R"({"max_tasks":null})"),
            "max_tasks must be an integer, got null");
  Result<UsageSample> s = DecodeBody<UsageSample>(R"({"time_ms":5,"cpu_milli":null})", true);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_FALSE(s->cpu_milli.has_value());
}

TEST(Decoder, Base64FieldsAreChecked) {
  EXPECT_EQ(DecodeError<OutputChunk>(R"({"stream":"stdout","offset":0,"data_b64":"*"})"),
            "data_b64 is not valid base64");
}

TEST(Decoder, AClientIgnoresFieldsANewerServerAdds) {
  const Json answer = {{"project", "p"}, {"balance_micros", 5}, {"currency", "EUR"}};
  EXPECT_FALSE(Decode<BalanceView>(answer));
  Result<BalanceView> lenient = Decode<BalanceView>(answer, UnknownFields::kIgnore);
  ASSERT_TRUE(lenient) << lenient.error().message;
  EXPECT_EQ(lenient->balance_micros, 5);
  // … and a value a newer server added to a closed set.
  const Json error = {{"error", {{"code", "quota_exceeded"}, {"message", "over quota"}}}};
  EXPECT_FALSE(Decode<ErrorBody>(error));
  Result<ErrorBody> body = Decode<ErrorBody>(error, UnknownFields::kIgnore);
  ASSERT_TRUE(body) << body.error().message;
  EXPECT_EQ(body->error.code, "quota_exceeded");
  EXPECT_EQ(body->error.message, "over quota");
}

TEST(Encoder, RoundTripsEveryFieldKind) {
  TaskDetail t;
  t.id = "t-7";
  t.state = "running";
  t.command = {"python3", "-c", "print(1)"};
  t.placement = Placement{"n1", {0, 3}, 1000, 0, std::nullopt, std::nullopt};
  t.queue_position = 2;
  t.pending_nodes = {{"no GPU", 4}};
  const Json j = Encode(t);
  EXPECT_EQ(j["placement"]["mig_profile"], nullptr);  // nullable: present as null
  EXPECT_EQ(j["pending_nodes"][0]["count"], 4);
  Result<TaskDetail> back = Decode<TaskDetail>(j);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(Encode(*back), j);

  NodeMetrics m;
  m.resolution = "1m";
  m.gpus = {{GpuPoint{}}, {}};
  m.gpus[0][0].mean.util_pct = 40;
  Result<NodeMetrics> mback = Decode<NodeMetrics>(Encode(m));
  ASSERT_TRUE(mback) << mback.error().message;
  ASSERT_EQ(mback->gpus.size(), 2u);
  EXPECT_EQ(mback->gpus[0][0].mean.util_pct, 40);
  EXPECT_FALSE(mback->gpus[0][0].max.util_pct.has_value());
}

TEST(Encoder, LeavesOutUnsetOptionalsThatAreNotNullable) {
  TaskSubmit s;
  s.command = {"true"};
  const Json j = Encode(s);
  EXPECT_FALSE(j.contains("project"));  // the caller's only project applies
  EXPECT_TRUE(j.contains("gpu_count"));
  Result<TaskSubmit> back = Decode<TaskSubmit>(j);
  ASSERT_TRUE(back) << back.error().message;
}

TEST(Query, DecodesStrictly) {
  Result<TaskListQuery> q =
      DecodeQuery<TaskListQuery>({{"state", "running,pending"}, {"limit", "5"}});
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_EQ(q->state, (std::vector<std::string>{"running", "pending"}));
  EXPECT_EQ(q->limit, 5);
  EXPECT_FALSE(q->after.has_value());

  auto error = [](QueryPairs pairs) {
    Result<TaskListQuery> r = DecodeQuery<TaskListQuery>(pairs);
    return r ? std::string() : r.error().message;
  };
  EXPECT_EQ(error({{"limt", "5"}}), "unknown query parameter 'limt'");
  EXPECT_EQ(error({{"limit", "5"}, {"limit", "6"}}), "query parameter 'limit' is given twice");
  EXPECT_EQ(error({{"limit", "abc"}}), "limit must be an integer, got 'abc'");
  EXPECT_EQ(error({{"limit", "0"}}), "limit must be 1..1000, got 0");
  EXPECT_EQ(error({{"limit", "99999999999999999999"}}),
            "limit must be 1..1000, got 99999999999999999999");
  EXPECT_NE(error({{"state", "running,runing"}}).find("got 'runing'"), std::string::npos);
  EXPECT_EQ(error({{"node", "a b"}}),
            "node must be 1..128 characters of A-Z a-z 0-9 - _ ., got 'a b'");

  Result<UploadChunkQuery> upload = DecodeQuery<UploadChunkQuery>({{"path", "a"}});
  ASSERT_FALSE(upload);
  EXPECT_EQ(upload.error().message, "offset is required");
}

TEST(Query, EncodesWhatIsSet) {
  TaskListQuery q;
  q.state = {"running", "failed"};
  q.after = "12";
  EXPECT_EQ(EncodeQuery(q),
            (QueryPairs{{"state", "running,failed"}, {"limit", "100"}, {"after", "12"}}));
}

TEST(Names, AgreeWithCoreEnums) {
  for (size_t i = 0; i < std::size(kTaskStates); ++i) {
    EXPECT_EQ(TaskStateName(static_cast<TaskState>(i)), kTaskStates[i]);
  }
  EXPECT_EQ(RoleName(Role::kAdmin), kRoles[0]);
  EXPECT_EQ(RoleName(Role::kMember), kRoles[1]);
  EXPECT_EQ(NodeStatusName(NodeStatus::kReady), kNodeStatuses[0]);
  EXPECT_EQ(NodeStatusName(NodeStatus::kLost), kNodeStatuses[1]);
  EXPECT_EQ(LedgerKindName(LedgerKind::kCredit), kLedgerKinds[0]);
  EXPECT_EQ(LedgerKindName(LedgerKind::kUsage), kLedgerKinds[1]);
  for (ErrorCode code :
       {ErrorCode::kInvalidArgument, ErrorCode::kNotFound, ErrorCode::kAlreadyExists,
        ErrorCode::kFailedPrecondition, ErrorCode::kResourceExhausted, ErrorCode::kUnauthenticated,
        ErrorCode::kPermissionDenied, ErrorCode::kUnavailable, ErrorCode::kInternal}) {
    EXPECT_NE(std::find(std::begin(kErrorCodes), std::end(kErrorCodes), ErrorCodeName(code)),
              std::end(kErrorCodes))
        << ErrorCodeName(code);
  }
}

TEST(Schema, StatesTheRulesTheDecoderApplies) {
  SchemaRegistry registry;
  EXPECT_EQ(registry.Ref<TaskSubmit>(), Json({{"$ref", "#/components/schemas/TaskSubmit"}}));
  const Json& submit = registry.schemas()["TaskSubmit"];
  EXPECT_EQ(submit["additionalProperties"], false);
  EXPECT_EQ(submit["anyOf"], Json::parse(R"([{"required":["command"]},{"required":["image"]}])"));
  EXPECT_EQ(submit["properties"]["disk_gib"]["minimum"], 0);
  EXPECT_EQ(submit["properties"]["gpu_count"]["format"], "int32");
  EXPECT_EQ(submit["properties"]["project"]["pattern"], "^(?!\\.{1,2}$)[A-Za-z0-9._-]{1,128}$");
  EXPECT_EQ(submit["properties"]["command"]["maxItems"], 4096);

  registry.Ref<TaskDetail>();
  const Json& detail = registry.schemas()["TaskDetail"];
  EXPECT_FALSE(detail.contains("additionalProperties"));  // answers may grow
  const Json& required = detail["required"];
  for (const char* name : {"id", "state", "placement", "queue_position", "pending_nodes"}) {
    EXPECT_NE(std::find(required.begin(), required.end(), name), required.end()) << name;
  }
  EXPECT_EQ(detail["properties"]["placement"]["anyOf"][1], Json({{"type", "null"}}));
  EXPECT_EQ(detail["properties"]["state"]["enum"].size(), std::size(kTaskStates));
  EXPECT_TRUE(registry.schemas().contains("Placement"));
}

TEST(OpenApi, ListsTheLimitsRefusalsWhereTheyApply) {
  const Json doc = OpenApiDocument();
  const Json& paths = doc["paths"];
  const auto refusals = [&](const char* path, const char* method) {
    std::set<std::string> out;
    for (const auto& [status, response] : paths[path][method]["responses"].items()) {
      if (response.contains("$ref")) out.insert(status);
    }
    return out;
  };
  // Signed writes meet all three; public reads only the connection limits; signed reads no disk.
  EXPECT_EQ(refusals("/v1/tasks", "post"), (std::set<std::string>{"429", "503", "507"}));
  EXPECT_EQ(refusals("/healthz", "get"), (std::set<std::string>{"503"}));
  EXPECT_EQ(refusals("/v1/tasks", "get"), (std::set<std::string>{"429", "503"}));
  // A full disk leaves deletions and the agents' calls alone, as the routes do.
  EXPECT_EQ(refusals("/v1/tasks/{id}", "delete"), (std::set<std::string>{"429", "503"}));
  EXPECT_EQ(refusals("/v1/agent/nodes/{name}/heartbeat", "post"),
            (std::set<std::string>{"429", "503"}));
  const Json& too_many = doc["components"]["responses"]["TooManyRequests"];
  EXPECT_EQ(too_many["headers"]["Retry-After"]["$ref"], "#/components/headers/RetryAfter");
  EXPECT_NE(too_many["description"].get<std::string>().find("--key-rate"), std::string::npos);
  EXPECT_FALSE(doc["components"]["responses"]["InsufficientStorage"].contains("headers"));
}

TEST(OpenApi, HasEveryOperationOnce) {
  const Json doc = OpenApiDocument();
  EXPECT_EQ(doc["openapi"], "3.1.0");
  size_t operations = 0;
  std::set<std::string> ids;
  for (const auto& [path, methods] : doc["paths"].items()) {
    for (const auto& [method, op] : methods.items()) {
      ++operations;
      EXPECT_TRUE(ids.insert(op["operationId"].get<std::string>()).second) << op["operationId"];
      EXPECT_TRUE(op["responses"].contains("default")) << method << " " << path;
      // Every $ref resolves: a schema, a shared response, or a header.
      const std::string text = op.dump() + doc["components"]["responses"].dump();
      for (size_t at = text.find("#/components/"); at != std::string::npos;
           at = text.find("#/components/", at + 1)) {
        const size_t kind_at = at + 13;
        const size_t slash = text.find('/', kind_at);
        const size_t end = text.find('"', at);
        const std::string kind = text.substr(kind_at, slash - kind_at);
        const std::string name = text.substr(slash + 1, end - slash - 1);
        EXPECT_TRUE(doc["components"][kind].contains(name)) << kind << "/" << name;
      }
    }
  }
  EXPECT_EQ(operations, std::tuple_size_v<ops::All>);
  const Json& submit = doc["paths"]["/v1/tasks"]["post"];
  EXPECT_EQ(submit["responses"]["201"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/Task");
  EXPECT_EQ(doc["paths"]["/healthz"]["get"]["security"], Json::array());
  const Json& logs = doc["paths"]["/v1/tasks/{id}/logs"]["get"]["parameters"];
  EXPECT_EQ(logs[0]["name"], "id");
  EXPECT_EQ(logs[0]["in"], "path");
  EXPECT_EQ(logs[1]["name"], "stream");
  EXPECT_EQ(logs[1]["schema"]["enum"].size(), 3u);
}

TEST(Events, AFrameIsTheNameAndOneLineOfJson) {
  EXPECT_EQ(EventFrame<events::Hello>({1700000000000}),
            "event: hello\ndata: {\"time_ms\":1700000000000}\n\n");
  // A line break in a value stays escaped inside the one data line.
  const std::string frame = EventFrame<events::TaskDeleted>({"a\nb", true});
  EXPECT_EQ(frame, "event: task_deleted\ndata: {\"deleted\":true,\"id\":\"a\\nb\"}\n\n");
  EXPECT_EQ(kKeepAliveFrame, ": keep-alive\n\n");
}

TEST(OpenApi, TheEventStreamListsEveryEventWithItsPayloadSchema) {
  const Json doc = OpenApiDocument();
  const Json& content = doc["paths"]["/v1/events"]["get"]["responses"]["200"]["content"];
  ASSERT_TRUE(content.contains("text/event-stream")) << content.dump();
  const Json& listed = content["text/event-stream"]["x-gpupool-events"];
  EXPECT_EQ(listed.size(), std::tuple_size_v<events::All>);
  ForEachEvent([&]<typename E>() {
    const std::string name(E::kInfo.name);
    ASSERT_TRUE(listed.contains(name)) << name;
    EXPECT_EQ(listed[name]["schema"]["$ref"],
              "#/components/schemas/" + std::string(E::Data::kName));
    EXPECT_TRUE(doc["components"]["schemas"].contains(std::string(E::Data::kName))) << name;
  });
  EXPECT_EQ(listed["task"]["schema"]["$ref"], "#/components/schemas/Task");  // the wire Task
  EXPECT_EQ(listed["node"]["schema"]["$ref"], "#/components/schemas/Node");
}

// Exec frames: what one side encodes the other reads back, however the bytes are split; an
// unknown channel or a payload over the limit is refused, naming it.
TEST(ExecFrames, RoundTripInAnyPiecesAndRefuseWhatIsOutOfBounds) {
  const std::string big(kMaxExecPayload, 'x');
  const std::string wire = EncodeExecFrame(ExecChannel::kStart, R"({"command":["true"]})") +
                           EncodeExecFrame(ExecChannel::kStdin, "") +
                           EncodeExecFrame(ExecChannel::kStdout, big);
  for (size_t piece : {size_t{1}, size_t{3}, size_t{4096}, wire.size()}) {
    ExecFrameReader reader;
    std::vector<ExecFrame> frames;
    for (size_t at = 0; at < wire.size(); at += piece) {
      reader.Feed(std::string_view(wire).substr(at, piece));
      while (auto frame = reader.Next()) {
        ASSERT_TRUE(*frame) << (*frame).error().message;
        frames.push_back(**frame);
      }
    }
    ASSERT_EQ(frames.size(), 3u) << "pieces of " << piece;
    EXPECT_EQ(frames[0].channel, ExecChannel::kStart);
    EXPECT_EQ(frames[0].payload, R"({"command":["true"]})");
    EXPECT_EQ(frames[1].channel, ExecChannel::kStdin);
    EXPECT_EQ(frames[1].payload, "");
    EXPECT_TRUE(frames[2].channel == ExecChannel::kStdout && frames[2].payload == big);
  }

  ExecFrameReader unknown;
  unknown.Feed(std::string("\x09\0\0\0\0", 5));
  auto refused = unknown.Next();
  ASSERT_TRUE(refused && !*refused);
  EXPECT_EQ((*refused).error().message, "exec frame: unknown channel 9");

  ExecFrameReader oversized;
  std::string header = EncodeExecFrame(ExecChannel::kStdin, "").substr(0, 1);
  const uint32_t n = kMaxExecPayload + 1;
  for (int shift = 24; shift >= 0; shift -= 8) header.push_back(static_cast<char>(n >> shift));
  oversized.Feed(header);
  refused = oversized.Next();
  ASSERT_TRUE(refused && !*refused);
  EXPECT_EQ((*refused).error().message,
            "exec frame: a payload of 262145 bytes is over the limit of 262144");

  // The JSON payloads decode strictly, as every body does.
  EXPECT_FALSE(DecodeBody<ExecStart>(R"({"command":["sh"],"shell":true})", true));
  EXPECT_FALSE(DecodeBody<ExecStart>(R"({"tty":true})", true));
  EXPECT_FALSE(DecodeBody<ExecResize>(R"({"cols":0,"rows":10})", true));
}

}  // namespace
}  // namespace gpupool::proto

namespace gpupool::proto {
namespace {

// A manifest too large for one chunk is cut into pieces under a root, and decodes whole again;
// a small one stays one piece; a missing part fails the decoding by name.
TEST(SnapshotManifests, ALargeManifestIsStoredInPiecesUnderARoot) {
  SnapshotManifest big;
  for (int i = 0; i < 40'000; ++i) {
    big.files.push_back(
        {"dir/" + std::string(60, 'f') + std::to_string(i), 0644, i, i, {std::string(64, 'a')}});
  }
  const std::vector<std::string> pieces = ManifestPieces(big);
  ASSERT_GT(pieces.size(), 1u);
  std::map<std::string, std::string> stored;
  std::vector<std::string> names;
  for (const std::string& p : pieces) {
    EXPECT_LE(p.size(), static_cast<size_t>(ChunkSizes{}.max));
    names.push_back("part" + std::to_string(names.size()));
    stored[names.back()] = p;
  }
  auto fetch = [&](const std::string& sha) -> Result<std::string> {
    const auto it = stored.find(sha);
    if (it == stored.end()) return NotFound("no " + sha);
    return it->second;
  };
  Result<SnapshotManifest> back = DecodeManifest(ManifestRoot(names), fetch);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->files.size(), big.files.size());
  EXPECT_EQ(back->files.back().path, big.files.back().path);
  EXPECT_EQ(back->parts, names);

  SnapshotManifest small;
  small.files.push_back({"a", 0644, 1, 1, {std::string(64, 'b')}});
  ASSERT_EQ(ManifestPieces(small).size(), 1u);
  Result<SnapshotManifest> one = DecodeManifest(ManifestPieces(small)[0], fetch);
  ASSERT_TRUE(one);
  EXPECT_TRUE(one->parts.empty());

  stored.erase("part1");
  Result<SnapshotManifest> broken = DecodeManifest(ManifestRoot(names), fetch);
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().code, ErrorCode::kNotFound);
  EXPECT_NE(broken.error().message.find("part1"), std::string::npos);
}

}  // namespace
}  // namespace gpupool::proto
