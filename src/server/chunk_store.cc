#include "server/chunk_store.h"

#include <dirent.h>

#include <cerrno>
#include <chrono>
#include <set>

#include "os/files.h"
#include "proto/json_codec.h"

namespace gpupool::server {

Status ChunkStore::Open() {
  DIR* top = opendir(root_.c_str());
  if (top == nullptr) {
    if (errno == ENOENT) return {};
    return os::FileError("cannot list " + root_, errno);
  }
  std::map<std::string, int64_t> bytes;
  Status status;
  while (const dirent* d = readdir(top)) {
    const std::string name = d->d_name;
    if (name == "." || name == "..") continue;
    int64_t& total = bytes[name];
    status = Dir(name).ForEach([&](const os::ChunkDir::Entry& e) { total += e.size; });
    if (!status) break;
  }
  closedir(top);
  if (!status) return status;
  std::lock_guard lock(mu_);
  bytes_ = std::move(bytes);
  return {};
}

std::vector<std::string> ChunkStore::Missing(const std::string& project,
                                             const std::vector<std::string>& chunks) const {
  const os::ChunkDir dir = Dir(project);
  std::vector<std::string> missing;
  for (const std::string& sha : chunks) {
    if (!dir.Has(sha, /*touch=*/true)) missing.push_back(sha);
  }
  return missing;
}

Result<bool> ChunkStore::Put(const std::string& project, const std::string& sha256,
                             std::string_view bytes, int64_t limit) {
  const os::ChunkDir dir = Dir(project);
  if (dir.Has(sha256)) return false;
  if (limit >= 0) {
    std::lock_guard lock(mu_);
    const int64_t held = bytes_[project];
    if (held + static_cast<int64_t>(bytes.size()) > limit) {
      return MakeError(ErrorCode::kResourceExhausted,
                       "project " + project + "'s storage quota is full: its snapshots take " +
                           std::to_string(held) + " bytes of the " + std::to_string(limit) +
                           " its quota leaves them");
    }
  }
  Result<bool> added = dir.Put(sha256, bytes);
  if (added && *added) {
    std::lock_guard lock(mu_);
    bytes_[project] += static_cast<int64_t>(bytes.size());
  }
  return added;
}

Result<std::string> ChunkStore::Get(const std::string& project, const std::string& sha256) const {
  return Dir(project).Get(sha256, /*verify=*/false);
}

Result<proto::SnapshotManifest> ChunkStore::Manifest(const std::string& project,
                                                     const std::string& sha256) const {
  const os::ChunkDir dir = Dir(project);
  Result<std::string> bytes = dir.Get(sha256);  // verified: the server reads it
  if (!bytes) return tl::unexpected(bytes.error());
  Result<proto::SnapshotManifest> manifest =
      proto::DecodeManifest(*bytes, [&](const std::string& part) { return dir.Get(part); });
  if (!manifest) {
    if (manifest.error().code == ErrorCode::kNotFound) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "manifest " + sha256 + ": " + manifest.error().message);
    }
    return MakeError(
        ErrorCode::kInvalidArgument,
        "manifest " + sha256 + " is not a snapshot manifest: " + manifest.error().message);
  }
  return manifest;
}

Status ChunkStore::CheckComplete(const std::string& project,
                                 const proto::SnapshotManifest& manifest) const {
  const os::ChunkDir dir = Dir(project);
  std::set<std::string_view> seen;
  for (const proto::ManifestFile* f : proto::ChunkedFiles(manifest)) {
    for (const std::string& sha : f->chunks) {
      if (!seen.insert(sha).second) continue;
      if (!dir.Has(sha)) {
        return MakeError(ErrorCode::kFailedPrecondition,
                         "chunk " + sha + " of '" + f->path + "' was not uploaded");
      }
    }
  }
  return {};
}

Status ChunkStore::Sync(const std::string& project) const { return Dir(project).Sync(); }

Result<int64_t> ChunkStore::Collect(const std::string& project,
                                    const std::vector<std::string>& manifests) {
  std::lock_guard one_at_a_time(collect_mu_);
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  std::set<std::string> keep;
  for (const std::string& sha : manifests) {
    keep.insert(sha);
    Result<proto::SnapshotManifest> m = Manifest(project, sha);
    if (!m) {
      if (m.error().code == ErrorCode::kNotFound) continue;  // nothing of it to keep
      return tl::unexpected(m.error());
    }
    keep.insert(m->parts.begin(), m->parts.end());
    for (const proto::ManifestFile* f : proto::ChunkedFiles(*m)) {
      keep.insert(f->chunks.begin(), f->chunks.end());
    }
  }
  const os::ChunkDir dir = Dir(project);
  std::vector<os::ChunkDir::Entry> doomed;
  if (Status s = dir.ForEach([&](const os::ChunkDir::Entry& e) {
        if (!keep.contains(e.sha256) && now_ms - e.mtime_ms >= collect_min_age_ms_) {
          doomed.push_back(e);
        }
      });
      !s) {
    return tl::unexpected(s.error());
  }
  int64_t freed = 0;
  for (const os::ChunkDir::Entry& e : doomed) {
    if (Status s = dir.Remove(e.sha256); !s) return tl::unexpected(s.error());
    freed += e.size;
  }
  std::lock_guard lock(mu_);
  bytes_[project] -= freed;
  return freed;
}

int64_t ChunkStore::ProjectBytes(const std::string& project) const {
  std::lock_guard lock(mu_);
  const auto it = bytes_.find(project);
  return it == bytes_.end() ? 0 : it->second;
}

}  // namespace gpupool::server
