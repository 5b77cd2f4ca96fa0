#include "agent/snapshotter.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>

#include "agent/workspace_sync.h"
#include "api/parallel.h"
#include "api/resources.h"
#include "core/chunker.h"
#include "core/unique_fd.h"
#include "os/files.h"
#include "os/sha256.h"
#include "proto/json_codec.h"

namespace gpupool::agent {
namespace {

constexpr int64_t kReadBytes = 4 << 20;

tl::unexpected<Error> LocalError(const std::string& what, int err) {
  return MakeError(ErrorCode::kInternal, what + ": " + std::strerror(err));
}

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t Ns(const timespec& t) { return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec; }

bool Same(const ScannedFile& f, const struct stat& st) {
  return f.size == st.st_size && f.mtime_ns == Ns(st.st_mtim) && f.inode == st.st_ino;
}

// Reads `fd` (`size` bytes) and cuts it into chunks, each stored in `cache`; their names.
Result<std::vector<std::string>> ChunkFile(int fd, int64_t size, const std::string& rel,
                                           const os::ChunkDir& cache) {
  std::vector<std::string> chunks;
  Chunker chunker;
  // No larger than the file: a workspace of many small files must not allocate and clear a
  // whole read buffer for each of them.
  std::string buffer(static_cast<size_t>(std::clamp<int64_t>(size, 1, kReadBytes)), '\0');
  std::string chunk;
  int64_t at = 0;
  auto flush = [&]() -> Status {
    const std::string sha = os::Sha256Hex(chunk);
    Result<bool> put = cache.Put(sha, chunk, /*verify=*/false);  // hashed just now
    if (!put) return tl::unexpected(put.error());
    chunks.push_back(sha);
    chunk.clear();
    return {};
  };
  while (at < size) {
    const ssize_t n = ::pread(
        fd, buffer.data(), std::min<int64_t>(static_cast<int64_t>(buffer.size()), size - at), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return LocalError("cannot read '" + rel + "'", errno);
    if (n == 0) break;  // shrunk while read (it was not frozen): what there was
    at += n;
    std::string_view piece(buffer.data(), static_cast<size_t>(n));
    while (!piece.empty()) {
      const size_t used = chunker.Feed(piece);
      chunk.append(piece.substr(0, used));
      piece.remove_prefix(used);
      if (chunker.at_boundary()) {
        if (Status s = flush(); !s) return tl::unexpected(s.error());
      }
    }
  }
  if (!chunk.empty()) {
    if (Status s = flush(); !s) return tl::unexpected(s.error());
  }
  return chunks;
}

// The source's bytes of a chunk, stored in the cache (which verifies them against the name).
Status Fetch(api::Client& client, const ChunkSource& source, const std::string& sha,
             const os::ChunkDir& cache, int64_t* bytes) {
  Result<proto::Bytes> got = source.Get(client, sha);
  if (!got) return tl::unexpected(got.error());
  Result<bool> put = cache.Put(sha, got->data);
  if (!put) {
    return MakeError(ErrorCode::kInternal,
                     "chunk " + sha + " from the server is corrupt: " + put.error().message);
  }
  *bytes = static_cast<int64_t>(got->data.size());
  return {};
}

}  // namespace

Result<Capture> CaptureWorkspace(const std::string& workspace, const ScanIndex& previous,
                                 const os::ChunkDir& cache, const FreezeTask& freeze) {
  UniqueFd top(::open(workspace.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat top_st {};
  if (!top.ok() || ::fstat(top.get(), &top_st) != 0) {
    return LocalError("cannot open the workspace " + workspace, errno);
  }
  Capture capture;
  capture.taken_ms = WallMs();
  const int64_t frozen_at = SteadyMs();
  if (Status s = freeze(true); !s) return tl::unexpected(s.error());
  std::set<std::string> dirs;
  const Status walked = WalkWorkspaceDir(
      top.get(), "", top_st.st_uid,
      [&](const std::string& rel, int fd, int64_t size) -> Status {
        struct stat st {};
        if (::fstat(fd, &st) != 0) return LocalError("cannot stat '" + rel + "'", errno);
        ScannedFile file;
        if (const auto it = previous.find(rel); it != previous.end() && Same(it->second, st)) {
          file = it->second;
        } else {
          Result<std::vector<std::string>> chunks = ChunkFile(fd, size, rel, cache);
          if (!chunks) return tl::unexpected(chunks.error());
          file.chunks = std::move(*chunks);
          file.size = st.st_size;
          file.mtime_ns = Ns(st.st_mtim);
          file.inode = st.st_ino;
          capture.read_bytes += size;
        }
        for (size_t slash = rel.find('/'); slash != std::string::npos;
             slash = rel.find('/', slash + 1)) {
          dirs.insert(rel.substr(0, slash));
        }
        proto::ManifestFile entry;
        entry.path = rel;
        entry.mode = static_cast<int32_t>(st.st_mode & 0777);
        entry.size = file.size;
        entry.mtime_ns = file.mtime_ns;
        entry.chunks = file.chunks;
        capture.manifest.files.push_back(std::move(entry));
        capture.bytes += file.size;
        capture.index.emplace(rel, std::move(file));
        return {};
      },
      &capture.skipped);
  const Status thawed = freeze(false);
  capture.frozen_ms = SteadyMs() - frozen_at;
  if (!walked) return tl::unexpected(walked.error());
  if (!thawed) return tl::unexpected(thawed.error());
  capture.files = static_cast<int64_t>(capture.manifest.files.size());
  capture.manifest.dirs.assign(dirs.begin(), dirs.end());  // sorted: parents first
  return capture;
}

Status SealCapture(Capture& capture, const os::ChunkDir& cache) {
  capture.manifest.parts.clear();
  std::vector<std::string> pieces = proto::ManifestPieces(capture.manifest);
  if (pieces.size() > 1) {  // a root lists them: the parts are uploaded with the files' chunks
    for (const std::string& piece : pieces) {
      capture.manifest.parts.push_back(os::Sha256Hex(piece));
      Result<bool> put = cache.Put(capture.manifest.parts.back(), piece, /*verify=*/false);
      if (!put) return tl::unexpected(put.error());
    }
    pieces = {proto::ManifestRoot(capture.manifest.parts)};
  }
  capture.manifest_sha256 = os::Sha256Hex(pieces[0]);
  Result<bool> put = cache.Put(capture.manifest_sha256, pieces[0], /*verify=*/false);
  if (!put) return tl::unexpected(put.error());
  return {};
}

Result<proto::ManifestFile> ChunkIntoCache(int fd, const std::string& name,
                                           const os::ChunkDir& cache) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return LocalError("cannot stat '" + name + "'", errno);
  Result<std::vector<std::string>> chunks = ChunkFile(fd, st.st_size, name, cache);
  if (!chunks) return tl::unexpected(chunks.error());
  proto::ManifestFile file;
  file.path = name;
  file.mode = static_cast<int32_t>(st.st_mode & 0777);
  file.size = st.st_size;
  file.mtime_ns = Ns(st.st_mtim);
  file.chunks = std::move(*chunks);
  return file;
}

Result<Uploaded> UploadCapture(api::Client& client, const std::string& task_id,
                               const Capture& capture, const os::ChunkDir& cache, int parallel,
                               const std::function<bool()>& cancelled) {
  std::vector<std::string> unique;
  {
    std::set<std::string> seen;
    for (const proto::ManifestFile* f : proto::ChunkedFiles(capture.manifest)) {
      for (const std::string& sha : f->chunks) {
        if (seen.insert(sha).second) unique.push_back(sha);
      }
    }
    for (const std::string& sha : capture.manifest.parts) {
      if (seen.insert(sha).second) unique.push_back(sha);
    }
  }
  std::vector<std::string> missing;
  for (size_t at = 0; at < unique.size(); at += proto::kMaxChunksPerQuery) {
    proto::ChunkSet query;
    query.chunks.assign(unique.begin() + static_cast<ptrdiff_t>(at),
                        unique.begin() + static_cast<ptrdiff_t>(std::min(
                                             unique.size(), at + proto::kMaxChunksPerQuery)));
    Result<proto::ChunkSet> lacking = client.Agent().MissingChunks(task_id, query);
    if (!lacking) return tl::unexpected(lacking.error());
    missing.insert(missing.end(), lacking->chunks.begin(), lacking->chunks.end());
  }
  Uploaded up;
  std::mutex mu;
  auto send = [&](api::Client& c, const std::string& sha) -> Status {
    // Not hashed here: the server refuses a chunk whose bytes do not match its name.
    Result<std::string> bytes = cache.Get(sha, /*verify=*/false);
    if (!bytes) return tl::unexpected(bytes.error());
    Result<proto::Empty> put = c.Agent().PutChunk(task_id, sha, proto::Bytes{*bytes});
    if (!put) return tl::unexpected(put.error());
    std::lock_guard lock(mu);
    ++up.chunks;
    up.bytes += static_cast<int64_t>(bytes->size());
    return {};
  };
  if (Status s = api::ForEachParallel(
          client, missing.size(), parallel,
          [&](api::Client& c, size_t i) { return send(c, missing[i]); }, cancelled);
      !s) {
    return tl::unexpected(s.error());
  }
  // The manifest last: the server checks that every chunk it lists is there.
  proto::ChunkSet manifest;
  manifest.chunks = {capture.manifest_sha256};
  Result<proto::ChunkSet> lacking = client.Agent().MissingChunks(task_id, manifest);
  if (!lacking) return tl::unexpected(lacking.error());
  if (!lacking->chunks.empty()) {
    if (Status s = send(client, capture.manifest_sha256); !s) return tl::unexpected(s.error());
  }
  return up;
}

namespace {

// Writes `files` below `dir` (whose directories exist): the chunks `cache` lacks are fetched
// first (each verified as it is stored), then every file is made at its size and each of its
// chunks written at its offset (known from the cached chunks' sizes) by `parallel` threads, each
// chunk verified as it is read: the hashing is the work, and one large file is spread over the
// threads as well as many small ones.
Status WriteFiles(api::Client& client, const ChunkSource& source,
                  const std::vector<proto::ManifestFile>& all, const os::ChunkDir& cache,
                  const std::string& dir, bool keep_existing, int parallel,
                  const std::function<bool()>& cancelled, Restored& restored) {
  std::vector<std::string> missing;
  {
    std::set<std::string> seen;
    for (const proto::ManifestFile& f : all) {
      for (const std::string& sha : f.chunks) {
        if (seen.insert(sha).second && !cache.Has(sha)) missing.push_back(sha);
      }
    }
  }
  std::mutex mu;
  if (Status s = api::ForEachParallel(
          client, missing.size(), parallel,
          [&](api::Client& c, size_t i) -> Status {
            int64_t bytes = 0;
            if (Status f = Fetch(c, source, missing[i], cache, &bytes); !f) return f;
            std::lock_guard lock(mu);
            ++restored.fetched_chunks;
            restored.fetched_bytes += bytes;
            return {};
          },
          cancelled);
      !s) {
    return s;
  }
  struct Piece {
    size_t file;  // in `all`
    std::string sha256;
    int64_t offset;
  };
  std::vector<Piece> pieces;
  std::vector<size_t> files;  // those written (keep_existing: not those already there)
  for (size_t f = 0; f < all.size(); ++f) {
    const proto::ManifestFile& file = all[f];
    const std::string path = dir + "/" + file.path;
    const int flags =
        O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (keep_existing ? O_EXCL : O_TRUNC);
    UniqueFd fd(::open(path.c_str(), flags, 0600));
    if (!fd.ok() && errno == EEXIST && keep_existing) continue;  // the task's own upload wins
    if (!fd.ok() || ::ftruncate(fd.get(), file.size) != 0) {
      return LocalError("cannot create '" + file.path + "'", errno);
    }
    int64_t offset = 0;
    for (const std::string& sha : file.chunks) {
      struct stat st {};
      if (::stat(cache.PathOf(sha).c_str(), &st) != 0) {
        return MakeError(ErrorCode::kNotFound,
                         "cannot restore '" + file.path + "': chunk " + sha + " is not stored");
      }
      pieces.push_back(Piece{f, sha, offset});
      offset += st.st_size;
    }
    if (offset != file.size) {
      for (const std::string& sha : file.chunks) {  // a damaged chunk is the likely cause: name it
        if (Result<std::string> bytes = cache.Get(sha); !bytes) {
          return MakeError(bytes.error().code,
                           "cannot restore '" + file.path + "': " + bytes.error().message);
        }
      }
      return MakeError(ErrorCode::kInternal, "cannot restore '" + file.path +
                                                 "': its chunks hold " + std::to_string(offset) +
                                                 " bytes, the manifest says " +
                                                 std::to_string(file.size));
    }
    files.push_back(f);
  }
  if (Status s = api::ForEachParallel(
          client, pieces.size(), parallel,
          [&](api::Client&, size_t i) -> Status {
            const Piece& piece = pieces[i];
            const proto::ManifestFile& file = all[piece.file];
            Result<std::string> bytes = cache.Get(piece.sha256);
            if (!bytes) {
              return MakeError(bytes.error().code,
                               "cannot restore '" + file.path + "': " + bytes.error().message);
            }
            UniqueFd fd(::open((dir + "/" + file.path).c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC));
            if (!fd.ok()) return LocalError("cannot open '" + file.path + "'", errno);
            if (int err = os::WriteAll(fd.get(), *bytes, piece.offset); err != 0) {
              return LocalError("cannot write '" + file.path + "'", err);
            }
            return {};
          },
          cancelled);
      !s) {
    return s;
  }
  for (size_t f : files) {
    const proto::ManifestFile& file = all[f];
    UniqueFd fd(::open((dir + "/" + file.path).c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC));
    const timespec times[2] = {{0, UTIME_OMIT},
                               {static_cast<time_t>(file.mtime_ns / 1'000'000'000),
                                static_cast<long>(file.mtime_ns % 1'000'000'000)}};
    struct stat st {};
    if (!fd.ok() || ::fchmod(fd.get(), static_cast<mode_t>(file.mode & 0777)) != 0 ||
        ::futimens(fd.get(), times) != 0 || ::fstat(fd.get(), &st) != 0) {
      return LocalError("cannot set the mode and times of '" + file.path + "'", errno);
    }
    restored.index[file.path] = ScannedFile{file.size, Ns(st.st_mtim), st.st_ino, file.chunks};
    ++restored.files;
    restored.bytes += file.size;
  }
  return {};
}

}  // namespace

Result<proto::Bytes> ChunkSource::Get(api::Client& client, const std::string& sha256) const {
  return of == Of::kTask ? client.Agent().GetChunk(id, sha256)
                         : client.Agent().GetDatasetChunk(id, sha256);
}

Result<proto::SnapshotManifest> LoadManifest(api::Client& client, const ChunkSource& source,
                                             const std::string& manifest_sha256,
                                             const os::ChunkDir& cache, Restored& counts) {
  // A chunk of the manifest (its root or a part) from the cache, fetched when the cache lacks it.
  auto cached = [&](const std::string& sha) -> Result<std::string> {
    if (!cache.Has(sha)) {
      int64_t bytes = 0;
      if (Status s = Fetch(client, source, sha, cache, &bytes); !s) {
        return tl::unexpected(s.error());
      }
      ++counts.fetched_chunks;
      counts.fetched_bytes += bytes;
    }
    return cache.Get(sha);
  };
  Result<std::string> text = cached(manifest_sha256);
  Result<proto::SnapshotManifest> manifest =
      text ? proto::DecodeManifest(*text, cached)
           : Result<proto::SnapshotManifest>(tl::unexpected(text.error()));
  if (!manifest) {
    const bool malformed = manifest.error().code == ErrorCode::kInvalidArgument;
    return MakeError(malformed ? ErrorCode::kInternal : manifest.error().code,
                     "manifest " + manifest_sha256.substr(0, 12) +
                         (malformed ? " is malformed: " : ": ") + manifest.error().message);
  }
  return manifest;
}

Result<Restored> RestoreFiles(api::Client& client, const ChunkSource& source,
                              const std::vector<proto::ManifestFile>& files,
                              const os::ChunkDir& cache, const std::string& dir, int parallel,
                              const std::function<bool()>& cancelled) {
  Restored restored;
  if (Status s = WriteFiles(client, source, files, cache, dir, /*keep_existing=*/false, parallel,
                            cancelled, restored);
      !s) {
    return tl::unexpected(s.error());
  }
  return restored;
}

Result<Restored> RestoreWorkspace(api::Client& client, const ChunkSource& source,
                                  const std::string& manifest_sha256, const os::ChunkDir& cache,
                                  const std::string& dir, bool keep_existing, int parallel,
                                  const std::function<bool()>& cancelled) {
  Restored restored;
  Result<proto::SnapshotManifest> manifest =
      LoadManifest(client, source, manifest_sha256, cache, restored);
  if (!manifest) return tl::unexpected(manifest.error());
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return LocalError("cannot create " + dir, errno);
  }
  for (const std::string& d : manifest->dirs) {
    const std::string path = dir + "/" + d;
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return LocalError("cannot create '" + d + "'", errno);
    }
  }
  if (Status s = WriteFiles(client, source, manifest->files, cache, dir, keep_existing, parallel,
                            cancelled, restored);
      !s) {
    return tl::unexpected(s.error());
  }
  restored.image = std::move(manifest->image);
  return restored;
}

}  // namespace gpupool::agent
