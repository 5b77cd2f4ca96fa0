// A task's captured output stream (stdout or stderr) written by the agent into a file with
// size-based rotation (stdout.log, stdout.log.1 … .N), and reads of it by logical offset: the
// count of bytes the stream produced since the task started, stable across rotations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpupool::agent {

// Bytes of a log from `offset` on. `offset` is past the asked one when older bytes were rotated
// away; `next_offset` is where the following read starts; `end` is the stream's length now.
struct LogChunk {
  std::string data;
  int64_t offset = 0;
  int64_t next_offset = 0;
  int64_t end = 0;
};

class RotatingLog {
 public:
  // Opens (appending to) `path`. `base` is the logical offset of the current file's first byte
  // (the bytes already rotated into older files, as persisted by the owner). max_bytes 0: never
  // rotate; keep: rotated files kept (0: a full file is dropped).
  static Result<RotatingLog> Open(std::string path, int64_t max_bytes, int keep, int64_t base);

  RotatingLog(RotatingLog&& other) noexcept;
  RotatingLog& operator=(RotatingLog&& other) noexcept;
  RotatingLog(const RotatingLog&) = delete;
  RotatingLog& operator=(const RotatingLog&) = delete;
  ~RotatingLog();

  // Appends, rotating whenever the current file reaches max_bytes (files are cut exactly there).
  // Sets *rotated when a rotation happened (the owner then persists base()).
  Status Append(const char* data, size_t size, bool* rotated);
  // Closes the file for writing; reads still work.
  void CloseWriter();

  int64_t base() const { return base_; }
  int64_t end() const { return base_ + size_; }
  const std::string& path() const { return path_; }

  // The files that hold the stream now, oldest first, opened so that a later rotation cannot
  // move them away: take it under the owner's lock, read it without.
  struct Snapshot {
    struct File {
      int fd = -1;
      int64_t start = 0;  // logical offset of its first byte
    };
    std::vector<File> files;
    int64_t end = 0;  // logical end when the snapshot was taken
    Snapshot() = default;
    Snapshot(Snapshot&& other) noexcept;
    Snapshot& operator=(Snapshot&&) = delete;
    Snapshot(const Snapshot&) = delete;
    ~Snapshot();
  };
  Snapshot TakeSnapshot() const;
  // Up to `max_bytes` from logical `offset`; an offset past the end is an error.
  static Result<LogChunk> Read(const Snapshot& snapshot, int64_t offset, int64_t max_bytes);

 private:
  RotatingLog(std::string path, int64_t max_bytes, int keep, int64_t base, int64_t size, int fd);
  Status Rotate();
  std::string Rotated(int k) const { return path_ + "." + std::to_string(k); }

  std::string path_;
  int64_t max_bytes_ = 0;
  int keep_ = 0;
  int64_t base_ = 0;
  int64_t size_ = 0;
  int fd_ = -1;
};

}  // namespace gpupool::agent
