// A running task's files on its node (docs/api.md "Task files", "The tunnel"): the tunnel's
// `files` streams. While a task runs, the server hands its file calls (a listing, a chunk read,
// an upload's status, chunk and commit) to its node's agent, which serves them from the task's
// workspace with the rules the server's own copy follows (core/file_rules.h): the same task paths,
// per-file limit, resumable chunked uploads committed with their SHA-256 and moved into place
// atomically. Nothing here follows a symbolic link the task made: every path is opened one
// component at a time from the workspace's top with O_NOFOLLOW, only regular files owned by the
// workspace's owner (the task's uid) are listed or read (workspace_sync.h's walk), and what an
// upload creates is given to that owner. Unfinished uploads wait in a directory of the agent's
// beside the workspace, which the task does not see. A path in a volume the task mounts is
// served from the volume's directory, as the task sees it (docs/volumes.md); a read-only one
// takes no upload.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "agent/tunnel_agent.h"
#include "core/result.h"
#include "proto/files.h"

namespace gpupool::agent {

// A volume a running task mounts: where in its workspace, and where its files are on this host.
struct LiveMount {
  std::string id;    // the volume's (v-<seq>) or the dataset's (d-<seq>)
  std::string name;  // what it is, for messages: "volume data", "dataset imagenet"
  std::string path;  // the task path of its mount point ("data" for /root/data)
  std::string dir;   // its directory here
  bool read_only = false;
};

// Where a running task's files are on this host.
struct LiveWorkspace {
  std::string workspace;  // the task's workspace
  std::string uploads;    // the agent's directory for its unfinished uploads (created 0700 when
                          // missing), on the workspace's file system
  std::vector<LiveMount> mounts{};  // its volumes
};

// The agent's directory for the unfinished uploads into a volume: beside the volume's, on its
// file system.
std::string VolumeUploadsDir(const std::string& volume_dir);
// The workspace of a task that runs here; an error (kNotFound: it does not run here) otherwise.
using WorkspaceLocator = std::function<Result<LiveWorkspace>(const std::string& task)>;

class LiveFiles {
 public:
  explicit LiveFiles(WorkspaceLocator locate) : locate_(std::move(locate)) {}

  // One request on the files of `task`: `body` is an append's bytes; a read's bytes go to
  // `*bytes`. Errors as the server's copy of a task's files gives them (server/task_files.h).
  Result<proto::LiveFileReply> Serve(const std::string& task, const proto::LiveFileRequest& request,
                                     std::string_view body, std::string* bytes);

  // Whether the task runs here (the locator's error otherwise).
  Status RunsHere(const std::string& task);

  // The task ended: the hashes kept of its files go.
  void Forget(const std::string& task);

 private:
  // What a file's SHA-256 was computed for: the same inode, size and times mean the same bytes.
  struct Identity {
    dev_t dev = 0;
    ino_t ino = 0;
    int64_t size = 0;
    int64_t mtime_ns = 0;
    int64_t ctime_ns = 0;
    friend bool operator==(const Identity&, const Identity&) = default;
    static Identity Of(const struct stat& st);
  };
  struct Hashed {
    Identity identity;
    std::string sha256;
  };

  // Serve within `where`: `task` keys the hashes kept and the upload lock (the task's, or
  // "<task>/<volume>" for one of its volumes).
  Result<proto::LiveFileReply> ServeIn(const std::string& task, const LiveWorkspace& where,
                                       const proto::LiveFileRequest& request, std::string_view body,
                                       std::string* bytes);
  // The SHA-256 of the open file `fd` at `path`: kept, or computed and kept.
  Result<std::string> HashOf(const std::string& task, const std::string& path, int fd);
  // The SHA-256 kept of `path` as `now` identifies it, or "".
  std::string KeptHash(const std::string& task, const std::string& path, const Identity& now);
  void Keep(const std::string& task, const std::string& path, const Identity& identity,
            std::string sha256);
  // The lock of `task`'s uploads.
  std::shared_ptr<std::mutex> UploadLock(const std::string& task);

  Result<proto::LiveFileReply> List(const std::string& task, const LiveWorkspace& where,
                                    const std::string& path);
  Result<proto::LiveFileReply> Read(const std::string& task, const LiveWorkspace& where,
                                    const proto::LiveFileRequest& request, std::string* bytes);
  Result<proto::LiveFileReply> Received(const LiveWorkspace& where, const std::string& path);
  Result<proto::LiveFileReply> Append(const std::string& task, const LiveWorkspace& where,
                                      const proto::LiveFileRequest& request, std::string_view body);
  Result<proto::LiveFileReply> Commit(const std::string& task, const LiveWorkspace& where,
                                      const proto::LiveFileRequest& request);

  const WorkspaceLocator locate_;
  std::mutex mu_;
  std::map<std::string, std::map<std::string, Hashed>> hashes_;  // task → path →
  std::map<std::string, std::shared_ptr<std::mutex>> upload_locks_;
};

// The tunnel handler of kind `files`: a task that does not run here is refused (the locator's
// reason); otherwise the request is read up to the server's END, served on a thread of its own
// (at most kMaxLiveFileCalls at once; past that the answer is kUnavailable) and answered.
inline constexpr int kMaxLiveFileCalls = 16;
TunnelHandler LiveFilesHandler(std::shared_ptr<LiveFiles> files);

}  // namespace gpupool::agent
