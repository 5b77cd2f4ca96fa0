// Implementation of disk_reserve.h.
#include "server/disk_reserve.h"

#include <algorithm>
#include <string>
#include <utility>

namespace gpupool::server {
namespace {

constexpr int64_t kReadingMs = 1000;  // how long a reading of the free space is trusted

std::string Amount(int64_t bytes) {
  return bytes < (1 << 20) ? std::to_string(bytes) + " bytes"
                           : std::to_string(bytes >> 20) + " MiB";
}

}  // namespace

DiskReserve::DiskReserve(FreeBytes free_bytes, int64_t reserve_bytes,
                         std::function<int64_t()> now_ms)
    : free_bytes_(std::move(free_bytes)),
      reserve_bytes_(reserve_bytes),
      now_ms_(std::move(now_ms)) {}

Status DiskReserve::Admit(int64_t bytes, std::string_view what) {
  if (!free_bytes_) return {};
  std::lock_guard lock(mu_);
  return AdmitLocked(bytes, bytes, what);
}

Status DiskReserve::AdmitRequest() {
  if (!free_bytes_) return {};
  std::lock_guard lock(mu_);
  Status admitted = AdmitLocked(kRequestBytes, 0, "writes are");
  if (admitted) {
    free_ -= kRequestBytes;
    spent_ += kRequestBytes;
  }
  return admitted;
}

Status DiskReserve::AdmitLocked(int64_t bytes, int64_t named_bytes, std::string_view what) {
  const int64_t now = now_ms_();
  if (!have_reading_ || now - read_ms_ >= kReadingMs || now < read_ms_ ||
      spent_ >= reserve_bytes_ / 4) {
    Result<int64_t> free = free_bytes_();
    if (!free) return {};  // the write reports a full disk itself, if it is one
    free_ = *free;
    spent_ = 0;
    read_ms_ = now;
    have_reading_ = true;
  }
  if (free_ - bytes >= reserve_bytes_) return {};
  return MakeError(
      ErrorCode::kInsufficientStorage,
      "the server's disk is full: " + Amount(std::max<int64_t>(free_, 0)) +
          " free on the file system of its data directory" +
          (named_bytes > 0 ? " (" + std::to_string(named_bytes) + " bytes more asked for)" : "") +
          ", and it keeps " + Amount(reserve_bytes_) + " in reserve for its database; " +
          std::string(what) +
          " refused until space is freed (deleting tasks frees their files and "
          "output; reads keep working)");
}

void DiskReserve::Wrote(int64_t bytes) {
  if (!free_bytes_ || bytes <= 0) return;
  std::lock_guard lock(mu_);
  free_ -= bytes;
  spent_ += bytes;
}

}  // namespace gpupool::server
