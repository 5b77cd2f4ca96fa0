// Implementation of disk_watch.h: the du-like walk (openat, fstatat without following links,
// one device) and the thread that applies it to the watched tasks.
#include "agent/disk_watch.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <utility>

#include "core/bytes.h"

namespace gpupool::agent {
namespace {

struct UsageWalk {
  dev_t dev = 0;
  std::set<std::pair<dev_t, ino_t>> linked;  // files with several links, counted once
  int64_t bytes = 0;

  void Count(const struct stat& st) {
    if (!S_ISDIR(st.st_mode) && st.st_nlink > 1 && !linked.insert({st.st_dev, st.st_ino}).second) {
      return;
    }
    bytes += static_cast<int64_t>(st.st_blocks) * 512;
  }

  // Counts what is below the open directory `fd` (which it closes).
  void Dir(int fd) {
    DIR* d = fdopendir(fd);
    if (d == nullptr) {
      close(fd);
      return;
    }
    while (const dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      struct stat st {};
      if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone
      Count(st);
      if (!S_ISDIR(st.st_mode) || st.st_dev != dev) continue;
      const int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) Dir(sub);
    }
    closedir(d);
  }
};

}  // namespace

Result<int64_t> DiskUsageBytes(const std::string& dir) {
  const int top = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st {};
  if (top < 0 || fstat(top, &st) != 0) {
    const int err = errno;
    if (top >= 0) close(top);
    return MakeError(ErrorCode::kNotFound, "cannot open " + dir + ": " + std::strerror(err));
  }
  UsageWalk walk;
  walk.dev = st.st_dev;
  walk.Count(st);
  walk.Dir(top);  // closes it
  return walk.bytes;
}

std::string DiskLimitReason(int64_t limit_gib, int64_t used_bytes) {
  char used[32];
  std::snprintf(used, sizeof used, "%.1f", static_cast<double>(used_bytes) / (1 << 30));
  return "disk limit of " + std::to_string(limit_gib) + " GB exceeded (the workspace holds " +
         used + " GiB)";
}

std::string VolumeLimitReason(const std::string& volume, int64_t size_bytes, int64_t used_bytes) {
  return "volume " + volume + " is over its size of " + FormatBytes(size_bytes) + " (it holds " +
         FormatBytes(used_bytes) + ")";
}

DiskWatch::DiskWatch(std::chrono::milliseconds interval)
    : interval_(interval), thread_([this] { Loop(); }) {}

DiskWatch::~DiskWatch() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void DiskWatch::Watch(const std::string& task_id, std::vector<std::string> dirs,
                      int64_t limit_gib) {
  std::lock_guard lock(mu_);
  watched_[{task_id, ""}] = Entry{std::move(dirs), limit_gib << 30, ""};
}

void DiskWatch::WatchVolume(const std::string& task_id, const std::string& name, std::string dir,
                            int64_t size_bytes) {
  std::lock_guard lock(mu_);
  watched_[{task_id, name}] = Entry{{std::move(dir)}, size_bytes, name};
}

void DiskWatch::Forget(const std::string& task_id) {
  std::lock_guard lock(mu_);
  std::erase_if(watched_, [&](const auto& entry) { return entry.first.first == task_id; });
}

std::vector<DiskWatch::Exceeded> DiskWatch::TakeExceeded() {
  std::lock_guard lock(mu_);
  return std::exchange(exceeded_, {});
}

void DiskWatch::Loop() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, interval_, [&] { return stopping_; })) {
    const auto now = watched_;
    lock.unlock();
    std::vector<std::pair<std::pair<std::string, std::string>, Exceeded>> over;
    for (const auto& [key, e] : now) {
      int64_t used = 0;
      for (const std::string& d : e.dirs) used += DiskUsageBytes(d).value_or(0);
      if (used <= e.limit_bytes) continue;
      over.push_back(
          {key,
           {key.first, e.volume.empty() ? DiskLimitReason(e.limit_bytes >> 30, used)
                                        : VolumeLimitReason(e.volume, e.limit_bytes, used)}});
    }
    lock.lock();
    for (auto& [key, x] : over) {
      if (watched_.erase(key) > 0) exceeded_.push_back(std::move(x));
    }
  }
}

}  // namespace gpupool::agent
