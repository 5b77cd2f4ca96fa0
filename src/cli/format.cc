// Parsing and formatting of times, sizes and money, and aligned tables (see format.h).
#include "cli/format.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/hex.h"
#include "core/text.h"
#include "core/utf8.h"

namespace gpupool::cli {
namespace {

constexpr int64_t kMsPerSecond = 1000;
constexpr int64_t kMicrosPerUnit = 1'000'000;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Parses a run of digits at the start of `s` (advancing it); false on none or overflow.
bool TakeDigits(std::string_view* s, int64_t* out, size_t* count = nullptr) {
  size_t n = 0;
  while (n < s->size() && IsDigit((*s)[n])) ++n;
  if (n == 0) return false;
  const auto [ptr, ec] = std::from_chars(s->data(), s->data() + n, *out);
  if (ec != std::errc() || ptr != s->data() + n) return false;
  if (count != nullptr) *count = n;
  s->remove_prefix(n);
  return true;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// The civil date of a day count since 1970-01-01 (H. Hinnant's civil_from_days).
void CivilFromDays(int64_t z, int64_t* y, int64_t* m, int64_t* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = yoe + era * 400 + (*m <= 2);
}

bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int64_t DaysInMonth(int64_t y, int64_t m) {
  static constexpr std::array<int, 12> kDays = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[static_cast<size_t>(m - 1)];
}

// Exactly `n` digits at the start of `s` (advancing it).
bool TakeFixed(std::string_view* s, size_t n, int64_t* out) {
  if (s->size() < n) return false;
  for (size_t i = 0; i < n; ++i) {
    if (!IsDigit((*s)[i])) return false;
  }
  std::from_chars(s->data(), s->data() + n, *out);
  s->remove_prefix(n);
  return true;
}

bool TakeChar(std::string_view* s, char c) {
  if (s->empty() || s->front() != c) return false;
  s->remove_prefix(1);
  return true;
}

// "YYYY-MM-DD[(T| )HH:MM[:SS][Z]]" → ms; false when it is not one.
bool ParseIsoTime(std::string_view s, int64_t* out) {
  int64_t y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (!TakeFixed(&s, 4, &y) || !TakeChar(&s, '-') || !TakeFixed(&s, 2, &mo) || !TakeChar(&s, '-') ||
      !TakeFixed(&s, 2, &d)) {
    return false;
  }
  if (!s.empty()) {
    if (!TakeChar(&s, 'T') && !TakeChar(&s, 't') && !TakeChar(&s, ' ')) return false;
    if (!TakeFixed(&s, 2, &h) || !TakeChar(&s, ':') || !TakeFixed(&s, 2, &mi)) return false;
    if (TakeChar(&s, ':') && !TakeFixed(&s, 2, &sec)) return false;
    if (!TakeChar(&s, 'Z')) TakeChar(&s, 'z');
    if (!s.empty()) return false;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > DaysInMonth(y, mo) || h > 23 || mi > 59 || sec > 59) {
    return false;
  }
  *out = (DaysFromCivil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec) * kMsPerSecond;
  return true;
}

}  // namespace

std::string FormatAge(int64_t since_ms, int64_t now_ms) {
  if (since_ms <= 0) return "-";
  const int64_t age = now_ms - since_ms;
  if (age < kMsPerSecond) return "0s";
  return FormatDurationMs(age / kMsPerSecond * kMsPerSecond);
}

std::string FormatTime(int64_t ms) {
  if (ms == 0) return "-";
  int64_t seconds = ms / kMsPerSecond;
  if (ms < 0 && ms % kMsPerSecond != 0) --seconds;  // floor
  int64_t days = seconds / 86400;
  int64_t rest = seconds % 86400;
  if (rest < 0) {
    rest += 86400;
    --days;
  }
  int64_t y = 0, m = 0, d = 0;
  CivilFromDays(days, &y, &m, &d);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ",
                static_cast<long long>(y), static_cast<long long>(m), static_cast<long long>(d),
                static_cast<long long>(rest / 3600), static_cast<long long>(rest % 3600 / 60),
                static_cast<long long>(rest % 60));
  return buf;
}

Result<int64_t> ParseTime(std::string_view text, int64_t now_ms) {
  const std::string_view s = TrimBlanks(text);
  const auto invalid = [&] {
    return InvalidArgument("invalid time '" + std::string(text) +
                           "': use now, -7d (ago), +1h (from now), 2024-05-01, "
                           "2024-05-01T12:00:00Z or milliseconds since the epoch");
  };
  if (s.empty()) return invalid();
  if (EqualsIgnoringCase(s, "now")) return now_ms;
  if (s.front() == '-' || s.front() == '+') {
    Result<int64_t> d = ParseDurationMs(s.substr(1));
    if (!d) return invalid();
    int64_t out = 0;
    const bool overflow = s.front() == '-' ? __builtin_sub_overflow(now_ms, *d, &out)
                                           : __builtin_add_overflow(now_ms, *d, &out);
    if (overflow || out < 0) return invalid();
    return out;
  }
  if (std::all_of(s.begin(), s.end(), IsDigit)) {
    std::string_view digits = s;
    int64_t ms = 0;
    if (!TakeDigits(&digits, &ms)) return invalid();
    return ms;
  }
  int64_t ms = 0;
  if (!ParseIsoTime(s, &ms) || ms < 0) return invalid();
  return ms;
}

std::string FormatMoney(int64_t micros) {
  const bool negative = micros < 0;
  const uint64_t magnitude =
      negative ? uint64_t{0} - static_cast<uint64_t>(micros) : static_cast<uint64_t>(micros);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s%llu.%06llu", negative ? "-" : "",
                static_cast<unsigned long long>(magnitude / kMicrosPerUnit),
                static_cast<unsigned long long>(magnitude % kMicrosPerUnit));
  return buf;
}

