// Controller telemetry on a MemoryStore with a hand-driven clock and the task output in a temp dir:
// agents' batches (output stored once per offset, the acknowledged offsets, refusals, who may
// push), logs read, followed and completed, stop conditions on reported metrics, idle GPUs and
// runtime, the usage histories and overview, the /metrics gauges, what deleting a task
// removes, and the live events the Controller publishes (tasks by visibility, a watched task's
// usage, stdout and metrics, nodes, deletions, pending reasons, overflow).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "server/controller.h"
#include "server/controller_testing.h"
#include "store/memory_store.h"

namespace gpupool::server {
namespace {

namespace fs = std::filesystem;
using testing::Await;
using testing::AwaitMetrics;
using testing::AwaitStatus;
using testing::AwaitTask;
using testing::ControllerFixture;
using testing::Watching;
using testing::WithNodes;

constexpr int64_t kGraceMs = 5'000;

OutputChunk Chunk(OutputStream stream, int64_t offset, std::string data) {
  return OutputChunk{stream, offset, std::move(data)};
}

// A task's usage over the second before `time_ms`: 500 milli-CPU, 1 GiB, `util` % of its GPU.
UsageSample Usage(int64_t time_ms, int64_t util, int64_t cpu_milli = 500) {
  return UsageSample{time_ms, {cpu_milli, 1024, util, 2048}};
}

LogRequest FromOffset(int64_t offset, int64_t wait_ms = 0,
                      OutputStream stream = OutputStream::kStdout) {
  LogRequest r;
  r.stream = stream;
  r.offset = offset;
  r.wait_ms = wait_ms;
  return r;
}

// The caller a node's own agent credential resolves to (see Controller::JoinNode).
Caller AgentOf(const std::string& node) {
  Caller c;
  c.user_id = "agent:" + node;
  c.agent_node = node;
  return c;
}

class ControllerTelemetryTest : public ControllerFixture {
 protected:
  void SetUp() override {
    std::string tmpl =
        (fs::path(::testing::TempDir()) / "controller_telemetry_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    options_.node_timeout_ms = int64_t{365} * 24 * 3600 * 1000;  // never lost: no heartbeats here
    options_.output_dir = OutputDir();
    options_.output_grace_ms = kGraceMs;
    options_.blocking_threads = 1;  // reads and pushes run in the order they were made
    ControllerFixture::SetUp();
    if (HasFatalFailure()) return;
    for (const char* name : {"n1", "n2"}) {
      Node n = Node::Make(name, 64'000, 512 * 1024, 2, "A100-80GB");
      ASSERT_TRUE(
          Await<NodeView>([&](Done<NodeView> d) { c_->RegisterNode(admin_, n, std::move(d)); }));
    }
    // n2 is cordoned: every task runs on n1.
    ASSERT_TRUE(Await<NodeView>([&](Done<NodeView> d) { c_->SetCordon(admin_, "n2", true, d); }));
  }
  void TearDown() override {
    Shutdown();
    fs::remove_all(dir_);
  }

  std::string OutputDir() const { return dir_ + "/output"; }

  Task Submit(const Caller& who, const std::string& stop_when = "") {
    TaskSpec spec;
    spec.request.cpu_milli = 1000;
    spec.request.memory_mib = 1024;
    spec.request.gpu_count = 1;
    spec.command = {"python3", "train.py"};
    spec.stop_when = stop_when;
    auto t = Await<Task>([&](Done<Task> d) { c_->SubmitTask(who, spec, std::move(d)); });
    EXPECT_TRUE(t) << t.error().message;
    return t.value_or(Task{});
  }

  // A task of `who`'s, bound to n1 and reported running there.
  Task Run(const Caller& who, const std::string& stop_when = "") {
    const Task t = Submit(who, stop_when);
    EXPECT_EQ(c_->SchedulePass(), 1);
    EXPECT_TRUE(Report(t.id, TaskState::kRunning));
    const Task running = Get(t.id);
    EXPECT_EQ(running.placement->node, "n1");
    EXPECT_GT(running.bound_ms, 0);
    return running;
  }

  Task Get(const std::string& id) { return AwaitTask(*c_, admin_, id)->task; }

  Result<Task> Report(const std::string& id, TaskState to) {
    return Await<Task>(
        [&](Done<Task> d) { c_->ReportTask(admin_, id, to, 0, 0, "", 0, std::move(d)); });
  }

  // The telemetry of `t`'s current binding.
  static TaskTelemetry Of(const Task& t) {
    TaskTelemetry tt;
    tt.task_id = t.id;
    tt.bound_ms = t.bound_ms;
    return tt;
  }

  Result<std::vector<OutputOffsets>> Push(const Caller& who, const std::string& node,
                                          std::vector<TaskTelemetry> tasks,
                                          std::vector<NodeSample> samples = {}) {
    NodeTelemetry batch;
    batch.node = node;
    batch.tasks = std::move(tasks);
    batch.samples = std::move(samples);
    return Await<std::vector<OutputOffsets>>([&](Done<std::vector<OutputOffsets>> d) {
      c_->PushTelemetry(who, std::move(batch), std::move(d));
    });
  }

  // One task's telemetry from n1 (as an admin): its acknowledgement.
  OutputOffsets PushOne(TaskTelemetry t) {
    auto acks = Push(admin_, "n1", {std::move(t)});
    EXPECT_TRUE(acks) << acks.error().message;
    EXPECT_EQ(acks ? acks->size() : 0, 1u);
    return acks && acks->size() == 1 ? acks->front() : OutputOffsets{};
  }

  Result<LogSlice> ReadLog(const Caller& who, const std::string& id, LogRequest r) {
    return Await<LogSlice>([&](Done<LogSlice> d) { c_->ReadTaskLog(who, id, r, std::move(d)); });
  }
  Result<LogSlice> ReadLog(const std::string& id, LogRequest r) { return ReadLog(admin_, id, r); }

  // A read that may wait: its answer, whenever (and on whichever thread) it comes.
  std::future<Result<LogSlice>> Follow(const std::string& id, LogRequest r) {
    auto promise = std::make_shared<std::promise<Result<LogSlice>>>();
    c_->ReadTaskLog(admin_, id, r,
                    [promise](Result<LogSlice> s) { promise->set_value(std::move(s)); });
    return promise->get_future();
  }

  // Whether `f` has its answer once the blocking-work executor (one worker: in order) has run
  // everything queued before now.
  bool Answered(const std::future<Result<LogSlice>>& f) {
    EXPECT_TRUE(Push(admin_, "n2", {}));  // a round trip behind what is queued
    return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }

  bool Complete(const std::string& id) {
    auto s = ReadLog(id, FromOffset(0));
    EXPECT_TRUE(s) << s.error().message;
    return s && s->complete;
  }

  std::string dir_;
};

// ---------------------------------------------------------------------------------------------
// Output: stored once per offset, acknowledged, read back.

TEST_F(ControllerTelemetryTest, OutputIsStoredOnceAcknowledgedAndReadBack) {
  const Task t = Run(admin_);
  TaskTelemetry first = Of(t);
  first.output = {Chunk(OutputStream::kStdout, 0, "line 1\nline 2\n"),
                  Chunk(OutputStream::kStderr, 0, "warn\n"),
                  Chunk(OutputStream::kMetrics, 0, "{\"step\": 1}\n")};
  OutputOffsets ack = PushOne(first);
  EXPECT_EQ(ack.task_id, t.id);
  EXPECT_FALSE(ack.refused);
  EXPECT_EQ(ack.stdout_bytes, 14);
  EXPECT_EQ(ack.stderr_bytes, 5);
  EXPECT_EQ(ack.metrics_bytes, 12);

  // The agent did not hear the answer and sends the batch again: stored once.
  ack = PushOne(first);
  EXPECT_EQ(ack.stdout_bytes, 14);
  EXPECT_EQ(ack.stderr_bytes, 5);
  // The next chunk overlaps what is stored: only its new part is appended.
  TaskTelemetry next = Of(t);
  next.output = {Chunk(OutputStream::kStdout, 7, "line 2\nline 3\n")};
  ack = PushOne(next);
  EXPECT_EQ(ack.stdout_bytes, 21);
  EXPECT_EQ(ack.stderr_bytes, 5) << "the acknowledgement covers every stream";
  EXPECT_EQ(ack.metrics_bytes, 12);

  auto all = ReadLog(t.id, FromOffset(0));
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_EQ(all->task_id, t.id);
  EXPECT_EQ(all->slice.data, "line 1\nline 2\nline 3\n");
  EXPECT_EQ(all->slice.offset, 0);
  EXPECT_EQ(all->slice.next_offset, 21);
  EXPECT_EQ(all->slice.size, 21);
  EXPECT_FALSE(all->complete) << "the task is still running";

  LogRequest part = FromOffset(7);
  part.max_bytes = 7;
  auto middle = ReadLog(t.id, part);
  ASSERT_TRUE(middle);
  EXPECT_EQ(middle->slice.data, "line 2\n");
  EXPECT_EQ(middle->slice.offset, 7);
  EXPECT_EQ(middle->slice.next_offset, 14);

  LogRequest tail = FromOffset(0);
  tail.tail_lines = 1;
  auto last = ReadLog(t.id, tail);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->slice.data, "line 3\n");
  EXPECT_EQ(last->slice.offset, 14);
  tail.tail_lines = 2;
  EXPECT_EQ(ReadLog(t.id, tail)->slice.data, "line 2\nline 3\n");

  EXPECT_EQ(ReadLog(t.id, FromOffset(0, 0, OutputStream::kStderr))->slice.data, "warn\n");
  EXPECT_EQ(ReadLog(t.id, FromOffset(0, 0, OutputStream::kMetrics))->slice.data, "{\"step\": 1}\n");
}

TEST_F(ControllerTelemetryTest, TelemetryFromAnotherNodeOrBindingIsRefusedAndNothingStored) {
  const Task t = Run(admin_, "val_acc > 0.5");
  auto everything = [&](TaskTelemetry tt) {
    tt.output = {Chunk(OutputStream::kStdout, 0, "not mine\n"),
                 Chunk(OutputStream::kMetrics, 0, "{\"val_acc\": 0.9}\n")};
    tt.samples = {Usage(clock_.now_ms, 0)};
    return tt;
  };
  auto expect_refused = [&](const Result<std::vector<OutputOffsets>>& acks, const char* why) {
    ASSERT_TRUE(acks) << why << ": " << acks.error().message;
    ASSERT_EQ(acks->size(), 1u) << why;
    EXPECT_EQ(acks->front().task_id, t.id) << why;
    EXPECT_TRUE(acks->front().refused) << why;
    EXPECT_EQ(acks->front().stdout_bytes, 0) << why;
  };

  expect_refused(Push(admin_, "n2", {everything(Of(t))}), "from another node");
  TaskTelemetry earlier = Of(t);
  earlier.bound_ms = t.bound_ms - 1;
  expect_refused(Push(admin_, "n1", {everything(earlier)}), "about another binding");
  TaskTelemetry unknown;
  unknown.task_id = "t-99";
  auto acks = Push(admin_, "n1", {unknown});
  ASSERT_TRUE(acks);
  EXPECT_TRUE(acks->front().refused) << "a task that does not exist";

  // Nothing of it was kept: no output, no usage, no reported value (nor the stop it would cause).
  auto log = ReadLog(t.id, FromOffset(0));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->slice.size, 0);
  EXPECT_FALSE(fs::exists(OutputDir() + "/" + t.id + "/stdout"));
  auto metrics = AwaitMetrics(*c_, admin_, t.id, 0, clock_.now_ms, Resolution::kRaw);
  ASSERT_TRUE(metrics);
  EXPECT_TRUE(metrics->usage.empty());
  EXPECT_TRUE(metrics->reported.empty());
  EXPECT_EQ(metrics->latest.count("val_acc"), 0u);
  EXPECT_EQ(Get(t.id).state, TaskState::kRunning);

