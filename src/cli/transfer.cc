// Moving files between this machine and a task's files: the upload shared by `gpupool cp` and
// `gpupool submit --input` (see transfer.h).
#include "cli/transfer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli/copy_paths.h"
#include "cli/format.h"
#include "core/task_path.h"

namespace gpupool::cli {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kProgressBytes = 8 << 20;  // files this large show progress on a terminal

}  // namespace

Progress::Progress(std::string name, int64_t total)
    : name_(std::move(name)),
      on_((total < 0 || total >= kProgressBytes) && ::isatty(STDERR_FILENO)) {}

Progress::~Progress() {
  if (on_ && shown_) std::cerr << "\n";
}

void Progress::Show(int64_t done, int64_t total) {
  const auto now = std::chrono::steady_clock::now();
  if (!on_ || (shown_ && done < total && now - last_ < std::chrono::milliseconds(100))) return;
  last_ = now;
  shown_ = true;
  std::cerr << "\r" << name_ << "  " << (total > 0 ? done * 100 / total : 100) << "%  "
            << FormatBytes(done) << " / " << FormatBytes(total) << std::flush;
}

api::TransferProgress Progress::Callback() {
  return [this](int64_t done, int64_t total) {
    Show(done, total);
    return true;
  };
}

Result<UploadPlan> PlanUpload(const std::string& local, const std::string& base) {
  struct stat st {};
  if (::stat(local.c_str(), &st) != 0) {
    return MakeError(ErrorCode::kNotFound, local + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    return InvalidArgument(local + " is neither a file nor a directory");
  }
  UploadPlan plan;
  if (S_ISREG(st.st_mode)) {
    plan.files.emplace_back(local, base);
    return plan;
  }
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(local, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    const fs::file_status status = it->symlink_status();
    if (fs::is_directory(status)) continue;
    const std::string path = it->path().string();
    if (fs::is_symlink(status)) {
      plan.skipped.push_back(path + ": a symbolic link (not followed)");
    } else if (!fs::is_regular_file(status)) {
      plan.skipped.push_back(path + ": not a regular file");
    } else {
      plan.files.emplace_back(
          path, JoinTaskPath(base, it->path().lexically_relative(local).generic_string()));
      if (Status ok = ValidateTaskPath(plan.files.back().second, "task path"); !ok) {
        return InvalidArgument(path + " cannot be copied: " + ok.error().message);
      }
    }
  }
  if (ec) return MakeError(ErrorCode::kInternal, "cannot list " + local + ": " + ec.message());
  std::sort(plan.files.begin(), plan.files.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  return plan;
}

Result<std::vector<MovedFile>> SendUpload(api::Client& client, const std::string& task_id,
                                          const UploadPlan& plan, std::string* failed_local) {
  std::vector<MovedFile> moved;
  for (const auto& [path, remote] : plan.files) {
    *failed_local = path;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.ok()) return MakeError(ErrorCode::kInternal, path + ": " + std::strerror(errno));
    struct stat st {};
    ::fstat(fd.get(), &st);
    Progress progress(task_id + ":" + remote, st.st_size);
    auto up = api::UploadTaskFile(client, task_id, remote, fd.get(), "", progress.Callback());
    if (!up) return tl::unexpected(up.error());
    moved.push_back({remote, path, up->file.size, up->file.sha256, up->resumed_from});
  }
  failed_local->clear();
  return moved;
}

}  // namespace gpupool::cli
