// Machine- and human-readable reports of simulator runs.
#pragma once

#include <string>

#include "sim/fgd_experiment.h"

namespace gpupool::sim {

// One JSON object: policy, arrivals, failed, alloc_pct, frag_amount_pct, frag_ratio_pct (arrays
// of 131 values, null for a bin with no arrival near it), elapsed_ms.
std::string FgdResultJson(const FgdResult& r);

// A few lines for people: allocation and fragmentation at 90 %, 100 % and 130 % arrived.
std::string FgdResultText(const FgdResult& r);

}  // namespace gpupool::sim
