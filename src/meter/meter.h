// Metering: what a bound task uses (Usage), what that costs over an interval under a PriceTable
// (per-second billing, exact over any split of the interval), and the ledger entry that records
// it. Pure arithmetic: the server decides when to meter and writes the entries.
#pragma once

#include <cstdint>
#include <string>

#include "core/records.h"
#include "core/task.h"
#include "meter/price_table.h"

namespace gpupool::meter {

// The resources a bound task holds, in the units prices are quoted for (after conversion).
struct Usage {
  std::string gpu_model;  // canonical catalog name or opaque name; empty when no GPU is held
  int64_t gpu_milli = 0;  // total GPU demand: 1000 per whole GPU, the share, or a MIG slice share
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;

  friend bool operator==(const Usage&, const Usage&) = default;
};

// The usage of a task with `request` bound to GPUs of `gpu_model` (the node's model; Task does not
// carry it). MIG instances count for their compute-slice share of the GPU (core's MigMilli:
// 3g.40gb on A100-80GB is 3/7 -> 428 milli, rounded down, so never more than the share held).
Usage UsageOf(const TaskRequest& request, const std::string& gpu_model);

// Per-second billing. Time is counted in whole seconds from `anchor_ms`, when the task's resources
// were bound (Task::bound_ms): second k covers [anchor + 1000k, anchor + 1000(k+1)) and is priced
// at the rates in force at its start; a second that has begun is billed in full. With
// n(t) = ceil((t - anchor) / 1000) seconds begun by t (0 when t <= anchor) and, exactly,
//
//   cost_k = (gpu_rate * gpu_milli * 1024 + cpu_rate * cpu_milli * 1024
//             + memory_rate * memory_mib * 1000) / (3600 * 1000 * 1024)  micros
//
// (rates in micros per hour per GPU, core and GiB; 1000 milli per GPU or core, 1024 MiB per GiB),
// the cumulative charge is F(t) = floor(sum_{k < n(t)} cost_k), summed as an exact fraction.
//
// F(t): what the task owes for its first n(t) seconds. Computed per stretch of constant prices,
// not per second, so a task bound for months costs a handful of steps. Negative quantities count
// as 0. Exact while the summed numerator fits 127 bits (e.g. 10^12 micros/hour, 10^9 milli or
// MiB and 10^4 years of seconds); saturates at INT64_MAX beyond.
int64_t CumulativeCostMicros(const PriceTable& prices, const Usage& usage, int64_t anchor_ms,
                             int64_t time_ms);

// The charge for [from_ms, to_ms): F(to_ms) - F(from_ms); 0 when to_ms <= from_ms. Because it is a
// difference of one cumulative function, billing [a, b) then [b, c) charges exactly what billing
// [a, c) does, so metering every minute and once more at release neither loses nor double-counts a
// micro.
int64_t CostMicros(const PriceTable& prices, const Usage& usage, int64_t anchor_ms, int64_t from_ms,
                   int64_t to_ms);

// The ledger line for one metered interval: key "<task_id>:<from_ms>" (so re-metering the same
// interval is a no-op in the store), kind usage, and a detail people can read, e.g.
// "A100-80GB 2000 milli, 8000 cpu milli, 32768 MiB, 60 s". An interval that costs 0 needs no
// entry (ledger amounts are > 0); billed_until_ms may still move past it, as nothing is owed.
LedgerEntry UsageEntry(const std::string& project_id, const std::string& task_id,
                       const Usage& usage, int64_t from_ms, int64_t to_ms, int64_t cost_micros,
                       int64_t created_ms);

}  // namespace gpupool::meter
