// DiskTaskFiles (see task_files.h): a task's files under root/tasks/<id>, their SHA-256 kept
// incrementally while an upload's chunks arrive so that a commit does not read the file again,
// and a background thread deleting removed tasks' directories.
#include "server/task_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <utility>

#include "core/file_rules.h"
#include "core/task_path.h"
#include "core/unique_fd.h"
#include "os/files.h"
#include "os/sha256.h"

namespace gpupool::server {

namespace fs = std::filesystem;

namespace {

// The name of a partial upload: a digest of the task path, so that any path makes one short,
// flat file name.
std::string PathDigest(std::string_view path) { return os::Sha256Hex(path); }

tl::unexpected<Error> Exhausted(std::string message) {
  return MakeError(ErrorCode::kResourceExhausted, std::move(message));
}

bool ValidTaskId(const std::string& id) {
  if (id.empty() || id.size() > 128 || id == "." || id == "..") return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// The line of a sums file: what the hash was computed for.
std::string SumsLine(const std::string& sha, const struct stat& st) {
  return sha + " " + std::to_string(st.st_ino) + " " + std::to_string(st.st_size) + " " +
         std::to_string(MtimeNs(st)) + "\n";
}

std::optional<std::string> ReadSmallFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.ok()) return std::nullopt;
  char buffer[256];
  const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
  if (n <= 0) return std::nullopt;
  return std::string(buffer, static_cast<size_t>(n));
}

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

std::string Join(const std::string& dir, const std::string& rel) {
  return rel.empty() ? dir : dir + "/" + rel;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct DiskTaskFiles::Task {
  // An unfinished upload's hash of its first `hashed` bytes; stale (recomputed from the file at
  // commit) when chunks arrived out of its sight, e.g. before a restart.
  struct Upload {
    os::Sha256 hash;
    int64_t hashed = 0;
  };

  std::mutex mu;
  bool removed = false;
  std::map<std::string, Upload> uploads;  // by path
};

DiskTaskFiles::DiskTaskFiles(std::string root, TaskFilesOptions options)
    : root_(std::move(root)), options_(options) {}

Result<std::unique_ptr<DiskTaskFiles>> DiskTaskFiles::Open(const std::string& root,
                                                           TaskFilesOptions options) {
  if (options.max_task_bytes < 0 || options.max_file_bytes < 0 || options.max_files < 0) {
    return InvalidArgument("task file limits must not be negative");
  }
  for (const std::string& dir : {root, root + "/tasks", root + "/trash"}) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return os::FileError("cannot create " + dir, errno);
    }
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return MakeError(ErrorCode::kInternal, dir + " is not a directory");
    }
  }
  std::unique_ptr<DiskTaskFiles> files(new DiskTaskFiles(root, options));
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root + "/trash", ec)) {
    files->trash_.push_back(entry.path().string());
  }
  files->CountAll();
  files->janitor_ = std::thread([f = files.get()] { f->JanitorLoop(); });
  return files;
}

namespace {

constexpr const char* kProjectFile = "/project";

// The bytes of the regular files below `dir` (none when it does not exist), and how many.
std::pair<int64_t, int64_t> CountFiles(const std::string& dir, std::error_code& ec) {
  int64_t bytes = 0, files = 0;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    bytes += st.st_size;
    ++files;
  }
  if (ec == std::errc::no_such_file_or_directory) ec.clear();
  return {bytes, files};
}

}  // namespace

void DiskTaskFiles::CountAll() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_ + "/tasks", ec)) {
    const std::string id = entry.path().filename().string();
    if (!ValidTaskId(id)) continue;
    const std::string dir = TaskDir(id);
    Stored s;
    // A directory from before projects were recorded counts against none until its next upload.
    if (const auto project = ReadSmallFile(dir + kProjectFile)) s.project = *project;
    std::error_code data_ec, partial_ec;
    const auto [data_bytes, files] = CountFiles(dir + "/data", data_ec);
    s.bytes = data_bytes + CountFiles(dir + "/partial", partial_ec).first;
    s.files = files;
    project_bytes_[s.project] += s.bytes;
    stored_[id] = std::move(s);
  }
}

