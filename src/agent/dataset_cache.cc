// Implementation of dataset_cache.h: a version built in root/tmp (the manifest, the files other
// versions here hold hard-linked, the rest restored from chunks, modes made read-only, synced)
// and renamed into place; evictions rename a version into root/tmp before removing it.
#include "agent/dataset_cache.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "core/task_path.h"
#include "core/unique_fd.h"
#include "os/files.h"
#include "os/sha256.h"
#include "proto/json_codec.h"

namespace gpupool::agent {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFiles = "files";
constexpr const char* kManifest = "manifest.json";

// Removes `path` and everything below it; its directories are made writable first (a version's
// are 0555, which only root may remove entries from otherwise).
Status RemoveTree(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return {};
  if (fs::is_directory(fs::symlink_status(path, ec))) {
    ::chmod(path.c_str(), 0755);
    for (auto it = fs::recursive_directory_iterator(path, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0755);
    }
  }
  fs::remove_all(path, ec);
  if (ec) return MakeError(ErrorCode::kInternal, "cannot remove " + path + ": " + ec.message());
  return {};
}

// A dataset's files are the same for every task that mounts it: readable (and, when executable,
// runnable) by any uid, writable by none.
mode_t ReadOnlyMode(int32_t mode) { return (mode & 0111) != 0 ? 0555 : 0444; }

// The manifest a version here was built from (root/<sha>/manifest.json); nullopt when it cannot
// be read (that version is then no source of files).
std::optional<proto::SnapshotManifest> ReadManifest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  Result<proto::SnapshotManifest> m =
      proto::DecodeBody<proto::SnapshotManifest>(text.str(), /*required=*/true);
  if (!m) return std::nullopt;
  return std::move(*m);
}

// Every file of a manifest's paths and directories checked as task paths: a manifest (a
// published dataset's too, pushed by anyone) never names a file outside the version's directory.
Status CheckPaths(const proto::SnapshotManifest& m) {
  for (const std::string& d : m.dirs) {
    if (Status s = ValidateTaskPath(d, "the manifest's directory"); !s) return s;
  }
  for (const proto::ManifestFile& f : m.files) {
    if (Status s = ValidateTaskPath(f.path, "the manifest's file"); !s) return s;
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<DatasetCache>> DatasetCache::Open(std::string root, os::ChunkDir chunks,
                                                         int64_t max_bytes,
                                                         int64_t chunk_cache_bytes) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return MakeError(ErrorCode::kInternal, "cannot create " + root + ": " + ec.message());
  if (Status s = RemoveTree(root + "/tmp"); !s) return tl::unexpected(s.error());
  if (::mkdir((root + "/tmp").c_str(), 0700) != 0) {
    return os::FileError("cannot create " + root + "/tmp", errno);
  }
  std::unique_ptr<DatasetCache> cache(
      new DatasetCache(std::move(root), std::move(chunks), max_bytes, chunk_cache_bytes));
  std::vector<std::pair<std::pair<int64_t, int64_t>, std::string>> found;  // by their time
  for (const fs::directory_entry& e : fs::directory_iterator(cache->root_, ec)) {
    const std::string name = e.path().filename().string();
    struct stat st {};
    if (os::IsSha256Hex(name) && ::stat((e.path() / kFiles).c_str(), &st) == 0 &&
        ::stat(e.path().c_str(), &st) == 0) {
      found.push_back({{st.st_mtim.tv_sec, st.st_mtim.tv_nsec}, name});
    }
  }
  if (ec)
    return MakeError(ErrorCode::kInternal, "cannot list " + cache->root_ + ": " + ec.message());
  std::sort(found.begin(), found.end());
  for (const auto& [when, name] : found) cache->used_[name] = ++cache->uses_;
  return cache;
}

std::string DatasetCache::FilesDir(const std::string& manifest) const {
  return root_ + "/" + manifest + "/" + kFiles;
}

Result<Materialized> DatasetCache::Materialize(api::Client& client, const DatasetMount& mount,
                                               int parallel,
                                               const std::function<bool()>& cancelled) {
  if (!os::IsSha256Hex(mount.manifest)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "its manifest '" + mount.manifest + "' is no SHA-256");
  }
  const std::string& m = mount.manifest;
  bool build = false;
  {
    std::unique_lock lock(mu_);
    built_.wait(lock, [&] { return building_.count(m) == 0; });
    build = used_.count(m) == 0;
    if (build) {
      building_.insert(m);
    } else {
      used_[m] = ++uses_;
    }
  }
  if (!build) {  // here already (built before, or by the caller this one waited for)
    KeepUse(m);
    return Materialized{.dir = FilesDir(m)};
  }
  Result<Materialized> built = Build(client, mount, parallel, cancelled);
  {
    std::lock_guard lock(mu_);
    building_.erase(m);
    if (built) used_[m] = ++uses_;
  }
  built_.notify_all();
  if (built) KeepUse(m);
  return built;
}

