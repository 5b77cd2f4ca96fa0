// Job arrays (Slurm's `--array`): the index specification people type ("0-99%10", "1,3,5-9",
// "0-20:5"), parsed once for the CLI and the server, and the limits of an array. An array is one
// submission of many tasks that differ only by their index (GPUPOOL_ARRAY_INDEX).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpupool {

inline constexpr int64_t kMaxArrayIndex = 999'999;    // indexes are 0..kMaxArrayIndex
inline constexpr int64_t kMaxArrayElements = 10'000;  // tasks in one array

struct ArraySpec {
  std::vector<int64_t> indexes;  // ascending, distinct, at least one
  int32_t limit = 0;             // %N: at most N elements hold resources at once; 0: no limit

  friend bool operator==(const ArraySpec&, const ArraySpec&) = default;
};

// "0-99%10" → indexes 0..99, limit 10. A list of items separated by ',' — an index ("7"), a range
// ("0-99", both ends included) or a range with a step ("0-20:5" → 0,5,10,15,20) — optionally
// followed by "%N" (N ≥ 1). Blanks around the text are ignored; an index repeated by two items
// counts once. Refused with a message quoting the text: an empty item, a number that is not a
// decimal integer in 0..kMaxArrayIndex, a range whose end is below its start, a step < 1, a limit
// that is not ≥ 1, or more than kMaxArrayElements indexes (the message names the limit).
Result<ArraySpec> ParseArraySpec(std::string_view text);

// The canonical text of a spec: runs of consecutive indexes as ranges, "%N" when limited
// ("0-9,20,30-31%4"); ParseArraySpec of it gives the spec back.
std::string ArraySpecText(const ArraySpec& spec);

// "a-<seq>": an array is named after its first element's seq.
std::string ArrayId(int64_t first_seq);
// Whether `id` has the form of an array id ("a-" and a positive decimal number).
bool IsArrayId(std::string_view id);

}  // namespace gpupool
