// `gpupool cp`'s path arithmetic (see copy_paths.h).
#include "cli/copy_paths.h"

#include <filesystem>

#include "cli/format.h"
#include "core/task_path.h"

namespace gpupool::cli {

Result<CopyEnd> ParseCopyEnd(const std::string& arg, std::string_view which) {
  if (arg.empty()) return InvalidArgument(std::string(which) + " must not be empty");
  CopyEnd end;
  const size_t colon = arg.find(':');
  if (colon == std::string::npos || !CheckIdentifier("task id", arg.substr(0, colon))) {
    end.path = arg;
    return end;
  }
  end.remote = true;
  Result<std::string> id = ParseTaskId(arg.substr(0, colon));  // "42:out" is t-42's out
  if (!id) return tl::unexpected(id.error());
  end.task_id = std::move(*id);
  // "t-1:/root/out" and "t-1:out" are the same: the workspace is the task's /root.
  Result<std::string> path =
      TaskPathFromUser(arg.substr(colon + 1), std::string(which) + " " + end.task_id + ": path");
  if (!path) return tl::unexpected(path.error());
  end.path = std::move(*path);
  return end;
}

Result<std::string> LocalName(const std::string& local) {
  const std::filesystem::path p = std::filesystem::absolute(local).lexically_normal();
  std::string name = p.filename().string();
  if (name.empty()) name = p.parent_path().filename().string();  // "dir/" normalises to "dir/"
  if (name.empty()) return InvalidArgument("'" + local + "' has no name to copy it under");
  if (Status ok = ValidateTaskPath(name, "the name of '" + local + "'"); !ok) {
    return tl::unexpected(ok.error());
  }
  return name;
}

Result<CopyEnds> ParseCopyEnds(const std::string& source, const std::string& destination) {
  Result<CopyEnd> from = ParseCopyEnd(source, "source");
  if (!from) return tl::unexpected(from.error());
  Result<CopyEnd> to = ParseCopyEnd(destination, "destination");
  if (!to) return tl::unexpected(to.error());
  if (from->remote == to->remote) {
    return InvalidArgument(from->remote
                               ? "source and destination are both tasks' files; one must be local"
                               : "neither source nor destination names a task's files (ID:PATH)");
  }
  return CopyEnds{std::move(*from), std::move(*to)};
}

std::string JoinTaskPath(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

std::string RelativeToListed(const std::string& base, bool base_is_dir, const std::string& path) {
  if (!base_is_dir) return path.substr(path.rfind('/') + 1);
  return base.empty() ? path : path.substr(base.size() + 1);
}

Result<std::vector<std::string>> SyncDifferences(const SyncSide& from, const SyncSide& to,
                                                 const Sha256Of& from_sha, const Sha256Of& to_sha) {
  std::vector<std::string> out;
  for (const auto& [rel, mine] : from) {
    const auto theirs = to.find(rel);
    if (theirs == to.end() || theirs->second.size != mine.size) {
      out.push_back(rel);
      continue;
    }
    Result<std::string> a = mine.sha256.empty() ? from_sha(rel) : Result<std::string>(mine.sha256);
    if (!a) return tl::unexpected(a.error());
    Result<std::string> b =
        theirs->second.sha256.empty() ? to_sha(rel) : Result<std::string>(theirs->second.sha256);
    if (!b) return tl::unexpected(b.error());
    if (*a != *b) out.push_back(rel);
  }
  return out;
}

}  // namespace gpupool::cli
