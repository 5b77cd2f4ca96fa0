// Route pattern matching (see router.h).
#include "api/router.h"

#include "api/url.h"

namespace gpupool::api {
namespace {

constexpr size_t kMaxSegments = 16;
constexpr size_t kMaxParamBytes = 256;

// Splits "/a/b/c" into {"a","b","c"}; false when the path does not start with '/' or has more
// than kMaxSegments segments. "/" is zero segments; "/a/" is {"a", ""}.
bool SplitPath(std::string_view path, std::array<std::string_view, kMaxSegments>& out,
               size_t& count) {
  count = 0;
  if (path.empty() || path.front() != '/') return false;
  if (path.size() == 1) return true;
  size_t pos = 1;
  while (true) {
    if (count == kMaxSegments) return false;
    const size_t slash = path.find('/', pos);
    out[count++] = path.substr(pos, slash == std::string_view::npos ? slash : slash - pos);
    if (slash == std::string_view::npos) return true;
    pos = slash + 1;
  }
}

}  // namespace

std::string_view PathParams::Get(std::string_view name) const {
  for (size_t i = 0; i < size_; ++i) {
    if (items_[i].first == name) return items_[i].second;
  }
  return {};
}

bool PathParams::Add(std::string_view name, std::string value) {
  if (size_ == kMax) return false;
  items_[size_++] = {name, std::move(value)};
  return true;
}

const std::string& Router::UnmatchedPattern() {
  static const std::string kUnmatched = "(unmatched)";
  return kUnmatched;
}

Status Router::Add(std::string method, std::string pattern, int id) {
  std::array<std::string_view, kMaxSegments> parts;
  size_t count = 0;
  if (!SplitPath(pattern, parts, count)) {
    return InvalidArgument("route pattern '" + pattern + "' must start with '/' and have at most " +
                           std::to_string(kMaxSegments) + " segments");
  }
  Route route;
  route.method = std::move(method);
  route.id = id;
  size_t params = 0;
  for (size_t i = 0; i < count; ++i) {
    const std::string_view part = parts[i];
    if (part.empty())
      return InvalidArgument("route pattern '" + pattern + "' has an empty segment");
    if (part.front() == '{') {
      if (part.size() < 3 || part.back() != '}') {
        return InvalidArgument("route pattern '" + pattern + "' has a malformed parameter");
      }
      route.segments.push_back({std::string(part.substr(1, part.size() - 2)), true});
      ++params;
    } else {
      route.segments.push_back({std::string(part), false});
    }
  }
  if (params > PathParams::kMax) {
    return InvalidArgument("route pattern '" + pattern + "' has more than 4 parameters");
  }
  for (const Route& r : routes_) {
    if (r.method == route.method && r.pattern == pattern) {
      return InvalidArgument("route " + route.method + " " + pattern + " is registered twice");
    }
  }
  route.pattern = std::move(pattern);
  routes_.push_back(std::move(route));
  return {};
}

Router::Match Router::Find(std::string_view method, std::string_view path) const {
  Match match;
  match.pattern = &UnmatchedPattern();
  std::array<std::string_view, kMaxSegments> parts;
  size_t count = 0;
  if (!SplitPath(path, parts, count)) return match;

  const Route* path_match = nullptr;  // first route matching the path with another method
  for (const Route& route : routes_) {
    if (route.segments.size() != count) continue;
    bool ok = true;
    for (size_t i = 0; i < count && ok; ++i) {
      const Segment& seg = route.segments[i];
      ok = seg.is_param ? !parts[i].empty() : seg.text == parts[i];
    }
    if (!ok) continue;
    if (route.method != method) {
      if (!match.allow.empty()) match.allow += ", ";
      match.allow += route.method;
      if (path_match == nullptr) path_match = &route;
      continue;
    }
    match.outcome = Outcome::kFound;
    match.id = route.id;
    match.pattern = &route.pattern;
    match.allow.clear();
    for (size_t i = 0; i < count; ++i) {
      const Segment& seg = route.segments[i];
      if (!seg.is_param) continue;
      const std::string what = "path parameter '" + seg.text + "'";
      Result<std::string> value = PercentDecode(parts[i], false, what);
      std::string problem;
      if (!value) {
        problem = value.error().message;
      } else if (value->empty()) {
        problem = what + " must not be empty";
      } else if (value->size() > kMaxParamBytes) {
        problem = what + " is longer than 256 bytes";
      } else {
        for (const char c : *value) {
          if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F || c == '/') {
            problem = what + " must not contain '/' or control characters";
            break;
          }
        }
      }
      if (!problem.empty()) {
        match.outcome = Outcome::kBadPath;
        match.error = Error{ErrorCode::kInvalidArgument, std::move(problem)};
        return match;
      }
      match.params.Add(seg.text, std::move(*value));
    }
    return match;
  }
  if (path_match != nullptr) {
    match.outcome = Outcome::kMethodNotAllowed;
    match.pattern = &path_match->pattern;
  }
  return match;
}

}  // namespace gpupool::api
