// Datasets (docs/datasets.md): a project's read-only, versioned directory of files, pushed once
// (`gpupool dataset push DIR NAME`) and mounted read-only by any number of tasks on any node. A
// version is a manifest (proto/snapshots.h SnapshotManifest) whose files are content-defined
// chunks in the owning project's chunk store (server/chunk_store.h), shared with every other
// version and snapshot of the project that has the same bytes; a second push of a directory with
// 1 % of its bytes changed sends about 1 %. An admin may publish a dataset to every project. The
// record the server keeps, the mount a task asks for, and their rules.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/volume.h"

namespace gpupool {

struct DatasetVersion {
  int32_t version = 0;     // 1, 2, … in the order they were pushed (never reused)
  std::string manifest{};  // SHA-256 (hex) of its manifest in the owning project's chunk store
  int64_t files = 0;
  int64_t bytes = 0;      // the files' sizes
  int64_t new_bytes = 0;  // of chunks the store did not have before it (what the push sent)
  int64_t created_ms = 0;
  std::string created_by{};  // user id

  friend bool operator==(const DatasetVersion&, const DatasetVersion&) = default;
};

struct Dataset {
  std::string id{};  // "d-<seq>"
  int64_t seq = 0;
  std::string project_id{};  // whose chunk store holds it, whose quota counts it
  std::string name{};        // unique among the project's datasets (ValidateDatasetName)
  // Every project may list and mount it (an admin's choice); false: its project's only.
  bool published = false;
  std::vector<DatasetVersion> versions{};  // ascending; empty until the first push completes
  int64_t created_ms = 0;
  std::string created_by{};  // user id

  // The version numbered `version`, or the latest for 0; nullptr when there is none.
  const DatasetVersion* Version(int32_t version) const;

  friend bool operator==(const Dataset&, const Dataset&) = default;
};

// A task's read-only mount of a dataset's version: as the user asked (`name`: a name or an id;
// `version` 0: the latest), then resolved at submission to the dataset's id, its project (whose
// chunk store the node reads) and the version's number and manifest, so that a later push does
// not change what a queued task sees.
struct DatasetMount {
  std::string dataset_id{};
  std::string name{};
  int32_t version = 0;
  std::string path{};  // as a volume's: below kTaskHome (VolumeMountPath)
  std::string project_id{};
  std::string manifest{};

  friend bool operator==(const DatasetMount&, const DatasetMount&) = default;
};

inline constexpr size_t kMaxDatasetMounts = 8;

// A volume's rules (ValidateStorageName), and never a dataset id's form.
Status ValidateDatasetName(std::string_view name, std::string_view what = "name");
// "d-<digits>".
bool IsDatasetId(std::string_view s);
std::string DatasetId(int64_t seq);

// "NAME[@VERSION]:/root/data" (the CLI's --dataset; always read-only) → name, version (0: the
// latest), canonical path.
Result<DatasetMount> ParseDatasetMount(std::string_view text);

// A task's dataset mounts: at most kMaxDatasetMounts, valid names, versions ≥ 0 and paths, no
// dataset twice, and no path equal to, below or above another dataset's or one of `volumes`'.
// kInvalidArgument naming "datasets[i]" and the rule.
Status ValidateDatasetMounts(const std::vector<DatasetMount>& mounts,
                             const std::vector<VolumeMount>& volumes);

}  // namespace gpupool
