// A task's files between the server and the node (docs/api.md "Task files"): before launch the
// files the server keeps for the task (uploaded while it was pending) are fetched into a fresh
// directory that becomes its workspace; when it has ended, the workspace's new and changed files
// are uploaded before its end is reported, so that they outlive the node. Nothing here follows a
// symbolic link: the workspace is walked with openat(O_NOFOLLOW) from its top, and only regular
// files owned by the workspace's owner (the task's uid) are taken.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "api/client.h"
#include "core/result.h"

namespace gpupool::agent {

struct FetchedInputs {
  std::string dir;  // staging_root/<task id>, holding the files; empty when the task has none
  int files = 0;
  int64_t bytes = 0;
};

// Downloads every file the server keeps for the task into staging_root/<task id> (directories
// 0755, files 0644, each created new below a directory this call created), each verified against
// its listed SHA-256. `staging_root` holds the inputs of several tasks, fetched at once by their
// runners: whatever an interrupted fetch of this task left there is removed first. `cancelled` is
// asked between chunks. Errors: kUnavailable
// when the server cannot be reached or the fetch was cancelled (try again later), the server's
// error otherwise, kInternal for a file that does not verify or cannot be written.
Result<FetchedInputs> FetchTaskInputs(api::Client& client, const std::string& task_id,
                                      const std::string& staging_root,
                                      const std::function<bool()>& cancelled);

// Called with each file the walk takes: its path from the workspace's top, a descriptor open
// for reading (valid during the call) and its size. An error ends the walk.
using WorkspaceVisitor = std::function<Status(const std::string& rel, int fd, int64_t size)>;

// Visits the regular files below `workspace` in path order, never following a symbolic link:
// each directory is opened from its parent with O_NOFOLLOW. Skipped, each named with why in
// `skipped`: symbolic links, what is neither a regular file nor a directory, files not owned by
// the owner of `workspace` (a hard link the task made to someone else's file), names that break
// the task path rules (and everything below such a directory). kInternal when the workspace
// cannot be opened; `visit`'s error when it fails.
Status WalkWorkspace(const std::string& workspace, const WorkspaceVisitor& visit,
                     std::vector<std::string>* skipped);
// The same walk below the open directory `dir` of a workspace, whose path in it is `rel` ("" at
// its top; the visited paths start with it), taking files owned by `owner`.
Status WalkWorkspaceDir(int dir, const std::string& rel, uid_t owner,
                        const WorkspaceVisitor& visit, std::vector<std::string>* skipped);

struct SavedOutputs {
  int uploaded = 0;  // files new or changed
  int64_t bytes = 0;
  int unchanged = 0;                 // the server has them with the same SHA-256
  std::vector<std::string> skipped;  // "'<path>': <why>", sorted
};

// Uploads the files WalkWorkspace takes from `workspace` that the server does not keep with the
// same SHA-256 (the task's outputs), as the agent of node `node`. Skipped and named besides what
// the walk skips: files over the server's size limits. Errors stop the whole upload:
// kUnavailable (unreachable, cancelled: try again later; what was uploaded is not sent again),
// or the server's refusal (the task was stopped or deleted meanwhile).
Result<SavedOutputs> SaveTaskOutputs(api::Client& client, const std::string& task_id,
                                     const std::string& workspace, const std::string& node,
                                     const std::function<bool()>& cancelled);

// One line for the agent's log: "3 file(s) saved (1024 bytes), 2 unchanged; not saved: …".
std::string DescribeOutputs(const SavedOutputs& saved);
// What the task's end report adds to its reason: "" when every file was saved, else
// "; outputs not saved: 'a': a symbolic link (not followed), …" (the first few, then how many
// more).
std::string OutputsNote(const SavedOutputs& saved);

}  // namespace gpupool::agent
