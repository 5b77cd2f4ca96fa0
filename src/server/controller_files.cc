// The Controller's FileService (file_service.h): who may list, read and upload a task's files,
// checked against the task as memory holds it (or the store, for a task that left memory); a
// running task's files are its node's (node_files.h), the rest the server's copy, whose
// file-system work runs on the blocking-work executor, never on the caller's (an HTTP I/O)
// thread.
#include <algorithm>
#include <string>
#include <utility>

#include "core/task_path.h"
#include "server/controller.h"

namespace gpupool::server {
namespace {

// Whether `caller` may upload to `task` now: anyone who sees it while it is pending (its inputs),
// or, with `node`, the agent of the node it is bound to (its own key, or an admin's) and after it
// ended there (its outputs).
Status MayUpload(const Caller& caller, const Task& task, const std::string& node) {
  const std::string state(TaskStateName(task.state));
  if (node.empty()) {
    if (task.state == TaskState::kPending) return {};
    return MakeError(ErrorCode::kFailedPrecondition,
                     IsTerminal(task.state)
                         ? "task " + task.id + " has ended (" + state +
                               "): its files can be downloaded but no longer uploaded"
                         : "task " + task.id + " is " + state +
                               ": files can be uploaded while it is pending (its inputs) or "
                               "once it runs (into its workspace on its node)");
  }
  if (!caller.IsAdmin() && caller.agent_node != node) {
    return MakeError(ErrorCode::kPermissionDenied,
                     "only a node's agent uploads a task's outputs (node=" + node + ")");
  }
  // Bound there now, or ended there (a run the server stopped: its agent saves the outputs
  // without a report).
  const bool bound = task.state == TaskState::kScheduled || task.state == TaskState::kStarting ||
                     task.state == TaskState::kRunning || IsTerminal(task.state);
  if (bound && task.placement && task.placement->node == node) return {};
  return MakeError(ErrorCode::kFailedPrecondition, "task " + task.id + " is " + state +
                                                       " and not bound to node " + node +
                                                       ": its outputs are not taken from there");
}

// Whether the task's files are on its node now: it runs there (its workspace is the place of
// its files until it ends, when its node saves them here).
bool FilesOnNode(const Task& task) {
  return task.state == TaskState::kRunning && task.placement.has_value();
}

}  // namespace

Status Controller::StillThere(const Caller& caller, const std::string& task_id) {
  bool in_memory = false;
  {
    std::lock_guard lock(mu_);
    const Task* task = FindTask(task_id);
    if (task != nullptr && MayView(caller, *task)) return {};
    in_memory = task != nullptr;
  }
  if (!in_memory) {
    // It left memory: the store says whether it is still there (this runs on the blocking-work
    // executor, where a store read belongs). A failed read is no sign of a deletion.
    Result<std::optional<Task>> stored = store_.ReadTask(task_id);
    if (!stored || (stored->has_value() && MayView(caller, **stored))) return {};
  }
  options_.task_files->Remove(task_id);
  return NotFound("task " + task_id + " was deleted during the upload");
}

StorageQuota Controller::StorageQuotaOf(const Task& task) {
  std::lock_guard lock(mu_);
  const auto it = projects_.find(task.project_id);
  return {task.project_id, it == projects_.end() ? -1 : it->second.max_storage_bytes,
          (options_.chunks != nullptr ? options_.chunks->ProjectBytes(task.project_id) : 0) +
              VolumeBytesOf(task.project_id)};
}

void Controller::AttachNodeFiles(std::weak_ptr<NodeFiles> node_files) {
  std::lock_guard lock(node_files_mu_);
  node_files_ = std::move(node_files);
}

template <typename T>
void Controller::WithFiles(const Caller& caller, const std::string& task_id,
                           std::optional<std::string> upload_node, Done<T> done,
                           std::function<Result<T>(TaskFiles&, const Task&)> work,
                           std::function<void(NodeFiles&, const Task&, Done<T>)> on_node) {
  TaskFiles* files = options_.task_files;
  if (files == nullptr)
    return done(MakeError(ErrorCode::kUnavailable, "this server keeps no files"));
  ReadTask(
      caller, task_id,
      [this, files, caller, task_id, upload_node = std::move(upload_node), done = std::move(done),
       work = std::move(work), on_node = std::move(on_node)](Result<Task> task) mutable {
        if (!task) return done(tl::unexpected(task.error()));
        // A user's call on a running task goes to its node; an agent's upload of outputs
        // (with its node) and everything else to the server's copy.
        const bool users = !upload_node || upload_node->empty();
        if (users && on_node && FilesOnNode(*task)) {
          std::shared_ptr<NodeFiles> node_files;
          {
            std::lock_guard lock(node_files_mu_);
            node_files = node_files_.lock();
          }
          if (node_files == nullptr) {
            return done(MakeError(ErrorCode::kUnavailable,
                                  "task " + task_id +
                                      " runs: its files are on its node, which this "
                                      "server does not reach"));
          }
          return on_node(*node_files, *task, std::move(done));
        }
        if (upload_node) {
          if (Status ok = MayUpload(caller, *task, *upload_node); !ok) {
            return done(tl::unexpected(ok.error()));
          }
        }
        Status posted =
            blocking_->Post([this, files, task_id, task = std::move(*task), work, done] {
              Result<T> result = work(*files, task);
              bool in_memory = false;
              {
                std::lock_guard lock(mu_);
                in_memory = FindTask(task_id) != nullptr;
              }
              if (!in_memory) files->Forget(task_id);
              done(std::move(result));
            });
        if (!posted) done(tl::unexpected(posted.error()));
      });
}

void Controller::ListFiles(const Caller& caller, const std::string& task_id,
                           const std::string& path, const std::string& node,
                           Done<FileListing> done) {
  std::function<void(NodeFiles&, const Task&, Done<FileListing>)> on_node;
  if (node.empty()) {
    on_node = [files = options_.task_files, task_id, path](NodeFiles& node_files, const Task& task,
                                                           Done<FileListing> answer) {
      node_files.List(
          task.placement->node, task_id, path,
          [limits = files->Limits(), answer = std::move(answer)](Result<FileListing> listing) {
            if (listing) {
              listing->max_file_bytes = limits.max_file_bytes;
              listing->max_task_bytes = limits.max_task_bytes;
            }
            answer(std::move(listing));
          });
    };
  }
  WithFiles<FileListing>(
      caller, task_id, std::nullopt, std::move(done),
      [task_id, path](TaskFiles& files, const Task&) { return files.List(task_id, path); },
      std::move(on_node));
}

void Controller::ReadFile(const Caller& caller, const std::string& task_id, const std::string& path,
                          int64_t offset, int64_t length, Done<FileChunk> done) {
  WithFiles<FileChunk>(
      caller, task_id, std::nullopt, std::move(done),
      [task_id, path, offset, length](TaskFiles& files, const Task&) {
        return files.Read(task_id, path, offset, length);
      },
      [task_id, path, offset, length](NodeFiles& node, const Task& task, Done<FileChunk> answer) {
        node.Read(task.placement->node, task_id, path, offset, length, std::move(answer));
      });
}

void Controller::UploadStatus(const Caller& caller, const std::string& task_id,
                              const std::string& path, const std::string& node,
                              Done<int64_t> done) {
  WithFiles<int64_t>(
      caller, task_id, node.empty() ? std::nullopt : std::optional(node), std::move(done),
      [task_id, path](TaskFiles& files, const Task&) { return files.Received(task_id, path); },
      [task_id, path](NodeFiles& node_files, const Task& task, Done<int64_t> answer) {
        node_files.Received(task.placement->node, task_id, path, std::move(answer));
      });
}

void Controller::AppendUpload(const Caller& caller, const std::string& task_id,
                              const std::string& path, const std::string& node, int64_t offset,
                              std::optional<int64_t> size, std::string bytes, Done<int64_t> done) {
  auto data = std::make_shared<const std::string>(std::move(bytes));  // not copied per copy
  WithFiles<int64_t>(
      caller, task_id, node, std::move(done),
      [this, caller, task_id, path, offset, size, data](TaskFiles& files, const Task& task) {
        // The whole declared file at its first chunk, else the chunk.
        const auto chunk = static_cast<int64_t>(data->size());
        const int64_t coming = size && offset == 0 ? std::max(*size, chunk) : chunk;
        if (Status room = disk_.Admit(coming, "the upload of " + QuoteTaskPath(path) + " is");
            !room) {
          return Result<int64_t>(tl::unexpected(room.error()));
        }
        Result<int64_t> received =
            files.Append(task_id, path, offset, *data, size, StorageQuotaOf(task));
        if (!received) return received;
        disk_.Wrote(chunk);
        if (Status there = StillThere(caller, task_id); !there) {
          return Result<int64_t>(tl::unexpected(there.error()));
        }
        return received;
      },
      [files = options_.task_files, task_id, path, offset, size, data](
          NodeFiles& node_files, const Task& task, Done<int64_t> answer) {
        node_files.Append(task.placement->node, task_id, path, offset, size,
                          files->Limits().max_file_bytes, *data, std::move(answer));
      });
}

void Controller::CommitUpload(const Caller& caller, const std::string& task_id,
                              const std::string& path, const std::string& node, int64_t size,
                              std::string sha256, Done<StoredFile> done) {
  WithFiles<StoredFile>(
      caller, task_id, node, std::move(done),
      [this, caller, task_id, path, size, sha256](TaskFiles& files, const Task&) {
        Result<StoredFile> stored = files.Commit(task_id, path, size, sha256);
        if (!stored) return stored;
        if (Status there = StillThere(caller, task_id); !there) {
          return Result<StoredFile>(tl::unexpected(there.error()));
        }
        return stored;
      },
      [task_id, path, size, sha256](NodeFiles& node_files, const Task& task,
                                    Done<StoredFile> answer) {
        node_files.Commit(task.placement->node, task_id, path, size, sha256, std::move(answer));
      });
}

}  // namespace gpupool::server
