// The string check every decoder of the wire types applies (see describe.h).
#include "proto/describe.h"

#include <algorithm>

#include "core/base64.h"
#include "core/utf8.h"

namespace gpupool::proto {
namespace {

bool IsIdentifierChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

// The byte offset of the first control character (core/utf8.h), or npos.
size_t FirstControl(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (ControlCharacterLength(s, i) > 0) return i;
  }
  return std::string::npos;
}

// "a", "a or b", "a, b or c".
std::string Alternatives(std::span<const std::string_view> values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += i + 1 == values.size() ? " or " : ", ";
    out += values[i];
  }
  return out;
}

}  // namespace

Status CheckStringValue(const std::string& name, const std::string& value, const Spec& spec) {
  if (value.size() > spec.max_bytes) {
    return InvalidArgument(name + " is longer than " + std::to_string(spec.max_bytes) + " bytes (" +
                           std::to_string(value.size()) + ")");
  }
  switch (spec.format) {
    case Format::kNone:
      break;
    case Format::kIdentifier:
      if (value.empty() || value.size() > 128 ||
          !std::all_of(value.begin(), value.end(), IsIdentifierChar)) {
        return InvalidArgument(name + " must be 1..128 characters of A-Z a-z 0-9 - _ ., got '" +
                               value + "'");
      }
      // Ids name directories and path segments (a node's data, a task's files): never these.
      if (value == "." || value == "..") {
        return InvalidArgument(name + " must not be '" + value + "'");
      }
      break;
    case Format::kBase64:
      if (!Base64Decode(value)) return InvalidArgument(name + " is not valid base64");
      break;
    case Format::kText:
      if (const size_t at = FirstControl(value); at != std::string::npos) {
        // The value itself is not echoed: it is what must not reach a terminal.
        return InvalidArgument(name + " must not contain control characters (found one at byte " +
                               std::to_string(at) + ")");
      }
      break;
  }
  if (!spec.one_of.empty() &&
      std::find(spec.one_of.begin(), spec.one_of.end(), value) == spec.one_of.end()) {
    return InvalidArgument(name + " must be " + Alternatives(spec.one_of) + ", got '" + value +
                           "'");
  }
  return {};
}

}  // namespace gpupool::proto
