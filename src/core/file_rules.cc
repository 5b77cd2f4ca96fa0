// The shared rules of task files (see file_rules.h).
#include "core/file_rules.h"

#include <iomanip>
#include <sstream>

#include "core/task_path.h"

namespace gpupool {

std::string BytesWithMib(int64_t bytes) {
  std::ostringstream s;
  s << bytes << " bytes";
  if (bytes >= (1 << 20)) {
    s << " (";
    if (bytes % (1 << 20) == 0) {
      s << bytes / (1 << 20);
    } else {
      s << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1 << 20);
    }
    s << " MiB)";
  }
  return s.str();
}

tl::unexpected<Error> NoSuchFile(const std::string& task_id, const std::string& path) {
  return NotFound("task " + task_id + " has no file " + QuoteTaskPath(path));
}

tl::unexpected<Error> NoSuchFileOrDirectory(const std::string& task_id, const std::string& path) {
  return NotFound("task " + task_id + " has no file or directory " + QuoteTaskPath(path));
}

tl::unexpected<Error> ReadOfDirectory(const std::string& task_id, const std::string& path) {
  return MakeError(
      ErrorCode::kFailedPrecondition,
      QuoteTaskPath(path) + " of task " + task_id + " is a directory; list it to read its files");
}

Status CheckReadOffset(const std::string& path, int64_t offset, int64_t size) {
  if (offset <= size) return {};
  return InvalidArgument("offset " + std::to_string(offset) + " is past the end of " +
                         QuoteTaskPath(path) + " (" + std::to_string(size) + " bytes)");
}

Status CheckUploadChunk(const std::string& task_id, const std::string& path, int64_t offset,
                        int64_t end, int64_t received, std::optional<int64_t> size) {
  if (offset != 0 && offset != received) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "the upload of " + QuoteTaskPath(path) + " to task " + task_id +
                         " has received " + std::to_string(received) +
                         " bytes; continue with offset=" + std::to_string(received) +
                         " (or start over with offset=0), got offset=" + std::to_string(offset));
  }
  if (size && end > *size) {
    return InvalidArgument("the chunk of " + QuoteTaskPath(path) + " ends at byte " +
                           std::to_string(end) +
                           ", past the declared size=" + std::to_string(*size));
  }
  return {};
}

Status CheckFileLimit(const std::string& path, int64_t file_bytes, int64_t max_file_bytes) {
  if (file_bytes <= max_file_bytes) return {};
  return MakeError(ErrorCode::kResourceExhausted, QuoteTaskPath(path) + " would be " +
                                                      BytesWithMib(file_bytes) + "; the limit is " +
                                                      BytesWithMib(max_file_bytes) + " per file");
}

tl::unexpected<Error> NoUploadInProgress(const std::string& task_id, const std::string& path) {
  return MakeError(ErrorCode::kFailedPrecondition, "no upload of " + QuoteTaskPath(path) +
                                                       " to task " + task_id +
                                                       " is in progress; send its bytes first");
}

Status CheckUploadComplete(const std::string& task_id, const std::string& path, int64_t received,
                           int64_t size) {
  if (received == size) return {};
  return MakeError(ErrorCode::kFailedPrecondition,
                   "the upload of " + QuoteTaskPath(path) + " to task " + task_id +
                       " has received " + std::to_string(received) + " of its " +
                       std::to_string(size) +
                       " bytes; continue with offset=" + std::to_string(received));
}

tl::unexpected<Error> UploadHashMismatch(const std::string& path, int64_t size,
                                         const std::string& said, const std::string& actual) {
  return InvalidArgument("sha256 of " + QuoteTaskPath(path) + " does not match: the commit says " +
                         said + ", the " + std::to_string(size) + " bytes received hash to " +
                         actual + "; the upload was discarded, send it again from offset 0");
}

tl::unexpected<Error> FileBelowFile(const std::string& task_id, const std::string& file,
                                    const std::string& path) {
  return MakeError(ErrorCode::kFailedPrecondition,
                   "task " + task_id + " has a file " + QuoteTaskPath(file) + ", so " +
                       QuoteTaskPath(path) + " cannot be created below it");
}

tl::unexpected<Error> DirectoryInTheWay(const std::string& task_id, const std::string& path) {
  return MakeError(
      ErrorCode::kFailedPrecondition,
      "task " + task_id + " has a directory " + QuoteTaskPath(path) + "; a file cannot replace it");
}

}  // namespace gpupool
