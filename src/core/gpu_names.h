// GPU model names as people write them — "RTX 3090", "3090", "A100", "a100 80gb", "H100" — and
// the catalog models they stand for; and the check of a task's allowed models and MIG profile
// against the models a pool actually has, so that a request no node can ever satisfy is refused
// when the task is created instead of leaving it pending for ever.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpupool {

// The catalog models `typed` names, in catalog order: its canonical name or an alias
// (CanonicalGpuModelName), or — compared case-insensitively, without blanks, '-', '_' and the
// words "nvidia", "geforce" and "tesla" — a model's name, its name without the memory size ("A100"
// names every A100), or that without the "RTX" family prefix ("3090"). Empty when it names none
// (an opaque name, such as a trace's "G2", or a typo).
std::vector<std::string> CatalogModelsNamed(std::string_view typed);

// Each allowed model replaced by the catalog models it names (ExpandGpuModelNames({"A100"}) =
// {"A100-40GB", "A100-80GB"}); a name that names none is kept as it is. No duplicates, first
// occurrence first.
std::vector<std::string> ExpandGpuModelNames(const std::vector<std::string>& typed);

// Checks a task's allowed models (already expanded) against the GPU models of the pool's nodes:
// every name must be a catalog model or one of `pool`'s, and unless the pool has no GPU node yet,
// at least one must be among `pool`'s. kInvalidArgument naming the models and what the pool has.
Status CheckGpuModelsInPool(const std::vector<std::string>& allowed,
                            const std::set<std::string>& pool);

// Checks a MIG task's profile against the pool: unless the pool has no GPU node yet, some model
// of `pool` (among `allowed` when given) must offer `profile`. kInvalidArgument naming the
// profiles the pool's GPUs offer otherwise.
Status CheckMigProfileInPool(const std::string& profile, const std::vector<std::string>& allowed,
                             const std::set<std::string>& pool);

}  // namespace gpupool