DiskTaskFiles::Stored DiskTaskFiles::Usage(const std::string& task_id) {
  std::lock_guard lock(mu_);
  const auto it = stored_.find(task_id);
  return it == stored_.end() ? Stored{} : it->second;
}

void DiskTaskFiles::Charge(const std::string& task_id, int64_t delta, int64_t files) {
  std::lock_guard lock(mu_);
  Stored& s = stored_[task_id];
  s.bytes += delta;
  s.files += files;
  project_bytes_[s.project] += delta;
}

bool DiskTaskFiles::ChargeWithin(const std::string& task_id, int64_t delta, int64_t more,
                                 const StorageQuota& quota, int64_t* held) {
  std::lock_guard lock(mu_);
  Stored& s = stored_[task_id];
  int64_t& project = project_bytes_[s.project];
  if (!quota.project.empty() && quota.max_bytes >= 0 &&
      project + quota.elsewhere + delta + more > quota.max_bytes) {
    *held = project + quota.elsewhere;
    return false;
  }
  s.bytes += delta;
  project += delta;
  return true;
}

Status DiskTaskFiles::Own(const std::string& task_id, const std::string& project) {
  if (project.empty()) return {};  // no project named: whoever it is now stays
  {
    std::lock_guard lock(mu_);
    const auto it = stored_.find(task_id);
    if (it != stored_.end() && it->second.project == project) return {};
  }
  const std::string dir = TaskDir(task_id);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return os::FileError("cannot create " + dir, errno);
  }
  if (Status written = os::WriteFileAtomically(dir + kProjectFile, project); !written) {
    return MakeError(written.error().code, "cannot record the project of task " + task_id +
                                               "'s files: " + written.error().message);
  }
  std::lock_guard lock(mu_);
  Stored& s = stored_[task_id];
  project_bytes_[s.project] -= s.bytes;
  s.project = project;
  project_bytes_[s.project] += s.bytes;
  return {};
}

int64_t DiskTaskFiles::ProjectBytes(const std::string& project) {
  std::lock_guard lock(mu_);
  const auto it = project_bytes_.find(project);
  return it == project_bytes_.end() ? 0 : it->second;
}

DiskTaskFiles::~DiskTaskFiles() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (janitor_.joinable()) janitor_.join();
}

std::string DiskTaskFiles::TaskDir(const std::string& task_id) const {
  return root_ + "/tasks/" + task_id;
}

Result<std::shared_ptr<DiskTaskFiles::Task>> DiskTaskFiles::Entry(const std::string& task_id) {
  if (!ValidTaskId(task_id)) return NotFound("task '" + task_id + "' not found");
  std::lock_guard lock(mu_);
  std::shared_ptr<Task>& t = tasks_[task_id];
  if (t == nullptr) t = std::make_shared<Task>();
  return t;
}

// ---- reading ----

