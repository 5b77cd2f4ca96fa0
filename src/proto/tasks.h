// Wire types of tasks (docs/api.md "Tasks"): the submission, the task as the API shows it, its
// events, the list and its query, and what an agent reports of a task's state.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "proto/common.h"
#include "proto/datasets.h"
#include "proto/describe.h"
#include "proto/volumes.h"

namespace gpupool::proto {

// The longest max_runtime_ms a task may ask for: 365 days. Any deadline is a start time plus this,
// far from int64's end.
inline constexpr int64_t kMaxRuntimeMs = int64_t{365} * 24 * 3600 * 1000;

// What a task is asked to be: its command or image, resources and limits. The submission and the
// task as the pool keeps it both carry these fields.
struct TaskBody {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int32_t gpu_count = 0;
  int32_t gpu_milli = 0;
  int64_t gpu_mem_mib = 0;
  std::string mig_profile;
  std::vector<std::string> gpu_models;
  int32_t priority = 0;
  std::string image;
  std::vector<std::string> command;
  int64_t disk_gib = 0;
  int64_t max_runtime_ms = 0;
  std::string stop_when;
  bool restartable = false;
  std::vector<int32_t> ports;
  int64_t snapshot_every_ms = 0;
  std::string checkpoint_signal;
  int64_t checkpoint_timeout_ms = 0;
  std::vector<VolumeMountSpec> volumes;
  std::vector<DatasetMountSpec> datasets;

  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("name", s.name, {.max_bytes = 256, .format = Format::kText, .doc = "A label for people"});
    v("cpu_milli", s.cpu_milli, {.doc = "CPU in thousandths of a core"});
    v("memory_mib", s.memory_mib, {.doc = "Memory in MiB"});
    v("gpu_count", s.gpu_count, {.doc = "Whole GPUs, 0..8"});
    v("gpu_milli", s.gpu_milli, {.doc = "A share of one GPU in thousandths, 1..999"});
    v("gpu_mem_mib", s.gpu_mem_mib, {.doc = "GPU memory reserved with a share"});
    v("mig_profile", s.mig_profile, {.max_bytes = 64, .doc = "A MIG profile, e.g. 3g.40gb"});
    v("gpu_models", s.gpu_models,
      {.max_bytes = 128, .max_items = 64, .doc = "Allowed GPU models; empty: any"});
    v("priority", s.priority, {.doc = "0..1000; higher may preempt strictly lower"});
    v("image", s.image, {.max_bytes = 1024, .doc = "A container image (docker runtime)"});
    v("command", s.command,
      {.max_bytes = 64 * 1024, .max_items = 4096, .doc = "argv; the image's own when absent"});
    v("disk_gib", s.disk_gib, {.min = 0, .doc = "Scratch disk in GiB"});
    v("max_runtime_ms", s.max_runtime_ms,
      {.min = 0, .max = kMaxRuntimeMs, .doc = "Stopped after this long; 0: none"});
    v("stop_when", s.stop_when,
      {.max_bytes = 1024, .doc = "Stop condition on reported metrics, e.g. 'val_acc > 0.95'"});
    v("restartable", s.restartable, {.doc = "Queued again when its node is lost"});
    v("ports", s.ports,
      {.min = 1,
       .max = 65535,
       .max_items = 16,
       .doc = "TCP ports the task serves, each at the gateway's /t/<task>/<port>/"});
    v("snapshot_every_ms", s.snapshot_every_ms,
      {.min = 0,
       .max = kMaxRuntimeMs,
       .doc = "Snapshot the workspace this often while it runs (at least 10 s); 0: only when "
              "asked, and before a stop, preemption or drain"});
    v("checkpoint_signal", s.checkpoint_signal,
      {.max_bytes = 16,
       .one_of = kCheckpointSignals,
       .doc = "The signal that asks the task to checkpoint before a snapshot, sent only once it "
              "said it handles it (docs/snapshots.md); empty: SIGUSR1"});
    v("checkpoint_timeout_ms", s.checkpoint_timeout_ms,
      {.min = 0,
       .max = 3'600'000,
       .doc = "How long a snapshot waits for the task's checkpoint; 0: 30 s"});
    v("volumes", s.volumes,
      {.max_items = 16, .doc = "The project's volumes it mounts (docs/volumes.md)"});
    v("datasets", s.datasets,
      {.max_items = 8, .doc = "The datasets it mounts read-only (docs/datasets.md)"});
  }
};

