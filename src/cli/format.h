// Pure text helpers of the CLI: parsing what people type (times, sizes, money) and formatting
// what the API returns (aligned tables, ages, ISO times, money in micros). Durations are
// core/duration.h's (included here for the commands). No I/O; every function is deterministic
// (the current time is a parameter).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/bytes.h"  // FormatBytes, which the CLI prints sizes with
#include "core/duration.h"
#include "core/result.h"

namespace gpupool::cli {

// The age of something created at `since_ms`, coarse ("3m12s", "2d4h"; "0s" under a second).
std::string FormatAge(int64_t since_ms, int64_t now_ms);

// Milliseconds since the epoch → "2024-05-01T12:00:00Z" (UTC); 0 → "-".
std::string FormatTime(int64_t ms);

// A point in time: "now", "-7d" (ago), "+1h" (from now), "2024-05-01" (UTC midnight),
// "2024-05-01T12:00[:00][Z]", or milliseconds since the epoch.
Result<int64_t> ParseTime(std::string_view text, int64_t now_ms);

// Micros → "12.345678" (six decimals, currency-agnostic), "-0.500000".
std::string FormatMoney(int64_t micros);
// "12", "12.5", "0.000001" → micros; at most six decimals, no sign.
Result<int64_t> ParseMoney(std::string_view text);

// A price per hour in currency units: "2.5/h", "2.5/hour" or "2.5" → micros per hour.
Result<int64_t> ParsePricePerHour(std::string_view text);

// MiB: "16384", "512M", "16G", "1T" (also Mi/MiB/MB, Gi/GiB/GB, Ti/TiB/TB; every unit binary,
// as docker's) → MiB.
Result<int64_t> ParseMib(std::string_view text);
// GiB: "50", or a size with a unit as ParseMib ("50G", "500M") → GiB, rounded up.
Result<int64_t> ParseGib(std::string_view text);
// MiB → "16Gi" when a whole number of GiB, else "512Mi"; 0 → "0".
std::string FormatMib(int64_t mib);

// Milli-units (CPU, GPU) → "2", "0.5", "1.25".
std::string FormatMilli(int64_t milli);
// "2", "0.5", "1.125" (at most three decimals, no sign) → milli-units.
Result<int64_t> ParseMilli(std::string_view text);

// A metric's value for people: integral values without a fraction ("6", not "6.0"), others in
// the shortest form that reads back as the same double ("0.953", "1e-07").
std::string FormatNumber(double value);

// A decimal integer within [min, max]; the message names `what` ("--gpus must be …").
Result<int64_t> ParseInteger(std::string_view what, std::string_view text, int64_t min,
                             int64_t max);

// What a task asks of GPUs, for a table cell: "2", "0.5", "0.5+8Gi", "3g.40gb", "-".
std::string FormatGpuRequest(int64_t gpu_count, int64_t gpu_milli, int64_t gpu_mem_mib,
                             std::string_view mig_profile);

// An id or name the API takes in a path or query: 1..128 of A-Z a-z 0-9 - _ . (the message names
// `what`: "task id must be …").
Status CheckIdentifier(std::string_view what, std::string_view value);

// A task id as people type it: "t-42", or the bare number "42" (→ "t-42"); checked as
// CheckIdentifier("task id", …).
Result<std::string> ParseTaskId(std::string_view text);
// "2026-12-07 14:05:09 (3m ago)"; "" for 0.
std::string TimeWithAge(int64_t ms, int64_t now_ms);

// The exit status of a command that waited for a task (`wait`, `logs -f`): 0 when it
// succeeded, its exit code (1..255) when it failed with one, else 1 (failed without a code,
// stopped, lost).
int TaskExitStatus(std::string_view state, int64_t exit_code);

// A command line for display: arguments joined by spaces, single-quoted when they need it.
std::string ShellJoin(const std::vector<std::string>& args);

// Splits "a,b, c" on commas, trimming blanks; empty pieces are kept as "" for the caller to
// refuse.
std::vector<std::string> SplitList(std::string_view text);
// The reverse: items joined by `separator` ("a,b"); "" for none.
std::string JoinList(const std::vector<std::string>& items, std::string_view separator = ",");
// A table cell of a list: its first three items and how many more ("t-1,t-2,t-3,+2"); "-" for none.
std::string FewOf(const std::vector<std::string>& items);

// Text as a terminal may show it: control characters (C0, DEL, C1) written as visible escapes
// (\n, \t, \x1b, \u009b), so a name a tenant stored cannot move the cursor or forge rows on
// the terminal of whoever lists it. Every table cell and detail value goes through it.
std::string EscapeControls(std::string_view text);

// An aligned text table: a header row, then rows; columns separated by two spaces, cells padded
// to the widest (UTF-8 aware), no trailing blanks. Missing cells are blank, extra cells dropped.
class Table {
 public:
  explicit Table(std::vector<std::string> headers);
  void AddRow(std::vector<std::string> cells);
  // Right-aligns a column (numbers, money).
  void AlignRight(size_t column);
  size_t rows() const { return rows_.size(); }
  std::string Render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

// Key/value lines ("Name:      train"), keys padded to the widest; empty values are skipped.
class Details {
 public:
  void Add(std::string key, std::string value);
  std::string Render() const;

 private:
  std::vector<std::pair<std::string, std::string>> lines_;
};

// The display width of UTF-8 text: code points (every one counts one column).
size_t DisplayWidth(std::string_view text);

}  // namespace gpupool::cli
