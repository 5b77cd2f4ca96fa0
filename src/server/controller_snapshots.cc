// The Controller's SnapshotService (snapshot_service.h, docs/snapshots.md): snapshot records in
// memory (all of them: they are small) and in the store, the orders a node must carry out
// (NodeAssignments::snapshots), the gate that keeps a task taken off a node out of the queue
// until its last snapshot is stored, resuming an ended task, and the chunk calls, whose disk work
// runs on the blocking-work executor.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string_view>
#include <utility>

#include "core/duration.h"
#include "core/file_rules.h"
#include "server/controller.h"

namespace gpupool::server {
namespace {

// The store's setting that keeps the open last-snapshot waits across a restart.
constexpr const char* kSnapshotWaitsSetting = "snapshot_waits";

std::string DescribeSnapshot(const TaskSnapshot& s) {
  return "snapshot " + s.id + " (" + std::string(SnapshotTriggerName(s.trigger)) + ", " +
         std::string(ConsistencyName(s.consistency)) + "-consistent: " + std::to_string(s.files) +
         " files, " + BytesWithMib(s.bytes) + ", " + BytesWithMib(s.new_bytes) + " new, frozen " +
         std::to_string(s.frozen_ms) + " ms" +
         (s.image && s.image->saved
              ? "; its container saved as image " + s.image->id.substr(0, 19) + " (" +
                    BytesWithMib(s.image->bytes) + " over " + s.image->base + ")"
              : "") +
         ")";
}

}  // namespace

const TaskSnapshot* Controller::FindSnapshot(const std::string& id) const {
  const std::optional<int64_t> seq = SnapshotSeq(id);
  if (!seq) return nullptr;
  const auto it = snapshots_.find(*seq);
  return it == snapshots_.end() ? nullptr : &it->second;
}

const TaskSnapshot* Controller::LatestSnapshot(const std::string& task_id) const {
  const auto it = snapshots_of_task_.find(task_id);
  if (it == snapshots_of_task_.end() || it->second.empty()) return nullptr;
  return &snapshots_.at(it->second.back());
}

void Controller::AddSnapshot(TaskSnapshot snapshot) {
  next_snapshot_seq_ = std::max(next_snapshot_seq_, snapshot.seq + 1);
  snapshots_of_task_[snapshot.task_id].push_back(snapshot.seq);
  snapshots_.emplace(snapshot.seq, std::move(snapshot));
}

bool Controller::DropSnapshots(const std::string& task_id) {
  const auto it = snapshots_of_task_.find(task_id);
  if (it == snapshots_of_task_.end()) return false;
  for (int64_t seq : it->second) snapshots_.erase(seq);
  snapshots_of_task_.erase(it);
  return true;
}

std::vector<std::string> Controller::ManifestsOf(const std::string& project) const {
  std::vector<std::string> out;
  for (const auto& [seq, s] : snapshots_) {
    if (s.project_id == project) out.push_back(s.manifest);
  }
  for (const auto& [id, d] : datasets_) {
    if (d.project_id != project) continue;
    for (const DatasetVersion& v : d.versions) out.push_back(v.manifest);
  }
  return out;
}

int64_t Controller::CheckpointWaitMs(const Task& task) const {
  return (task.checkpoint_timeout_ms > 0 ? task.checkpoint_timeout_ms
                                         : kDefaultCheckpointTimeoutMs) +
         options_.snapshot_grace_ms;
}

void Controller::OrderLastSnapshot(const Task& task, SnapshotTrigger trigger, int64_t now_ms,
                                   store::WriteBatch& batch) {
  if (options_.chunks == nullptr || !task.placement || task.run <= 0) return;
  SnapshotWait& wait = snapshot_orders_[task.id];  // a user's request in flight joins it
  wait.node = task.placement->node;
  wait.order.run = task.run;
  wait.order.trigger = trigger;
  wait.deadline_ms = now_ms + CheckpointWaitMs(task);
  TouchNode(wait.node);
  // One line per open wait: "<task>\t<node>\t<run>\t<trigger>\t<deadline ms>". Waits that ended
  // since are left in it: LoadSnapshotWaits skips them.
  std::string waits;
  for (const auto& [id, w] : snapshot_orders_) {
    if (!IsLastSnapshotTrigger(w.order.trigger)) continue;
    waits += id + "\t" + w.node + "\t" + std::to_string(w.order.run) + "\t" +
             std::string(SnapshotTriggerName(w.order.trigger)) + "\t" +
             std::to_string(w.deadline_ms) + "\n";
  }
  settings_[kSnapshotWaitsSetting] = waits;
  batch.settings[kSnapshotWaitsSetting] = std::move(waits);
}

void Controller::LoadSnapshotWaits(int64_t now_ms) {
  const auto it = settings_.find(kSnapshotWaitsSetting);
  if (it == settings_.end()) return;
  auto number = [](std::string_view text, auto* out) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
    return ec == std::errc() && end == text.data() + text.size();
  };
  std::string_view rest = it->second;
  while (!rest.empty()) {
    const std::string_view line = rest.substr(0, rest.find('\n'));
    rest.remove_prefix(std::min(rest.size(), line.size() + 1));
    std::vector<std::string_view> f;
    for (std::string_view l = line;;) {
      const size_t tab = l.find('\t');
      f.push_back(l.substr(0, tab));
      if (tab == std::string_view::npos) break;
      l.remove_prefix(tab + 1);
    }
    if (f.size() != 5) continue;
    const Task* t = FindTask(std::string(f[0]));
    const std::optional<SnapshotTrigger> trigger = ParseSnapshotTrigger(f[3]);
    int32_t run = 0;
    int64_t deadline = 0;
    if (t == nullptr || !trigger || !number(f[2], &run) || !number(f[4], &deadline) ||
        deadline <= now_ms || t->run != run || HoldsResources(t->state)) {
      continue;
    }
    const TaskSnapshot* last = LatestSnapshot(t->id);
    if (last != nullptr && last->run == run && IsLastSnapshotTrigger(last->trigger)) continue;
    SnapshotWait& wait = snapshot_orders_[t->id];
    wait.node = std::string(f[1]);
    wait.order = {run, *trigger, 0, false};
    wait.deadline_ms = deadline;
  }
}

