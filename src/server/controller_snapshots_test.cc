// Snapshots in the Controller (controller_snapshots.cc) over an AsyncStore on a MemoryStore and a
// ChunkStore in a temporary directory: a user's request reaches the node through its assignments
// and is answered by the node's commit; a preempted task is not placed again until its last
// snapshot is stored, then its next run restores it; resume and from_snapshot; what is refused
// (a commit of an earlier run, an incomplete snapshot); records survive a restart; deleting the
// last snapshot, or the task, frees its chunks; with moves enabled (ControllerOptions::
// allow_moves) a running task is moved to make room for a waiting one: snapshotted, queued again
// in its place and resumed from that snapshot on another node, never counted as preempted.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "os/sha256.h"
#include "proto/json_codec.h"
#include "server/controller.h"
#include "server/controller_testing.h"

namespace gpupool::server {
namespace {

using testing::Await;
using testing::AwaitTask;
using testing::ChunkStoreFixture;

class ControllerSnapshotsTest : public ChunkStoreFixture {
 protected:
  void SetUp() override {
    ChunkStoreFixture::SetUp();
    if (HasFatalFailure()) return;
    AddNode("n1", n1_gpus_);
  }
  void AddNode(const std::string& name, int gpus) {
    Node n = Node::Make(name, 64'000, 512 * 1024, gpus, "A100-80GB");
    ASSERT_TRUE(
        Await<NodeView>([&](Done<NodeView> d) { c_->RegisterNode(admin_, n, std::move(d)); }));
  }

  std::string Submit(int priority = 0, std::string from_snapshot = "", int gpus = 1) {
    TaskSpec spec;
    spec.request.cpu_milli = 1000;
    spec.request.memory_mib = 1024;
    spec.request.gpu_count = gpus;
    spec.request.priority = priority;
    spec.command = {"python3", "train.py"};
    spec.from_snapshot = std::move(from_snapshot);
    Result<Task> t = Await<Task>([&](Done<Task> d) { c_->SubmitTask(admin_, spec, std::move(d)); });
    EXPECT_TRUE(t) << (t ? "" : t.error().message);
    return t ? t->id : "";
  }
  Result<Task> Report(const std::string& id, TaskState to) {
    return Await<Task>(
        [&](Done<Task> d) { c_->ReportTask(admin_, id, to, 0, 0, "", 0, std::move(d)); });
  }
  Task Get(const std::string& id) { return AwaitTask(*c_, admin_, id)->task; }
  NodeAssignments Assignments(const std::string& node = "n1") {
    return *Await<NodeAssignments>(
        [&](Done<NodeAssignments> d) { c_->WatchAssignments(admin_, node, 0, 0, std::move(d)); });
  }
  // Stores a one-file workspace's chunk and manifest for `task`, as its node would (`who`: its
  // agent; the admin when null); the manifest.
  std::string Upload(const std::string& task, const std::string& bytes,
                     const Caller* who = nullptr) {
    const std::string chunk = os::Sha256Hex(bytes);
    proto::SnapshotManifest m;
    m.files.push_back({"model.pt", 0644, static_cast<int64_t>(bytes.size()), 1, {chunk}});
    const std::string text = proto::Dump(proto::Encode(m));
    const std::string manifest = os::Sha256Hex(text);
    for (const auto& [sha, data] : {std::pair{chunk, bytes}, {manifest, text}}) {
      EXPECT_TRUE(Await<bool>(
          [&](Done<bool> d) { c_->PutChunk(who ? *who : admin_, task, sha, data, std::move(d)); }));
    }
    return manifest;
  }
  Result<TaskSnapshot> Commit(const std::string& task, int32_t run, SnapshotTrigger trigger,
                              const std::string& manifest, int64_t request = 0,
                              const Caller* who = nullptr) {
    SnapshotCapture c;
    c.run = run;
    c.trigger = trigger;
    c.request = request;
    c.manifest = manifest;
    c.files = 1;
    c.taken_ms = clock_.NowMs();
    return Await<TaskSnapshot>([&](Done<TaskSnapshot> d) {
      c_->CommitSnapshot(who ? *who : admin_, task, c, std::move(d));
    });
  }

  std::vector<TaskEvent> Events(const std::string& id) {
    auto events = Await<std::vector<TaskEvent>>(
        [&](Done<std::vector<TaskEvent>> d) { c_->TaskEvents(admin_, id, std::move(d)); });
    EXPECT_TRUE(events) << events.error().message;
    return events.value_or(std::vector<TaskEvent>{});
  }
  // The caller of `node`'s own agent credential (a join token's), which acts for that node only.
  Caller AgentOf(const std::string& node) {
    auto token = Await<NewJoinToken>(
        [&](Done<NewJoinToken> d) { c_->CreateJoinToken(admin_, "test", 0, std::move(d)); });
    EXPECT_TRUE(token) << token.error().message;
    auto creds = Await<AgentCredentials>(
        [&](Done<AgentCredentials> d) { c_->JoinNode(token->token, node, std::move(d)); });
    EXPECT_TRUE(creds) << creds.error().message;
    return c_->LookupKey(creds->key.access_key)->caller;
  }

  int n1_gpus_ = 1;
};

// Move instead of kill: n1 has 2 GPUs, one of them taken by a running 1-GPU task (`mover_`), and
// n2 one free GPU; a 2-GPU task of the same priority fits nowhere, not even by preemption, unless
// the 1-GPU task moves to n2.
class ControllerMovesTest : public ControllerSnapshotsTest {
 protected:
  ControllerMovesTest() {
    n1_gpus_ = 2;
    options_.allow_moves = true;
  }
  void SetUp() override {
    ControllerSnapshotsTest::SetUp();
    if (HasFatalFailure()) return;
    mover_ = Submit();
    ASSERT_EQ(c_->SchedulePass(), 1);
    ASSERT_EQ(Get(mover_).placement->node, "n1");
    ASSERT_TRUE(Report(mover_, TaskState::kRunning));
    AddNode("n2", 1);
  }
  // The value of a counter of /metrics without labels.
  double Counter(const std::string& name) {
    const std::string text = c_->MetricsText();
    const size_t at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
  }

