// `gpupool cp SOURCE DESTINATION`: files and directories between this machine and a task's files
// (docs/api.md "Task files": the server's copy, or a running task's workspace on its node), one
// side written ID:PATH. Uploads continue where an interrupted one stopped and are committed with
// their SHA-256; downloads are verified against the listed SHA-256 before they take their name.
// Nothing lands outside the destination: task paths are checked on both sides, and local
// symbolic links are not followed into a directory. `gpupool sync` copies only the files that
// differ between a local directory and a task's (either way), so that running it again after an
// interruption or a change sends only what is left. `gpupool ls-files ID [PATH]` lists them.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/file_transfer.h"
#include "cli/commands.h"
#include "cli/commands_common.h"
#include "cli/copy_paths.h"
#include "cli/format.h"
#include "cli/output.h"
#include "cli/transfer.h"
#include "core/task_path.h"
#include "core/unique_fd.h"
#include "os/sha256.h"

namespace gpupool::cli {
namespace {

namespace fs = std::filesystem;

struct CpState {
  std::string source;
  std::string destination;
  CommonFlags common;
};

std::string Remote(const std::string& task_id, const std::string& path) {
  return task_id + ":" + path;
}

int PrintSummary(const std::string& task_id, bool upload, const std::vector<MovedFile>& moved,
                 const std::vector<std::string>& skipped, const std::string& where, bool json) {
  int64_t bytes = 0;
  for (const MovedFile& m : moved) bytes += m.size;
  if (json) {
    CopyOutput out{.task = task_id,
                   .direction = upload ? "upload" : "download",
                   .files = {},
                   .bytes = bytes,
                   .skipped = skipped};
    for (const MovedFile& m : moved) {
      out.files.push_back({.path = m.remote,
                           .local = m.local,
                           .size = m.size,
                           .sha256 = m.sha256,
                           .resumed_from = upload ? std::optional(m.resumed_from) : std::nullopt});
    }
    PrintJson(proto::Encode(out));
    return kExitOk;
  }
  for (const std::string& s : skipped) std::cerr << "gpupool: skipped " << s << "\n";
  std::cout << (upload ? "uploaded " : "downloaded ") << moved.size() << " file(s) ("
            << FormatBytes(bytes) << ") to " << where << "\n";
  return kExitOk;
}

// ---- upload ----

int Upload(Session& session, const std::string& local, const CopyEnd& to, bool json) {
  struct stat st {};
  if (::stat(local.c_str(), &st) != 0) return Failure(local + ": " + std::strerror(errno));
  // Into the destination when it is a directory (or the task's root), else as the destination.
  bool into = to.path.empty();
  if (!into) {
    auto existing = api::ListTaskFiles(session.client(), to.task_id, to.path);
    if (existing) {
      into = existing->type == "dir";
      if (S_ISDIR(st.st_mode) && !into) {
        return Failure(Remote(to.task_id, to.path) +
                       " is a file; a directory cannot be copied onto it");
      }
    } else if (existing.error().code != ErrorCode::kNotFound) {
      return ApiFailure(existing.error());
    }
  }
  std::string base = to.path;
  if (into) {
    Result<std::string> name = LocalName(local);
    if (!name) return UsageError(name.error().message);
    base = JoinTaskPath(to.path, *name);
  }
  // Every file and its task path, all checked before anything is sent.
  Result<UploadPlan> plan = PlanUpload(local, base);
  if (!plan) return Failure(plan.error().message);
  std::string failed;
  Result<std::vector<MovedFile>> moved = SendUpload(session.client(), to.task_id, *plan, &failed);
  if (!moved) return ApiFailure(moved.error());
  for (const MovedFile& m : *moved) {
    if (m.resumed_from > 0 && !json) {
      std::cerr << "gpupool: " << Remote(to.task_id, m.remote) << ": resumed after "
                << FormatBytes(m.resumed_from) << " the server already had\n";
    }
  }
  return PrintSummary(to.task_id, /*upload=*/true, *moved, plan->skipped, Remote(to.task_id, base),
                      json);
}

// ---- download ----

// Downloads `file` to `target` through a temporary file that takes the name once verified.
Status DownloadTo(Session& session, const std::string& task_id, const proto::FileEntry& file,
                  const std::string& target) {
  std::error_code ec;
  fs::create_directories(fs::path(target).parent_path(), ec);
  if (ec) {
    return MakeError(ErrorCode::kInternal,
                     "cannot create the directory of " + target + ": " + ec.message());
  }
  const std::string part = target + ".gpupool-part";
  Status done;
  {
    UniqueFd fd(::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd.ok()) return MakeError(ErrorCode::kInternal, part + ": " + std::strerror(errno));
    Progress progress(Remote(task_id, file.path), file.size);
    done = api::DownloadTaskFile(session.client(), task_id, file, fd.get(), progress.Callback());
  }
  if (done && ::rename(part.c_str(), target.c_str()) != 0) {
    done = MakeError(ErrorCode::kInternal,
                     "cannot rename " + part + " to " + target + ": " + std::strerror(errno));
  }
  if (!done) ::unlink(part.c_str());
  return done;
}

int Download(Session& session, const CopyEnd& from, const std::string& local, bool json) {
  auto listing = api::ListTaskFiles(session.client(), from.task_id, from.path);
  if (!listing) return ApiFailure(listing.error());
  const bool is_dir = listing->type == "dir";
  std::error_code ec;
  const bool local_dir = fs::is_directory(local, ec);
  // A file goes into an existing local directory, or becomes `local`; a directory becomes
  // `local`, or goes into it when it exists (the task's root: its files go straight in).
  std::string dest = local;
  if (local_dir && !from.path.empty()) {
    dest = (fs::path(local) / RelativeToListed(from.path, false, from.path)).string();
  }
  if (is_dir && fs::exists(dest, ec) && !fs::is_directory(dest, ec)) {
    return Failure(dest + " is a file; a directory cannot be copied onto it");
  }
  if (is_dir) {
    fs::create_directories(dest, ec);
    if (ec) return Failure("cannot create " + dest + ": " + ec.message());
  }
  std::vector<MovedFile> moved;
  for (const proto::FileEntry& file : listing->files) {
    // The listing's paths are valid task paths below from.path (ListTaskFiles checks), so the
    // relative part has no '..' and cannot leave `dest`.
    const std::string target =
        is_dir ? (fs::path(dest) / RelativeToListed(from.path, true, file.path)).string() : dest;
    if (Status ok = DownloadTo(session, from.task_id, file, target); !ok) {
      return ApiFailure(ok.error());
    }
    moved.push_back({file.path, target, file.size, file.sha256, 0});
  }
  return PrintSummary(from.task_id, /*upload=*/false, moved, {}, dest, json);
}

// ---- sync ----

struct SyncState {
  std::string source;
  std::string destination;
  bool dry_run = false;
  CommonFlags common;
};

Result<std::string> LocalSha256(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.ok()) return MakeError(ErrorCode::kInternal, path + ": " + std::strerror(errno));
  return os::Sha256OfFile(fd.get());
}

// A local directory's files: their side of a sync, and where each is (empty when `dir` does not
// exist yet).
struct LocalFiles {
  SyncSide side;
  std::map<std::string, std::string> paths;  // by relative path
  std::vector<std::string> skipped;
};

Result<LocalFiles> ListLocal(const std::string& dir) {
  LocalFiles out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  if (!fs::is_directory(dir, ec)) {
    return InvalidArgument(dir + " is not a directory: sync copies a directory's files");
  }
  Result<UploadPlan> plan = PlanUpload(dir, "");  // paths relative to `dir`
  if (!plan) return tl::unexpected(plan.error());
  for (const auto& [path, rel] : plan->files) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      return MakeError(ErrorCode::kInternal, path + ": " + std::strerror(errno));
    }
    out.side[rel] = {st.st_size, ""};
    out.paths[rel] = path;
  }
  out.skipped = std::move(plan->skipped);
  return out;
}