std::optional<std::string> Controller::AwaitingLastSnapshot(const Task& task,
                                                            int64_t now_ms) const {
  const auto it = snapshot_orders_.find(task.id);
  if (it == snapshot_orders_.end() || !IsLastSnapshotTrigger(it->second.order.trigger) ||
      now_ms >= it->second.deadline_ms) {
    return std::nullopt;
  }
  return "waiting for its last snapshot from node " + it->second.node + " (up to " +
         FormatDurationMs(it->second.deadline_ms - now_ms) + " more), to resume from it";
}

sched::WorkState Controller::WorkOf(const Task& task) const {
  sched::WorkState w;
  if (task.state != TaskState::kRunning) return w;  // nothing done yet: nothing to lose
  w.unsaved_since_ms = task.started_ms;
  const TaskSnapshot* last = LatestSnapshot(task.id);
  if (last != nullptr && last->run == task.run) {
    w.unsaved_since_ms = std::max(w.unsaved_since_ms, last->taken_ms);
  }
  w.snapshot_every_ms = task.snapshot_every_ms;
  // Stopped for another task, it is snapshotted first (OrderLastSnapshot): what it costs is the
  // snapshot and the restore, estimated by its last snapshot's time, twice.
  w.snapshot_on_stop = options_.chunks != nullptr;
  if (last != nullptr) w.snapshot_restore_ms = 2 * last->duration_ms;
  return w;
}

