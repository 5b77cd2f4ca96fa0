// Prometheus text exposition (format 0.0.4), written by hand: counters, gauges and histograms
// with labels. Thread-safe; the server records into it and /metrics renders it.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace gpupool::server {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)),
                                                         counts_(bounds_.size() + 1, 0) {}
  void Observe(double value);
  // Appends the _bucket, _sum and _count lines of `name` with `labels`.
  void Render(const std::string& name, const Labels& labels, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last: above every bound
  double sum_ = 0;
  uint64_t count_ = 0;
};

class MetricsRegistry {
 public:
  // Describes a family once (HELP and TYPE lines); type is "counter", "gauge" or "histogram".
  void Describe(const std::string& name, const std::string& type, const std::string& help);
  void Add(const std::string& name, const Labels& labels, double delta);  // counters
  void Set(const std::string& name, const Labels& labels, double value);  // gauges
  // Histograms use `bounds` on first use of (name, labels).
  void Observe(const std::string& name, const Labels& labels, double value,
               const std::vector<double>& bounds);
  // Drops every series of a gauge family (before re-setting a snapshot of it).
  void ClearFamily(const std::string& name);
  std::string Render() const;

 private:
  struct Family {
    std::string type;
    std::string help;
    std::map<Labels, double> values;
    std::map<Labels, Histogram> histograms;
  };
  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

// Buckets for latencies in seconds, 100 µs .. 10 s.
const std::vector<double>& LatencyBuckets();

}  // namespace gpupool::server
