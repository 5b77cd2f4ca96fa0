// Wire types of task files (docs/api.md "Task files"): listings, chunked downloads, and resumable
// uploads (chunks appended at the offset received so far, then a commit that checks size and
// SHA-256); and the tunnel's `files` stream, by which the server asks a node's agent for the files
// of a task running there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/task_path.h"
#include "proto/common.h"
#include "proto/describe.h"

namespace gpupool::proto {

// The largest chunk of a file one request moves (also the server's request body limit).
inline constexpr int64_t kFileChunkBytes = 4 << 20;

inline constexpr std::string_view kFileTypes[] = {"dir", "file"};

struct FilesQuery {
  std::string path;
  std::string node;
  static constexpr std::string_view kName = "FilesQuery";
  static constexpr std::string_view kDoc = "Which part of a task's files.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("path", s.path, {.max_bytes = kMaxTaskPathBytes, .doc = "Relative; default: all"});
    v("node", s.node,
      {.format = Format::kIdentifier,
       .doc = "An agent saving outputs: the server's copy, even while the task runs"});
  }
};

struct FileEntry {
  std::string path;
  int64_t size = 0;
  std::string sha256;
  static constexpr std::string_view kName = "FileEntry";
  static constexpr std::string_view kDoc = "A file the pool keeps for a task.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("path", s.path);
    v("size", s.size);
    v("sha256", s.sha256, {.doc = "Lower-case hex"});
  }
};

struct FileListing {
  std::string task;
  std::string path;
  std::string type;
  std::vector<FileEntry> files;
  int64_t max_file_bytes = 0;
  int64_t max_task_bytes = 0;
  static constexpr std::string_view kName = "FileListing";
  static constexpr std::string_view kDoc = "A task's files under a path.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task", s.task);
    v("path", s.path);
    v("type", s.type, {.one_of = kFileTypes});
    v("files", s.files);
    v("max_file_bytes", s.max_file_bytes);
    v("max_task_bytes", s.max_task_bytes);
  }
};

struct FileContentQuery {
  std::string path;
  int64_t offset = 0;
  int64_t length = kFileChunkBytes;
  static constexpr std::string_view kName = "FileContentQuery";
  static constexpr std::string_view kDoc = "A chunk of a file.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("path", s.path, {.required = true, .max_bytes = kMaxTaskPathBytes});
    v("offset", s.offset, {.min = 0});
    v("length", s.length, {.min = 1, .max = kFileChunkBytes});
  }
};

struct UploadQuery {
  std::string path;
  std::string node;
  static constexpr std::string_view kName = "UploadQuery";
  static constexpr std::string_view kDoc = "The file an upload is for.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("path", s.path, {.required = true, .max_bytes = kMaxTaskPathBytes});
    v("node", s.node, {.format = Format::kIdentifier, .doc = "An agent uploading outputs"});
  }
};

struct UploadChunkQuery {
  std::string path;
  int64_t offset = 0;
  std::optional<int64_t> size;
  std::string node;
  static constexpr std::string_view kName = "UploadChunkQuery";
  static constexpr std::string_view kDoc = "Where a chunk goes.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("path", s.path, {.required = true, .max_bytes = kMaxTaskPathBytes});
    v("offset", s.offset, {.required = true, .min = 0, .doc = "The bytes received so far"});
    v("size", s.size,
      {.min = 0,
       .doc = "The whole file's size: a file over a limit is refused at its first chunk"});
    v("node", s.node, {.format = Format::kIdentifier, .doc = "An agent uploading outputs"});
  }
};

struct UploadCommitQuery {
  std::string node;
  static constexpr std::string_view kName = "UploadCommitQuery";
  static constexpr std::string_view kDoc = "Who commits.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("node", s.node, {.format = Format::kIdentifier, .doc = "An agent uploading outputs"});
  }
};

