// The live events' hub on its own (event_hub.h): the start first, visibility per subscriber,
// node views without their tasks for members, the bounded queue (overflow, then nothing more),
// keep-alives, and a watched task's stdout — caught up from the store from logs_from, then
// continued from the live appends without a gap or a repeated byte.
#include "server/event_hub.h"

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/controller_testing.h"

namespace gpupool::server {
namespace {

using namespace std::chrono_literals;
using testing::EventsOf;
using testing::RecordingSink;
using testing::Watching;
using testing::WithNodes;

Caller Member(const std::string& project) {
  Caller c;
  c.user_id = "u-" + project;
  c.projects = {project};
  return c;
}

Caller Admin() {
  Caller c;
  c.user_id = "admin";
  c.role = Role::kAdmin;
  return c;
}

Task TaskOf(const std::string& id, const std::string& project) {
  Task t;
  t.id = id;
  t.project_id = project;
  return t;
}

// A task's stored stdout, as the hub reads it for a catch-up.
class FakeStdout {
 public:
  void Append(const std::string& bytes) {
    std::lock_guard lock(mu_);
    data_ += bytes;
  }
  Result<std::string> Read(int64_t offset, int64_t max_bytes) {
    std::lock_guard lock(mu_);
    ++reads_;
    if (offset >= static_cast<int64_t>(data_.size())) return std::string();
    return data_.substr(static_cast<size_t>(offset), static_cast<size_t>(max_bytes));
  }
  int reads() {
    std::lock_guard lock(mu_);
    return reads_;
  }

 private:
  std::mutex mu_;
  std::string data_;
  int reads_ = 0;
};

class EventHubTest : public ::testing::Test {
 protected:
  void Open(EventHubOptions options = {}) {
    hub_ = std::make_unique<EventHub>(
        options, [](const Caller& c, const Task& t) { return c.InProject(t.project_id); },
        [this](const std::string& task, int64_t offset, int64_t max_bytes) {
          EXPECT_EQ(task, "t-1");
          return stdout_.Read(offset, max_bytes);
        });
  }
  void SetUp() override { Open(); }

  std::shared_ptr<RecordingSink> Subscribe(const Caller& caller, EventInterest interest = {}) {
    auto sink = std::make_shared<RecordingSink>();
    ids_.push_back(hub_->Subscribe(caller, std::move(interest), sink, 42));
    return sink;
  }

  // The stdout a sink received: its log events' bytes, checked to be contiguous from `from`.
  static std::string StdoutOf(const std::vector<Event>& events, int64_t from) {
    std::string out;
    for (const TaskLogEvent& e : EventsOf<TaskLogEvent>(events)) {
      EXPECT_EQ(e.offset, from + static_cast<int64_t>(out.size())) << "a gap or a repeat";
      out += e.data;
    }
    return out;
  }

