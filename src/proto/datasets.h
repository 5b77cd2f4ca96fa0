// Wire types of datasets (docs/datasets.md): a project's read-only, versioned directories of
// files. The dataset as the API shows it with its versions and its list, creating one, publishing
// it, a pushed version's record (after its chunks were sent: ChunkSet of proto/snapshots.h), a
// task's mount of one (TaskBody's `datasets`), and what a node says of the versions it holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "proto/common.h"
#include "proto/describe.h"
#include "proto/snapshots.h"

namespace gpupool::proto {

// A task's read-only mount of a dataset's version (core/dataset.h DatasetMount).
struct DatasetMountSpec {
  std::string dataset;
  int32_t version = 0;
  std::string path;
  std::string dataset_id;
  std::string project;
  std::string manifest;
  static constexpr std::string_view kName = "DatasetMount";
  static constexpr std::string_view kDoc =
      "A dataset mounted read-only into the task, below its workspace /root: one of its "
      "project's, or a published one.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("dataset", s.dataset,
      {.required = true, .max_bytes = 64, .doc = "The dataset's name (or its id, d-<seq>)"});
    v("version", s.version,
      {.min = 0,
       .doc = "Its version; 0: the latest when the task is submitted (the server's answer "
              "names it)"});
    v("path", s.path,
      {.required = true,
       .max_bytes = 1024,
       .format = Format::kText,
       .doc = "Where the task sees it: below /root, e.g. /root/imagenet"});
    v("dataset_id", s.dataset_id,
      {.max_bytes = 64, .doc = "The dataset's id: the server's (ignored in a submission)"});
    v("project", s.project,
      {.max_bytes = 128,
       .doc = "The project that holds it: the server's (ignored in a submission)"});
    v("manifest", s.manifest,
      {.max_bytes = kSha256HexBytes,
       .doc = "SHA-256 of the version's manifest: the server's (ignored in a submission)"});
  }
};

struct DatasetVersionView {
  int32_t version = 0;
  std::string manifest;
  int64_t files = 0;
  int64_t bytes = 0;
  int64_t new_bytes = 0;
  int64_t created_ms = 0;
  std::string created_by;
  std::vector<std::string> nodes;
  static constexpr std::string_view kName = "DatasetVersion";
  static constexpr std::string_view kDoc = "One pushed version of a dataset.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("version", s.version, {.doc = "1, 2, … in the order pushed"});
    v("manifest", s.manifest, {.doc = "SHA-256 of its manifest"});
    v("files", s.files);
    v("bytes", s.bytes, {.doc = "The files' sizes"});
    v("new_bytes", s.new_bytes,
      {.doc = "What its push added to the project's storage (chunks no earlier version or "
              "snapshot had)"});
    v("created_ms", s.created_ms);
    v("created_by", s.created_by, {.doc = "The user who pushed it"});
    v("nodes", s.nodes,
      {.max_items = 100'000,
       .doc = "The nodes that hold its files: a task that mounts it is placed on one of them "
              "where one fits"});
  }
};

struct DatasetView {
  std::string id;
  std::string name;
  std::string project;
  bool published = false;
  std::vector<DatasetVersionView> versions;
  int64_t created_ms = 0;
  std::string created_by;
  std::vector<std::string> used_by;
  static constexpr std::string_view kName = "Dataset";
  static constexpr std::string_view kDoc =
      "A read-only, versioned directory of files that tasks mount; its files are chunks in its "
      "project's storage, shared by its versions.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("id", s.id, {.doc = "d-<seq>"});
    v("name", s.name, {.doc = "Unique among the project's datasets"});
    v("project", s.project, {.doc = "The project that holds it and whose storage it counts in"});
    v("published", s.published,
      {.doc = "Every project may list and mount it (an admin published it)"});
    v("versions", s.versions,
      {.max_items = 100'000, .doc = "Oldest first; empty until its first push completes"});
    v("created_ms", s.created_ms);
    v("created_by", s.created_by, {.doc = "The user who created it"});
    v("used_by", s.used_by,
      {.max_items = 100'000,
       .doc = "The caller's tasks that mount it and have not ended (of its own project for a "
              "member of it)"});
  }
};

struct DatasetList {
  std::vector<DatasetView> datasets;
  static constexpr std::string_view kName = "DatasetList";
  static constexpr std::string_view kDoc = "Datasets, oldest first.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("datasets", s.datasets);
  }
};

struct DatasetListQuery {
  std::string project;
  static constexpr std::string_view kName = "DatasetListQuery";
  static constexpr std::string_view kDoc = "Which datasets to list.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("project", s.project,
      {.max_bytes = 128,
       .doc = "Only this project's (and the published ones); empty: the caller's projects' and "
              "the published ones"});
  }
};

// POST /v1/datasets.
struct DatasetCreate {
  std::string name;
  std::optional<std::string> project;
  static constexpr std::string_view kName = "DatasetCreate";
  static constexpr std::string_view kDoc =
      "A dataset to create, empty: its versions are pushed (`gpupool dataset push`).";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("name", s.name,
      {.required = true,
       .max_bytes = 63,
       .doc = "1..63 of a-z 0-9 _ . -, starting with a letter or digit"});
    v("project", s.project,
      {.format = Format::kIdentifier, .doc = "Default: the caller's only project"});
  }
};

// PATCH /v1/datasets/{id}.
struct DatasetUpdate {
  std::optional<bool> published;
  static constexpr std::string_view kName = "DatasetUpdate";
  static constexpr std::string_view kDoc = "A change to a dataset.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("published", s.published,
      {.doc = "Publish it to every project (true) or take it back (false): admins only"});
  }
};

// POST /v1/datasets/{id}/versions: a version whose manifest and chunks were sent.
struct DatasetVersionPush {
  std::string manifest;
  int64_t files = 0;
  int64_t bytes = 0;
  int64_t new_bytes = 0;
  static constexpr std::string_view kName = "DatasetVersionPush";
  static constexpr std::string_view kDoc =
      "A new version of a dataset: its manifest and every chunk it lists were stored first "
      "(PUT …/chunks/{sha256}).";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("manifest", s.manifest,
      {.required = true, .max_bytes = kSha256HexBytes, .doc = "SHA-256 of its manifest"});
    v("files", s.files, {.min = 0});
    v("bytes", s.bytes, {.min = 0, .doc = "The files' sizes"});
    v("new_bytes", s.new_bytes, {.min = 0, .doc = "Bytes of the chunks the push sent"});
  }
};

// POST /v1/agent/nodes/{name}/heartbeat.
struct NodeHeartbeat {
  std::vector<std::string> datasets;
  static constexpr std::string_view kName = "NodeHeartbeat";
  static constexpr std::string_view kDoc = "A node is alive, and what it holds.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("datasets", s.datasets,
      {.max_bytes = kSha256HexBytes,
       .max_items = 4096,
       .doc = "The dataset versions (their manifests' SHA-256) whose files this node holds: "
              "tasks that mount them are placed here where they fit"});
  }
};

}  // namespace gpupool::proto
