// The server's copy of each task's files (docs/api.md "Task files"): inputs a user uploads before
// the task starts and outputs its node's agent uploads when it ends, kept until the task is
// deleted. TaskFiles only stores bytes: who may read or upload them is FileService's rule
// (file_service.h, implemented by the Controller); DiskTaskFiles keeps the files under a
// directory of the data dir.
// Uploads are resumable (bytes are appended at the offset received so far), verified against
// their SHA-256 at commit and then renamed into place atomically.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/result.h"

namespace gpupool::server {

struct StoredFile {
  std::string path;  // a task path (core/task_path.h)
  int64_t size = 0;
  std::string sha256;  // 64 lower-case hex digits
};

// A file, or a directory with every file below it.
struct FileListing {
  bool is_dir = false;
  std::vector<StoredFile> files;  // ascending path; the file itself when !is_dir
  int64_t max_file_bytes = 0;     // the limits, so that clients can refuse a file before sending
  int64_t max_task_bytes = 0;
};

// The server's limits on a task's files (TaskFilesOptions).
struct FileLimits {
  int64_t max_file_bytes = 0;
  int64_t max_task_bytes = 0;
};

struct FileChunk {
  std::string bytes;   // from the offset asked for, at most the length asked for
  int64_t size = 0;    // of the whole file
  std::string sha256;  // of the whole file
};

// The project whose storage quota a task's files count against, and that quota
// (Project::max_storage_bytes; -1: none). An empty project: the files count against none.
struct StorageQuota {
  std::string project;
  int64_t max_bytes = -1;
  // What the project stores besides task files: its snapshots' chunks and its volumes' sizes.
  int64_t elsewhere = 0;
};

// Errors name the task, the path and the rule: kInvalidArgument (a path breaking the rules of
// core/task_path.h; a commit whose SHA-256 does not match, which discards the upload),
// kNotFound (no such file or directory), kFailedPrecondition (an offset other than the bytes
// received so far, a file where a directory is needed or the reverse, a commit before all bytes
// arrived), kResourceExhausted (a size limit, named), kUnavailable or kInternal (the disk).
class TaskFiles {
 public:
  virtual ~TaskFiles() = default;

  // `path` empty: every file of the task (a task without files lists as an empty directory).
  virtual Result<FileListing> List(const std::string& task_id, const std::string& path) = 0;
  // Up to `length` bytes of a file from `offset` (≤ its size).
  virtual Result<FileChunk> Read(const std::string& task_id, const std::string& path,
                                 int64_t offset, int64_t length) = 0;
  // The bytes an unfinished upload of `path` has received (0 when none is in progress).
  virtual Result<int64_t> Received(const std::string& task_id, const std::string& path) = 0;
  // Writes `bytes` at `offset` of the upload of `path`: offset must equal the bytes received so
  // far, or be 0 to start over (what was received is dropped). `size`, when the uploader
  // declares it, is the whole file's: a file that would break a limit is refused at its first
  // chunk, and a chunk past it is kInvalidArgument. A refusal for a limit also drops what the
  // upload had received (it could never be committed). The task's files, unfinished uploads
  // included, count against `quota`'s project from now on, and the upload is refused where the
  // project's would then exceed it. Returns the bytes received now.
  virtual Result<int64_t> Append(const std::string& task_id, const std::string& path,
                                 int64_t offset, std::string_view bytes,
                                 std::optional<int64_t> size, const StorageQuota& quota = {}) = 0;
  // Ends the upload of `path`: it must have received exactly `size` bytes whose SHA-256 is
  // `sha256`; the file then replaces what the path held, atomically. A size-0 file needs no
  // Append. On a hash mismatch the received bytes are discarded.
  virtual Result<StoredFile> Commit(const std::string& task_id, const std::string& path,
                                    int64_t size, const std::string& sha256) = 0;
  // Deletes the task's files and unfinished uploads (the task was deleted). Never fails: what
  // cannot be deleted now is left for the next start's sweep.
  virtual void Remove(const std::string& task_id) = 0;
  // Drops what memory keeps of the task's transfers (its files and their count stay), unless
  // a call on it is in progress.
  virtual void Forget(const std::string& task_id) = 0;
  // The bytes the files and unfinished uploads of a project's tasks take.
  virtual int64_t ProjectBytes(const std::string& project) = 0;
  virtual FileLimits Limits() const = 0;
};

struct TaskFilesOptions {
  int64_t max_task_bytes = int64_t{1} << 30;  // a task's files and unfinished uploads together
  int64_t max_file_bytes = int64_t{1} << 30;
  int64_t max_files = 100'000;  // files per task
  // An unfinished upload that received nothing for this long is abandoned: its bytes are deleted
  // (ExpireUploads; the background thread runs it every upload_expiry_ms / 8, at most a minute).
  // 0: never.
  int64_t upload_expiry_ms = int64_t{24} * 3600 * 1000;
};

// Layout under `root`: tasks/<id>/data/<path> (the files), tasks/<id>/sums/<path> (each file's
// SHA-256, with the inode, size and modification time it was computed for, so a stale one is
// noticed and recomputed), tasks/<id>/partial/<sha256 of path> (unfinished uploads),
// tasks/<id>/tmp/, tasks/<id>/project (the project its bytes count against), and trash/
// (removed tasks, deleted by a background thread). Open counts the bytes of every task (a walk of
// all files, once), and every change keeps the count. Thread-safe: one lock per task, so
// transfers of different tasks do not wait for each other; the projects' counts have one lock.
class DiskTaskFiles final : public TaskFiles {
 public:
  // Creates `root` (0700) when needed; what an earlier process left in trash/ is deleted in the
  // background.
  static Result<std::unique_ptr<DiskTaskFiles>> Open(const std::string& root,
                                                     TaskFilesOptions options);
  ~DiskTaskFiles() override;  // waits for a deletion in progress; the rest stays in trash/
  DiskTaskFiles(const DiskTaskFiles&) = delete;
  DiskTaskFiles& operator=(const DiskTaskFiles&) = delete;

