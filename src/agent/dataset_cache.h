// The node's dataset cache (docs/datasets.md): each dataset version a task of this node mounts,
// materialized once per node as a read-only tree of files that every task mounting it binds
// read-only. root/<manifest sha256>/files holds the version's files (0444, 0555 when executable;
// directories 0555) and root/<manifest sha256>/manifest.json its manifest (what the next version
// reuses files from). A version is built in root/tmp and renamed into place when complete, so a
// crash never leaves a part of one that looks whole. The chunks it lacks come from the dataset's
// chunk store through the node's chunk cache (os::ChunkDir, shared with snapshots), each verified;
// a file whose path, mode and chunks equal one of a version already here is hard-linked from it
// (no transfer, no extra disk), so a new version with 1 % changed costs about 1 %. The versions
// are kept within a size, the least recently used that no task mounts evicted first.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "agent/snapshotter.h"
#include "api/client.h"
#include "core/dataset.h"
#include "core/result.h"
#include "os/chunk_dir.h"

namespace gpupool::agent {

// What one Materialize did.
struct Materialized {
  std::string dir;     // the version's files: what a task's mount binds
  bool built = false;  // false: it was here already (nothing fetched, nothing written)
  int64_t files = 0;
  int64_t bytes = 0;
  int64_t linked_files = 0;  // hard-linked from other versions here
  int64_t linked_bytes = 0;
  int64_t fetched_chunks = 0;  // from the server (the manifest's pieces included)
  int64_t fetched_bytes = 0;
};

class DatasetCache {
 public:
  // `root` is created when missing; what an interrupted build left in root/tmp is removed, and
  // the versions already here are known again (their last use: their directory's time).
  // `chunks`: the node's chunk cache, which the agent trims to its own size; with
  // `chunk_cache_bytes` ≥ 0, a build trims it to that size too after each group of files it
  // writes (at most half that size of files per group), so that a version much larger than the
  // chunk cache never holds its bytes twice on the node's disk.
  static Result<std::unique_ptr<DatasetCache>> Open(std::string root, os::ChunkDir chunks,
                                                    int64_t max_bytes,
                                                    int64_t chunk_cache_bytes = -1);

  // The version of `mount` (dataset_id, manifest) present on this node: built when it is not
  // (fetching from the dataset's chunk store over `parallel` connections, siblings of
  // `client`), then marked used now. Callers asking for the same version wait for one build.
  // A build that fails leaves nothing; its error names the chunk or file (the caller names the
  // dataset). After a build, the caller trims the cache to its size (Evict).
  Result<Materialized> Materialize(api::Client& client, const DatasetMount& mount, int parallel,
                                   const std::function<bool()>& cancelled);

  // The versions (manifest SHA-256s) that tasks of this node mount: never evicted.
  void SetInUse(std::set<std::string> manifests);
  // Removes the least recently used versions that are not in use (nor being built) while the
  // versions hold more than the cache's size (files hard-linked between versions counted once).
  // The versions removed.
  Result<std::vector<std::string>> Evict();

  // The versions here, the most recently used first, at most `max`.
  std::vector<std::string> Held(size_t max) const;
  // Where a version's files are (whether or not it is here).
  std::string FilesDir(const std::string& manifest) const;

 private:
  DatasetCache(std::string root, os::ChunkDir chunks, int64_t max_bytes, int64_t chunk_cache_bytes)
      : root_(std::move(root)),
        chunks_(std::move(chunks)),
        max_bytes_(max_bytes),
        chunk_cache_bytes_(chunk_cache_bytes) {}

  Result<Materialized> Build(api::Client& client, const DatasetMount& mount, int parallel,
                             const std::function<bool()>& cancelled);
  // The version's directory gets the current time: the order of use a restarted agent reads.
  void KeepUse(const std::string& manifest) const;

  const std::string root_;
  const os::ChunkDir chunks_;
  const int64_t max_bytes_;
  const int64_t chunk_cache_bytes_;  // < 0: a build does not trim the chunk cache

  mutable std::mutex mu_;
  std::condition_variable built_;        // a build ended
  std::set<std::string> building_;       // manifests being built
  std::map<std::string, int64_t> used_;  // the versions here → their last use (a sequence)
  int64_t uses_ = 0;                     // the last use's number
  std::set<std::string> in_use_;         // SetInUse
  std::mutex evict_mu_;                  // one eviction at a time
};

}  // namespace gpupool::agent
