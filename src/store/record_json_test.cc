// Tests for store/record_json: exact round trips of the nested record parts, defaults for missing
// fields, and errors (not exceptions) for corrupt text and for text that is not UTF-8.
#include "store/record_json.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "store/test_records.h"

namespace gpupool::store {
namespace {

template <typename T>
T RoundTrip(const T& value) {
  Result<std::string> json = ToJson(value);
  EXPECT_TRUE(json) << json.error().message;
  T back{};
  Status s = FromJson(json.value_or(""), &back);
  EXPECT_TRUE(s) << s.error().message;
  return back;
}

TEST(RecordJson, NestedRecordPartsRoundTripExactly) {
  const Task task = testing::SampleTask("t-1", 1);
  EXPECT_EQ(RoundTrip(task.request), task.request);
  EXPECT_EQ(RoundTrip(*task.placement), *task.placement);
  EXPECT_EQ(RoundTrip(task.command), task.command);
  EXPECT_EQ(RoundTrip(std::vector<std::string>{}), std::vector<std::string>{});

  const NodeInfo node = testing::SampleNode("n-1");
  NodeInfo back;
  back.node = RoundTrip(node.node);
  EXPECT_EQ(back.node.name, "");  // the name is the row's key, not part of the JSON
  back.node.name = node.node.name;
  back.status = node.status;
  back.draining = node.draining;
  back.registered_ms = node.registered_ms;
  back.last_heartbeat_ms = node.last_heartbeat_ms;
  EXPECT_EQ(testing::NodesDiff({back}, {node}), "");
}

TEST(RecordJson, MissingFieldsKeepTheirDefaults) {
  TaskRequest request;
  ASSERT_TRUE(FromJson(R"({"cpu_milli": 500})", &request));
  TaskRequest expected;
  expected.cpu_milli = 500;
  EXPECT_EQ(request, expected);

  Node node;
  ASSERT_TRUE(FromJson(R"({"gpus": [{"model": "T4"}]})", &node));
  ASSERT_EQ(node.gpus.size(), 1u);
  EXPECT_EQ(node.gpus[0].model, "T4");
  EXPECT_EQ(node.gpus[0].milli_free, kMilliPerGpu);
  EXPECT_TRUE(node.schedulable);
}

TEST(RecordJson, CorruptTextIsAnInternalErrorNamingThePart) {
  struct Case {
    const char* text;
    const char* part;
  };
  for (const Case& c : {Case{"{", "task request"}, Case{"[1]", "task request"},
                        Case{R"({"cpu_milli": "lots"})", "task request"}}) {
    TaskRequest request;
    Status s = FromJson(c.text, &request);
    ASSERT_FALSE(s) << c.text;
    EXPECT_EQ(s.error().code, ErrorCode::kInternal);
    EXPECT_NE(s.error().message.find(c.part), std::string::npos) << s.error().message;
  }
  Node node;
  Status s = FromJson(R"({"gpus": {"model": "T4"}})", &node);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("node"), std::string::npos) << s.error().message;
  std::vector<std::string> strings;
  EXPECT_FALSE(FromJson(R"({"a": 1})", &strings));
  EXPECT_FALSE(FromJson(R"([1, 2])", &strings));
}

TEST(RecordJson, TextThatIsNotUtf8CannotBeEncoded) {
  Result<std::string> json = ToJson(std::vector<std::string>{"ok", "\xff"});
  ASSERT_FALSE(json);
  EXPECT_EQ(json.error().code, ErrorCode::kInvalidArgument);
  TaskPlacement placement;
  placement.node = "\xc0\x80";  // an overlong NUL
  EXPECT_FALSE(ToJson(placement));
}

}  // namespace
}  // namespace gpupool::store
