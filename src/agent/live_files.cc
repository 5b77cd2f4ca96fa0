// A running task's files on its node (see live_files.h): each path opened from the workspace's
// top one component at a time, never through a link; uploads staged in the agent's directory and
// renamed into the workspace at their commit.
#include "agent/live_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "agent/workspace_sync.h"
#include "core/file_rules.h"
#include "core/task_path.h"
#include "core/unique_fd.h"
#include "os/files.h"
#include "os/sha256.h"
#include "proto/json_codec.h"

namespace gpupool::agent {
namespace {

// A request's line of JSON, and a request's whole size (an append's chunk besides).
constexpr size_t kMaxRequestLine = 64 * 1024;
constexpr size_t kMaxRequest = kMaxRequestLine + proto::kFileChunkBytes;

tl::unexpected<Error> LinkRefused(const std::string& task, const std::string& rel) {
  return MakeError(ErrorCode::kFailedPrecondition,
                   QuoteTaskPath(rel) + " in the workspace of task " + task +
                       " is a symbolic link; links are not followed");
}

// The workspace's top, and who owns it (the task's uid).
struct Top {
  UniqueFd fd;
  uid_t uid = 0;
  gid_t gid = 0;
};

Result<Top> OpenTop(const std::string& workspace) {
  Top top;
  top.fd = UniqueFd(::open(workspace.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!top.fd.ok() || ::fstat(top.fd.get(), &st) != 0) {
    return os::FileError("cannot open the workspace " + workspace, errno);
  }
  top.uid = st.st_uid;
  top.gid = st.st_gid;
  return top;
}

// The directory holding the last component of `parts`, opened from the top one component at a
// time. Missing or non-directory components are `missing`'s error, unless `create`: then
// missing ones are made (0755, given to the workspace's owner) and a file in the way is
// FileBelowFile.
Result<UniqueFd> OpenParent(const Top& top, const std::string& task, const std::string& path,
                            const std::vector<std::string>& parts, bool create,
                            const std::function<tl::unexpected<Error>()>& missing) {
  UniqueFd at(::dup(top.fd.get()));
  std::string rel;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    rel += (i == 0 ? "" : "/") + parts[i];
    struct stat st {};
    if (::fstatat(at.get(), parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT || !create) return missing();
      if (::mkdirat(at.get(), parts[i].c_str(), 0755) != 0 && errno != EEXIST) {
        return os::FileError("cannot create " + QuoteTaskPath(rel), errno);
      }
      UniqueFd made(
          ::openat(at.get(), parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!made.ok()) return os::FileError("cannot open " + QuoteTaskPath(rel), errno);
      // The owner's, as if the task had made it (a non-root agent's tasks are its own).
      static_cast<void>(::fchown(made.get(), top.uid, top.gid));
      static_cast<void>(::fchmod(made.get(), 0755));
      at = std::move(made);
      continue;
    }
    if (S_ISLNK(st.st_mode)) return LinkRefused(task, rel);
    if (!S_ISDIR(st.st_mode)) return create ? FileBelowFile(task, rel, path) : missing();
    UniqueFd sub(
        ::openat(at.get(), parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub.ok()) {
      if (errno == ELOOP) return LinkRefused(task, rel);  // made a link since the fstatat
      return os::FileError("cannot open " + QuoteTaskPath(rel), errno);
    }
    at = std::move(sub);
  }
  return at;
}

// A regular file of the workspace's owner, open for reading, and its stat.
struct OpenFile {
  UniqueFd fd;
  struct stat st {};
};

// Opens the regular file `leaf` of `dir` (at `path`) for reading: a link, a directory, a special
// file and a file not of the owner are refused; nothing there is `missing`'s error.
Result<OpenFile> OpenRegular(int dir, const std::string& leaf, const Top& top,
                             const std::string& task, const std::string& path,
                             const std::function<tl::unexpected<Error>()>& missing) {
  struct stat st {};
  if (::fstatat(dir, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return missing();
  if (S_ISLNK(st.st_mode)) return LinkRefused(task, path);
  if (S_ISDIR(st.st_mode)) return ReadOfDirectory(task, path);
  if (!S_ISREG(st.st_mode)) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     QuoteTaskPath(path) + " of task " + task + " is not a regular file");
  }
  if (st.st_uid != top.uid) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     QuoteTaskPath(path) + " of task " + task + " is owned by uid " +
                         std::to_string(st.st_uid) + ", not the task's; it is not served");
  }
  OpenFile f;
  // O_NONBLOCK: had it become a FIFO since the fstatat, the open must not hang.
  f.fd = UniqueFd(::openat(dir, leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!f.fd.ok() || ::fstat(f.fd.get(), &f.st) != 0) {
    return os::FileError("cannot read " + QuoteTaskPath(path), errno);
  }
  if (!S_ISREG(f.st.st_mode) || f.st.st_ino != st.st_ino || f.st.st_dev != st.st_dev) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     QuoteTaskPath(path) + " of task " + task + " changed while it was opened");
  }
  return f;
}

int64_t Nanos(const struct timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

std::string StagedName(const std::string& path) { return os::Sha256Hex(path); }

// The agent's directory of unfinished uploads, created when missing.
Result<UniqueFd> OpenUploads(const LiveWorkspace& where) {
  if (::mkdir(where.uploads.c_str(), 0700) != 0 && errno != EEXIST) {
    return os::FileError("cannot create " + where.uploads, errno);
  }
  UniqueFd fd(::open(where.uploads.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.ok()) return os::FileError("cannot open " + where.uploads, errno);
  return fd;
}

// Copies `from` into a new file `name` of `dir` (a rename across file systems).
Status CopyInto(int from, int64_t size, int dir, const std::string& name, const Top& top,
                const std::string& path) {
  UniqueFd to(
      ::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!to.ok()) return os::FileError("cannot write " + QuoteTaskPath(path), errno);
  loff_t in = 0;
  while (in < size) {
    const ssize_t n =
        ::copy_file_range(from, &in, to.get(), nullptr, static_cast<size_t>(size - in), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n == 0 ? EIO : errno;
      ::unlinkat(dir, name.c_str(), 0);
      return os::FileError("cannot write " + QuoteTaskPath(path), err);
    }
  }
  static_cast<void>(::fchown(to.get(), top.uid, top.gid));
  static_cast<void>(::fchmod(to.get(), 0644));
  return {};
}

}  // namespace

std::string VolumeUploadsDir(const std::string& volume_dir) { return volume_dir + ".uploads"; }

Result<proto::LiveFileReply> LiveFiles::Serve(const std::string& task,
                                              const proto::LiveFileRequest& request,
                                              std::string_view body, std::string* bytes) {
  Result<LiveWorkspace> where = locate_(task);
  if (!where) return tl::unexpected(where.error());
  // A path in a volume is the volume's, as the task sees it (its mount point in the workspace is
  // an empty directory that the mount hides): served from the volume's directory, its kept
  // hashes and upload lock apart from the workspace's.
  for (const LiveMount& m : where->mounts) {
    if (request.path != m.path && !request.path.starts_with(m.path + "/")) continue;
    const bool writes = request.op == "append" || request.op == "commit";
    if (writes && m.read_only) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "task " + task + " mounts " + m.name + " read-only at " +
                           QuoteTaskPath(m.path) + ": nothing can be uploaded into it");
    }
    proto::LiveFileRequest inside = request;
    inside.path = request.path.size() > m.path.size() ? request.path.substr(m.path.size() + 1)
                                                      : std::string();
    LiveWorkspace volume{m.dir, VolumeUploadsDir(m.dir), {}};
    const std::string key = task + "/" + m.id;
    Result<proto::LiveFileReply> reply = ServeIn(key, volume, inside, body, bytes);
    if (!reply) {
      // Its messages name the task and the path as the user knows them.
      std::string message = reply.error().message;
      auto replace = [&](const std::string& from, const std::string& to) {
        for (size_t at = message.find(from); at != std::string::npos;
             at = message.find(from, at + to.size())) {
          message.replace(at, from.size(), to);
        }
      };
      replace("task " + key, "task " + task);
      if (!inside.path.empty()) replace(QuoteTaskPath(inside.path), QuoteTaskPath(request.path));
      return MakeError(reply.error().code, message);
    }
    if (request.op == "list") {
      for (proto::FileEntry& f : reply->files) f.path = m.path + "/" + f.path;
    }
    return reply;
  }
  return ServeIn(task, *where, request, body, bytes);
}