struct UploadStatus {
  std::string task;
  std::string path;
  int64_t received = 0;
  static constexpr std::string_view kName = "UploadStatus";
  static constexpr std::string_view kDoc = "How much of an upload arrived.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task", s.task);
    v("path", s.path);
    v("received", s.received, {.doc = "Where the next chunk starts"});
  }
};

struct UploadCommit {
  std::string path;
  int64_t size = 0;
  std::string sha256;
  static constexpr std::string_view kName = "UploadCommit";
  static constexpr std::string_view kDoc = "The end of an upload: what the file must be.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("path", s.path, {.required = true, .max_bytes = kMaxTaskPathBytes});
    v("size", s.size, {.required = true, .min = 0});
    v("sha256", s.sha256, {.required = true, .max_bytes = 64, .doc = "Lower-case hex"});
  }
};

struct CommittedFile : FileEntry {
  std::string task;
  static constexpr std::string_view kName = "CommittedFile";
  static constexpr std::string_view kDoc = "A file now in place.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task", s.task);
    FileEntry::Describe(v, static_cast<Like<Self, FileEntry>&>(s));
  }
};

// The tunnel's `files` stream (docs/api.md "The tunnel"): one operation on the workspace of a task
// running on the agent's node. The server writes the request as one line of JSON, then (op
// `append`) the chunk's bytes, and ends its side; the agent answers with a LiveFileReply line,
// then (op `read`) the bytes, and ends.
inline constexpr std::string_view kLiveFileOps[] = {"list", "read", "status", "append", "commit"};

struct LiveFileRequest {
  std::string op{};
  std::string path{};  // TaskPathFromUser's form: relative, "" the whole workspace (list)
  int64_t offset = 0;
  int64_t length = 0;
  std::optional<int64_t> size{};
  std::string sha256{};
  int64_t max_file_bytes = 0;  // the server's per-file limit; 0: none
  static constexpr std::string_view kName = "LiveFileRequest";
  static constexpr std::string_view kDoc =
      "The server's request on a tunnel `files` stream: one operation on a running task's "
      "workspace.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("op", s.op, {.required = true, .one_of = kLiveFileOps});
    v("path", s.path, {.max_bytes = kMaxTaskPathBytes, .doc = "Relative to the workspace"});
    v("offset", s.offset, {.min = 0, .doc = "read: the first byte; append: the bytes received"});
    v("length", s.length, {.min = 0, .max = kFileChunkBytes, .doc = "read: at most this many"});
    v("size", s.size, {.min = 0, .doc = "append: the whole file's; commit: the file's"});
    v("sha256", s.sha256, {.max_bytes = 64, .doc = "commit: the file's, lower-case hex"});
    v("max_file_bytes", s.max_file_bytes, {.min = 0, .doc = "The server's per-file limit"});
  }
};

struct LiveFileReply {
  std::string code;     // empty: done; else an ErrorCodeName
  std::string message;  // the error's
  std::string type;     // list: "dir" or "file"
  std::vector<FileEntry> files;
  int64_t size = 0;      // read: the whole file's; commit: the file's
  std::string sha256;    // read: the whole file's when known, else ""; commit: the file's
  int64_t received = 0;  // status, append
  static constexpr std::string_view kName = "LiveFileReply";
  static constexpr std::string_view kDoc = "The agent's answer on a tunnel `files` stream.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("code", s.code, {.max_bytes = 32, .doc = "Empty when done, else the error's code"});
    v("message", s.message, {.max_bytes = 4096, .doc = "The error's message"});
    v("type", s.type, {.max_bytes = 4, .doc = "list: dir or file"});
    v("files", s.files, {.doc = "list"});
    v("size", s.size, {.min = 0, .doc = "read, commit: the file's size"});
    v("sha256", s.sha256, {.max_bytes = 64, .doc = "read (when known), commit: the file's"});
    v("received", s.received, {.min = 0, .doc = "status, append: bytes of the upload"});
  }
};

}  // namespace gpupool::proto
