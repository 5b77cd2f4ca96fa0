// A private Docker daemon for the docker-labelled tests: dockerd (Debian's docker.io) with its own
// data root, exec root, pidfile, socket and containers' cgroup parent, no iptables and no bridge,
// so that it leaves the host alone; ready once /_ping answers. Plus the test image, built from a
// static busybox through POST /build with a tar the test writes itself (no registry needed).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "core/result.h"

namespace gpupool::testing {

// A ustar archive in memory (core/tar.h headers).
class TarWriter {
 public:
  void AddDirectory(const std::string& name, unsigned mode = 0755);
  void AddFile(const std::string& name, const std::string& data, unsigned mode = 0644);
  void AddSymlink(const std::string& name, const std::string& target);
  // The archive: the entries, then two zero blocks.
  std::string Finish() const;

 private:
  void Add(const std::string& name, char type, const std::string& data, unsigned mode,
           const std::string& link);
  std::string out_;
};

class Dockerd {
 public:
  // Starts the daemon and waits until it answers; nullptr with *why_not when it cannot start
  // (not installed, not root, or it exits or stays silent: its log's end is quoted).
  static std::unique_ptr<Dockerd> Start(std::string* why_not);
  // SIGTERM (SIGKILL if it lingers), then its directory is unmounted and removed.
  ~Dockerd();
  Dockerd(const Dockerd&) = delete;
  Dockerd& operator=(const Dockerd&) = delete;

  const std::string& socket() const { return socket_; }

  // Builds `tag`: FROM scratch, a static busybox at /bin/busybox with links for the usual
  // applets (/bin/sh, sleep, cat, tail, …), /tmp, CMD echo "default command".
  Status BuildTestImage(const std::string& tag) const;

 private:
  Dockerd() = default;
  std::string dir_;
  std::string socket_;
  std::string cgroup_parent_;  // of its containers: its own, removed with it
  pid_t pid_ = -1;
  int pidfd_ = -1;
};

}  // namespace gpupool::testing