Result<proto::LiveFileReply> LiveFiles::ServeIn(const std::string& task, const LiveWorkspace& where,
                                                const proto::LiveFileRequest& request,
                                                std::string_view body, std::string* bytes) {
  if (request.op == "list") {
    if (!request.path.empty()) {
      if (Status ok = ValidateTaskPath(request.path); !ok) return tl::unexpected(ok.error());
    }
    return List(task, where, request.path);
  }
  if (Status ok = ValidateTaskPath(request.path); !ok) return tl::unexpected(ok.error());
  if (request.op == "read") return Read(task, where, request, bytes);
  if (request.op == "status") return Received(where, request.path);
  if (request.op == "append") return Append(task, where, request, body);
  if (request.op == "commit") return Commit(task, where, request);
  return InvalidArgument("op '" + request.op +
                         "' is not one of list, read, status, append, commit");
}

Status LiveFiles::RunsHere(const std::string& task) {
  Result<LiveWorkspace> where = locate_(task);
  if (!where) return tl::unexpected(where.error());
  return {};
}

void LiveFiles::Forget(const std::string& task) {
  std::lock_guard lock(mu_);
  // The task's own, and those of the volumes it mounts ("<task>/<volume>").
  auto its = [&](const auto& entry) {
    return entry.first == task || entry.first.starts_with(task + "/");
  };
  std::erase_if(hashes_, its);
  std::erase_if(upload_locks_, its);
}

