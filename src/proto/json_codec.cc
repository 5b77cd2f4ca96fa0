// Strict JSON parsing and the field reader behind the wire types' decoder (see json_codec.h).
#include "proto/json_codec.h"

#include <cmath>

namespace gpupool::proto {
namespace {

struct DuplicateKey {
  std::string key;
};
struct TooDeep {};

std::string RangeMessage(const std::string& name, int64_t min, int64_t max, int64_t type_min,
                         int64_t type_max, int64_t got) {
  std::string range;
  if (max == type_max) {
    range = ">= " + std::to_string(min);
  } else if (min == type_min) {
    range = "<= " + std::to_string(max);
  } else {
    range = std::to_string(min) + ".." + std::to_string(max);
  }
  return name + " must be " + range + ", got " + std::to_string(got);
}

}  // namespace

Result<Json> ParseJsonObject(std::string_view body, bool required, std::string_view what) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    if (required) return InvalidArgument(std::string(what) + " is empty; expected a JSON object");
    return Json::object();
  }
  // The parser skips a UTF-8 byte-order mark and stops at a NUL: JSON text has neither (RFC 8259
  // §8.1), so a body with one is refused rather than read as the part before it.
  if (body.starts_with("\xEF\xBB\xBF")) {
    return InvalidArgument(std::string(what) + " starts with a UTF-8 byte-order mark; send JSON "
                           "without one");
  }
  if (const size_t nul = body.find('\0'); nul != std::string_view::npos) {
    return InvalidArgument(std::string(what) + " holds a NUL byte at offset " +
                           std::to_string(nul) + "; JSON text cannot");
  }
  // Keys seen per open object, to reject a key given twice (the parser would keep the last).
  std::vector<std::vector<std::string>> keys;
  int depth = 0;
  const Json::parser_callback_t check = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (++depth > kMaxJsonDepth) throw TooDeep{};
        if (event == Json::parse_event_t::object_start) keys.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        --depth;
        keys.pop_back();
        break;
      case Json::parse_event_t::array_end:
        --depth;
        break;
      case Json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        std::vector<std::string>& seen = keys.back();
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) throw DuplicateKey{key};
        seen.push_back(key);
        break;
      }
      case Json::parse_event_t::value:
        break;
    }
    return true;
  };
  Json value;
  try {
    value = Json::parse(body.begin(), body.end(), check);
  } catch (const DuplicateKey& e) {
    return InvalidArgument(std::string(what) + " has the key '" + e.key + "' twice in one object");
  } catch (const TooDeep&) {
    return InvalidArgument(std::string(what) + " nests deeper than " +
                           std::to_string(kMaxJsonDepth) + " levels");
  } catch (const Json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 5: …" or
    // "[json.exception.out_of_range.406] number overflow parsing '1e999'", without the tag.
    std::string message = e.what();
    const size_t tag_end = message.find("] ");
    if (message.rfind("[json.exception.", 0) == 0 && tag_end != std::string::npos) {
      message.erase(0, tag_end + 2);
    }
    return InvalidArgument(std::string(what) + " is not valid JSON: " + message);
  }
  if (!value.is_object()) {
    return InvalidArgument(std::string(what) + " must be a JSON object, got " + value.type_name());
  }
  return value;
}

std::string Dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// ------------------------------------------------------------------------------------------
// FieldReader

FieldReader::FieldReader(const Json& object, std::string where)
    : object_(object), where_(std::move(where)) {}

void FieldReader::Fail(std::string message) {
  if (failed_) return;
  failed_ = true;
  error_ = Error{ErrorCode::kInvalidArgument, std::move(message)};
}

void FieldReader::Allow(std::span<const std::string_view> allowed) {
  if (failed_) return;
  for (const auto& item : object_.items()) {
    if (std::find(allowed.begin(), allowed.end(), item.key()) == allowed.end()) {
      Fail("unknown field '" + Name(item.key()) + "'");
      return;
    }
  }
}

void FieldReader::RequireOneOf(std::initializer_list<std::string_view> names) {
  if (failed_) return;
  for (std::string_view n : names) {
    if (Has(n)) return;
  }
  std::string list;
  for (std::string_view n : names) {
    if (!list.empty()) list += " or ";
    list += Name(n);
  }
  Fail(list + " is required");
}

bool FieldReader::Has(std::string_view name) const { return object_.find(name) != object_.end(); }

const Json* FieldReader::Find(std::string_view name, bool required) {
  if (failed_) return nullptr;
  const auto it = object_.find(name);
  if (it == object_.end()) {
    if (required) Fail(Name(name) + " is required");
    return nullptr;
  }
  return &*it;
}

bool FieldReader::Int64Of(const std::string& field, const Json& v, int64_t type_min,
                          int64_t type_max, int64_t min, int64_t max, int64_t* out) {
  const int bits = type_max > std::numeric_limits<int32_t>::max() ? 64 : 32;
  const std::string out_of_range =
      field + " is out of range for a " + std::to_string(bits) + "-bit integer, got ";
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      Fail(out_of_range + v.dump());
      return false;
    }
    x = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    // Integer literals beyond 64 bits arrive as doubles.
    if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) >= 9.2e18) {
      Fail(out_of_range + v.dump());
    } else {
      Fail(field + " must be an integer, got number " + v.dump());
    }
    return false;
  } else {
    Fail(field + " must be an integer, got " + v.type_name());
    return false;
  }
  if (x < type_min || x > type_max) {
    Fail(out_of_range + std::to_string(x));
    return false;
  }
  if (x < min || x > max) {
    Fail(RangeMessage(field, min, max, type_min, type_max, x));
    return false;
  }
  *out = x;
  return true;
}

}  // namespace gpupool::proto
