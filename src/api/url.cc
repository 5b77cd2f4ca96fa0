// Percent-encoding and query-string parsing (see url.h).
#include "api/url.h"

#include "core/hex.h"

namespace gpupool::api {
namespace {

bool IsUnreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~';
}

}  // namespace

std::string PercentEncode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (IsUnreserved(c)) {
      out.push_back(ch);
    } else {
      out += '%' + HexEncode(std::string_view(&ch, 1), HexCase::kUpper);
    }
  }
  return out;
}

Result<std::string> PercentDecode(std::string_view s, bool plus_is_space, std::string_view what) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '%') {
      const int hi = i + 1 < s.size() ? HexDigitValue(s[i + 1]) : -1;
      const int lo = i + 2 < s.size() ? HexDigitValue(s[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        return InvalidArgument(std::string(what) + " has a bad percent-escape at offset " +
                               std::to_string(i) + " (expected %XX with two hex digits)");
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> ParseQueryString(std::string_view raw) {
  std::vector<std::pair<std::string, std::string>> params;
  size_t pos = 0;
  while (pos <= raw.size()) {
    size_t amp = raw.find('&', pos);
    if (amp == std::string_view::npos) amp = raw.size();
    const std::string_view piece = raw.substr(pos, amp - pos);
    pos = amp + 1;
    if (piece.empty()) continue;
    const size_t eq = piece.find('=');
    const std::string_view raw_name = piece.substr(0, eq);
    const std::string_view raw_value =
        eq == std::string_view::npos ? std::string_view() : piece.substr(eq + 1);
    Result<std::string> name = PercentDecode(raw_name, true, "a query parameter name");
    if (!name) return tl::unexpected(name.error());
    Result<std::string> value = PercentDecode(raw_value, true, "query parameter '" + *name + "'");
    if (!value) return tl::unexpected(value.error());
    params.emplace_back(std::move(*name), std::move(*value));
  }
  return params;
}

}  // namespace gpupool::api
