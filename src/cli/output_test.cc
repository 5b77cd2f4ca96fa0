// Unit tests of the CLI's own --json documents (output.h): the keys users' scripts read stay as
// they were when these were JSON literals.
#include "cli/output.h"

#include <gtest/gtest.h>

#include "proto/json_codec.h"

namespace gpupool::cli {
namespace {

using proto::Json;

TEST(OutputTest, LoginSaysWhatWasSavedButNeverTheSecret) {
  const LoginOutput out{.profile = "lab",
                        .path = "/home/a/.config/gpupool/config",
                        .endpoint = "http://pool:8080",
                        .access_key = "AK1",
                        .verified = true};
  EXPECT_EQ(proto::Encode(out), Json::parse(R"({"profile": "lab",
      "path": "/home/a/.config/gpupool/config", "endpoint": "http://pool:8080",
      "access_key": "AK1", "verified": true})"));
}

TEST(OutputTest, CopiesNameResumedBytesOnlyForUploads) {
  CopyOutput down{.task = "t-1", .direction = "download", .files = {}, .bytes = 3, .skipped = {}};
  down.files.push_back(
      {.path = "out/a", .local = "a", .size = 3, .sha256 = "ab", .resumed_from = std::nullopt});
  EXPECT_EQ(proto::Encode(down), Json::parse(R"({"task": "t-1", "direction": "download",
      "files": [{"path": "out/a", "local": "a", "size": 3, "sha256": "ab"}], "bytes": 3,
      "skipped": []})"));
  CopiedFile up{.path = "in/b", .local = "b", .size = 9, .sha256 = "cd", .resumed_from = 4};
  EXPECT_EQ(proto::Encode(up)["resumed_from"], 4);
  up.resumed_from = 0;
  EXPECT_EQ(proto::Encode(up)["resumed_from"], 0) << "a fresh upload says 0, not nothing";
}

TEST(OutputTest, UsageIsTheBalanceAndTheStatementAsTheServerSentThem) {
  UsageOutput usage;
  usage.balance.project = "ml";
  usage.balance.balance_micros = 5;
  usage.statement.project = "ml";
  usage.statement.to_ms = 7;
  const Json json = proto::Encode(usage);
  EXPECT_EQ(json["balance"], proto::Encode(usage.balance));
  EXPECT_EQ(json["statement"], proto::Encode(usage.statement));
  EXPECT_EQ(json.size(), 2u);
}

}  // namespace
}  // namespace gpupool::cli
