// Wire types of snapshots (docs/snapshots.md): a snapshot as the API shows it and its list, the
// user's requests (take one, resume from one), what an agent commits after it captured one, the
// chunk queries of the transfer, and the manifest: the document, stored content-addressed like
// the chunks it lists, that says which files a snapshot holds.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "proto/common.h"
#include "proto/describe.h"

namespace gpupool::proto {

// A SHA-256 as the chunk store names it: 64 lower-case hex digits (checked by the routes).
inline constexpr size_t kSha256HexBytes = 64;
// The most chunks one query names: its body stays within a request body's 4 MiB.
inline constexpr size_t kMaxChunksPerQuery = 50'000;

// A task's container saved as an image with a snapshot (core/snapshot.h SavedImage).
struct SnapshotImage {
  std::string id;
  std::string base;
  int64_t bytes = 0;
  bool saved = false;
  static constexpr std::string_view kName = "SnapshotImage";
  static constexpr std::string_view kDoc =
      "A task's container saved as an image with a snapshot: a run restored from the snapshot "
      "runs in it.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("id", s.id, {.required = true, .max_bytes = 7 + kSha256HexBytes, .doc = "sha256:<hex>"});
    v("base", s.base,
      {.required = true, .max_bytes = 512, .doc = "The image it was saved from: the task's"});
    v("bytes", s.bytes,
      {.min = 0, .doc = "Its archive: the layers the base lacks, what a node without it loads"});
    v("saved", s.saved,
      {.doc = "Saved by this snapshot; false: its run's image, saved by an earlier one and kept "
              "by this one"});
  }
};

struct Snapshot {
  std::string id;
  std::string task_id;
  std::string project;
  int32_t run = 0;
  std::string trigger;
  std::string consistency;
  std::string node;
  std::string manifest;
  int64_t files = 0;
  int64_t bytes = 0;
  int64_t new_bytes = 0;
  int64_t taken_ms = 0;
  int64_t frozen_ms = 0;
  int64_t duration_ms = 0;
  std::optional<SnapshotImage> image{};

  static constexpr std::string_view kName = "Snapshot";
  static constexpr std::string_view kDoc =
      "A task's workspace at a moment, stored content-addressed in the project's storage.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("id", s.id, {.doc = "s-<seq>"});
    v("task_id", s.task_id);
    v("project", s.project);
    v("run", s.run, {.doc = "The task's run it was taken in"});
    v("trigger", s.trigger,
      {.one_of = kSnapshotTriggers,
       .doc = "manual (asked for), periodic (snapshot_every_ms), or before a stop, preemption, "
              "drain or move"});
    v("consistency", s.consistency,
      {.one_of = kConsistencies,
       .doc = "crash: frozen while read; application: the task also checkpointed when asked"});
    v("node", s.node, {.doc = "Where it was taken"});
    v("manifest", s.manifest, {.doc = "SHA-256 of its manifest"});
    v("files", s.files);
    v("bytes", s.bytes, {.doc = "The workspace's size"});
    v("new_bytes", s.new_bytes,
      {.doc = "What it added to the project's storage (chunks no earlier snapshot had)"});
    v("taken_ms", s.taken_ms, {.doc = "When the task was frozen: its work up to here is kept"});
    v("frozen_ms", s.frozen_ms, {.doc = "How long the task was frozen"});
    v("duration_ms", s.duration_ms, {.doc = "From the request to the stored record"});
    v("image", s.image, {.doc = "The container saved as an image (tasks with an image)"});
  }
};

struct SnapshotList {
  std::vector<Snapshot> snapshots;
  static constexpr std::string_view kName = "SnapshotList";
  static constexpr std::string_view kDoc = "Snapshots, oldest first.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("snapshots", s.snapshots, {.max_items = 100'000});
  }
};

// GET /v1/snapshots.
struct SnapshotListQuery {
  std::string task;
  std::string project;
  static constexpr std::string_view kName = "SnapshotListQuery";
  static constexpr std::string_view kDoc = "Which snapshots to list.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task", s.task, {.max_bytes = 128, .doc = "Only this task's; empty: every task's"});
    v("project", s.project, {.max_bytes = 128, .doc = "Only this project's; empty: the caller's"});
  }
};

// POST /v1/tasks/{id}/snapshots.
struct TaskSnapshotRequest {
  bool image = false;
  static constexpr std::string_view kName = "TaskSnapshotRequest";
  static constexpr std::string_view kDoc = "What to snapshot of a running task.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("image", s.image,
      {.doc = "Also save its container's file system as an image (a task with an image): the "
              "task resumed from it, or a task started from it, runs in that image"});
  }
};

// POST /v1/tasks/{id}/stop.
struct TaskStop {
  bool discard = false;
  static constexpr std::string_view kName = "TaskStop";
  static constexpr std::string_view kDoc = "How to stop a task.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("discard", s.discard,
      {.doc = "Do not snapshot a running task's workspace before stopping it (it cannot be "
              "resumed from where it stopped)"});
  }
};

// POST /v1/tasks/{id}/resume.
struct TaskResume {
  std::optional<std::string> snapshot;
  static constexpr std::string_view kName = "TaskResume";
  static constexpr std::string_view kDoc = "Which snapshot an ended task's next run starts from.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("snapshot", s.snapshot,
      {.format = Format::kIdentifier, .doc = "A snapshot of this task; default: its latest"});
  }
};

// POST /v1/agent/tasks/{id}/snapshots: what an agent captured (or why it could not).
struct SnapshotCommit {
  int32_t run = 0;
  std::string trigger;
  int64_t request = 0;
  std::string consistency = "crash";
  std::string manifest;
  int64_t files = 0;
  int64_t bytes = 0;
  int64_t new_bytes = 0;
  int64_t taken_ms = 0;
  int64_t frozen_ms = 0;
  int64_t duration_ms = 0;
  std::optional<SnapshotImage> image{};

  static constexpr std::string_view kName = "SnapshotCommit";
  static constexpr std::string_view kDoc =
      "A snapshot an agent captured and uploaded: its manifest and every chunk it lists are in "
      "the project's chunk store.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("run", s.run, {.required = true, .min = 1, .doc = "The task's run it was taken in"});
    v("trigger", s.trigger, {.required = true, .one_of = kSnapshotTriggers});
    v("request", s.request, {.min = 0, .doc = "The user's request it answers; 0: none"});
    v("consistency", s.consistency, {.one_of = kConsistencies});
    v("manifest", s.manifest,
      {.required = true, .max_bytes = kSha256HexBytes, .doc = "SHA-256 of the manifest"});
    v("files", s.files, {.min = 0});
    v("bytes", s.bytes, {.min = 0});
    v("new_bytes", s.new_bytes, {.min = 0, .doc = "Bytes of the chunks it uploaded that were new"});
    v("taken_ms", s.taken_ms, {.min = 0});
    v("frozen_ms", s.frozen_ms, {.min = 0});
    v("duration_ms", s.duration_ms, {.min = 0});
    v("image", s.image, {.doc = "Its manifest holds this image's archive"});
  }
};

// POST /v1/agent/tasks/{id}/snapshots/failed: a snapshot the agent was asked for and could not
// take.
struct SnapshotFailure {
  int32_t run = 0;
  std::string trigger;
  int64_t request = 0;
  std::string error;
  static constexpr std::string_view kName = "SnapshotFailure";
  static constexpr std::string_view kDoc = "Why a node could not take a snapshot it was asked for.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("run", s.run, {.required = true, .min = 1});
    v("trigger", s.trigger, {.required = true, .one_of = kSnapshotTriggers});
    v("request", s.request, {.min = 0, .doc = "The user's request; 0: none"});
    v("error", s.error, {.required = true, .doc = "For people"});
  }
};

// POST /v1/agent/tasks/{id}/chunks/missing: which of these the project's store lacks.
struct ChunkSet {
  std::vector<std::string> chunks;
  static constexpr std::string_view kName = "ChunkSet";
  static constexpr std::string_view kDoc = "Chunks by their SHA-256.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("chunks", s.chunks, {.max_bytes = kSha256HexBytes, .max_items = kMaxChunksPerQuery});
  }
};

// One file of a manifest: its path in the workspace, mode bits, size, modification time and the
// chunks whose bytes, in order, are its contents.
struct ManifestFile {
  std::string path;
  int32_t mode = 0644;
  int64_t size = 0;
  int64_t mtime_ns = 0;
  std::vector<std::string> chunks;
  static constexpr std::string_view kName = "ManifestFile";
  static constexpr std::string_view kDoc = "A file of a snapshot.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("path", s.path, {.required = true, .doc = "From the workspace's top, / between names"});
    v("mode", s.mode, {.min = 0, .max = 07777});
    v("size", s.size, {.min = 0});
    v("mtime_ns", s.mtime_ns);
    v("chunks", s.chunks, {.max_bytes = kSha256HexBytes, .max_items = 1 << 24});
  }
};

// A saved image in a manifest: its archive is a `docker load` archive holding the layers the base
// lacks (the node loads the base first).
struct ManifestImage {
  std::string id;
  std::string base;
  ManifestFile archive;
  static constexpr std::string_view kName = "ManifestImage";
  static constexpr std::string_view kDoc = "The container saved as an image with a snapshot.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("id", s.id, {.required = true, .max_bytes = 7 + kSha256HexBytes});
    v("base", s.base, {.required = true, .max_bytes = 512});
    v("archive", s.archive, {.required = true});
  }
};

// The stored form of a snapshot's files (never sent as an API body: it is a chunk itself, or, for
// a workspace of many files, a root listing the chunks its encoding was cut into: ManifestPieces).
struct SnapshotManifest {
  int32_t version = 1;
  std::vector<std::string> dirs;
  std::vector<ManifestFile> files;
  std::optional<ManifestImage> image;
  std::vector<std::string> parts;
  static constexpr std::string_view kName = "SnapshotManifest";
  static constexpr std::string_view kDoc = "Which files a snapshot holds, in path order.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("version", s.version, {.min = 1, .max = 1});
    v("dirs", s.dirs, {.max_items = 1 << 24, .doc = "Directories, parents first (empty ones too)"});
    v("files", s.files, {.max_items = 1 << 24});
    v("image", s.image, {.doc = "The container saved as an image, when it was"});
    v("parts", s.parts,
      {.max_bytes = kSha256HexBytes,
       .max_items = 1 << 16,
       .doc = "A root's: the chunks whose bytes, in order, are the manifest's encoding (then it "
              "has nothing else)"});
  }
};

// What to store of `manifest`: its encoding when that fits one chunk (ChunkSizes::max); else that
// encoding cut into content-defined pieces (so that a large workspace's next manifest shares the
// pieces that did not change), each stored as a chunk named by its SHA-256, with a root listing
// them (ManifestRoot) as the manifest's name. One piece: store it alone.
std::vector<std::string> ManifestPieces(const SnapshotManifest& manifest);
// The root manifest that lists `part_sha256s`, encoded.
std::string ManifestRoot(const std::vector<std::string>& part_sha256s);
// A manifest from its stored bytes, a root's parts fetched through `part` (which verifies them
// against their names) and decoded whole; the result keeps the root's `parts`. kInvalidArgument
// for bytes that are not a manifest, or a part that is a root itself.
Result<SnapshotManifest> DecodeManifest(
    std::string_view stored, const std::function<Result<std::string>(const std::string&)>& part);

// Every file whose chunks a manifest lists: the workspace's, then a saved image's archive (what
// an upload sends, the server checks is stored and keeps from collection).
inline std::vector<const ManifestFile*> ChunkedFiles(const SnapshotManifest& manifest) {
  std::vector<const ManifestFile*> out;
  out.reserve(manifest.files.size() + 1);
  for (const ManifestFile& f : manifest.files) out.push_back(&f);
  if (manifest.image) out.push_back(&manifest.image->archive);
  return out;
}

// A snapshot as a task's next run starts from it (Assignments::restores).
struct SnapshotRef {
  std::string id;
  std::string manifest;
  int64_t taken_ms = 0;
  std::string image{};
  static constexpr std::string_view kName = "SnapshotRef";
  static constexpr std::string_view kDoc = "The snapshot a task's run restores its workspace from.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("id", s.id);
    v("manifest", s.manifest, {.doc = "SHA-256 of its manifest"});
    v("taken_ms", s.taken_ms);
    v("image", s.image,
      {.doc = "The saved image the run runs in (its archive is in the manifest); empty: the "
              "task's own image"});
  }
};

// A snapshot an agent is asked to take of a task it runs (Assignments::snapshots): by a user
// (`request` > 0), or before the stop, preemption or drain that took the task off the node.
struct SnapshotOrder {
  int32_t run = 0;
  std::string trigger;
  int64_t request = 0;
  bool image = false;
  static constexpr std::string_view kName = "SnapshotOrder";
  static constexpr std::string_view kDoc = "A snapshot the node must take of a task.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("run", s.run, {.doc = "The task's run to snapshot"});
    v("trigger", s.trigger, {.one_of = kSnapshotTriggers});
    v("request", s.request, {.doc = "A user's request; 0: the last snapshot before a stop"});
    v("image", s.image, {.doc = "Save the task's container as an image too"});
  }
};

}  // namespace gpupool::proto
