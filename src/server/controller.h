// Controller: implements every service of services.h. It keeps the working state in memory under
// one mutex, writes every change through the Store (acknowledging a request only once its write
// is durable), and runs the scheduling loop: snapshot → ScheduleOnce → plan applier that
// re-checks each placement against the latest state. It also meters bound tasks into the ledger
// and enforces quotas, balances and max runtimes. Memory holds the live tasks and the finished
// ones for ControllerOptions::retain_finished_ms after their end; older ones are read from the
// store. Blocking work (reads from the store, task files, output deletion) runs on its
// BlockingExecutor, never on the caller's thread nor on the store's callback thread.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "meter/price_table.h"
#include "sched/cluster_snapshot.h"
#include "sched/cluster_state.h"
#include "sched/policy.h"
#include "sched/schedule.h"
#include "server/blocking_executor.h"
#include "server/chunk_store.h"
#include "server/disk_reserve.h"
#include "server/event_hub.h"
#include "server/event_service.h"
#include "server/metrics.h"
#include "server/node_files.h"
#include "server/secrets.h"
#include "server/services.h"
#include "server/task_files.h"
#include "server/task_output.h"
#include "store/store.h"

namespace gpupool::server {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() = 0;
};

// Milliseconds since the Unix epoch from the system clock.
class SystemClock : public Clock {
 public:
  int64_t NowMs() override;
};

struct ControllerOptions {
  std::string policy = "default";
  int64_t meter_interval_ms = 60'000;  // how often bound tasks are billed up to now
  int64_t nonce_window_ms = 300'000;   // signed requests are valid ±this; nonces kept as long
  int64_t typical_window = 2000;       // recent submissions the fragmentation model learns from
  int64_t node_timeout_ms = 10'000;    // a ready node silent this long is lost
  std::string output_dir;              // tasks' output (logs, metric lines); "": none kept
  int64_t max_output_bytes = int64_t{256} << 20;  // per stream of a task
  // A task that ended is taken to have shipped all its output after this long, even without its
  // agent's word (the node may be gone).
  int64_t output_grace_ms = 5'000;
  // The tasks' files (FileService); null: the file calls answer kUnavailable. Must outlive the
  // controller.
  TaskFiles* task_files = nullptr;
  // The snapshots' chunks (SnapshotService); null: snapshots are refused (kUnavailable) and
  // nodes are never asked for one. Must outlive the controller.
  ChunkStore* chunks = nullptr;
  // How long a node has to store a snapshot it was asked for, beyond the task's checkpoint
  // timeout; past it the request fails and a task taken off the node is placed again without it.
  int64_t snapshot_grace_ms = 120'000;
  // Move instead of kill (`gpupool server --moves`, docs/snapshots.md "Moves"): a task that fits
  // nowhere, even by preemption, may take a node once running tasks there that are snapshotted on
  // stop (so never without `chunks`) move elsewhere: each is snapshotted, taken off its node and
  // queued again to resume from that snapshot (sched::ScheduleOptions::allow_moves). Only tasks of
  // at most the waiting task's priority move, unless move_any_priority.
  bool allow_moves = false;
  bool move_any_priority = false;
  // The blocking-work executor: its threads, and how many jobs may wait (past that, requests
  // that need it are refused with kUnavailable).
  int blocking_threads = 2;
  size_t blocking_queue = 256;
  // A finished task stays in memory this long after its end, then only the store has it (its
  // usage history, output and file caches go; reads of it come from the store).
  int64_t retain_finished_ms = 3'600'000;
  // Console sessions one access key may have open; opening one more drops its oldest.
  size_t max_sessions_per_key = 64;
  // The live events' hub: queue bound per subscriber, keep-alive interval.
  EventHubOptions events;
  // The free bytes of the data dir's file system (os::FreeBytes); null: not watched. Requests
  // that change state (but deletions), upload chunks and tasks' output are refused
  // (kInsufficientStorage) while less than disk_reserve_bytes would stay free (disk_reserve.h).
  DiskReserve::FreeBytes free_bytes;
  int64_t disk_reserve_bytes = int64_t{64} << 20;
  // Signed requests each access key may make: a token bucket of `key_burst` requests refilled
  // at `key_rate_per_s` (0: no limit). Past it a request is refused (kResourceExhausted: 429,
  // with when to retry) before its nonce is kept, so the nonces one key holds stay below
  // about rate × 2 windows + burst. Sized for a busy CLI user and for an agent (under 3/s).
  double key_rate_per_s = 100;
  int64_t key_burst = 1000;
  // The nonce cache's bound (≈ 60 bytes an entry): a signed request that would grow it past this
  // is refused (kUnavailable: 503, with when the oldest nonce expires), never served by
  // forgetting a nonce, which would let that request be replayed.
  size_t max_nonces = 2'000'000;
};