void Controller::NoteInterruption(Task& task, int64_t end_ms) {
  if (task.started_ms <= 0) {
    task.work_lost_ms = 0;  // it never ran: nothing done, nothing lost
    return;
  }
  int64_t saved = task.started_ms;
  if (const TaskSnapshot* last = LatestSnapshot(task.id); last && last->run == task.run) {
    saved = std::max(saved, last->taken_ms);
  }
  task.work_lost_ms = std::max<int64_t>(0, end_ms - saved);
}

std::vector<Done<TaskSnapshot>> Controller::ExpireSnapshotOrders(int64_t now_ms) {
  std::vector<Done<TaskSnapshot>> late;
  for (auto it = snapshot_orders_.begin(); it != snapshot_orders_.end();) {
    if (now_ms < it->second.deadline_ms) {
      ++it;
      continue;
    }
    for (auto& w : it->second.waiters) late.push_back(std::move(w));
    if (Task* t = FindTask(it->first); t != nullptr && t->state == TaskState::kPending) {
      Enqueue(*t);  // placed again, from its latest snapshot
      Wake();
    }
    it = snapshot_orders_.erase(it);
  }
  return late;
}

void Controller::CollectChunksNow(const std::string& project,
                                  const std::vector<std::string>& keep) {
  if (options_.chunks == nullptr) return;
  Result<int64_t> freed = options_.chunks->Collect(project, keep);
  if (!freed) {
    std::fprintf(stderr, "gpupool server: collecting the chunks of project %s: %s\n",
                 project.c_str(), freed.error().message.c_str());
  }
}

void Controller::CommitAndCollect(store::WriteBatch batch, const std::string& project,
                                  DoneStatus done) {
  // Collected once the deletion is durable, by what the project's manifests list now (one
  // recorded meanwhile lists young chunks, which are kept).
  std::vector<std::string> keep = ManifestsOf(project);
  Commit(std::move(batch), [this, project, keep = std::move(keep), done = std::move(done)](Status) {
    if (Result<BlockingExecutor::Slot> slot = blocking_->Reserve()) {
      slot->Run([this, project, keep] { CollectChunksNow(project, keep); });
    }  // else: the queue is full; the next deletion collects them
    done({});
  });
}

void Controller::MissingChunksOf(const std::string& project, std::vector<std::string> chunks,
                                 Done<std::vector<std::string>> done) {
  Result<BlockingExecutor::Slot> slot = blocking_->Reserve();
  if (!slot) return done(tl::unexpected(slot.error()));
  slot->Run([this, project, chunks = std::move(chunks), done = std::move(done)] {
    done(options_.chunks->Missing(project, chunks));
  });
}

void Controller::ReadChunkOf(const std::string& project, const std::string& sha256,
                             Done<std::string> done) {
  Result<BlockingExecutor::Slot> slot = blocking_->Reserve();
  if (!slot) return done(tl::unexpected(slot.error()));
  slot->Run([this, project, sha256, done = std::move(done)] {
    done(options_.chunks->Get(project, sha256));
  });
}

void Controller::StoreChunk(std::unique_lock<std::mutex> lock, const std::string& project,
                            const std::string& sha256, std::string bytes, Done<bool> done) {
  const auto p = projects_.find(project);
  const int64_t max_bytes = p == projects_.end() ? -1 : p->second.max_storage_bytes;
  const int64_t volumes = VolumeBytesOf(project);
  lock.unlock();
  Result<BlockingExecutor::Slot> slot = blocking_->Reserve();
  if (!slot) return done(tl::unexpected(slot.error()));
  slot->Run([this, project, max_bytes, volumes, sha256, bytes = std::move(bytes),
             done = std::move(done)] {
    // What the quota leaves to chunks once the task files and the volumes are counted.
    int64_t limit = -1;
    if (max_bytes >= 0) {
      const int64_t files =
          options_.task_files != nullptr ? options_.task_files->ProjectBytes(project) : 0;
      limit = std::max<int64_t>(0, max_bytes - files - volumes);
    }
    done(options_.chunks->Put(project, sha256, bytes, limit));
  });
}

