// GPU model names as people write them (see gpu_names.h).
#include "core/gpu_names.h"

#include <algorithm>
#include <cctype>

#include "core/gpu_catalog.h"

namespace gpupool {
namespace {

// Lower case, without blanks, '-', '_' and the vendor words.
std::string Normalise(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == ' ' || c == '-' || c == '_' || c == '\t') continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  for (std::string_view word : {"nvidia", "geforce", "tesla"}) {
    for (size_t at = out.find(word); at != std::string::npos; at = out.find(word)) {
      out.erase(at, word.size());
    }
  }
  return out;
}

// "A100-80GB" → "A100": the name without a trailing "-<digits>GB".
std::string_view WithoutMemory(std::string_view name) {
  const size_t dash = name.rfind('-');
  if (dash == std::string_view::npos || name.size() < dash + 4) return name;
  const std::string_view tail = name.substr(dash + 1);
  const std::string_view digits = tail.substr(0, tail.size() - 2);
  const bool memory =
      (tail.ends_with("GB") || tail.ends_with("gb")) && !digits.empty() &&
      std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  return memory ? name.substr(0, dash) : name;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

std::vector<std::string> CatalogModelsNamed(std::string_view typed) {
  if (const GpuModelInfo* exact = FindGpuModel(typed)) return {exact->name};
  const std::string want = Normalise(typed);
  std::vector<std::string> out;
  if (want.empty()) return out;
  for (const GpuModelInfo& m : KnownGpuModels()) {
    const std::string base = Normalise(WithoutMemory(m.name));
    const bool named = want == Normalise(m.name) || want == base ||
                       (base.starts_with("rtx") && want == base.substr(3));
    if (named) out.push_back(m.name);
  }
  return out;
}

std::vector<std::string> ExpandGpuModelNames(const std::vector<std::string>& typed) {
  std::vector<std::string> out;
  const auto add = [&out](const std::string& name) {
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  };
  for (const std::string& name : typed) {
    const std::vector<std::string> models = CatalogModelsNamed(name);
    if (models.empty()) add(name);
    for (const std::string& m : models) add(m);
  }
  return out;
}

Status CheckGpuModelsInPool(const std::vector<std::string>& allowed,
                            const std::set<std::string>& pool) {
  const std::string has =
      pool.empty() ? "it has no GPU node yet"
                   : "it has " + JoinNames(std::vector<std::string>(pool.begin(), pool.end()));
  bool any_in_pool = false;
  for (const std::string& name : allowed) {
    const bool in_pool = pool.count(name) > 0;
    if (!in_pool && FindGpuModel(name) == nullptr) {
      return InvalidArgument("gpu_models: '" + name + "' is not a GPU model of this pool (" + has +
                             ")");
    }
    any_in_pool = any_in_pool || in_pool;
  }
  if (!allowed.empty() && !pool.empty() && !any_in_pool) {
    return InvalidArgument("gpu_models: no node of this pool has " + JoinNames(allowed) + " (" +
                           has + ")");
  }
  return {};
}

Status CheckMigProfileInPool(const std::string& profile, const std::vector<std::string>& allowed,
                             const std::set<std::string>& pool) {
  if (profile.empty() || pool.empty()) return {};
  std::vector<std::string> offered;  // "1g.10gb, 2g.20gb … on A100-80GB" per model
  for (const std::string& name : pool) {
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      continue;
    }
    const GpuModelInfo* model = FindGpuModel(name);
    if (model == nullptr || !model->MigCapable()) continue;
    if (model->FindProfile(profile) != nullptr) return {};
    std::vector<std::string> names;
    for (const MigProfile& p : model->mig_profiles) names.push_back(p.name);
    offered.push_back(JoinNames(names) + " on " + model->name);
  }
  const std::string which = allowed.empty() ? "this pool's GPUs" : "the allowed GPUs of this pool";
  return InvalidArgument("mig_profile '" + profile + "' is not offered by " + which + " (" +
                         (offered.empty() ? std::string("none of them is MIG-capable")
                                          : "they offer " + JoinNames(offered)) +
                         ")");
}

}  // namespace gpupool