Result<int64_t> ParseMoney(std::string_view text) {
  const auto invalid = [&] {
    return InvalidArgument("invalid amount '" + std::string(text) +
                           "': use a positive number with at most six decimals, like 100 or "
                           "12.5");
  };
  std::string_view s = TrimBlanks(text);
  int64_t whole = 0;
  if (s.empty() || !IsDigit(s.front())) return invalid();
  if (!TakeDigits(&s, &whole)) return invalid();
  int64_t fraction = 0;
  if (TakeChar(&s, '.')) {
    size_t digits = 0;
    if (!TakeDigits(&s, &fraction, &digits)) return invalid();
    if (digits > 6) {
      return InvalidArgument("amount '" + std::string(text) +
                             "' has more than six decimals (the smallest unit is 0.000001)");
    }
    for (size_t i = digits; i < 6; ++i) fraction *= 10;
  }
  if (!s.empty()) return invalid();
  int64_t micros = 0;
  if (__builtin_mul_overflow(whole, kMicrosPerUnit, &micros) ||
      __builtin_add_overflow(micros, fraction, &micros)) {
    return InvalidArgument("amount '" + std::string(text) + "' is too large");
  }
  return micros;
}

Result<int64_t> ParsePricePerHour(std::string_view text) {
  std::string_view s = TrimBlanks(text);
  for (std::string_view suffix : {"/hour", "/h"}) {
    if (s.size() > suffix.size() && EqualsIgnoringCase(s.substr(s.size() - suffix.size()), suffix)) {
      s.remove_suffix(suffix.size());
      break;
    }
  }
  Result<int64_t> micros = ParseMoney(s);
  if (!micros) {
    return InvalidArgument("invalid price '" + std::string(text) +
                           "': use an amount per hour with at most six decimals, like 2.5/h");
  }
  return micros;
}

namespace {

// MiB per unit of a size; the units are binary, as docker's (`-m 16g`): G = Gi = GiB = GB.
int64_t MibPerUnit(std::string_view unit, int64_t bare) {
  if (unit.empty()) return bare;
  for (const char* u : {"m", "mi", "mib", "mb"}) {
    if (EqualsIgnoringCase(unit, u)) return 1;
  }
  for (const char* u : {"g", "gi", "gib", "gb"}) {
    if (EqualsIgnoringCase(unit, u)) return 1024;
  }
  for (const char* u : {"t", "ti", "tib", "tb"}) {
    if (EqualsIgnoringCase(unit, u)) return 1024 * 1024;
  }
  return 0;
}

// A size in MiB; a bare number counts `bare` MiB.
Result<int64_t> ParseSizeMib(std::string_view text, int64_t bare, std::string_view example) {
  const auto invalid = [&] {
    return InvalidArgument("invalid size '" + std::string(text) + "': use " + std::string(example) +
                           " or a number with a unit (512M, 16G, 1T; also Mi/MiB/MB, Gi/GiB/GB, "
                           "Ti/TiB/TB, all binary)");
  };
  std::string_view s = TrimBlanks(text);
  int64_t value = 0;
  if (s.empty() || !IsDigit(s.front())) return invalid();
  if (!TakeDigits(&s, &value)) return invalid();
  const int64_t factor = MibPerUnit(TrimBlanks(s), bare);
  if (factor == 0) return invalid();
  int64_t mib = 0;
  if (__builtin_mul_overflow(value, factor, &mib)) {
    return InvalidArgument("size '" + std::string(text) + "' is too large");
  }
  return mib;
}

}  // namespace