namespace {

// The SHA-256 of the stored file data/<rel> whose lstat is `st`: from sums/<rel> when it was
// computed for this very file (inode, size, modification time), else computed and recorded.
Result<std::string> StoredSha(const std::string& dir, const std::string& rel,
                              const struct stat& st) {
  const std::string sums = dir + "/sums/" + rel;
  if (const auto line = ReadSmallFile(sums)) {
    std::istringstream in(*line);
    std::string sha;
    uint64_t ino = 0;
    int64_t size = -1, mtime = -1;
    if (in >> sha >> ino >> size >> mtime && os::IsSha256Hex(sha) && ino == st.st_ino &&
        size == st.st_size && mtime == MtimeNs(st)) {
      return sha;
    }
  }
  const std::string data = dir + "/data/" + rel;
  UniqueFd fd(::open(data.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.ok()) return os::FileError("cannot read " + data, errno);
  os::Sha256 h;
  if (const int err = h.UpdateFromFile(fd.get(), 0, st.st_size); err != 0) {
    return os::FileError("cannot read " + data, err);
  }
  const std::string sha = h.HexDigest();
  // Recorded for next time when the layout allows (a stale sums entry of another type is left:
  // the hash is then computed again next time, which is only slower).
  std::error_code ec;
  fs::create_directories(Parent(sums), ec);
  // A failure to record it only costs computing it again.
  static_cast<void>(os::WriteFileAtomically(sums, SumsLine(sha, st), {.temp_dir = dir + "/tmp"}));
  return sha;
}

}  // namespace

Result<FileListing> DiskTaskFiles::List(const std::string& task_id, const std::string& path) {
  if (!path.empty()) {
    if (Status ok = ValidateTaskPath(path); !ok) return tl::unexpected(ok.error());
  }
  auto entry = Entry(task_id);
  if (!entry) return tl::unexpected(entry.error());
  Task& t = **entry;
  std::lock_guard lock(t.mu);
  if (t.removed) return NotFound("task '" + task_id + "' not found");
  const std::string dir = TaskDir(task_id);
  const std::string data = dir + "/data";
  const std::string base = Join(data, path);
  FileListing listing;
  listing.max_file_bytes = options_.max_file_bytes;
  listing.max_task_bytes = options_.max_task_bytes;
  struct stat st {};
  if (::lstat(base.c_str(), &st) != 0) {
    if (path.empty()) {
      listing.is_dir = true;  // no file yet
      return listing;
    }
    if (errno == ENOENT || errno == ENOTDIR) {
      return NoSuchFileOrDirectory(task_id, path);
    }
    return os::FileError("cannot read " + base, errno);
  }
  if (S_ISREG(st.st_mode)) {
    auto sha = StoredSha(dir, path, st);
    if (!sha) return tl::unexpected(sha.error());
    listing.files.push_back(StoredFile{path, st.st_size, std::move(*sha)});
    return listing;
  }
  if (!S_ISDIR(st.st_mode)) {
    return NoSuchFileOrDirectory(task_id, path);
  }
  listing.is_dir = true;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(base, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    const std::string full = it->path().string();
    struct stat fst {};
    if (::lstat(full.c_str(), &fst) != 0 || !S_ISREG(fst.st_mode)) continue;
    const std::string rel = full.substr(data.size() + 1);
    auto sha = StoredSha(dir, rel, fst);
    if (!sha) return tl::unexpected(sha.error());
    listing.files.push_back(StoredFile{rel, fst.st_size, std::move(*sha)});
  }
  if (ec) return os::FileError("cannot list " + base, ec.value());
  std::sort(listing.files.begin(), listing.files.end(),
            [](const StoredFile& a, const StoredFile& b) { return a.path < b.path; });
  return listing;
}

Result<FileChunk> DiskTaskFiles::Read(const std::string& task_id, const std::string& path,
                                      int64_t offset, int64_t length) {
  if (Status ok = ValidateTaskPath(path); !ok) return tl::unexpected(ok.error());
  if (offset < 0 || length < 0) return InvalidArgument("offset and length must be >= 0");
  auto entry = Entry(task_id);
  if (!entry) return tl::unexpected(entry.error());
  Task& t = **entry;
  std::lock_guard lock(t.mu);
  if (t.removed) return NotFound("task '" + task_id + "' not found");
  const std::string dir = TaskDir(task_id);
  const std::string file = dir + "/data/" + path;
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!fd.ok()) {
    if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) {
      return NoSuchFile(task_id, path);
    }
    return os::FileError("cannot read " + file, errno);
  }
  if (::fstat(fd.get(), &st) != 0) return os::FileError("cannot read " + file, errno);
  if (S_ISDIR(st.st_mode)) {
    return ReadOfDirectory(task_id, path);
  }
  if (Status ok = CheckReadOffset(path, offset, st.st_size); !ok) return tl::unexpected(ok.error());
  FileChunk chunk;
  chunk.size = st.st_size;
  chunk.bytes.resize(static_cast<size_t>(std::min(length, st.st_size - offset)));
  size_t done = 0;
  while (done < chunk.bytes.size()) {
    const ssize_t n = ::pread(fd.get(), chunk.bytes.data() + done, chunk.bytes.size() - done,
                              offset + static_cast<int64_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return os::FileError("cannot read " + file, n == 0 ? EIO : errno);
    done += static_cast<size_t>(n);
  }
  auto sha = StoredSha(dir, path, st);
  if (!sha) return tl::unexpected(sha.error());
  chunk.sha256 = std::move(*sha);
  return chunk;
}

