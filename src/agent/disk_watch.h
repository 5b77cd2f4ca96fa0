// The agent's enforcement of a task's disk_gib and of its volumes' sizes: a thread of its own
// measures each watched task's directories (its workspace and, for a process task, its private
// /tmp; each volume it mounts) with a du-like walk at a low rate, and hands the control loop the
// tasks found over a limit, which it stops with the reason "disk limit of N GB exceeded" (or the
// volume's). A walk, not project quotas: it works on every file
// system, costs one lstat per file per interval, and lets a task overshoot by what it writes
// within one interval.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/result.h"

namespace gpupool::agent {

// Bytes allocated to the files below `dir` (st_blocks × 512, so sparse files count what they
// hold; a file with several links once), `dir` itself included, never following a symbolic link
// nor crossing into another file system. Entries that vanish during the walk are skipped.
Result<int64_t> DiskUsageBytes(const std::string& dir);

// "disk limit of 50 GB exceeded (the workspace holds 53.1 GiB)".
std::string DiskLimitReason(int64_t limit_gib, int64_t used_bytes);
// "volume data is over its size of 200.0 GiB (it holds 200.4 GiB)" (KiB, MiB, … as fits).
std::string VolumeLimitReason(const std::string& volume, int64_t size_bytes, int64_t used_bytes);

class DiskWatch {
 public:
  struct Exceeded {
    std::string task_id;
    std::string reason;  // DiskLimitReason
  };

  explicit DiskWatch(std::chrono::milliseconds interval);
  ~DiskWatch();  // stops the thread (a walk in progress finishes first)
  DiskWatch(const DiskWatch&) = delete;
  DiskWatch& operator=(const DiskWatch&) = delete;

  // Measures `dirs` of the task every interval from now on, against limit_gib (> 0) GiB.
  void Watch(const std::string& task_id, std::vector<std::string> dirs, int64_t limit_gib);
  // Measures volume `name`'s directory for the task against its size (a new size replaces the
  // last).
  void WatchVolume(const std::string& task_id, const std::string& name, std::string dir,
                   int64_t size_bytes);
  // Everything watched for the task.
  void Forget(const std::string& task_id);
  // The tasks found over their limit since the last call (each once: it is no longer watched).
  std::vector<Exceeded> TakeExceeded();

 private:
  struct Entry {
    std::vector<std::string> dirs;
    int64_t limit_bytes = 0;
    std::string volume;  // empty: the workspace (limit_bytes a whole number of GiB)
  };
  void Loop();

  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<std::string, std::string>, Entry> watched_;  // by (task id, volume)
  std::vector<Exceeded> exceeded_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gpupool::agent