// POST /v1/tasks.
struct TaskSubmit : TaskBody {
  std::optional<std::string> project;
  bool hold = false;
  std::optional<std::string> from_snapshot;

  static constexpr std::string_view kName = "TaskSubmit";
  static constexpr std::string_view kDoc =
      "A task to run: a command, an image, or both; CPU, memory and at most one GPU form "
      "(gpu_count whole GPUs, a gpu_milli share, or a mig_profile).";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v.RequireOneOf({"command", "image"});
    TaskBody::Describe(v, static_cast<Like<Self, TaskBody>&>(s));
    v("project", s.project,
      {.format = Format::kIdentifier, .doc = "Default: the caller's only project"});
    v("hold", s.hold, {.doc = "Created held: not scheduled until released"});
    v("from_snapshot", s.from_snapshot,
      {.format = Format::kIdentifier,
       .doc = "Its workspace starts as this snapshot's (one of the project's)"});
  }
};

// POST /v1/arrays: one submission of many tasks (Slurm's --array).
struct TaskArraySubmit : TaskSubmit {
  std::string array;

  static constexpr std::string_view kName = "TaskArraySubmit";
  static constexpr std::string_view kDoc =
      "A job array: one task per index of `array`, each with GPUPOOL_ARRAY_ID and "
      "GPUPOOL_ARRAY_INDEX in its environment, created in one durable write.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    TaskSubmit::Describe(v, static_cast<Like<Self, TaskSubmit>&>(s));
    v("array", s.array,
      {.required = true,
       .max_bytes = 4096,
       .doc = "The indexes, as Slurm writes them: 0-99, 1,3,5-9, 0-20:5; %N after them runs at "
              "most N at once (0-99%10). At most 10000 indexes in 0..999999"});
  }
};

// POST /v1/jobs: a distributed job of `nodes` members (torchrun's nodes), placed together.
struct JobSubmit : TaskSubmit {
  int32_t nodes = 0;
  int32_t members_per_node = 1;
  std::string topology_label;
  std::string topology = "preferred";

  static constexpr std::string_view kName = "JobSubmit";
  static constexpr std::string_view kDoc =
      "A distributed job: `nodes` members, each the task described (whole GPUs or a MIG "
      "instance, not a share), placed all together or not at all, each with the rendezvous "
      "of torchrun in its environment (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, …); when "
      "one fails, is stopped or is lost, the others are stopped too (or, when restartable and "
      "a node was lost, the whole job is queued again).";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    TaskSubmit::Describe(v, static_cast<Like<Self, TaskSubmit>&>(s));
    v("nodes", s.nodes,
      {.required = true, .min = 2, .max = 4096, .doc = "How many members the job has"});
    v("members_per_node", s.members_per_node,
      {.min = 1,
       .max = 4096,
       .doc = "At most this many members on one node (1: each on a node of its own)"});
    v("topology_label", s.topology_label,
      {.max_bytes = 256,
       .doc = "A node label naming a network domain (rack, InfiniBand island): the members are "
              "placed under one value of it (see topology); empty: anywhere"});
    v("topology", s.topology,
      {.one_of = kTopologies,
       .doc = "required: under one value of topology_label or not at all (the job waits); "
              "preferred: anywhere when no value has room"});
  }
};

struct JobMember {
  int32_t index = 0;
  std::string task;
  std::string state;
  std::string reason;
  std::string node;
  std::string address;
  int32_t exit_code = 0;
  std::string ended_by;

  static constexpr std::string_view kName = "JobMember";
  static constexpr std::string_view kDoc = "One member of a distributed job.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("index", s.index, {.doc = "Its RANK (0: the rendezvous host)"});
    v("task", s.task, {.doc = "Its task id (t-<first seq + index>)"});
    v("state", s.state, {.one_of = kTaskStates});
    v("reason", s.reason);
    v("node", s.node, {.doc = "Where it runs or last ran; empty: never placed"});
    v("address", s.address, {.doc = "Its node's address, as other members reach it"});
    v("exit_code", s.exit_code);
    v("ended_by", s.ended_by,
      {.doc = "The member whose end ended this one's run (fate sharing); empty: its own"});
  }
};

