// Implementation of task_output.h: plain files appended with write(2) and read with pread(2);
// sizes cached in memory (a file is only ever appended by this class); waiters answered outside
// the lock.
#include "server/task_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/unique_fd.h"
#include "os/files.h"

namespace gpupool::server {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kTailBlock = 64 * 1024;

std::string ErrnoText(int err) { return std::strerror(err); }

// A failed file operation is os::FileError: kInsufficientStorage for a full disk (the telemetry
// ingest keeps the agent's offsets then, so that it ships the bytes again later), else kInternal.
using os::FileError;

bool SafeTaskId(const std::string& id) {
  if (id.empty() || id.size() > 128 || id == "." || id == "..") return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return FileError("cannot write " + path, errno);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

Result<std::string> ReadAt(int fd, int64_t offset, int64_t length, const std::string& path) {
  std::string out(static_cast<size_t>(length), '\0');
  int64_t got = 0;
  while (got < length) {
    const ssize_t n =
        ::pread(fd, out.data() + got, static_cast<size_t>(length - got), offset + got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return MakeError(ErrorCode::kInternal, "cannot read " + path + ": " + ErrnoText(errno));
    if (n == 0) break;
    got += n;
  }
  out.resize(static_cast<size_t>(got));
  return out;
}

}  // namespace

Result<std::unique_ptr<TaskOutput>> TaskOutput::Open(std::string dir, int64_t max_stream_bytes) {
  if (max_stream_bytes <= 0) return InvalidArgument("max_stream_bytes must be > 0");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return MakeError(ErrorCode::kInternal, "cannot create " + dir + ": " + ec.message());
  return std::unique_ptr<TaskOutput>(new TaskOutput(std::move(dir), max_stream_bytes));
}

TaskOutput::TaskOutput(std::string dir, int64_t max_stream_bytes)
    : dir_(std::move(dir)), max_stream_bytes_(max_stream_bytes) {}

TaskOutput::~TaskOutput() { ExpireWaiters(0, /*all=*/true); }

std::string TaskOutput::PathOf(const std::string& task_id, OutputStream stream) const {
  return dir_ + "/" + task_id + "/" +
         (stream == OutputStream::kMetrics ? "metrics.jsonl"
                                           : std::string(OutputStreamName(stream)));
}

int64_t TaskOutput::SizeLocked(const std::string& task_id, OutputStream stream) {
  const std::string key = task_id + "/" + std::string(OutputStreamName(stream));
  if (auto it = sizes_.find(key); it != sizes_.end()) return it->second;
  struct stat st {};
  const int64_t size = ::stat(PathOf(task_id, stream).c_str(), &st) == 0 ? st.st_size : 0;
  sizes_[key] = size;
  return size;
}

int64_t TaskOutput::Size(const std::string& task_id, OutputStream stream) {
  if (!SafeTaskId(task_id)) return 0;
  std::lock_guard lock(mu_);
  return SizeLocked(task_id, stream);
}

Result<TaskOutput::Run*> TaskOutput::RunLocked(const std::string& task_id, int64_t run) {
  auto it = runs_.find(task_id);
  if (it == runs_.end()) {
    Run current;
    // The last line of the runs file is the current run: "<id> <stdout> <stderr> <metrics>".
    std::ifstream in(dir_ + "/" + task_id + "/runs");
    for (std::string line; std::getline(in, line);) {
      std::istringstream fields(line);
      Run r;
      if (fields >> r.id >> r.base[0] >> r.base[1] >> r.base[2]) current = r;
    }
    it = runs_.emplace(task_id, current).first;
  }
  Run& current = it->second;
  if (run <= current.id) return &current;
  Run next;
  next.id = run;
  for (OutputStream s : {OutputStream::kStdout, OutputStream::kStderr, OutputStream::kMetrics}) {
    next.base[static_cast<int>(s)] = SizeLocked(task_id, s);
  }
  if (Status st = RecordRunLocked(task_id, next); !st) return tl::unexpected(st.error());
  current = next;
  return &current;
}

Status TaskOutput::RecordRunLocked(const std::string& task_id, const Run& run) {
  const std::string task_dir = dir_ + "/" + task_id;
  if (::mkdir(task_dir.c_str(), 0750) != 0 && errno != EEXIST) {
    return FileError("cannot create " + task_dir, errno);
  }
  const std::string path = task_dir + "/runs";
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640));
  if (fd.get() < 0) {
    return FileError("cannot open " + path, errno);
  }
  return WriteAll(fd.get(),
                  std::to_string(run.id) + " " + std::to_string(run.base[0]) + " " +
                      std::to_string(run.base[1]) + " " + std::to_string(run.base[2]) + "\n",
                  path);
}

