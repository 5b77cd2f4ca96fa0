// Pushing a local directory as a dataset's new version: the scan and the send (dataset_push.h).
#include "cli/dataset_push.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "api/parallel.h"
#include "api/resources.h"
#include "cli/transfer.h"
#include "core/chunker.h"
#include "core/unique_fd.h"
#include "os/sha256.h"

namespace gpupool::cli {
namespace {

constexpr int64_t kReadBytes = 4 << 20;

tl::unexpected<Error> LocalError(const std::string& what, int err) {
  return MakeError(ErrorCode::kInternal, what + ": " + std::strerror(err));
}

// Reads `path` and cuts it into chunks, hashing each as its bytes arrive — or, when `previous`
// has the file as it is (size, modification time, inode), takes its chunks from there without
// reading it. `read(n)` is told of every n bytes done; *read_bytes adds the bytes read.
Result<ScannedFile> ChunkLocalFile(const std::string& path, const ScannedFile* previous,
                                   proto::ManifestFile& entry,
                                   const std::function<void(int64_t)>& read, int64_t* read_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!fd.ok() || ::fstat(fd.get(), &st) != 0) return LocalError("cannot read " + path, errno);
  entry.mode = static_cast<int32_t>(st.st_mode & 0777);
  entry.size = st.st_size;
  entry.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  if (previous != nullptr && previous->size == entry.size && previous->mtime_ns == entry.mtime_ns &&
      previous->inode == st.st_ino) {
    entry.chunks = previous->chunks;
    if (read) read(entry.size);
    return *previous;
  }
  ScannedFile out;
  out.size = entry.size;
  out.mtime_ns = entry.mtime_ns;
  out.inode = st.st_ino;
  Chunker chunker;
  os::Sha256 hash;
  int64_t chunk_start = 0;
  int64_t at = 0;
  std::string buffer(static_cast<size_t>(std::clamp<int64_t>(st.st_size, 1, kReadBytes)), '\0');
  auto flush = [&] {
    out.chunks.push_back(hash.HexDigest());
    out.places.push_back({0, chunk_start, at - chunk_start});
    hash = os::Sha256();
    chunk_start = at;
  };
  while (at < st.st_size) {
    const ssize_t n =
        ::pread(fd.get(), buffer.data(),
                std::min<int64_t>(static_cast<int64_t>(buffer.size()), st.st_size - at), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return LocalError("cannot read " + path, errno);
    if (n == 0) return MakeError(ErrorCode::kFailedPrecondition, path + " shrank while read");
    std::string_view piece(buffer.data(), static_cast<size_t>(n));
    while (!piece.empty()) {
      const size_t used = chunker.Feed(piece);
      hash.Update(piece.substr(0, used));
      at += static_cast<int64_t>(used);
      piece.remove_prefix(used);
      if (chunker.at_boundary()) flush();
    }
    if (read) read(n);
  }
  if (at > chunk_start) flush();
  *read_bytes += at;
  entry.chunks = out.chunks;
  return out;
}

// A cache line's fields: rel, size, mtime_ns, inode, then "sha:offset:size" per chunk.
std::vector<std::string_view> Split(std::string_view text, char by) {
  std::vector<std::string_view> out;
  while (true) {
    const size_t at = text.find(by);
    out.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return out;
    text.remove_prefix(at + 1);
  }
}

template <typename T>
bool Number(std::string_view text, T* out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

ScanCache LoadScanCache(const std::string& path) {
  ScanCache cache;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const std::vector<std::string_view> f = Split(line, '\t');
    ScannedFile file;
    if (f.size() != 5 || !Number(f[1], &file.size) || !Number(f[2], &file.mtime_ns) ||
        !Number(f[3], &file.inode)) {
      return {};  // not a cache this code wrote: read everything again
    }
    int64_t offset = 0;
    if (!f[4].empty()) {
      for (std::string_view chunk : Split(f[4], ',')) {
        const std::vector<std::string_view> c = Split(chunk, ':');
        ChunkPlace place;
        if (c.size() != 3 || !os::IsSha256Hex(c[0]) || !Number(c[1], &place.offset) ||
            !Number(c[2], &place.size) || place.offset != offset || place.size <= 0) {
          return {};
        }
        offset += place.size;
        file.chunks.emplace_back(c[0]);
        file.places.push_back(place);
      }
    }
    if (offset != file.size) return {};
    cache.emplace(std::string(f[0]), std::move(file));
  }
  return cache;
}

Status SaveScanCache(const std::string& path, const ScanCache& cache) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return MakeError(ErrorCode::kInternal, "cannot create the directory of " + path);
  const std::string part = path + ".part";
  {
    std::ofstream out(part, std::ios::trunc);
    for (const auto& [rel, file] : cache) {
      out << rel << '\t' << file.size << '\t' << file.mtime_ns << '\t' << file.inode << '\t';
      for (size_t i = 0; i < file.chunks.size(); ++i) {
        out << (i ? "," : "") << file.chunks[i] << ':' << file.places[i].offset << ':'
            << file.places[i].size;
      }
      out << '\n';
    }
    if (!out.flush()) return MakeError(ErrorCode::kInternal, "cannot write " + part);
  }
  if (::rename(part.c_str(), path.c_str()) != 0) return LocalError("cannot write " + path, errno);
  return {};
}

Result<DatasetScan> ScanDataset(const std::string& dir, int threads, const PushProgress& progress,
                                const ScanCache& previous) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    return MakeError(ErrorCode::kNotFound, dir + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return InvalidArgument(dir + " is not a directory");
  Result<UploadPlan> plan = PlanUpload(dir, "");  // the files' paths relative to `dir`
  if (!plan) return tl::unexpected(plan.error());
  DatasetScan scan;
  scan.skipped = std::move(plan->skipped);
  const size_t n = plan->files.size();
  scan.manifest.files.resize(n);
  scan.local.resize(n);
  int64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    scan.local[i] = plan->files[i].first;
    scan.manifest.files[i].path = plan->files[i].second;
    struct stat file {};
    if (::stat(scan.local[i].c_str(), &file) == 0) total += file.st_size;
  }