class Controller : public AuthService,
                   public TaskService,
                   public NodeService,
                   public AgentService,
                   public AccountService,
                   public BillingService,
                   public TelemetryService,
                   public FileService,
                   public SnapshotService,
                   public VolumeService,
                   public DatasetService,
                   public EventService,
                   public OperationsService {
 public:
  // Rebuilds the in-memory state from `store` (which must outlive the controller). Tasks that
  // held resources are bound again where they were; nothing is scheduled twice.
  static Result<std::unique_ptr<Controller>> Open(store::Store& store, Clock& clock,
                                                  SecretBox secrets, ControllerOptions options);
  ~Controller() override;

  // On the first start (an empty store) creates the admin user, the "default" project and an
  // access key for the admin; returns that key, or nullopt when the store was bootstrapped before.
  Result<std::optional<NewAccessKey>> Bootstrap();

  // Starts / stops the scheduling loop thread (Stop waits for the pass in progress).
  void Start();
  void Stop();

  // One scheduling pass now; returns how many tasks it placed. The loop calls it; tests too.
  int SchedulePass();
  // Marks nodes lost whose heartbeats stopped (their tasks lost, restartable ones re-queued),
  // bills every task holding resources up to now, stops tasks past their max runtime and the
  // running tasks of projects whose balance ran out more than their grace ago, and lets go of the
  // tasks that finished more than retain_finished_ms ago; drops the expired console sessions.
  // Its cost follows the live tasks, the tasks let go and the sessions, not the finished tasks.
  void HousekeepingPass();

  // --- the services ---
  Result<KeyGrant> LookupKey(const std::string& access_key) override;
  Status ConsumeNonce(const std::string& access_key, const std::string& nonce, int64_t timestamp_ms,
                      bool durable) override;
  // Console sessions (controller_sessions.cc).
  void CreateSession(const Caller& caller, int64_t ttl_ms, Done<NewSession> done) override;
  Result<SessionGrant> LookupSession(const std::string& cookie) override;
  Result<Caller> LookupTaskToken(const std::string& token) override;
  void DeleteSession(const std::string& cookie) override;
  void SubmitTask(const Caller& caller, TaskSpec spec, Done<Task> done) override;
  void GetTask(const Caller& caller, const std::string& id, Done<TaskView> done) override;
  void ListTasks(const Caller& caller, const TaskFilter& filter, Done<TaskPage> done) override;
  void StopTask(const Caller& caller, const std::string& id, bool discard,
                Done<Task> done) override;
  void ReleaseTask(const Caller& caller, const std::string& id, Done<Task> done) override;
  void DeleteTask(const Caller& caller, const std::string& id, DoneStatus done) override;
  void TaskEvents(const Caller& caller, const std::string& id,
                  Done<std::vector<TaskEvent>> done) override;
  // Job arrays (controller_arrays.cc).
  void SubmitArray(const Caller& caller, TaskSpec spec, ArraySpec array,
                   Done<TaskArrayView> done) override;
  void GetArray(const Caller& caller, const std::string& id, Done<TaskArrayView> done) override;
  void StopArray(const Caller& caller, const std::string& id, Done<TaskArrayView> done) override;
  void ReleaseArray(const Caller& caller, const std::string& id, Done<TaskArrayView> done) override;
  // Distributed jobs (controller_jobs.cc).
  void SubmitJob(const Caller& caller, TaskSpec spec, JobSpec job, Done<JobView> done) override;
  void GetJob(const Caller& caller, const std::string& id, Done<JobView> done) override;
  void StopJob(const Caller& caller, const std::string& id, Done<JobView> done) override;
  void ReleaseJob(const Caller& caller, const std::string& id, Done<JobView> done) override;
  std::vector<NodeView> ListNodes(const Caller& caller) override;
  Result<NodeView> GetNode(const Caller& caller, const std::string& name) override;
  void SetCordon(const Caller& caller, const std::string& name, bool cordoned,
                 Done<NodeView> done) override;
  void DrainNode(const Caller& caller, const std::string& name, Done<NodeView> done) override;
  void RegisterNode(const Caller& caller, Node node, Done<NodeView> done) override;
  Result<int64_t> Heartbeat(const Caller& caller, const std::string& name,
                            std::vector<std::string> datasets) override;
  void WatchAssignments(const Caller& caller, const std::string& node, int64_t after_version,
                        int64_t wait_ms, Done<NodeAssignments> done) override;
  void ReportTask(const Caller& caller, const std::string& id, TaskState to, int64_t time_ms,
                  int exit_code, std::string reason, int64_t bound_ms, Done<Task> done) override;
  // Snapshots (controller_snapshots.cc).
  void SnapshotTask(const Caller& caller, const std::string& task_id, bool image,
                    Done<TaskSnapshot> done) override;
  void ResumeTask(const Caller& caller, const std::string& task_id, const std::string& snapshot,
                  Done<Task> done) override;
  void ListSnapshots(const Caller& caller, const std::string& task_id, const std::string& project,
                     Done<std::vector<TaskSnapshot>> done) override;
  void GetSnapshot(const Caller& caller, const std::string& id, Done<TaskSnapshot> done) override;
  void DeleteSnapshot(const Caller& caller, const std::string& id, DoneStatus done) override;
  void CommitSnapshot(const Caller& caller, const std::string& task_id, SnapshotCapture capture,
                      Done<TaskSnapshot> done) override;
  void FailSnapshot(const Caller& caller, const std::string& task_id, int32_t run,
                    SnapshotTrigger trigger, int64_t request, std::string error,
                    DoneStatus done) override;
  void FindMissingChunks(const Caller& caller, const std::string& task_id,
                         std::vector<std::string> chunks,
                         Done<std::vector<std::string>> done) override;
  void PutChunk(const Caller& caller, const std::string& task_id, const std::string& sha256,
                std::string bytes, Done<bool> done) override;
  void GetChunk(const Caller& caller, const std::string& task_id, const std::string& sha256,
                Done<std::string> done) override;
  // Volumes (controller_volumes.cc).
  void CreateVolume(const Caller& caller, VolumeSpec spec, Done<VolumeInfo> done) override;
  void ListVolumes(const Caller& caller, const std::string& project,
                   Done<std::vector<VolumeInfo>> done) override;
  void GetVolume(const Caller& caller, const std::string& volume, Done<VolumeInfo> done) override;
  void ResizeVolume(const Caller& caller, const std::string& volume, int64_t size_bytes,
                    Done<VolumeInfo> done) override;
  void DeleteVolume(const Caller& caller, const std::string& volume,
                    Done<std::string> done) override;
  void VolumeRemoved(const Caller& caller, const std::string& id, DoneStatus done) override;
  // Datasets (controller_datasets.cc).
  void CreateDataset(const Caller& caller, const std::string& name, const std::string& project_id,
                     Done<DatasetInfo> done) override;
  void ListDatasets(const Caller& caller, const std::string& project,
                    Done<std::vector<DatasetInfo>> done) override;
  void GetDataset(const Caller& caller, const std::string& dataset,
                  Done<DatasetInfo> done) override;
  void PublishDataset(const Caller& caller, const std::string& dataset, bool published,
                      Done<DatasetInfo> done) override;
  void DeleteDataset(const Caller& caller, const std::string& dataset,
                     Done<std::string> done) override;
  void DeleteDatasetVersion(const Caller& caller, const std::string& dataset, int32_t version,
                            Done<DatasetInfo> done) override;
  void FindDatasetChunks(const Caller& caller, const std::string& dataset,
                         std::vector<std::string> chunks,
                         Done<std::vector<std::string>> done) override;
  void PutDatasetChunk(const Caller& caller, const std::string& dataset, const std::string& sha256,
                       std::string bytes, Done<bool> done) override;
  void PushDatasetVersion(const Caller& caller, const std::string& dataset, DatasetPush push,
                          Done<DatasetInfo> done) override;
  void GetDatasetChunk(const Caller& caller, const std::string& dataset_id,
                       const std::string& sha256, Done<std::string> done) override;
  void CreateProject(const Caller& caller, Project project, Done<Project> done) override;
  void UpdateProject(const Caller& caller, Project project, Done<Project> done) override;
  Result<std::vector<Project>> ListProjects(const Caller& caller) override;
  Result<Project> GetProject(const Caller& caller, const std::string& id) override;
  void CreateUser(const Caller& caller, User user, Done<User> done) override;
  void UpdateUser(const Caller& caller, User user, Done<User> done) override;
  Result<std::vector<User>> ListUsers(const Caller& caller) override;
  void CreateAccessKey(const Caller& caller, const std::string& user_id, std::string description,
                       Done<NewAccessKey> done) override;
  Result<std::vector<AccessKey>> ListAccessKeys(const Caller& caller,
                                                const std::string& user_id) override;
  void RevokeAccessKey(const Caller& caller, const std::string& access_key,
                       Done<AccessKey> done) override;
  void AddSshKey(const Caller& caller, const std::string& user_id, std::string name,
                 const std::string& public_key, Done<SshKey> done) override;
  Result<std::vector<SshKey>> ListSshKeys(const Caller& caller,
                                          const std::string& user_id) override;
  void RemoveSshKey(const Caller& caller, const std::string& user_id, const std::string& name,
                    Done<SshKey> done) override;
  std::vector<std::string> SshKeysOfProject(const Caller& caller,
                                            const std::string& project_id) override;
  // Join tokens and agent credentials (controller_join.cc).
  void CreateJoinToken(const Caller& caller, std::string description, int64_t expires_in_ms,
                       Done<NewJoinToken> done) override;
  Result<std::vector<JoinTokenView>> ListJoinTokens(const Caller& caller) override;
  void ListAudit(const Caller& caller, const AuditFilter& filter,
                 Done<std::vector<AuditEntry>> done) override;
  void RevokeJoinToken(const Caller& caller, const std::string& id,
                       Done<JoinTokenView> done) override;
  void JoinNode(const std::string& token, const std::string& node,
                Done<AgentCredentials> done) override;
  Result<Balance> GetBalance(const Caller& caller, const std::string& project_id) override;
  void Credit(const Caller& caller, const std::string& project_id, int64_t amount_micros,
              std::string note, Done<LedgerEntry> done) override;
  void Ledger(const Caller& caller, const std::string& project_id, int64_t from_ms, int64_t to_ms,
              int64_t offset, int64_t limit, Done<std::vector<LedgerEntry>> done) override;
  void GetTaskCost(const Caller& caller, const std::string& task_id, Done<TaskCost> done) override;
  void GetStatement(const Caller& caller, const std::string& project_id, int64_t from_ms,
                    int64_t to_ms, Done<Statement> done) override;
  Result<std::vector<Price>> ListPrices(const Caller& caller) override;
  void SetPrice(const Caller& caller, Price price, Done<Price> done) override;
  void PushTelemetry(const Caller& caller, NodeTelemetry batch,
                     Done<std::vector<OutputOffsets>> done) override;
  void ReadTaskLog(const Caller& caller, const std::string& id, LogRequest request,
                   Done<LogSlice> done) override;
  void GetTaskMetrics(const Caller& caller, const std::string& id, int64_t from_ms, int64_t to_ms,
                      Resolution resolution, Done<TaskMetrics> done) override;
  Result<NodeMetrics> GetNodeMetrics(const Caller& caller, const std::string& name, int64_t from_ms,
                                     int64_t to_ms, Resolution resolution) override;
  Result<UsageOverview> GetUsage(const Caller& caller) override;
  void NoteActivity(const std::string& id) override;
  // Task files (controller_files.cc).
  void ListFiles(const Caller& caller, const std::string& task_id, const std::string& path,
                 const std::string& node,
                 Done<FileListing> done) override;
  void ReadFile(const Caller& caller, const std::string& task_id, const std::string& path,
                int64_t offset, int64_t length, Done<FileChunk> done) override;
  void UploadStatus(const Caller& caller, const std::string& task_id, const std::string& path,
                    const std::string& node, Done<int64_t> done) override;
  void AppendUpload(const Caller& caller, const std::string& task_id, const std::string& path,
                    const std::string& node, int64_t offset, std::optional<int64_t> size,
                    std::string bytes, Done<int64_t> done) override;
  void CommitUpload(const Caller& caller, const std::string& task_id, const std::string& path,
                    const std::string& node, int64_t size, std::string sha256,
                    Done<StoredFile> done) override;
  void AttachNodeFiles(std::weak_ptr<NodeFiles> node_files) override;
  // Live events (controller_events.cc).
  void CheckWatch(const Caller& caller, const EventInterest& interest, DoneStatus done) override;
  uint64_t Subscribe(const Caller& caller, EventInterest interest,
                     std::shared_ptr<EventSink> sink) override;
  void Unsubscribe(uint64_t id) override;
  std::string MetricsText() override;
  void ObserveRequest(const std::string& route, int status, int64_t micros) override;
  // Where /metrics reads the HTTP server's connections (called at each scrape, with no lock of
  // the controller held). Set before the server serves, cleared after it stopped: a scrape
  // must not run meanwhile.
  void SetConnectionFigures(std::function<ConnectionFigures()> figures);
  bool Healthy() override;
  Status CheckDiskSpace() override;

 private:
  friend class PlanApplierTest;      // drives ApplyPlan with a plan made before the state changed
  friend class ControllerLocksTest;  // holds mu_ while other threads call in
  friend class ControllerRetentionTest;  // checks the indexes of the tasks in memory
  friend class ControllerSessionsTest;   // counts the sessions in memory

  Controller(store::Store& store, Clock& clock, SecretBox secrets, ControllerOptions options);
  Status Rebuild(store::Snapshot snapshot);

  // Everything below runs with mu_ held.
  struct ProjectUse {
    int64_t gpu_milli = 0;     // held by its bound tasks
    int64_t active_tasks = 0;  // non-terminal tasks
    int64_t credits_micros = 0;
    int64_t usage_micros = 0;
    int64_t exhausted_since_ms = 0;  // balance ≤ 0 while billing is on; 0: not exhausted
  };
  using PendingKey = std::tuple<int, int64_t>;  // (−priority, seq): the queue order
  // A job array while any of its elements is in memory (kept by Index and Unindex).
  struct ArrayUse {
    std::string project_id;
    int32_t limit = 0;      // %N; 0: none
    int64_t last_seq = 0;   // its elements' seqs are in [first seq, last_seq]
    int64_t in_memory = 0;  // elements in tasks_
    int64_t holding = 0;    // elements holding resources (what the limit counts)
  };

  // The credential of `task`'s current binding (controller_task_tokens.cc).
  std::string TaskToken(const Task& task) const;
  // SubmitTask's and SubmitArray's checks of what a caller sent, before the lock.
  static Status CheckSpec(const TaskSpec& spec);
  // Their checks against the pool and the project for `count` new tasks (the GPU models and MIG
  // profile in the pool, max_tasks, max_gpu_milli, the balance); the project's id. Requires mu_.
  // Resolves spec.volumes and spec.datasets in place (ResolveMounts, ResolveDatasetMounts).
  Result<std::string> CheckSubmission(const Caller& caller, TaskSpec& spec, int64_t count);
  // The task t-<seq> of `spec` as submitted now, `note` after its reason (does not change the
  // state).
  Task NewTask(const Caller& caller, const std::string& project_id, const TaskSpec& spec,
               int64_t seq, int64_t now_ms, const std::string& note = "") const;
  // A new task into memory and, unless held, the queue (after its batch passed ValidateBatch).
  // Requires mu_.
  void Admit(Task task);
  // A submission's new tasks (each with its "submitted" event) into `batch`, checked with
  // store::ValidateBatch and, when valid, admitted; nothing is admitted when one is refused.
  // Requires mu_.
  Status AdmitNew(std::vector<Task> tasks, store::WriteBatch& batch);
  // Whether the scheduler may queue one more element of `task`'s array in this pass, given the
  // elements already queued in it (`planned`, by array); sets the pending reason when not.
  // Requires mu_.
  bool ArrayAdmits(const Task& task, std::map<std::string, int64_t>& planned);
  // The array `id` as the store has it, for `caller`, once every write queued so far is durable
  // (on the blocking-work executor). NotFound when the caller sees none of its elements.
  void ReadArray(const Caller& caller, const std::string& id, Done<TaskArrayView> done);
  // Applies `change` to each element of the array `id` that is in memory, as one batch, then
  // answers with ReadArray. NotFound as for ReadArray. Takes mu_.
  void ChangeArray(const Caller& caller, const std::string& id,
                   const std::function<void(Task&, store::WriteBatch&)>& change,
                   Done<TaskArrayView> done);

  Task* FindTask(const std::string& id);
  // Who sees a task: the members of its project (admins: every task), and a node's agent the
  // tasks on or last on its node, whatever their project.
  static bool MayView(const Caller& caller, const Task& task);
  // The task if `caller` may see it (MayView) in memory; NotFound otherwise (never reveals
  // another project's task). A task that left memory is not found here: see ReadTask.
  Result<Task*> VisibleTask(const Caller& caller, const std::string& id);
  // A copy of the task `id` as `caller` may see it: from memory (`done` runs at once, on the
  // caller's thread), or for a task that left memory from the store, once every write queued so
  // far is durable, on the blocking-work executor (ReadHistory). NotFound by the same rule on
  // both paths. Call without mu_ held.
  void ReadTask(const Caller& caller, const std::string& id, Done<Task> done);
  // The store's page of `filter`'s tasks as `caller` may see them (nullopt: the caller sees none),
  // the one query both ListTasks' paths filter by.
  std::optional<store::TaskQuery> VisibleQuery(const Caller& caller,
                                               const TaskFilter& filter) const;
  // The indexes of the tasks in memory (live_, finished_, by_state_): a task is indexed as it
  // enters memory and after every change of state, unindexed before it and as it leaves.
  void Index(const Task& task);
  void Unindex(const Task& task);
  // Deletes the task `id` of `project_id` (no longer in memory) from the store; once durable, its
  // telemetry goes and `slot` removes its output and files, then `done` runs. Requires mu_.
  void CommitDeletion(const std::string& id, const std::string& project_id,
                      BlockingExecutor::Slot slot, DoneStatus done);
  // Lets go of the tasks that finished before `cutoff_ms` (the store keeps them); returns their
  // ids, whose telemetry, output and file caches the caller then forgets (ForgetTasks).
  std::vector<std::string> DropFinished(int64_t cutoff_ms);
  // What memory keeps of tasks outside mu_: usage histories, output and file caches (takes
  // telemetry_mu_; call without mu_).
  void ForgetTasks(const std::vector<std::string>& ids);
  Status RequireAdmin(const Caller& caller) const;
  // Agent routes (controller_join.cc): RequireAgent lets admins and agents through;
  // RequireAgentOf only admins and the agent of `node` ("what" says what it tried, for messages).
  Status RequireAgent(const Caller& caller) const;
  Status RequireAgentOf(const Caller& caller, const std::string& node,
                        const std::string& what) const;
  // The grant of an agent credential (a key with a node), or why it is refused. Requires
  // auth_mu_ or mu_.
  Result<KeyGrant> AgentGrant(const AccessKey& key) const;
  // LookupKey's answer. Requires auth_mu_.
  Result<KeyGrant> GrantOf(const std::string& access_key) const;
  // Console sessions (controller_sessions.cc): what memory keeps of one (by its cookie's digest).
  struct ConsoleSessionState {
    std::string access_key;
    std::string csrf_token;
    int64_t expires_ms = 0;
  };
  using SessionMap = std::unordered_map<std::string, ConsoleSessionState>;
  // CreateSession's work once the login's nonce is durable (takes auth_mu_).
  Result<NewSession> OpenSession(const std::string& access_key, int64_t ttl_ms);
  // Takes a session out of memory and out of its key's list. Requires auth_mu_.
  void EraseSession(SessionMap::iterator it);
  // Drops the sessions expired at `now_ms` (housekeeping; takes auth_mu_).
  void SweepSessions(int64_t now_ms);
  JoinTokenView MakeJoinTokenView(const JoinToken& token, int64_t now_ms) const;
  Result<std::string> ResolveProject(const Caller& caller, const std::string& project_id) const;
  // Puts a pending task into the queue as a fresh submission (the next pass tries it).
  void Enqueue(const Task& task);
  // Moves `task` to `to` with an event in `batch`; releases / bills as the edge requires.
  void Transition(Task& task, TaskState to, std::string reason, int64_t now_ms,
                  store::WriteBatch& batch);
  // Bills `task` for [billed_until_ms, until_ms) into `batch`.
  void Bill(Task& task, int64_t until_ms, store::WriteBatch& batch);
  // Releases the task's resources (billing up to `end_ms`) if it holds any.
  void Release(Task& task, int64_t end_ms, store::WriteBatch& batch);
  // Marks `node` lost: its tasks end at its last heartbeat (usage billed past it is credited
  // back); restartable ones go back to the queue.
  void LoseNode(NodeInfo& node, int64_t now_ms, store::WriteBatch& batch);
  int64_t TaskGpuMilli(const Task& task) const;
  std::string TaskGpuModel(const Task& task) const;
  bool BillingEnabled() const;
  int64_t BalanceOf(const std::string& project_id) const;
  std::optional<sched::Placement> ToPlacement(const Task& task) const;
  TaskPlacement FromPlacement(const sched::Placement& p, const TaskRequest& r) const;
  NodeView MakeNodeView(const NodeInfo& info, bool with_tasks) const;
  void PersistNode(int node_index, store::WriteBatch& batch);
  // Reads the store (the history: events, ledger; tasks that left memory) once every write
  // queued so far is durable, so that it agrees with what memory already shows: a place on the
  // blocking-work executor is reserved first (kUnavailable at once when it is full), then a
  // barrier is queued behind those writes, and `read` runs on the executor once the barrier is
  // durable. Call without mu_ held.
  template <typename T>
  void ReadHistory(std::function<Result<T>()> read, Done<T> done);
  // The file calls' common path. It checks, in this order: files kept at all (kUnavailable), the
  // task visible to `caller` (NotFound; ReadTask), and with `upload_node` the upload rule of
  // file_service.h (empty: an input); then runs `work` (which may use the files) on the
  // blocking-work executor (given the task as it was read), or answers why not (queue full). A
  // task that left memory leaves nothing in the files' memory after the call either. Call
  // without mu_.
  // A user's call on a running task (an upload without a node, any read) goes to `on_node`
  // instead when there is one, with the node files attached (AttachNodeFiles; kUnavailable
  // without).
  template <typename T>
  void WithFiles(const Caller& caller, const std::string& task_id,
                 std::optional<std::string> upload_node, Done<T> done,
                 std::function<Result<T>(TaskFiles&, const Task&)> work,
                 std::function<void(NodeFiles&, const Task&, Done<T>)> on_node);
  // The storage quota `task`'s files count against: its project's max_storage_bytes. Takes mu_.
  StorageQuota StorageQuotaOf(const Task& task);
  // After an upload's write: a task deleted meanwhile keeps nothing of it (its files are
  // removed, NotFound). Takes mu_; reads the store for a task that left memory.
  Status StillThere(const Caller& caller, const std::string& task_id);
  // The live events of a batch about to be committed (requires mu_): each task it writes with an
  // event (submitted, released, a transition — not a meter tick's billing), each node it writes.
  void PublishChanges(const store::WriteBatch& batch);
  // Records why a queued task is still pending; a new reason is published as a task event.
  void SetPendingReason(sched::PendingTask why);
  // The event hub's stdout reads (a logs_from catch-up): "" without output or past the end.
  Result<std::string> ReadStoredStdout(const std::string& task, int64_t offset, int64_t max_bytes);
  // Distributed jobs' fate sharing (controller_jobs.cc), for every batch Commit writes: a job
  // member that the batch moves to failed, stopped or lost (by itself, not with its job) stops
  // the job's other members; one it re-queues (lost and restartable, or preempted) re-queues
  // those holding resources. Requires mu_.
  void ShareJobFate(store::WriteBatch& batch);
  // A job member's rendezvous for its current run (requires mu_).
  Rendezvous RendezvousOf(const Task& member) const;
  // Where other nodes reach `node` (its address, or its name when it gave none).
  std::string NodeAddress(const std::string& node) const;
  // A port of kRendezvousPort* that no job whose member 0 is bound to `node` uses; 0: none left.
  int32_t FreeRendezvousPort(const std::string& node) const;
  // The job's members as memory has them (all or none), in index order.
  std::vector<Task*> MembersInMemory(const std::string& job_id);
  // The job read from the store once earlier writes are durable (GetJob's answer).
  void ReadJob(const Caller& caller, const std::string& id, Done<JobView> done);
  // Queues `batch` for the store; `done` runs when it is durable; a failed write stops the
  // process (exit 70) — an I/O failure, not a full disk, which the store waits out. Must be called
  // with the lock of what it writes held (mu_; nonce_mu_ for a nonce) so that the store sees
  // changes in the order memory saw them. A batch carrying what a caller sent is checked with
  // store::ValidateBatch before memory changes, so that the store never refuses it as invalid.
  void Commit(store::WriteBatch batch, DoneStatus done);
  // Adds the audit log's entry for an administrative change to the batch that makes it (requires
  // mu_; after the checks that may still refuse the change, so that seqs have no gaps).
  void Audit(const Caller& caller, std::string action, std::string target, std::string detail,
             store::WriteBatch& batch);
  // Snapshots (controller_snapshots.cc); all require mu_ unless said otherwise.
  const TaskSnapshot* FindSnapshot(const std::string& id) const;
  const TaskSnapshot* LatestSnapshot(const std::string& task_id) const;  // of any run
  void AddSnapshot(TaskSnapshot snapshot);
  // Takes the task's snapshots out of memory (the task was deleted); whether it had any.
  bool DropSnapshots(const std::string& task_id);
  // The manifests of the project's snapshots and dataset versions (what its chunk collection
  // keeps).
  std::vector<std::string> ManifestsOf(const std::string& project) const;
  // How long a node has for a snapshot of `task`: its checkpoint timeout and the grace.
  int64_t CheckpointWaitMs(const Task& task) const;
  // Asks the node `task` was just taken off (stopped, preempted, drained, moved) for its last
  // snapshot; the task is not placed again until it is stored or its time ran out. Nothing
  // without a chunk store or for a task that never ran. The waits are written with `batch`
  // (the setting kSnapshotWaitsSetting), so that a restarted server keeps them (LoadSnapshotWaits).
  void OrderLastSnapshot(const Task& task, SnapshotTrigger trigger, int64_t now_ms,
                         store::WriteBatch& batch);
  // The last-snapshot waits of a store's setting, those still open: the task has not ended or
  // run again since, no snapshot of that run answered it yet, and its time has not run out.
  void LoadSnapshotWaits(int64_t now_ms);
  // Why the queue passes `task` over: its last snapshot is awaited; nullopt when it is not.
  std::optional<std::string> AwaitingLastSnapshot(const Task& task, int64_t now_ms) const;
  // What stopping `task` would cost, as the scheduler weighs its victims (sched::WorkState).
  sched::WorkState WorkOf(const Task& task) const;
  // A run interrupted at `end_ms`: the work since its last snapshot (or start) is lost.
  void NoteInterruption(Task& task, int64_t end_ms);
  // Ends the orders past their time (housekeeping); their waiters, to be told without mu_.
  std::vector<Done<TaskSnapshot>> ExpireSnapshotOrders(int64_t now_ms);
  // Deletes the project's chunks that none of `keep` (its snapshots' manifests) lists: disk work,
  // for the blocking-work executor; takes no lock.
  void CollectChunksNow(const std::string& project, const std::vector<std::string>& keep);
  // Commits a batch that dropped manifests of `project` from memory; once it is durable, collects
  // the chunks none of the project's remaining manifests lists (on the blocking-work executor;
  // skipped when its queue is full: the next deletion collects them), then `done`. Requires mu_.
  void CommitAndCollect(store::WriteBatch batch, const std::string& project, DoneStatus done);
  // The chunk calls' disk work on the blocking-work executor, for a project the caller was
  // checked for: which of `chunks` it lacks, a chunk's bytes.
  void MissingChunksOf(const std::string& project, std::vector<std::string> chunks,
                       Done<std::vector<std::string>> done);
  void ReadChunkOf(const std::string& project, const std::string& sha256, Done<std::string> done);
  // Stores a chunk of `project` within what its storage quota leaves to chunks (less its task
  // files and volumes). Called with mu_ held by `lock`, which it releases.
  void StoreChunk(std::unique_lock<std::mutex> lock, const std::string& project,
                  const std::string& sha256, std::string bytes, Done<bool> done);
  // Whether the manifest `manifest` and every chunk it lists are stored in `project`, made
  // durable (syncfs) when they are: before a record that lists them is written. Disk work, for
  // the blocking-work executor; takes no lock.
  Status CheckManifestStored(const std::string& project, const std::string& manifest) const;
  // The node whose agent snapshots `task`: where it is bound or last was (a stopped task keeps its
  // placement on record), or, for one queued again (preempted, drained, moved), which has none,
  // the node its outstanding snapshot order names; "" when there is none.
  std::string SnapshotNodeOf(const Task& task) const;
  // The project of `task_id` when `caller` (its node's agent) may move its chunks.
  Result<std::string> ChunkProjectOf(const Caller& caller, const std::string& task_id,
                                     const std::string& what);
  // CommitSnapshot's record once its chunks are checked (takes mu_).
  void RecordSnapshot(const Caller& caller, const std::string& task_id, SnapshotCapture capture,
                      Done<TaskSnapshot> done);
  // Volumes (controller_volumes.cc); all require mu_.
  // The volume `volume` (an id, or a name of the caller's projects) names, when visible.
  Result<Volume*> VisibleVolume(const Caller& caller, const std::string& volume);
  VolumeInfo InfoOf(const Volume& volume) const;
  // "t-1, t-2 … and N more": the first few of `ids`, for a refusal's message.
  static std::string SomeOf(const std::vector<std::string>& ids);
  // The tasks that mount volume `id` and have not ended; those of every volume, by id (one walk
  // over the live tasks).
  std::vector<std::string> VolumeUsers(const std::string& id) const;
  std::map<std::string, std::vector<std::string>> VolumeUsersByVolume() const;
  // What the project's volumes may hold, together.
  int64_t VolumeBytesOf(const std::string& project_id) const;
  // kResourceExhausted when the project's storage quota cannot hold `more` bytes of volumes more.
  Status CheckVolumeQuota(const std::string& project_id, int64_t more) const;
  // A submission's mounts resolved in its project (volume_id and shared set); errors name
  // volumes[i].
  Result<std::vector<VolumeMount>> ResolveMounts(const std::string& project_id,
                                                 std::vector<VolumeMount> mounts) const;
  // PlacementRequest with the node of the node-local volumes it mounts (TaskRequest::node) and
  // the nodes that hold its largest dataset (TaskRequest::prefer_nodes: DatasetNodesOf).
  TaskRequest SchedulingRequest(const Task& task) const;
  // Binds the node-local volumes `task` mounts that have no node yet to `node`; their previous
  // records are appended to `claimed` (to undo it).
  void ClaimVolumes(const Task& task, const std::string& node, std::vector<Volume>& claimed);
  // The nodes whose agents act on the volume: its node, or every node with the shared storage.
  void TouchVolumeNodes(const Volume& volume);
  // Datasets (controller_datasets.cc); all require mu_.
  // The dataset `dataset` names among the published ones and those `own` accepts: an id, or a
  // name of those `own` accepts first, else of a published one. NotFound when there is none,
  // kFailedPrecondition when the name is ambiguous.
  Result<Dataset*> LookupDataset(const std::string& dataset,
                                 const std::function<bool(const Dataset&)>& own);
  // LookupDataset among the caller's projects' datasets.
  Result<Dataset*> VisibleDataset(const Caller& caller, const std::string& dataset);
  // VisibleDataset, for a change only members of its project may make (`what`, for messages).
  Result<Dataset*> MemberDataset(const Caller& caller, const std::string& dataset,
                                 const std::string& what);
  // A push's: MemberDataset, when the server keeps chunks (kUnavailable otherwise).
  Result<Dataset*> PushedDataset(const Caller& caller, const std::string& dataset);
  DatasetInfo InfoOf(const Caller& caller, const Dataset& dataset) const;
  // The tasks that have not ended and mount a dataset, by dataset id: those `viewer` may see
  // (null: all); with `version` > 0 only those that mount that version. One walk over the live
  // tasks.
  std::map<std::string, std::vector<std::string>> DatasetUsers(const Caller* viewer,
                                                               int32_t version = 0) const;
  // A submission's dataset mounts resolved in `project_id` (its datasets and the published
  // ones; the version, its project and manifest filled in), checked with `volumes`' paths;
  // errors name datasets[i].
  Result<std::vector<DatasetMount>> ResolveDatasetMounts(const std::string& project_id,
                                                         std::vector<DatasetMount> mounts,
                                                         const std::vector<VolumeMount>& volumes);
  // The nodes that hold the files of the largest dataset version `task` mounts and are not lost
  // (TaskRequest::prefer_nodes).
  std::vector<std::string> DatasetNodesOf(const Task& task) const;
  // What a node's heartbeat says it holds (manifests), in place of what it said before; empty
  // when it is lost.
  void SetNodeDatasets(const std::string& node, std::vector<std::string> manifests);
  // The set of tasks bound to `node` changed: its version moves on, its watchers are answered.
  void TouchNode(const std::string& node);
  NodeAssignments AssignmentsOf(const std::string& node) const;
  // Answers the watchers whose node moved on or whose wait is over (all of them when `all`).
  void AnswerWatchers(bool all);
  void Wake();      // asks the loop for a pass over the fresh pending tasks
  void RetryAll();  // the cluster changed (resources freed, a node, a quota): retry every task
  void LoopMain();
  void RebuildPolicyIfStale(int64_t now_ms);
  int ApplyPlan(const sched::Plan& plan, const std::vector<sched::QueuedTask>& queue,
                int64_t now_ms, store::WriteBatch& batch);
  // Why placing `group` (one task or a gang) would exceed a project's GPU quota, counting each
  // task by QuotaMilli of its planned GPU's model and crediting what `leaving` (its victims and
  // the tasks it moves) hold; "" if not.
  std::string QuotaRefusal(const std::vector<const sched::Assignment*>& group,
                           const std::vector<Task*>& leaving) const;
  // Why the plan's `move` can no longer be carried out ("" if it can): its task must still run on
  // the node the plan moves it from, alone (not a job's member), and be snapshotted on stop.
  std::string MoveRefusal(const sched::Move& move);
  // The gauges of /metrics as the state is now (requires mu_).
  void CollectGauges(GaugeSnapshot& gauges);

  // --- telemetry (controller_telemetry.cc) ---
  // PushTelemetry's work, on the blocking-work executor.
  Result<std::vector<OutputOffsets>> ApplyTelemetry(const Caller& caller, NodeTelemetry batch);
  // ReadTaskLog's file reads (or the follower's wait), on the blocking-work executor.
  void ReadLog(const std::string& id, const LogRequest& request, Done<LogSlice> done);
  struct TaskTelemetryState {
    UsageSeries usage;
    std::deque<ReportedMetrics> reported;
    MetricValues latest;         // each reported metric's latest value
    int64_t run = 0;             // the binding whose metrics file is being read
    int64_t reported_until = 0;  // end offset (in that run) of the last metrics line taken
    int64_t idle_since_ms = 0;   // the first sample of the current idle-GPU streak; 0: not idle
    int64_t active_ms = 0;       // the user's latest interactive activity (NoteActivity); 0: none
    bool output_complete = false;
  };
  struct NodeTelemetryState {
    UsageSeries usage;
    std::vector<GpuSeries> gpus;
    std::optional<NodeSample> latest;
  };
  // The task's latest reported values with the built-ins (gpu_util, gpu_idle_s,
  // interactive_idle_s, idle_s, runtime_s).
  // Requires telemetry_mu_.
  MetricValues WithBuiltins(const TaskTelemetryState& st, int64_t started_ms, int64_t now_ms) const;
  // Fills page.metrics with the latest of `names` for each task of the page (takes
  // telemetry_mu_).
  void AddLatestMetrics(const std::vector<std::string>& names, TaskPage& page);
  // Stops a running task whose stop condition holds for one of `seen` (its values after each new
  // sample and point, in order); the first that holds is its reason (takes mu_).
  void StopIfConditionHolds(const std::string& id, const std::vector<MetricValues>& seen,
                            int64_t now_ms);
  // Whether no more output will come for the task (takes mu_, then telemetry_mu_).
  bool OutputComplete(const std::string& id);
  // The histories of deleted or dropped tasks go (takes telemetry_mu_).
  void ForgetTelemetry(const std::vector<std::string>& ids);
  // The node and task usage gauges of /metrics (requires mu_; takes telemetry_mu_).
  void CollectTelemetryGauges(GaugeSnapshot& gauges);

  store::Store& store_;
  Clock& clock_;
  SecretBox secrets_;
  ControllerOptions options_;
  MetricsRegistry metrics_;
  DiskReserve disk_;  // thread-safe: its own lock, taken inside its calls only
  std::mutex node_files_mu_;  // guards node_files_ alone
  std::weak_ptr<NodeFiles> node_files_;
  std::function<ConnectionFigures()> connection_figures_;  // SetConnectionFigures

  // Locks, in the order a thread may take them (holding one, it takes only those listed after
  // it):
  //   pass_mu_       one scheduling pass at a time; taken before mu_.
  //   mu_            the working state: every member below up to nonce_mu_.
  //   auth_mu_       what LookupKey reads (users_, keys_, plain_secrets_, join_tokens_): each
  //                  change to them is made with mu_ and auth_mu_ both held, so code under mu_
  //                  reads them as before, and LookupKey, which every signed request calls
  //                  first, takes auth_mu_ alone. Also the console sessions (sessions_,
  //                  sessions_of_key_), which only auth_mu_ guards: every request of a session
  //                  looks its session and key up together (LookupSession).
  //   telemetry_mu_  the usage histories; after mu_ or alone.
  //   the event hub's lock (events_, event_hub.h): a leaf, taken by publishers under any of
  //                  these (mu_ in Commit, telemetry_mu_ in the ingest) or none (the output's
  //                  appends); nothing is taken while it is held, and the hub's thread writes
  //                  to the subscribers' streams with no lock of the controller held.
  //   loop_mu_       the loop's wake-up flag; Wake() runs with mu_ held.
  //   nonce_mu_      the nonce cache; taken alone (Rebuild, single-threaded, takes it under mu_).
  // The store's, the output's, the executor's and the disk reserve's (disk_) own locks are taken
  // inside their calls only.
  // mu_ is split only where a measurement showed contention (docs/benchmarks.md §5).
  mutable std::mutex mu_;
  mutable std::mutex auth_mu_;
  std::map<std::string, Project> projects_;
  std::map<std::string, User> users_;                           // changed under auth_mu_ too
  std::map<std::string, AccessKey> keys_;                       // changed under auth_mu_ too
  std::unordered_map<std::string, std::string> plain_secrets_;  // access key -> secret; ditto
  std::map<std::string, JoinToken> join_tokens_;                // changed under auth_mu_ too
  // Console sessions, under auth_mu_ only: by the SHA-256 of the cookie's value (the value itself
  // is never kept), and each key's sessions' digests, oldest first.
  SessionMap sessions_;
  std::unordered_map<std::string, std::deque<std::string>> sessions_of_key_;
  std::map<std::string, NodeInfo> nodes_;
  // The tasks in memory: the live ones, and the finished ones for retain_finished_ms.
  std::map<int64_t, Task> tasks_;                    // by seq
  std::unordered_map<std::string, int64_t> seq_of_;  // task id -> seq
  std::set<int64_t> live_;                           // seqs of the non-terminal tasks
  std::set<std::pair<int64_t, int64_t>> finished_;   // (finished_ms, seq) of the terminal ones
  // Tasks in memory per project and state (the gpupool_tasks gauge without a pass over them).
  std::map<std::string, std::array<int64_t, kTaskStateCount>> by_state_;
  // Every task with a higher seq is in memory: those left out at start-up or let go since have
  // lower ones (a page after it needs no store read).
  int64_t gone_up_to_seq_ = 0;
  // The queue: pending tasks in scheduling order. A held task is pending but not in it (nor in
  // fresh_ or why_pending_) until it is released.
  std::set<PendingKey> pending_;
  // Pending tasks not tried since the last cluster change. A pass tries only these, unless
  // retry_all_: a task that did not fit waits for a change that could make it fit (resources
  // freed, a node added or uncordoned, a quota raised), as Kubernetes' unschedulable queue does.
  std::set<PendingKey> fresh_;
  bool retry_all_ = true;
  std::unordered_map<std::string, sched::PendingTask> why_pending_;
  std::map<std::string, ProjectUse> use_;
  std::unordered_map<std::string, ArrayUse> arrays_;  // by array id
  std::vector<Price> prices_;
  meter::PriceTable price_table_;  // prices_ as the meter reads them
  std::map<std::string, std::string> settings_;
  int64_t next_seq_ = 1;
  int64_t audit_seq_ = 0;  // the audit log's last seq
  // Snapshots: every record by seq, each task's seqs oldest first, the next seq (never reused:
  // the store's setting "snapshot_seq" keeps the last), and the orders nodes must carry out.
  std::map<int64_t, TaskSnapshot> snapshots_;
  std::unordered_map<std::string, std::vector<int64_t>> snapshots_of_task_;
  int64_t next_snapshot_seq_ = 1;
  int64_t next_snapshot_request_ = 1;
  struct SnapshotWait {
    std::string node;
    SnapshotOrder order;
    int64_t deadline_ms = 0;
    std::vector<Done<TaskSnapshot>> waiters;  // users waiting for order.request
  };
  std::map<std::string, SnapshotWait> snapshot_orders_;  // by task id
  // Volumes by id; the next seq (never reused: the store's setting "volume_seq" keeps the last).
  std::map<std::string, Volume> volumes_;
  int64_t next_volume_seq_ = 1;
  // Datasets by id; the next seq (never reused: the store's setting "dataset_seq" keeps the last).
  std::map<std::string, Dataset> datasets_;
  int64_t next_dataset_seq_ = 1;
  // The dataset versions (manifests) each node's latest heartbeat says it holds, and the same by
  // manifest (SchedulingRequest's preference); in memory only, cleared when a node is lost.
  std::unordered_map<std::string, std::vector<std::string>> node_datasets_;
  std::unordered_map<std::string, std::set<std::string>> dataset_nodes_;
  sched::ClusterState cluster_;
  std::unique_ptr<sched::Policy> policy_;
  std::deque<TaskRequest> recent_requests_;  // the typical-task window
  int64_t requests_since_policy_ = 0;
  int64_t policy_built_ms_ = 0;
  int64_t last_meter_ms_ = 0;
  bool healthy_ = true;
  // Assignment versions: one clock for all nodes, started at start-up time × 1000 so that it
  // keeps growing across restarts (an agent's last version is always older than a new one).
  int64_t assignment_clock_ = 0;
  std::unordered_map<std::string, int64_t> node_version_;
  struct Watcher {
    std::string node;
    int64_t after_version = 0;
    int64_t deadline_ms = 0;
    Done<NodeAssignments> done;
  };
  std::vector<Watcher> watchers_;
  bool watchers_due_ = false;  // a watched node moved on since the last AnswerWatchers
  bool stopping_ = false;      // Stop() answered every watcher; new ones are answered at once

  // The nonce cache, under its own lock: every signed request consumes a nonce, and none of it
  // touches the rest of the state. A durable nonce's batch is queued under nonce_mu_, so the
  // store sees the nonces and their expiries in the order the cache did; the request's own write
  // comes after it on the same thread, so acknowledging that write implies the nonce is durable.
  std::mutex nonce_mu_;
  std::unordered_set<uint64_t> nonces_;  // NonceKey(access key, nonce): a digest, not the text
  // (timestamp, key), oldest on top: expiry pops from here.
  std::priority_queue<std::pair<int64_t, uint64_t>, std::vector<std::pair<int64_t, uint64_t>>,
                      std::greater<>>
      nonce_order_;
  // Each access key's rate (ControllerOptions::key_rate_per_s): only keys whose signature
  // verified get one; those with their whole burst again are dropped once per window.
  struct KeyBucket {
    int64_t tat_us = 0;  // theoretical arrival time of the next request, µs since the epoch
  };
  std::unordered_map<std::string, KeyBucket> key_buckets_;
  int64_t buckets_pruned_ms_ = 0;

  std::unique_ptr<TaskOutput> output_;  // null without ControllerOptions::output_dir
  std::mutex telemetry_mu_;             // after mu_, never before (see "Locks" above)
  std::unordered_map<std::string, TaskTelemetryState> task_telemetry_;
  std::unordered_map<std::string, NodeTelemetryState> node_telemetry_;
  // The live events: after output_ (its thread reads stdout through it), before blocking_.
  std::unique_ptr<EventHub> events_;

  std::mutex pass_mu_;  // one scheduling pass at a time (policy_ is used outside mu_)
  // What a pass plans on: cluster_ as of the pass's start, refreshed under mu_ by copying only
  // the nodes changed since the last pass (under pass_mu_).
  sched::ClusterSnapshot snapshot_;
  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool wake_ = false;
  bool stop_ = false;
  std::thread loop_;

  // Last: its destructor runs the jobs still queued (they use the members above) and joins.
  std::unique_ptr<BlockingExecutor> blocking_;
};

template <typename T>
void Controller::ReadHistory(std::function<Result<T>()> read, Done<T> done) {
  Result<BlockingExecutor::Slot> slot = blocking_->Reserve();
  if (!slot) return done(tl::unexpected(slot.error()));
  // Batches commit in order: once this empty one is durable, so is everything queued before it.
  store_.Write(store::WriteBatch{},
               [slot = *slot, read = std::move(read), done = std::move(done)](Status s) {
                 if (!s) return done(tl::unexpected(s.error()));
                 slot.Run([read, done] { done(read()); });
               });
}

}  // namespace gpupool::server
