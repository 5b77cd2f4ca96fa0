// Datasets' names, ids, versions and mounts: the rules of core/dataset.h.
#include "core/dataset.h"

#include <charconv>
#include <set>

#include "core/task_path.h"

namespace gpupool {

const DatasetVersion* Dataset::Version(int32_t version) const {
  if (versions.empty()) return nullptr;
  if (version == 0) return &versions.back();
  for (const DatasetVersion& v : versions) {
    if (v.version == version) return &v;
  }
  return nullptr;
}

Status ValidateDatasetName(std::string_view name, std::string_view what) {
  if (Status ok = ValidateStorageName(name, what); !ok) return ok;
  if (IsDatasetId(name)) {
    return InvalidArgument(std::string(what) + " " + QuoteTaskPath(name) +
                           " is a dataset id's form (d-<number>); choose another name");
  }
  return {};
}

bool IsDatasetId(std::string_view s) {
  if (s.size() < 3 || !s.starts_with("d-")) return false;
  for (char c : s.substr(2)) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::string DatasetId(int64_t seq) { return "d-" + std::to_string(seq); }

Result<DatasetMount> ParseDatasetMount(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    return InvalidArgument("dataset " + QuoteTaskPath(text) +
                           " needs a path: NAME[@VERSION]:/root/PATH");
  }
  DatasetMount m;
  std::string_view name = text.substr(0, colon);
  if (const size_t at = name.find('@'); at != std::string_view::npos) {
    const std::string_view number = name.substr(at + 1);
    int32_t version = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), version);
    if (number.empty() || ec != std::errc() || end != number.data() + number.size() ||
        version <= 0) {
      return InvalidArgument("dataset " + QuoteTaskPath(text) + ": version " +
                             QuoteTaskPath(number) + " is not a number ≥ 1");
    }
    m.version = version;
    name = name.substr(0, at);
  }
  m.name = std::string(name);
  if (!IsDatasetId(m.name)) {
    if (Status ok = ValidateDatasetName(m.name, "dataset"); !ok) return tl::unexpected(ok.error());
  }
  std::string_view path = text.substr(colon + 1);
  if (path.ends_with(":ro")) path.remove_suffix(3);  // what a volume's read-only mount says
  Result<std::string> canonical = VolumeMountPath(path, "dataset path");
  if (!canonical) return tl::unexpected(canonical.error());
  m.path = std::move(*canonical);
  return m;
}

Status ValidateDatasetMounts(const std::vector<DatasetMount>& mounts,
                             const std::vector<VolumeMount>& volumes) {
  if (mounts.size() > kMaxDatasetMounts) {
    return InvalidArgument("datasets: " + std::to_string(mounts.size()) + " mounts; at most " +
                           std::to_string(kMaxDatasetMounts) + " are allowed");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < mounts.size(); ++i) {
    const DatasetMount& m = mounts[i];
    const std::string field = "datasets[" + std::to_string(i) + "]";
    if (!IsDatasetId(m.name)) {
      if (Status ok = ValidateDatasetName(m.name, field + ".dataset"); !ok) return ok;
    }
    if (m.version < 0) {
      return InvalidArgument(field + ".version " + std::to_string(m.version) +
                             " is not ≥ 1 (or 0: the latest)");
    }
    Result<std::string> path = VolumeMountPath(m.path, field + ".path");
    if (!path) return tl::unexpected(path.error());
    if (*path != m.path) {
      return InvalidArgument(field + ".path " + QuoteTaskPath(m.path) +
                             " is not canonical: " + *path);
    }
    if (!names.insert(m.name).second) {
      return InvalidArgument(field + ".dataset '" + m.name + "' is mounted twice");
    }
    for (size_t j = 0; j < i; ++j) {
      if (MountPathsOverlap(m.path, mounts[j].path)) {
        return InvalidArgument(field + ".path " + m.path + " overlaps datasets[" +
                               std::to_string(j) + "].path " + mounts[j].path);
      }
    }
    for (size_t j = 0; j < volumes.size(); ++j) {
      if (MountPathsOverlap(m.path, volumes[j].path)) {
        return InvalidArgument(field + ".path " + m.path + " overlaps volumes[" +
                               std::to_string(j) + "].path " + volumes[j].path);
      }
    }
  }
  return {};
}

}  // namespace gpupool
