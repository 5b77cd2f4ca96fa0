// TaskService: users' tasks — submit, read, list, stop, release, delete, and a task's event
// history. A task that finished long ago is no longer in the server's memory: reads of it come
// from the store, off the I/O and store threads (see blocking_executor.h), so reads answer
// through a callback too.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/records.h"
#include "core/result.h"
#include "core/stop_condition.h"
#include "core/task_array.h"
#include "core/task_job.h"
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
  int64_t snapshot_every_ms = 0;  // Task's snapshot settings (core/records.h)
  std::string checkpoint_signal;
  int64_t checkpoint_timeout_ms = 0;
  std::string from_snapshot;  // a snapshot of the project to start from; empty: none
  // The project's volumes it mounts: as asked, `name` a volume's name or id (volume_id and
  // shared are set when the submission resolves them).
  std::vector<VolumeMount> volumes;
  // The datasets it mounts read-only: as asked (`name` a name or id, `version` 0 for the latest;
  // the rest is resolved at submission).
  std::vector<DatasetMount> datasets;
};

struct TaskFilter {
  std::string project_id;         // empty: every project the caller sees
  std::vector<TaskState> states;  // empty: any
  std::string node;               // empty: any
  std::string array_id;           // empty: any; else only this job array's elements
  int64_t after_seq = 0;          // pagination cursor: tasks with seq > after_seq
  int limit = 100;                // 1..1000
  std::vector<std::string> metrics;  // the metrics whose latest values the page carries
};

struct TaskPage {
  std::vector<Task> tasks;     // ascending seq
  int64_t next_after_seq = 0;  // 0: no more pages
  // With TaskFilter::metrics: each listed task's latest value of those metrics (reported, or the
  // built-ins gpu_util, gpu_idle_s, runtime_s), for the tasks that have any.
  std::map<std::string, MetricValues> metrics;
};

// A job array (core/task_array.h): the elements of one submission, ids t-<seq> with consecutive
// seqs, named a-<first seq>.
struct TaskArrayView {
  std::string id;
  std::string project_id;
  ArraySpec spec;                                 // the indexes in element order, and the limit
  std::vector<std::string> task_ids;              // in the same order
  std::array<int64_t, kTaskStateCount> states{};  // how many elements are in each state
};

// A distributed job (core/task_job.h): how many members, and their placement rules.
struct JobSpec {
  int members = 0;             // 2..kMaxGangSize
  int members_per_node = 1;    // at most this many on one node
  std::string topology_label;  // empty: none
  Topology topology = Topology::kPreferred;
};

// A job as its members are: ids t-<first>..t-<first + members - 1>, named j-<first>.
struct JobView {
  std::string id;
  std::vector<Task> members;                     // in index order
  std::map<std::string, std::string> addresses;  // their nodes' addresses, by node name
  // The scheduler's last word on each member still waiting to be placed, by task id.
  std::map<std::string, std::string> pending_reasons;
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
  // A running task's workspace is snapshotted by its node before it is stopped (SnapshotService),
  // unless `discard`.
  virtual void StopTask(const Caller& caller, const std::string& id, bool discard,
                        Done<Task> done) = 0;
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

  // Job arrays. SubmitArray makes one task of `spec` per index of `array`, each knowing its array
  // and index (GPUPOOL_ARRAY_ID, GPUPOOL_ARRAY_INDEX), all in one durable batch; the checks of
  // SubmitTask apply to them all (max_tasks counts every element: refused whole, the quota named).
  // At most array.limit elements hold resources at once (the scheduler's queue keeps the others
  // waiting). Gangs cannot be arrays.
  virtual void SubmitArray(const Caller& caller, TaskSpec spec, ArraySpec array,
                           Done<TaskArrayView> done) = 0;
  // The array with its elements' states, read from the store once every write queued before the
  // call is durable; kUnavailable when the blocking-work queue is full.
  virtual void GetArray(const Caller& caller, const std::string& id, Done<TaskArrayView> done) = 0;
  // Stops every element that has not ended (one batch), then answers as GetArray.
  virtual void StopArray(const Caller& caller, const std::string& id, Done<TaskArrayView> done) = 0;
  // Queues every held element (one batch), then answers as GetArray.
  virtual void ReleaseArray(const Caller& caller, const std::string& id,
                            Done<TaskArrayView> done) = 0;

  // Distributed jobs. SubmitJob makes `job.members` tasks of `spec` in one durable batch, a gang
  // with the job's placement rules; a share of a GPU is refused (members use whole GPUs or a MIG
  // instance). When a member fails, is stopped or is lost, the others are stopped with it; when
  // it is re-queued (its node lost and the job restartable, or preempted), so are they.
  virtual void SubmitJob(const Caller& caller, TaskSpec spec, JobSpec job, Done<JobView> done) = 0;
  // Read as GetArray is.
  virtual void GetJob(const Caller& caller, const std::string& id, Done<JobView> done) = 0;
  virtual void StopJob(const Caller& caller, const std::string& id, Done<JobView> done) = 0;
  virtual void ReleaseJob(const Caller& caller, const std::string& id, Done<JobView> done) = 0;
};

}  // namespace gpupool::server
