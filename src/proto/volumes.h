// Wire types of volumes (docs/volumes.md): a project's data that outlives its tasks. The volume
// as the API shows it and its list, creating and resizing one, a task's mount of one (TaskBody's
// `volumes`), and what a node is told of the volumes its tasks mount.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "proto/common.h"
#include "proto/describe.h"

namespace gpupool::proto {

inline constexpr std::string_view kVolumeStates[] = {"ready", "deleting"};
// The largest volume: 1 PiB.
inline constexpr int64_t kMaxVolumeBytes = int64_t{1} << 50;

// A task's mount of a volume (core/volume.h VolumeMount).
struct VolumeMountSpec {
  std::string volume;
  std::string path;
  bool read_only = false;
  std::string volume_id;
  bool shared = false;
  static constexpr std::string_view kName = "VolumeMount";
  static constexpr std::string_view kDoc =
      "A volume of the task's project mounted into the task, below its workspace /root.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("volume", s.volume,
      {.required = true, .max_bytes = 64, .doc = "The volume's name (or its id, v-<seq>)"});
    v("path", s.path,
      {.required = true,
       .max_bytes = 1024,
       .format = Format::kText,
       .doc = "Where the task sees it: below /root, e.g. /root/data"});
    v("read_only", s.read_only, {.doc = "Mounted read-only: writes fail with EROFS"});
    v("volume_id", s.volume_id,
      {.max_bytes = 64, .doc = "The volume's id: the server's (ignored in a submission)"});
    v("shared", s.shared, {.doc = "A shared volume's: the server's (ignored in a submission)"});
  }
};

struct VolumeView {
  std::string id;
  std::string name;
  std::string project;
  int64_t size_bytes = 0;
  bool shared = false;
  std::string node;
  std::string state;
  int64_t created_ms = 0;
  std::string created_by;
  std::vector<std::string> used_by;
  static constexpr std::string_view kName = "Volume";
  static constexpr std::string_view kDoc =
      "A project's volume: data that outlives its tasks, on one node's disk or on the shared "
      "storage.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("id", s.id, {.doc = "v-<seq>"});
    v("name", s.name, {.doc = "Unique among the project's volumes"});
    v("project", s.project);
    v("size_bytes", s.size_bytes,
      {.doc = "Its size: what it may hold, counted against the project's storage quota"});
    v("shared", s.shared,
      {.doc = "On the shared storage (every node with --shared-storage); false: node-local"});
    v("node", s.node,
      {.doc = "A node-local volume's node; empty: bound to the node of the first task that "
              "mounts it"});
    v("state", s.state,
      {.one_of = kVolumeStates, .doc = "deleting: its files are being removed, then it goes"});
    v("created_ms", s.created_ms);
    v("created_by", s.created_by, {.doc = "The user who created it"});
    v("used_by", s.used_by,
      {.max_items = 100'000, .doc = "The tasks that mount it and have not ended"});
  }
};

struct VolumeList {
  std::vector<VolumeView> volumes;
  static constexpr std::string_view kName = "VolumeList";
  static constexpr std::string_view kDoc = "Volumes, oldest first.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("volumes", s.volumes);
  }
};

struct VolumeListQuery {
  std::string project;
  static constexpr std::string_view kName = "VolumeListQuery";
  static constexpr std::string_view kDoc = "Which volumes to list.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("project", s.project, {.max_bytes = 128, .doc = "Only this project's; empty: the caller's"});
  }
};

// POST /v1/volumes.
struct VolumeCreate {
  std::string name;
  std::optional<std::string> project;
  int64_t size_bytes = 0;
  bool shared = false;
  std::optional<std::string> node;
  static constexpr std::string_view kName = "VolumeCreate";
  static constexpr std::string_view kDoc = "A volume to create.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("name", s.name,
      {.required = true,
       .max_bytes = 63,
       .doc = "1..63 of a-z 0-9 _ . -, starting with a letter or digit"});
    v("project", s.project,
      {.format = Format::kIdentifier, .doc = "Default: the caller's only project"});
    v("size_bytes", s.size_bytes,
      {.required = true, .min = 1, .max = kMaxVolumeBytes, .doc = "What it may hold"});
    v("shared", s.shared,
      {.doc = "On the shared storage, mountable on every node that has it; default: node-local"});
    v("node", s.node,
      {.format = Format::kIdentifier,
       .doc = "A node-local volume's node; default: the node of the first task that mounts it"});
  }
};

// PATCH /v1/volumes/{id}.
struct VolumeUpdate {
  std::optional<int64_t> size_bytes;
  static constexpr std::string_view kName = "VolumeUpdate";
  static constexpr std::string_view kDoc = "A change to a volume.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("size_bytes", s.size_bytes,
      {.min = 1, .max = kMaxVolumeBytes, .doc = "Its new size (larger or smaller)"});
  }
};

}  // namespace gpupool::proto
