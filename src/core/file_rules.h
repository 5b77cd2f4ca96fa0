// The rules of a task's files (docs/api.md "Task files") in one place — chunked reads and resumable
// uploads: the server's store of a task's files (server/task_files.h) and a node's agent serving a
// running task's workspace (agent/live_files.h) accept reads, chunks, limits and commits alike and
// say the same words when they refuse one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/result.h"

namespace gpupool {

// "1500000 bytes (1.4 MiB)"; a whole number of MiB without the decimal ("(2 MiB)"); below 1 MiB
// the bytes alone.
std::string BytesWithMib(int64_t bytes);

// Nothing at `path` (kNotFound): "task t-1 has no file 'p'" / "… no file or directory 'p'".
tl::unexpected<Error> NoSuchFile(const std::string& task_id, const std::string& path);
tl::unexpected<Error> NoSuchFileOrDirectory(const std::string& task_id, const std::string& path);
// A read of a directory (kFailedPrecondition: list it instead).
tl::unexpected<Error> ReadOfDirectory(const std::string& task_id, const std::string& path);
// kInvalidArgument when a read's `offset` is past the end of a file of `size` bytes.
Status CheckReadOffset(const std::string& path, int64_t offset, int64_t size);

// A chunk of `path` at `offset` ending at byte `end`, of an upload that has `received` bytes and
// declares the whole file's `size` (when it does): the offset must be `received` or 0 (start
// over; kFailedPrecondition naming the offset to continue from) and the chunk end at or before
// `size` (kInvalidArgument).
Status CheckUploadChunk(const std::string& task_id, const std::string& path, int64_t offset,
                        int64_t end, int64_t received, std::optional<int64_t> size);

// kResourceExhausted when a file of `file_bytes` is over `max_file_bytes`.
Status CheckFileLimit(const std::string& path, int64_t file_bytes, int64_t max_file_bytes);

// A commit of `path` whose upload is missing (kFailedPrecondition when `size` > 0; an empty file
// needs no bytes), or has received another number of bytes than `size` (kFailedPrecondition).
tl::unexpected<Error> NoUploadInProgress(const std::string& task_id, const std::string& path);
Status CheckUploadComplete(const std::string& task_id, const std::string& path, int64_t received,
                           int64_t size);

// The commit's hash is not that of the bytes received (kInvalidArgument): they were discarded.
tl::unexpected<Error> UploadHashMismatch(const std::string& path, int64_t size,
                                         const std::string& said, const std::string& actual);

// Where a file cannot go (kFailedPrecondition): below a file, or onto a directory.
tl::unexpected<Error> FileBelowFile(const std::string& task_id, const std::string& file,
                                    const std::string& path);
tl::unexpected<Error> DirectoryInTheWay(const std::string& task_id, const std::string& path);

}  // namespace gpupool
