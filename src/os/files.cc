// Durable atomic file writes and the default data directory (see files.h).
#include "os/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/unique_fd.h"

namespace gpupool::os {
namespace {

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

ErrorCode ErrorCodeOfErrno(int err) {
  return err == ENOSPC || err == EDQUOT ? ErrorCode::kInsufficientStorage : ErrorCode::kInternal;
}

tl::unexpected<Error> FileError(const std::string& what, int err) {
  return MakeError(ErrorCodeOfErrno(err), what + ": " + std::strerror(err));
}

Result<int64_t> FreeBytes(const std::string& path) {
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0) {
    return MakeError(ErrorCode::kInternal,
                     "cannot read the free space of " + path + ": " + std::strerror(errno));
  }
  return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
}

int WriteAll(int fd, std::string_view data, int64_t offset) {
  while (!data.empty()) {
    const ssize_t n = offset < 0 ? ::write(fd, data.data(), data.size())
                                 : ::pwrite(fd, data.data(), data.size(), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    data.remove_prefix(static_cast<size_t>(n));
    if (offset >= 0) offset += n;
  }
  return 0;
}

int SyncDirectory(const std::string& dir) {
  UniqueFd fd(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.ok()) return errno;
  if (::fsync(fd.get()) != 0) return errno;
  return 0;
}

Status WriteFileAtomically(const std::string& path, std::string_view data,
                           const AtomicWrite& options) {
  const auto fail = [&path](const std::string& step, int err) {
    const ErrorCode code = err == EEXIST ? ErrorCode::kAlreadyExists : ErrorCodeOfErrno(err);
    return MakeError(code, "cannot write " + path + ": " + step + ": " + std::strerror(err));
  };
  const std::string dir = options.temp_dir.empty() ? DirectoryOf(path) : options.temp_dir;
  // Hidden, and short enough for NAME_MAX whatever the length of the name it stands in for.
  std::string temp = dir + "/." + BaseName(path).substr(0, 64) + ".tmp-XXXXXX";
  UniqueFd fd(::mkostemp(temp.data(), O_CLOEXEC));
  if (!fd.ok()) return fail("cannot create a temporary file in " + dir, errno);
  // From here a failure removes the temporary file; `path` is not touched until it is complete.
  const auto discard = [&](const std::string& step, int err) {
    ::unlink(temp.c_str());
    return fail(step, err);
  };
  if (::fchmod(fd.get(), options.mode) != 0) return discard("cannot set its mode", errno);
  if (const int err = WriteAll(fd.get(), data); err != 0) return discard("cannot write it", err);
  if (::fsync(fd.get()) != 0) return discard("cannot fsync it", errno);
  if (!fd.Close()) return discard("cannot close it", errno);
  if (options.replace) {
    if (::rename(temp.c_str(), path.c_str()) != 0) return discard("cannot rename it", errno);
  } else {
    // link(2) never replaces: EEXIST when the name is taken. The new name then has the data.
    if (::link(temp.c_str(), path.c_str()) != 0) return discard("cannot link it", errno);
    ::unlink(temp.c_str());
  }
  if (const int err = SyncDirectory(DirectoryOf(path)); err != 0) {
    return fail("cannot fsync its directory", err);
  }
  return {};
}

std::string DefaultDataDir(std::string_view name) {
  if (::geteuid() == 0) return "/var/lib/" + std::string(name);
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && *home != '\0' ? home : ".") + "/.local/share/" +
         std::string(name);
}

}  // namespace gpupool::os
