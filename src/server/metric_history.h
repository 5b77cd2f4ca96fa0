// The server's downsampled usage history: for each task and each node a series of ~1 Hz samples
// (a time and a fixed set of integer gauges), kept at full resolution for the last minutes and as
// one-minute aggregates (mean and max) for the last day, in fixed-size rings: O(1) append and
// bounded memory per series, whatever the series' age. Pure: no clock, no locking (the owner
// serialises access).
//
//   UsageSeries s;                               // a task's or a node's usage (4 gauges)
//   s.Append({t, {cpu_milli, memory_mib, gpu_util_pct, gpu_mem_mib}});
//   s.Points(now - 3'600'000, now, Resolution::kMinute);  // the last hour, one point a minute
//
// A node's per-GPU series use the same class with their own gauges (GpuSeries).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpupool::server {

// A gauge's value when it was not measured (e.g. GPU utilisation without NVML). Any negative
// value counts as unknown.
inline constexpr int64_t kUnknown = -1;

// The gauges of a task's or a node's usage series, in this order.
namespace usage {
enum : size_t { kCpuMilli, kMemoryMib, kGpuUtilPct, kGpuMemMib, kGauges };
}  // namespace usage
// The gauges of one GPU's series on a node.
namespace gpu_usage {
enum : size_t { kUtilPct, kMemMib, kGauges };
}  // namespace gpu_usage

template <size_t N>
struct Sample {
  int64_t time_ms = 0;
  std::array<int64_t, N> values{};  // kUnknown where not measured

  friend bool operator==(const Sample&, const Sample&) = default;
};

// One point of a query. Raw: a sample (mean and max both its values, samples 1). One minute:
// the aggregate of the samples taken in [time_ms, time_ms + 60 s): per gauge the mean (rounded
// to nearest) and the max of its known values, kUnknown when none was known.
template <size_t N>
struct HistoryPoint {
  int64_t time_ms = 0;
  std::array<int64_t, N> mean{};
  std::array<int64_t, N> max{};
  int64_t samples = 0;

  friend bool operator==(const HistoryPoint&, const HistoryPoint&) = default;
};

enum class Resolution { kRaw, kMinute };

// "raw" or "1m" (as the API's `resolution` parameter spells them).
inline Result<Resolution> ParseResolution(std::string_view text) {
  if (text == "raw") return Resolution::kRaw;
  if (text == "1m") return Resolution::kMinute;
  return InvalidArgument("resolution must be raw or 1m, got '" + std::string(text) + "'");
}

inline constexpr int64_t kMinuteMs = 60'000;

struct HistoryOptions {
  size_t raw_capacity = 300;      // samples at full resolution: 5 minutes at 1 Hz
  size_t minute_capacity = 1440;  // finished one-minute aggregates: 24 hours
};