Status Controller::CheckManifestStored(const std::string& project,
                                       const std::string& manifest) const {
  Result<proto::SnapshotManifest> decoded = options_.chunks->Manifest(project, manifest);
  if (!decoded) return tl::unexpected(decoded.error());
  if (Status ok = options_.chunks->CheckComplete(project, *decoded); !ok) return ok;
  return options_.chunks->Sync(project);
}

// ---- users' calls -----------------------------------------------------------------------------

void Controller::SnapshotTask(const Caller& caller, const std::string& task_id, bool image,
                              Done<TaskSnapshot> done) {
  std::unique_lock lock(mu_);
  if (options_.chunks == nullptr) {
    return lock.unlock(),
           done(MakeError(ErrorCode::kUnavailable, "this server keeps no snapshots"));
  }
  auto task = VisibleTask(caller, task_id);
  if (!task) return lock.unlock(), done(tl::unexpected(task.error()));
  const Task& t = **task;
  if (t.state != TaskState::kRunning) {
    return lock.unlock(),
           done(MakeError(ErrorCode::kFailedPrecondition,
                          "task " + task_id + " is " + std::string(TaskStateName(t.state)) +
                              ": only a running task can be snapshotted"));
  }
  if (image && t.image.empty()) {
    return lock.unlock(),
           done(InvalidArgument("image: task " + task_id +
                                " runs no image (a process task): only its workspace is kept"));
  }
  SnapshotWait& wait = snapshot_orders_[task_id];
  // None in flight, or one without the image asked for now: a new request, which answers the
  // earlier one's waiters too.
  if (wait.order.request == 0 || (image && !wait.order.image)) {
    wait.node = t.placement->node;
    wait.order = {t.run, SnapshotTrigger::kManual, next_snapshot_request_++,
                  image || wait.order.image};
    wait.deadline_ms = clock_.NowMs() + CheckpointWaitMs(t);
    TouchNode(wait.node);
  }
  wait.waiters.push_back(std::move(done));
}

void Controller::ResumeTask(const Caller& caller, const std::string& task_id,
                            const std::string& snapshot, Done<Task> done) {
  std::unique_lock lock(mu_);
  if (FindTask(task_id) == nullptr) {  // left memory: it ended long ago (or there is none)
    lock.unlock();
    return ReadTask(caller, task_id, [this, task_id, done = std::move(done)](Result<Task> t) {
      if (!t) return done(tl::unexpected(t.error()));
      std::lock_guard relock(mu_);
      const TaskSnapshot* last = LatestSnapshot(task_id);
      done(MakeError(ErrorCode::kFailedPrecondition,
                     "task " + task_id + " ended too long ago to be resumed" +
                         (last ? "; start a new task from its latest snapshot: gpupool submit "
                                 "--from-snapshot " +
                                     last->id + " …"
                               : " (and has no snapshot)")));
    });
  }
  auto task = VisibleTask(caller, task_id);
  if (!task) return lock.unlock(), done(tl::unexpected(task.error()));
  Task& t = **task;
  if (!IsTerminal(t.state)) {
    return lock.unlock(),
           done(MakeError(ErrorCode::kFailedPrecondition, "task " + task_id + " is " +
                                                              std::string(TaskStateName(t.state)) +
                                                              ": only an ended task is resumed"));
  }
  const TaskSnapshot* from = snapshot.empty() ? LatestSnapshot(task_id) : FindSnapshot(snapshot);
  if (from == nullptr || from->project_id != t.project_id) {
    return lock.unlock(),
           done(snapshot.empty()
                    ? MakeError(ErrorCode::kFailedPrecondition,
                                "task " + task_id + " has no snapshot to resume from")
                    : NotFound("snapshot " + snapshot + " not found in project " + t.project_id));
  }
  const Project& p = projects_.at(t.project_id);
  if (p.max_tasks >= 0 && use_[p.id].active_tasks + 1 > p.max_tasks) {
    return lock.unlock(),
           done(MakeError(ErrorCode::kResourceExhausted,
                          "project " + p.id + " has " + std::to_string(use_[p.id].active_tasks) +
                              " active tasks, its quota max_tasks is " +
                              std::to_string(p.max_tasks)));
  }
  if (BillingEnabled() && BalanceOf(p.id) <= 0) {
    return lock.unlock(), done(MakeError(ErrorCode::kResourceExhausted,
                                         "project " + p.id + " has no balance: add credit"));
  }
  const int64_t now = clock_.NowMs();
  t.resume_from = from->id;
  t.exit_code = 0;
  t.ended_by.clear();
  store::WriteBatch batch;
  Transition(t, TaskState::kPending, "resumed by " + caller.user_id + " from " + from->id, now,
             batch);
  batch.tasks.push_back(t);
  Commit(std::move(batch),
         [done = std::move(done), copy = t](Status) mutable { done(std::move(copy)); });
  lock.unlock();
  Wake();
}

