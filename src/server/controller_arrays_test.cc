// Job arrays in the Controller (controller_arrays.cc) over an AsyncStore on a MemoryStore: one
// durable batch per array, the %N limit held by the scheduling passes as elements end (and after
// a restart), quotas counting every element, the array stopped and released as a whole, listing
// by array and who may see one.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "server/controller.h"
#include "server/controller_testing.h"

namespace gpupool::server {
namespace {

using testing::Await;
using testing::AwaitList;
using testing::AwaitTask;
using testing::ControllerFixture;

constexpr int64_t kNeverLostMs = int64_t{365} * 24 * 3600 * 1000;

class ControllerArraysTest : public ControllerFixture {
 protected:
  ControllerArraysTest() { options_.node_timeout_ms = kNeverLostMs; }

  void AddNode(const std::string& name, int gpus) {
    Node n = Node::Make(name, 64'000, 512 * 1024, gpus, "A100-80GB");
    ASSERT_TRUE(
        Await<NodeView>([&](Done<NodeView> d) { c_->RegisterNode(admin_, n, std::move(d)); }));
  }

  static TaskSpec OneGpu(bool hold = false) {
    TaskSpec spec;
    spec.name = "sweep";
    spec.request.cpu_milli = 1000;
    spec.request.memory_mib = 1024;
    spec.request.gpu_count = 1;
    spec.command = {"python3", "train.py"};
    spec.hold = hold;
    return spec;
  }

  Result<TaskArrayView> SubmitArray(const Caller& who, const std::string& indexes,
                                    TaskSpec spec = OneGpu()) {
    Result<ArraySpec> array = ParseArraySpec(indexes);
    EXPECT_TRUE(array) << array.error().message;
    return Await<TaskArrayView>(
        [&](Done<TaskArrayView> d) { c_->SubmitArray(who, spec, *array, std::move(d)); });
  }

  Result<TaskArrayView> GetArray(const Caller& who, const std::string& id) {
    return Await<TaskArrayView>([&](Done<TaskArrayView> d) { c_->GetArray(who, id, d); });
  }

  std::vector<Task> Elements(const std::string& id) {
    TaskFilter f;
    f.array_id = id;
    f.limit = 1000;
    Result<TaskPage> page = AwaitList(*c_, admin_, f);
    EXPECT_TRUE(page) << page.error().message;
    return page ? page->tasks : std::vector<Task>{};
  }

  int Holding(const std::string& id) {
    int n = 0;
    for (const Task& t : Elements(id)) n += HoldsResources(t.state) ? 1 : 0;
    return n;
  }

  Result<Task> Report(const std::string& id, TaskState to) {
    return Await<Task>(
        [&](Done<Task> d) { c_->ReportTask(admin_, id, to, 0, 0, "", 0, std::move(d)); });
  }

  static int64_t Count(const TaskArrayView& a, TaskState s) {
    return a.states[static_cast<size_t>(s)];
  }
};

TEST_F(ControllerArraysTest, AllElementsAreOneDurableBatchAnsweredOnceDurable) {
  store_->Hold();
  std::promise<Result<TaskArrayView>> answer;
  Result<ArraySpec> spec = ParseArraySpec("1,3,5-7%2");
  ASSERT_TRUE(spec);
  c_->SubmitArray(admin_, OneGpu(), *spec,
                  [&](Result<TaskArrayView> r) { answer.set_value(std::move(r)); });
  std::future<Result<TaskArrayView>> answered = answer.get_future();
  const std::vector<store::WriteBatch> held = store_->AwaitHeld(1);
  ASSERT_EQ(held.size(), 1u);
  ASSERT_EQ(held[0].tasks.size(), 5u) << "every element in the one batch";
  EXPECT_EQ(held[0].events.size(), 5u);
  EXPECT_EQ(answered.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout)
      << "not answered before it is durable";
  store_->Release();
  ASSERT_EQ(answered.wait_for(testing::kAnswerLimit), std::future_status::ready);
  Result<TaskArrayView> a = answered.get();
  ASSERT_TRUE(a) << a.error().message;
  const int64_t first = held[0].tasks[0].seq;
  EXPECT_EQ(a->id, "a-" + std::to_string(first));
  EXPECT_EQ(a->spec.indexes, (std::vector<int64_t>{1, 3, 5, 6, 7}));
  EXPECT_EQ(a->spec.limit, 2);
  ASSERT_EQ(a->task_ids.size(), 5u);
  for (size_t k = 0; k < 5; ++k) {
    const Task& t = held[0].tasks[k];
    EXPECT_EQ(t.id, "t-" + std::to_string(first + static_cast<int64_t>(k)));
    EXPECT_EQ(a->task_ids[k], t.id);
    EXPECT_EQ(t.array_id, a->id);
    EXPECT_EQ(t.array_index, a->spec.indexes[k]);
    EXPECT_EQ(t.array_limit, 2);
    EXPECT_EQ(t.name, "sweep[" + std::to_string(a->spec.indexes[k]) + "]");
  }
  EXPECT_NE(held[0].tasks[1].reason.find("element 3 of array " + a->id), std::string::npos)
      << held[0].tasks[1].reason;
  EXPECT_EQ(Count(*a, TaskState::kPending), 5);
}

TEST_F(ControllerArraysTest, TheLimitHoldsAsElementsFinishAndAcrossARestart) {
  AddNode("n1", 8);
  Result<TaskArrayView> a = SubmitArray(admin_, "0-5%2");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(c_->SchedulePass(), 2) << "8 free GPUs, but at most 2 elements at once";
  EXPECT_EQ(Holding(a->id), 2);
  const std::string waiting = a->task_ids[4];
  auto view = AwaitTask(*c_, admin_, waiting);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->pending_reason, "array " + a->id +
                                      " runs at most 2 elements at once (%2): waiting for one "
                                      "to end");
  // The first two in index order went first.
  std::vector<Task> els = Elements(a->id);
  EXPECT_TRUE(HoldsResources(els[0].state));
  EXPECT_TRUE(HoldsResources(els[1].state));

