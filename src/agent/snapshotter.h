// A task's workspace captured into a snapshot and restored from one, on its node
// (docs/snapshots.md). Capture walks the workspace while the task is frozen, cuts the files that
// changed since the last capture into content-defined chunks (core/chunker.h) and keeps them in
// the node's chunk cache (os::ChunkDir); Upload sends the server the chunks its project lacks and
// the manifest; Restore rebuilds a snapshot's files, fetching only the chunks the cache lacks, each
// verified against its SHA-256 (from a task's project, or a dataset's: ChunkSource). Files are
// taken as WalkWorkspaceDir takes them: never through a symbolic link, only the workspace owner's
// regular files.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/client.h"
#include "core/result.h"
#include "os/chunk_dir.h"
#include "proto/snapshots.h"

namespace gpupool::agent {

// What the agent remembers of a file it captured or restored: when size, modification time (to
// the nanosecond) and inode are still the same, so are its bytes, and its chunks are taken
// without reading it again. Unlike restic the change time is not compared: giving the restored
// workspace to the task's uid changes every file's, which would make the first snapshot after a
// resume read everything again.
struct ScannedFile {
  int64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t inode = 0;
  std::vector<std::string> chunks{};
};
using ScanIndex = std::map<std::string, ScannedFile>;  // by path in the workspace

struct Capture {
  proto::SnapshotManifest manifest;
  std::string manifest_sha256;  // SealCapture: of its encoding, in the cache under that name
  ScanIndex index;              // for the next capture
  int64_t files = 0;
  int64_t bytes = 0;                 // the files' sizes
  int64_t read_bytes = 0;            // of the files read (new or changed)
  int64_t frozen_ms = 0;             // from freeze to thaw
  int64_t taken_ms = 0;              // wall clock at the freeze
  std::vector<std::string> skipped;  // "'<path>': <why>" (symbolic links, others' files)
};

// Freezes the task (true) or thaws it (false).
using FreezeTask = std::function<Status(bool frozen)>;

// Captures `workspace`: `freeze(true)` first, then every file is stat'ed, those not in `previous`
// as they are now are read and chunked into `cache`, then `freeze(false)` — also when the walk
// fails. A freeze that fails fails the capture (the task is thawed). Errors name the file.
Result<Capture> CaptureWorkspace(const std::string& workspace, const ScanIndex& previous,
                                 const os::ChunkDir& cache, const FreezeTask& freeze);
// Encodes the capture's manifest (with whatever was added to it since, a saved image) into
// `cache`, and names it. kResourceExhausted when it would exceed one chunk (too many files).
Status SealCapture(Capture& capture, const os::ChunkDir& cache);

// The file behind `fd` (a saved image's archive) cut into chunks in `cache`, as a manifest file
// named `name`.
Result<proto::ManifestFile> ChunkIntoCache(int fd, const std::string& name,
                                           const os::ChunkDir& cache);

// What a task's runner carries from one capture to the next: the files as last captured or
// restored, and the saved image its run runs in, which every snapshot of the run keeps (so
// that a run resumed from any of them runs in it too).
struct CaptureState {
  ScanIndex index;
  std::optional<proto::ManifestImage> image;
};

struct Uploaded {
  int64_t chunks = 0;  // sent: the server lacked them
  int64_t bytes = 0;
};

// Sends the chunks of `capture` (and its manifest) that the task's project lacks, from `cache`,
// over `parallel` connections (siblings of `client`). `cancelled` is asked between chunks.
Result<Uploaded> UploadCapture(api::Client& client, const std::string& task_id,
                               const Capture& capture, const os::ChunkDir& cache, int parallel,
                               const std::function<bool()>& cancelled);

// Where a restore fetches the chunks the cache lacks: the chunk store of the project of a task of
// this node (AgentApi::GetChunk), or of a dataset a task of this node mounts (GetDatasetChunk).
struct ChunkSource {
  enum class Of { kTask, kDataset };
  Of of = Of::kTask;
  std::string id{};

  static ChunkSource Task(std::string task_id) { return {Of::kTask, std::move(task_id)}; }
  static ChunkSource Dataset(std::string dataset_id) {
    return {Of::kDataset, std::move(dataset_id)};
  }
  // The server's bytes of the chunk, unverified.
  Result<proto::Bytes> Get(api::Client& client, const std::string& sha256) const;
};

struct Restored {
  ScanIndex index;  // of the files as written, for the next capture
  int64_t files = 0;
  int64_t bytes = 0;
  int64_t fetched_chunks = 0;  // from the server (the rest were in the cache)
  int64_t fetched_bytes = 0;
  std::optional<proto::ManifestImage> image;  // RestoreWorkspace: the manifest's saved image
};

// The manifest named `manifest_sha256` (a root and its parts) from `cache`, each piece the cache
// lacks fetched from `source` (counted in `counts`' fetched_*). kInternal for one that is
// malformed, the source's error otherwise; messages name the manifest.
Result<proto::SnapshotManifest> LoadManifest(api::Client& client, const ChunkSource& source,
                                             const std::string& manifest_sha256,
                                             const os::ChunkDir& cache, Restored& counts);

// Writes `files` below existing directory `dir` (whose directories exist; what is there is
// replaced), fetching the chunks `cache` lacks from `source` over `parallel` connections. Every
// chunk is verified against its name: a corrupt or missing one fails the restore (kInternal /
// kNotFound naming the chunk and the file), so a task never runs on damaged files. A saved
// image's archive, a dataset's files.
Result<Restored> RestoreFiles(api::Client& client, const ChunkSource& source,
                              const std::vector<proto::ManifestFile>& files,
                              const os::ChunkDir& cache, const std::string& dir, int parallel,
                              const std::function<bool()>& cancelled);

// Writes the files of the snapshot whose manifest is `manifest_sha256` below `dir` (created when
// missing; a file already there is left as it is when `keep_existing`, else replaced), as
// RestoreFiles does.
Result<Restored> RestoreWorkspace(api::Client& client, const ChunkSource& source,
                                  const std::string& manifest_sha256, const os::ChunkDir& cache,
                                  const std::string& dir, bool keep_existing, int parallel,
                                  const std::function<bool()>& cancelled);

}  // namespace gpupool::agent
