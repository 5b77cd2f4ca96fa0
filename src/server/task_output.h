// TaskOutput: what tasks write that the pool keeps — stdout, stderr and the metric lines a task
// appends to $GPUPOOL_METRICS_FILE — as the agents ship them. One append-only file per task and
// stream under a directory (DIR/<task>/stdout, stderr, metrics.jsonl), written at the byte offset
// the agent names, so a chunk shipped twice (a retry) is stored once. A task that runs again (it
// was re-queued and bound anew) starts a new run: its offsets count from where the previous run
// ended (DIR/<task>/runs records each run's start), so the runs' output follows one another.
// Readers ask for bytes from an offset, or the last N lines, and may wait for bytes that have not
// arrived yet (long-poll).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "server/telemetry_service.h"

namespace gpupool::server {

class TaskOutput {
 public:
  // `dir` is created when missing. Each stream keeps at most `max_stream_bytes`.
  static Result<std::unique_ptr<TaskOutput>> Open(std::string dir, int64_t max_stream_bytes);
  ~TaskOutput();
  TaskOutput(const TaskOutput&) = delete;
  TaskOutput& operator=(const TaskOutput&) = delete;

  // Stores `data`, which starts at `offset` of the stream as run `run` wrote it (runs are
  // identified by a number that grows: the binding's time): the part below what is stored is
  // skipped (already there); after a gap (bytes the agent no longer had) the chunk follows what
  // is stored and the run's later offsets shift with it; bytes past the size limit are dropped
  // (truncated). A chunk of an earlier run than the task's last is refused (kFailedPrecondition). A
  // run newer than the task's last starts a new one. Returns the bytes stored for the run. Wakes
  // the readers waiting for this stream.
  Result<int64_t> Append(const std::string& task_id, int64_t run, OutputStream stream,
                         int64_t offset, std::string_view data);
  // Bytes of the stream stored for run `run` (0 for a run that has not started here).
  int64_t RunSize(const std::string& task_id, int64_t run, OutputStream stream);
  // Bytes stored for the stream, all runs (0 when none).
  int64_t Size(const std::string& task_id, OutputStream stream);

  // Up to `max_bytes` from `offset` (clamped to what is stored). tail_lines ≥ 0 starts at the
  // beginning of the last `tail_lines` lines instead (a final line without '\n' counts).
  Result<OutputSlice> Read(const std::string& task_id, OutputStream stream, int64_t offset,
                           int64_t tail_lines, int64_t max_bytes);

  // Like Read from `offset`, but when nothing is stored past it yet, `done` runs when bytes
  // arrive, when Wake(task_id) is called, or at `deadline_ms` (see ExpireWaiters) — whichever
  // is first — with what is there then. `done` runs without any lock held, on the thread that
  // caused it.
  void ReadOrWait(const std::string& task_id, OutputStream stream, int64_t offset,
                  int64_t max_bytes, int64_t deadline_ms,
                  std::function<void(Result<OutputSlice>)> done);
  // Answers the waiters of `task_id` now (its output became complete).
  void Wake(const std::string& task_id);
  // Answers the waiters whose deadline is ≤ now_ms (every waiter when `all`).
  void ExpireWaiters(int64_t now_ms, bool all = false);

  // Removes everything stored for the task (it was deleted).
  void Remove(const std::string& task_id);
  // Drops what memory caches of the task (sizes, its current run); its files stay, and a later
  // call reads them again.
  void Forget(const std::string& task_id);

  // Called after each Append that stored bytes, with them and the offset of the stream (all
  // runs, as Read counts) where they were stored; on the appending thread, with no lock held.
  // Set before the first Append.
  using AppendObserver = std::function<void(const std::string& task_id, OutputStream stream,
                                            int64_t offset, std::string_view data)>;
  void SetAppendObserver(AppendObserver observer) { observer_ = std::move(observer); }

 private:
  struct Waiter {
    std::string task_id;
    OutputStream stream;
    int64_t offset = 0;
    int64_t max_bytes = 0;
    int64_t deadline_ms = 0;
    std::function<void(Result<OutputSlice>)> done;
  };
  // Where the task's current run starts in each stream.
  struct Run {
    int64_t id = 0;
    int64_t base[3] = {0, 0, 0};  // by OutputStream
  };
  TaskOutput(std::string dir, int64_t max_stream_bytes);
  // The task's current run (read from DIR/<task>/runs once); `run` newer than it starts anew.
  Result<Run*> RunLocked(const std::string& task_id, int64_t run);
  // Appends `run` to DIR/<task>/runs (its last line for an id is the one that counts).
  Status RecordRunLocked(const std::string& task_id, const Run& run);
  std::string PathOf(const std::string& task_id, OutputStream stream) const;
  void ForgetLocked(const std::string& task_id);
  int64_t SizeLocked(const std::string& task_id, OutputStream stream);
  Result<OutputSlice> ReadLocked(const std::string& task_id, OutputStream stream, int64_t offset,
                                 int64_t tail_lines, int64_t max_bytes);
  // Answers (outside the lock) the waiters `pick` selects.
  void AnswerWaiters(const std::function<bool(const Waiter&)>& pick);

  const std::string dir_;
  const int64_t max_stream_bytes_;
  std::mutex mu_;
  std::map<std::string, int64_t> sizes_;  // "<task>/<stream>" -> bytes stored (cache)
  std::map<std::string, Run> runs_;       // task -> its current run (cache)
  std::vector<Waiter> waiters_;
  AppendObserver observer_;
};

}  // namespace gpupool::server