  EXPECT_EQ(c_->SchedulePass(), 0) << "nothing ended: nothing more starts";
  ASSERT_TRUE(Report(els[0].id, TaskState::kRunning));
  ASSERT_TRUE(Report(els[0].id, TaskState::kSucceeded));
  EXPECT_EQ(c_->SchedulePass(), 1) << "one ended, one more starts";
  EXPECT_EQ(Holding(a->id), 2);

  Reopen();  // the limit comes back with the elements
  EXPECT_EQ(c_->SchedulePass(), 0);
  EXPECT_EQ(Holding(a->id), 2);

  // Ending the rest one by one: never more than two at once, every element runs.
  int ended = 1;
  while (ended < 6) {
    for (const Task& t : Elements(a->id)) {
      if (!HoldsResources(t.state)) continue;
      ASSERT_TRUE(Report(t.id, TaskState::kFailed));
      ++ended;
      break;
    }
    c_->SchedulePass();
    EXPECT_LE(Holding(a->id), 2);
  }
  Result<TaskArrayView> done = GetArray(admin_, a->id);
  ASSERT_TRUE(done) << done.error().message;
  EXPECT_EQ(Count(*done, TaskState::kSucceeded) + Count(*done, TaskState::kFailed), 6);
}

TEST_F(ControllerArraysTest, MaxTasksCountsEveryElementAndRefusesTheArrayWhole) {
  Caller alice = testing::MakeMember(*c_, admin_, "alice", "vision");
  Project q;
  q.id = "vision";
  q.max_tasks = 3;
  ASSERT_TRUE(Await<Project>([&](Done<Project> d) { c_->UpdateProject(admin_, q, d); }));
  Result<TaskArrayView> big = SubmitArray(alice, "0-3");
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(big.error().message.find("max_tasks is 3: 4 more do not fit"), std::string::npos)
      << big.error().message;
  TaskFilter all;
  EXPECT_TRUE(AwaitList(*c_, alice, all)->tasks.empty()) << "nothing of it was created";
  EXPECT_TRUE(SubmitArray(alice, "0-2"));
}

TEST_F(ControllerArraysTest, GangsCannotBeArrays) {
  TaskSpec spec = OneGpu();
  spec.request.gang_id = "g";
  spec.request.gang_size = 2;
  Result<TaskArrayView> a = SubmitArray(admin_, "0-1", spec);
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("gang_id"), std::string::npos);
}

TEST_F(ControllerArraysTest, StopEndsEveryElementAndReleaseQueuesTheHeldOnes) {
  AddNode("n1", 2);
  Result<TaskArrayView> held = SubmitArray(admin_, "0-3", OneGpu(/*hold=*/true));
  ASSERT_TRUE(held);
  EXPECT_EQ(c_->SchedulePass(), 0) << "held elements are not queued";
  Result<TaskArrayView> released =
      Await<TaskArrayView>([&](Done<TaskArrayView> d) { c_->ReleaseArray(admin_, held->id, d); });
  ASSERT_TRUE(released) << released.error().message;
  EXPECT_EQ(Count(*released, TaskState::kPending), 4);
  EXPECT_EQ(c_->SchedulePass(), 2) << "two GPUs";
  for (const Task& t : Elements(held->id)) EXPECT_FALSE(t.held);

  Result<TaskArrayView> stopped =
      Await<TaskArrayView>([&](Done<TaskArrayView> d) { c_->StopArray(admin_, held->id, d); });
  ASSERT_TRUE(stopped) << stopped.error().message;
  EXPECT_EQ(Count(*stopped, TaskState::kStopped), 4) << "running and pending elements alike";
  EXPECT_EQ(c_->GetNode(admin_, "n1")->gpu_milli_free, 2000) << "their GPUs are free";
  // Stopping again changes nothing and still answers the array.
  Result<TaskArrayView> again =
      Await<TaskArrayView>([&](Done<TaskArrayView> d) { c_->StopArray(admin_, held->id, d); });
  ASSERT_TRUE(again);
  EXPECT_EQ(Count(*again, TaskState::kStopped), 4);
}

TEST_F(ControllerArraysTest, OnlyTheArraysProjectSeesItAndListsItsElements) {
  Caller alice = testing::MakeMember(*c_, admin_, "alice", "vision");
  Caller bob = testing::MakeMember(*c_, admin_, "bob", "nlp");
  TaskSpec spec = OneGpu();
  spec.request.gpu_count = 0;
  Result<TaskArrayView> a = SubmitArray(alice, "0-2", spec);
  ASSERT_TRUE(a);
  Result<TaskArrayView> other = SubmitArray(alice, "0-1", spec);
  ASSERT_TRUE(other);
  std::vector<Task> els = Elements(a->id);
  ASSERT_EQ(els.size(), 3u) << "only this array's elements";
  EXPECT_EQ(els[2].array_index, 2);
  for (auto call : {&Controller::GetArray, &Controller::StopArray, &Controller::ReleaseArray}) {
    Result<TaskArrayView> seen =
        Await<TaskArrayView>([&](Done<TaskArrayView> d) { ((*c_).*call)(bob, a->id, d); });
    ASSERT_FALSE(seen);
    EXPECT_EQ(seen.error().code, ErrorCode::kNotFound);
    EXPECT_EQ(seen.error().message, "array " + a->id + " not found");
  }
  EXPECT_EQ(GetArray(alice, "a-999").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(GetArray(alice, "t-1").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(Count(*GetArray(alice, a->id), TaskState::kPending), 3);
}

}  // namespace
}  // namespace gpupool::server
