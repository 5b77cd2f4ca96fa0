// The OpenAPI document is the contract the SDK and the console are written against: the checked-in
// docs/openapi.json (and the reference for people, docs/api-reference.md) must be exactly what the
// code generates, and every route the server's router serves must be in it (and nothing the
// router lacks).
#include "proto/openapi.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "api/routes.h"
#include "proto/reference.h"

namespace gpupool {
namespace {

TEST(OpenApi, CheckedInDocumentIsWhatTheCodeGenerates) {
  const std::string path = std::string(GPUPOOL_SOURCE_DIR) + "/docs/openapi.json";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " is missing";
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(text.str() == proto::OpenApiText())
      << path << " differs from the generated document; regenerate it with\n"
      << "  build/src/cmd/gpupool openapi > docs/openapi.json";
}

TEST(OpenApi, CheckedInReferenceIsWhatTheCodeGenerates) {
  const std::string path = std::string(GPUPOOL_SOURCE_DIR) + "/docs/api-reference.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " is missing";
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(text.str() == proto::ApiReferenceMarkdown())
      << path << " differs from the generated reference; regenerate it with\n"
      << "  build/src/cmd/gpupool openapi --markdown > docs/api-reference.md";
}

TEST(OpenApi, DocumentsEveryRouteOfTheRouterAndNoOther) {
  const proto::Json doc = proto::OpenApiDocument();
  std::set<std::pair<std::string, std::string>> documented;
  for (const auto& [path, methods] : doc["paths"].items()) {
    for (const auto& [method, op] : methods.items()) {
      std::string upper = method;
      for (char& c : upper) c = static_cast<char>(c - 'a' + 'A');
      documented.emplace(upper, path);
    }
  }
  std::set<std::pair<std::string, std::string>> routed;
  for (const auto& route : api::Api::RouteTable()) {
    EXPECT_TRUE(routed.insert(route).second) << route.first << " " << route.second << " twice";
    EXPECT_TRUE(documented.count(route))
        << route.first << " " << route.second << " is served but not in the OpenAPI document";
  }
  for (const auto& op : documented) {
    EXPECT_TRUE(routed.count(op)) << op.first << " " << op.second
                                  << " is documented but no route serves it";
  }
  EXPECT_GE(routed.size(), 50u);
}

}  // namespace
}  // namespace gpupool