Result<Materialized> DatasetCache::Build(api::Client& client, const DatasetMount& mount,
                                         int parallel, const std::function<bool()>& cancelled) {
  const ChunkSource source = ChunkSource::Dataset(mount.dataset_id);
  Restored fetched;
  Result<proto::SnapshotManifest> manifest =
      LoadManifest(client, source, mount.manifest, chunks_, fetched);
  if (!manifest) return tl::unexpected(manifest.error());
  manifest->parts.clear();  // decoded whole: what manifest.json keeps
  if (Status s = CheckPaths(*manifest); !s) return tl::unexpected(s.error());

  std::string tmp = root_ + "/tmp/" + mount.manifest + ".XXXXXX";
  if (::mkdtemp(tmp.data()) == nullptr)
    return os::FileError("cannot create a directory in " + root_ + "/tmp", errno);
  Result<Materialized> done = [&]() -> Result<Materialized> {
    Materialized out;
    const std::string files = tmp + "/" + kFiles;
    // The directories: the manifest's, and any parent of a file it does not list.
    std::vector<std::string> dirs = {files};
    std::set<std::string> made;
    auto make = [&](const std::string& rel) -> Status {
      if (!made.insert(rel).second) return {};
      dirs.push_back(files + "/" + rel);
      if (::mkdir(dirs.back().c_str(), 0755) != 0 && errno != EEXIST) {
        return os::FileError("cannot create '" + rel + "'", errno);
      }
      return {};
    };
    if (::mkdir(files.c_str(), 0755) != 0) return os::FileError("cannot create " + files, errno);
    for (const std::string& d : manifest->dirs) {
      for (size_t slash = d.find('/'); slash != std::string::npos; slash = d.find('/', slash + 1)) {
        if (Status s = make(d.substr(0, slash)); !s) return tl::unexpected(s.error());
      }
      if (Status s = make(d); !s) return tl::unexpected(s.error());
    }
    for (const proto::ManifestFile& f : manifest->files) {
      for (size_t slash = f.path.find('/'); slash != std::string::npos;
           slash = f.path.find('/', slash + 1)) {
        if (Status s = make(f.path.substr(0, slash)); !s) return tl::unexpected(s.error());
      }
    }

    // The versions here to reuse files from, the most recently used first.
    std::vector<std::pair<std::string, proto::SnapshotManifest>> others;
    for (const std::string& other : Held(SIZE_MAX)) {
      if (std::optional<proto::SnapshotManifest> read =
              ReadManifest(root_ + "/" + other + "/" + kManifest)) {
        others.emplace_back(other, std::move(*read));
      }
    }
    std::vector<std::unordered_map<std::string_view, const proto::ManifestFile*>> by_path(
        others.size());
    for (size_t i = 0; i < others.size(); ++i) {
      for (const proto::ManifestFile& f : others[i].second.files) by_path[i].emplace(f.path, &f);
    }
    std::vector<proto::ManifestFile> write;
    for (const proto::ManifestFile& f : manifest->files) {
      bool linked = false;
      for (size_t i = 0; i < others.size() && !linked; ++i) {
        const auto it = by_path[i].find(f.path);
        if (it == by_path[i].end() || it->second->mode != f.mode || it->second->size != f.size ||
            it->second->chunks != f.chunks) {
          continue;
        }
        // An eviction may have removed it since: then it is written like any other.
        linked = ::link((FilesDir(others[i].first) + "/" + f.path).c_str(),
                        (files + "/" + f.path).c_str()) == 0;
      }
      if (linked) {
        ++out.linked_files;
        out.linked_bytes += f.size;
      } else {
        write.push_back(f);
      }
    }
    // In groups of files of at most half the chunk cache's size, the cache trimmed after each:
    // a version larger than the cache passes through it without being held twice.
    const int64_t group_bytes =
        chunk_cache_bytes_ < 0 ? INT64_MAX : std::max<int64_t>(chunk_cache_bytes_ / 2, 1);
    Restored restored;
    for (size_t begin = 0; begin < write.size();) {
      size_t end = begin + 1;
      int64_t bytes = write[begin].size;
      while (end < write.size() && bytes + write[end].size <= group_bytes)
        bytes += write[end++].size;
      const std::vector<proto::ManifestFile> group(write.begin() + static_cast<ptrdiff_t>(begin),
                                                   write.begin() + static_cast<ptrdiff_t>(end));
      Result<Restored> wrote =
          RestoreFiles(client, source, group, chunks_, files, parallel, cancelled);
      if (!wrote) return tl::unexpected(wrote.error());
      restored.fetched_chunks += wrote->fetched_chunks;
      restored.fetched_bytes += wrote->fetched_bytes;
      if (chunk_cache_bytes_ >= 0) {
        if (Result<int64_t> trimmed = chunks_.Trim(chunk_cache_bytes_); !trimmed) {
          return tl::unexpected(trimmed.error());
        }
      }
      begin = end;
    }
    for (const proto::ManifestFile& f : write) {
      if (::chmod((files + "/" + f.path).c_str(), ReadOnlyMode(f.mode)) != 0) {
        return os::FileError("cannot set the mode of '" + f.path + "'", errno);
      }
    }
    for (const std::string& d : dirs) {
      if (::chmod(d.c_str(), 0555) != 0) return os::FileError("cannot set the mode of " + d, errno);
    }
    if (Status s = os::WriteFileAtomically(tmp + "/" + kManifest,
                                           proto::Dump(proto::Encode(*manifest)), {.mode = 0644});
        !s) {
      return tl::unexpected(s.error());
    }
    // Every file durable before the version shows under its name.
    UniqueFd fd(::open(tmp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.ok() || ::syncfs(fd.get()) != 0) return os::FileError("cannot sync " + tmp, errno);
    const std::string final_dir = root_ + "/" + mount.manifest;
    if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
      return os::FileError("cannot rename " + tmp + " to " + final_dir, errno);
    }
    if (const int err = os::SyncDirectory(root_); err != 0) {
      return os::FileError("cannot sync " + root_, err);
    }
    out.dir = final_dir + "/" + kFiles;
    out.built = true;
    out.files = static_cast<int64_t>(manifest->files.size());
    for (const proto::ManifestFile& f : manifest->files) out.bytes += f.size;
    out.fetched_chunks = fetched.fetched_chunks + restored.fetched_chunks;
    out.fetched_bytes = fetched.fetched_bytes + restored.fetched_bytes;
    return out;
  }();
  if (!done) (void)RemoveTree(tmp);  // a failed build leaves nothing (its error is the answer)
  return done;
}

