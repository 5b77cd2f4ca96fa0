// ChunkDir: a directory of content-addressed chunks, each a file named by the SHA-256 of its bytes
// (root/<first two hex digits>/<sha256>) — the server's store of each project's snapshot chunks
// and a node agent's chunk cache. A chunk is written to root/tmp and renamed into place, so its
// name never shows a part of it. Bytes are verified against their name as they are stored and
// read, unless the caller hashed them itself or a reader after it will. Writes are not synced
// one by one: Sync makes every chunk written so far durable at once.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpupool::os {

class ChunkDir {
 public:
  explicit ChunkDir(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }
  // Where chunk `sha256` (64 lower-case hex digits) lives.
  std::string PathOf(std::string_view sha256) const;

  // Whether the chunk is here; with `touch`, a chunk that is gets the current time as its
  // modification time (what Collect's age rule reads: a chunk a new snapshot counts on is young).
  bool Has(std::string_view sha256, bool touch = false) const;
  // Stores `bytes` as chunk `sha256`. kInvalidArgument when `sha256` is not a digest or, with
  // `verify`, not their SHA-256 (without: the caller just computed it from these bytes); file
  // errors as os::FileError (kInsufficientStorage on a full disk). Returns true when the chunk
  // is new, false when it was here already (then nothing is written).
  Result<bool> Put(std::string_view sha256, std::string_view bytes, bool verify = true) const;
  // The chunk's bytes. kNotFound when it is not here; with `verify`, kInternal naming the chunk
  // when its bytes are not what its name says (corrupt: the caller must not use them), and the
  // chunk touched (its modification time is now: recently used, for Trim). Without, the reader
  // verifies them itself (the server's chunks sent to an agent, which does).
  Result<std::string> Get(std::string_view sha256, bool verify = true) const;
  // Removes the chunk (absent: no error).
  Status Remove(std::string_view sha256) const;
  // Makes every chunk written so far durable (syncfs of the file system holding the directory).
  Status Sync() const;
  // Deletes the least recently used chunks (by modification time: Put and a verified Get touch
  // a chunk) until the directory holds at most `max_bytes`. Returns the bytes freed.
  Result<int64_t> Trim(int64_t max_bytes) const;

  struct Entry {
    std::string sha256;
    int64_t size = 0;
    int64_t mtime_ms = 0;
  };
  // Calls `visit` for every chunk here (files not named as chunks are skipped).
  Status ForEach(const std::function<void(const Entry&)>& visit) const;

 private:
  std::string root_;
};

}  // namespace gpupool::os
