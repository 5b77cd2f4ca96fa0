// Tests for api/router (pattern matching, 404, 405 with Allow, path parameter decoding and
// checks) and api/url (percent-decoding, query strings).
#include "api/router.h"

#include <gtest/gtest.h>

#include <string>

#include "api/url.h"

namespace gpupool::api {
namespace {

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(router_.Add("GET", "/v1/tasks", 1));
    ASSERT_TRUE(router_.Add("POST", "/v1/tasks", 2));
    ASSERT_TRUE(router_.Add("GET", "/v1/tasks/{id}", 3));
    ASSERT_TRUE(router_.Add("DELETE", "/v1/tasks/{id}", 4));
    ASSERT_TRUE(router_.Add("POST", "/v1/tasks/{id}/stop", 5));
    ASSERT_TRUE(router_.Add("GET", "/v1/users/{user}/keys/{key}", 6));
    ASSERT_TRUE(router_.Add("GET", "/healthz", 7));
  }
  Router router_;
};

TEST_F(RouterTest, MatchesLiteralAndParameterSegments) {
  struct Row {
    const char* method;
    const char* path;
    int id;
  };
  const Row rows[] = {
      {"GET", "/v1/tasks", 1},
      {"POST", "/v1/tasks", 2},
      {"GET", "/v1/tasks/t-1", 3},
      {"DELETE", "/v1/tasks/t-1", 4},
      {"POST", "/v1/tasks/t-9/stop", 5},
      {"GET", "/v1/users/u-1/keys/AK1", 6},
      {"GET", "/healthz", 7},
  };
  for (const Row& row : rows) {
    const Router::Match m = router_.Find(row.method, row.path);
    EXPECT_EQ(m.outcome, Router::Outcome::kFound) << row.method << " " << row.path;
    EXPECT_EQ(m.id, row.id) << row.method << " " << row.path;
  }
}

TEST_F(RouterTest, CapturesAndDecodesParameters) {
  const Router::Match m = router_.Find("GET", "/v1/users/u%2D1/keys/AK%41");
  ASSERT_EQ(m.outcome, Router::Outcome::kFound);
  EXPECT_EQ(*m.pattern, "/v1/users/{user}/keys/{key}");
  EXPECT_EQ(m.params.size(), 2u);
  EXPECT_EQ(m.params.Get("user"), "u-1");
  EXPECT_EQ(m.params.Get("key"), "AKA");
  EXPECT_EQ(m.params.Get("nope"), "");
}

TEST_F(RouterTest, UnknownPathsAreNotFound) {
  for (const char* path : {"/v1/task", "/v1/tasks/", "/v1/tasks/t-1/stop/now", "/", "", "v1/tasks",
                           "/v1/tasks//stop", "/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r"}) {
    const Router::Match m = router_.Find("GET", path);
    EXPECT_EQ(m.outcome, Router::Outcome::kNotFound) << path;
    EXPECT_EQ(*m.pattern, Router::UnmatchedPattern()) << path;
  }
}

TEST_F(RouterTest, WrongMethodIsMethodNotAllowedWithAllow) {
  Router::Match m = router_.Find("PUT", "/v1/tasks/t-1");
  EXPECT_EQ(m.outcome, Router::Outcome::kMethodNotAllowed);
  EXPECT_EQ(m.allow, "GET, DELETE");
  EXPECT_EQ(*m.pattern, "/v1/tasks/{id}");
  m = router_.Find("GET", "/v1/tasks/t-1/stop");
  EXPECT_EQ(m.outcome, Router::Outcome::kMethodNotAllowed);
  EXPECT_EQ(m.allow, "POST");
  m = router_.Find("DELETE", "/v1/tasks");
  EXPECT_EQ(m.allow, "GET, POST");
}

TEST_F(RouterTest, BadParametersAreRejectedWithTheirName) {
  const std::string long_id(300, 'x');
  const std::vector<std::pair<std::string, std::string>> rows = {
      {"/v1/tasks/t%zz", "path parameter 'id' has a bad percent-escape"},
      {"/v1/tasks/t%2", "path parameter 'id' has a bad percent-escape"},
      {"/v1/tasks/a%2Fb", "path parameter 'id' must not contain '/'"},
      {"/v1/tasks/a%00b", "path parameter 'id' must not contain '/' or control characters"},
      {"/v1/tasks/" + long_id, "path parameter 'id' is longer than 256 bytes"},
  };
  for (const auto& [path, expect] : rows) {
    const Router::Match m = router_.Find("GET", path);
    ASSERT_EQ(m.outcome, Router::Outcome::kBadPath) << path;
    EXPECT_EQ(m.error.code, ErrorCode::kInvalidArgument);
    EXPECT_NE(m.error.message.find(expect), std::string::npos) << m.error.message;
  }
}

TEST(RouterAdd, RejectsMalformedAndDuplicatePatterns) {
  Router r;
  EXPECT_TRUE(r.Add("GET", "/a/{b}", 1));
  EXPECT_FALSE(r.Add("GET", "/a/{b}", 2));
  EXPECT_TRUE(r.Add("POST", "/a/{b}", 2));
  EXPECT_FALSE(r.Add("GET", "no-slash", 3));
  EXPECT_FALSE(r.Add("GET", "/a//b", 3));
  EXPECT_FALSE(r.Add("GET", "/a/{}", 3));
  EXPECT_FALSE(r.Add("GET", "/a/{b", 3));
  EXPECT_FALSE(r.Add("GET", "/{a}/{b}/{c}/{d}/{e}", 3));
}

TEST(Url, PercentEncodeKeepsOnlyUnreserved) {
  EXPECT_EQ(PercentEncode("aZ09-_.~"), "aZ09-_.~");
  EXPECT_EQ(PercentEncode("a b/c,d+é"), "a%20b%2Fc%2Cd%2B%C3%A9");
}

TEST(Url, ParseQueryStringDecodesInOrder) {
  const auto q = ParseQueryString("state=running%2Cpending&limit=10&flag&x=a+b");
  ASSERT_TRUE(q);
  ASSERT_EQ(q->size(), 4u);
  EXPECT_EQ((*q)[0], (std::pair<std::string, std::string>{"state", "running,pending"}));
  EXPECT_EQ((*q)[1], (std::pair<std::string, std::string>{"limit", "10"}));
  EXPECT_EQ((*q)[2], (std::pair<std::string, std::string>{"flag", ""}));
  EXPECT_EQ((*q)[3], (std::pair<std::string, std::string>{"x", "a b"}));
  const auto bad = ParseQueryString("limit=1%G0");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("query parameter 'limit'"), std::string::npos);
}

}  // namespace
}  // namespace gpupool::api
