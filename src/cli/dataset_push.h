// Pushing a local directory as a dataset's new version (docs/datasets.md), the client side of
// `gpupool dataset push`. Scan: every regular file below the directory (links are not followed)
// is cut into content-defined chunks (core/chunker.h, as snapshots are) and hashed on several
// threads, and a manifest (proto::SnapshotManifest) lists them; only where each chunk's bytes are
// in the files is kept, not the bytes. Send: the server is asked which chunks the dataset's
// project lacks, those are read again from the files and sent over several connections (the
// server verifies each against its name, so a file changed since the scan fails the push rather
// than storing the wrong bytes), then the manifest, then the version is recorded. A chunk the
// project stores — from an earlier version, another dataset or a snapshot of it — is never sent
// again: a directory with 1 % of its bytes changed sends about 1 %. A scan cache (ScanCache)
// remembers each file's chunks by its size, modification time and inode, so that the next scan
// reads only the files that changed (the quick check rsync makes).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "api/client.h"
#include "core/result.h"
#include "proto/datasets.h"

namespace gpupool::cli {

// Where a chunk's bytes are: manifest.files[file] from `offset`.
struct ChunkPlace {
  size_t file = 0;
  int64_t offset = 0;
  int64_t size = 0;
};

// What a scan found of one file, kept for the next scan of the same directory: when the file's
// size, modification time (to the nanosecond) and inode are still these, so are its chunks.
struct ScannedFile {
  int64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t inode = 0;
  std::vector<std::string> chunks{};
  std::vector<ChunkPlace> places{};  // each chunk's offset and size (.file unused)
};
using ScanCache = std::map<std::string, ScannedFile>;  // by path relative to the directory

// A scan cache kept in `path` (a line per file). Missing or unreadable: empty (everything is read
// again); a cache is only ever a shortcut.
ScanCache LoadScanCache(const std::string& path);
// Writes it (to a temporary file renamed into place; its directory made when missing).
Status SaveScanCache(const std::string& path, const ScanCache& cache);

struct DatasetScan {
  proto::SnapshotManifest manifest;          // its files' paths relative to the directory
  std::vector<std::string> local;            // the local path of each of manifest.files
  std::map<std::string, ChunkPlace> chunks;  // every distinct chunk, by SHA-256
  // The manifest as stored: its encoding (or, for many files, its parts then the root that lists
  // them), by SHA-256; the root's is `manifest_sha256`.
  std::map<std::string, std::string> manifest_chunks;
  std::string manifest_sha256;
  int64_t files = 0;
  int64_t bytes = 0;
  int64_t read_bytes = 0;            // of the files read (not known to `previous`)
  std::vector<std::string> skipped;  // local entries left out, with why
  ScanCache cache;                   // for the next scan
};

// (bytes done, bytes in all) of a long step, for progress on a terminal.
using PushProgress = std::function<void(int64_t done, int64_t total)>;

// Scans `dir` on `threads` threads, taking from `previous` the chunks of the files whose size,
// modification time and inode it has as they are. Errors name the local path (missing, not a
// directory, a name a dataset cannot hold, a file that cannot be read).
Result<DatasetScan> ScanDataset(const std::string& dir, int threads,
                                const PushProgress& progress = {}, const ScanCache& previous = {});

struct PushSent {
  int64_t chunks = 0;  // sent: the project lacked them
  int64_t bytes = 0;
  proto::DatasetView dataset;  // with the new version last
};

// Sends what `dataset`'s project lacks of `scan` over `parallel` connections, then records the
// version.
Result<PushSent> SendDataset(api::Client& client, const std::string& dataset,
                             const DatasetScan& scan, int parallel,
                             const PushProgress& progress = {});

}  // namespace gpupool::cli
