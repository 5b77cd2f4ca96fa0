// Machine- and human-readable reports of simulator runs.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/fgd_experiment.h"

namespace gpupool::sim {

// `v` printed with `format` ("%.2f"), or "-" when there is no value.
std::string Fixed(const std::optional<double>& v, const char* format = "%.2f");
// `v` as a JSON number, or null when there is no value.
nlohmann::json JsonOrNull(const std::optional<double>& v);

// One JSON object: policy, arrivals, failed, alloc_pct, frag_amount_pct, frag_ratio_pct (arrays
// of 131 values, null for a bin with no arrival near it), elapsed_ms.
std::string FgdResultJson(const FgdResult& r);

// A few lines for people: allocation and fragmentation at 90 %, 100 % and 130 % arrived.
std::string FgdResultText(const FgdResult& r);

}  // namespace gpupool::sim
