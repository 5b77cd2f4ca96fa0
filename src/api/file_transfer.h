// The client side of a task's files (docs/api.md "Task files"), shared by the CLI (`gpupool cp`)
// and the agent (inputs before launch, outputs at the end): listing, chunked downloads verified
// against the listed SHA-256, and resumable chunked uploads committed with their SHA-256, over the
// typed client's file calls (resources.h) in chunks of proto::kFileChunkBytes. Files are passed as
// open descriptors so that each caller decides how it opens them safely.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "api/client.h"
#include "core/result.h"
#include "proto/files.h"

namespace gpupool::api {

// Called after each chunk with the bytes of the file moved so far and its size; returning false
// stops the transfer, which then fails with kUnavailable ("cancelled").
using TransferProgress = std::function<bool(int64_t done, int64_t total)>;

// GET /v1/tasks/{id}/files: a file (type "file", one entry), or a directory (type "dir"; the
// task's root when `path` is empty) with every file below it. Checked: every path valid and at or
// below `path`, sizes ≥ 0, hashes 64 hex digits (kInternal naming the entry otherwise, so a
// server can never name a place outside it).
// `node`: the agent of that node listing the server's copy (even while the task runs there).
Result<proto::FileListing> ListTaskFiles(Client& client, const std::string& task_id,
                                         const std::string& path, const std::string& node = "");

// Writes the file's bytes to `fd` (from its current position) and checks that there are
// file.size of them and that they hash to file.sha256 (kInternal naming both hashes otherwise).
// Up to three chunks are asked for at once, the later ones on connections of their own
// (Client::Sibling); they are written in order.
Status DownloadTaskFile(Client& client, const std::string& task_id, const proto::FileEntry& file,
                        int fd, const TransferProgress& progress = {});

struct UploadResult {
  proto::FileEntry file;
  int64_t resumed_from = 0;  // bytes the server already had from an earlier, interrupted upload
};

// Uploads the contents of `fd` (read with pread, from offset 0 to its size now) to `path` of the
// task. Continues an interrupted upload from the bytes the server has received (they are hashed
// here, not sent again); when those turn out to differ from this file (the commit's hash does not
// match), starts over once from 0. `node` is the agent's node name when it uploads a task's
// outputs, empty for a user's upload.
Result<UploadResult> UploadTaskFile(Client& client, const std::string& task_id,
                                    const std::string& path, int fd, const std::string& node = "",
                                    const TransferProgress& progress = {});

}  // namespace gpupool::api