void DatasetCache::KeepUse(const std::string& manifest) const {
  ::utimensat(AT_FDCWD, (root_ + "/" + manifest).c_str(), nullptr, 0);
}

void DatasetCache::SetInUse(std::set<std::string> manifests) {
  std::lock_guard lock(mu_);
  in_use_ = std::move(manifests);
}

Result<std::vector<std::string>> DatasetCache::Evict() {
  std::lock_guard evicting(evict_mu_);
  std::vector<std::pair<int64_t, std::string>> order;  // (last use, manifest), oldest first
  {
    std::lock_guard lock(mu_);
    for (const auto& [m, used] : used_) order.emplace_back(used, m);
  }
  std::sort(order.begin(), order.end());
  // Each version's files by inode: a file hard-linked between versions takes its disk once.
  struct Inode {
    int64_t size = 0;
    int links = 0;  // versions here holding it
  };
  std::map<std::pair<dev_t, ino_t>, Inode> inodes;
  std::map<std::string, std::vector<std::pair<dev_t, ino_t>>> held;
  int64_t total = 0;
  for (const auto& [used, m] : order) {
    std::error_code ec;
    std::set<std::pair<dev_t, ino_t>> own;
    for (auto it = fs::recursive_directory_iterator(FilesDir(m), ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      struct stat st {};
      if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (!own.insert({st.st_dev, st.st_ino}).second) continue;
      Inode& inode = inodes[{st.st_dev, st.st_ino}];
      if (inode.links++ == 0) {
        inode.size = st.st_size;
        total += st.st_size;
      }
    }
    held[m].assign(own.begin(), own.end());
  }
  std::vector<std::string> evicted;
  for (const auto& [used, m] : order) {
    if (total <= max_bytes_) break;
    {
      std::lock_guard lock(mu_);
      // Mounted, or used since the order was taken: kept.
      const auto it = used_.find(m);
      if (it == used_.end() || it->second != used || in_use_.count(m) || building_.count(m)) {
        continue;
      }
      used_.erase(it);  // no longer handed out
    }
    // Out of sight at once; removed below (or, after a crash, when the cache opens again).
    std::string gone = root_ + "/tmp/" + m + ".evicted.XXXXXX";
    if (::mkdtemp(gone.data()) == nullptr ||
        ::rename((root_ + "/" + m).c_str(), gone.c_str()) != 0) {
      return os::FileError("cannot evict dataset version " + m, errno);
    }
    if (Status s = RemoveTree(gone); !s) return tl::unexpected(s.error());
    for (const auto& key : held[m]) {
      Inode& inode = inodes[key];
      if (--inode.links == 0) total -= inode.size;
    }
    evicted.push_back(m);
  }
  return evicted;
}

std::vector<std::string> DatasetCache::Held(size_t max) const {
  std::vector<std::pair<int64_t, std::string>> order;
  {
    std::lock_guard lock(mu_);
    for (const auto& [m, used] : used_) order.emplace_back(-used, m);
  }
  std::sort(order.begin(), order.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < order.size() && i < max; ++i) out.push_back(order[i].second);
  return out;
}

}  // namespace gpupool::agent