int64_t TaskOutput::RunSize(const std::string& task_id, int64_t run, OutputStream stream) {
  if (!SafeTaskId(task_id)) return 0;
  std::lock_guard lock(mu_);
  auto it = runs_.find(task_id);
  const Run* current = it != runs_.end() ? &it->second : nullptr;
  if (current == nullptr) {
    auto r = RunLocked(task_id, 0);
    if (!r) return 0;
    current = *r;
  }
  if (run != current->id) return 0;
  return SizeLocked(task_id, stream) - current->base[static_cast<int>(stream)];
}

Result<int64_t> TaskOutput::Append(const std::string& task_id, int64_t run, OutputStream stream,
                                   int64_t offset, std::string_view data) {
  if (!SafeTaskId(task_id)) return InvalidArgument("task id '" + task_id + "' is not valid");
  if (offset < 0) return InvalidArgument("offset must be ≥ 0, got " + std::to_string(offset));
  int64_t size = 0;
  int64_t base = 0;
  {
    std::lock_guard lock(mu_);
    auto current = RunLocked(task_id, run);
    if (!current) return tl::unexpected(current.error());
    const std::string name(OutputStreamName(stream));
    if ((*current)->id != run) {
      return MakeError(ErrorCode::kFailedPrecondition, "run " + std::to_string(run) + " of " +
                                                           task_id + " was followed by run " +
                                                           std::to_string((*current)->id));
    }
    size = SizeLocked(task_id, stream);
    if ((*current)->base[static_cast<int>(stream)] + offset > size) {
      // A gap: the agent no longer had those bytes (its log rotated before they were shipped).
      // The chunk follows what is stored; the run's offsets shift with it, durably.
      Run shifted = **current;
      shifted.base[static_cast<int>(stream)] = size - offset;
      if (Status st = RecordRunLocked(task_id, shifted); !st) return tl::unexpected(st.error());
      **current = shifted;
    }
    base = (*current)->base[static_cast<int>(stream)];
    const int64_t skip = std::min<int64_t>(size - base - offset, static_cast<int64_t>(data.size()));
    data.remove_prefix(static_cast<size_t>(skip));
    if (size + static_cast<int64_t>(data.size()) > max_stream_bytes_) {
      data = data.substr(0, static_cast<size_t>(std::max<int64_t>(0, max_stream_bytes_ - size)));
    }
    if (data.empty()) return size - base;
    const std::string task_dir = dir_ + "/" + task_id;
    if (::mkdir(task_dir.c_str(), 0750) != 0 && errno != EEXIST) {
      return FileError("cannot create " + task_dir, errno);
    }
    const std::string path = PathOf(task_id, stream);
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640));
    if (fd.get() < 0) {
      return FileError("cannot open " + path, errno);
    }
    if (Status st = WriteAll(fd.get(), data, path); !st) {
      // Part of it may be on disk: the next Append re-reads the true size.
      sizes_.erase(task_id + "/" + name);
      return tl::unexpected(st.error());
    }
    size += static_cast<int64_t>(data.size());
    sizes_[task_id + "/" + name] = size;
  }
  AnswerWaiters([&](const Waiter& w) {
    return w.task_id == task_id && w.stream == stream && w.offset < size;
  });
  if (observer_) observer_(task_id, stream, size - static_cast<int64_t>(data.size()), data);
  return size - base;
}