  std::vector<ScannedFile> chunked(n);
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status first;
  int64_t done = 0;
  auto read = [&](int64_t bytes) {
    std::lock_guard lock(mu);
    done += bytes;
    if (progress) progress(done, std::max(total, done));
  };
  auto work = [&] {
    while (true) {
      const size_t i = next.fetch_add(1);
      if (i >= n) return;
      const auto known = previous.find(scan.manifest.files[i].path);
      int64_t read_bytes = 0;
      Result<ScannedFile> f =
          ChunkLocalFile(scan.local[i], known == previous.end() ? nullptr : &known->second,
                         scan.manifest.files[i], read, &read_bytes);
      std::lock_guard lock(mu);
      scan.read_bytes += read_bytes;
      if (!f) {
        if (first) first = tl::unexpected(f.error());
        next = n;
        return;
      }
      chunked[i] = std::move(*f);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min<int>(threads, static_cast<int>(n)); ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (!first) return tl::unexpected(first.error());

  std::set<std::string> dirs;
  for (size_t i = 0; i < n; ++i) {
    const std::string& rel = scan.manifest.files[i].path;
    for (size_t slash = rel.find('/'); slash != std::string::npos;
         slash = rel.find('/', slash + 1)) {
      dirs.insert(rel.substr(0, slash));
    }
    for (size_t c = 0; c < chunked[i].chunks.size(); ++c) {
      ChunkPlace place = chunked[i].places[c];
      place.file = i;
      scan.chunks.emplace(chunked[i].chunks[c], place);
    }
    scan.bytes += scan.manifest.files[i].size;
    scan.cache.emplace(rel, std::move(chunked[i]));
  }
  scan.files = static_cast<int64_t>(n);
  scan.manifest.dirs.assign(dirs.begin(), dirs.end());  // sorted: parents first

  std::vector<std::string> pieces = proto::ManifestPieces(scan.manifest);
  if (pieces.size() > 1) {  // a root lists them
    for (std::string& piece : pieces) {
      scan.manifest.parts.push_back(os::Sha256Hex(piece));
      scan.manifest_chunks.emplace(scan.manifest.parts.back(), std::move(piece));
    }
    pieces = {proto::ManifestRoot(scan.manifest.parts)};
  }
  scan.manifest_sha256 = os::Sha256Hex(pieces[0]);
  scan.manifest_chunks.emplace(scan.manifest_sha256, std::move(pieces[0]));
  return scan;
}

Result<PushSent> SendDataset(api::Client& client, const std::string& dataset,
                             const DatasetScan& scan, int parallel, const PushProgress& progress) {
  // Which chunks the project lacks, the files' first, then the manifest's parts and root.
  std::vector<std::string> all;
  all.reserve(scan.chunks.size() + scan.manifest_chunks.size());
  for (const auto& [sha, place] : scan.chunks) all.push_back(sha);
  std::vector<std::string> missing;
  for (size_t at = 0; at < all.size(); at += proto::kMaxChunksPerQuery) {
    proto::ChunkSet query;
    query.chunks.assign(
        all.begin() + static_cast<ptrdiff_t>(at),
        all.begin() + static_cast<ptrdiff_t>(std::min(all.size(), at + proto::kMaxChunksPerQuery)));
    Result<proto::ChunkSet> lacking = client.Datasets().MissingChunks(dataset, query);
    if (!lacking) return tl::unexpected(lacking.error());
    missing.insert(missing.end(), lacking->chunks.begin(), lacking->chunks.end());
  }
  int64_t total = 0;
  for (const std::string& sha : missing) {
    const auto it = scan.chunks.find(sha);
    if (it == scan.chunks.end()) {
      return MakeError(ErrorCode::kInternal, "the server named chunk " + sha + ", not asked for");
    }
    total += it->second.size;
  }
  // Sent in the order they lie in the files, so the files are read front to back.
  std::sort(missing.begin(), missing.end(), [&](const std::string& a, const std::string& b) {
    const ChunkPlace& x = scan.chunks.at(a);
    const ChunkPlace& y = scan.chunks.at(b);
    return std::tie(x.file, x.offset) < std::tie(y.file, y.offset);
  });

  PushSent sent;
  std::mutex mu;
  auto send = [&](api::Client& c, size_t i) -> Status {
    const std::string& sha = missing[i];
    const ChunkPlace& place = scan.chunks.at(sha);
    const std::string& path = scan.local[place.file];
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.ok()) return LocalError("cannot read " + path, errno);
    std::string bytes(static_cast<size_t>(place.size), '\0');
    int64_t got = 0;
    while (got < place.size) {
      const ssize_t n = ::pread(fd.get(), bytes.data() + got, static_cast<size_t>(place.size - got),
                                place.offset + got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return LocalError("cannot read " + path, errno);
      if (n == 0) {
        return MakeError(ErrorCode::kFailedPrecondition,
                         path + " changed since it was scanned (it is shorter): push again");
      }
      got += n;
    }
    Result<proto::Empty> put = c.Datasets().PutChunk(dataset, sha, proto::Bytes{std::move(bytes)});
    if (!put) {
      if (put.error().code == ErrorCode::kInvalidArgument) {  // its bytes are not its name's
        return MakeError(
            ErrorCode::kFailedPrecondition,
            path + " changed since it was scanned: push again (" + put.error().message + ")");
      }
      return tl::unexpected(put.error());
    }
    std::lock_guard lock(mu);
    ++sent.chunks;
    sent.bytes += place.size;
    if (progress) progress(sent.bytes, total);
    return {};
  };
  if (Status s = api::ForEachParallel(client, missing.size(), parallel, send); !s) {
    return tl::unexpected(s.error());
  }

  // The manifest last (its parts, then the root): the server checks that each chunk it lists is
  // stored when the version is recorded.
  proto::ChunkSet query;
  for (const auto& [sha, bytes] : scan.manifest_chunks) query.chunks.push_back(sha);
  Result<proto::ChunkSet> lacking = client.Datasets().MissingChunks(dataset, query);
  if (!lacking) return tl::unexpected(lacking.error());
  std::vector<std::string> pieces = lacking->chunks;
  std::stable_partition(pieces.begin(), pieces.end(),
                        [&](const std::string& sha) { return sha != scan.manifest_sha256; });
  for (const std::string& sha : pieces) {
    const std::string& bytes = scan.manifest_chunks.at(sha);
    Result<proto::Empty> put = client.Datasets().PutChunk(dataset, sha, proto::Bytes{bytes});
    if (!put) return tl::unexpected(put.error());
    ++sent.chunks;
    sent.bytes += static_cast<int64_t>(bytes.size());
  }
  proto::DatasetVersionPush push;
  push.manifest = scan.manifest_sha256;
  push.files = scan.files;
  push.bytes = scan.bytes;
  push.new_bytes = sent.bytes;
  Result<proto::DatasetView> view = client.Datasets().PushVersion(dataset, push);
  if (!view) return tl::unexpected(view.error());
  sent.dataset = std::move(*view);
  return sent;
}

}  // namespace gpupool::cli
