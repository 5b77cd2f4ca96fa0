// Volumes' names, ids and mounts: the rules of core/volume.h.
#include "core/volume.h"

#include <set>

#include "core/task_path.h"

namespace gpupool {

Status ValidateStorageName(std::string_view name, std::string_view what) {
  auto fail = [&](const std::string& rule) {
    return InvalidArgument(std::string(what) + " " + QuoteTaskPath(name) + " " + rule);
  };
  if (name.empty() || name.size() > kMaxVolumeNameBytes) {
    return fail("must be 1 to " + std::to_string(kMaxVolumeNameBytes) + " characters");
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name[0])) return fail("must start with a lower-case letter or a digit");
  for (char c : name) {
    if (!alnum(c) && c != '_' && c != '.' && c != '-') {
      return fail("may hold only lower-case letters, digits, '_', '.' and '-'");
    }
  }
  return {};
}

Status ValidateVolumeName(std::string_view name, std::string_view what) {
  if (Status ok = ValidateStorageName(name, what); !ok) return ok;
  if (IsVolumeId(name)) {
    return InvalidArgument(std::string(what) + " " + QuoteTaskPath(name) +
                           " is a volume id's form (v-<number>); choose another name");
  }
  return {};
}

bool MountPathsOverlap(std::string_view a, std::string_view b) {
  auto below = [](std::string_view inner, std::string_view outer) {
    return inner.size() > outer.size() && inner.starts_with(outer) && inner[outer.size()] == '/';
  };
  return a == b || below(a, b) || below(b, a);
}

bool IsVolumeId(std::string_view s) {
  if (s.size() < 3 || !s.starts_with("v-")) return false;
  for (char c : s.substr(2)) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

Result<std::string> VolumeMountPath(std::string_view path, std::string_view what) {
  Result<std::string> rel = TaskPathFromUser(path, what);
  if (!rel) return tl::unexpected(rel.error());
  if (rel->empty()) {
    return InvalidArgument(std::string(what) + " " + QuoteTaskPath(path) +
                           " is the task's whole workspace " + kTaskHome +
                           ": mount a volume below it, e.g. " + kTaskHome + "/data");
  }
  return std::string(kTaskHome) + "/" + *rel;
}

Result<VolumeMount> ParseVolumeMount(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    return InvalidArgument("volume " + QuoteTaskPath(text) + " needs a path: NAME:/root/PATH[:ro]");
  }
  VolumeMount m;
  m.name = std::string(text.substr(0, colon));
  std::string_view rest = text.substr(colon + 1);
  if (const size_t mode = rest.rfind(':'); mode != std::string_view::npos) {
    const std::string_view flag = rest.substr(mode + 1);
    if (flag != "ro" && flag != "rw") {
      return InvalidArgument("volume " + QuoteTaskPath(text) + ": " + QuoteTaskPath(flag) +
                             " is neither ro nor rw");
    }
    m.read_only = flag == "ro";
    rest = rest.substr(0, mode);
  }
  if (Status ok = ValidateVolumeName(m.name, "volume"); !ok && !IsVolumeId(m.name)) {
    return tl::unexpected(ok.error());
  }
  Result<std::string> path = VolumeMountPath(rest, "volume path");
  if (!path) return tl::unexpected(path.error());
  m.path = std::move(*path);
  return m;
}

Status ValidateVolumeMounts(const std::vector<VolumeMount>& mounts) {
  if (mounts.size() > kMaxVolumeMounts) {
    return InvalidArgument("volumes: " + std::to_string(mounts.size()) + " mounts; at most " +
                           std::to_string(kMaxVolumeMounts) + " are allowed");
  }
  std::set<std::string> volumes;
  for (size_t i = 0; i < mounts.size(); ++i) {
    const VolumeMount& m = mounts[i];
    const std::string field = "volumes[" + std::to_string(i) + "]";
    if (!IsVolumeId(m.name)) {
      if (Status ok = ValidateVolumeName(m.name, field + ".volume"); !ok) return ok;
    }
    Result<std::string> path = VolumeMountPath(m.path, field + ".path");
    if (!path) return tl::unexpected(path.error());
    if (*path != m.path) {
      return InvalidArgument(field + ".path " + QuoteTaskPath(m.path) +
                             " is not canonical: " + *path);
    }
    if (!volumes.insert(m.name).second) {
      return InvalidArgument(field + ".volume '" + m.name + "' is mounted twice");
    }
    for (size_t j = 0; j < i; ++j) {
      const std::string& other = mounts[j].path;
      if (MountPathsOverlap(m.path, other)) {
        return InvalidArgument(field + ".path " + m.path + " overlaps volumes[" +
                               std::to_string(j) + "].path " + other);
      }
    }
  }
  return {};
}

}  // namespace gpupool
