// Volumes (docs/volumes.md): a project's data that outlives its tasks. A node-local volume lives
// on one node's disk (the "data disk" of GPU clouds), bound to the node of the first task that
// mounts it unless created on one; a shared volume lives on the shared file system every node
// with --shared-storage mounts. Tasks mount volumes below their workspace. The record the server
// keeps, the mount a task asks for, and their rules; the files are the node's (or the shared
// file system's), not the server's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpupool {

struct Volume {
  std::string id;  // "v-<seq>"
  int64_t seq = 0;
  std::string project_id;
  std::string name;        // unique among the project's volumes (ValidateVolumeName)
  int64_t size_bytes = 0;  // > 0: its limit, counted against the project's storage quota
  bool shared = false;
  std::string node;  // node-local: the node it lives on; empty: not yet bound (or shared)
  // Deleted by a user: its files are being removed (by its node, or by a node with the shared
  // storage for a shared volume), after which the record goes.
  bool deleting = false;
  int64_t created_ms = 0;
  std::string created_by;  // user id

  friend bool operator==(const Volume&, const Volume&) = default;
};

// A task's use of a volume: the volume (its id and name, resolved when the task is submitted;
// as the user asked, `name` holds a name or an id), where the task sees it (an absolute path
// below kTaskHome, not kTaskHome itself), read-only or not, and whether the volume is shared.
struct VolumeMount {
  std::string volume_id{};
  std::string name{};
  std::string path{};
  bool read_only = false;
  bool shared = false;

  friend bool operator==(const VolumeMount&, const VolumeMount&) = default;
};

inline constexpr size_t kMaxVolumeNameBytes = 63;
inline constexpr size_t kMaxVolumeMounts = 16;

// A volume's or a dataset's name: 1..63 of [a-z0-9_.-], starting with a letter or digit;
// kInvalidArgument names `what`.
Status ValidateStorageName(std::string_view name, std::string_view what);
// ValidateStorageName, and never a volume id's form.
Status ValidateVolumeName(std::string_view name, std::string_view what = "name");
// "v-<digits>".
bool IsVolumeId(std::string_view s);

// A mount's path as people write it ("/root/data", "data", "/root/data/") in the canonical form
// "/root/data": below the task's workspace, not the workspace itself (errors name `what`).
Result<std::string> VolumeMountPath(std::string_view path, std::string_view what = "path");

// Whether two canonical mount paths are the same or one is below the other.
bool MountPathsOverlap(std::string_view a, std::string_view b);

// "NAME:/root/data[:ro|:rw]" (the CLI's --volume) → name, canonical path, read_only.
Result<VolumeMount> ParseVolumeMount(std::string_view text);

// A task's mounts: at most kMaxVolumeMounts, valid names and paths, no volume twice, and no path
// equal to or below another's. kInvalidArgument naming "volumes[i]" and the rule.
Status ValidateVolumeMounts(const std::vector<VolumeMount>& mounts);

}  // namespace gpupool
