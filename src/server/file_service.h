// FileService: a task's files (docs/api.md "Task files") with the rules of who may touch them —
// anyone who sees a task lists and reads its files; inputs are uploaded while it is pending;
// outputs by the agent of the node it is bound to (or ended on); while it runs, a user's calls go
// to its node (NodeFiles), where its workspace is. The server's copy lives in TaskFiles; every
// call does its file-system work on the blocking-work executor and answers through `done`.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "server/caller.h"
#include "server/node_files.h"
#include "server/task_files.h"

namespace gpupool::server {

// Errors: those of TaskFiles (task_files.h), NotFound for a task the caller may not see,
// kFailedPrecondition / kPermissionDenied for an upload the task's state or the caller does not
// allow (the message says why), kUnavailable when the server keeps no files or the blocking-work
// queue is full, kInsufficientStorage when the disk is full or below the server's reserve.
class FileService {
 public:
  virtual ~FileService() = default;

  // `path` empty: every file of the task. `node` set: the server's copy, even while the task runs
  // (its node's agent comparing the outputs it saves with what the server has).
  virtual void ListFiles(const Caller& caller, const std::string& task_id, const std::string& path,
                         const std::string& node, Done<FileListing> done) = 0;
  virtual void ReadFile(const Caller& caller, const std::string& task_id, const std::string& path,
                        int64_t offset, int64_t length, Done<FileChunk> done) = 0;
  // The bytes an unfinished upload has received (`node` as for AppendUpload).
  virtual void UploadStatus(const Caller& caller, const std::string& task_id,
                            const std::string& path, const std::string& node,
                            Done<int64_t> done) = 0;
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
  // Where a running task's files are reached (node_files.h): a user's calls on a running task go
  // there while it lives. None attached, or gone: they are kUnavailable. The api layer attaches
  // its tunnels' at its start.
  virtual void AttachNodeFiles(std::weak_ptr<NodeFiles> node_files) = 0;
};

}  // namespace gpupool::server