// A fixed-size ring: appends overwrite the oldest element once full. Storage grows with use up
// to the capacity and never past it.
template <typename T>
class Ring {
 public:
  explicit Ring(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

  void Push(const T& item) {
    if (items_.size() < capacity_) {
      if (items_.size() == items_.capacity()) {
        items_.reserve(std::min(capacity_, std::max<size_t>(16, 2 * items_.size())));
      }
      items_.push_back(item);
      return;
    }
    items_[head_] = item;
    head_ = (head_ + 1) % capacity_;
  }
  size_t size() const { return items_.size(); }
  size_t capacity() const { return capacity_; }
  // Oldest first: 0 is the oldest, size() - 1 the newest.
  const T& operator[](size_t i) const { return items_[(head_ + i) % items_.size()]; }
  const T& back() const { return (*this)[items_.size() - 1]; }

  // The index of the first element whose key is ≥ `key` (elements sorted by key, oldest first).
  template <typename Key>
  size_t LowerBound(int64_t key, Key key_of) const {
    size_t lo = 0;
    size_t hi = size();
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (key_of((*this)[mid]) < key) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

 private:
  size_t capacity_;
  std::vector<T> items_;
  size_t head_ = 0;  // the oldest element once full
};

template <size_t N>
class MetricSeries {
 public:
  explicit MetricSeries(HistoryOptions options = {})
      : raw_(options.raw_capacity), minutes_(options.minute_capacity) {}

  // Adds a sample. One not newer than the latest (a batch an agent sent again after a retry,
  // or out of order) is ignored: returns false and changes nothing.
  bool Append(const Sample<N>& s) {
    if (raw_.size() > 0 && s.time_ms <= raw_.back().time_ms) return false;
    raw_.Push(s);
    const int64_t minute = MinuteOf(s.time_ms);
    if (open_.samples > 0 && open_.time_ms != minute) {
      minutes_.Push(Close(open_));
      open_ = Open{};
    }
    open_.time_ms = minute;
    ++open_.samples;
    for (size_t g = 0; g < N; ++g) {
      const int64_t v = s.values[g];
      if (v < 0) continue;
      open_.sum[g] += v;
      ++open_.known[g];
      open_.max[g] = std::max(open_.max[g], v);
    }
    return true;
  }

  // The newest sample, if any.
  std::optional<Sample<N>> Latest() const {
    if (raw_.size() == 0) return std::nullopt;
    return raw_.back();
  }

  // The points in [from_ms, to_ms], oldest first. Raw: the samples still held at full
  // resolution taken in that span. One minute: the minutes overlapping it, the current
  // (unfinished) one included; minutes without samples have no point.
  std::vector<HistoryPoint<N>> Points(int64_t from_ms, int64_t to_ms, Resolution r) const {
    std::vector<HistoryPoint<N>> out;
    if (from_ms > to_ms) return out;
    if (r == Resolution::kRaw) {
      for (size_t i = raw_.LowerBound(from_ms, [](const Sample<N>& s) { return s.time_ms; });
           i < raw_.size() && raw_[i].time_ms <= to_ms; ++i) {
        out.push_back(HistoryPoint<N>{raw_[i].time_ms, raw_[i].values, raw_[i].values, 1});
      }
      return out;
    }
    // The minute holding from_ms (kept clear of int64's lower end, which no sample is near).
    const int64_t first_minute =
        MinuteOf(std::max(from_ms, std::numeric_limits<int64_t>::min() + kMinuteMs));
    const auto time_of = [](const HistoryPoint<N>& p) { return p.time_ms; };
    for (size_t i = minutes_.LowerBound(first_minute, time_of);
         i < minutes_.size() && minutes_[i].time_ms <= to_ms; ++i) {
      out.push_back(minutes_[i]);
    }
    if (open_.samples > 0 && open_.time_ms >= first_minute && open_.time_ms <= to_ms) {
      out.push_back(Close(open_));
    }
    return out;
  }

  // How much is held: raw samples and finished minutes (each at most its capacity).
  size_t raw_size() const { return raw_.size(); }
  size_t minute_size() const { return minutes_.size(); }

 private:
  // The minute being filled.
  struct Open {
    int64_t time_ms = 0;
    int64_t samples = 0;
    std::array<int64_t, N> sum{};
    std::array<int64_t, N> known{};
    std::array<int64_t, N> max{};
  };

  static int64_t MinuteOf(int64_t time_ms) {
    const int64_t m = time_ms / kMinuteMs;
    return (time_ms % kMinuteMs < 0 ? m - 1 : m) * kMinuteMs;  // floor, before 1970 too
  }

  static HistoryPoint<N> Close(const Open& o) {
    HistoryPoint<N> p;
    p.time_ms = o.time_ms;
    p.samples = o.samples;
    for (size_t g = 0; g < N; ++g) {
      if (o.known[g] == 0) {
        p.mean[g] = p.max[g] = kUnknown;
        continue;
      }
      p.mean[g] = (o.sum[g] + o.known[g] / 2) / o.known[g];
      p.max[g] = o.max[g];
    }
    return p;
  }

  Ring<Sample<N>> raw_;
  Ring<HistoryPoint<N>> minutes_;
  Open open_;
};

using UsageSeries = MetricSeries<usage::kGauges>;
using GpuSeries = MetricSeries<gpu_usage::kGauges>;

extern template class MetricSeries<usage::kGauges>;
extern template class MetricSeries<gpu_usage::kGauges>;

}  // namespace gpupool::server