void Controller::ListSnapshots(const Caller& caller, const std::string& task_id,
                               const std::string& project, Done<std::vector<TaskSnapshot>> done) {
  std::unique_lock lock(mu_);
  if (!project.empty() && !caller.InProject(project)) {
    return lock.unlock(), done(NotFound("project " + project + " not found"));
  }
  std::vector<TaskSnapshot> out;
  auto visible = [&](const TaskSnapshot& s) {
    return caller.InProject(s.project_id) && (project.empty() || s.project_id == project);
  };
  if (!task_id.empty()) {
    if (const auto it = snapshots_of_task_.find(task_id); it != snapshots_of_task_.end()) {
      for (int64_t seq : it->second) {
        if (visible(snapshots_.at(seq))) out.push_back(snapshots_.at(seq));
      }
    }
  } else {
    for (const auto& [seq, s] : snapshots_) {
      if (visible(s)) out.push_back(s);
    }
  }
  lock.unlock();
  done(std::move(out));
}

void Controller::GetSnapshot(const Caller& caller, const std::string& id, Done<TaskSnapshot> done) {
  std::unique_lock lock(mu_);
  const TaskSnapshot* s = FindSnapshot(id);
  if (s == nullptr || !caller.InProject(s->project_id)) {
    return lock.unlock(), done(NotFound("snapshot " + id + " not found"));
  }
  TaskSnapshot copy = *s;
  lock.unlock();
  done(std::move(copy));
}

void Controller::DeleteSnapshot(const Caller& caller, const std::string& id, DoneStatus done) {
  std::unique_lock lock(mu_);
  const TaskSnapshot* s = FindSnapshot(id);
  if (s == nullptr || !caller.InProject(s->project_id)) {
    return lock.unlock(), done(NotFound("snapshot " + id + " not found"));
  }
  const TaskSnapshot gone = *s;
  store::WriteBatch batch;
  batch.deleted_snapshots.push_back(id);
  auto& of_task = snapshots_of_task_[gone.task_id];
  std::erase(of_task, gone.seq);
  if (of_task.empty()) snapshots_of_task_.erase(gone.task_id);
  snapshots_.erase(gone.seq);
  // A task whose next run was to start from it starts from its latest other one (or afresh).
  for (auto& [seq, t] : tasks_) {
    if (t.resume_from != id) continue;
    const TaskSnapshot* latest = LatestSnapshot(t.id);
    t.resume_from = latest ? latest->id : "";
    batch.tasks.push_back(t);
  }
  Audit(caller, "snapshot.delete", id, "of task " + gone.task_id, batch);
  CommitAndCollect(std::move(batch), gone.project_id, std::move(done));
}

// ---- agents' calls ----------------------------------------------------------------------------

std::string Controller::SnapshotNodeOf(const Task& task) const {
  if (task.placement) return task.placement->node;
  const auto order = snapshot_orders_.find(task.id);
  return order == snapshot_orders_.end() ? "" : order->second.node;
}