  std::string mover_;
};

TEST_F(ControllerSnapshotsTest, AUsersRequestReachesTheNodeAndIsAnsweredByItsCommit) {
  const std::string t = Submit();
  ASSERT_EQ(c_->SchedulePass(), 1);
  ASSERT_TRUE(Report(t, TaskState::kRunning));
  EXPECT_EQ(Get(t).run, 1);
  std::optional<Result<TaskSnapshot>> answer;
  c_->SnapshotTask(admin_, t, /*image=*/false,
                   [&](Result<TaskSnapshot> s) { answer = std::move(s); });
  const NodeAssignments a = Assignments();
  ASSERT_EQ(a.snapshots.count(t), 1u);
  const SnapshotOrder order = a.snapshots.at(t);
  EXPECT_EQ(order.trigger, SnapshotTrigger::kManual);
  EXPECT_EQ(order.run, 1);
  EXPECT_GT(order.request, 0);
  EXPECT_FALSE(answer.has_value());  // not before the node stored it
  const std::string manifest = Upload(t, "weights v1");
  Result<TaskSnapshot> s = Commit(t, 1, SnapshotTrigger::kManual, manifest, order.request);
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_TRUE(answer.has_value() && answer->has_value());
  EXPECT_EQ((*answer)->id, s->id);
  EXPECT_EQ(s->id, "s-1");
  EXPECT_EQ(Get(t).resume_from, "s-1");
  EXPECT_EQ(Assignments().snapshots.count(t), 0u);  // answered: no longer asked for
  // Durable: after a restart it is listed, and ids go on from it.
  Reopen();
  auto listed = Await<std::vector<TaskSnapshot>>(
      [&](Done<std::vector<TaskSnapshot>> d) { c_->ListSnapshots(admin_, t, "", std::move(d)); });
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().manifest, manifest);
  s = Commit(t, 1, SnapshotTrigger::kPeriodic, Upload(t, "weights v2"));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->id, "s-2");
}

TEST_F(ControllerSnapshotsTest, APreemptedTaskWaitsForItsLastSnapshotThenRestoresIt) {
  const std::string low = Submit(0);
  ASSERT_EQ(c_->SchedulePass(), 1);
  ASSERT_TRUE(Report(low, TaskState::kRunning));
  const std::string high = Submit(10);
  ASSERT_EQ(c_->SchedulePass(), 1);  // the high one, in the low one's place
  Task victim = Get(low);
  EXPECT_EQ(victim.state, TaskState::kPending);
  const NodeAssignments a = Assignments();
  ASSERT_EQ(a.snapshots.count(low), 1u);
  EXPECT_EQ(a.snapshots.at(low).trigger, SnapshotTrigger::kPreempt);
  // The node is free again, but the victim waits for its snapshot.
  ASSERT_TRUE(Report(high, TaskState::kRunning));
  ASSERT_TRUE(Await<Task>([&](Done<Task> d) { c_->StopTask(admin_, high, true, std::move(d)); }));
  EXPECT_EQ(c_->SchedulePass(), 0);
  Result<TaskView> waiting = AwaitTask(*c_, admin_, low);
  EXPECT_NE(waiting->pending_reason.find("waiting for its last snapshot from node n1"),
            std::string::npos)
      << waiting->pending_reason;
  // Stored by n1's own agent, although the task is no longer bound there.
  const Caller n1_agent = AgentOf("n1");
  Result<TaskSnapshot> s =
      Commit(low, 1, SnapshotTrigger::kPreempt, Upload(low, "step 41", &n1_agent), 0, &n1_agent);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(c_->SchedulePass(), 1);
  victim = Get(low);
  EXPECT_EQ(victim.run, 2);
  EXPECT_EQ(victim.resume_from, s->id);
  EXPECT_EQ(victim.work_lost_ms, 0);  // taken at the preemption itself
  const NodeAssignments next = Assignments();
  ASSERT_EQ(next.restores.count(low), 1u);
  EXPECT_EQ(next.restores.at(low).id, s->id);
  // A late snapshot of the run before is refused.
  Result<TaskSnapshot> late = Commit(low, 1, SnapshotTrigger::kPeriodic, Upload(low, "late"));
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(late.error().message.find("comes too late"), std::string::npos);
}

// A server restarted while a preempted task waits for its last snapshot keeps it waiting (it
// would otherwise run again from an older snapshot, losing the work since), and places it from
// that snapshot once stored.
TEST_F(ControllerSnapshotsTest, ARestartedServerStillWaitsForALastSnapshot) {
  const std::string low = Submit(0);
  ASSERT_EQ(c_->SchedulePass(), 1);
  ASSERT_TRUE(Report(low, TaskState::kRunning));
  const Caller n1_agent = AgentOf("n1");
  ASSERT_TRUE(
      Commit(low, 1, SnapshotTrigger::kPeriodic, Upload(low, "step 10", &n1_agent), 0, &n1_agent));
  const std::string high = Submit(10);
  ASSERT_EQ(c_->SchedulePass(), 1);  // preempts the low one
  ASSERT_TRUE(Report(high, TaskState::kRunning));
  ASSERT_TRUE(Await<Task>([&](Done<Task> d) { c_->StopTask(admin_, high, true, std::move(d)); }));

  Reopen();
  EXPECT_EQ(c_->SchedulePass(), 0) << "placed from its older snapshot";
  Result<TaskView> waiting = AwaitTask(*c_, admin_, low);
  EXPECT_NE(waiting->pending_reason.find("waiting for its last snapshot from node n1"),
            std::string::npos)
      << waiting->pending_reason;
  ASSERT_EQ(Assignments().snapshots.count(low), 1u) << "n1 is still asked for it";
  Result<TaskSnapshot> s =
      Commit(low, 1, SnapshotTrigger::kPreempt, Upload(low, "step 41", &n1_agent), 0, &n1_agent);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(c_->SchedulePass(), 1);
  EXPECT_EQ(Get(low).resume_from, s->id);

  // Answered: another restart does not wait again.
  ASSERT_TRUE(Report(low, TaskState::kRunning));
  Reopen();
  EXPECT_TRUE(Get(low).state == TaskState::kRunning);
}

// The node reports that it could not take the last snapshot of a task the preemption took off it
// (here with the admin's key, as agents set up by `gpupool up` have): the task no longer waits.
TEST_F(ControllerSnapshotsTest, AFailedLastSnapshotOfAPreemptedTaskIsReportedAndWaitedForNoLonger) {
  const std::string low = Submit(0);
  ASSERT_EQ(c_->SchedulePass(), 1);
  ASSERT_TRUE(Report(low, TaskState::kRunning));
  const std::string high = Submit(10);
  ASSERT_EQ(c_->SchedulePass(), 1);
  ASSERT_EQ(Assignments().snapshots.count(low), 1u);
  ASSERT_TRUE(testing::AwaitStatus([&](DoneStatus d) {
    c_->FailSnapshot(admin_, low, 1, SnapshotTrigger::kPreempt, 0, "disk full", std::move(d));
  }));
  EXPECT_EQ(Assignments().snapshots.count(low), 0u);
  EXPECT_EQ(Events(low).back().reason,
            "no snapshot: node n1 could not snapshot task " + low + ": disk full");
  EXPECT_EQ(c_->SchedulePass(), 0);  // n1 is the high one's
  EXPECT_EQ(AwaitTask(*c_, admin_, low)->pending_reason.find("waiting for its last snapshot"),
            std::string::npos);
}

TEST_F(ControllerSnapshotsTest, ResumeAndFromSnapshotNeedASnapshotOfTheProject) {
  const std::string t = Submit();
  ASSERT_EQ(c_->SchedulePass(), 1);
  ASSERT_TRUE(Report(t, TaskState::kRunning));
  auto resume = [&](const std::string& id, const std::string& snap) {
    return Await<Task>([&](Done<Task> d) { c_->ResumeTask(admin_, id, snap, std::move(d)); });
  };
  Result<Task> r = resume(t, "");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("only an ended task is resumed"), std::string::npos);
  ASSERT_TRUE(Await<Task>([&](Done<Task> d) { c_->StopTask(admin_, t, true, std::move(d)); }));
  EXPECT_EQ(Assignments().snapshots.count(t), 0u) << "discard: no snapshot asked for";
  r = resume(t, "");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "task " + t + " has no snapshot to resume from");
  // An incomplete snapshot (its chunk never uploaded) is refused, naming the chunk.
  proto::SnapshotManifest m;
  m.files.push_back({"a", 0644, 1, 1, {std::string(64, 'b')}});
  const std::string text = proto::Dump(proto::Encode(m));
  ASSERT_TRUE(Await<bool>(
      [&](Done<bool> d) { c_->PutChunk(admin_, t, os::Sha256Hex(text), text, std::move(d)); }));
  Result<TaskSnapshot> partial = Commit(t, 1, SnapshotTrigger::kStop, os::Sha256Hex(text));
  ASSERT_FALSE(partial);
  EXPECT_NE(partial.error().message.find("was not uploaded"), std::string::npos);
  Result<TaskSnapshot> s = Commit(t, 1, SnapshotTrigger::kStop, Upload(t, "final"));
  ASSERT_TRUE(s) << s.error().message;
  r = resume(t, "");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->state, TaskState::kPending);
  EXPECT_EQ(r->resume_from, s->id);
  // A new task from it; an unknown one is refused by name.
  const std::string copy = Submit(0, s->id);
  EXPECT_EQ(Get(copy).resume_from, s->id);
  TaskSpec bad;
  bad.command = {"true"};
  bad.from_snapshot = "s-99";
  Result<Task> refused =
      Await<Task>([&](Done<Task> d) { c_->SubmitTask(admin_, bad, std::move(d)); });
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kNotFound);
  EXPECT_NE(refused.error().message.find("from_snapshot: snapshot s-99"), std::string::npos);
}

