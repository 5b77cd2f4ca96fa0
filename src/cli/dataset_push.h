// Pushing a local directory as a dataset's new version (docs/datasets.md), the client side of
// `gpupool dataset push`. Scan: every regular file below the directory (links are not followed)
// is cut into content-defined chunks (core/chunker.h, as snapshots are) and hashed on several
// threads, and a manifest (proto::SnapshotManifest) lists them; only where each chunk's bytes are
// in the files is kept, not the bytes. Send: the server is asked which chunks the dataset's
// project lacks, those are read again from the files and sent over several connections (the
// server verifies each against its name, so a file changed since the scan fails the push rather
// than storing the wrong bytes), then the manifest, then the version is recorded. A chunk the
// project stores — from an earlier version, another dataset or a snapshot of it — is never sent
// again: a directory with 1 % of its bytes changed sends about 1 %.
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
  std::vector<std::string> skipped;  // local entries left out, with why
};

// (bytes done, bytes in all) of a long step, for progress on a terminal.
using PushProgress = std::function<void(int64_t done, int64_t total)>;

// Scans `dir` on `threads` threads. Errors name the local path (missing, not a directory, a
// name a dataset cannot hold, a file that cannot be read).
Result<DatasetScan> ScanDataset(const std::string& dir, int threads,
                                const PushProgress& progress = {});

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
