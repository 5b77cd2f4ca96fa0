// Fetching a task's input files before launch and saving its outputs after its end (see
// workspace_sync.h), over api/file_transfer with descriptors opened relative to directories
// this code holds open, one component at a time and never through a symbolic link.
#include "agent/workspace_sync.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

#include "api/file_transfer.h"
#include "core/task_path.h"
#include "core/unique_fd.h"
#include "os/sha256.h"

namespace gpupool::agent {
namespace {

namespace fs = std::filesystem;

constexpr size_t kNoteEntries = 5;  // skipped files named in a task's reason

tl::unexpected<Error> LocalError(const std::string& what, int err) {
  return MakeError(ErrorCode::kInternal, what + ": " + std::strerror(err));
}

std::string Bytes(int64_t bytes) { return std::to_string(bytes) + " bytes"; }

// ---- inputs ----

// Opens (creating it when missing) the directory `name` below `parent`, never following a link.
Result<UniqueFd> OpenSubdir(int parent, const std::string& name, const std::string& rel) {
  if (::mkdirat(parent, name.c_str(), 0755) != 0 && errno != EEXIST) {
    return LocalError("cannot create " + rel, errno);
  }
  UniqueFd fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.ok() || ::fchmod(fd.get(), 0755) != 0) return LocalError("cannot open " + rel, errno);
  return fd;
}

// ---- outputs ----

// The walk of WalkWorkspace.
struct Walk {
  const WorkspaceVisitor& visit;
  uid_t owner;
  std::vector<std::string>& skipped;

  void Skip(const std::string& rel, const std::string& why) {
    skipped.push_back(QuoteTaskPath(rel) + ": " + why);
  }

  // Everything below the open directory `dir` (whose path is `rel`, "" at the top).
  Status Dir(int dir, const std::string& rel) {
    std::vector<std::string> names;
    {
      const int copy = ::dup(dir);
      DIR* d = copy >= 0 ? ::fdopendir(copy) : nullptr;
      if (d == nullptr) {
        if (copy >= 0) ::close(copy);
        return LocalError("cannot list " + (rel.empty() ? "the workspace" : rel), errno);
      }
      while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") names.push_back(name);
      }
      ::closedir(d);
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      const std::string child = rel.empty() ? name : rel + "/" + name;
      struct stat st {};
      if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone
      if (S_ISLNK(st.st_mode)) {
        Skip(child, "a symbolic link (not followed)");
        continue;
      }
      if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        Skip(child, "not a regular file");
        continue;
      }
      if (Status ok = ValidateTaskPath(child, "the name"); !ok) {
        skipped.push_back(ok.error().message);  // names it
        continue;
      }
      if (S_ISDIR(st.st_mode)) {
        UniqueFd sub(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!sub.ok()) {
          Skip(child, std::string("cannot open: ") + std::strerror(errno));
          continue;
        }
        if (Status ok = Dir(sub.get(), child); !ok) return ok;
        continue;
      }
      if (st.st_uid != owner) {
        Skip(child, "owned by uid " + std::to_string(st.st_uid) + ", not the task's");
        continue;
      }
      // O_NONBLOCK: had it become a FIFO since the fstatat, the open must not hang.
      UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      struct stat now {};
      if (!fd.ok() || ::fstat(fd.get(), &now) != 0 || !S_ISREG(now.st_mode) ||
          now.st_ino != st.st_ino || now.st_dev != st.st_dev) {
        Skip(child, "changed while it was read");
        continue;
      }
      if (Status ok = visit(child, fd.get(), now.st_size); !ok) return ok;
    }
    return {};
  }
};

}  // namespace

Result<FetchedInputs> FetchTaskInputs(api::Client& client, const std::string& task_id,
                                      const std::string& staging_root,
                                      const std::function<bool()>& cancelled) {
  auto listing = api::ListTaskFiles(client, task_id, "");
  if (!listing) return tl::unexpected(listing.error());
  const std::string dir = staging_root + "/" + task_id;
  std::error_code ec;
  fs::remove_all(dir, ec);  // an earlier fetch's leftovers (links are not followed)
  if (ec) return LocalError("cannot clear " + dir, ec.value());
  FetchedInputs fetched;
  if (listing->files.empty()) return fetched;
  if (::mkdir(staging_root.c_str(), 0700) != 0 && errno != EEXIST) {
    return LocalError("cannot create " + staging_root, errno);
  }
  if (::mkdir(dir.c_str(), 0700) != 0) return LocalError("cannot create " + dir, errno);
  UniqueFd top(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!top.ok()) return LocalError("cannot open " + dir, errno);
  for (const proto::FileEntry& file : listing->files) {
    // The listing's paths passed the task path rules: relative, no '.' or '..' components.
    const std::vector<std::string> parts = SplitTaskPath(file.path);
    UniqueFd at(::dup(top.get()));
    std::string rel;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      rel += (i == 0 ? "" : "/") + parts[i];
      auto sub = OpenSubdir(at.get(), parts[i], rel);
      if (!sub) return tl::unexpected(sub.error());
      at = std::move(*sub);
    }
    UniqueFd out(::openat(at.get(), parts.back().c_str(),
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!out.ok() || ::fchmod(out.get(), 0644) != 0) {
      return LocalError("cannot create " + file.path, errno);
    }
    if (Status ok = api::DownloadTaskFile(client, task_id, file, out.get(),
                                          [&](int64_t, int64_t) { return !cancelled(); });
        !ok) {
      return tl::unexpected(ok.error());
    }
    ++fetched.files;
    fetched.bytes += file.size;
  }
  fetched.dir = dir;
  return fetched;
}