TEST_F(ControllerSnapshotsTest, DeletingTheLastSnapshotFreesItsChunks) {
  const std::string t = Submit();
  ASSERT_EQ(c_->SchedulePass(), 1);
  ASSERT_TRUE(Report(t, TaskState::kRunning));
  Result<TaskSnapshot> s =
      Commit(t, 1, SnapshotTrigger::kManual, Upload(t, std::string(4096, 'x')));
  ASSERT_TRUE(s);
  const std::string project = s->project_id;
  EXPECT_GT(chunks_->ProjectBytes(project), 4096);
  ASSERT_TRUE(
      testing::AwaitStatus([&](DoneStatus d) { c_->DeleteSnapshot(admin_, s->id, std::move(d)); }));
  EXPECT_EQ(Get(t).resume_from, "");
  // Collected on the blocking-work executor after the deletion is durable.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (chunks_->ProjectBytes(project) > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(chunks_->ProjectBytes(project), 0);
}

// A saved image's archive is listed in the manifest beside the workspace: a snapshot whose
// archive was not uploaded is refused, and collecting after another snapshot's deletion keeps it.
TEST_F(ControllerSnapshotsTest, ASavedImagesArchiveIsCheckedAndKeptLikeTheWorkspace) {
  const std::string t = Submit();
  ASSERT_EQ(c_->SchedulePass(), 1);
  ASSERT_TRUE(Report(t, TaskState::kRunning));
  const std::string workspace(4096, 'w'), archive(5000, 'i');
  proto::SnapshotManifest m;
  m.files.push_back({"model.pt", 0644, 4096, 1, {os::Sha256Hex(workspace)}});
  m.image = proto::ManifestImage{"sha256:" + std::string(64, 'e'),
                                 "busybox:1",
                                 {"image.tar", 0644, 5000, 1, {os::Sha256Hex(archive)}}};
  const std::string text = proto::Dump(proto::Encode(m));
  auto put = [&](const std::string& data) {
    ASSERT_TRUE(Await<bool>(
        [&](Done<bool> d) { c_->PutChunk(admin_, t, os::Sha256Hex(data), data, std::move(d)); }));
  };
  put(workspace);
  put(text);
  Result<TaskSnapshot> refused = Commit(t, 1, SnapshotTrigger::kManual, os::Sha256Hex(text));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("'image.tar' was not uploaded"), std::string::npos)
      << refused.error().message;
  put(archive);
  ASSERT_TRUE(Commit(t, 1, SnapshotTrigger::kManual, os::Sha256Hex(text)));
  Result<TaskSnapshot> other =
      Commit(t, 1, SnapshotTrigger::kManual, Upload(t, std::string(4096, 'o')));
  ASSERT_TRUE(other);
  const int64_t before = chunks_->ProjectBytes(other->project_id);
  ASSERT_TRUE(testing::AwaitStatus(
      [&](DoneStatus d) { c_->DeleteSnapshot(admin_, other->id, std::move(d)); }));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (chunks_->ProjectBytes(other->project_id) == before &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_LT(chunks_->ProjectBytes(other->project_id), before) << "nothing was collected";
  EXPECT_TRUE(chunks_->Get(other->project_id, os::Sha256Hex(archive)))
      << "the archive of a snapshot still kept was collected";
}

