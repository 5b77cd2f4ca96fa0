// Tests for server/metric_history: appends and re-sent samples, ring wrap-around, one-minute
// aggregation (boundaries, rounding, unknown values), query ranges, and the memory bound.
#include "server/metric_history.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace gpupool::server {
namespace {

using Point = HistoryPoint<usage::kGauges>;

constexpr int64_t kT0 = 1'700'000'040'000;  // a minute boundary

Sample<usage::kGauges> At(int64_t time_ms, int64_t cpu, int64_t mem = 0, int64_t util = kUnknown,
                          int64_t gpu_mem = 0) {
  return {time_ms, {cpu, mem, util, gpu_mem}};
}

std::vector<int64_t> Times(const std::vector<Point>& points) {
  std::vector<int64_t> out;
  for (const Point& p : points) out.push_back(p.time_ms);
  return out;
}

TEST(MetricSeriesTest, EmptySeriesHasNothing) {
  const UsageSeries s;
  EXPECT_FALSE(s.Latest());
  EXPECT_TRUE(s.Points(0, INT64_MAX, Resolution::kRaw).empty());
  EXPECT_TRUE(s.Points(0, INT64_MAX, Resolution::kMinute).empty());
}

TEST(MetricSeriesTest, AppendsAndReturnsTheLatest) {
  UsageSeries s;
  EXPECT_TRUE(s.Append(At(kT0, 100, 512, 40, 1024)));
  EXPECT_TRUE(s.Append(At(kT0 + 1000, 200, 600, 50, 2048)));
  EXPECT_EQ(s.Latest(), At(kT0 + 1000, 200, 600, 50, 2048));
  const std::vector<Point> raw = s.Points(kT0, kT0 + 1000, Resolution::kRaw);
  ASSERT_EQ(raw.size(), 2u);
  EXPECT_EQ(raw[0], (Point{kT0, {100, 512, 40, 1024}, {100, 512, 40, 1024}, 1}));
  EXPECT_EQ(raw[1], (Point{kT0 + 1000, {200, 600, 50, 2048}, {200, 600, 50, 2048}, 1}));
}

TEST(MetricSeriesTest, IgnoresSamplesNotNewerThanTheLatest) {
  UsageSeries s;
  ASSERT_TRUE(s.Append(At(kT0, 100)));
  ASSERT_TRUE(s.Append(At(kT0 + 2000, 300)));
  // An agent re-sending its batch after a retry, and a late sample.
  EXPECT_FALSE(s.Append(At(kT0, 100)));
  EXPECT_FALSE(s.Append(At(kT0 + 2000, 999)));
  EXPECT_FALSE(s.Append(At(kT0 + 1000, 999)));
  EXPECT_EQ(s.Latest(), At(kT0 + 2000, 300));
  EXPECT_EQ(Times(s.Points(0, INT64_MAX, Resolution::kRaw)),
            (std::vector<int64_t>{kT0, kT0 + 2000}));
  const std::vector<Point> minute = s.Points(0, INT64_MAX, Resolution::kMinute);
  ASSERT_EQ(minute.size(), 1u);
  EXPECT_EQ(minute[0].samples, 2);
  EXPECT_EQ(minute[0].mean[usage::kCpuMilli], 200);
  EXPECT_TRUE(s.Append(At(kT0 + 2001, 0)));
}

TEST(MetricSeriesTest, RawRingKeepsTheNewestSamplesInOrderAcrossWrapAround) {
  UsageSeries s({.raw_capacity = 5, .minute_capacity = 10});
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(s.Append(At(kT0 + i * 1000, i)));
  EXPECT_EQ(s.raw_size(), 5u);
  const std::vector<Point> raw = s.Points(0, INT64_MAX, Resolution::kRaw);
  EXPECT_EQ(Times(raw),
            (std::vector<int64_t>{kT0 + 7000, kT0 + 8000, kT0 + 9000, kT0 + 10000, kT0 + 11000}));
  EXPECT_EQ(raw.back().mean[usage::kCpuMilli], 11);
  // A range inside the wrapped ring.
  EXPECT_EQ(Times(s.Points(kT0 + 8500, kT0 + 10000, Resolution::kRaw)),
            (std::vector<int64_t>{kT0 + 9000, kT0 + 10000}));
  // Older samples are gone from raw, not from the minute aggregate.
  const std::vector<Point> minute = s.Points(0, INT64_MAX, Resolution::kMinute);
  ASSERT_EQ(minute.size(), 1u);
  EXPECT_EQ(minute[0].samples, 12);
  EXPECT_EQ(minute[0].max[usage::kCpuMilli], 11);
}

TEST(MetricSeriesTest, MinutesStartOnTheMinuteAndCloseAtTheNext) {
  UsageSeries s;
  ASSERT_TRUE(s.Append(At(kT0, 10)));            // first millisecond of minute 0
  ASSERT_TRUE(s.Append(At(kT0 + 59'999, 20)));   // last millisecond of minute 0
  ASSERT_TRUE(s.Append(At(kT0 + 60'000, 30)));   // first of minute 1
  ASSERT_TRUE(s.Append(At(kT0 + 185'000, 40)));  // minute 3; minute 2 had no samples
  const std::vector<Point> minutes = s.Points(0, INT64_MAX, Resolution::kMinute);
  ASSERT_EQ(minutes.size(), 3u);
  EXPECT_EQ(Times(minutes), (std::vector<int64_t>{kT0, kT0 + 60'000, kT0 + 180'000}));
  EXPECT_EQ(minutes[0].samples, 2);
  EXPECT_EQ(minutes[0].mean[usage::kCpuMilli], 15);
  EXPECT_EQ(minutes[0].max[usage::kCpuMilli], 20);
  EXPECT_EQ(minutes[1].samples, 1);
  EXPECT_EQ(minutes[1].mean[usage::kCpuMilli], 30);
  EXPECT_EQ(minutes[2].samples, 1);  // the current minute, unfinished
  EXPECT_EQ(s.minute_size(), 2u);    // finished ones
}

TEST(MetricSeriesTest, MinuteMeanRoundsToNearest) {
  const struct {
    std::vector<int64_t> values;
    int64_t mean;
  } rows[] = {
      {{1, 2}, 2},        // 1.5
      {{1, 1, 2}, 1},     // 1.33
      {{1, 2, 2}, 2},     // 1.67
      {{0, 0, 0, 1}, 0},  // 0.25
      {{100, 200, 301}, 200},
      {{7}, 7},
  };
  for (const auto& r : rows) {
    UsageSeries s;
    for (size_t i = 0; i < r.values.size(); ++i) {
      ASSERT_TRUE(s.Append(At(kT0 + static_cast<int64_t>(i) * 1000, r.values[i])));
    }
    const std::vector<Point> m = s.Points(kT0, kT0, Resolution::kMinute);
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].mean[usage::kCpuMilli], r.mean) << ::testing::PrintToString(r.values);
  }
}

TEST(MetricSeriesTest, UnknownValuesAreLeftOutOfTheAggregate) {
  UsageSeries s;
  ASSERT_TRUE(s.Append(At(kT0, 100, 1000, kUnknown, 0)));
  ASSERT_TRUE(s.Append(At(kT0 + 1000, 300, 3000, 80, 0)));
  ASSERT_TRUE(s.Append(At(kT0 + 2000, kUnknown, 2000, kUnknown, 0)));
  ASSERT_TRUE(s.Append(At(kT0 + 3000, 200, 500, -7, 0)));  // any negative value is unknown
  // A minute where GPU utilisation was never known.
  ASSERT_TRUE(s.Append(At(kT0 + 60'000, 50, 100, kUnknown, 0)));
  const std::vector<Point> m = s.Points(0, INT64_MAX, Resolution::kMinute);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].samples, 4);
  EXPECT_EQ(m[0].mean, (std::array<int64_t, 4>{200, 1625, 80, 0}));
  EXPECT_EQ(m[0].max, (std::array<int64_t, 4>{300, 3000, 80, 0}));
  EXPECT_EQ(m[1].mean[usage::kGpuUtilPct], kUnknown);
  EXPECT_EQ(m[1].max[usage::kGpuUtilPct], kUnknown);
  // Raw points keep what was sent.
  EXPECT_EQ(s.Points(kT0 + 2000, kT0 + 2000, Resolution::kRaw)[0].mean[usage::kCpuMilli], kUnknown);
}

TEST(MetricSeriesTest, QueryRanges) {
  UsageSeries s;
  for (int64_t t = 0; t < 240; t += 10) ASSERT_TRUE(s.Append(At(kT0 + t * 1000, t)));
  const struct {
    int64_t from_s;
    int64_t to_s;
    Resolution resolution;
    std::vector<int64_t> times_s;  // relative to kT0
  } rows[] = {
      // Raw: both ends inclusive.
      {50, 80, Resolution::kRaw, {50, 60, 70, 80}},
      {51, 79, Resolution::kRaw, {60, 70}},
      {230, 1000, Resolution::kRaw, {230}},
      {-100, 0, Resolution::kRaw, {0}},
      {231, 1000, Resolution::kRaw, {}},
      {80, 50, Resolution::kRaw, {}},
      // One minute: every minute overlapping the range, the unfinished last one included.
      {0, 0, Resolution::kMinute, {0}},
      {59, 60, Resolution::kMinute, {0, 60}},
      {60, 60, Resolution::kMinute, {60}},
      {61, 119, Resolution::kMinute, {60}},
      {0, 1000, Resolution::kMinute, {0, 60, 120, 180}},
      {185, 185, Resolution::kMinute, {180}},
      {-1000, -1, Resolution::kMinute, {}},
      {240, 1000, Resolution::kMinute, {}},
      {120, 60, Resolution::kMinute, {}},
  };
  for (const auto& r : rows) {
    std::vector<int64_t> want;
    for (int64_t t : r.times_s) want.push_back(kT0 + t * 1000);
    EXPECT_EQ(Times(s.Points(kT0 + r.from_s * 1000, kT0 + r.to_s * 1000, r.resolution)), want)
        << r.from_s << ".." << r.to_s << (r.resolution == Resolution::kRaw ? " raw" : " 1m");
  }
}

TEST(MetricSeriesTest, MemoryStaysWithinTheCapacities) {
  UsageSeries s({.raw_capacity = 4, .minute_capacity = 3});
  for (int64_t t = 0; t < 10 * 60; ++t) ASSERT_TRUE(s.Append(At(kT0 + t * 1000, t)));
  EXPECT_EQ(s.raw_size(), 4u);
  EXPECT_EQ(s.minute_size(), 3u);
  // The three newest finished minutes and the current one.
  EXPECT_EQ(Times(s.Points(0, INT64_MAX, Resolution::kMinute)),
            (std::vector<int64_t>{kT0 + 6 * 60'000, kT0 + 7 * 60'000, kT0 + 8 * 60'000,
                                  kT0 + 9 * 60'000}));
  EXPECT_EQ(Times(s.Points(0, INT64_MAX, Resolution::kRaw)),
            (std::vector<int64_t>{kT0 + 596'000, kT0 + 597'000, kT0 + 598'000, kT0 + 599'000}));
}

TEST(MetricSeriesTest, DefaultsHoldFiveMinutesRawAndADayOfMinutes) {
  UsageSeries s;
  const int64_t seconds = 25 * 3600;  // a day and an hour at 1 Hz
  for (int64_t t = 0; t < seconds; ++t) ASSERT_TRUE(s.Append(At(kT0 + t * 1000, t % 100)));
  EXPECT_EQ(s.raw_size(), 300u);
  EXPECT_EQ(s.minute_size(), 1440u);
  const std::vector<Point> raw = s.Points(0, INT64_MAX, Resolution::kRaw);
  EXPECT_EQ(raw.front().time_ms, kT0 + (seconds - 300) * 1000);
  const std::vector<Point> minutes = s.Points(0, INT64_MAX, Resolution::kMinute);
  ASSERT_EQ(minutes.size(), 1441u);
  EXPECT_EQ(minutes.front().time_ms, kT0 + (seconds - 1441 * 60) * 1000);
  EXPECT_EQ(minutes.front().samples, 60);
}

TEST(MetricSeriesTest, MinutesBeforeTheEpochRoundDown) {
  UsageSeries s;
  ASSERT_TRUE(s.Append(At(-1, 1)));
  ASSERT_TRUE(s.Append(At(0, 2)));
  EXPECT_EQ(Times(s.Points(INT64_MIN, INT64_MAX, Resolution::kMinute)),
            (std::vector<int64_t>{-60'000, 0}));
}

TEST(MetricSeriesTest, GpuSeriesHasItsOwnGauges) {
  GpuSeries s;
  ASSERT_TRUE(s.Append({kT0, {90, 40'000}}));
  ASSERT_TRUE(s.Append({kT0 + 1000, {kUnknown, 42'000}}));
  const std::vector<HistoryPoint<gpu_usage::kGauges>> m = s.Points(kT0, kT0, Resolution::kMinute);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].mean, (std::array<int64_t, 2>{90, 41'000}));
  EXPECT_EQ(m[0].max, (std::array<int64_t, 2>{90, 42'000}));
}

TEST(RingTest, WrapsAtItsCapacity) {
  Ring<int> ring(3);
  for (int i = 1; i <= 7; ++i) ring.Push(i);
  ASSERT_EQ(ring.size(), 3u);
  EXPECT_EQ(ring[0], 5);
  EXPECT_EQ(ring[1], 6);
  EXPECT_EQ(ring[2], 7);
  EXPECT_EQ(ring.back(), 7);
  const auto key = [](int v) { return static_cast<int64_t>(v); };
  EXPECT_EQ(ring.LowerBound(0, key), 0u);
  EXPECT_EQ(ring.LowerBound(6, key), 1u);
  EXPECT_EQ(ring.LowerBound(8, key), 3u);
  EXPECT_EQ(Ring<int>(0).capacity(), 1u);  // a zero capacity holds one
}

TEST(ParseResolutionTest, RawOrOneMinute) {
  EXPECT_EQ(ParseResolution("raw"), Resolution::kRaw);
  EXPECT_EQ(ParseResolution("1m"), Resolution::kMinute);
  for (const char* text : {"", "1s", "RAW", "60s", "1h"}) {
    Result<Resolution> r = ParseResolution(text);
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().message, "resolution must be raw or 1m, got '" + std::string(text) + "'");
  }
}

}  // namespace
}  // namespace gpupool::server