// A task directory's files by path relative to it; `missing_ok`: none when it does not exist.
Result<std::map<std::string, proto::FileEntry>> ListRemote(Session& session, const CopyEnd& end,
                                                           bool missing_ok) {
  std::map<std::string, proto::FileEntry> out;
  auto listing = api::ListTaskFiles(session.client(), end.task_id, end.path);
  if (!listing) {
    if (missing_ok && listing.error().code == ErrorCode::kNotFound) return out;
    return tl::unexpected(listing.error());
  }
  if (listing->type != "dir") {
    return InvalidArgument(Remote(end.task_id, end.path) +
                           " is a file: sync copies a directory's files");
  }
  for (proto::FileEntry& file : listing->files) {
    out.emplace(RelativeToListed(end.path, true, file.path), std::move(file));
  }
  return out;
}

int SyncSummary(const std::string& task_id, bool upload, const std::vector<MovedFile>& moved,
                size_t compared, const std::vector<std::string>& skipped, const std::string& where,
                bool json) {
  if (json) return PrintSummary(task_id, upload, moved, skipped, where, json);
  for (const std::string& s : skipped) std::cerr << "gpupool: skipped " << s << "\n";
  int64_t bytes = 0;
  for (const MovedFile& m : moved) bytes += m.size;
  std::cout << (upload ? "sent " : "fetched ") << moved.size() << " file(s) (" << FormatBytes(bytes)
            << ") to " << where << "; " << compared - moved.size() << " unchanged\n";
  return kExitOk;
}