Result<int64_t> DiskTaskFiles::Received(const std::string& task_id, const std::string& path) {
  if (Status ok = ValidateTaskPath(path); !ok) return tl::unexpected(ok.error());
  auto entry = Entry(task_id);
  if (!entry) return tl::unexpected(entry.error());
  Task& t = **entry;
  std::lock_guard lock(t.mu);
  if (t.removed) return NotFound("task '" + task_id + "' not found");
  const std::string partial = TaskDir(task_id) + "/partial/" + PathDigest(path);
  struct stat st {};
  if (::lstat(partial.c_str(), &st) != 0) return int64_t{0};
  return static_cast<int64_t>(st.st_size);
}

// ---- writing ----

namespace {

// Whether data/<path> can hold a file: no file where one of its parents is, no directory at it.
Status CheckPlace(const std::string& data, const std::string& task_id, const std::string& path) {
  const std::vector<std::string> parts = SplitTaskPath(path);
  std::string rel;
  for (size_t i = 0; i < parts.size(); ++i) {
    rel += (i == 0 ? "" : "/") + parts[i];
    struct stat st {};
    if (::lstat((data + "/" + rel).c_str(), &st) != 0) return {};
    const bool last = i + 1 == parts.size();
    if (!last && !S_ISDIR(st.st_mode)) return FileBelowFile(task_id, rel, path);
    if (last && S_ISDIR(st.st_mode)) return DirectoryInTheWay(task_id, path);
  }
  return {};
}

// Removes what stands in the way of a sums entry at sums/<path>: files where its parents must be
// directories, a directory where it goes (left behind by a crash between the two renames of a
// commit).
void ClearSumsWay(const std::string& sums, const std::string& path) {
  const std::vector<std::string> parts = SplitTaskPath(path);
  std::string at = sums;
  for (size_t i = 0; i < parts.size(); ++i) {
    at += "/" + parts[i];
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0) return;
    const bool last = i + 1 == parts.size();
    std::error_code ec;
    if (!last && !S_ISDIR(st.st_mode)) return (void)fs::remove(at, ec);
    if (last && S_ISDIR(st.st_mode)) return (void)fs::remove_all(at, ec);
  }
}

}  // namespace

Result<int64_t> DiskTaskFiles::Append(const std::string& task_id, const std::string& path,
                                      int64_t offset, std::string_view bytes,
                                      std::optional<int64_t> size, const StorageQuota& quota) {
  if (Status ok = ValidateTaskPath(path); !ok) return tl::unexpected(ok.error());
  if (offset < 0) return InvalidArgument("offset must be >= 0, got " + std::to_string(offset));
  if (size && *size < 0) return InvalidArgument("size must be >= 0, got " + std::to_string(*size));
  auto entry = Entry(task_id);
  if (!entry) return tl::unexpected(entry.error());
  Task& t = **entry;
  std::lock_guard lock(t.mu);
  if (t.removed) return NotFound("task '" + task_id + "' not found");
  if (Status ok = Own(task_id, quota.project); !ok) return tl::unexpected(ok.error());
  return AppendLocked(t, task_id, path, offset, bytes, size, quota);
}

void DiskTaskFiles::DiscardLocked(Task& t, const std::string& task_id, const std::string& path,
                                  int64_t received) {
  if (::unlink((TaskDir(task_id) + "/partial/" + PathDigest(path)).c_str()) == 0) {
    Charge(task_id, -received);
  }
  t.uploads.erase(path);
}

