// Per-second metering by price segments in exact 128-bit fractions, and usage ledger entries.
#include "meter/meter.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "core/gpu_catalog.h"

namespace gpupool::meter {
namespace {

// __extension__: -Wpedantic would otherwise reject the (GCC and Clang) 128-bit integer.
__extension__ typedef __int128 Int128;

constexpr int64_t kMsPerSecond = 1000;
// Common denominator of one second's cost: seconds per hour x milli per unit x MiB per GiB.
constexpr Int128 kCostDenominator = Int128{3600} * 1000 * 1024;

// n(t) = ceil((t - anchor) / 1000): the seconds begun by t; 0 when t <= anchor.
Int128 SecondsBegun(int64_t anchor_ms, int64_t time_ms) {
  if (time_ms <= anchor_ms) return 0;
  const Int128 elapsed_ms = Int128{time_ms} - anchor_ms;  // 128 bits: no overflow for any inputs
  return (elapsed_ms + kMsPerSecond - 1) / kMsPerSecond;
}

// The numerator of one second's cost at the rates in force at `time_ms`:
// gpu_rate * gpu_milli * 1024 + cpu_rate * cpu_milli * 1024 + memory_rate * memory_mib * 1000.
Int128 SecondNumerator(const PriceTable& prices, const Usage& usage, int64_t time_ms) {
  Int128 n = 0;
  if (usage.gpu_milli > 0) {
    n += Int128{prices.GpuRateAt(usage.gpu_model, time_ms)} * usage.gpu_milli * 1024;
  }
  if (usage.cpu_milli > 0) n += Int128{prices.RateAt(kCpu, time_ms)} * usage.cpu_milli * 1024;
  if (usage.memory_mib > 0) {
    n += Int128{prices.RateAt(kMemory, time_ms)} * usage.memory_mib * 1000;
  }
  return n;
}

// The resources whose price changes move the per-second cost of `usage`.
std::vector<std::string> PricedResources(const Usage& usage) {
  std::vector<std::string> resources;
  if (usage.gpu_milli > 0) {
    resources.emplace_back(kGpuFallback);
    if (!usage.gpu_model.empty()) resources.push_back(std::string(kGpuPrefix) + usage.gpu_model);
  }
  if (usage.cpu_milli > 0) resources.emplace_back(kCpu);
  if (usage.memory_mib > 0) resources.emplace_back(kMemory);
  return resources;
}

// sum_{k < n(time_ms)} of SecondNumerator at second k's start. Prices change only at the times
// ChangesAfter lists, so the seconds split into runs of equal cost: the run that starts at a change
// c begins with second k_c = n(c), the first second starting at or after c, and second k starts
// before the next change c' exactly when k < n(c'). Each run adds (its length) x (its numerator).
Int128 NumeratorUpTo(const PriceTable& prices, const Usage& usage, int64_t anchor_ms,
                     int64_t time_ms) {
  const Int128 seconds = SecondsBegun(anchor_ms, time_ms);
  if (seconds == 0) return 0;
  std::vector<Int128> run_starts = {0};
  for (int64_t change_ms : prices.ChangesAfter(PricedResources(usage), anchor_ms)) {
    const Int128 k = SecondsBegun(anchor_ms, change_ms);
    if (k >= seconds) break;  // changes ascend, and so do their first seconds
    if (k > run_starts.back()) run_starts.push_back(k);
  }
  run_starts.push_back(seconds);
  Int128 sum = 0;
  for (size_t i = 0; i + 1 < run_starts.size(); ++i) {
    // Second k starts at anchor + 1000k < time_ms, so this fits int64_t.
    const auto start_ms = static_cast<int64_t>(anchor_ms + run_starts[i] * kMsPerSecond);
    sum += (run_starts[i + 1] - run_starts[i]) * SecondNumerator(prices, usage, start_ms);
  }
  return sum;
}

int64_t Saturate(Int128 v) {
  constexpr Int128 kMax = std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(std::min(v, kMax));
}

// "60 s", "60.5 s", "0.25 s": the interval's length, milliseconds kept when there are any.
std::string FormatSeconds(int64_t ms) {
  std::string s = std::to_string(ms / kMsPerSecond);
  if (const int64_t frac = ms % kMsPerSecond; frac != 0) {
    std::string digits = std::to_string(frac + kMsPerSecond).substr(1);  // three digits, padded
    digits.erase(digits.find_last_not_of('0') + 1);
    s += "." + digits;
  }
  return s + " s";
}

}  // namespace

Usage UsageOf(const TaskRequest& request, const std::string& gpu_model) {
  Usage u;
  u.cpu_milli = request.cpu_milli;
  u.memory_mib = request.memory_mib;
  switch (request.Form()) {
    case GpuForm::kNone:
      break;
    case GpuForm::kWhole:
    case GpuForm::kShare:
      u.gpu_milli = request.GpuMilli();
      break;
    case GpuForm::kMig:
      u.gpu_milli = MigMilli(gpu_model, request.mig_profile);
      break;
  }
  if (u.gpu_milli > 0) u.gpu_model = CanonicalGpuModelName(gpu_model);
  return u;
}

int64_t CumulativeCostMicros(const PriceTable& prices, const Usage& usage, int64_t anchor_ms,
                             int64_t time_ms) {
  // Every term is >= 0 (the table holds only rates >= 0, quantities below 0 are skipped), so
  // integer division is the floor.
  return Saturate(NumeratorUpTo(prices, usage, anchor_ms, time_ms) / kCostDenominator);
}

int64_t CostMicros(const PriceTable& prices, const Usage& usage, int64_t anchor_ms, int64_t from_ms,
                   int64_t to_ms) {
  if (to_ms <= from_ms) return 0;
  const Int128 to = NumeratorUpTo(prices, usage, anchor_ms, to_ms) / kCostDenominator;
  const Int128 from = NumeratorUpTo(prices, usage, anchor_ms, from_ms) / kCostDenominator;
  return Saturate(to - from);
}

LedgerEntry UsageEntry(const std::string& project_id, const std::string& task_id,
                       const Usage& usage, int64_t from_ms, int64_t to_ms, int64_t cost_micros,
                       int64_t created_ms) {
  LedgerEntry e;
  e.key = task_id + ":" + std::to_string(from_ms);
  e.project_id = project_id;
  e.task_id = task_id;
  e.kind = LedgerKind::kUsage;
  e.amount_micros = cost_micros;
  e.from_ms = from_ms;
  e.to_ms = to_ms;
  if (usage.gpu_milli > 0) {
    e.detail = (usage.gpu_model.empty() ? std::string("gpu") : usage.gpu_model) + " " +
               std::to_string(usage.gpu_milli) + " milli, ";
  }
  e.detail += std::to_string(usage.cpu_milli) + " cpu milli, " + std::to_string(usage.memory_mib) +
              " MiB, " + FormatSeconds(std::max<int64_t>(to_ms - from_ms, 0));
  e.created_ms = created_ms;
  return e;
}

}  // namespace gpupool::meter