int SyncUp(Session& session, const std::string& local, const CopyEnd& to, const SyncState& f) {
  std::error_code ec;
  if (!fs::is_directory(local, ec)) {
    return UsageError(local +
                      " is not a directory: sync copies a directory's files (cp copies one)");
  }
  Result<LocalFiles> mine = ListLocal(local);
  if (!mine) return Failure(mine.error().message);
  auto theirs = ListRemote(session, to, /*missing_ok=*/true);
  if (!theirs) return ApiFailure(theirs.error());
  SyncSide remote;
  for (const auto& [rel, file] : *theirs) remote[rel] = {file.size, file.sha256};
  Result<std::vector<std::string>> differ = SyncDifferences(
      mine->side, remote, [&](const std::string& rel) { return LocalSha256(mine->paths.at(rel)); },
      [](const std::string& rel) -> Result<std::string> {
        return MakeError(ErrorCode::kInternal, "the server listed no SHA-256 for " + rel);
      });
  if (!differ) return Failure(differ.error().message);
  UploadPlan send;
  for (const std::string& rel : *differ) {
    send.files.emplace_back(mine->paths.at(rel), JoinTaskPath(to.path, rel));
  }
  if (f.dry_run) {
    for (const auto& [path, remote_path] : send.files) {
      std::cout << "would send " << path << " → " << Remote(to.task_id, remote_path) << "\n";
    }
    std::cout << send.files.size() << " of " << mine->side.size() << " file(s) differ\n";
    return kExitOk;
  }
  std::string failed;
  Result<std::vector<MovedFile>> moved = SendUpload(session.client(), to.task_id, send, &failed);
  if (!moved) return ApiFailure(moved.error());
  return SyncSummary(to.task_id, /*upload=*/true, *moved, mine->side.size(), mine->skipped,
                     Remote(to.task_id, to.path), f.common.json);
}

int SyncDown(Session& session, const CopyEnd& from, const std::string& local, const SyncState& f) {
  auto theirs = ListRemote(session, from, /*missing_ok=*/false);
  if (!theirs) return ApiFailure(theirs.error());
  Result<LocalFiles> mine = ListLocal(local);
  if (!mine) return Failure(mine.error().message);
  SyncSide remote;
  for (const auto& [rel, file] : *theirs) remote[rel] = {file.size, file.sha256};
  Result<std::vector<std::string>> differ = SyncDifferences(
      remote, mine->side,
      [](const std::string& rel) -> Result<std::string> {
        return MakeError(ErrorCode::kInternal, "the server listed no SHA-256 for " + rel);
      },
      [&](const std::string& rel) { return LocalSha256(mine->paths.at(rel)); });
  if (!differ) return Failure(differ.error().message);
  std::vector<MovedFile> moved;
  for (const std::string& rel : *differ) {
    // The listing's paths are valid task paths below from.path (ListTaskFiles checks), so `rel`
    // has no '..' and cannot leave `local`.
    const std::string target = (fs::path(local) / rel).string();
    const proto::FileEntry& file = theirs->at(rel);
    if (f.dry_run) {
      std::cout << "would fetch " << Remote(from.task_id, file.path) << " → " << target << "\n";
      continue;
    }
    if (Status ok = DownloadTo(session, from.task_id, file, target); !ok) {
      return ApiFailure(ok.error());
    }
    moved.push_back({file.path, target, file.size, file.sha256, 0});
  }
  if (f.dry_run) {
    std::cout << differ->size() << " of " << theirs->size() << " file(s) differ\n";
    return kExitOk;
  }
  return SyncSummary(from.task_id, /*upload=*/false, moved, theirs->size(), {}, local,
                     f.common.json);
}

