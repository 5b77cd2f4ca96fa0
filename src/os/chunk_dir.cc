#include "os/chunk_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <vector>

#include "core/hex.h"
#include "core/unique_fd.h"
#include "os/files.h"
#include "os/sha256.h"

namespace gpupool::os {
namespace {

// mkdir -p: `path` and whatever of its parents is missing.
Status MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return {};
  if (errno == ENOENT) {
    const size_t slash = path.find_last_of('/');
    if (slash != std::string::npos && slash > 0) {
      if (Status parent = MakeDir(path.substr(0, slash)); !parent) return parent;
      if (mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return {};
    }
  }
  return FileError("cannot create " + path, errno);
}

std::string RandomSuffix() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const uint64_t v = rng();
  return HexEncode(std::string_view(reinterpret_cast<const char*>(&v), sizeof v));
}

}  // namespace

std::string ChunkDir::PathOf(std::string_view sha256) const {
  std::string path = root_;
  path += '/';
  path += sha256.substr(0, 2);
  path += '/';
  path += sha256;
  return path;
}

bool ChunkDir::Has(std::string_view sha256, bool touch) const {
  if (!IsSha256Hex(sha256)) return false;
  const std::string path = PathOf(sha256);
  if (touch) return utimensat(AT_FDCWD, path.c_str(), nullptr, 0) == 0;
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Result<bool> ChunkDir::Put(std::string_view sha256, std::string_view bytes, bool verify) const {
  if (!IsSha256Hex(sha256)) {
    return InvalidArgument("'" + std::string(sha256) + "' is not a SHA-256 (64 lower-case hex)");
  }
  if (verify) {
    const std::string actual = Sha256Hex(bytes);
    if (actual != sha256) {
      return InvalidArgument("chunk " + std::string(sha256) + ": its bytes' SHA-256 is " + actual);
    }
  }
  if (Has(sha256)) return false;
  const std::string tmp_dir = root_ + "/tmp";
  const std::string dir = root_ + "/" + std::string(sha256.substr(0, 2));
  for (const std::string& d : {root_, tmp_dir, dir}) {
    if (Status s = MakeDir(d); !s) return tl::unexpected(s.error());
  }
  const std::string tmp = tmp_dir + "/" + std::string(sha256) + "." + RandomSuffix();
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd.ok()) return FileError("cannot create " + tmp, errno);
  if (int err = WriteAll(fd.get(), bytes); err != 0) {
    unlink(tmp.c_str());
    return FileError("cannot write " + tmp, err);
  }
  if (!fd.Close()) {
    const int err = errno;
    unlink(tmp.c_str());
    return FileError("cannot write " + tmp, err);
  }
  const std::string path = PathOf(sha256);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return FileError("cannot rename " + tmp + " to " + path, err);
  }
  return true;
}

Result<std::string> ChunkDir::Get(std::string_view sha256, bool verify) const {
  if (!IsSha256Hex(sha256)) {
    return InvalidArgument("'" + std::string(sha256) + "' is not a SHA-256 (64 lower-case hex)");
  }
  const std::string path = PathOf(sha256);
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.ok()) {
    if (errno == ENOENT) return NotFound("chunk " + std::string(sha256) + " is not stored");
    return FileError("cannot open " + path, errno);
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return FileError("cannot stat " + path, errno);
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n =
        pread(fd.get(), bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FileError("cannot read " + path, errno);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  if (!verify) return bytes;
  if (Sha256Hex(bytes) != sha256) {
    return MakeError(ErrorCode::kInternal, "chunk " + std::string(sha256) +
                                               " is corrupt: its bytes do not hash to its name (" +
                                               path + ")");
  }
  futimens(fd.get(), nullptr);  // recently used
  return bytes;
}

Status ChunkDir::Remove(std::string_view sha256) const {
  if (!IsSha256Hex(sha256)) return {};
  const std::string path = PathOf(sha256);
  if (unlink(path.c_str()) != 0 && errno != ENOENT)
    return FileError("cannot remove " + path, errno);
  return {};
}

Status ChunkDir::Sync() const {
  UniqueFd fd(open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.ok()) {
    if (errno == ENOENT) return {};  // nothing written yet
    return FileError("cannot open " + root_, errno);
  }
  if (syncfs(fd.get()) != 0) return FileError("cannot sync " + root_, errno);
  return {};
}

Result<int64_t> ChunkDir::Trim(int64_t max_bytes) const {
  std::vector<Entry> entries;
  int64_t total = 0;
  if (Status s = ForEach([&](const Entry& e) {
        entries.push_back(e);
        total += e.size;
      });
      !s) {
    return tl::unexpected(s.error());
  }
  if (total <= max_bytes) return int64_t{0};
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.mtime_ms < b.mtime_ms; });
  int64_t freed = 0;
  for (const Entry& e : entries) {
    if (total - freed <= max_bytes) break;
    if (Status s = Remove(e.sha256); !s) return tl::unexpected(s.error());
    freed += e.size;
  }
  return freed;
}

Status ChunkDir::ForEach(const std::function<void(const Entry&)>& visit) const {
  DIR* top = opendir(root_.c_str());
  if (top == nullptr) {
    if (errno == ENOENT) return {};
    return FileError("cannot list " + root_, errno);
  }
  Status status;
  while (const dirent* d = readdir(top)) {
    const std::string_view name = d->d_name;
    if (name.size() != 2 || !IsLowerHex(name)) continue;
    const std::string sub = root_ + "/" + std::string(name);
    DIR* dir = opendir(sub.c_str());
    if (dir == nullptr) continue;
    while (const dirent* e = readdir(dir)) {
      const std::string_view file = e->d_name;
      if (!IsSha256Hex(file) || !file.starts_with(name)) continue;
      struct stat st;
      if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
        continue;
      }
      visit(Entry{std::string(file), st.st_size,
                  int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1'000'000});
    }
    closedir(dir);
  }
  closedir(top);
  return status;
}

}  // namespace gpupool::os
