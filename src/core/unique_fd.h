// UniqueFd: sole ownership of a POSIX file descriptor, closed when the owner goes (like
// std::unique_ptr for memory). It does no I/O of its own — whoever opened the descriptor reads and
// writes it — so core may hold it; close(2) is its only system call.
#pragma once

#include <unistd.h>

#include <utility>

namespace gpupool {

class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  // Closes now and says whether close(2) succeeded: it may carry a delayed write error, which a
  // durable write must not ignore.
  bool Close() { return ::close(std::exchange(fd_, -1)) == 0; }

 private:
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_;
};

}  // namespace gpupool
