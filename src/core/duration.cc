// Parsing and formatting of durations in milliseconds (see duration.h).
#include "core/duration.h"

#include <array>
#include <charconv>
#include <limits>

namespace gpupool {
namespace {

constexpr int64_t kMsPerSecond = 1000;

struct Unit {
  std::string_view name;
  int64_t ms;
};
// Largest first: a duration names its units in this order.
constexpr std::array<Unit, 5> kUnits = {{
    {"d", 24 * 60 * 60 * kMsPerSecond},
    {"h", 60 * 60 * kMsPerSecond},
    {"m", 60 * kMsPerSecond},
    {"s", kMsPerSecond},
    {"ms", 1},
}};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool IsUnit(std::string_view letters, std::string_view unit) {
  if (letters.size() != unit.size()) return false;
  for (size_t i = 0; i < unit.size(); ++i) {
    if (Lower(letters[i]) != unit[i]) return false;
  }
  return true;
}

// The length of the run at the start of `s` whose characters satisfy `pred`.
template <typename Pred>
size_t RunLength(std::string_view s, Pred pred) {
  size_t n = 0;
  while (n < s.size() && pred(s[n])) ++n;
  return n;
}

}  // namespace

Result<int64_t> ParseDurationMs(std::string_view text) {
  const std::string quoted = "'" + std::string(text) + "'";
  const auto invalid = [&] {
    return InvalidArgument("invalid duration " + quoted +
                           ": use a number and a unit, like 90s, 15m, 2h, 1h30m or 1d");
  };
  const auto too_long = [&] { return InvalidArgument("duration " + quoted + " is too long"); };
  std::string_view s = text;
  const auto blank = [](char c) { return c == ' ' || c == '\t'; };
  s.remove_prefix(RunLength(s, blank));
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  if (s.empty()) return invalid();
  int64_t total = 0;
  size_t next_unit = 0;  // units must come largest first, each once
  while (!s.empty()) {
    const size_t digits = RunLength(s, IsDigit);
    if (digits == 0) return invalid();
    int64_t value = 0;
    if (std::from_chars(s.data(), s.data() + digits, value).ec != std::errc()) return too_long();
    s.remove_prefix(digits);
    const size_t letters = RunLength(s, IsLetter);
    const std::string_view name = s.substr(0, letters);
    s.remove_prefix(letters);
    size_t u = 0;
    while (u < kUnits.size() && !IsUnit(name, kUnits[u].name)) ++u;
    if (u == kUnits.size()) return invalid();
    if (u < next_unit) {
      return InvalidArgument("invalid duration " + quoted +
                             ": units go from largest to smallest, each once (like 1h30m)");
    }
    next_unit = u + 1;
    int64_t part = 0;
    if (__builtin_mul_overflow(value, kUnits[u].ms, &part) ||
        __builtin_add_overflow(total, part, &total)) {
      return too_long();
    }
  }
  return total;
}

std::string FormatDurationMs(int64_t ms) {
  if (ms < 0) {
    if (ms == std::numeric_limits<int64_t>::min()) ms += 1;
    return "-" + FormatDurationMs(-ms);
  }
  if (ms < kMsPerSecond) return std::to_string(ms) + "ms";
  const int64_t seconds = ms / kMsPerSecond;
  // Seconds per unit, days to seconds (the "ms" unit is not used past one second).
  for (size_t u = 0; u + 1 < kUnits.size(); ++u) {
    const int64_t unit_s = kUnits[u].ms / kMsPerSecond;
    if (seconds < unit_s) continue;
    std::string out = std::to_string(seconds / unit_s) + std::string(kUnits[u].name);
    if (u + 2 < kUnits.size()) {
      const int64_t next_s = kUnits[u + 1].ms / kMsPerSecond;
      const int64_t next = (seconds % unit_s) / next_s;
      if (next > 0) out += std::to_string(next) + std::string(kUnits[u + 1].name);
    }
    return out;
  }
  return "0s";  // not reached: seconds >= 1
}

}  // namespace gpupool