Result<std::string> Controller::ChunkProjectOf(const Caller& caller, const std::string& task_id,
                                               const std::string& what) {
  if (options_.chunks == nullptr) {
    return MakeError(ErrorCode::kUnavailable, "this server keeps no snapshots");
  }
  if (auto ok = RequireAgent(caller); !ok) return tl::unexpected(ok.error());
  const Task* t = FindTask(task_id);
  if (t == nullptr) return NotFound("task " + task_id + " not found");
  const std::string node = SnapshotNodeOf(*t);
  if (auto ok = RequireAgentOf(caller, node,
                               what + " of task " + task_id + " (on " +
                                   (node.empty() ? "no node" : "node " + node) + ")");
      !ok) {
    return tl::unexpected(ok.error());
  }
  return t->project_id;
}

void Controller::FindMissingChunks(const Caller& caller, const std::string& task_id,
                                   std::vector<std::string> chunks,
                                   Done<std::vector<std::string>> done) {
  std::unique_lock lock(mu_);
  Result<std::string> project = ChunkProjectOf(caller, task_id, "look up the chunks");
  lock.unlock();
  if (!project) return done(tl::unexpected(project.error()));
  MissingChunksOf(*project, std::move(chunks), std::move(done));
}

void Controller::PutChunk(const Caller& caller, const std::string& task_id,
                          const std::string& sha256, std::string bytes, Done<bool> done) {
  std::unique_lock lock(mu_);
  Result<std::string> project = ChunkProjectOf(caller, task_id, "store a chunk");
  if (!project) return lock.unlock(), done(tl::unexpected(project.error()));
  StoreChunk(std::move(lock), *project, sha256, std::move(bytes), std::move(done));
}

void Controller::GetChunk(const Caller& caller, const std::string& task_id,
                          const std::string& sha256, Done<std::string> done) {
  std::unique_lock lock(mu_);
  Result<std::string> project = ChunkProjectOf(caller, task_id, "read a chunk");
  lock.unlock();
  if (!project) return done(tl::unexpected(project.error()));
  ReadChunkOf(*project, sha256, std::move(done));
}

void Controller::CommitSnapshot(const Caller& caller, const std::string& task_id,
                                SnapshotCapture capture, Done<TaskSnapshot> done) {
  std::unique_lock lock(mu_);
  Result<std::string> project = ChunkProjectOf(caller, task_id, "commit a snapshot");
  if (!project) return lock.unlock(), done(tl::unexpected(project.error()));
  lock.unlock();
  Result<BlockingExecutor::Slot> slot = blocking_->Reserve();
  if (!slot) return done(tl::unexpected(slot.error()));
  // The manifest and every chunk it lists must be stored, and durable, before the record is.
  slot->Run([this, caller, task_id, project = *project, capture = std::move(capture),
             done = std::move(done)]() mutable {
    if (Status ok = CheckManifestStored(project, capture.manifest); !ok) {
      return done(tl::unexpected(ok.error()));
    }
    RecordSnapshot(caller, task_id, std::move(capture), std::move(done));
  });
}