Status WalkWorkspace(const std::string& workspace, const WorkspaceVisitor& visit,
                     std::vector<std::string>* skipped) {
  UniqueFd top(::open(workspace.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!top.ok() || ::fstat(top.get(), &st) != 0) {
    return LocalError("cannot open the workspace " + workspace, errno);
  }
  return WalkWorkspaceDir(top.get(), "", st.st_uid, visit, skipped);
}

Status WalkWorkspaceDir(int dir, const std::string& rel, uid_t owner,
                        const WorkspaceVisitor& visit, std::vector<std::string>* skipped) {
  Walk walk{visit, owner, *skipped};
  return walk.Dir(dir, rel);
}

Result<SavedOutputs> SaveTaskOutputs(api::Client& client, const std::string& task_id,
                                     const std::string& workspace, const std::string& node,
                                     const std::function<bool()>& cancelled) {
  auto listing = api::ListTaskFiles(client, task_id, "", node);
  if (!listing) return tl::unexpected(listing.error());
  std::map<std::string, std::string> kept;  // what the server has: path → SHA-256
  for (const proto::FileEntry& f : listing->files) kept[f.path] = f.sha256;
  SavedOutputs saved;
  const auto skip = [&](const std::string& rel, const std::string& why) {
    saved.skipped.push_back(QuoteTaskPath(rel) + ": " + why);
  };
  const WorkspaceVisitor upload = [&](const std::string& rel, int fd, int64_t size) -> Status {
    if (cancelled()) return MakeError(ErrorCode::kUnavailable, "saving outputs: cancelled");
    if (listing->max_file_bytes > 0 && size > listing->max_file_bytes) {
      skip(rel, Bytes(size) + ", over the server's limit of " + Bytes(listing->max_file_bytes) +
                    " per file");
      return {};
    }
    auto sha = os::Sha256OfFile(fd);
    if (!sha) return tl::unexpected(sha.error());
    if (const auto it = kept.find(rel); it != kept.end() && it->second == *sha) {
      ++saved.unchanged;
      return {};
    }
    auto uploaded = api::UploadTaskFile(client, task_id, rel, fd, node,
                                        [&](int64_t, int64_t) { return !cancelled(); });
    if (!uploaded) {
      if (uploaded.error().code != ErrorCode::kResourceExhausted) {
        return tl::unexpected(uploaded.error());
      }
      skip(rel, uploaded.error().message);
      return {};
    }
    ++saved.uploaded;
    saved.bytes += uploaded->file.size;
    return {};
  };
  if (Status ok = WalkWorkspace(workspace, upload, &saved.skipped); !ok) {
    return tl::unexpected(ok.error());
  }
  std::sort(saved.skipped.begin(), saved.skipped.end());
  return saved;
}

std::string DescribeOutputs(const SavedOutputs& saved) {
  std::string text = std::to_string(saved.uploaded) + " file(s) saved (" + Bytes(saved.bytes) +
                     "), " + std::to_string(saved.unchanged) + " unchanged";
  if (saved.skipped.empty()) return text;
  text += "; not saved:";
  for (const std::string& s : saved.skipped) text += " " + s + ";";
  text.pop_back();
  return text;
}

std::string OutputsNote(const SavedOutputs& saved) {
  if (saved.skipped.empty()) return "";
  std::string note = "; outputs not saved:";
  for (size_t i = 0; i < saved.skipped.size() && i < kNoteEntries; ++i) {
    note += (i == 0 ? " " : ", ") + saved.skipped[i];
  }
  if (saved.skipped.size() > kNoteEntries) {
    note += " and " + std::to_string(saved.skipped.size() - kNoteEntries) + " more";
  }
  return note;
}

}  // namespace gpupool::agent
