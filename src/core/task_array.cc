// Implementation of task_array.h: the --array grammar and its canonical text.
#include "core/task_array.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "core/text.h"

namespace gpupool {
namespace {

// A decimal integer of the whole of `s` in [0, max], or -1.
int64_t Number(std::string_view s, int64_t max) {
  if (s.empty() || s.size() > 18) return -1;
  int64_t v = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0 || v > max) return -1;
  return v;
}

}  // namespace

Result<ArraySpec> ParseArraySpec(std::string_view text) {
  const std::string_view spec = TrimBlanks(text);
  const std::string quoted = "'" + std::string(text) + "'";
  const std::string example = " (e.g. 0-99, 0-99%10, 1,3,5-9 or 0-20:5)";
  if (spec.empty()) return InvalidArgument("is empty" + example);
  ArraySpec out;
  std::string_view items = spec;
  if (const size_t percent = spec.find('%'); percent != std::string_view::npos) {
    items = spec.substr(0, percent);
    const int64_t limit = Number(spec.substr(percent + 1), kMaxArrayElements);
    if (limit < 1) {
      return InvalidArgument(quoted + ": the limit after % must be an integer in 1.." +
                             std::to_string(kMaxArrayElements) + example);
    }
    out.limit = static_cast<int32_t>(limit);
  }
  const std::string range_of = " must be an integer in 0.." + std::to_string(kMaxArrayIndex);
  while (true) {
    const size_t comma = items.find(',');
    const std::string_view item = items.substr(0, comma);
    const std::string named = quoted + ": '" + std::string(item) + "'";
    if (item.empty()) return InvalidArgument(quoted + " has an empty item" + example);
    std::string_view range = item;
    int64_t step = 1;
    if (const size_t colon = item.find(':'); colon != std::string_view::npos) {
      range = item.substr(0, colon);
      step = Number(item.substr(colon + 1), kMaxArrayIndex);
      if (step < 1) return InvalidArgument(named + ": the step after : must be ≥ 1" + example);
    }
    const size_t dash = range.find('-');
    const int64_t first = Number(range.substr(0, dash), kMaxArrayIndex);
    const int64_t last =
        dash == std::string_view::npos ? first : Number(range.substr(dash + 1), kMaxArrayIndex);
    if (first < 0 || last < 0) return InvalidArgument(named + range_of + example);
    if (last < first) {
      return InvalidArgument(named + ": the range ends below its start" + example);
    }
    if (step != 1 && dash == std::string_view::npos) {
      return InvalidArgument(named + ": a step needs a range (0-20:5)" + example);
    }
    for (int64_t i = first; i <= last; i += step) {
      out.indexes.push_back(i);
      // Bounded before it is sorted: "0-999999" must not allocate a million indexes.
      if (static_cast<int64_t>(out.indexes.size()) > 2 * kMaxArrayElements) break;
    }
    if (static_cast<int64_t>(out.indexes.size()) > 2 * kMaxArrayElements) break;
    if (comma == std::string_view::npos) break;
    items.remove_prefix(comma + 1);
  }
  std::sort(out.indexes.begin(), out.indexes.end());
  out.indexes.erase(std::unique(out.indexes.begin(), out.indexes.end()), out.indexes.end());
  if (static_cast<int64_t>(out.indexes.size()) > kMaxArrayElements) {
    return InvalidArgument(quoted + " has more than " + std::to_string(kMaxArrayElements) +
                           " indexes, the most one array may have");
  }
  return out;
}

std::string ArraySpecText(const ArraySpec& spec) {
  std::string out;
  for (size_t i = 0; i < spec.indexes.size();) {
    size_t j = i;
    while (j + 1 < spec.indexes.size() && spec.indexes[j + 1] == spec.indexes[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(spec.indexes[i]);
    if (j > i) out += '-' + std::to_string(spec.indexes[j]);
    i = j + 1;
  }
  if (spec.limit > 0) out += '%' + std::to_string(spec.limit);
  return out;
}

std::string ArrayId(int64_t first_seq) { return "a-" + std::to_string(first_seq); }

bool IsArrayId(std::string_view id) {
  return id.size() > 2 && id.substr(0, 2) == "a-" &&
         Number(id.substr(2), std::numeric_limits<int64_t>::max()) > 0;
}

}  // namespace gpupool