void Controller::RecordSnapshot(const Caller& caller, const std::string& task_id,
                                SnapshotCapture capture, Done<TaskSnapshot> done) {
  std::unique_lock lock(mu_);
  Task* t = FindTask(task_id);
  if (t == nullptr) return lock.unlock(), done(NotFound("task " + task_id + " not found"));
  if (capture.run != t->run) {
    return lock.unlock(), done(MakeError(ErrorCode::kFailedPrecondition,
                                         "task " + task_id + " is in its run " +
                                             std::to_string(t->run) + " now: a snapshot of run " +
                                             std::to_string(capture.run) + " comes too late"));
  }
  const int64_t now = clock_.NowMs();
  TaskSnapshot s;
  s.seq = next_snapshot_seq_;
  s.id = SnapshotId(s.seq);
  s.task_id = task_id;
  s.project_id = t->project_id;
  s.run = capture.run;
  s.trigger = capture.trigger;
  s.consistency = capture.consistency;
  s.node = caller.IsAgent() ? caller.agent_node : (t->placement ? t->placement->node : "");
  s.manifest = std::move(capture.manifest);
  s.files = capture.files;
  s.bytes = capture.bytes;
  s.new_bytes = capture.new_bytes;
  s.taken_ms = std::min(capture.taken_ms > 0 ? capture.taken_ms : now, now);
  s.frozen_ms = capture.frozen_ms;
  s.duration_ms = capture.duration_ms;
  s.image = std::move(capture.image);
  store::WriteBatch batch;
  batch.snapshots.push_back(s);
  batch.settings["snapshot_seq"] = std::to_string(s.seq);
  AddSnapshot(s);
  t->resume_from = s.id;
  if (IsLastSnapshotTrigger(s.trigger)) t->work_lost_ms = 0;  // taken at the interruption itself
  if (HoldsResources(t->state)) (void)cluster_.SetWork(t->id, WorkOf(*t));
  t->updated_ms = now;
  batch.tasks.push_back(*t);
  batch.events.push_back(TaskEvent{t->id, now, t->state, t->state, DescribeSnapshot(s)});
  std::vector<Done<TaskSnapshot>> waiters;
  if (auto it = snapshot_orders_.find(task_id);
      it != snapshot_orders_.end() && it->second.order.run == s.run) {
    SnapshotWait& wait = it->second;
    const bool answers_request = capture.request > 0 && capture.request == wait.order.request;
    const bool last = IsLastSnapshotTrigger(wait.order.trigger) && IsLastSnapshotTrigger(s.trigger);
    if (answers_request) {
      waiters = std::move(wait.waiters);
      wait.waiters.clear();
      wait.order.request = 0;
    }
    if (last || (answers_request && !IsLastSnapshotTrigger(wait.order.trigger))) {
      for (auto& w : wait.waiters) waiters.push_back(std::move(w));
      snapshot_orders_.erase(it);
      TouchNode(s.node);
      if (t->state == TaskState::kPending) {
        Enqueue(*t);
        Wake();
      }
    }
  }
  Commit(std::move(batch), [done = std::move(done), waiters = std::move(waiters), s](Status) {
    for (const auto& w : waiters) w(s);
    done(s);
  });
}

void Controller::FailSnapshot(const Caller& caller, const std::string& task_id, int32_t run,
                              SnapshotTrigger trigger, int64_t request, std::string error,
                              DoneStatus done) {
  std::unique_lock lock(mu_);
  Result<std::string> project = ChunkProjectOf(caller, task_id, "report a snapshot");
  if (!project) return lock.unlock(), done(tl::unexpected(project.error()));
  Task* t = FindTask(task_id);
  const std::string node = caller.IsAgent() ? caller.agent_node : SnapshotNodeOf(*t);
  const std::string why = "node " + node + " could not snapshot task " + task_id + ": " + error;
  std::vector<Done<TaskSnapshot>> waiters;
  if (auto it = snapshot_orders_.find(task_id);
      it != snapshot_orders_.end() && it->second.order.run == run &&
      ((request > 0 && request == it->second.order.request) ||
       (IsLastSnapshotTrigger(trigger) && IsLastSnapshotTrigger(it->second.order.trigger)))) {
    waiters = std::move(it->second.waiters);
    snapshot_orders_.erase(it);
    TouchNode(node);
    if (t->state == TaskState::kPending) {
      Enqueue(*t);
      Wake();
    }
  }
  const int64_t now = clock_.NowMs();
  store::WriteBatch batch;
  batch.events.push_back(TaskEvent{t->id, now, t->state, t->state, "no snapshot: " + why});
  Commit(std::move(batch), [done = std::move(done), waiters = std::move(waiters), why](Status) {
    for (const auto& w : waiters) w(MakeError(ErrorCode::kFailedPrecondition, why));
    done({});
  });
}

}  // namespace gpupool::server
