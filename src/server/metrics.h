// Prometheus text exposition (format 0.0.4), written by hand: counters, gauges and histograms
// with labels. A family (name, type, help, label names) is declared once as a MetricFamily
// (server/metric_families.h lists them all); samples give the label values in the declared order,
// so a family's series always carry the same label names. Thread-safe; the server records into it
// and /metrics renders it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::server {

enum class MetricType { kCounter, kGauge, kHistogram };
std::string_view MetricTypeName(MetricType type);

// One metric family: N label names, fixed at compile time, so a sample with the wrong number of
// label values does not compile.
template <size_t N>
struct MetricFamily {
  std::string_view name;
  MetricType type;
  std::string_view help;
  std::array<std::string_view, N> labels;
};

template <size_t N>
using LabelValues = std::array<std::string, N>;

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)),
                                                         counts_(bounds_.size() + 1, 0) {}
  void Observe(double value);
  // Appends the _bucket, _sum and _count lines of `name`; `labels` is the rendered label list
  // without braces ("" or `a="x",b="y"`).
  void Render(const std::string& name, const std::string& labels, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last: above every bound
  double sum_ = 0;
  uint64_t count_ = 0;
};

class MetricsRegistry {
 public:
  // Declares a family (its HELP and TYPE lines are rendered from now on, with or without
  // samples). Every call below declares the family too, on first use.
  template <size_t N>
  void Declare(const MetricFamily<N>& f) {
    std::lock_guard lock(mu_);
    FamilyOf(f);
  }
  template <size_t N>
  void Add(const MetricFamily<N>& f, const LabelValues<N>& values, double delta) {  // counters
    std::lock_guard lock(mu_);
    FamilyOf(f).values[Key(values)] += delta;
  }
  template <size_t N>
  void Set(const MetricFamily<N>& f, const LabelValues<N>& values, double value) {  // gauges
    std::lock_guard lock(mu_);
    FamilyOf(f).values[Key(values)] = value;
  }
  // Histograms use `bounds` on first use of (family, values).
  template <size_t N>
  void Observe(const MetricFamily<N>& f, const LabelValues<N>& values, double value,
               const std::vector<double>& bounds) {
    std::lock_guard lock(mu_);
    ObserveLocked(FamilyOf(f), Key(values), value, bounds);
  }
  // Drops every series of a gauge family (before re-setting a snapshot of it).
  template <size_t N>
  void ClearFamily(const MetricFamily<N>& f) {
    std::lock_guard lock(mu_);
    FamilyOf(f).values.clear();
  }
  std::string Render() const;

 private:
  struct Family {
    MetricType type = MetricType::kGauge;
    std::string help;
    std::vector<std::string> label_names;
    std::map<std::vector<std::string>, double> values;
    std::map<std::vector<std::string>, Histogram> histograms;
  };
  template <size_t N>
  Family& FamilyOf(const MetricFamily<N>& f) {
    return FamilyNamed(f.name, f.type, f.help, f.labels);
  }
  template <size_t N>
  static std::vector<std::string> Key(const LabelValues<N>& values) {
    return std::vector<std::string>(values.begin(), values.end());
  }
  // The family `name`, made on first use (the label names are copied only then).
  Family& FamilyNamed(std::string_view name, MetricType type, std::string_view help,
                      std::span<const std::string_view> label_names);
  static void ObserveLocked(Family& f, std::vector<std::string> key, double value,
                            const std::vector<double>& bounds);

  mutable std::mutex mu_;
  std::map<std::string, Family, std::less<>> families_;
};

// Buckets for latencies in seconds, 100 µs .. 10 s.
const std::vector<double>& LatencyBuckets();

}  // namespace gpupool::server
