// Listing, downloads and resumable uploads of a task's files over the typed client (see
// file_transfer.h); SHA-256 through OpenSSL EVP, computed while the bytes stream.
#include "api/file_transfer.h"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string_view>

#include "api/resources.h"
#include "api/signing.h"
#include "core/task_path.h"

namespace gpupool::api {
namespace {

using proto::kFileChunkBytes;

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr);
  }
  void Update(std::string_view data) { EVP_DigestUpdate(ctx_.get(), data.data(), data.size()); }
  std::string HexDigest() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_DigestFinal_ex(ctx_.get(), digest, &length);
    return HexEncode(std::string_view(reinterpret_cast<const char*>(digest), length));
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

tl::unexpected<Error> Internal(std::string message) {
  return MakeError(ErrorCode::kInternal, std::move(message));
}

tl::unexpected<Error> LocalError(const std::string& what, int err) {
  return Internal(what + ": " + std::strerror(err));
}

tl::unexpected<Error> Cancelled(const std::string& what) {
  return MakeError(ErrorCode::kUnavailable, what + ": cancelled");
}

bool IsSha256Hex(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
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

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Hashes [0, from) of `fd` into `h`, then hashes and sends [from, size) in chunks to the upload of
// `path` (by `node`, when an agent uploads). From 0, at least one chunk is sent (an empty one for
// an empty file): offset 0 makes the server drop what it had of an earlier upload.
Status SendBytes(Client& client, const std::string& task_id, const std::string& path,
                 const std::string& node, int fd, int64_t size, int64_t from, Sha256& h,
                 const std::string& name, const TransferProgress& progress) {
  proto::Bytes chunk;
  for (int64_t off = 0; off < from; off += kFileChunkBytes) {
    const auto n = static_cast<size_t>(std::min(kFileChunkBytes, from - off));
    if (!ReadAt(fd, off, n, &chunk.data)) return LocalError("cannot read " + name, errno);
    h.Update(chunk.data);
  }
  int64_t off = from;
  for (bool reset = from == 0; off < size || reset; reset = false) {
    const auto n = static_cast<size_t>(std::min(kFileChunkBytes, size - off));
    if (!ReadAt(fd, off, n, &chunk.data)) return LocalError("cannot read " + name, errno);
    h.Update(chunk.data);
    auto r = client.Files().PutChunk(task_id, {.path = path, .offset = off, .node = node}, chunk);
    if (!r) return tl::unexpected(r.error());
    off += static_cast<int64_t>(n);
    if (progress && !progress(off, size)) return Cancelled("uploading " + name);
  }
  return {};
}

}  // namespace

Result<std::string> Sha256OfFile(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return LocalError("cannot read the file", errno);
  Sha256 h;
  std::string buffer;
  for (int64_t off = 0; off < st.st_size; off += kFileChunkBytes) {
    const auto n = static_cast<size_t>(std::min<int64_t>(kFileChunkBytes, st.st_size - off));
    if (!ReadAt(fd, off, n, &buffer)) return LocalError("cannot read the file", errno);
    h.Update(buffer);
  }
  return h.HexDigest();
}

Result<proto::FileListing> ListTaskFiles(Client& client, const std::string& task_id,
                                         const std::string& path) {
  Result<proto::FileListing> listing = client.Files().List(task_id, {.path = path});
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
    if (file.size < 0 || !IsSha256Hex(file.sha256)) {
      return bad("has a bad size or sha256 for " + QuoteTaskPath(file.path));
    }
  }
  if (!is_dir && listing->files.size() != 1) return bad("is a file but not one entry");
  return listing;
}

Status DownloadTaskFile(Client& client, const std::string& task_id, const proto::FileEntry& file,
                        int fd, const TransferProgress& progress) {
  const std::string name = Named(task_id, file.path);
  Sha256 h;
  int64_t off = 0;
  while (off < file.size) {
    const int64_t length = std::min(kFileChunkBytes, file.size - off);
    auto r = client.Files().Read(task_id, {.path = file.path, .offset = off, .length = length});
    if (!r) return tl::unexpected(r.error());
    if (r->data.empty()) {
      return Internal(name + ": the server sent no bytes at offset " + std::to_string(off) +
                      " of " + std::to_string(file.size) + " (the file changed?)");
    }
    if (!WriteAll(fd, r->data)) return LocalError("cannot write " + name, errno);
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
  auto status = client.Files().Upload(task_id, {.path = path});
  if (!status) return tl::unexpected(status.error());
  // What the server has continues this file only if it is not longer than it.
  int64_t from = status->received > 0 && status->received <= size ? status->received : 0;
  while (true) {
    Sha256 h;
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
