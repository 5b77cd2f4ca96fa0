// Listing, downloads and resumable uploads of a task's files over the typed client (see
// file_transfer.h); SHA-256 (os/sha256.h) computed while the bytes stream.
#include "api/file_transfer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <future>
#include <memory>
#include <string_view>
#include <vector>

#include "api/resources.h"
#include "api/signing.h"
#include "core/task_path.h"
#include "os/files.h"
#include "os/sha256.h"

namespace gpupool::api {
namespace {

// How many chunks of a download are asked for at once.
constexpr int64_t kDownloadSlots = 3;

using proto::kFileChunkBytes;

tl::unexpected<Error> Internal(std::string message) {
  return MakeError(ErrorCode::kInternal, std::move(message));
}

tl::unexpected<Error> LocalError(const std::string& what, int err) {
  return Internal(what + ": " + std::strerror(err));
}

tl::unexpected<Error> Cancelled(const std::string& what) {
  return MakeError(ErrorCode::kUnavailable, what + ": cancelled");
}

std::string Named(const std::string& task_id, const std::string& path) {
  return task_id + ":" + path;
}

// Reads exactly `n` bytes at `offset` into `out`; false (errno set) when it cannot.
bool ReadAt(int fd, int64_t offset, size_t n, std::string* out) {
  out->resize(n);
  size_t done = 0;
  while (done < n) {
    const ssize_t r =
        ::pread(fd, out->data() + done, n - done, offset + static_cast<int64_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = EIO;  // the file shrank while it was read
      return false;
    }
    done += static_cast<size_t>(r);
  }
  return true;
}

// Hashes [0, from) of `fd` into `h`, then hashes and sends [from, size) in chunks to the upload of
// `path` (by `node`, when an agent uploads). From 0, at least one chunk is sent (an empty one for
// an empty file): offset 0 makes the server drop what it had of an earlier upload.
Status SendBytes(Client& client, const std::string& task_id, const std::string& path,
                 const std::string& node, int fd, int64_t size, int64_t from, os::Sha256& h,
                 const std::string& name, const TransferProgress& progress) {
  if (const int err = h.UpdateFromFile(fd, 0, from); err != 0) {
    return LocalError("cannot read " + name, err);
  }
  proto::Bytes chunk;
  int64_t off = from;
  for (bool reset = from == 0; off < size || reset; reset = false) {
    const auto n = static_cast<size_t>(std::min(kFileChunkBytes, size - off));
    if (!ReadAt(fd, off, n, &chunk.data)) return LocalError("cannot read " + name, errno);
    h.Update(chunk.data);
    auto r = client.Files().PutChunk(
        task_id, {.path = path, .offset = off, .size = size, .node = node}, chunk);
    if (!r) return tl::unexpected(r.error());
    off += static_cast<int64_t>(n);
    if (progress && !progress(off, size)) return Cancelled("uploading " + name);
  }
  return {};
}

}  // namespace

Result<proto::FileListing> ListTaskFiles(Client& client, const std::string& task_id,
                                         const std::string& path, const std::string& node) {
  Result<proto::FileListing> listing = client.Files().List(task_id, {.path = path, .node = node});
  if (!listing) return listing;
  const auto bad = [&](const std::string& what) {
    return Internal("the server's listing of " + Named(task_id, path) + " " + what);
  };
  const bool is_dir = listing->type == "dir";
  if (!is_dir && listing->type != "file") return bad("has no type");
  for (const proto::FileEntry& file : listing->files) {
    if (Status ok = ValidateTaskPath(file.path, "listed path"); !ok) {
      return bad(ok.error().message);
    }
    const bool inside =
        is_dir ? path.empty() || file.path.starts_with(path + "/") : file.path == path;
    if (!inside) return bad("names " + QuoteTaskPath(file.path) + ", which is not below it");
    if (file.size < 0 || !os::IsSha256Hex(file.sha256)) {
      return bad("has a bad size or sha256 for " + QuoteTaskPath(file.path));
    }
  }
  if (!is_dir && listing->files.size() != 1) return bad("is a file but not one entry");
  return listing;
}

Status DownloadTaskFile(Client& client, const std::string& task_id, const proto::FileEntry& file,
                        int fd, const TransferProgress& progress) {
  const std::string name = Named(task_id, file.path);
  // The chunks are asked for ahead, each slot a connection of its own (the caller's client the
  // first), so that the server's answer to one overlaps the next ones: a chunk of a running
  // task's file crosses the node's tunnel before the server answers.
  const int64_t chunks = (file.size + kFileChunkBytes - 1) / kFileChunkBytes;
  const int slots = static_cast<int>(std::min<int64_t>(kDownloadSlots, chunks));
  std::vector<std::unique_ptr<Client>> siblings;
  for (int i = 1; i < slots; ++i) siblings.push_back(client.Sibling());
  std::deque<std::future<Result<proto::Bytes>>> ahead;
  int64_t asked = 0;  // the offset the next request starts at
  const auto ask = [&] {
    // Chunk i's slot is i % slots: it is asked for once chunk i - slots, of the same slot, is in.
    const auto slot = static_cast<size_t>((asked / kFileChunkBytes) % slots);
    Client& c = slot == 0 ? client : *siblings[slot - 1];
    const proto::FileContentQuery query{
        .path = file.path, .offset = asked, .length = std::min(kFileChunkBytes, file.size - asked)};
    asked += query.length;
    // A one-chunk file is read on the caller's thread (deferred: when its future is asked).
    ahead.push_back(std::async(slots > 1 ? std::launch::async : std::launch::deferred,
                               [&c, &task_id, query] { return c.Files().Read(task_id, query); }));
  };
  os::Sha256 h;
  int64_t off = 0;
  while (off < file.size) {
    while (asked < file.size && static_cast<int>(ahead.size()) < slots) ask();
    Result<proto::Bytes> r = ahead.front().get();
    ahead.pop_front();
    if (!r) return tl::unexpected(r.error());
    const int64_t expected = std::min(kFileChunkBytes, file.size - off);
    if (static_cast<int64_t>(r->data.size()) != expected) {
      return Internal(name + ": the server sent " + std::to_string(r->data.size()) +
                      " bytes at offset " + std::to_string(off) + " of " +
                      std::to_string(file.size) + ", not " + std::to_string(expected) +
                      " (the file changed?)");
    }
    if (const int err = os::WriteAll(fd, r->data); err != 0) {
      return LocalError("cannot write " + name, err);
    }
    h.Update(r->data);
    off += static_cast<int64_t>(r->data.size());
    if (progress && !progress(off, file.size)) return Cancelled("downloading " + name);
  }
  const std::string actual = h.HexDigest();
  if (off != file.size || actual != file.sha256) {
    return Internal(name + ": the " + std::to_string(off) + " bytes received hash to " + actual +
                    ", but the server listed " + std::to_string(file.size) + " bytes hashing to " +
                    file.sha256);
  }
  return {};
}

Result<UploadResult> UploadTaskFile(Client& client, const std::string& task_id,
                                    const std::string& path, int fd, const std::string& node,
                                    const TransferProgress& progress) {
  const std::string name = Named(task_id, path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return LocalError("cannot read " + name, errno);
  const int64_t size = st.st_size;
  auto status = client.Files().Upload(task_id, {.path = path, .node = node});
  if (!status) return tl::unexpected(status.error());
  // What the server has continues this file only if it is not longer than it.
  int64_t from = status->received > 0 && status->received <= size ? status->received : 0;
  while (true) {
    os::Sha256 h;
    if (Status sent = SendBytes(client, task_id, path, node, fd, size, from, h, name, progress);
        !sent) {
      return tl::unexpected(sent.error());
    }
    UploadResult result{proto::FileEntry{path, size, h.HexDigest()}, from};
    auto done = client.Files().Commit(task_id, {.node = node},
                                      {.path = path, .size = size, .sha256 = result.file.sha256});
    if (done) return result;
    // The bytes the server had were not this file's beginning: it dropped them; send it all.
    if (done.error().code == ErrorCode::kInvalidArgument && from > 0) {
      from = 0;
      continue;
    }
    return tl::unexpected(done.error());
  }
}

}  // namespace gpupool::api
