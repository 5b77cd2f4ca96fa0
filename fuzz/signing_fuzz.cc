// Fuzzes what the server reads of a signed request before it knows the caller: the
// Authorization header (ParseAuthorization), the query string's canonical form, the canonical
// request and percent-decoding. The input is "header \n method \n target \n body". Properties:
// a header that parses formats back to itself; the canonical query is a fixed point; whatever
// PercentEncode writes decodes to what it was given.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/signing.h"
#include "api/url.h"
#include "fuzz/fuzz_check.h"

namespace {

// The next '\n'-separated piece of `rest` (all of it when there is none).
std::string_view Next(std::string_view& rest) {
  const size_t end = rest.find('\n');
  const std::string_view piece = rest.substr(0, end);
  rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
  return piece;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpupool;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  const std::string_view header = Next(rest);
  const std::string_view method = Next(rest);
  const std::string_view target = Next(rest);
  const std::string_view body = rest;

  if (auto credential = api::ParseAuthorization(header)) {
    const std::string formatted = api::FormatAuthorization(*credential);
    auto again = api::ParseAuthorization(formatted);
    FUZZ_CHECK(again.has_value() && *again == *credential, formatted);
  }
  const size_t q = target.find('?');
  const std::string_view path = target.substr(0, q);
  const std::string_view raw_query =
      q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
  if (auto canonical = api::CanonicalQuery(raw_query)) {
    auto again = api::CanonicalQuery(*canonical);
    FUZZ_CHECK(again.has_value() && *again == *canonical,
               std::string(raw_query) + " -> " + *canonical);
    auto request = api::CanonicalRequest(method, path, raw_query, body, 1'700'000'000'000, "n");
    FUZZ_CHECK(request.has_value(), std::string(target));
  }
  const std::string encoded = api::PercentEncode(body);
  auto decoded = api::PercentDecode(encoded, false, "body");
  FUZZ_CHECK(decoded.has_value() && *decoded == body, encoded);
  (void)api::PercentDecode(body, true, "body");
  return 0;
}