Result<int64_t> ParseMib(std::string_view text) { return ParseSizeMib(text, 1, "MiB (16384)"); }

Result<int64_t> ParseGib(std::string_view text) {
  Result<int64_t> mib = ParseSizeMib(text, 1024, "GiB (50)");
  if (!mib) return mib;
  return (*mib + 1023) / 1024;
}

std::string FormatNumber(double value) {
  if (std::isfinite(value) && value == std::trunc(value) && std::fabs(value) < 1e15) {
    return std::to_string(static_cast<int64_t>(value));
  }
  std::array<char, 32> buf{};
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), value);
  return ec == std::errc() ? std::string(buf.data(), end) : std::string("?");
}

Result<std::string> ParseTaskId(std::string_view text) {
  std::string id(text);
  if (!id.empty() && std::all_of(id.begin(), id.end(), IsDigit)) id = "t-" + id;
  if (Status ok = CheckIdentifier("task id", id); !ok) return tl::unexpected(ok.error());
  return id;
}

int TaskExitStatus(std::string_view state, int64_t exit_code) {
  if (state == "succeeded") return 0;
  if (state == "failed" && exit_code >= 1 && exit_code <= 255) return static_cast<int>(exit_code);
  return 1;
}

std::string FormatMib(int64_t mib) {
  if (mib == 0) return "0";
  if (mib % (1024 * 1024) == 0) return std::to_string(mib / (1024 * 1024)) + "Ti";
  if (mib % 1024 == 0) return std::to_string(mib / 1024) + "Gi";
  return std::to_string(mib) + "Mi";
}

std::string FormatMilli(int64_t milli) {
  const bool negative = milli < 0;
  const uint64_t m =
      negative ? uint64_t{0} - static_cast<uint64_t>(milli) : static_cast<uint64_t>(milli);
  std::string out = (negative ? "-" : "") + std::to_string(m / 1000);
  uint64_t fraction = m % 1000;
  if (fraction != 0) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "%03llu", static_cast<unsigned long long>(fraction));
    std::string digits = buf;
    while (digits.back() == '0') digits.pop_back();
    out += "." + digits;
  }
  return out;
}

Result<int64_t> ParseMilli(std::string_view text) {
  const auto invalid = [&] {
    return InvalidArgument("invalid number '" + std::string(text) +
                           "': use a number with at most three decimals, like 2 or 0.5");
  };
  std::string_view s = TrimBlanks(text);
  int64_t whole = 0;
  if (s.empty() || !IsDigit(s.front()) || !TakeDigits(&s, &whole)) return invalid();
  int64_t fraction = 0;
  if (TakeChar(&s, '.')) {
    size_t digits = 0;
    if (!TakeDigits(&s, &fraction, &digits) || digits > 3) return invalid();
    for (size_t i = digits; i < 3; ++i) fraction *= 10;
  }
  int64_t milli = 0;
  if (!s.empty()) return invalid();
  if (__builtin_mul_overflow(whole, int64_t{1000}, &milli) ||
      __builtin_add_overflow(milli, fraction, &milli)) {
    return InvalidArgument("number '" + std::string(text) + "' is too large");
  }
  return milli;
}

Result<int64_t> ParseInteger(std::string_view what, std::string_view text, int64_t min,
                             int64_t max) {
  std::string range;
  if (max == std::numeric_limits<int64_t>::max()) {
    range = ">= " + std::to_string(min);
  } else {
    range = "in " + std::to_string(min) + ".." + std::to_string(max);
  }
  const std::string message =
      std::string(what) + " must be an integer " + range + ", got '" + std::string(text) + "'";
  const std::string_view s = TrimBlanks(text);
  int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || value < min || value > max) {
    return InvalidArgument(message);
  }
  return value;
}