LiveFiles::Identity LiveFiles::Identity::Of(const struct stat& st) {
  return {st.st_dev, st.st_ino, st.st_size, Nanos(st.st_mtim), Nanos(st.st_ctim)};
}

std::string LiveFiles::KeptHash(const std::string& task, const std::string& path,
                                const Identity& now) {
  std::lock_guard lock(mu_);
  const auto t = hashes_.find(task);
  if (t == hashes_.end()) return "";
  const auto it = t->second.find(path);
  if (it == t->second.end() || !(it->second.identity == now)) return "";
  return it->second.sha256;
}

void LiveFiles::Keep(const std::string& task, const std::string& path, const Identity& identity,
                     std::string sha256) {
  // A task's files are few (the server's limit is 100,000); past that the oldest go wholesale.
  constexpr size_t kMaxKept = 100'000;
  std::lock_guard lock(mu_);
  auto& kept = hashes_[task];
  if (kept.size() >= kMaxKept) kept.clear();
  kept[path] = Hashed{identity, std::move(sha256)};
}

Result<std::string> LiveFiles::HashOf(const std::string& task, const std::string& path, int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return os::FileError("cannot read " + QuoteTaskPath(path), errno);
  const Identity before = Identity::Of(st);
  if (std::string kept = KeptHash(task, path, before); !kept.empty()) return kept;
  Result<std::string> sha = os::Sha256OfFile(fd);
  if (!sha) return sha;
  // Kept only when the file did not change while it was hashed.
  if (::fstat(fd, &st) == 0 && Identity::Of(st) == before) Keep(task, path, before, *sha);
  return sha;
}

std::shared_ptr<std::mutex> LiveFiles::UploadLock(const std::string& task) {
  std::lock_guard lock(mu_);
  auto& m = upload_locks_[task];
  if (!m) m = std::make_shared<std::mutex>();
  return m;
}