Result<int64_t> DiskTaskFiles::AppendLocked(Task& t, const std::string& task_id,
                                            const std::string& path, int64_t offset,
                                            std::string_view bytes, std::optional<int64_t> size,
                                            const StorageQuota& quota) {
  const std::string dir = TaskDir(task_id);
  const std::string partial = dir + "/partial/" + PathDigest(path);
  struct stat st {};
  const int64_t received = ::lstat(partial.c_str(), &st) == 0 ? st.st_size : 0;
  const int64_t end = offset + static_cast<int64_t>(bytes.size());
  if (Status ok = CheckUploadChunk(task_id, path, offset, end, received, size); !ok) {
    return tl::unexpected(ok.error());
  }
  // A declared size is checked whole at the first chunk: the upload is refused at its start,
  // not once a limit's worth of it has arrived.
  const int64_t file_bytes = size ? *size : end;
  if (Status ok = CheckFileLimit(path, file_bytes, options_.max_file_bytes); !ok) {
    DiscardLocked(t, task_id, path, received);
    return tl::unexpected(ok.error());
  }
  const Stored usage = Usage(task_id);
  if (const int64_t whole = usage.bytes + file_bytes - received; whole > options_.max_task_bytes) {
    DiscardLocked(t, task_id, path, received);
    return Exhausted("the files of task " + task_id + " would take " + BytesWithMib(whole) +
                     "; the limit is " + BytesWithMib(options_.max_task_bytes) +
                     " per task (files and unfinished uploads together)");
  }
  const std::string data = dir + "/data";
  if (Status ok = CheckPlace(data, task_id, path); !ok) return tl::unexpected(ok.error());
  struct stat target {};
  if (::lstat((data + "/" + path).c_str(), &target) != 0 && usage.files >= options_.max_files) {
    return Exhausted("task " + task_id + " has " + std::to_string(usage.files) +
                     " files; the limit is " + std::to_string(options_.max_files) + " per task");
  }
  for (const std::string& d : {dir, dir + "/partial", dir + "/tmp"}) {
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) {
      return os::FileError("cannot create " + d, errno);
    }
  }
  // The chunk is charged before it is written, the rest of a declared file only checked.
  const int64_t delta = end - received;
  if (int64_t held = 0; !ChargeWithin(task_id, delta, file_bytes - end, quota, &held)) {
    DiscardLocked(t, task_id, path, received);
    return Exhausted("project " + quota.project + "'s files would take " +
                     BytesWithMib(held - received + file_bytes) + "; its storage quota is " +
                     BytesWithMib(quota.max_bytes) +
                     " (max_storage_bytes: the files, outputs and unfinished uploads of its "
                     "tasks and their snapshots together; deleting ended tasks and snapshots "
                     "frees theirs)");
  }
  UniqueFd fd(::open(partial.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.ok()) {
    const int err = errno;
    Charge(task_id, -delta);
    return os::FileError("cannot write " + partial, err);
  }
  Task::Upload& upload = t.uploads[path];
  if (offset == 0) upload = Task::Upload{};
  int err = offset == 0 && received > 0 && ::ftruncate(fd.get(), 0) != 0 ? errno : 0;
  if (err == 0) err = os::WriteAll(fd.get(), bytes, offset);
  if (err != 0) {
    ::ftruncate(fd.get(), offset);  // back to what was received before this chunk
    struct stat now {};
    Charge(task_id, (::fstat(fd.get(), &now) == 0 ? now.st_size : received) - received - delta);
    t.uploads.erase(path);
    return os::FileError("cannot write the upload of " + QuoteTaskPath(path), err);
  }
  if (upload.hashed == offset) {
    upload.hash.Update(bytes);
    upload.hashed = end;
  }
  return end;
}

