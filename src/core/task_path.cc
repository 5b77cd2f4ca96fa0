// The task path rules (see task_path.h).
#include "core/task_path.h"

#include <cstdint>

#include "core/hex.h"
#include "core/utf8.h"

namespace gpupool {
namespace {

bool IsControl(uint8_t b) { return b < 0x20 || b == 0x7F; }

}  // namespace

std::string QuoteTaskPath(std::string_view path) {
  std::string out = "'";
  for (size_t i = 0; i < path.size();) {
    const auto b = static_cast<uint8_t>(path[i]);
    const size_t n = Utf8SequenceLength(path, i);
    if (n == 0 || IsControl(b)) {
      out += "\\x" + HexEncode(path.substr(i, 1));
      ++i;
      continue;
    }
    out.append(path.substr(i, n));
    i += n;
  }
  return out + "'";
}

Status ValidateTaskPath(std::string_view path, std::string_view what) {
  const auto fail = [&](const std::string& rule) {
    return InvalidArgument(std::string(what) + " " + QuoteTaskPath(path) + " " + rule);
  };
  if (path.empty()) return InvalidArgument(std::string(what) + " must not be empty");
  if (path.size() > kMaxTaskPathBytes) {
    return InvalidArgument(std::string(what) + " is " + std::to_string(path.size()) +
                           " bytes long; at most " + std::to_string(kMaxTaskPathBytes) +
                           " are allowed");
  }
  for (size_t i = 0; i < path.size();) {
    const auto b = static_cast<uint8_t>(path[i]);
    if (b == 0) return fail("contains a NUL byte");
    if (IsControl(b)) return fail("contains a control character");
    const size_t n = Utf8SequenceLength(path, i);
    if (n == 0) return fail("is not valid UTF-8");
    i += n;
  }
  if (path.front() == '/') {
    return fail("is absolute; paths are relative to the task's workspace");
  }
  size_t depth = 0;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(start, end - start);
    if (part.empty()) return fail("has an empty component ('//' or a trailing '/')");
    if (part == "..") return fail("has a '..' component; paths may not leave the workspace");
    if (part == ".") return fail("has a '.' component");
    if (part.size() > kMaxTaskPathComponentBytes) {
      return fail("has a component of " + std::to_string(part.size()) + " bytes; at most " +
                  std::to_string(kMaxTaskPathComponentBytes) + " are allowed");
    }
    if (++depth > kMaxTaskPathDepth) {
      return fail("is deeper than " + std::to_string(kMaxTaskPathDepth) + " components");
    }
    start = end + 1;
  }
  return {};
}

Result<std::string> TaskPathFromUser(std::string_view path, std::string_view what) {
  std::string_view rest = path;
  const std::string_view home = kTaskHome;
  if (rest.starts_with('/')) {
    if (!rest.starts_with(home) || (rest.size() > home.size() && rest[home.size()] != '/')) {
      return InvalidArgument(std::string(what) + " " + QuoteTaskPath(path) +
                             " is outside the task's workspace " + std::string(home) +
                             ": give a path below " + std::string(home) + "/ or a relative one");
    }
    rest.remove_prefix(home.size());
  }
  std::string out;
  size_t start = 0;
  while (start <= rest.size()) {
    size_t end = rest.find('/', start);
    if (end == std::string_view::npos) end = rest.size();
    const std::string_view part = rest.substr(start, end - start);
    if (!part.empty() && part != ".") {
      if (!out.empty()) out += '/';
      out.append(part);
    }
    start = end + 1;
  }
  if (out.empty()) return out;
  if (Status ok = ValidateTaskPath(out, what); !ok) return tl::unexpected(ok.error());
  return out;
}

std::vector<std::string> SplitTaskPath(std::string_view path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    parts.emplace_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

}  // namespace gpupool
