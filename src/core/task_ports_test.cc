// Tests for core/task_ports: the rules of declared ports, their stored form and the gateway path.
#include "core/task_ports.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(TaskPortsTest, ValidatesRangeCountAndDuplicates) {
  EXPECT_TRUE(ValidateTaskPorts({}));
  EXPECT_TRUE(ValidateTaskPorts({1, 8888, 65535}));
  struct Row {
    std::vector<int32_t> ports;
    std::string error;
  };
  const Row rows[] = {
      {{0}, "ports: 0 is not a TCP port (1..65535)"},
      {{65536}, "ports: 65536 is not a TCP port (1..65535)"},
      {{-1}, "ports: -1 is not a TCP port (1..65535)"},
      {{8888, 6006, 8888}, "ports: 8888 is given twice"},
      {std::vector<int32_t>(17, 1), "ports: at most 16 ports, not 17"},
  };
  for (const Row& row : rows) {
    Status s = ValidateTaskPorts(row.ports);
    ASSERT_FALSE(s) << row.error;
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(s.error().message, row.error);
  }
}

TEST(TaskPortsTest, StoredFormRoundTrips) {
  EXPECT_EQ(FormatPortList({}), "");
  EXPECT_EQ(FormatPortList({8888, 6006}), "8888,6006");
  EXPECT_EQ(*ParsePortList(""), std::vector<int32_t>{});
  EXPECT_EQ(*ParsePortList("8888,6006"), (std::vector<int32_t>{8888, 6006}));
  EXPECT_FALSE(ParsePortList("8888,"));
  EXPECT_FALSE(ParsePortList("88a"));
  EXPECT_FALSE(ParsePortList("1,1"));
  EXPECT_FALSE(ParsePortList("0"));
}

TEST(TaskPortsTest, GatewayBasePath) { EXPECT_EQ(GatewayBasePath("t-12", 8888), "/t/t-12/8888/"); }

}  // namespace
}  // namespace gpupool
