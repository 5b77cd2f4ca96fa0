// Percent-encoding (RFC 3986) and query-string parsing, shared by request signing, the router
// and the client.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace gpupool::api {

// Encodes every byte except the unreserved set A–Z a–z 0–9 - _ . ~ as %XX (upper-case hex).
std::string PercentEncode(std::string_view s);

// Decodes %XX escapes; `plus_is_space` also turns '+' into ' ' (query strings). An error names
// the bad escape; `what` says what was being decoded ("query parameter 'state'").
Result<std::string> PercentDecode(std::string_view s, bool plus_is_space, std::string_view what);

// The decoded (name, value) pairs of a raw query string in the order given; "a" and "a=" both
// give ("a", ""). Empty pieces ("a=1&&b=2") are skipped.
Result<std::vector<std::pair<std::string, std::string>>> ParseQueryString(std::string_view raw);

}  // namespace gpupool::api
