// Prometheus text exposition (format 0.0.4), written by hand: counters, gauges and histograms
// with labels. A family (name, type, help, label names) is declared once as a MetricFamily
// (server/metric_families.h lists them all); samples give the label values in the declared order,
// so a family's series always carry the same label names. Counters and histograms are recorded as
// events happen; gauges are computed together at each scrape into a GaugeSnapshot, filled without
// the registry's lock and published at once. Thread-safe; /metrics renders the registry.
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

// The gauge families computed at one scrape: filled by one thread without any lock, then
// published at once (MetricsRegistry::Publish), replacing those families' series.
class GaugeSnapshot {
 public:
  template <size_t N>
  void Set(const MetricFamily<N>& f, LabelValues<N> values, double value) {
    Rows& rows = RowsOf(f);
    for (std::string& v : values) rows.labels.push_back(std::move(v));
    rows.values.push_back(value);
  }
  // Puts the family in the snapshot even without series: publishing then clears it.
  template <size_t N>
  void Include(const MetricFamily<N>& f) {
    RowsOf(f);
  }

 private:
  friend class MetricsRegistry;
  struct Rows {
    std::string_view name;
    MetricType type;
    std::string_view help;
    std::span<const std::string_view> label_names;
    std::vector<std::string> labels;  // label_names.size() per series, in order
    std::vector<double> values;
  };
  template <size_t N>
  Rows& RowsOf(const MetricFamily<N>& f) {
    // A few dozen families, each declared once: the name's address finds it at once.
    for (Rows& r : families_) {
      if (r.name.data() == f.name.data() || r.name == f.name) return r;
    }
    return families_.emplace_back(Rows{f.name, f.type, f.help, f.labels, {}, {}});
  }
  std::vector<Rows> families_;
};

class MetricsRegistry {
 public:
  // Declares a family (its HELP and TYPE lines are rendered from now on, with or without
  // samples). Add, Observe and Publish declare their families too, on first use.
  template <size_t N>
  void Declare(const MetricFamily<N>& f) {
    std::lock_guard lock(mu_);
    FamilyOf(f);
  }
  template <size_t N>
  void Add(const MetricFamily<N>& f, const LabelValues<N>& values, double delta) {
    std::lock_guard lock(mu_);
    FamilyOf(f).values[Key(values)] += delta;
  }
  // Counters: Add. Histograms: Observe, with `bounds` on first use of (family, values).
  template <size_t N>
  void Observe(const MetricFamily<N>& f, const LabelValues<N>& values, double value,
               const std::vector<double>& bounds) {
    std::lock_guard lock(mu_);
    ObserveLocked(FamilyOf(f), Key(values), value, bounds);
  }
  // Replaces the series of the snapshot's families with the snapshot's (an O(families) swap).
  void Publish(GaugeSnapshot snapshot);
  std::string Render() const;

 private:
  struct Family {
    MetricType type = MetricType::kGauge;
    std::string help;
    std::vector<std::string> label_names;
    std::map<std::vector<std::string>, double> values;  // counters
    std::map<std::vector<std::string>, Histogram> histograms;
    std::vector<std::string> gauge_labels;  // gauges: the last snapshot published
    std::vector<double> gauge_values;
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