// The answer of POST /v1/jobs and of a job's read, stop and release.
struct Job {
  std::string id;
  std::string project;
  std::string name;
  std::string state;
  std::string reason;
  bool held = false;
  int32_t exit_code = 0;
  std::string first_failed;
  int32_t nodes = 0;
  int32_t members_per_node = 0;
  std::string topology_label;
  std::string topology;
  std::string master_addr;
  int32_t master_port = 0;
  std::vector<JobMember> members;

  static constexpr std::string_view kName = "Job";
  static constexpr std::string_view kDoc = "A distributed job and its members.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("id", s.id, {.doc = "j-<seq>: the seq of its member 0"});
    v("project", s.project);
    v("name", s.name);
    v("state", s.state,
      {.one_of = kTaskStates,
       .doc = "pending until every member is placed; running once all run; succeeded when all "
              "succeeded; else the state of the member that ended first (failed, stopped, "
              "lost)"});
    v("reason", s.reason, {.doc = "Why: the first-ended member's reason, or the pending one's"});
    v("held", s.held,
      {.doc = "Submitted with hold and not released: its members wait outside the queue"});
    v("exit_code", s.exit_code, {.doc = "The first failed member's exit code"});
    v("first_failed", s.first_failed,
      {.doc = "The task id of the member whose end ended the job; empty: none"});
    v("nodes", s.nodes, {.doc = "How many members it has"});
    v("members_per_node", s.members_per_node);
    v("topology_label", s.topology_label);
    v("topology", s.topology, {.one_of = kTopologies});
    v("master_addr", s.master_addr, {.doc = "Member 0's node address (MASTER_ADDR) while placed"});
    v("master_port", s.master_port, {.doc = "MASTER_PORT of the current run; 0: not placed"});
    v("members", s.members, {.max_items = 4096, .doc = "In index order"});
  }
};

struct StateCount {
  std::string state;
  int64_t count = 0;
  static constexpr std::string_view kName = "StateCount";
  static constexpr std::string_view kDoc = "How many of an array's elements are in a state.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("state", s.state, {.one_of = kTaskStates});
    v("count", s.count);
  }
};

// The answer of POST /v1/arrays and of an array's stop and release.
struct TaskArray {
  std::string id;
  std::string project;
  std::string array;
  int32_t limit = 0;
  std::vector<std::string> tasks;
  std::vector<StateCount> states;

  static constexpr std::string_view kName = "TaskArray";
  static constexpr std::string_view kDoc = "A job array and its elements.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("id", s.id, {.doc = "a-<seq>: the seq of its first element"});
    v("project", s.project);
    v("array", s.array, {.doc = "Its indexes in canonical form, with %N when limited"});
    v("limit", s.limit, {.doc = "At most this many elements run at once; 0: no limit"});
    v("tasks", s.tasks,
      {.max_items = 10'000, .doc = "The elements' task ids, in index order (seq order)"});
    v("states", s.states, {.doc = "How many elements are in each state (those with any)"});
  }
};

struct Placement {
  std::string node;
  std::vector<int32_t> gpus;
  int32_t milli_per_gpu = 0;
  int64_t gpu_mem_mib = 0;
  std::optional<std::string> mig_profile;
  std::optional<int32_t> mig_start;
  int32_t rendezvous_port = 0;

  static constexpr std::string_view kName = "Placement";
  static constexpr std::string_view kDoc = "Where a bound task sits: its node and exact GPUs.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("node", s.node);
    v("gpus", s.gpus, {.doc = "GPU indexes on the node"});
    v("milli_per_gpu", s.milli_per_gpu);
    v("gpu_mem_mib", s.gpu_mem_mib);
    v("mig_profile", s.mig_profile, {.nullable = true, .doc = "null: not a MIG instance"});
    v("mig_start", s.mig_start, {.nullable = true, .doc = "The instance's first memory slice"});
    v("rendezvous_port", s.rendezvous_port,
      {.doc = "A job member's MASTER_PORT for this run; 0: not a job member"});
  }
};

struct Task : TaskBody {
  std::string id;
  int64_t seq = 0;
  std::string project;
  std::string user;
  std::string state;
  std::string reason;
  bool held = false;
  std::string array_id;
  int64_t array_index = 0;
  int32_t array_limit = 0;
  std::string job_id;
  int32_t member_index = 0;
  std::string ended_by;
  std::optional<Placement> placement;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  int64_t bound_ms = 0;
  int64_t started_ms = 0;
  int64_t finished_ms = 0;
  int64_t billed_until_ms = 0;
  int32_t exit_code = 0;
  int32_t preemptions = 0;
  int32_t run = 0;
  std::string resume_from;
  int64_t work_lost_ms = 0;

