// The client side of moving files between this machine and a task's files on the server
// (docs/api.md "Task files"), shared by `gpupool cp` and `gpupool submit --input`: an owned file
// descriptor, progress on a terminal, and uploading a local file or directory as one task path
// (planned and checked locally first, then sent file by file, resumably).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "api/client.h"
#include "api/file_transfer.h"
#include "core/result.h"
#include "core/unique_fd.h"

namespace gpupool::cli {

// "\r<name>  45%  120.0 MiB / 256.0 MiB" on stderr, at most ten times a second (and at the end),
// when stderr is a terminal and the work is large: a file of 8 MiB or more, or a step whose size
// is not known when it starts (total -1: a dataset push's scan and send). Nothing otherwise.
class Progress {
 public:
  explicit Progress(std::string name, int64_t total = -1);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void Show(int64_t done, int64_t total);
  api::TransferProgress Callback();  // Show, for a file transfer

 private:
  std::string name_;
  bool on_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

// One file moved either way, for summaries.
struct MovedFile {
  std::string remote;  // task path
  std::string local;
  int64_t size = 0;
  std::string sha256;
  int64_t resumed_from = 0;  // uploads only: bytes the server had from an interrupted upload
};

// What uploading a local file or directory as a task path sends, checked before anything is.
struct UploadPlan {
  std::vector<std::pair<std::string, std::string>> files;  // (local file, task path), by path
  std::vector<std::string> skipped;  // local entries not sent (links, special files), with why
};

// Plans uploading `local` — a regular file, or a directory with every regular file below it
// (symbolic links are not followed, special files are skipped) — as the task path `base`: the
// file becomes `base`, a directory's files go below it ("" for a directory: its files' paths are
// relative to it). Local only; errors name the local path
// (missing, neither a file nor a directory, a name that is not a valid task path).
Result<UploadPlan> PlanUpload(const std::string& local, const std::string& base);

// Sends the plan's files to the task in order, each resumed where an interrupted upload stopped
// and committed with its SHA-256, with Progress for large ones. Stops at the first failure and
// returns its cause as it is (the server's message, or the local error), setting *failed_local
// to the local file that failed.
Result<std::vector<MovedFile>> SendUpload(api::Client& client, const std::string& task_id,
                                          const UploadPlan& plan, std::string* failed_local);

}  // namespace gpupool::cli
