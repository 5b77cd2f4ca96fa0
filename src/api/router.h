// Matches a request's method and path against route patterns ("/v1/tasks/{id}/stop"): the route,
// its decoded path parameters, or why nothing matched (404, or 405 with the allowed methods).
// No HTTP library types; the routes (routes.h) own what each route does.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace gpupool::api {

// The parameters one matched pattern captured, percent-decoded.
class PathParams {
 public:
  static constexpr size_t kMax = 4;

  // The value captured for `{name}`; empty when the pattern has no such parameter.
  std::string_view Get(std::string_view name) const;
  size_t size() const { return size_; }
  bool Add(std::string_view name, std::string value);  // false when full

 private:
  std::array<std::pair<std::string_view, std::string>, kMax> items_;
  size_t size_ = 0;
};

class Router {
 public:
  enum class Outcome { kFound, kNotFound, kMethodNotAllowed, kBadPath };

  struct Match {
    Outcome outcome = Outcome::kNotFound;
    int id = -1;                           // kFound: the id given to Add
    const std::string* pattern = nullptr;  // the matched pattern; "(unmatched)" otherwise
    PathParams params;                     // kFound
    std::string allow;                     // kMethodNotAllowed: "GET, POST"
    Error error;                           // kBadPath: names the parameter
  };

  // Registers `method` on `pattern`: literal segments and `{name}` segments, which match one
  // non-empty path segment. Fails on a malformed pattern or a repeated (method, pattern).
  Status Add(std::string method, std::string pattern, int id);

  // The first route (in Add order) whose pattern and method match. A path that matches only with
  // other methods is kMethodNotAllowed; a parameter that is not valid percent-encoding, is
  // empty, longer than 256 bytes, or holds a control character or '/', is kBadPath.
  Match Find(std::string_view method, std::string_view path) const;

  static const std::string& UnmatchedPattern();

 private:
  struct Segment {
    std::string text;  // literal text, or the parameter name
    bool is_param = false;
  };
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<Segment> segments;
    int id = 0;
  };
  std::vector<Route> routes_;
};

}  // namespace gpupool::api
