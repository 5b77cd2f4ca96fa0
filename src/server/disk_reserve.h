// DiskReserve: the free space the server keeps on its data dir's file system for its own database
// (docs/architecture.md "A full disk"). What callers send — a request that changes state, an
// upload's bytes, a task's output — is refused with kInsufficientStorage (507) once it would leave
// less than the reserve free; the server's own small writes (scheduling, billing, agents'
// reports, deletions) go on into the reserve, so the database practically never meets a full
// disk. The free space is read again after a second, or sooner once what was let in since the
// last reading comes to a quarter of the reserve; what was let in counts as used meanwhile (a
// request that changes state as kRequestBytes, an upload or output as its bytes), so neither a
// burst of writes nor another program filling the disk gets far past a stale reading.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>

#include "core/result.h"

namespace gpupool::server {

class DiskReserve {
 public:
  // The file system's free bytes now (os::FreeBytes of the data dir).
  using FreeBytes = std::function<Result<int64_t>()>;

  // `free_bytes` null: nothing is watched and every Admit passes. `now_ms`: the clock readings are
  // cached by.
  DiskReserve(FreeBytes free_bytes, int64_t reserve_bytes, std::function<int64_t()> now_ms);

  // What a request that changes state is taken to add to the database (its pages in the
  // write-ahead log, generously).
  static constexpr int64_t kRequestBytes = 64 << 10;

  // OK when `bytes` more can be written and the reserve still be free after them; otherwise
  // kInsufficientStorage, saying that `what` is refused, how much is free and the reserve. A
  // reading that fails lets the write through (the write itself then reports a full disk).
  Status Admit(int64_t bytes, std::string_view what);
  // Admit for a request that changes state (kRequestBytes, counted as written when admitted).
  Status AdmitRequest();
  // `bytes` were written since the last reading (they count until the next one).
  void Wrote(int64_t bytes);

  int64_t reserve_bytes() const { return reserve_bytes_; }

 private:
  // Admit under mu_: `bytes` must fit; the message names `named_bytes` (none when 0).
  Status AdmitLocked(int64_t bytes, int64_t named_bytes, std::string_view what);

  const FreeBytes free_bytes_;
  const int64_t reserve_bytes_;
  const std::function<int64_t()> now_ms_;
  std::mutex mu_;  // guards the reading
  int64_t read_ms_ = 0;
  bool have_reading_ = false;
  int64_t free_ = 0;   // at the reading, less what was written since
  int64_t spent_ = 0;  // written since the reading
};

}  // namespace gpupool::server