  static constexpr std::string_view kName = "Task";
  static constexpr std::string_view kDoc = "A task as the pool keeps it.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("id", s.id, {.doc = "t-<seq>"});
    v("seq", s.seq, {.doc = "Submission order"});
    v("project", s.project);
    v("user", s.user, {.doc = "Who submitted it"});
    v("state", s.state, {.one_of = kTaskStates});
    v("reason", s.reason, {.doc = "Why it is in this state"});
    TaskBody::Describe(v, static_cast<Like<Self, TaskBody>&>(s));
    v("held", s.held, {.doc = "Pending but kept out of the queue until released"});
    v("array_id", s.array_id, {.doc = "The job array it is an element of (a-<seq>); empty: none"});
    v("array_index", s.array_index, {.doc = "Its index in the array (GPUPOOL_ARRAY_INDEX)"});
    v("array_limit", s.array_limit,
      {.doc = "The array's %N: at most N of its elements run at once; 0: no limit"});
    v("job_id", s.job_id, {.doc = "The distributed job it is a member of (j-<seq>); empty: none"});
    v("member_index", s.member_index, {.doc = "Its index (RANK) in the job"});
    v("ended_by", s.ended_by,
      {.doc = "The member of its job whose end ended this task's run; empty: its own"});
    v("placement", s.placement, {.nullable = true, .doc = "Where it is or last was bound"});
    v("created_ms", s.created_ms);
    v("updated_ms", s.updated_ms);
    v("bound_ms", s.bound_ms, {.doc = "Resources reserved since (0: not bound)"});
    v("started_ms", s.started_ms);
    v("finished_ms", s.finished_ms);
    v("billed_until_ms", s.billed_until_ms);
    v("exit_code", s.exit_code);
    v("preemptions", s.preemptions);
    v("run", s.run, {.doc = "Its runs so far: each placement starts the next"});
    v("resume_from", s.resume_from,
      {.doc = "The snapshot its next (or current) run starts from; empty: a fresh workspace"});
    v("work_lost_ms", s.work_lost_ms,
      {.doc = "Its last interruption's work after that snapshot, which it does again"});
  }
};

struct PendingNodes {
  std::string reason;
  int32_t count = 0;
  static constexpr std::string_view kName = "PendingNodes";
  static constexpr std::string_view kDoc = "How many nodes rejected a pending task, and why.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("reason", s.reason);
    v("count", s.count);
  }
};

// GET /v1/tasks/{id}: the task and what the scheduler says of it while it waits.
struct TaskDetail : Task {
  int64_t queue_position = 0;
  std::string pending_reason;
  std::vector<PendingNodes> pending_nodes;
  int64_t runtime_ms = 0;
  std::map<std::string, std::string> port_urls;

  static constexpr std::string_view kName = "TaskDetail";
  static constexpr std::string_view kDoc = "A task with its place in the queue and its runtime.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    Task::Describe(v, static_cast<Like<Self, Task>&>(s));
    v("queue_position", s.queue_position, {.doc = "1-based among queued tasks; 0: not queued"});
    v("pending_reason", s.pending_reason, {.doc = "The last scheduling pass's reason"});
    v("pending_nodes", s.pending_nodes);
    v("runtime_ms", s.runtime_ms,
      {.doc = "Time actually run, as of the answer: its current (or last) run's start to its end, "
              "or to now while it runs; 0 before it starts"});
    v("port_urls", s.port_urls,
      {.doc = "Where the gateway serves each declared port, by port number: an origin of the "
              "port's own (http(s)://<port>--<task>.<domain>/) when the server has a "
              "--gateway-domain, else the path /t/<task>/<port>/ on the server"});
  }
};

// POST /v1/tasks/{id}/ports/{port}/link.
struct GatewayLinkCreate {
  int64_t ttl_s = 300;
  static constexpr std::string_view kName = "GatewayLinkCreate";
  static constexpr std::string_view kDoc = "How long a port's signed link should work.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("ttl_s", s.ttl_s, {.min = 1, .max = 900, .doc = "Seconds, at most 15 minutes"});
  }
};