Result<StoredFile> DiskTaskFiles::Commit(const std::string& task_id, const std::string& path,
                                         int64_t size, const std::string& sha256) {
  if (Status ok = ValidateTaskPath(path); !ok) return tl::unexpected(ok.error());
  if (size < 0) return InvalidArgument("size must be >= 0, got " + std::to_string(size));
  if (!os::IsSha256Hex(sha256)) {
    return InvalidArgument("sha256 must be 64 lower-case hex digits, got '" + sha256 + "'");
  }
  auto entry = Entry(task_id);
  if (!entry) return tl::unexpected(entry.error());
  Task& t = **entry;
  std::lock_guard lock(t.mu);
  if (t.removed) return NotFound("task '" + task_id + "' not found");
  const std::string dir = TaskDir(task_id);
  const std::string data = dir + "/data";
  const std::string partial = dir + "/partial/" + PathDigest(path);
  struct stat st {};
  if (::lstat(partial.c_str(), &st) != 0) {
    if (size > 0) return NoUploadInProgress(task_id, path);
    // An empty file needs no bytes: an empty upload.
    if (auto made = AppendLocked(t, task_id, path, 0, {}, int64_t{0}, StorageQuota{}); !made) {
      return tl::unexpected(made.error());
    }
    st = {};
  }
  if (Status ok = CheckUploadComplete(task_id, path, st.st_size, size); !ok) {
    return tl::unexpected(ok.error());
  }
  if (Status ok = CheckPlace(data, task_id, path); !ok) return tl::unexpected(ok.error());
  struct stat old {};
  const bool replaces = ::lstat((data + "/" + path).c_str(), &old) == 0;
  if (const int64_t files = Usage(task_id).files; !replaces && files >= options_.max_files) {
    return Exhausted("task " + task_id + " has " + std::to_string(files) + " files; the limit is " +
                     std::to_string(options_.max_files) + " per task");
  }

  UniqueFd fd(::open(partial.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.ok() || ::fstat(fd.get(), &st) != 0)
    return os::FileError("cannot read " + partial, errno);
  std::string actual;
  if (auto u = t.uploads.find(path); u != t.uploads.end() && u->second.hashed == size) {
    actual = u->second.hash.HexDigest();
  } else {
    os::Sha256 h;
    if (const int err = h.UpdateFromFile(fd.get(), 0, size); err != 0) {
      return os::FileError("cannot read " + partial, err);
    }
    actual = h.HexDigest();
  }
  if (actual != sha256) {
    ::unlink(partial.c_str());
    Charge(task_id, -size);
    t.uploads.erase(path);
    return UploadHashMismatch(path, size, sha256, actual);
  }

  // The file must be on the disk before a name points at it; then its hash, then the name.
  const std::string sums = dir + "/sums";
  const std::string parent = Parent(path);
  std::error_code ec;
  ClearSumsWay(sums, path);
  fs::create_directories(Join(data, parent), ec);
  if (!ec) fs::create_directories(Join(sums, parent), ec);
  if (ec)
    return os::FileError("cannot create the directories of " + QuoteTaskPath(path), ec.value());
  if (::fsync(fd.get()) != 0) return os::FileError("cannot sync " + partial, errno);
  if (Status recorded = os::WriteFileAtomically(sums + "/" + path, SumsLine(sha256, st),
                                                {.temp_dir = dir + "/tmp"});
      !recorded) {
    return MakeError(recorded.error().code, "cannot record the hash of " + QuoteTaskPath(path) +
                                                ": " + recorded.error().message);
  }
  if (::rename(partial.c_str(), (data + "/" + path).c_str()) != 0) {
    return os::FileError("cannot move " + QuoteTaskPath(path) + " into place", errno);
  }
  Charge(task_id, replaces ? -old.st_size : 0, replaces ? 0 : 1);
  t.uploads.erase(path);
  if (const int err = os::SyncDirectory(Join(data, parent)); err != 0) {
    return os::FileError("cannot sync the directory of " + QuoteTaskPath(path), err);
  }
  return StoredFile{path, size, sha256};
}

// ---- removal ----

void DiskTaskFiles::Remove(const std::string& task_id) {
  if (!ValidTaskId(task_id)) return;
  std::shared_ptr<Task> t;
  {
    std::lock_guard lock(mu_);
    if (auto it = tasks_.find(task_id); it != tasks_.end()) {
      t = std::move(it->second);
      tasks_.erase(it);
    }
  }
  std::unique_lock<std::mutex> task_lock;
  if (t != nullptr) {
    task_lock = std::unique_lock(t->mu);
    t->removed = true;
  }
  std::lock_guard lock(mu_);
  if (auto it = stored_.find(task_id); it != stored_.end()) {
    project_bytes_[it->second.project] -= it->second.bytes;
    stored_.erase(it);
  }
  // A name an earlier process may still have in trash/ is skipped.
  std::string to;
  do {
    to = root_ + "/trash/" + task_id + "." + std::to_string(++trash_seq_);
  } while (::rename(TaskDir(task_id).c_str(), to.c_str()) != 0 &&
           (errno == EEXIST || errno == ENOTEMPTY));
  if (!fs::exists(to)) return;  // no files (or the disk failed: the next start's sweep)
  trash_.push_back(to);
  cv_.notify_all();
}

void DiskTaskFiles::Forget(const std::string& task_id) {
  std::lock_guard lock(mu_);
  // Entry hands out the pointer under mu_: one held nowhere else has no call in progress.
  if (auto it = tasks_.find(task_id); it != tasks_.end() && it->second.use_count() == 1) {
    tasks_.erase(it);
  }
}

int DiskTaskFiles::Sweep(const std::function<bool(const std::string& task_id)>& exists) {
  std::vector<std::string> ids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_ + "/tasks", ec)) {
    ids.push_back(entry.path().filename().string());
  }
  int removed = 0;
  for (const std::string& id : ids) {
    if (exists(id)) continue;
    Remove(id);
    ++removed;
  }
  return removed;
}

