// ChunkStore: the server's content-addressed storage of snapshots (docs/snapshots.md), one
// os::ChunkDir per project (root/<project>/…): chunks of the tasks' workspaces and the manifests
// that list them, each named by its SHA-256. Chunks are shared by every snapshot of a project that
// has the same bytes (never across projects: whether a chunk exists must not tell one project
// what another stores). It counts each project's bytes (against its storage quota, with its
// task files) and collects the chunks no snapshot lists any more. Thread-safe; every call does
// disk I/O, so the Controller calls it on the blocking-work executor.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/result.h"
#include "os/chunk_dir.h"
#include "proto/snapshots.h"

namespace gpupool::server {

class ChunkStore {
 public:
  // Chunks younger than `collect_min_age_ms` are never collected: they may belong to a snapshot
  // being uploaded (and a chunk a new snapshot counts on is touched by Missing, so it is young
  // again).
  static constexpr int64_t kDefaultCollectMinAgeMs = 3'600'000;

  explicit ChunkStore(std::string root, int64_t collect_min_age_ms = kDefaultCollectMinAgeMs)
      : root_(std::move(root)), collect_min_age_ms_(collect_min_age_ms) {}
  // Counts the bytes of every project's chunks (a walk of the directory, once, at start-up).
  Status Open();

  // Which of `chunks` the project does not store (in their order). Those it stores are touched.
  std::vector<std::string> Missing(const std::string& project,
                                   const std::vector<std::string>& chunks) const;
  // Stores a chunk whose bytes hash to `sha256` (kInvalidArgument otherwise). `limit` ≥ 0: the
  // project may hold at most this many bytes of chunks (its quota less its task files): a new
  // chunk past it is kResourceExhausted. Returns whether the chunk is new.
  Result<bool> Put(const std::string& project, const std::string& sha256, std::string_view bytes,
                   int64_t limit = -1);
  // A chunk's bytes: kNotFound when it is not stored. Not verified here: the agent that fetches
  // a chunk verifies it (and fails the restore naming it), which spares the server hashing every
  // byte it sends.
  Result<std::string> Get(const std::string& project, const std::string& sha256) const;
  // A stored manifest, decoded (a root's parts read and joined: kFailedPrecondition when one is
  // missing).
  Result<proto::SnapshotManifest> Manifest(const std::string& project,
                                           const std::string& sha256) const;
  // kFailedPrecondition naming the first chunk `manifest` lists that the project does not store.
  Status CheckComplete(const std::string& project, const proto::SnapshotManifest& manifest) const;
  // Makes the chunks stored so far durable (before a snapshot that lists them is recorded).
  Status Sync(const std::string& project) const;
  // Deletes the project's chunks that none of `manifests` is or lists and that are older than
  // the minimum age (by their modification time against the system clock, the files' own). A
  // manifest that cannot be read keeps everything (nothing is deleted on a doubt). Returns the
  // bytes freed.
  Result<int64_t> Collect(const std::string& project, const std::vector<std::string>& manifests);
  int64_t ProjectBytes(const std::string& project) const;

 private:
  os::ChunkDir Dir(const std::string& project) const { return os::ChunkDir(root_ + "/" + project); }

  const std::string root_;
  const int64_t collect_min_age_ms_;
  // One collection at a time (taken before mu_): two at once would both count the bytes of a
  // chunk they both remove.
  std::mutex collect_mu_;
  mutable std::mutex mu_;
  std::map<std::string, int64_t> bytes_;  // by project
};

}  // namespace gpupool::server