  FakeStdout stdout_;
  std::unique_ptr<EventHub> hub_;
  std::vector<uint64_t> ids_;
};

TEST_F(EventHubTest, NobodySubscribedIsInactive) {
  EXPECT_FALSE(hub_->Active());
  Subscribe(Admin());
  EXPECT_TRUE(hub_->Active());
  hub_->Unsubscribe(ids_[0]);
  EXPECT_FALSE(hub_->Active());
  hub_->Unsubscribe(ids_[0]);  // unknown now: ignored
}

TEST_F(EventHubTest, EachSubscriberGetsTheStartThenTheTasksItMaySee) {
  auto vision = Subscribe(Member("vision"));
  auto admin = Subscribe(Admin());
  hub_->PublishTask(TaskOf("t-1", "nlp"));
  hub_->PublishTask(TaskOf("t-2", "vision"));
  hub_->PublishTaskDeleted("t-1", "nlp");
  hub_->PublishTaskDeleted("t-2", "vision");

  const auto seen = admin->WaitFor([](const auto& e) { return e.size() == 5; });
  ASSERT_EQ(seen.size(), 5u);
  ASSERT_TRUE(std::holds_alternative<StreamStarted>(seen[0]));
  EXPECT_EQ(std::get<StreamStarted>(seen[0]).time_ms, 42);
  EXPECT_EQ(std::get<Task>(seen[1]).id, "t-1");
  EXPECT_EQ(std::get<Task>(seen[2]).id, "t-2");
  EXPECT_EQ(std::get<TaskDeletedEvent>(seen[3]).id, "t-1");

  const auto mine = vision->WaitFor([](const auto& e) { return e.size() == 3; });
  ASSERT_EQ(mine.size(), 3u);
  EXPECT_TRUE(std::holds_alternative<StreamStarted>(mine[0]));
  EXPECT_EQ(std::get<Task>(mine[1]).id, "t-2");
  EXPECT_EQ(std::get<TaskDeletedEvent>(mine[2]).id, "t-2");
  // The admin's last event came after the member's: had the member been sent t-1, it would be
  // there by now.
  admin->WaitFor([](const auto& e) { return e.size() == 5; });
  EXPECT_EQ(vision->events().size(), 3u);
}

TEST_F(EventHubTest, NodeEventsGoOnlyToThoseAskingAndMembersSeeNoTaskList) {
  auto member = Subscribe(Member("vision"), WithNodes());
  auto admin = Subscribe(Admin(), WithNodes());
  auto not_asking = Subscribe(Admin());
  NodeView n;
  n.info.node.name = "n1";
  n.tasks = {"t-1"};
  hub_->PublishNode(n);
  hub_->PublishNodeUsage("n1", NodeSample{});
  hub_->PublishTask(TaskOf("t-9", "ops"));  // a marker: after it, nothing more is coming

  const auto full = admin->WaitFor([](const auto& e) { return e.size() == 4; });
  EXPECT_EQ(EventsOf<NodeView>(full).at(0).tasks, std::vector<std::string>{"t-1"});
  EXPECT_EQ(EventsOf<NodeUsageEvent>(full).at(0).node, "n1");
  const auto without = member->WaitFor([](const auto& e) { return e.size() == 3; });
  EXPECT_TRUE(EventsOf<NodeView>(without).at(0).tasks.empty());
  const auto none = not_asking->WaitFor([](const auto& e) { return e.size() == 2; });
  EXPECT_TRUE(EventsOf<NodeView>(none).empty());
  EXPECT_TRUE(EventsOf<NodeUsageEvent>(none).empty());
}

TEST_F(EventHubTest, ASubscriberThatFallsBehindOverflowsAndIsDropped) {
  EventHubOptions options;
  options.max_queued = 8;
  Open(options);
  auto slow = std::make_shared<RecordingSink>();
  slow->Hold();  // it takes the start and keeps the hub's thread waiting there
  hub_->Subscribe(Admin(), {}, slow, 42);
  ASSERT_TRUE(slow->AwaitHeld());
  for (int i = 0; i < 8; ++i) hub_->PublishTask(TaskOf("t-" + std::to_string(i), "p"));
  EXPECT_TRUE(hub_->Active());  // 8 wait: the bound, not past it
  hub_->PublishTask(TaskOf("t-8", "p"));
  slow->Resume();
  EXPECT_EQ(slow->AwaitOverflow(), 8u);
  // What waited is not delivered (the client starts over), and the subscriber is gone.
  EXPECT_EQ(slow->events().size(), 1u);
  // Once a later subscriber got its start, the hub's thread has dropped the slow one.
  auto later = Subscribe(Admin());
  later->WaitFor([](const auto& e) { return e.size() == 1; });
  hub_->Unsubscribe(ids_.back());
  EXPECT_FALSE(hub_->Active());
  hub_->PublishTask(TaskOf("t-9", "p"));
  EXPECT_EQ(slow->events().size(), 1u);
}

TEST_F(EventHubTest, AQuietSubscriberGetsKeepAlives) {
  EventHubOptions options;
  options.keep_alive = 20ms;
  Open(options);
  auto quiet = Subscribe(Admin());
  EXPECT_TRUE(quiet->AwaitKeepAlives(2));
}

TEST_F(EventHubTest, LogsFromCatchesUpFromTheStoreThenFollowsWithoutRepeats) {
  EventHubOptions options;
  options.log_read_bytes = 3;  // the catch-up takes several reads
  Open(options);
  stdout_.Append("0123456789");
  auto watcher = Subscribe(Member("vision"), Watching("t-1", 2));
  // Appended (and published) while the hub may or may not have caught up yet.
  stdout_.Append("ab");
  hub_->PublishStdout("t-1", 10, "ab");
  hub_->PublishStdout("t-2", 0, "not watched");
  stdout_.Append("cd");
  hub_->PublishStdout("t-1", 12, "cd");
  const auto seen = watcher->WaitFor([](const auto& e) { return StdoutOf(e, 2).size() >= 12; });
  EXPECT_EQ(StdoutOf(seen, 2), "23456789abcd");
  EXPECT_TRUE(std::holds_alternative<StreamStarted>(seen.at(0)));
}

TEST_F(EventHubTest, WithoutLogsFromTheLogStartsAtTheNextAppendAndGapsAreReadFromTheStore) {
  stdout_.Append("old");
  auto watcher = Subscribe(Member("vision"), Watching("t-1"));
  stdout_.Append("new");
  hub_->PublishStdout("t-1", 3, "new");
  // An append whose event never came (say, before a restart of the publisher): the next one
  // leaves a gap, which the hub reads from the store.
  stdout_.Append("lost");
  stdout_.Append("next");
  hub_->PublishStdout("t-1", 10, "next");
  const auto seen = watcher->WaitFor([](const auto& e) { return StdoutOf(e, 3).size() >= 11; });
  EXPECT_EQ(StdoutOf(seen, 3), "newlostnext");
  EXPECT_EQ(stdout_.reads(), 1);  // the gap only: "old" was never read
}

TEST_F(EventHubTest, StopEndsTheThreadAndTheSubscriptions) {
  auto sink = Subscribe(Admin());
  sink->WaitFor([](const auto& e) { return e.size() == 1; });
  hub_->Stop();
  EXPECT_FALSE(hub_->Active());
  hub_->PublishTask(TaskOf("t-1", "p"));
  hub_->Stop();  // idempotent
  EXPECT_EQ(sink->events().size(), 1u);
}

}  // namespace
}  // namespace gpupool::server
