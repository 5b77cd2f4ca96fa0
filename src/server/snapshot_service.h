// SnapshotService: snapshots of tasks' workspaces (docs/snapshots.md). Users take one of a running
// task, list and delete them, and resume an ended task from one; agents commit the snapshots
// they captured (after uploading the chunks into the project's ChunkStore) or say why they could
// not, and move the chunks. The server asks a node for a snapshot through its assignments
// (NodeAssignments::snapshots): a user's request, or the last one of a task taken off the node by
// a stop, preemption or drain — such a task is not placed again until that snapshot is stored or
// its time ran out, so its next run starts from it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/records.h"
#include "core/snapshot.h"
#include "server/caller.h"

namespace gpupool::server {

// A snapshot a node must take (NodeAssignments::snapshots).
struct SnapshotOrder {
  int32_t run = 0;
  SnapshotTrigger trigger = SnapshotTrigger::kManual;
  int64_t request = 0;  // > 0: a user's request, answered by the snapshot that carries it
  bool image = false;   // save the task's container as an image too (a user's request)
};

// What an agent captured (proto::SnapshotCommit).
struct SnapshotCapture {
  int32_t run = 0;
  SnapshotTrigger trigger = SnapshotTrigger::kManual;
  int64_t request = 0;
  Consistency consistency = Consistency::kCrash;
  std::string manifest;
  int64_t files = 0;
  int64_t bytes = 0;
  int64_t new_bytes = 0;
  int64_t taken_ms = 0;
  int64_t frozen_ms = 0;
  int64_t duration_ms = 0;
  std::optional<SavedImage> image;  // its manifest holds the image's archive
};

// Errors: NotFound for a task or snapshot the caller may not see; kFailedPrecondition for a task
// in the wrong state (named) or a snapshot that is not complete; kUnavailable when the server
// keeps no chunks, or a node did not answer a request in time; the chunk store's errors.
class SnapshotService {
 public:
  virtual ~SnapshotService() = default;

  // A user's: snapshot running task `task_id` now, with its container saved as an image when
  // `image` (a task with an image only: kInvalidArgument naming `image` otherwise); answered once
  // its node stored it.
  virtual void SnapshotTask(const Caller& caller, const std::string& task_id, bool image,
                            Done<TaskSnapshot> done) = 0;
  // Queues an ended task again (a new run), its workspace restored from `snapshot` (one of its
  // own; empty: its latest). kFailedPrecondition when it has none, or has not ended.
  virtual void ResumeTask(const Caller& caller, const std::string& task_id,
                          const std::string& snapshot, Done<Task> done) = 0;
  // The snapshots of `task_id` (empty: of every task) of `project` (empty: the caller's
  // projects), oldest first.
  virtual void ListSnapshots(const Caller& caller, const std::string& task_id,
                             const std::string& project, Done<std::vector<TaskSnapshot>> done) = 0;
  virtual void GetSnapshot(const Caller& caller, const std::string& id,
                           Done<TaskSnapshot> done) = 0;
  // Deletes the record; the chunks no other snapshot of the project lists are collected.
  virtual void DeleteSnapshot(const Caller& caller, const std::string& id, DoneStatus done) = 0;

  // An agent's, of a task bound to its node (or taken off it, for its last snapshot). The
  // manifest and every chunk it lists must be in the project's store; the snapshot belongs to
  // the task's current run (`capture.run`), else it is refused.
  virtual void CommitSnapshot(const Caller& caller, const std::string& task_id,
                              SnapshotCapture capture, Done<TaskSnapshot> done) = 0;
  virtual void FailSnapshot(const Caller& caller, const std::string& task_id, int32_t run,
                            SnapshotTrigger trigger, int64_t request, std::string error,
                            DoneStatus done) = 0;
  // Which of `chunks` the task's project does not store.
  virtual void FindMissingChunks(const Caller& caller, const std::string& task_id,
                                 std::vector<std::string> chunks,
                                 Done<std::vector<std::string>> done) = 0;
  // Stores a chunk (its bytes must hash to `sha256`) in the task's project, within the project's
  // storage quota (kResourceExhausted past it). Answers whether it was new.
  virtual void PutChunk(const Caller& caller, const std::string& task_id, const std::string& sha256,
                        std::string bytes, Done<bool> done) = 0;
  virtual void GetChunk(const Caller& caller, const std::string& task_id, const std::string& sha256,
                        Done<std::string> done) = 0;
};

}  // namespace gpupool::server