  Result<FileListing> List(const std::string& task_id, const std::string& path) override;
  Result<FileChunk> Read(const std::string& task_id, const std::string& path, int64_t offset,
                         int64_t length) override;
  Result<int64_t> Received(const std::string& task_id, const std::string& path) override;
  Result<int64_t> Append(const std::string& task_id, const std::string& path, int64_t offset,
                         std::string_view bytes, std::optional<int64_t> size,
                         const StorageQuota& quota = {}) override;
  Result<StoredFile> Commit(const std::string& task_id, const std::string& path, int64_t size,
                            const std::string& sha256) override;
  void Remove(const std::string& task_id) override;
  void Forget(const std::string& task_id) override;
  int64_t ProjectBytes(const std::string& project) override;
  FileLimits Limits() const override {
    return {options_.max_file_bytes, options_.max_task_bytes};
  }

  // Removes the files of every task for which `exists` is false (tasks deleted while a crash
  // kept their files from being removed). Returns how many were removed.
  int Sweep(const std::function<bool(const std::string& task_id)>& exists);

  // Deletes the unfinished uploads whose last byte arrived before `before_unix_ms` (their file's
  // modification time). Returns how many.
  int ExpireUploads(int64_t before_unix_ms);

  // Waits until the background deletions queued so far are done (tests).
  void WaitForDeletions();

 private:
  struct Task;
  DiskTaskFiles(std::string root, TaskFilesOptions options);
  // The task's entry, locked by the caller; kNotFound for an id that cannot be a task's.
  Result<std::shared_ptr<Task>> Entry(const std::string& task_id);
  // Under the task's lock:
  Result<int64_t> AppendLocked(Task& t, const std::string& task_id, const std::string& path,
                               int64_t offset, std::string_view bytes, std::optional<int64_t> size,
                               const StorageQuota& quota);
  // Under mu_, which these take:
  // The bytes each task with a directory keeps (files and unfinished uploads), how many files,
  // and whose they are.
  struct Stored {
    std::string project;
    int64_t bytes = 0;
    int64_t files = 0;
  };
  // What the task keeps, as counted.
  Stored Usage(const std::string& task_id);
  // Adds `delta` to the task's bytes (and its project's) and `files` to its files.
  void Charge(const std::string& task_id, int64_t delta, int64_t files = 0);
  // Charge, unless the project of `quota` would then hold more than it allows once `more` bytes
  // (still to come) are added too: false then, nothing charged, and *held says what it holds.
  // One step under mu_, so that uploads to two tasks of a project cannot pass the quota together.
  bool ChargeWithin(const std::string& task_id, int64_t delta, int64_t more,
                    const StorageQuota& quota, int64_t* held);
  // Makes `project` the one the task's bytes count against (recorded in its directory).
  Status Own(const std::string& task_id, const std::string& project);
  // Counts the bytes of every task directory, and reads whose they are (Open).
  void CountAll();
  // Drops the unfinished upload of `path` that has received `received` bytes.
  void DiscardLocked(Task& t, const std::string& task_id, const std::string& path,
                     int64_t received);
  std::string TaskDir(const std::string& task_id) const;
  void JanitorLoop();

  const std::string root_;
  const TaskFilesOptions options_;

  std::mutex mu_;  // guards tasks_, trash_, trash_seq_, stop_, stored_, project_bytes_
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Task>> tasks_;
  std::map<std::string, Stored> stored_;  // by task; the sums by project:
  std::map<std::string, int64_t> project_bytes_;
  std::deque<std::string> trash_;  // directories under trash/ to delete (the first: in progress)
  uint64_t trash_seq_ = 0;
  bool stop_ = false;
  std::thread janitor_;
};

}  // namespace gpupool::server
