// A running task's files, which are on its node (docs/api.md "Task files"): while a task runs,
// the Controller's FileService hands its listings, reads and uploads to a NodeFiles rather than to
// the server's copy (TaskFiles). The api layer implements it over the node's tunnel
// (api/live_files.h), and the node's agent serves each call from the task's workspace
// (agent/live_files.h) with the rules the server's copy follows (core/file_rules.h). Calls never
// block; `done` may run on any thread. Errors: those of TaskFiles, and kUnavailable when the node
// cannot be reached (no tunnel, the agent refused: the message says which).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "server/caller.h"
#include "server/task_files.h"

namespace gpupool::server {

class NodeFiles {
 public:
  virtual ~NodeFiles() = default;

  // `path` empty: the whole workspace. The listing's limits are left 0 (the caller sets them).
  virtual void List(const std::string& node, const std::string& task_id, const std::string& path,
                    Done<FileListing> done) = 0;
  // The chunk's sha256 is the whole file's when the node has it at hand (after a listing of
  // the file as it is now), else empty.
  virtual void Read(const std::string& node, const std::string& task_id, const std::string& path,
                    int64_t offset, int64_t length, Done<FileChunk> done) = 0;
  virtual void Received(const std::string& node, const std::string& task_id,
                        const std::string& path, Done<int64_t> done) = 0;
  // As TaskFiles::Append, with `max_file_bytes` the per-file limit.
  virtual void Append(const std::string& node, const std::string& task_id, const std::string& path,
                      int64_t offset, std::optional<int64_t> size, int64_t max_file_bytes,
                      std::string bytes, Done<int64_t> done) = 0;
  virtual void Commit(const std::string& node, const std::string& task_id, const std::string& path,
                      int64_t size, const std::string& sha256, Done<StoredFile> done) = 0;
};

}  // namespace gpupool::server
