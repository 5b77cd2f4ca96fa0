// PriceTable: validation of prices, canonical resource names, and rate lookup by time.
#include "meter/price_table.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <tuple>
#include <utility>

#include "core/gpu_catalog.h"

namespace gpupool::meter {

Status Validate(const Price& price) {
  const std::string_view r = price.resource;
  const bool gpu = r.starts_with(kGpuPrefix);
  if (!(r == kCpu || r == kMemory || (gpu && r.size() > kGpuPrefix.size()))) {
    return InvalidArgument("resource must be 'cpu', 'memory', 'gpu:*' or 'gpu:<model>', got '" +
                           price.resource + "'");
  }
  if (gpu && r != kGpuFallback) {
    // Opaque names are accepted as they are, so only what could never be a model is refused.
    const std::string_view model = r.substr(kGpuPrefix.size());
    const bool control = std::any_of(model.begin(), model.end(),
                                     [](char c) { return static_cast<unsigned char>(c) < 0x20; });
    if (control || model.front() == ' ' || model.back() == ' ') {
      return InvalidArgument("resource '" + price.resource +
                             "' has a model name with control characters or surrounding spaces");
    }
  }
  if (price.micros_per_hour < 0) {
    return InvalidArgument("micros_per_hour must be >= 0, got " +
                           std::to_string(price.micros_per_hour));
  }
  if (price.effective_ms < 0) {
    return InvalidArgument("effective_ms must be >= 0, got " + std::to_string(price.effective_ms));
  }
  return {};
}

std::string CanonicalResource(std::string_view resource) {
  if (!resource.starts_with(kGpuPrefix) || resource == kGpuFallback) return std::string(resource);
  return std::string(kGpuPrefix) + CanonicalGpuModelName(resource.substr(kGpuPrefix.size()));
}

PriceTable::PriceTable(std::vector<Price> prices) {
  // Stable sort keeps input order among equal (resource, effective_ms): the last one wins below.
  for (Price& p : prices) p.resource = CanonicalResource(p.resource);
  std::stable_sort(prices.begin(), prices.end(), [](const Price& a, const Price& b) {
    return std::tie(a.resource, a.effective_ms) < std::tie(b.resource, b.effective_ms);
  });
  for (const Price& p : prices) {
    if (!Validate(p)) continue;
    std::vector<Version>& versions = versions_[p.resource];
    if (!versions.empty() && versions.back().effective_ms == p.effective_ms) {
      versions.back().micros_per_hour = p.micros_per_hour;
    } else {
      versions.push_back({p.effective_ms, p.micros_per_hour});
    }
  }
}

Result<PriceTable> PriceTable::Create(std::vector<Price> prices) {
  for (size_t i = 0; i < prices.size(); ++i) {
    if (Status s = Validate(prices[i]); !s) {
      return InvalidArgument("prices[" + std::to_string(i) + "]: " + s.error().message);
    }
  }
  return PriceTable(std::move(prices));
}

namespace {

// The version in force at `time_ms` (the last with effective_ms <= time_ms), or nullptr.
template <typename V>
const V* InForce(const std::vector<V>& versions, int64_t time_ms) {
  auto it = std::upper_bound(versions.begin(), versions.end(), time_ms,
                             [](int64_t t, const V& v) { return t < v.effective_ms; });
  return it == versions.begin() ? nullptr : &*std::prev(it);
}

}  // namespace

int64_t PriceTable::RateAt(std::string_view resource, int64_t time_ms) const {
  const auto it = versions_.find(CanonicalResource(resource));
  if (it == versions_.end()) return 0;
  const Version* v = InForce(it->second, time_ms);
  return v == nullptr ? 0 : v->micros_per_hour;
}

int64_t PriceTable::GpuRateAt(std::string_view gpu_model, int64_t time_ms) const {
  if (!gpu_model.empty()) {
    const auto it = versions_.find(std::string(kGpuPrefix) + CanonicalGpuModelName(gpu_model));
    if (it != versions_.end()) {
      if (const Version* v = InForce(it->second, time_ms)) return v->micros_per_hour;
    }
  }
  return RateAt(kGpuFallback, time_ms);
}

std::vector<int64_t> PriceTable::ChangesAfter(const std::vector<std::string>& resources,
                                              int64_t after_ms) const {
  std::vector<int64_t> times;
  for (const std::string& r : resources) {
    const auto it = versions_.find(CanonicalResource(r));
    if (it == versions_.end()) continue;
    for (const Version& v : it->second) {
      if (v.effective_ms > after_ms) times.push_back(v.effective_ms);
    }
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  return times;
}

}  // namespace gpupool::meter