TEST_F(ControllerSnapshotsTest, DeletingATaskDeletesItsSnapshotsAndFreesTheirChunks) {
  const std::string t = Submit();
  ASSERT_EQ(c_->SchedulePass(), 1);
  ASSERT_TRUE(Report(t, TaskState::kRunning));
  Result<TaskSnapshot> s =
      Commit(t, 1, SnapshotTrigger::kManual, Upload(t, std::string(4096, 'y')));
  ASSERT_TRUE(s);
  ASSERT_TRUE(Await<Task>([&](Done<Task> d) { c_->StopTask(admin_, t, true, std::move(d)); }));
  ASSERT_TRUE(testing::AwaitStatus([&](DoneStatus d) { c_->DeleteTask(admin_, t, std::move(d)); }));
  // Answered once the task's files are gone, and its chunks with them.
  EXPECT_EQ(chunks_->ProjectBytes(s->project_id), 0);
  Result<TaskSnapshot> gone = Await<TaskSnapshot>(
      [&](Done<TaskSnapshot> d) { c_->GetSnapshot(admin_, s->id, std::move(d)); });
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);
}

TEST_F(ControllerMovesTest, ARunningTaskMovesToMakeRoomAndResumesFromItsSnapshotElsewhere) {
  const std::string waiting = Submit(0, "", 2);
  ASSERT_EQ(c_->SchedulePass(), 1);  // the waiting task, in the room the mover leaves
  Task placed = Get(waiting);
  EXPECT_EQ(placed.state, TaskState::kScheduled);
  EXPECT_EQ(placed.placement->node, "n1");
  EXPECT_NE(placed.reason.find(mover_ + " moved away to make room"), std::string::npos)
      << placed.reason;
  // The mover: taken off n1, its last snapshot asked of n1, queued again; not a preemption.
  Task moved = Get(mover_);
  EXPECT_EQ(moved.state, TaskState::kPending);
  EXPECT_EQ(moved.preemptions, 0);
  EXPECT_EQ(moved.run, 1);
  const std::vector<TaskEvent> events = Events(mover_);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().from, TaskState::kRunning);
  EXPECT_EQ(events.back().to, TaskState::kPending);
  EXPECT_EQ(events.back().reason, "moved from n1 to make room for " + waiting +
                                      " (snapshotted first, to resume from it where it fits)");
  for (const TaskEvent& e : events) EXPECT_NE(e.to, TaskState::kPreempted) << e.reason;
  EXPECT_EQ(Counter("gpupool_moves_total"), 1);
  EXPECT_EQ(Counter("gpupool_preemptions_total"), 0);
  const NodeAssignments n1 = Assignments("n1");
  ASSERT_EQ(n1.snapshots.count(mover_), 1u);
  EXPECT_EQ(n1.snapshots.at(mover_).trigger, SnapshotTrigger::kMove);
  EXPECT_EQ(n1.snapshots.at(mover_).run, 1);
  // A task submitted later of the same priority queues behind it.
  const std::string later = Submit(0, "", 2);
  // Until its snapshot is stored, the mover waits, although n2 has room.
  EXPECT_EQ(c_->SchedulePass(), 0);
  Result<TaskView> view = AwaitTask(*c_, admin_, mover_);
  EXPECT_NE(view->pending_reason.find("waiting for its last snapshot from node n1"),
            std::string::npos)
      << view->pending_reason;
  EXPECT_EQ(view->queue_position, 1);
  EXPECT_EQ(AwaitTask(*c_, admin_, later)->queue_position, 2);
  // Stored by n1's own agent, which the task just left.
  const Caller n1_agent = AgentOf("n1");
  Result<TaskSnapshot> s =
      Commit(mover_, 1, SnapshotTrigger::kMove, Upload(mover_, "step 7", &n1_agent), 0, &n1_agent);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->node, "n1");
  EXPECT_EQ(c_->SchedulePass(), 1);  // the mover, on n2 (the later task fits nowhere)
  moved = Get(mover_);
  EXPECT_EQ(moved.state, TaskState::kScheduled);
  EXPECT_EQ(moved.placement->node, "n2");
  EXPECT_EQ(moved.run, 2);
  EXPECT_EQ(moved.resume_from, s->id);
  EXPECT_EQ(moved.work_lost_ms, 0);  // its snapshot was taken as it left
  const NodeAssignments n2 = Assignments("n2");
  ASSERT_EQ(n2.restores.count(mover_), 1u);
  EXPECT_EQ(n2.restores.at(mover_).id, s->id);
  EXPECT_EQ(Get(later).state, TaskState::kPending);
}

TEST_F(ControllerMovesTest, NothingMovesWhenMovesAreOff) {
  options_.allow_moves = false;
  Reopen();
  const std::string waiting = Submit(0, "", 2);
  EXPECT_EQ(c_->SchedulePass(), 0);
  EXPECT_EQ(Get(waiting).state, TaskState::kPending);
  EXPECT_EQ(Get(mover_).state, TaskState::kRunning);
  EXPECT_EQ(Assignments("n1").snapshots.count(mover_), 0u);
  EXPECT_EQ(Counter("gpupool_moves_total"), 0);
}

TEST_F(ControllerMovesTest, ATaskNotSnapshottedOnStopNeverMoves) {
  // Without a chunk store no task is snapshotted when it stops: none may move.
  options_.chunks = nullptr;
  Reopen();
  const std::string waiting = Submit(0, "", 2);
  EXPECT_EQ(c_->SchedulePass(), 0);
  EXPECT_EQ(Get(waiting).state, TaskState::kPending);
  EXPECT_EQ(Get(mover_).state, TaskState::kRunning);
  EXPECT_EQ(Counter("gpupool_moves_total"), 0);
}

}  // namespace
}  // namespace gpupool::server