Result<proto::LiveFileReply> LiveFiles::List(const std::string& task, const LiveWorkspace& where,
                                             const std::string& path) {
  Result<Top> top = OpenTop(where.workspace);
  if (!top) return tl::unexpected(top.error());
  proto::LiveFileReply reply;
  std::vector<std::string> skipped;  // a listing shows what can be downloaded
  const WorkspaceVisitor visit = [&](const std::string& rel, int fd, int64_t size) -> Status {
    Result<std::string> sha = HashOf(task, rel, fd);
    if (!sha) return tl::unexpected(sha.error());
    reply.files.push_back({rel, size, std::move(*sha)});
    return {};
  };
  if (path.empty()) {
    reply.type = "dir";
    if (Status ok = WalkWorkspaceDir(top->fd.get(), "", top->uid, visit, &skipped); !ok) {
      return tl::unexpected(ok.error());
    }
    return reply;
  }
  const auto missing = [&] { return NoSuchFileOrDirectory(task, path); };
  const std::vector<std::string> parts = SplitTaskPath(path);
  Result<UniqueFd> parent = OpenParent(*top, task, path, parts, /*create=*/false, missing);
  if (!parent) return tl::unexpected(parent.error());
  struct stat st {};
  if (::fstatat(parent->get(), parts.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return missing();
  }
  if (S_ISDIR(st.st_mode)) {
    UniqueFd dir(::openat(parent->get(), parts.back().c_str(),
                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dir.ok()) return os::FileError("cannot open " + QuoteTaskPath(path), errno);
    reply.type = "dir";
    if (Status ok = WalkWorkspaceDir(dir.get(), path, top->uid, visit, &skipped); !ok) {
      return tl::unexpected(ok.error());
    }
    return reply;
  }
  Result<OpenFile> file = OpenRegular(parent->get(), parts.back(), *top, task, path, missing);
  if (!file) return tl::unexpected(file.error());
  reply.type = "file";
  if (Status ok = visit(path, file->fd.get(), file->st.st_size); !ok) {
    return tl::unexpected(ok.error());
  }
  return reply;
}

Result<proto::LiveFileReply> LiveFiles::Read(const std::string& task, const LiveWorkspace& where,
                                             const proto::LiveFileRequest& request,
                                             std::string* bytes) {
  const std::string& path = request.path;
  Result<Top> top = OpenTop(where.workspace);
  if (!top) return tl::unexpected(top.error());
  const auto missing = [&] { return NoSuchFile(task, path); };
  const std::vector<std::string> parts = SplitTaskPath(path);
  Result<UniqueFd> parent = OpenParent(*top, task, path, parts, /*create=*/false, missing);
  if (!parent) return tl::unexpected(parent.error());
  Result<OpenFile> file = OpenRegular(parent->get(), parts.back(), *top, task, path, missing);
  if (!file) return tl::unexpected(file.error());
  const int64_t size = file->st.st_size;
  if (Status ok = CheckReadOffset(path, request.offset, size); !ok) {
    return tl::unexpected(ok.error());
  }
  const int64_t length = request.length > 0 ? request.length : proto::kFileChunkBytes;
  bytes->resize(static_cast<size_t>(std::min(length, size - request.offset)));
  size_t done = 0;
  while (done < bytes->size()) {
    const ssize_t n = ::pread(file->fd.get(), bytes->data() + done, bytes->size() - done,
                              request.offset + static_cast<int64_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return os::FileError("cannot read " + QuoteTaskPath(path), errno);
    if (n == 0) break;  // it shrank meanwhile: what there is
    done += static_cast<size_t>(n);
  }
  bytes->resize(done);
  proto::LiveFileReply reply;
  reply.size = size;
  reply.sha256 = KeptHash(task, path, Identity::Of(file->st));
  return reply;
}

Result<proto::LiveFileReply> LiveFiles::Received(const LiveWorkspace& where,
                                                 const std::string& path) {
  proto::LiveFileReply reply;
  struct stat st {};
  const std::string staged = where.uploads + "/" + StagedName(path);
  if (::lstat(staged.c_str(), &st) == 0) reply.received = st.st_size;
  return reply;
}

Result<proto::LiveFileReply> LiveFiles::Append(const std::string& task, const LiveWorkspace& where,
                                               const proto::LiveFileRequest& request,
                                               std::string_view body) {
  const std::string& path = request.path;
  const std::shared_ptr<std::mutex> upload_lock = UploadLock(task);
  std::lock_guard lock(*upload_lock);
  Result<UniqueFd> uploads = OpenUploads(where);
  if (!uploads) return tl::unexpected(uploads.error());
  const std::string name = StagedName(path);
  struct stat st {};
  const int64_t received =
      ::fstatat(uploads->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_size : 0;
  const int64_t end = request.offset + static_cast<int64_t>(body.size());
  if (Status ok = CheckUploadChunk(task, path, request.offset, end, received, request.size); !ok) {
    return tl::unexpected(ok.error());
  }
  if (request.max_file_bytes > 0) {
    if (Status ok = CheckFileLimit(path, request.size.value_or(end), request.max_file_bytes); !ok) {
      ::unlinkat(uploads->get(), name.c_str(), 0);  // it could never be committed
      return tl::unexpected(ok.error());
    }
  }
  UniqueFd fd(
      ::openat(uploads->get(), name.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.ok()) return os::FileError("cannot write the upload of " + QuoteTaskPath(path), errno);
  int err = request.offset == 0 && ::ftruncate(fd.get(), 0) != 0 ? errno : 0;
  if (err == 0) err = os::WriteAll(fd.get(), body, request.offset);
  if (err != 0) {
    static_cast<void>(::ftruncate(fd.get(), request.offset));  // as before this chunk
    return os::FileError(
        "cannot write the upload of " + QuoteTaskPath(path) + " on the task's node", err);
  }
  proto::LiveFileReply reply;
  reply.received = end;
  return reply;
}

Result<proto::LiveFileReply> LiveFiles::Commit(const std::string& task, const LiveWorkspace& where,
                                               const proto::LiveFileRequest& request) {
  const std::string& path = request.path;
  const int64_t size = request.size.value_or(0);
  if (!os::IsSha256Hex(request.sha256)) {
    return InvalidArgument("sha256 must be 64 lower-case hex digits, got '" + request.sha256 + "'");
  }
  const std::shared_ptr<std::mutex> upload_lock = UploadLock(task);
  std::lock_guard lock(*upload_lock);
  Result<UniqueFd> uploads = OpenUploads(where);
  if (!uploads) return tl::unexpected(uploads.error());
  const std::string name = StagedName(path);
  int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC;
  if (size == 0) flags |= O_CREAT;  // an empty file needs no bytes
  UniqueFd staged(::openat(uploads->get(), name.c_str(), flags, 0600));
  if (!staged.ok()) {
    if (errno == ENOENT) return NoUploadInProgress(task, path);
    return os::FileError("cannot read the upload of " + QuoteTaskPath(path), errno);
  }
  struct stat st {};
  if (::fstat(staged.get(), &st) != 0) {
    return os::FileError("cannot read the upload of " + QuoteTaskPath(path), errno);
  }
  if (Status ok = CheckUploadComplete(task, path, st.st_size, size); !ok) {
    return tl::unexpected(ok.error());
  }
  os::Sha256 h;
  if (const int err = h.UpdateFromFile(staged.get(), 0, size); err != 0) {
    return os::FileError("cannot read the upload of " + QuoteTaskPath(path), err);
  }
  const std::string actual = h.HexDigest();
  if (actual != request.sha256) {
    ::unlinkat(uploads->get(), name.c_str(), 0);
    return UploadHashMismatch(path, size, request.sha256, actual);
  }

  Result<Top> top = OpenTop(where.workspace);
  if (!top) return tl::unexpected(top.error());
  const std::vector<std::string> parts = SplitTaskPath(path);
  Result<UniqueFd> parent =
      OpenParent(*top, task, path, parts, /*create=*/true, [&] { return NoSuchFile(task, path); });
  if (!parent) return tl::unexpected(parent.error());
  const std::string& leaf = parts.back();
  struct stat old {};
  if (::fstatat(parent->get(), leaf.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISDIR(old.st_mode)) {
    return DirectoryInTheWay(task, path);
  }
  // The task's file, as if it had written it; then it takes the name (replacing a file or a
  // link there, never following one).
  static_cast<void>(::fchown(staged.get(), top->uid, top->gid));
  static_cast<void>(::fchmod(staged.get(), 0644));
  if (::renameat(uploads->get(), name.c_str(), parent->get(), leaf.c_str()) != 0) {
    if (errno != EXDEV)
      return os::FileError("cannot move " + QuoteTaskPath(path) + " into place", errno);
    // The workspace is on another file system: a copy beside the name, then the rename.
    const std::string temp = ".gpupool-upload-" + name.substr(0, 16);
    ::unlinkat(parent->get(), temp.c_str(), 0);
    if (Status ok = CopyInto(staged.get(), size, parent->get(), temp, *top, path); !ok) {
      return tl::unexpected(ok.error());
    }
    if (::renameat(parent->get(), temp.c_str(), parent->get(), leaf.c_str()) != 0) {
      const int err = errno;
      ::unlinkat(parent->get(), temp.c_str(), 0);
      return os::FileError("cannot move " + QuoteTaskPath(path) + " into place", err);
    }
    ::unlinkat(uploads->get(), name.c_str(), 0);
  } else if (::fstat(staged.get(), &st) == 0) {
    Keep(task, path, Identity::Of(st), actual);
  }
  proto::LiveFileReply reply;
  reply.size = size;
  reply.sha256 = actual;
  return reply;
}

namespace {

// A whole request as the server wrote it (its line of JSON, then an append's bytes), served.
Result<proto::LiveFileReply> ServeMessage(LiveFiles& files, const std::string& task,
                                          std::string_view message, std::string* bytes) {
  const size_t line_end = message.find('\n');
  if (line_end == std::string_view::npos || line_end > kMaxRequestLine) {
    return InvalidArgument("a files request without its line");
  }
  Result<proto::LiveFileRequest> request =
      proto::DecodeBody<proto::LiveFileRequest>(message.substr(0, line_end), true);
  if (!request) return tl::unexpected(request.error());
  return files.Serve(task, *request, message.substr(line_end + 1), bytes);
}

}  // namespace

TunnelHandler LiveFilesHandler(std::shared_ptr<LiveFiles> files) {
  auto in_flight = std::make_shared<std::atomic<int>>(0);
  return [files = std::move(files), in_flight](const proto::TunnelOpen& open,
                                               std::shared_ptr<api::tunnel::Stream> stream) {
    if (Status here = files->RunsHere(open.task); !here) {
      return stream->Refuse(here.error().message);
    }
    stream->Accept();
    auto request = std::make_shared<std::string>();
    api::tunnel::StreamHandlers h;
    std::weak_ptr<api::tunnel::Stream> weak = stream;
    h.on_data = [request, weak](std::string bytes) {
      const auto s = weak.lock();
      if (!s) return;
      if (request->size() + bytes.size() > kMaxRequest) {
        return s->Reset("a files request over " + std::to_string(kMaxRequest) + " bytes");
      }
      *request += bytes;
      s->Consumed(bytes.size());
    };
    h.on_end = [files, in_flight, request, weak, task = open.task] {
      const auto s = weak.lock();
      if (!s) return;
      const auto answer = [s](const Result<proto::LiveFileReply>& reply, std::string bytes) {
        proto::LiveFileReply out;
        if (reply) {
          out = *reply;
        } else {
          out.code = std::string(ErrorCodeName(reply.error().code));
          out.message = reply.error().message;
          bytes.clear();
        }
        s->Write(proto::Dump(proto::Encode(out)) + "\n" + bytes);
        s->End();
      };
      if (in_flight->fetch_add(1) >= kMaxLiveFileCalls) {
        in_flight->fetch_sub(1);
        return answer(MakeError(ErrorCode::kUnavailable, "the node serves " +
                                                             std::to_string(kMaxLiveFileCalls) +
                                                             " file requests at once; try again"),
                      "");
      }
      std::thread([files, in_flight, request, task, answer] {
        std::string bytes;
        Result<proto::LiveFileReply> reply = ServeMessage(*files, task, *request, &bytes);
        answer(reply, std::move(bytes));
        in_flight->fetch_sub(1);
      }).detach();
    };
    h.on_reset = [](std::string) {};
    stream->SetHandlers(std::move(h));
  };
}

}  // namespace gpupool::agent
