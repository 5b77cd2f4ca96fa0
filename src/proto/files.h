// Wire types of task files (docs/api.md "Task files"): listings, chunked downloads, and resumable
// uploads (chunks appended at the offset received so far, then a commit that checks size and
// SHA-256).
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
  static constexpr std::string_view kName = "FilesQuery";
  static constexpr std::string_view kDoc = "Which part of a task's files.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("path", s.path, {.max_bytes = kMaxTaskPathBytes, .doc = "Relative; default: all"});
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
  static constexpr std::string_view kName = "UploadQuery";
  static constexpr std::string_view kDoc = "The file an upload is for.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("path", s.path, {.required = true, .max_bytes = kMaxTaskPathBytes});
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

}  // namespace gpupool::proto
