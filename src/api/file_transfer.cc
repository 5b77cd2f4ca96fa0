// Listing, downloads and resumable uploads of a task's files over the signed client (see
// file_transfer.h); SHA-256 (os/sha256.h) computed while the bytes stream.
#include "api/file_transfer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>

#include "api/signing.h"
#include "api/url.h"
#include "core/task_path.h"
#include "os/files.h"
#include "os/sha256.h"

namespace gpupool::api {
namespace {

using nlohmann::json;

tl::unexpected<Error> Internal(std::string message) {
  return MakeError(ErrorCode::kInternal, std::move(message));
}

tl::unexpected<Error> LocalError(const std::string& what, int err) {
  return Internal(what + ": " + std::strerror(err));
}

tl::unexpected<Error> Cancelled(const std::string& what) {
  return MakeError(ErrorCode::kUnavailable, what + ": cancelled");
}

std::string TaskBase(const std::string& task_id) { return "/v1/tasks/" + PercentEncode(task_id); }

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

// Hashes [0, from) of `fd` into `h`, then hashes and sends [from, size) in chunks. From 0, at
// least one chunk is sent (an empty one for an empty file): offset 0 makes the server drop what
// it had of an earlier upload.
Status SendBytes(Client& client, const std::string& target_base, int fd, int64_t size, int64_t from,
                 os::Sha256& h, const std::string& name, const TransferProgress& progress) {
  if (const int err = h.UpdateFromFile(fd, 0, from); err != 0) {
    return LocalError("cannot read " + name, err);
  }
  std::string buffer;
  int64_t off = from;
  for (bool reset = from == 0; off < size || reset; reset = false) {
    const auto n = static_cast<size_t>(std::min(kFileChunkBytes, size - off));
    if (!ReadAt(fd, off, n, &buffer)) return LocalError("cannot read " + name, errno);
    h.Update(buffer);
    auto r = client.CallJson("PUT", target_base + "&offset=" + std::to_string(off), buffer);
    if (!r) return tl::unexpected(r.error());
    off += static_cast<int64_t>(n);
    if (progress && !progress(off, size)) return Cancelled("uploading " + name);
  }
  return {};
}

}  // namespace

Result<RemoteListing> ListTaskFiles(Client& client, const std::string& task_id,
                                    const std::string& path) {
  std::string target = TaskBase(task_id) + "/files";
  if (!path.empty()) target += "?path=" + PercentEncode(path);
  auto body = client.CallJson("GET", target);
  if (!body) return tl::unexpected(body.error());
  const auto bad = [&](const std::string& what) {
    return Internal("the server's listing of " + Named(task_id, path) + " " + what);
  };
  if (!body->is_object() || !body->contains("type") || !(*body)["type"].is_string() ||
      !body->contains("files") || !(*body)["files"].is_array()) {
    return bad("has no type or files");
  }
  RemoteListing listing;
  listing.is_dir = (*body)["type"] == "dir";
  for (auto [key, out] : {std::pair{"max_file_bytes", &listing.max_file_bytes},
                          std::pair{"max_task_bytes", &listing.max_task_bytes}}) {
    if (const auto it = body->find(key); it != body->end() && it->is_number_integer()) {
      *out = it->get<int64_t>();
    }
  }
  for (const json& f : (*body)["files"]) {
    if (!f.is_object() || !f.contains("path") || !f["path"].is_string() || !f.contains("size") ||
        !f["size"].is_number_integer() || !f.contains("sha256") || !f["sha256"].is_string()) {
      return bad("has an entry without path, size or sha256");
    }
    RemoteFile file{f["path"].get<std::string>(), f["size"].get<int64_t>(),
                    f["sha256"].get<std::string>()};
    if (Status ok = ValidateTaskPath(file.path, "listed path"); !ok) {
      return bad(ok.error().message);
    }
    const bool inside =
        listing.is_dir ? path.empty() || file.path.starts_with(path + "/") : file.path == path;
    if (!inside) return bad("names " + QuoteTaskPath(file.path) + ", which is not below it");
    if (file.size < 0 || !os::IsSha256Hex(file.sha256)) {
      return bad("has a bad size or sha256 for " + QuoteTaskPath(file.path));
    }
    listing.files.push_back(std::move(file));
  }
  if (!listing.is_dir && listing.files.size() != 1) return bad("is a file but not one entry");
  return listing;
}

Status DownloadTaskFile(Client& client, const std::string& task_id, const RemoteFile& file, int fd,
                        const TransferProgress& progress) {
  const std::string name = Named(task_id, file.path);
  const std::string target =
      TaskBase(task_id) + "/files/content?path=" + PercentEncode(file.path) + "&offset=";
  os::Sha256 h;
  int64_t off = 0;
  while (off < file.size) {
    const int64_t length = std::min(kFileChunkBytes, file.size - off);
    auto r = client.Call("GET", target + std::to_string(off) + "&length=" + std::to_string(length));
    if (!r) return tl::unexpected(r.error());
    if (r->status != 200) return tl::unexpected(ResponseError(*r));
    if (r->body.empty()) {
      return Internal(name + ": the server sent no bytes at offset " + std::to_string(off) +
                      " of " + std::to_string(file.size) + " (the file changed?)");
    }
    if (const int err = os::WriteAll(fd, r->body); err != 0) {
      return LocalError("cannot write " + name, err);
    }
    h.Update(r->body);
    off += static_cast<int64_t>(r->body.size());
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
  const std::string uploads = TaskBase(task_id) + "/uploads";
  const std::string node_query = node.empty() ? "" : "node=" + PercentEncode(node);
  auto status = client.CallJson("GET", uploads + "?path=" + PercentEncode(path));
  if (!status) return tl::unexpected(status.error());
  if (!status->is_object() || !status->contains("received") ||
      !(*status)["received"].is_number_integer()) {
    return Internal("the server's upload status of " + name + " has no received count");
  }
  const int64_t received = (*status)["received"].get<int64_t>();
  // What the server has continues this file only if it is not longer than it.
  int64_t from = received > 0 && received <= size ? received : 0;
  const std::string put =
      uploads + "?path=" + PercentEncode(path) + (node_query.empty() ? "" : "&" + node_query);
  const std::string commit = uploads + "/commit" + (node_query.empty() ? "" : "?" + node_query);
  while (true) {
    os::Sha256 h;
    if (Status sent = SendBytes(client, put, fd, size, from, h, name, progress); !sent) {
      return tl::unexpected(sent.error());
    }
    UploadResult result{RemoteFile{path, size, h.HexDigest()}, from};
    const json body = {{"path", path}, {"size", size}, {"sha256", result.file.sha256}};
    auto done = client.CallJson("POST", commit, body.dump());
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