  // The binding's own node is heard, and a batch of an unknown node is an error.
  EXPECT_FALSE(PushOne(everything(Of(t))).refused);
  EXPECT_EQ(Get(t.id).state, TaskState::kStopped);
  EXPECT_EQ(Push(admin_, "n9", {}).error().code, ErrorCode::kNotFound);
}

TEST_F(ControllerTelemetryTest, OnlyTheNodesAgentPushesAndOnlyTheProjectReadsTheLog) {
  const Caller alice = testing::MakeMember(*c_, admin_, "alice", "vision");
  const Caller bob = testing::MakeMember(*c_, admin_, "bob", "speech");
  const Task t = Run(alice);
  const Caller agent_n1 = AgentOf("n1");
  const Caller agent_n2 = AgentOf("n2");
  TaskTelemetry tt = Of(t);
  tt.output = {Chunk(OutputStream::kStdout, 0, "secret results\n")};

  auto other_agent = Push(agent_n2, "n1", {tt});
  ASSERT_FALSE(other_agent);
  EXPECT_EQ(other_agent.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(other_agent.error().message.find("acts only for that node"), std::string::npos)
      << other_agent.error().message;
  auto member = Push(alice, "n1", {tt});
  ASSERT_FALSE(member);
  EXPECT_EQ(member.error().code, ErrorCode::kPermissionDenied) << "users do not ship telemetry";
  EXPECT_EQ(ReadLog(t.id, FromOffset(0))->slice.size, 0) << "nothing stored from refused calls";

  auto own_agent = Push(agent_n1, "n1", {tt});
  ASSERT_TRUE(own_agent) << own_agent.error().message;
  EXPECT_EQ(own_agent->front().stdout_bytes, 15);

  auto outsider = ReadLog(bob, t.id, FromOffset(0));
  ASSERT_FALSE(outsider);
  EXPECT_EQ(outsider.error().code, ErrorCode::kNotFound) << "another project's task is not there";
  EXPECT_EQ(AwaitMetrics(*c_, bob, t.id, 0, clock_.now_ms, Resolution::kRaw).error().code,
            ErrorCode::kNotFound);
  auto owner = ReadLog(alice, t.id, FromOffset(0));
  ASSERT_TRUE(owner) << owner.error().message;
  EXPECT_EQ(owner->slice.data, "secret results\n");
  EXPECT_TRUE(AwaitMetrics(*c_, alice, t.id, 0, clock_.now_ms, Resolution::kRaw));
}

// ---------------------------------------------------------------------------------------------
// Following a log, and when it is complete.

TEST_F(ControllerTelemetryTest, AFollowerIsAnsweredWhenBytesOfItsStreamArrive) {
  const Task t = Run(admin_);
  TaskTelemetry tt = Of(t);
  tt.output = {Chunk(OutputStream::kStdout, 0, "a\n")};
  PushOne(tt);

  auto out = Follow(t.id, FromOffset(2, 10'000));
  auto err = Follow(t.id, FromOffset(0, 10'000, OutputStream::kStderr));
  EXPECT_FALSE(Answered(out)) << "nothing past offset 2 yet";
  EXPECT_FALSE(Answered(err));
  tt.output = {Chunk(OutputStream::kStdout, 2, "b\n")};
  PushOne(tt);
  ASSERT_TRUE(Answered(out)) << "the push answers the follower";
  auto slice = out.get();
  ASSERT_TRUE(slice) << slice.error().message;
  EXPECT_EQ(slice->slice.offset, 2);
  EXPECT_EQ(slice->slice.data, "b\n");
  EXPECT_EQ(slice->slice.next_offset, 4);
  EXPECT_FALSE(slice->complete);
  EXPECT_FALSE(Answered(err)) << "stdout bytes do not answer a stderr follower";
  tt.output = {Chunk(OutputStream::kStderr, 0, "oops\n")};
  PushOne(tt);
  ASSERT_TRUE(Answered(err));
  EXPECT_EQ(err.get()->slice.data, "oops\n");

  // Bytes already there answer at once, and a tail read never waits.
  EXPECT_TRUE(Answered(Follow(t.id, FromOffset(0, 10'000))));
  LogRequest tail = FromOffset(0, 10'000);
  tail.tail_lines = 0;
  auto nothing = Follow(t.id, tail);
  ASSERT_TRUE(Answered(nothing));
  EXPECT_EQ(nothing.get()->slice.data, "");
}

// The scheduling loop's housekeeping (once a second) answers followers whose wait is over on the
// server's clock.
TEST_F(ControllerTelemetryTest, AFollowerIsAnsweredAtItsDeadline) {
  const Task t = Run(admin_);
  TaskTelemetry tt = Of(t);
  tt.output = {Chunk(OutputStream::kStdout, 0, "a\n")};
  PushOne(tt);
  auto waiting = Follow(t.id, FromOffset(2, 5'000));
  c_->Start();
  // Housekeeping runs as the loop starts and a second later: the wait is not over for either.
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(1'200)), std::future_status::timeout);
  clock_.now_ms += 5'000;
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto slice = waiting.get();
  ASSERT_TRUE(slice) << slice.error().message;
  EXPECT_EQ(slice->slice.data, "");
  EXPECT_EQ(slice->slice.next_offset, 2) << "the follower continues where it was";
  EXPECT_FALSE(slice->complete);
  c_->Stop();
}

TEST_F(ControllerTelemetryTest, ALogIsCompleteOnceTheAgentSaysSoOrTheGraceIsOver) {
  const Task t = Run(admin_);
  TaskTelemetry tt = Of(t);
  tt.output = {Chunk(OutputStream::kStdout, 0, "hello\n")};
  PushOne(tt);
  EXPECT_FALSE(Complete(t.id)) << "running";
  ASSERT_TRUE(Report(t.id, TaskState::kSucceeded));
  EXPECT_FALSE(Complete(t.id)) << "ended, but its last output may still be on its way";

  // The agent ships the last bytes (for the binding the task ran under), then says it is done.
  auto last_bytes = Follow(t.id, FromOffset(6, 10'000));
  EXPECT_FALSE(Answered(last_bytes));
  tt.output = {Chunk(OutputStream::kStdout, 6, "bye\n")};
  PushOne(tt);
  ASSERT_TRUE(Answered(last_bytes));
  EXPECT_EQ(last_bytes.get()->slice.data, "bye\n");
  auto the_end = Follow(t.id, FromOffset(10, 10'000));
  EXPECT_FALSE(Answered(the_end));
  tt.output.clear();
  tt.output_complete = true;
  EXPECT_FALSE(PushOne(tt).refused);
  ASSERT_TRUE(Answered(the_end)) << "the agent's word wakes the follower";
  auto end = the_end.get();
  ASSERT_TRUE(end);
  EXPECT_EQ(end->slice.data, "");
  EXPECT_TRUE(end->complete);
  auto all = ReadLog(t.id, FromOffset(0, 10'000));
  ASSERT_TRUE(all);
  EXPECT_EQ(all->slice.data, "hello\nbye\n");
  EXPECT_TRUE(all->complete);

  // Without the agent's word (its node may be gone): complete once the grace is over.
  const Task silent = Run(admin_);
  ASSERT_TRUE(Report(silent.id, TaskState::kFailed));
  clock_.now_ms += kGraceMs - 1;
  EXPECT_FALSE(Complete(silent.id));
  clock_.now_ms += 1;
  EXPECT_TRUE(Complete(silent.id));
  EXPECT_TRUE(Answered(Follow(silent.id, FromOffset(0, 10'000)))) << "nothing more to wait for";

  // A task that never ran wrote nothing.
  const Task never = Submit(admin_);
  ASSERT_TRUE(
      Await<Task>([&](Done<Task> d) { c_->StopTask(admin_, never.id, /*discard=*/false, d); }));
  EXPECT_TRUE(Complete(never.id));
}

// The agent ships the task's last bytes and its word that they were the last apart from its
// report of the end, which may reach the server later: followers must not wait for that report.
TEST_F(ControllerTelemetryTest, TheAgentsWordCompletesTheLogBeforeTheEndIsReported) {
  const Task t = Run(admin_);
  TaskTelemetry tt = Of(t);
  tt.output = {Chunk(OutputStream::kStdout, 0, "done\n")};
  PushOne(tt);
  auto follower = Follow(t.id, FromOffset(5, 10'000));
  EXPECT_FALSE(Answered(follower));
  tt.output.clear();
  tt.output_complete = true;
  PushOne(tt);
  ASSERT_TRUE(Answered(follower));
  auto end = follower.get();
  ASSERT_TRUE(end) << end.error().message;
  EXPECT_TRUE(end->complete) << "the task's end is not reported yet, but nothing more will come";
  EXPECT_TRUE(Answered(Follow(t.id, FromOffset(5, 10'000)))) << "so nobody waits for more";
  EXPECT_EQ(Get(t.id).state, TaskState::kRunning);
}

// A restartable task's next run has output of its own to come, whatever the last run's agent said.
TEST_F(ControllerTelemetryTest, TheNextRunOfATaskStartsWithItsLogIncomplete) {
  const Task first = Run(admin_);
  TaskTelemetry run1 = Of(first);
  run1.output = {Chunk(OutputStream::kStdout, 0, "run 1\n")};
  run1.output_complete = true;  // its agent is done with it, and then reports it preempted
  PushOne(run1);
  ASSERT_TRUE(Report(first.id, TaskState::kPreempted));
  ASSERT_EQ(Get(first.id).state, TaskState::kPending);
  EXPECT_FALSE(Complete(first.id)) << "queued again";

  clock_.now_ms += 1'000;
  ASSERT_EQ(c_->SchedulePass(), 1);
  ASSERT_TRUE(Report(first.id, TaskState::kRunning));
  const Task second = Get(first.id);
  ASSERT_GT(second.bound_ms, first.bound_ms);
  EXPECT_FALSE(Complete(first.id)) << "the second run has not said a word yet";
  TaskTelemetry run2 = Of(second);
  run2.output = {Chunk(OutputStream::kStdout, 0, "run 2\n")};
  PushOne(run2);
  EXPECT_FALSE(Complete(first.id));
  ASSERT_TRUE(Report(first.id, TaskState::kSucceeded));
  EXPECT_FALSE(Complete(first.id)) << "ended, but the second run's agent has not said it is done";
  run2.output.clear();
  run2.output_complete = true;
  PushOne(run2);
  auto all = ReadLog(first.id, FromOffset(0));
  ASSERT_TRUE(all);
  EXPECT_EQ(all->slice.data, "run 1\nrun 2\n") << "the runs' output follows one another";
  EXPECT_TRUE(all->complete);
}

// ---------------------------------------------------------------------------------------------
// Stop conditions.

TEST_F(ControllerTelemetryTest, AReportedMetricStopsTheTaskOnceTheConditionHolds) {
  const Task t = Run(admin_, "val_acc > 0.95");
  TaskTelemetry tt = Of(t);
  tt.output = {Chunk(OutputStream::kMetrics, 0, "{\"val_acc\": 0.9}\n")};  // ends at 17
  PushOne(tt);
  EXPECT_EQ(Get(t.id).state, TaskState::kRunning);
  PushOne(tt);  // the same line again
  EXPECT_EQ(Get(t.id).state, TaskState::kRunning);
  // A line the server already took counts once, whatever the chunk says there now.
  tt.output = {Chunk(OutputStream::kMetrics, 0, "{\"val_acc\":0.99}\n")};
  PushOne(tt);
  EXPECT_EQ(Get(t.id).state, TaskState::kRunning) << "end offset 17 was taken before";

  tt.output = {Chunk(OutputStream::kMetrics, 17, "{\"val_acc\": 0.96}\n")};
  PushOne(tt);
  const Task stopped = Get(t.id);
  EXPECT_EQ(stopped.state, TaskState::kStopped);
  EXPECT_EQ(stopped.reason, "stop condition met: val_acc > 0.95 (val_acc = 0.96)");
  EXPECT_TRUE(c_->GetNode(admin_, "n1")->tasks.empty()) << "its resources are released";

  auto metrics = AwaitMetrics(*c_, admin_, t.id, 0, clock_.now_ms, Resolution::kRaw);
  ASSERT_TRUE(metrics);
  ASSERT_EQ(metrics->reported.size(), 2u) << "each line once";
  EXPECT_EQ(metrics->reported[0].values.at("val_acc"), 0.9);
  EXPECT_EQ(metrics->reported[1].values.at("val_acc"), 0.96);
  EXPECT_EQ(metrics->reported[1].time_ms, clock_.now_ms);
  EXPECT_EQ(metrics->latest.at("val_acc"), 0.96);
}

TEST_F(ControllerTelemetryTest, AConditionThatHeldMidBatchStopsTheTaskThoughALaterValueUndoesIt) {
  // One batch carries 0.9, 0.97, 0.5: the condition held at the second line, so the task stops,
  // with that line's value in its reason (judging only the batch's last value would miss it).
  const Task t = Run(admin_, "val_acc > 0.95");
  TaskTelemetry tt = Of(t);
  tt.output = {Chunk(OutputStream::kMetrics, 0,
                     "{\"val_acc\": 0.9}\n{\"val_acc\": 0.97}\n{\"val_acc\": 0.5}\n")};
  PushOne(tt);
  const Task stopped = Get(t.id);
  EXPECT_EQ(stopped.state, TaskState::kStopped);
  EXPECT_EQ(stopped.reason, "stop condition met: val_acc > 0.95 (val_acc = 0.97)");
}

TEST_F(ControllerTelemetryTest, IdleGpusStopTheTaskAfterAnUnbrokenStreak) {
  const Task t = Run(admin_, "gpu_idle_s >= 60");
  const int64_t t0 = clock_.now_ms;
  TaskTelemetry tt = Of(t);
  tt.samples = {Usage(t0, 0), Usage(t0 + 30'000, 0)};
  PushOne(tt);
  EXPECT_EQ(Get(t.id).state, TaskState::kRunning) << "idle for 30 s";
  tt.samples = {Usage(t0 + 40'000, 35)};
  PushOne(tt);
  EXPECT_EQ(Get(t.id).state, TaskState::kRunning);
  tt.samples = {Usage(t0, 0), Usage(t0 + 30'000, 0)};  // the first batch again: already taken
  PushOne(tt);
  // Busy at 40 s: the streak starts again at 45 s, and is 55 s long at 100 s.
  tt.samples = {Usage(t0 + 45'000, 0), Usage(t0 + 100'000, 0)};
  PushOne(tt);
  EXPECT_EQ(Get(t.id).state, TaskState::kRunning) << "the busy sample broke the streak";
  auto metrics = AwaitMetrics(*c_, admin_, t.id, 0, t0 + 100'000, Resolution::kRaw);
  EXPECT_EQ(metrics->latest.at("gpu_idle_s"), 55.0);
  EXPECT_EQ(metrics->latest.at("gpu_util"), 0.0);
  EXPECT_NE(c_->MetricsText().find("gpupool_task_gpu_idle_seconds{project=\"default\",task=\"" +
                                   t.id + "\",node=\"n1\"} 55\n"),
            std::string::npos)
      << "/metrics shows the same streak";
  tt.samples = {Usage(t0 + 105'000, 0)};
  PushOne(tt);
  EXPECT_EQ(Get(t.id).state, TaskState::kStopped);
  EXPECT_EQ(Get(t.id).reason, "stop condition met: gpu_idle_s >= 60 (gpu_idle_s = 60)");
}

TEST_F(ControllerTelemetryTest, IdleMeansItsGpusAndItsUsersSessionsBothIdle) {
  const Task t = Run(admin_, "idle_s >= 60");
  const int64_t t0 = t.started_ms;
  TaskTelemetry tt = Of(t);
  clock_.now_ms = t0 + 30'000;
  c_->NoteActivity(t.id);  // the user typed into it at 30 s
  clock_.now_ms = t0 + 70'000;
  tt.samples = {Usage(t0, 0), Usage(t0 + 70'000, 0)};
  PushOne(tt);
  EXPECT_EQ(Get(t.id).state, TaskState::kRunning) << "GPUs idle for 70 s, its user for 40 s";
  auto metrics = AwaitMetrics(*c_, admin_, t.id, 0, t0 + 70'000, Resolution::kRaw);
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->latest.at("gpu_idle_s"), 70.0);
  EXPECT_EQ(metrics->latest.at("interactive_idle_s"), 40.0);
  EXPECT_EQ(metrics->latest.at("idle_s"), 40.0);
  clock_.now_ms = t0 + 90'000;
  tt.samples = {Usage(t0 + 90'000, 0)};
  PushOne(tt);
  EXPECT_EQ(Get(t.id).state, TaskState::kStopped);
  EXPECT_EQ(Get(t.id).reason, "stop condition met: idle_s >= 60 (idle_s = 60)");
}

TEST_F(ControllerTelemetryTest, RuntimeCountsFromTheTasksStart) {
  const Task t = Run(admin_, "runtime_s >= 30");
  TaskTelemetry tt = Of(t);
  clock_.now_ms += 29'000;
  tt.samples = {Usage(clock_.now_ms, 80)};
  PushOne(tt);
  EXPECT_EQ(Get(t.id).state, TaskState::kRunning);
  EXPECT_EQ(
      AwaitMetrics(*c_, admin_, t.id, 0, clock_.now_ms, Resolution::kRaw)->latest.at("runtime_s"),
      29.0);
  clock_.now_ms += 1'000;
  tt.samples = {Usage(clock_.now_ms, 80)};
  PushOne(tt);
  EXPECT_EQ(Get(t.id).state, TaskState::kStopped);
  EXPECT_EQ(Get(t.id).reason, "stop condition met: runtime_s >= 30 (runtime_s = 30)");
}

// ---------------------------------------------------------------------------------------------
// Histories, the overview, /metrics, deletion.

TEST_F(ControllerTelemetryTest, HistoriesKeepEachSampleOnceAtRawAndMinuteResolution) {
  const Task t = Run(admin_);
  const int64_t m0 = (clock_.now_ms / kMinuteMs + 1) * kMinuteMs;  // a minute's start
  const int64_t end = m0 + 2 * kMinuteMs;
  TaskTelemetry tt = Of(t);
  tt.samples = {Usage(m0 + 1'000, 10, 100), Usage(m0 + 2'000, 30, 300),
                Usage(m0 + 61'000, 50, 500)};
  auto gpus = [](int64_t time_ms, int64_t util0, int64_t util1) {
    return std::vector<GpuSample>{{time_ms, {util0, 1000}}, {time_ms, {util1, 3000}}};
  };
  const std::vector<NodeSample> node_samples = {
      {{m0 + 1'000, {2000, 4096, 40, 4000}}, gpus(m0 + 1'000, 20, 60)},
      {{m0 + 2'000, {4000, 8192, 60, 4000}}, gpus(m0 + 2'000, 40, 80)}};
  ASSERT_TRUE(Push(admin_, "n1", {tt}, node_samples));
  // A batch sent again, and one older than what is there: ignored.
  tt.samples = {Usage(m0 + 2'000, 99, 999), Usage(m0 + 1'500, 99, 999)};
  ASSERT_TRUE(Push(admin_, "n1", {tt}, {node_samples[1], node_samples[0]}));
  EXPECT_EQ(c_->GetUsage(admin_)->nodes[0].latest->usage.time_ms, m0 + 2'000) << "the newest";

  auto raw = AwaitMetrics(*c_, admin_, t.id, m0, end, Resolution::kRaw);
  ASSERT_TRUE(raw) << raw.error().message;
  EXPECT_EQ(raw->task_id, t.id);
  EXPECT_EQ(raw->resolution, Resolution::kRaw);
  ASSERT_EQ(raw->usage.size(), 3u);
  EXPECT_EQ(raw->usage[0].time_ms, m0 + 1'000);
  EXPECT_EQ(raw->usage[1].mean[usage::kCpuMilli], 300) << "the first sample at 2 s stays";
  EXPECT_EQ(raw->usage[1].mean[usage::kGpuUtilPct], 30);
  EXPECT_EQ(raw->usage[2].max[usage::kCpuMilli], 500);
  EXPECT_EQ(
      AwaitMetrics(*c_, admin_, t.id, m0 + 1'500, m0 + 60'000, Resolution::kRaw)->usage.size(), 1u)
      << "only the samples in the span";
  auto minutes = AwaitMetrics(*c_, admin_, t.id, m0, end, Resolution::kMinute);
  ASSERT_TRUE(minutes);
  EXPECT_EQ(minutes->resolution, Resolution::kMinute);
  ASSERT_EQ(minutes->usage.size(), 2u);
  EXPECT_EQ(minutes->usage[0].time_ms, m0);
  EXPECT_EQ(minutes->usage[0].samples, 2);
  EXPECT_EQ(minutes->usage[0].mean[usage::kCpuMilli], 200);
  EXPECT_EQ(minutes->usage[0].max[usage::kCpuMilli], 300);
  EXPECT_EQ(minutes->usage[1].time_ms, m0 + kMinuteMs);
  EXPECT_EQ(minutes->usage[1].samples, 1);

  auto node = c_->GetNodeMetrics(admin_, "n1", m0, end, Resolution::kRaw);
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ(node->node, "n1");
  ASSERT_EQ(node->usage.size(), 2u);
  EXPECT_EQ(node->usage[1].mean[usage::kCpuMilli], 4000);
  ASSERT_EQ(node->gpus.size(), 2u);
  ASSERT_EQ(node->gpus[1].size(), 2u);
  EXPECT_EQ(node->gpus[1][0].mean[gpu_usage::kUtilPct], 60);
  EXPECT_EQ(node->gpus[1][1].mean[gpu_usage::kMemMib], 3000);
  auto node_minutes = c_->GetNodeMetrics(admin_, "n1", m0, end, Resolution::kMinute);
  ASSERT_TRUE(node_minutes);
  ASSERT_EQ(node_minutes->usage.size(), 1u);
  EXPECT_EQ(node_minutes->usage[0].mean[usage::kGpuUtilPct], 50);
  EXPECT_EQ(node_minutes->usage[0].max[usage::kMemoryMib], 8192);
  ASSERT_EQ(node_minutes->gpus.size(), 2u);
  EXPECT_EQ(node_minutes->gpus[0][0].mean[gpu_usage::kUtilPct], 30);
  EXPECT_TRUE(c_->GetNodeMetrics(admin_, "n2", m0, end, Resolution::kRaw)->usage.empty());
  EXPECT_EQ(c_->GetNodeMetrics(admin_, "n9", m0, end, Resolution::kRaw).error().code,
            ErrorCode::kNotFound);
}

TEST_F(ControllerTelemetryTest, UsageAndMetricsShowTheRunningTasksTheCallerSees) {
  const Caller alice = testing::MakeMember(*c_, admin_, "alice", "vision");
  const Caller bob = testing::MakeMember(*c_, admin_, "bob", "speech");
  const Task mine = Run(alice);
  const Task theirs = Run(bob);
  const Task queued = Submit(alice);
  EXPECT_EQ(c_->SchedulePass(), 0) << "n1's two GPUs are taken";
  TaskSpec held_spec;
  held_spec.request.cpu_milli = 1000;
  held_spec.command = {"true"};
  held_spec.hold = true;
  ASSERT_TRUE(Await<Task>([&](Done<Task> d) { c_->SubmitTask(alice, held_spec, std::move(d)); }));
  const int64_t now = clock_.now_ms;
  TaskTelemetry a = Of(mine);
  a.samples = {UsageSample{now, {250, 2048, 75, 5000}}};
  a.output = {Chunk(OutputStream::kMetrics, 0, "{\"loss\": 0.25}\n")};
  TaskTelemetry b = Of(theirs);
  b.samples = {UsageSample{now, {100, kUnknown, 5, 100}}};
  const NodeSample node{{now, {3000, 9000, 40, 5100}}, {{now, {75, 5000}}, {now, {5, 100}}}};
  ASSERT_TRUE(Push(admin_, "n1", {a, b}, {node}));

  auto seen = c_->GetUsage(alice);
  ASSERT_TRUE(seen) << seen.error().message;
  ASSERT_EQ(seen->tasks.size(), 1u) << "her running task; not the queued one, nor bob's";
  EXPECT_EQ(seen->tasks[0].task.id, mine.id);
  ASSERT_TRUE(seen->tasks[0].latest);
  EXPECT_EQ(seen->tasks[0].latest->values[usage::kCpuMilli], 250);
  EXPECT_EQ(seen->tasks[0].latest->values[usage::kGpuUtilPct], 75);
  EXPECT_EQ(seen->tasks[0].reported, (MetricValues{{"loss", 0.25}}));
  ASSERT_EQ(seen->nodes.size(), 2u) << "every node, as ListNodes shows them";
  EXPECT_EQ(seen->nodes[0].info.node.name, "n1");
  ASSERT_TRUE(seen->nodes[0].latest);
  EXPECT_EQ(seen->nodes[0].latest->usage.values[usage::kCpuMilli], 3000);
  EXPECT_EQ(seen->nodes[0].latest->gpus.size(), 2u);
  EXPECT_FALSE(seen->nodes[1].latest) << "n2 sent nothing";
  auto other = c_->GetUsage(bob);
  ASSERT_EQ(other->tasks.size(), 1u);
  EXPECT_EQ(other->tasks[0].task.id, theirs.id);
  EXPECT_EQ(c_->GetUsage(admin_)->tasks.size(), 2u);
  EXPECT_EQ(Get(queued.id).state, TaskState::kPending);
  // The queue of the caller's projects: alice's queued task, none of bob's.
  EXPECT_EQ(seen->queue.waiting, 1);
  EXPECT_EQ(seen->queue.held, 1) << "held: counted apart, never the oldest waiting";
  EXPECT_EQ(seen->queue.oldest_id, queued.id);
  EXPECT_EQ(seen->queue.oldest_since_ms, Get(queued.id).updated_ms);
  EXPECT_EQ(other->queue.waiting, 0);
  EXPECT_EQ(other->queue.oldest_id, "") << "bob's projects have nothing waiting";

  const std::string text = c_->MetricsText();
  // In Prometheus' base units: cores, bytes, ratios; every task series names its project, task
  // and node, every GPU series its node, index and model.
  const std::string of_mine = "{project=\"vision\",task=\"" + mine.id + "\",node=\"n1\"} ";
  EXPECT_NE(text.find("gpupool_task_cpu_used_cores" + of_mine + "0.25\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("gpupool_task_memory_used_bytes" + of_mine + "2147483648\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpupool_task_gpu_utilization_ratio" + of_mine + "0.75\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpupool_task_gpu_memory_used_bytes" + of_mine + "5242880000\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpupool_task_gpu_idle_seconds" + of_mine + "0\n"), std::string::npos);
  const std::string of_theirs = "{project=\"speech\",task=\"" + theirs.id + "\",node=\"n1\"} ";
  EXPECT_NE(text.find("gpupool_task_cpu_used_cores" + of_theirs + "0.1\n"), std::string::npos);
  EXPECT_EQ(text.find("gpupool_task_memory_used_bytes" + of_theirs), std::string::npos)
      << "an unknown gauge is left out";
  EXPECT_NE(text.find("gpupool_node_cpu_used_cores{node=\"n1\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("gpupool_node_memory_used_bytes{node=\"n1\"} 9437184000\n"),
            std::string::npos);
  EXPECT_NE(
      text.find("gpupool_gpu_utilization_ratio{node=\"n1\",gpu=\"0\",model=\"A100-80GB\"} 0.75\n"),
      std::string::npos);
  EXPECT_NE(
      text.find(
          "gpupool_gpu_memory_used_bytes{node=\"n1\",gpu=\"1\",model=\"A100-80GB\"} 104857600\n"),
      std::string::npos);

  // A task that ended leaves the overview and the gauges.
  ASSERT_TRUE(Report(mine.id, TaskState::kSucceeded));
  EXPECT_TRUE(c_->GetUsage(alice)->tasks.empty());
  EXPECT_EQ(c_->MetricsText().find("{task=\"" + mine.id + "\""), std::string::npos);
}

TEST_F(ControllerTelemetryTest, DeletingATaskRemovesItsOutputAndHistory) {
  const Task t = Run(admin_);
  TaskTelemetry tt = Of(t);
  tt.output = {Chunk(OutputStream::kStdout, 0, "out\n"), Chunk(OutputStream::kStderr, 0, "err\n"),
               Chunk(OutputStream::kMetrics, 0, "{\"step\": 1}\n")};
  tt.samples = {Usage(clock_.now_ms, 50)};
  PushOne(tt);
  ASSERT_TRUE(fs::exists(OutputDir() + "/" + t.id + "/stdout"));
  ASSERT_TRUE(Report(t.id, TaskState::kSucceeded));
  EXPECT_EQ(AwaitMetrics(*c_, admin_, t.id, 0, clock_.now_ms, Resolution::kRaw)->usage.size(), 1u)
      << "an ended task keeps its history until it is deleted";

  ASSERT_TRUE(AwaitStatus([&](DoneStatus d) { c_->DeleteTask(admin_, t.id, d); }));
  EXPECT_FALSE(fs::exists(OutputDir() + "/" + t.id));
  EXPECT_EQ(ReadLog(t.id, FromOffset(0)).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(AwaitMetrics(*c_, admin_, t.id, 0, clock_.now_ms, Resolution::kRaw).error().code,
            ErrorCode::kNotFound);
  // Its agent's late batch finds nothing to add to.
  EXPECT_TRUE(PushOne(tt).refused);
  EXPECT_FALSE(fs::exists(OutputDir() + "/" + t.id));
}

// ---------------------------------------------------------------------------------------------
// Live events (event_service.h): published from where things change, to whom may see them.

class ControllerEventsTest : public ControllerTelemetryTest {
 protected:
  std::shared_ptr<testing::RecordingSink> Watch(const Caller& who, EventInterest interest = {}) {
    EXPECT_TRUE(AwaitStatus([&](DoneStatus d) { c_->CheckWatch(who, interest, d); }));
    auto sink = std::make_shared<testing::RecordingSink>();
    c_->Subscribe(who, std::move(interest), sink);
    return sink;
  }
  // The states of task `id` its task events showed, in order.
  static std::vector<TaskState> StatesOf(const std::vector<Event>& events, const std::string& id) {
    std::vector<TaskState> out;
    for (const Task& t : testing::EventsOf<Task>(events)) {
      if (t.id == id) out.push_back(t.state);
    }
    return out;
  }
  static bool HasTask(const std::vector<Event>& events, const std::string& id) {
    for (const Task& t : testing::EventsOf<Task>(events)) {
      if (t.id == id) return true;
    }
    return false;
  }
};

TEST_F(ControllerEventsTest, AMemberGetsItsOwnTasksTransitionsAndNeverAnotherProjects) {
  const Caller alice = testing::MakeMember(*c_, admin_, "alice", "vision");
  auto sink = Watch(alice);
  const Task other = Run(admin_);  // the default project's
  const Task mine = Run(alice);    // pending → scheduled → running
  ASSERT_TRUE(Report(mine.id, TaskState::kSucceeded));
  const auto seen =
      sink->WaitFor([&](const std::vector<Event>& e) { return StatesOf(e, mine.id).size() == 4; });
  EXPECT_TRUE(std::holds_alternative<StreamStarted>(seen.at(0)));
  EXPECT_EQ(StatesOf(seen, mine.id),
            (std::vector<TaskState>{TaskState::kPending, TaskState::kScheduled, TaskState::kRunning,
                                    TaskState::kSucceeded}));
  // Each is the task as the store keeps it (the state's reason, its placement).
  const std::vector<Task> tasks = testing::EventsOf<Task>(seen);
  EXPECT_EQ(tasks.back().reason, "reported by the agent");
  EXPECT_EQ(tasks.back().placement->node, "n1");
  // The other project's task went through the same steps first: none of them came.
  EXPECT_FALSE(HasTask(seen, other.id));
  // An admin's subscription sees both.
  auto admin = Watch(admin_);
  ASSERT_TRUE(Report(other.id, TaskState::kSucceeded));
  admin->WaitFor([&](const std::vector<Event>& e) { return HasTask(e, other.id); });
}

TEST_F(ControllerEventsTest, NoTaskEventForAMeterTickOnlyForChangesWithAnEvent) {
  auto sink = Watch(admin_);
  const Task t = Run(admin_);
  sink->WaitFor([&](const auto& e) { return StatesOf(e, t.id).size() == 3; });
  clock_.now_ms += 61'000;
  c_->HousekeepingPass();  // bills the running task: written, but no change to show
  ASSERT_TRUE(Await<Task>([&](Done<Task> d) { c_->StopTask(admin_, t.id, /*discard=*/false, d); }));
  const auto seen = sink->WaitFor([&](const auto& e) { return StatesOf(e, t.id).size() == 4; });
  EXPECT_EQ(StatesOf(seen, t.id).back(), TaskState::kStopped);
}

TEST_F(ControllerEventsTest, AWatchedTasksUsageStdoutAndMetricsComeAsTheyArrive) {
  const Caller alice = testing::MakeMember(*c_, admin_, "alice", "vision");
  const Task t = Run(alice);
  const Task unwatched = Run(alice);
  auto sink = Watch(alice, Watching(t.id));
  TaskTelemetry tt = Of(t);
  tt.samples = {Usage(clock_.now_ms, 80)};
  tt.output = {Chunk(OutputStream::kStdout, 0, "epoch 1\n"),
               Chunk(OutputStream::kStderr, 0, "warn\n"),
               Chunk(OutputStream::kMetrics, 0, "{\"loss\": 0.5}\n")};
  TaskTelemetry noise = Of(unwatched);
  noise.samples = {Usage(clock_.now_ms, 10)};
  noise.output = {Chunk(OutputStream::kStdout, 0, "not watched\n")};
  ASSERT_TRUE(Push(admin_, "n1", {tt, noise}));
  tt.samples = {Usage(clock_.now_ms + 1000, 90)};
  tt.output = {Chunk(OutputStream::kStdout, 8, "epoch 2\n")};
  ASSERT_TRUE(Push(admin_, "n1", {tt}));

  const auto seen = sink->WaitFor([](const std::vector<Event>& e) {
    return testing::EventsOf<TaskUsageEvent>(e).size() == 2 &&
           testing::EventsOf<TaskLogEvent>(e).size() == 2;
  });
  const auto usage = testing::EventsOf<TaskUsageEvent>(seen);
  EXPECT_EQ(usage[0].task, t.id);
  EXPECT_EQ(usage[0].sample.values[usage::kGpuUtilPct], 80);
  EXPECT_EQ(usage[1].sample.values[usage::kGpuUtilPct], 90);
  const auto logs = testing::EventsOf<TaskLogEvent>(seen);
  EXPECT_EQ(logs[0].offset, 0);
  EXPECT_EQ(logs[0].data, "epoch 1\n");  // stdout only
  EXPECT_EQ(logs[1].offset, 8);
  EXPECT_EQ(logs[1].data, "epoch 2\n");
  const auto metrics = testing::EventsOf<TaskMetricsEvent>(seen);
  ASSERT_EQ(metrics.size(), 1u);
  EXPECT_EQ(metrics[0].task, t.id);
  EXPECT_EQ(metrics[0].metrics.values.at("loss"), 0.5);
  for (const TaskUsageEvent& u : usage) EXPECT_NE(u.task, unwatched.id);

  // A later subscriber from logs_from gets the stored stdout from there first.
  auto late = Watch(alice, Watching(t.id, 6));
  const auto caught_up = late->WaitFor(
      [](const std::vector<Event>& e) { return !testing::EventsOf<TaskLogEvent>(e).empty(); });
  EXPECT_EQ(testing::EventsOf<TaskLogEvent>(caught_up)[0].offset, 6);
  EXPECT_EQ(testing::EventsOf<TaskLogEvent>(caught_up)[0].data, "1\nepoch 2\n");
}

TEST_F(ControllerEventsTest, WatchingAnotherProjectsTaskIsNotFound) {
  const Caller alice = testing::MakeMember(*c_, admin_, "alice", "vision");
  const Task theirs = Submit(admin_);
  const Status s =
      AwaitStatus([&](DoneStatus d) { c_->CheckWatch(alice, Watching(theirs.id), d); });
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(AwaitStatus([&](DoneStatus d) { c_->CheckWatch(alice, {}, d); }));
}

TEST_F(ControllerEventsTest, NodesDeletionsAndPendingReasonsArePublished) {
  auto sink = Watch(admin_, WithNodes());
  ASSERT_TRUE(Await<NodeView>([&](Done<NodeView> d) { c_->SetCordon(admin_, "n2", false, d); }));
  NodeSample ns;
  ns.usage = Usage(clock_.now_ms, 50);
  ASSERT_TRUE(Push(admin_, "n1", {}, {ns}));
  // Three GPUs fit nowhere (two per node): pending with the scheduler's reason.
  TaskSpec big;
  big.request.cpu_milli = 1000;
  big.request.memory_mib = 1024;
  big.request.gpu_count = 3;
  big.command = {"true"};
  const auto pending = Await<Task>([&](Done<Task> d) { c_->SubmitTask(admin_, big, d); });
  ASSERT_TRUE(pending);
  EXPECT_EQ(c_->SchedulePass(), 0);
  ASSERT_TRUE(
      Await<Task>([&](Done<Task> d) { c_->StopTask(admin_, pending->id, /*discard=*/false, d); }));
  ASSERT_TRUE(AwaitStatus([&](DoneStatus d) { c_->DeleteTask(admin_, pending->id, d); }));

  const auto seen = sink->WaitFor(
      [](const std::vector<Event>& e) { return !testing::EventsOf<TaskDeletedEvent>(e).empty(); });
  const auto nodes = testing::EventsOf<NodeView>(seen);
  ASSERT_FALSE(nodes.empty());
  EXPECT_EQ(nodes[0].info.node.name, "n2");
  EXPECT_TRUE(nodes[0].info.node.schedulable);
  const auto node_usage = testing::EventsOf<NodeUsageEvent>(seen);
  ASSERT_EQ(node_usage.size(), 1u);
  EXPECT_EQ(node_usage[0].node, "n1");
  // Submitted, its pending reason found by the pass (the same record again), stopped.
  EXPECT_EQ(
      StatesOf(seen, pending->id),
      (std::vector<TaskState>{TaskState::kPending, TaskState::kPending, TaskState::kStopped}));
  EXPECT_EQ(testing::EventsOf<TaskDeletedEvent>(seen)[0].id, pending->id);
}

TEST_F(ControllerEventsTest, ASubscriberFarBehindOverflows) {
  options_.events.max_queued = 4;
  Reopen();
  auto sink = std::make_shared<testing::RecordingSink>();
  sink->Hold();
  c_->Subscribe(admin_, {}, sink);
  ASSERT_TRUE(sink->AwaitHeld());
  for (int i = 0; i < 5; ++i) Submit(admin_);
  sink->Resume();
  EXPECT_EQ(sink->AwaitOverflow(), 4u);
}

}  // namespace
}  // namespace gpupool::server