int DiskTaskFiles::ExpireUploads(int64_t before_unix_ms) {
  std::vector<std::string> ids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_ + "/tasks", ec)) {
    ids.push_back(entry.path().filename().string());
  }
  int expired = 0;
  for (const std::string& id : ids) {
    const std::string partial_dir = TaskDir(id) + "/partial";
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(partial_dir, ec)) {
      names.push_back(entry.path().filename().string());
    }
    if (names.empty()) continue;  // most tasks: no unfinished upload
    bool known = false;
    {
      std::lock_guard lock(mu_);
      known = tasks_.count(id) > 0;
    }
    auto entry = Entry(id);
    if (!entry) continue;
    {
      Task& t = **entry;
      std::lock_guard lock(t.mu);
      for (const std::string& name : names) {
        if (t.removed) break;
        const std::string partial = partial_dir + "/" + name;
        struct stat st {};
        if (::lstat(partial.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (MtimeNs(st) / 1'000'000 >= before_unix_ms) continue;
        if (::unlink(partial.c_str()) != 0) continue;
        ++expired;
        Charge(id, -st.st_size);
        std::erase_if(t.uploads, [&](const auto& u) { return PathDigest(u.first) == name; });
      }
    }
    entry->reset();
    if (!known) Forget(id);  // leaves the memory of the tasks in use as it was
  }
  return expired;
}

void DiskTaskFiles::JanitorLoop() {
  using Clock = std::chrono::steady_clock;
  const int64_t expiry = options_.upload_expiry_ms;
  const auto every = std::chrono::milliseconds(std::clamp<int64_t>(expiry / 8, 1'000, 60'000));
  Clock::time_point next_expiry = Clock::now() + every;
  std::unique_lock lock(mu_);
  while (true) {
    const auto work = [&] { return stop_ || !trash_.empty(); };
    if (expiry > 0) {
      cv_.wait_until(lock, next_expiry, work);
    } else {
      cv_.wait(lock, work);
    }
    if (stop_) return;
    if (expiry > 0 && Clock::now() >= next_expiry) {
      lock.unlock();
      const int64_t now_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count();
      ExpireUploads(now_unix_ms - expiry);
      lock.lock();
      next_expiry = Clock::now() + every;
      continue;
    }
    if (trash_.empty()) continue;
    const std::string dir = trash_.front();
    lock.unlock();
    std::error_code ec;
    fs::remove_all(dir, ec);
    lock.lock();
    trash_.pop_front();
    cv_.notify_all();
  }
}

void DiskTaskFiles::WaitForDeletions() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return stop_ || trash_.empty(); });
}

}  // namespace gpupool::server
