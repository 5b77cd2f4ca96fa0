#include "agent/programs.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "agent/runtime/linux_proc.h"
#include "core/unique_fd.h"

namespace gpupool::agent {

std::string FindProgram(const std::string& name) {
  std::string dirs = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  dirs += ":/usr/sbin:/usr/bin:/sbin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = dirs.substr(start, end - start);
    start = end + 1;
    if (dir.empty()) continue;
    const std::string path = dir + "/" + name;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

std::string ReadToEnd(int fd) {
  std::string text;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof buffer)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0 && text.size() < 64 * 1024) text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

Result<std::string> RunTool(const std::vector<std::string>& argv) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0)
    return MakeError(ErrorCode::kInternal, "pipe2: " + ErrnoText(errno));
  UniqueFd read_end(out[0]);
  UniqueFd write_end(out[1]);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return MakeError(ErrorCode::kInternal, "fork: " + ErrnoText(errno));
  if (pid == 0) {
    dup2(write_end.get(), 1);
    dup2(write_end.get(), 2);
    execv(args[0], args.data());
    _exit(127);
  }
  write_end = UniqueFd();
  const std::string text = ReadToEnd(read_end.get());
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return MakeError(ErrorCode::kInternal, argv[0] + " failed: " + text);
  }
  return text;
}

}  // namespace gpupool::agent
