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

void AppendLabels(const Labels& labels, const std::string& extra_name,
                  const std::string& extra_value, std::string& out) {
  if (labels.empty() && extra_name.empty()) return;
  out += '{';
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ',';
    first = false;
    out += k;
    out += "=\"";
    AppendEscaped(v, out);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!first) out += ',';
    out += extra_name + "=\"" + extra_value + "\"";
  }
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

void Histogram::Render(const std::string& name, const Labels& labels, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket";
    AppendLabels(labels, "le", i < bounds_.size() ? FormatNumber(bounds_[i]) : "+Inf", out);
    out += ' ' + std::to_string(cumulative) + '\n';
  }
  out += name + "_sum";
  AppendLabels(labels, "", "", out);
  out += ' ' + FormatNumber(sum_) + '\n';
  out += name + "_count";
  AppendLabels(labels, "", "", out);
  out += ' ' + std::to_string(count_) + '\n';
}

void MetricsRegistry::Describe(const std::string& name, const std::string& type,
                               const std::string& help) {
  std::lock_guard lock(mu_);
  Family& f = families_[name];
  f.type = type;
  f.help = help;
}

void MetricsRegistry::Add(const std::string& name, const Labels& labels, double delta) {
  std::lock_guard lock(mu_);
  families_[name].values[labels] += delta;
}

void MetricsRegistry::Set(const std::string& name, const Labels& labels, double value) {
  std::lock_guard lock(mu_);
  families_[name].values[labels] = value;
}

void MetricsRegistry::Observe(const std::string& name, const Labels& labels, double value,
                              const std::vector<double>& bounds) {
  std::lock_guard lock(mu_);
  auto& hs = families_[name].histograms;
  auto it = hs.find(labels);
  if (it == hs.end()) it = hs.emplace(labels, Histogram(bounds)).first;
  it->second.Observe(value);
}

void MetricsRegistry::ClearFamily(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  if (it != families_.end()) it->second.values.clear();
}

std::string MetricsRegistry::Render() const {
  std::lock_guard lock(mu_);
  std::string out;
  out.reserve(4096);
  for (const auto& [name, f] : families_) {
    if (!f.help.empty()) out += "# HELP " + name + ' ' + f.help + '\n';
    if (!f.type.empty()) out += "# TYPE " + name + ' ' + f.type + '\n';
    for (const auto& [labels, v] : f.values) {
      out += name;
      AppendLabels(labels, "", "", out);
      out += ' ' + FormatNumber(v) + '\n';
    }
    for (const auto& [labels, h] : f.histograms) h.Render(name, labels, out);
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