Result<OutputSlice> TaskOutput::ReadLocked(const std::string& task_id, OutputStream stream,
                                           int64_t offset, int64_t tail_lines, int64_t max_bytes) {
  OutputSlice slice;
  slice.size = SizeLocked(task_id, stream);
  slice.truncated = slice.size >= max_stream_bytes_;
  const std::string path = PathOf(task_id, stream);
  if (slice.size == 0) return slice;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return MakeError(ErrorCode::kInternal, "cannot open " + path + ": " + ErrnoText(errno));
  }
  if (tail_lines >= 0) {
    // Walk back from the end counting line ends; a final line without '\n' counts as a line.
    int64_t pos = slice.size;
    int64_t newlines = 0;
    int64_t start = 0;
    bool found = false;
    while (pos > 0 && !found) {
      const int64_t from = std::max<int64_t>(0, pos - kTailBlock);
      auto block = ReadAt(fd.get(), from, pos - from, path);
      if (!block) return tl::unexpected(block.error());
      for (int64_t i = static_cast<int64_t>(block->size()) - 1; i >= 0; --i) {
        if ((*block)[static_cast<size_t>(i)] != '\n') continue;
        if (from + i == slice.size - 1) continue;  // the last line's own end
        if (++newlines > tail_lines - 1 || tail_lines == 0) {
          start = from + i + 1;
          found = true;
          break;
        }
      }
      pos = from;
    }
    offset = tail_lines == 0 ? slice.size : start;
  }
  slice.offset = std::clamp<int64_t>(offset, 0, slice.size);
  const int64_t length = std::min(max_bytes, slice.size - slice.offset);
  auto data = ReadAt(fd.get(), slice.offset, length, path);
  if (!data) return tl::unexpected(data.error());
  slice.data = std::move(*data);
  slice.next_offset = slice.offset + static_cast<int64_t>(slice.data.size());
  return slice;
}

Result<OutputSlice> TaskOutput::Read(const std::string& task_id, OutputStream stream,
                                     int64_t offset, int64_t tail_lines, int64_t max_bytes) {
  if (!SafeTaskId(task_id)) return InvalidArgument("task id '" + task_id + "' is not valid");
  std::lock_guard lock(mu_);
  return ReadLocked(task_id, stream, offset, tail_lines, max_bytes);
}

void TaskOutput::ReadOrWait(const std::string& task_id, OutputStream stream, int64_t offset,
                            int64_t max_bytes, int64_t deadline_ms,
                            std::function<void(Result<OutputSlice>)> done) {
  if (!SafeTaskId(task_id)) return done(InvalidArgument("task id '" + task_id + "' is not valid"));
  Result<OutputSlice> now;
  {
    std::lock_guard lock(mu_);
    if (SizeLocked(task_id, stream) <= offset) {
      waiters_.push_back(Waiter{task_id, stream, offset, max_bytes, deadline_ms, std::move(done)});
      return;
    }
    now = ReadLocked(task_id, stream, offset, -1, max_bytes);
  }
  done(std::move(now));
}

void TaskOutput::AnswerWaiters(const std::function<bool(const Waiter&)>& pick) {
  std::vector<std::pair<std::function<void(Result<OutputSlice>)>, Result<OutputSlice>>> answers;
  {
    std::lock_guard lock(mu_);
    std::vector<Waiter> keep;
    for (Waiter& w : waiters_) {
      if (!pick(w)) {
        keep.push_back(std::move(w));
        continue;
      }
      answers.emplace_back(std::move(w.done),
                           ReadLocked(w.task_id, w.stream, w.offset, -1, w.max_bytes));
    }
    waiters_ = std::move(keep);
  }
  for (auto& [done, slice] : answers) done(std::move(slice));
}

void TaskOutput::Wake(const std::string& task_id) {
  AnswerWaiters([&](const Waiter& w) { return w.task_id == task_id; });
}

void TaskOutput::ExpireWaiters(int64_t now_ms, bool all) {
  AnswerWaiters([&](const Waiter& w) { return all || w.deadline_ms <= now_ms; });
}

void TaskOutput::ForgetLocked(const std::string& task_id) {
  for (OutputStream s : {OutputStream::kStdout, OutputStream::kStderr, OutputStream::kMetrics}) {
    sizes_.erase(task_id + "/" + std::string(OutputStreamName(s)));
  }
  runs_.erase(task_id);
}

void TaskOutput::Forget(const std::string& task_id) {
  std::lock_guard lock(mu_);
  ForgetLocked(task_id);
}

void TaskOutput::Remove(const std::string& task_id) {
  if (!SafeTaskId(task_id)) return;
  Wake(task_id);
  std::lock_guard lock(mu_);
  ForgetLocked(task_id);
  std::error_code ec;
  fs::remove_all(dir_ + "/" + task_id, ec);
}

}  // namespace gpupool::server