std::string FormatGpuRequest(int64_t gpu_count, int64_t gpu_milli, int64_t gpu_mem_mib,
                             std::string_view mig_profile) {
  if (!mig_profile.empty()) return std::string(mig_profile);
  if (gpu_milli > 0) {
    std::string out = FormatMilli(gpu_milli);
    if (gpu_mem_mib > 0) out += "+" + FormatMib(gpu_mem_mib);
    return out;
  }
  if (gpu_count > 0) return std::to_string(gpu_count);
  return "-";
}

Status CheckIdentifier(std::string_view what, std::string_view value) {
  const bool ok =
      !value.empty() && value.size() <= 128 && std::all_of(value.begin(), value.end(), [](char c) {
        return IsDigit(c) || IsLetter(c) || c == '-' || c == '_' || c == '.';
      });
  if (ok) return {};
  return InvalidArgument(std::string(what) +
                         " must be 1..128 characters of A-Z a-z 0-9 - _ ., got '" +
                         std::string(value) + "'");
}

std::string ShellJoin(const std::vector<std::string>& args) {
  std::string out;
  for (const std::string& a : args) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && std::all_of(a.begin(), a.end(), [](char c) {
      return IsDigit(c) || IsLetter(c) ||
             std::string_view("-_./=:,+@%").find(c) != std::string_view::npos;
    });
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) {
      if (c == '\'') {
        out += "'\\''";
      } else {
        out += c;
      }
    }
    out += '\'';
  }
  return out;
}

std::vector<std::string> SplitList(std::string_view text) {
  std::vector<std::string> out;
  while (true) {
    const size_t comma = text.find(',');
    out.emplace_back(TrimBlanks(text.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

std::string JoinList(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

std::string FewOf(const std::vector<std::string>& items) {
  if (items.empty()) return "-";
  std::string text;
  for (size_t i = 0; i < items.size() && i < 3; ++i) text += (i ? "," : "") + items[i];
  if (items.size() > 3) text += ",+" + std::to_string(items.size() - 3);
  return text;
}

size_t DisplayWidth(std::string_view text) {
  size_t width = 0;
  for (char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++width;  // not a continuation byte
  }
  return width;
}

// ------------------------------------------------------------------------------------------
// Table and Details

Table::Table(std::vector<std::string> headers)
    : headers_(std::move(headers)), right_(headers_.size(), false) {}

std::string EscapeControls(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    switch (ControlCharacterLength(text, i)) {
      case 0:
        out += text[i];
        break;
      case 1:
        out += text[i] == '\n'   ? "\\n"
               : text[i] == '\t' ? "\\t"
                                 : "\\x" + HexEncode(text.substr(i, 1));
        break;
      default:  // C1: C2 80..C2 9F is U+0080..U+009F
        out += "\\u00" + HexEncode(text.substr(++i, 1));
        break;
    }
  }
  return out;
}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  for (std::string& cell : cells) cell = EscapeControls(cell);
  rows_.push_back(std::move(cells));
}

void Table::AlignRight(size_t column) {
  if (column < right_.size()) right_[column] = true;
}

std::string Table::Render() const {
  std::vector<size_t> widths(headers_.size(), 0);
  for (size_t c = 0; c < headers_.size(); ++c) widths[c] = DisplayWidth(headers_[c]);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], DisplayWidth(row[c]));
  }
  std::string out;
  const auto render_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += "  ";
      const std::string pad(widths[c] - DisplayWidth(row[c]), ' ');
      line += right_[c] ? pad + row[c] : row[c] + pad;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  };
  render_row(headers_);
  for (const auto& row : rows_) render_row(row);
  return out;
}

void Details::Add(std::string key, std::string value) {
  if (value.empty()) return;
  lines_.emplace_back(std::move(key), EscapeControls(value));
}

std::string Details::Render() const {
  size_t width = 0;
  for (const auto& [key, value] : lines_) width = std::max(width, DisplayWidth(key) + 1);
  std::string out;
  for (const auto& [key, value] : lines_) {
    out += key + ":" + std::string(width - DisplayWidth(key), ' ') + value + "\n";
  }
  return out;
}

std::string TimeWithAge(int64_t ms, int64_t now_ms) {
  if (ms <= 0) return "";
  return FormatTime(ms) + " (" + FormatAge(ms, now_ms) + " ago)";
}

}  // namespace gpupool::cli
