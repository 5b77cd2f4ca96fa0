// The server's end of a running task's files (docs/api.md "Task files", "The tunnel"):
// server::NodeFiles over the nodes' tunnels. Each call opens one `files` stream to the task's node,
// writes its proto::LiveFileRequest (and an append's bytes), and reads the agent's
// proto::LiveFileReply (and a read's bytes); the agent's error comes back as it gave it, a node
// without a tunnel or a stream that drops is kUnavailable.
#pragma once

#include <string>

#include "api/tunnel_hub.h"
#include "server/node_files.h"

namespace gpupool::api {

class TunnelNodeFiles final : public server::NodeFiles {
 public:
  explicit TunnelNodeFiles(TunnelHub& tunnels) : tunnels_(tunnels) {}  // must outlive this

  void List(const std::string& node, const std::string& task_id, const std::string& path,
            server::Done<server::FileListing> done) override;
  void Read(const std::string& node, const std::string& task_id, const std::string& path,
            int64_t offset, int64_t length, server::Done<server::FileChunk> done) override;
  void Received(const std::string& node, const std::string& task_id, const std::string& path,
                server::Done<int64_t> done) override;
  void Append(const std::string& node, const std::string& task_id, const std::string& path,
              int64_t offset, std::optional<int64_t> size, int64_t max_file_bytes,
              std::string bytes, server::Done<int64_t> done) override;
  void Commit(const std::string& node, const std::string& task_id, const std::string& path,
              int64_t size, const std::string& sha256,
              server::Done<server::StoredFile> done) override;

 private:
  TunnelHub& tunnels_;
};

}  // namespace gpupool::api