int RunSync(const SyncState& f) {
  Result<CopyEnds> ends = ParseCopyEnds(f.source, f.destination);
  if (!ends) return UsageError(ends.error().message);
  const auto& [source, destination] = *ends;
  return WithSession(f.common, [&](Session& session) {
    return source.remote ? SyncDown(session, source, destination.path, f)
                         : SyncUp(session, source.path, destination, f);
  });
}

struct LsFilesState {
  std::string task;
  std::string path;
  CommonFlags common;
};

int RunLsFiles(const LsFilesState& f) {
  Result<std::string> id = ParseTaskId(f.task);
  if (!id) return UsageError(id.error().message);
  Result<std::string> path = TaskPathFromUser(f.path);
  if (!path) return UsageError(path.error().message);
  return WithSession(f.common, [&](Session& session) {
    auto listing = api::ListTaskFiles(session.client(), *id, *path);
    if (!listing) return ApiFailure(listing.error());
    if (f.common.json) {
      PrintJson(proto::Encode(*listing));
      return kExitOk;
    }
    Table table({"SIZE", "SHA256", "PATH"});
    table.AlignRight(0);
    int64_t bytes = 0;
    for (const proto::FileEntry& file : listing->files) {
      table.AddRow({FormatBytes(file.size), file.sha256.substr(0, 12), EscapeControls(file.path)});
      bytes += file.size;
    }
    if (table.rows() > 0) std::cout << table.Render();
    std::cout << listing->files.size() << " file(s), " << FormatBytes(bytes) << "\n";
    return kExitOk;
  });
}

int RunCp(const CpState& f) {
  Result<CopyEnds> ends = ParseCopyEnds(f.source, f.destination);
  if (!ends) return UsageError(ends.error().message);
  const auto& [source, destination] = *ends;
  return WithSession(f.common, [&](Session& session) {
    return source.remote ? Download(session, source, destination.path, f.common.json)
                         : Upload(session, source.path, destination, f.common.json);
  });
}

}  // namespace

void AddFileCommands(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<CpState>();
  CLI::App* cmd = app.add_subcommand(
      "cp",
      "Copy files and directories to or from a task (a running task's workspace included): "
      "gpupool cp ./data t-4:data, gpupool cp t-4:out ./out");
  cmd->add_option("source", f->source, "A local path, or ID:PATH of a task's file or directory")
      ->required()
      ->type_name("SOURCE");
  cmd->add_option("destination", f->destination, "ID:PATH when SOURCE is local, else a local path")
      ->required()
      ->type_name("DESTINATION");
  AddCommonFlags(cmd, &f->common);
  OnRun(cmd, exit_code, [f] { return RunCp(*f); });

  auto sync = std::make_shared<SyncState>();
  cmd = app.add_subcommand(
      "sync",
      "Make a directory's files on one side match the other's, sending only the files that "
      "differ (missing, another size or another SHA-256): gpupool sync ./data t-4:data, "
      "gpupool sync t-4:out ./out. Run it again after an interruption or a change; files only "
      "the destination has are kept");
  cmd->add_option("source", sync->source, "A local directory, or ID:PATH of a task's directory")
      ->required()
      ->type_name("SOURCE");
  cmd->add_option("destination", sync->destination,
                  "ID:PATH when SOURCE is local, else a local directory")
      ->required()
      ->type_name("DESTINATION");
  cmd->add_flag("--dry-run", sync->dry_run, "Only say which files would be sent");
  AddCommonFlags(cmd, &sync->common);
  OnRun(cmd, exit_code, [sync] { return RunSync(*sync); });

  auto ls = std::make_shared<LsFilesState>();
  cmd = app.add_subcommand("ls-files",
                           "List a task's files with their sizes and SHA-256: a running task's "
                           "workspace on its node, else the files the server keeps for it");
  cmd->add_option("task", ls->task, "The task")->required()->type_name("ID");
  cmd->add_option("path", ls->path, "A file or directory of it (default: all)")->type_name("PATH");
  AddCommonFlags(cmd, &ls->common);
  OnRun(cmd, exit_code, [ls] { return RunLsFiles(*ls); });
}

}  // namespace gpupool::cli
