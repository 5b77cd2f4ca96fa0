// Implementation of rotating_log.h: appends with exact-size rotation, snapshot reads by logical
// offset.
#include "agent/runtime/rotating_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "agent/runtime/linux_proc.h"

namespace gpupool::agent {

RotatingLog::RotatingLog(std::string path, int64_t max_bytes, int keep, int64_t base, int64_t size,
                         int fd)
    : path_(std::move(path)),
      max_bytes_(max_bytes),
      keep_(keep),
      base_(base),
      size_(size),
      fd_(fd) {}

RotatingLog::RotatingLog(RotatingLog&& other) noexcept
    : path_(std::move(other.path_)),
      max_bytes_(other.max_bytes_),
      keep_(other.keep_),
      base_(other.base_),
      size_(other.size_),
      fd_(std::exchange(other.fd_, -1)) {}

RotatingLog& RotatingLog::operator=(RotatingLog&& other) noexcept {
  if (this != &other) {
    CloseWriter();
    path_ = std::move(other.path_);
    max_bytes_ = other.max_bytes_;
    keep_ = other.keep_;
    base_ = other.base_;
    size_ = other.size_;
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

RotatingLog::~RotatingLog() { CloseWriter(); }

void RotatingLog::CloseWriter() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

Result<RotatingLog> RotatingLog::Open(std::string path, int64_t max_bytes, int keep, int64_t base) {
  if (max_bytes < 0 || keep < 0) {
    return InvalidArgument("log rotation: max_bytes " + std::to_string(max_bytes) + " and keep " +
                           std::to_string(keep) + " must not be negative");
  }
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) {
    return MakeError(ErrorCode::kInternal, "cannot open log " + path + ": " + ErrnoText(errno));
  }
  struct stat st {};
  fstat(fd, &st);
  return RotatingLog(std::move(path), max_bytes, keep, base, st.st_size, fd);
}

Status RotatingLog::Rotate() {
  CloseWriter();
  if (keep_ == 0) {
    unlink(path_.c_str());
  } else {
    unlink(Rotated(keep_).c_str());
    for (int k = keep_ - 1; k >= 1; --k) rename(Rotated(k).c_str(), Rotated(k + 1).c_str());
    rename(path_.c_str(), Rotated(1).c_str());
  }
  base_ += size_;
  size_ = 0;
  fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0640);
  if (fd_ < 0) {
    return MakeError(ErrorCode::kInternal,
                     "cannot open log " + path_ + " after rotation: " + ErrnoText(errno));
  }
  return {};
}

Status RotatingLog::Append(const char* data, size_t size, bool* rotated) {
  while (size > 0) {
    if (max_bytes_ > 0 && size_ >= max_bytes_) {
      if (auto st = Rotate(); !st) return st;
      *rotated = true;
    }
    if (fd_ < 0) {
      return MakeError(ErrorCode::kFailedPrecondition, "log " + path_ + " is closed");
    }
    size_t take = size;
    if (max_bytes_ > 0) take = std::min<size_t>(size, static_cast<size_t>(max_bytes_ - size_));
    const ssize_t n = write(fd_, data, take);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return MakeError(ErrorCode::kInternal, "cannot write log " + path_ + ": " + ErrnoText(errno));
    }
    size_ += n;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return {};
}

RotatingLog::Snapshot::Snapshot(Snapshot&& other) noexcept
    : files(std::move(other.files)), end(other.end) {
  other.files.clear();
}

RotatingLog::Snapshot::~Snapshot() {
  for (const File& f : files) close(f.fd);
}

RotatingLog::Snapshot RotatingLog::TakeSnapshot() const {
  Snapshot snap;
  snap.end = end();
  const int cur = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (cur < 0) return snap;
  // Older files, newest (.1) first, each ending where the next newer one starts.
  std::vector<Snapshot::File> older;
  int64_t start = base_;
  for (int k = 1; k <= keep_; ++k) {
    const int fd = open(Rotated(k).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    struct stat st {};
    fstat(fd, &st);
    start -= st.st_size;
    if (start < 0) {  // not ours (a stale file from before a restart without state): stop here
      close(fd);
      break;
    }
    older.push_back({fd, start});
  }
  for (auto it = older.rbegin(); it != older.rend(); ++it) snap.files.push_back(*it);
  snap.files.push_back({cur, base_});
  return snap;
}

Result<LogChunk> RotatingLog::Read(const Snapshot& snapshot, int64_t offset, int64_t max_bytes) {
  LogChunk chunk;
  chunk.end = snapshot.end;
  if (offset < 0 || max_bytes < 0) {
    return InvalidArgument("log read: offset " + std::to_string(offset) + " and max_bytes " +
                           std::to_string(max_bytes) + " must not be negative");
  }
  if (offset > snapshot.end) {
    return InvalidArgument("log offset " + std::to_string(offset) + " is past the end (" +
                           std::to_string(snapshot.end) + ")");
  }
  if (snapshot.files.empty()) {
    chunk.offset = chunk.next_offset = offset;
    return chunk;
  }
  offset = std::max(offset, snapshot.files.front().start);
  chunk.offset = offset;
  int64_t pos = offset;
  for (size_t i = 0; i < snapshot.files.size() && max_bytes > 0; ++i) {
    const auto& f = snapshot.files[i];
    const int64_t file_end =
        i + 1 < snapshot.files.size() ? snapshot.files[i + 1].start : snapshot.end;
    if (pos >= file_end) continue;
    std::string buf(static_cast<size_t>(std::min(max_bytes, file_end - pos)), '\0');
    size_t got = 0;
    while (got < buf.size()) {
      const ssize_t n = pread(f.fd, buf.data() + got, buf.size() - got,
                              static_cast<off_t>(pos - f.start + static_cast<int64_t>(got)));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    buf.resize(got);
    chunk.data += buf;
    pos += static_cast<int64_t>(got);
    max_bytes -= static_cast<int64_t>(got);
    if (pos < file_end) break;  // a short read: stop rather than skip bytes
  }
  chunk.next_offset = pos;
  return chunk;
}

}  // namespace gpupool::agent
