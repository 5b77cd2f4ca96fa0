// Prometheus text exposition written by hand (see metrics.h).
#include "server/metrics.h"

#include <cmath>
#include <cstdio>

namespace gpupool::server {
namespace {

// Label values escape backslash, double quote and newline, as the format requires.
void AppendEscaped(const std::string& value, std::string& out) {
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

// `a="x",b="y"` for the names and the values from `values` on (no braces); "" without labels.
std::string LabelList(const std::vector<std::string>& names,
                      std::vector<std::string>::const_iterator values) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i, ++values) {
    if (i > 0) out += ',';
    out += names[i];
    out += "=\"";
    AppendEscaped(*values, out);
    out += '"';
  }
  return out;
}

// `name{labels,extra}` for a label list and one more label (the histogram's `le`).
void AppendSeries(const std::string& name, const std::string& labels, std::string_view extra,
                  std::string& out) {
  out += name;
  if (labels.empty() && extra.empty()) return;
  out += '{';
  out += labels;
  if (!labels.empty() && !extra.empty()) out += ',';
  out += extra;
  out += '}';
}

std::string FormatNumber(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.0f", v);
    return buf;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

}  // namespace

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::Render(const std::string& name, const std::string& labels, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le =
        "le=\"" + (i < bounds_.size() ? FormatNumber(bounds_[i]) : std::string("+Inf")) + '"';
    AppendSeries(name + "_bucket", labels, le, out);
    out += ' ' + std::to_string(cumulative) + '\n';
  }
  AppendSeries(name + "_sum", labels, "", out);
  out += ' ' + FormatNumber(sum_) + '\n';
  AppendSeries(name + "_count", labels, "", out);
  out += ' ' + std::to_string(count_) + '\n';
}

std::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

MetricsRegistry::Family& MetricsRegistry::FamilyNamed(std::string_view name, MetricType type,
                                                      std::string_view help,
                                                      std::span<const std::string_view> labels) {
  auto it = families_.find(name);
  if (it != families_.end()) return it->second;
  Family f;
  f.type = type;
  f.help = help;
  f.label_names.assign(labels.begin(), labels.end());
  return families_.emplace(std::string(name), std::move(f)).first->second;
}

void MetricsRegistry::ObserveLocked(Family& f, std::vector<std::string> key, double value,
                                    const std::vector<double>& bounds) {
  auto it = f.histograms.find(key);
  if (it == f.histograms.end()) it = f.histograms.emplace(std::move(key), Histogram(bounds)).first;
  it->second.Observe(value);
}

void MetricsRegistry::Publish(GaugeSnapshot snapshot) {
  std::lock_guard lock(mu_);
  for (GaugeSnapshot::Rows& rows : snapshot.families_) {
    Family& f = FamilyNamed(rows.name, rows.type, rows.help, rows.label_names);
    f.gauge_labels.swap(rows.labels);
    f.gauge_values.swap(rows.values);
  }
}  // the old series leave with `snapshot`, after the lock is released

std::string MetricsRegistry::Render() const {
  std::lock_guard lock(mu_);
  std::string out;
  out.reserve(4096);
  for (const auto& [name, f] : families_) {
    out += "# HELP " + name + ' ' + f.help + '\n';
    out += "# TYPE " + name + ' ' + std::string(MetricTypeName(f.type)) + '\n';
    for (const auto& [values, v] : f.values) {
      AppendSeries(name, LabelList(f.label_names, values.begin()), "", out);
      out += ' ' + FormatNumber(v) + '\n';
    }
    const size_t n = f.label_names.size();
    for (size_t i = 0; i < f.gauge_values.size(); ++i) {
      AppendSeries(name, LabelList(f.label_names, f.gauge_labels.begin() + i * n), "", out);
      out += ' ' + FormatNumber(f.gauge_values[i]) + '\n';
    }
    for (const auto& [values, h] : f.histograms) {
      h.Render(name, LabelList(f.label_names, values.begin()), out);
    }
  }
  return out;
}

const std::vector<double>& LatencyBuckets() {
  static const std::vector<double> buckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                              0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                              1,      2.5,     5,      10};
  return buckets;
}

}  // namespace gpupool::server
