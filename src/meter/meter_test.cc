// Tests for meter/meter: UsageOf() for each GPU form, CostMicros() per-second billing (round-up,
// price changes, fallback price, overflow), the telescoping property against a per-second
// reference, and UsageEntry().
#include "meter/meter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/task.h"

namespace gpupool::meter {
namespace {

// __extension__: -Wpedantic would otherwise reject the (GCC and Clang) 128-bit integer.
__extension__ typedef __int128 Int128;

// Round rates so that expected costs are easy to check by hand:
//   A100-80GB 3,600,000 micros/h per GPU = 1000 micros/s per GPU = 1 micro/s per milli-GPU;
//   gpu:*     7,200,000 micros/h per GPU = 2000 micros/s per GPU;
//   cpu          36,000 micros/h per core =   10 micros/s per core;
//   memory        3,600 micros/h per GiB  =    1 micro/s per GiB.
constexpr int64_t kA100PerHour = 3'600'000;
constexpr int64_t kFallbackPerHour = 7'200'000;
constexpr int64_t kCpuPerHour = 36'000;
constexpr int64_t kMemoryPerHour = 3'600;

// Prices in force since t=0; the anchor of every row is later than that.
std::vector<Price> BasePrices() {
  return {{"gpu:A100-80GB", kA100PerHour, 0},
          {"gpu:*", kFallbackPerHour, 0},
          {"cpu", kCpuPerHour, 0},
          {"memory", kMemoryPerHour, 0}};
}

constexpr int64_t kAnchor = 1'700'000'000'123;  // bound at an instant that is not a whole second
constexpr int64_t kYearMs = int64_t{365} * 24 * 3600 * 1000;

// ---------------------------------------------------------------------------------------------
// UsageOf.

struct UsageRow {
  const char* name;
  TaskRequest request;
  const char* gpu_model;
  Usage want;
};
void PrintTo(const UsageRow& row, std::ostream* os) { *os << row.name; }

TaskRequest Request(int64_t cpu_milli, int64_t memory_mib, int gpu_count, int32_t gpu_milli,
                    const char* mig_profile) {
  TaskRequest r;
  r.cpu_milli = cpu_milli;
  r.memory_mib = memory_mib;
  r.gpu_count = gpu_count;
  r.gpu_milli = gpu_milli;
  r.mig_profile = mig_profile;
  return r;
}

class UsageOfTest : public testing::TestWithParam<UsageRow> {};

TEST_P(UsageOfTest, Usage) {
  const UsageRow& row = GetParam();
  EXPECT_EQ(UsageOf(row.request, row.gpu_model), row.want);
}

INSTANTIATE_TEST_SUITE_P(
    Forms, UsageOfTest,
    testing::ValuesIn(std::vector<UsageRow>{
        // Whole GPUs: 1000 milli each.
        {"whole_2", Request(8000, 32768, 2, 0, ""), "A100-80GB", {"A100-80GB", 2000, 8000, 32768}},
        // A fractional share: the share itself.
        {"share_250", Request(1000, 4096, 0, 250, ""), "A100-80GB", {"A100-80GB", 250, 1000, 4096}},
        // MIG: compute slices / total, rounded down: 3g.40gb on A100-80GB = 3000/7 = 428.57 -> 428.
        {"mig_a100_3g",
         Request(4000, 16384, 0, 0, "3g.40gb"),
         "A100-80GB",
         {"A100-80GB", 428, 4000, 16384}},
        // 1g.6gb on A30 = 1000/4 = 250.
        {"mig_a30_1g", Request(0, 0, 0, 0, "1g.6gb"), "A30-24GB", {"A30-24GB", 250, 0, 0}},
        // The model is stored under its canonical name.
        {"alias_model",
         Request(0, 0, 1, 0, ""),
         "NVIDIA A100-SXM4-80GB",
         {"A100-80GB", 1000, 0, 0}},
        {"opaque_model", Request(0, 0, 1, 0, ""), "G2", {"G2", 1000, 0, 0}},
        // No GPU held: no model either, whatever the node has.
        {"cpu_only", Request(2000, 1024, 0, 0, ""), "A100-80GB", {"", 0, 2000, 1024}},
    }),
    [](const testing::TestParamInfo<UsageRow>& row_info) {
      return std::string(row_info.param.name);
    });

// ---------------------------------------------------------------------------------------------
// CostMicros: one interval per row.

struct CostRow {
  const char* name;
  std::vector<Price> prices;
  Usage usage;
  int64_t from_ms;  // relative to kAnchor
  int64_t to_ms;    // relative to kAnchor
  int64_t want_micros;
};
void PrintTo(const CostRow& row, std::ostream* os) { *os << row.name; }

class CostTest : public testing::TestWithParam<CostRow> {};

TEST_P(CostTest, Micros) {
  const CostRow& row = GetParam();
  const PriceTable table(row.prices);
  EXPECT_EQ(CostMicros(table, row.usage, kAnchor, kAnchor + row.from_ms, kAnchor + row.to_ms),
            row.want_micros);
}

std::vector<Price> With(std::vector<Price> prices, const std::vector<Price>& more) {
  prices.insert(prices.end(), more.begin(), more.end());
  return prices;
}

INSTANTIATE_TEST_SUITE_P(
    Intervals, CostTest,
    testing::ValuesIn(std::vector<CostRow>{
        // 2 GPUs x 1000 micros/s x 60 s = 120,000.
        {"whole_gpus", BasePrices(), {"A100-80GB", 2000, 0, 0}, 0, 60'000, 120'000},
        // GPU 120,000 + cpu 8 cores x 10 x 60 = 4,800 + memory 32 GiB x 1 x 60 = 1,920.
        {"whole_gpus_cpu_memory",
         BasePrices(),
         {"A100-80GB", 2000, 8000, 32768},
         0,
         60'000,
         126'720},
        // 250 milli x 1 micro/s/milli x 60 s = 15,000.
        {"fractional_share", BasePrices(), {"A100-80GB", 250, 0, 0}, 0, 60'000, 15'000},
        // MIG 3g.40gb on A100-80GB: 428 milli x 1 x 60 s = 25,680.
        {"mig_slice_share", BasePrices(), {"A100-80GB", 428, 0, 0}, 0, 60'000, 25'680},
        // H100 has no price of its own: gpu:* at 2000 micros/s x 1 GPU x 10 s = 20,000.
        {"fallback_price", BasePrices(), {"H100-80GB", 1000, 0, 0}, 0, 10'000, 20'000},
        {"fallback_for_opaque_model", BasePrices(), {"G2", 500, 0, 0}, 0, 10'000, 10'000},
        // No gpu:* and no own price: the GPU is free, CPU is still charged (1 core x 10 x 10 s).
        {"no_price_in_force",
         {{"cpu", kCpuPerHour, 0}},
         {"H100-80GB", 1000, 1000, 0},
         0,
         10'000,
         100},
        // The A100 price doubles at anchor + 30.5 s. Seconds 0..30 start before it (second 30
        // starts at +30.0 s): 31 x 1000; seconds 31..59 at the new rate: 29 x 2000. 89,000.
        {"price_change_mid_interval",
         With(BasePrices(), {{"gpu:A100-80GB", 2 * kA100PerHour, kAnchor + 30'500}}),
         {"A100-80GB", 1000, 0, 0},
         0,
         60'000,
         89'000},
        // A change exactly at a second's start applies to that second: 30 x 1000 + 30 x 2000.
        {"price_change_at_second_start",
         With(BasePrices(), {{"gpu:A100-80GB", 2 * kA100PerHour, kAnchor + 30'000}}),
         {"A100-80GB", 1000, 0, 0},
         0,
         60'000,
         90'000},
        // CPU is only priced from +10 s: seconds 10..59, 50 x 10 = 500.
        {"price_starts_mid_interval",
         {{"cpu", kCpuPerHour, kAnchor + 10'000}},
         {"", 0, 1000, 0},
         0,
         60'000,
         500},
        // A model's own price starting later: gpu:* (2000/s) for seconds 0..9, then 1000/s for
        // seconds 10..19: 20,000 + 10,000.
        {"own_price_starts_later",
         {{"gpu:*", kFallbackPerHour, 0}, {"gpu:A100-80GB", kA100PerHour, kAnchor + 10'000}},
         {"A100-80GB", 1000, 0, 0},
         0,
         20'000,
         30'000},
        // Partly used seconds are billed in full: 1 ms begins second 0 (1000).
        {"round_up_one_ms", BasePrices(), {"A100-80GB", 1000, 0, 0}, 0, 1, 1'000},
        // 1001 ms begins seconds 0 and 1: 2000.
        {"round_up_1001_ms", BasePrices(), {"A100-80GB", 1000, 0, 0}, 0, 1'001, 2'000},
        // [+0.5 s, +1.5 s): F(+1.5 s) = 2 seconds, F(+0.5 s) = 1 second; 1000.
        {"round_up_unaligned", BasePrices(), {"A100-80GB", 1000, 0, 0}, 500, 1'500, 1'000},
        // [+0.2 s, +0.7 s): second 0 was already billed by F(+0.2 s): 0.
        {"within_a_billed_second", BasePrices(), {"A100-80GB", 1000, 0, 0}, 200, 700, 0},
        // Time before the anchor is not billed: [-5 s, +1 s) is second 0 only.
        {"before_anchor", BasePrices(), {"A100-80GB", 1000, 0, 0}, -5'000, 1'000, 1'000},
        {"entirely_before_anchor", BasePrices(), {"A100-80GB", 1000, 0, 0}, -5'000, 0, 0},
        {"zero_length", BasePrices(), {"A100-80GB", 1000, 8000, 1024}, 7'000, 7'000, 0},
        {"backwards", BasePrices(), {"A100-80GB", 1000, 8000, 1024}, 9'000, 7'000, 0},
        // Fractions of a micro accumulate exactly: 1 cpu milli costs
        // 36,000 x 1 x 1024 / (3600 x 1000 x 1024) = 0.01 micro/s. F(60 s) = floor(0.6) = 0.
        {"sub_micro_60_s", BasePrices(), {"", 0, 1, 0}, 0, 60'000, 0},
        // F(100 s) = floor(1.00) = 1.
        {"sub_micro_100_s", BasePrices(), {"", 0, 1, 0}, 0, 100'000, 1},
        // F(250 s) - F(150 s) = floor(2.5) - floor(1.5) = 1.
        {"sub_micro_floor_of_cumulative", BasePrices(), {"", 0, 1, 0}, 150'000, 250'000, 1},
        // 1 MiB: 3600 x 1 x 1000 / 3,686,400,000 = 1/1024 micro/s; 1024 s -> exactly 1.
        {"memory_one_mib", BasePrices(), {"", 0, 0, 1}, 0, 1'024'000, 1},
        {"memory_one_mib_short", BasePrices(), {"", 0, 0, 1}, 0, 1'023'000, 0},
        // A year of 8 A100s: 8000 micros/s x 31,536,000 s = 252,288,000,000.
        {"year_8_gpus", BasePrices(), {"A100-80GB", 8000, 0, 0}, 0, kYearMs, 252'288'000'000},
        // A year at 10^12 micros/h per GPU, 8 GPUs: the numerator
        // 10^12 x 8000 x 1024 x 31,536,000 = 2.6e26 overflows int64 but not __int128;
        // cost = 10^12 x 8 x 8760 h = 70,080,000,000,000,000.
        {"year_huge_rate",
         {{"gpu:*", 1'000'000'000'000, 0}},
         {"A100-80GB", 8000, 0, 0},
         0,
         kYearMs,
         70'080'000'000'000'000},
        // Negative quantities count as nothing.
        {"negative_quantities", BasePrices(), {"A100-80GB", -1000, -1000, -1024}, 0, 60'000, 0},
    }),
    [](const testing::TestParamInfo<CostRow>& row_info) {
      return std::string(row_info.param.name);
    });

TEST(CostMicros, FarFutureTimesDoNotOverflow) {
  // Anchor at 0, time near the end of int64 milliseconds (292 million years): saturates or
  // computes, but never wraps negative.
  const PriceTable table({{"gpu:*", 1'000'000'000'000, 0}});
  const Usage usage{"G2", 8000, 0, 0};
  const int64_t max = std::numeric_limits<int64_t>::max();
  EXPECT_GT(CostMicros(table, usage, 0, 0, max), 0);
  EXPECT_EQ(CostMicros(table, usage, max - 10, max - 10, max), 8 * 1'000'000'000'000 / 3600);
  EXPECT_EQ(CumulativeCostMicros(table, usage, 0, max), max);  // saturated
}

// ---------------------------------------------------------------------------------------------
// Telescoping: any split of an interval costs what the whole interval costs, and every cost is
// the per-second definition, checked against a plain loop over the seconds.

// Awkward quantities (no cost is a whole number of micros per second) and prices that change at
// odd times, including a GPU model price that starts late and a free period for memory.
std::vector<Price> AwkwardPrices() {
  return {{"gpu:*", 2'345'679, 0},
          {"gpu:A100-80GB", 3'123'457, kAnchor + 1'234'567},
          {"gpu:A100-80GB", 2'987'653, kAnchor + 3'000'001},
          {"cpu", 41'111, kAnchor - 50'000},
          {"cpu", 39'999, kAnchor + 777'777},
          {"memory", 5'113, 0},
          {"memory", 0, kAnchor + 2'000'500},
          {"memory", 6'007, kAnchor + 2'500'999}};
}
Usage Awkward() { return {"A100-80GB", 333, 1'234, 777}; }

// The definition, one second at a time: floor(sum of numerators / (3600 x 1000 x 1024)).
int64_t ReferenceCumulative(const PriceTable& table, const Usage& u, int64_t t_ms) {
  if (t_ms <= kAnchor) return 0;
  const int64_t seconds = (t_ms - kAnchor + 999) / 1000;
  Int128 sum = 0;
  for (int64_t k = 0; k < seconds; ++k) {
    const int64_t start = kAnchor + 1000 * k;
    sum += Int128{table.GpuRateAt(u.gpu_model, start)} * u.gpu_milli * 1024 +
           Int128{table.RateAt("cpu", start)} * u.cpu_milli * 1024 +
           Int128{table.RateAt("memory", start)} * u.memory_mib * 1000;
  }
  return static_cast<int64_t>(sum / (int64_t{3600} * 1000 * 1024));
}

TEST(Telescoping, CumulativeMatchesThePerSecondDefinition) {
  const PriceTable table(AwkwardPrices());
  std::mt19937_64 rng(20240611);
  for (int i = 0; i < 200; ++i) {
    const int64_t t = kAnchor - 2'000 + static_cast<int64_t>(rng() % 3'600'000);  // up to 1 h
    ASSERT_EQ(CumulativeCostMicros(table, Awkward(), kAnchor, t),
              ReferenceCumulative(table, Awkward(), t))
        << "t = anchor + " << t - kAnchor << " ms";
  }
}

TEST(Telescoping, RandomSplitsCostWhatTheWholeIntervalCosts) {
  const PriceTable table(AwkwardPrices());
  std::mt19937_64 rng(7);  // fixed seed: the splits are the same on every run
  const int64_t from = kAnchor - 1'500;
  const int64_t to = kAnchor + 3'600'000 + 437;
  const int64_t whole = CostMicros(table, Awkward(), kAnchor, from, to);
  EXPECT_EQ(whole, ReferenceCumulative(table, Awkward(), to));
  EXPECT_GT(whole, 0);
  for (int trial = 0; trial < 50; ++trial) {
    // Metering at random instants: every 1 ms to 5 minutes, as a meter that runs late would.
    int64_t sum = 0;
    int pieces = 0;
    for (int64_t a = from; a < to; ++pieces) {
      const int64_t b = std::min(to, a + 1 + static_cast<int64_t>(rng() % 300'000));
      const int64_t cost = CostMicros(table, Awkward(), kAnchor, a, b);
      ASSERT_GE(cost, 0);
      sum += cost;
      a = b;
    }
    ASSERT_EQ(sum, whole) << "trial " << trial << " in " << pieces << " pieces";
  }
}

TEST(Telescoping, MinuteMeteringOverAMonthLosesNothing) {
  // Metering every minute for 30 days (43,200 calls), with a release at an odd instant.
  const PriceTable table(AwkwardPrices());
  const int64_t release = kAnchor + int64_t{30} * 24 * 3600 * 1000 + 12'345;
  int64_t sum = 0;
  for (int64_t a = kAnchor; a < release;) {
    const int64_t b = std::min(release, a + 60'000);
    sum += CostMicros(table, Awkward(), kAnchor, a, b);
    a = b;
  }
  EXPECT_EQ(sum, CostMicros(table, Awkward(), kAnchor, kAnchor, release));
}

// ---------------------------------------------------------------------------------------------
// UsageEntry.

struct EntryRow {
  const char* name;
  Usage usage;
  int64_t length_ms;
  const char* detail;
};
void PrintTo(const EntryRow& row, std::ostream* os) { *os << row.name; }

class UsageEntryTest : public testing::TestWithParam<EntryRow> {};

TEST_P(UsageEntryTest, Entry) {
  const EntryRow& row = GetParam();
  const int64_t from = 1'700'000'060'000;
  const LedgerEntry e =
      UsageEntry("p-1", "t-42", row.usage, from, from + row.length_ms, 1234, 1'700'000'200'000);
  EXPECT_EQ(e.key, "t-42:1700000060000");
  EXPECT_EQ(e.project_id, "p-1");
  EXPECT_EQ(e.task_id, "t-42");
  EXPECT_EQ(e.kind, LedgerKind::kUsage);
  EXPECT_EQ(e.amount_micros, 1234);
  EXPECT_EQ(e.from_ms, from);
  EXPECT_EQ(e.to_ms, from + row.length_ms);
  EXPECT_EQ(e.created_ms, 1'700'000'200'000);
  EXPECT_EQ(e.detail, row.detail);
}

INSTANTIATE_TEST_SUITE_P(
    Details, UsageEntryTest,
    testing::ValuesIn(std::vector<EntryRow>{
        {"whole_gpus",
         {"A100-80GB", 2000, 8000, 32768},
         60'000,
         "A100-80GB 2000 milli, 8000 cpu milli, 32768 MiB, 60 s"},
        {"mig",
         {"A100-80GB", 428, 4000, 16384},
         60'000,
         "A100-80GB 428 milli, 4000 cpu milli, 16384 MiB, 60 s"},
        {"cpu_only", {"", 0, 2000, 1024}, 60'000, "2000 cpu milli, 1024 MiB, 60 s"},
        {"model_unknown", {"", 500, 0, 0}, 1'000, "gpu 500 milli, 0 cpu milli, 0 MiB, 1 s"},
        {"partial_second", {"G2", 1000, 0, 0}, 60'500, "G2 1000 milli, 0 cpu milli, 0 MiB, 60.5 s"},
        {"milliseconds", {"G2", 1000, 0, 0}, 5, "G2 1000 milli, 0 cpu milli, 0 MiB, 0.005 s"},
    }),
    [](const testing::TestParamInfo<EntryRow>& row_info) {
      return std::string(row_info.param.name);
    });

}  // namespace
}  // namespace gpupool::meter