struct GatewayLink {
  std::string url;
  int64_t expires_ms = 0;
  static constexpr std::string_view kName = "GatewayLink";
  static constexpr std::string_view kDoc =
      "A signed link to a task's port through the gateway (what gpupool open prints).";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("url", s.url,
      {.doc = "The port's URL (TaskDetail.port_urls: an origin of its own, or a path on the "
              "server) with the gpupool_link parameter"});
    v("expires_ms", s.expires_ms);
  }
};

struct TaskListQuery {
  std::string project;
  std::vector<std::string> state;
  std::string node;
  std::string array;
  std::vector<std::string> metrics;
  int32_t limit = 100;
  std::optional<std::string> after;

  static constexpr std::string_view kName = "TaskListQuery";
  static constexpr std::string_view kDoc = "Which tasks to list.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("project", s.project, {.format = Format::kIdentifier, .doc = "Only this project's"});
    v("state", s.state, {.one_of = kTaskStates, .doc = "Comma-separated states"});
    v("node", s.node, {.format = Format::kIdentifier, .doc = "Only those bound to this node"});
    v("array", s.array,
      {.format = Format::kIdentifier, .doc = "Only this job array's elements (a-<seq>)"});
    v("metrics", s.metrics,
      {.max_bytes = 128,
       .max_items = 32,
       .doc = "Comma-separated metric names: the answer's metrics has each task's latest value "
              "of those it reported (and of the built-ins)"});
    v("limit", s.limit, {.min = 1, .max = 1000, .doc = "Page size"});
    v("after", s.after, {.max_bytes = 32, .doc = "The next_after of the previous page (opaque)"});
  }
};

struct TaskMetricValues {
  std::string task_id;
  std::map<std::string, double> values;
  static constexpr std::string_view kName = "TaskMetricValues";
  static constexpr std::string_view kDoc = "A task's latest value of each metric asked for.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task_id", s.task_id);
    v("values", s.values, {.doc = "Only the metrics it has a value of"});
  }
};

struct TaskList {
  std::vector<Task> tasks;
  std::vector<TaskMetricValues> metrics;
  std::optional<std::string> next_after;
  static constexpr std::string_view kName = "TaskList";
  static constexpr std::string_view kDoc = "A page of tasks in submission order.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("tasks", s.tasks);
    v("metrics", s.metrics,
      {.doc = "With metrics= in the query: the listed tasks' latest values, in the tasks' order"});
    v("next_after", s.next_after,
      {.nullable = true, .doc = "Pass as after= for the next page (opaque); null: no more"});
  }
};

struct TaskEvent {
  std::string task;
  int64_t time_ms = 0;
  std::string from;
  std::string to;
  std::string reason;
  static constexpr std::string_view kName = "TaskEvent";
  static constexpr std::string_view kDoc = "One transition of a task's state.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task", s.task);
    v("time_ms", s.time_ms);
    v("from", s.from, {.one_of = kTaskStates});
    v("to", s.to, {.one_of = kTaskStates});
    v("reason", s.reason);
  }
};

struct TaskEventList {
  std::vector<TaskEvent> events;
  static constexpr std::string_view kName = "TaskEventList";
  static constexpr std::string_view kDoc = "A task's transitions, oldest first.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("events", s.events);
  }
};

struct Deleted {
  std::string id;
  bool deleted = true;
  static constexpr std::string_view kName = "Deleted";
  static constexpr std::string_view kDoc = "What was deleted.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("id", s.id);
    v("deleted", s.deleted);
  }
};

// POST /v1/agent/tasks/{id}/status.
struct TaskReport {
  std::string state;
  std::optional<int64_t> time_ms;
  int32_t exit_code = 0;
  std::string reason;
  int64_t bound_ms = 0;
  static constexpr std::string_view kName = "TaskReport";
  static constexpr std::string_view kDoc = "An agent's report of a task's state on its node.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("state", s.state, {.required = true, .one_of = kTaskStates});
    v("time_ms", s.time_ms, {.min = 0, .doc = "When it happened; default: now"});
    v("exit_code", s.exit_code);
    v("reason", s.reason);
    v("bound_ms", s.bound_ms,
      {.min = 0, .doc = "The binding the report is about (another binding's is refused)"});
  }
};

}  // namespace gpupool::proto
