// TaskService: users' tasks — submit, read, list, stop, release, delete, and a task's event
// history. A task that finished long ago is no longer in the server's memory: reads of it come
// from the store, off the I/O and store threads (see blocking_executor.h), so reads answer
// through a callback too.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/records.h"
#include "core/result.h"
#include "server/caller.h"

namespace gpupool::server {

struct TaskSpec {
  std::string name;
  std::string project_id;  // empty: the caller's only project (an error when it has several)
  TaskRequest request;
  std::string image;
  std::vector<std::string> command;
  int64_t disk_gib = 0;
  int64_t max_runtime_ms = 0;
  std::string stop_when;
  bool restartable = false;
  bool hold = false;  // created held: not scheduled until ReleaseTask
  std::vector<int32_t> ports;  // declared TCP ports (valid: core/task_ports.h)
};

struct TaskFilter {
  std::string project_id;         // empty: every project the caller sees
  std::vector<TaskState> states;  // empty: any
  std::string node;               // empty: any
  int64_t after_seq = 0;          // pagination cursor: tasks with seq > after_seq
  int limit = 100;                // 1..1000
};

struct TaskPage {
  std::vector<Task> tasks;     // ascending seq
  int64_t next_after_seq = 0;  // 0: no more pages
};

// A task with what the scheduler says of it while it waits.
struct TaskView {
  Task task;
  int64_t queue_position = 0;  // 1-based among queued tasks in scheduling order; 0: not queued
                               // (not pending, or held)
  std::string pending_reason;  // the last scheduling pass's one-line reason
  std::vector<std::pair<std::string, int>> pending_nodes;  // (why a node rejected it, how many)
  int64_t runtime_ms = 0;  // TaskRuntimeMs as of the answer
};

class TaskService {
 public:
  virtual ~TaskService() = default;

  virtual void SubmitTask(const Caller& caller, TaskSpec spec, Done<Task> done) = 0;
  // kUnavailable when the task must be read from the store and the blocking-work queue is full.
  virtual void GetTask(const Caller& caller, const std::string& id, Done<TaskView> done) = 0;
  // A filter of live states only (pending, scheduled, starting, running, preempted), or a cursor
  // past every task that left memory, is answered from memory; any other from the store, once
  // every write queued before the call is durable.
  virtual void ListTasks(const Caller& caller, const TaskFilter& filter, Done<TaskPage> done) = 0;
  virtual void StopTask(const Caller& caller, const std::string& id, Done<Task> done) = 0;
  // Puts a held task (submitted with TaskSpec::hold, still pending) into the scheduler's queue as
  // a fresh submission; kFailedPrecondition for any other task.
  virtual void ReleaseTask(const Caller& caller, const std::string& id, Done<Task> done) = 0;
  // Only a terminal task may be deleted. Answers once the deletion is durable and the task's
  // output and files are gone; kUnavailable (nothing deleted) when the blocking-work queue is
  // full.
  virtual void DeleteTask(const Caller& caller, const std::string& id, DoneStatus done) = 0;
  // The task's events, once every write queued before the call is durable (so they agree with
  // what GetTask shows); kUnavailable when the blocking-work queue is full.
  virtual void TaskEvents(const Caller& caller, const std::string& id,
                          Done<std::vector<TaskEvent>> done) = 0;
};

}  // namespace gpupool::server
