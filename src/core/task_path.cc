// The task path rules (see task_path.h).
#include "core/task_path.h"

#include <cstdint>

namespace gpupool {
namespace {

// Length of the valid UTF-8 sequence starting at s[i] (overlong forms, surrogates and code
// points above U+10FFFF refused), or 0 when there is none.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b = byte(i);
  if (b < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if ((b & 0xE0) == 0xC0) {
    n = 2;
    cp = b & 0x1F;
  } else if ((b & 0xF0) == 0xE0) {
    n = 3;
    cp = b & 0x0F;
  } else if ((b & 0xF8) == 0xF0) {
    n = 4;
    cp = b & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  constexpr uint32_t kMinOfLength[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinOfLength[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

bool IsControl(uint8_t b) { return b < 0x20 || b == 0x7F; }

}  // namespace

std::string QuoteTaskPath(std::string_view path) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (size_t i = 0; i < path.size();) {
    const auto b = static_cast<uint8_t>(path[i]);
    const size_t n = Utf8SequenceLength(path, i);
    if (n == 0 || IsControl(b)) {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 0xF];
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
