// FileService: a task's files (docs/api.md "Task files") with the rules of who may touch them —
// anyone who sees a task lists and reads its files; inputs are uploaded while it is pending;
// outputs by the agent of the node it is bound to (or ended on). The bytes live in TaskFiles;
// every call does its file-system work on the blocking-work executor and answers through `done`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "server/caller.h"
#include "server/task_files.h"

namespace gpupool::server {

// Errors: those of TaskFiles (task_files.h), NotFound for a task the caller may not see,
// kFailedPrecondition / kPermissionDenied for an upload the task's state or the caller does not
// allow (the message says why), kUnavailable when the server keeps no files or the blocking-work
// queue is full, kInsufficientStorage when the disk is full or below the server's reserve.
class FileService {
 public:
  virtual ~FileService() = default;

  // `path` empty: every file of the task.
  virtual void ListFiles(const Caller& caller, const std::string& task_id, const std::string& path,
                         Done<FileListing> done) = 0;
  virtual void ReadFile(const Caller& caller, const std::string& task_id, const std::string& path,
                        int64_t offset, int64_t length, Done<FileChunk> done) = 0;
  // The bytes an unfinished upload has received.
  virtual void UploadStatus(const Caller& caller, const std::string& task_id,
                            const std::string& path, Done<int64_t> done) = 0;
  // `node` empty: an input of a pending task; set: an output, from that node's agent (or an
  // admin) of a task bound to or ended on it. A task deleted meanwhile keeps nothing (NotFound).
  // `size`: the whole file's, when the uploader declares it (TaskFiles::Append). Bytes that would
  // leave less free on the disk than the server's reserve (at the first chunk, the whole declared
  // size) are kInsufficientStorage.
  virtual void AppendUpload(const Caller& caller, const std::string& task_id,
                            const std::string& path, const std::string& node, int64_t offset,
                            std::optional<int64_t> size, std::string bytes, Done<int64_t> done) = 0;
  virtual void CommitUpload(const Caller& caller, const std::string& task_id,
                            const std::string& path, const std::string& node, int64_t size,
                            std::string sha256, Done<StoredFile> done) = 0;
};

}  // namespace gpupool::server
