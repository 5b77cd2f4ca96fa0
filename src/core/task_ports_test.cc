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

TEST(TaskPortsTest, AWildcardDomainGivesEachPortAnOriginOfItsOwn) {
  Result<std::string> origin = GatewayOrigin("apps.example.com:8640", false);
  ASSERT_TRUE(origin) << origin.error().message;
  EXPECT_EQ(*origin, "http://apps.example.com:8640");
  EXPECT_EQ(*GatewayOrigin("apps.example.com", true), "https://apps.example.com");
  EXPECT_EQ(GatewayPortUrl(*origin, "t-12", 8888), "http://8888--t-12.apps.example.com:8640/");

  std::optional<GatewayHost> target = ParseGatewayHost(*origin, "8888--T-12.Apps.Example.com:443");
  ASSERT_TRUE(target);
  EXPECT_EQ(target->task, "t-12");
  EXPECT_EQ(target->port, 8888);
  EXPECT_TRUE(ParseGatewayHost(*origin, "8888--t-12.apps.example.com"));
  // Not one of the domain's ports: the server's own name, another domain, a deeper name, no
  // port, a port out of range, a task that is no DNS label.
  for (const char* host :
       {"apps.example.com", "example.com", "8888--t-12.example.com", "8888--t-12.xapps.example.com",
        "a.8888--t-12.apps.example.com", "t-12.apps.example.com", "70000--t-12.apps.example.com",
        "8888--.apps.example.com", "8888--t_12.apps.example.com", ""}) {
    EXPECT_FALSE(ParseGatewayHost(*origin, host)) << host;
  }
  EXPECT_FALSE(ParseGatewayHost("", "8888--t-12.apps.example.com")) << "no domain: path-based";

  for (const char* bad : {"localhost", "Apps.example.com", "apps..example.com", "-a.example.com",
                          "apps.example.com:0", "apps.example.com:x", "*.apps.example.com"}) {
    Result<std::string> refused = GatewayOrigin(bad, false);
    ASSERT_FALSE(refused) << bad;
    EXPECT_NE(refused.error().message.find("--gateway-domain"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpupool
