// Snapshots of tasks' workspaces (docs/snapshots.md): the record the server keeps of each, its
// id, what took it and how consistent it is. The files themselves are a manifest (proto/
// snapshots.h SnapshotManifest) and chunks, both stored content-addressed by SHA-256 in the
// project's chunk store (server/chunk_store.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpupool {

// What took a snapshot: a user (`gpupool snapshot`), the task's --snapshot-every, or the agent
// before it stopped the task because a user stopped it, the scheduler preempted it, an admin
// drained its node, or the scheduler moved it to another node to make room (`gpupool server
// --moves`).
enum class SnapshotTrigger { kManual, kPeriodic, kStop, kPreempt, kDrain, kMove };
std::string_view SnapshotTriggerName(SnapshotTrigger t);  // "manual", "periodic", "stop", …
std::optional<SnapshotTrigger> ParseSnapshotTrigger(std::string_view name);
// A task's last snapshot of a run: taken because it is being taken off its node (stop, preempt,
// drain, move), which waits for it.
bool IsLastSnapshotTrigger(SnapshotTrigger t);

// crash: the task was frozen while its files were read (as after a power cut: whatever it had
// written); application: it also said, when asked, that it had checkpointed first.
enum class Consistency { kCrash, kApplication };
std::string_view ConsistencyName(Consistency c);  // "crash", "application"
std::optional<Consistency> ParseConsistency(std::string_view name);

// A task's container saved as an image with a snapshot (docker tasks: the "save image" of GPU
// clouds). Stored in the snapshot's manifest as a `docker load` archive of the layers its base
// lacks; a run restored from the snapshot runs in it.
struct SavedImage {
  std::string id;     // "sha256:<hex>": the image's id (its configuration's digest)
  std::string base;   // the image it was saved from: the task's own
  int64_t bytes = 0;  // of its archive (what a node without it loads)
  // Saved by this snapshot; false: the image its run ran in, saved by an earlier snapshot and
  // kept by every later one of the run.
  bool saved = false;

  friend bool operator==(const SavedImage&, const SavedImage&) = default;
};

struct TaskSnapshot {
  std::string id;  // "s-<seq>"
  int64_t seq = 0;
  std::string task_id;
  std::string project_id;
  int32_t run = 0;  // the task's run it was taken in (Task::run)
  SnapshotTrigger trigger = SnapshotTrigger::kManual;
  Consistency consistency = Consistency::kCrash;
  std::string node;
  std::string manifest;  // SHA-256 (hex) of its manifest in the project's chunk store
  int64_t files = 0;
  int64_t bytes = 0;        // the workspace's size
  int64_t new_bytes = 0;    // bytes of chunks the store did not have before it
  int64_t taken_ms = 0;     // when the task was frozen: its work up to here is in the snapshot
  int64_t frozen_ms = 0;    // how long the task was frozen
  int64_t duration_ms = 0;  // from the request to the record: checkpoint, capture and upload
  std::optional<SavedImage> image{};  // none: its run ran in the task's image, unchanged

  friend bool operator==(const TaskSnapshot&, const TaskSnapshot&) = default;
};

// The shortest --snapshot-every: a snapshot freezes the task briefly, so not more often.
inline constexpr int64_t kMinSnapshotEveryMs = 10'000;

// "s-<seq>" and its seq (> 0); nullopt for anything else.
std::string SnapshotId(int64_t seq);
std::optional<int64_t> SnapshotSeq(std::string_view id);

}  // namespace gpupool
