// PriceTable: the versioned price list the meter charges by. Each Price applies to its resource
// from its effective_ms until the next version of the same resource; a resource with no version in
// force costs 0. Pure data and lookups: no I/O, threads or clock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/records.h"
#include "core/result.h"

namespace gpupool::meter {

// Resource names a Price may carry.
inline constexpr std::string_view kGpuPrefix = "gpu:";     // "gpu:<MODEL>": per whole GPU
inline constexpr std::string_view kGpuFallback = "gpu:*";  // any model without its own price
inline constexpr std::string_view kCpu = "cpu";            // per core (1000 cpu milli)
inline constexpr std::string_view kMemory = "memory";      // per GiB (1024 MiB)

// Checks one price; the error names the offending field and value. The resource must be "cpu",
// "memory", "gpu:*" or "gpu:<MODEL>" with a non-empty model name (a catalog name or alias, or an
// opaque name such as the trace's "G2"); micros_per_hour >= 0; effective_ms >= 0.
Status Validate(const Price& price);

// The resource name a price is filed under: GPU models resolved to their canonical catalog name
// ("gpu:nvidia a100-sxm4-80gb" -> "gpu:A100-80GB"), so that aliases share one price history.
std::string CanonicalResource(std::string_view resource);

class PriceTable {
 public:
  // An empty table: everything costs 0.
  PriceTable() = default;
  // Prices that fail Validate() are left out, so that every rate in the table is >= 0 and costs
  // never run backwards (the server validates each price when it is written; Create() reports
  // instead). Of two versions with the same resource and effective_ms, the later one wins.
  explicit PriceTable(std::vector<Price> prices);
  // As the constructor, but the first invalid price is an error naming its index.
  static Result<PriceTable> Create(std::vector<Price> prices);

  // micros_per_hour of `resource` in force at `time_ms`; 0 when no version is in force.
  int64_t RateAt(std::string_view resource, int64_t time_ms) const;

  // Per-GPU micros_per_hour of `gpu_model` at `time_ms`: the model's own price when one of its
  // versions is in force, else the "gpu:*" price in force, else 0. (A model whose own price starts
  // later is charged the fallback until then, so announcing a price never makes a GPU free.)
  int64_t GpuRateAt(std::string_view gpu_model, int64_t time_ms) const;

  // The times after `after_ms` at which the price of any of `resources` changes, ascending and
  // without repeats. The meter prices whole stretches between these instead of single seconds.
  std::vector<int64_t> ChangesAfter(const std::vector<std::string>& resources,
                                    int64_t after_ms) const;

  bool Empty() const { return versions_.empty(); }

 private:
  struct Version {
    int64_t effective_ms = 0;
    int64_t micros_per_hour = 0;
  };
  // Canonical resource name -> its versions, ascending effective_ms, one per effective_ms.
  std::map<std::string, std::vector<Version>, std::less<>> versions_;
};

}  // namespace gpupool::meter
