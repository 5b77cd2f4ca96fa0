// The Store conformance suite: the behaviour every Store implementation must have, as one
// value-parameterized GoogleTest over a StoreFactory. An implementation's test binary includes
// this header once and instantiates the suite with its factory (see memory_store_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/records.h"
#include "core/result.h"
#include "store/store.h"
#include "store/test_records.h"

namespace gpupool::store::testing {

// Opens stores on one data set (a database file, a shared memory image): a store opened after
// another was closed and destroyed sees everything that one acknowledged.
class StoreFactory {
 public:
  virtual ~StoreFactory() = default;
  // A store on this factory's data; nullptr (with the test failure recorded) when it cannot open.
  virtual std::unique_ptr<Store> Open() = 0;
};

struct StoreParam {
  std::string name;  // "Memory", "Sqlite": how the parameter prints in test names
  std::function<std::unique_ptr<StoreFactory>()> make_factory;  // fresh, empty data each call
};

// GoogleTest prints the parameter into the test list; ctest names then end in ".../<name>".
inline void PrintTo(const StoreParam& param, std::ostream* os) { *os << param.name; }

// ---- The suite -------------------------------------------------------------------------------

// Counts `done` callbacks and lets a test wait for all of them (no sleeping).
class DoneLatch {
 public:
  std::function<void(Status)> Callback(size_t index) {
    return [this, index](Status status) {
      std::lock_guard lock(mu_);
      results_[index] = std::move(status);
      ++count_;
      cv_.notify_all();
    };
  }
  // Waits for `n` callbacks and returns their results by index.
  std::map<size_t, Status> Wait(size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return count_ >= n; });
    return results_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  size_t count_ = 0;
  std::map<size_t, Status> results_;
};

class StoreConformanceTest : public ::testing::TestWithParam<StoreParam> {
 protected:
  using Micros = std::map<std::string, int64_t>;

  void SetUp() override {
    factory_ = GetParam().make_factory();
    ASSERT_NE(factory_, nullptr);
    store_ = factory_->Open();
    ASSERT_NE(store_, nullptr);
  }

  void TearDown() override {
    store_.reset();
    factory_.reset();
  }

  // Closes and destroys the store, then opens a new one on the same data.
  void Reopen() {
    store_->Close();
    store_.reset();
    store_ = factory_->Open();
    ASSERT_NE(store_, nullptr);
  }

  void WriteOk(WriteBatch batch) {
    Status s = store_->WriteSync(std::move(batch));
    ASSERT_TRUE(s) << s.error().message;
  }

  Snapshot LoadOk() {
    Result<Snapshot> snapshot = store_->Load({});
    EXPECT_TRUE(snapshot) << snapshot.error().message;
    return snapshot ? std::move(*snapshot) : Snapshot{};
  }

  std::vector<LedgerEntry> LedgerOk(const LedgerQuery& query) {
    Result<std::vector<LedgerEntry>> entries = store_->Ledger(query);
    EXPECT_TRUE(entries) << entries.error().message;
    return entries ? std::move(*entries) : std::vector<LedgerEntry>{};
  }

  std::vector<TaskEvent> EventsOk(const std::string& task_id) {
    Result<std::vector<TaskEvent>> events = store_->TaskEvents(task_id);
    EXPECT_TRUE(events) << events.error().message;
    return events ? std::move(*events) : std::vector<TaskEvent>{};
  }

  // A ledger query; designated initializers would leave fields out, which -Wextra refuses.
  static LedgerQuery Query(std::string project, std::string task = "", int64_t from_ms = 0,
                           int64_t to_ms = 0) {
    LedgerQuery q;
    q.project_id = std::move(project);
    q.task_id = std::move(task);
    q.from_ms = from_ms;
    q.to_ms = to_ms;
    return q;
  }
  static LedgerQuery Page(std::string project, int64_t offset, int64_t limit) {
    LedgerQuery q = Query(std::move(project));
    q.offset = offset;
    q.limit = limit;
    return q;
  }

  static TaskQuery TaskPage(std::vector<std::string> project_ids,
                            std::vector<TaskState> states = {}, std::string node = "",
                            int64_t after_seq = 0, int64_t limit = 100) {
    TaskQuery q;
    q.project_ids = std::move(project_ids);
    q.states = std::move(states);
    q.node = std::move(node);
    q.after_seq = after_seq;
    q.limit = limit;
    return q;
  }

  static std::vector<std::string> Keys(const std::vector<LedgerEntry>& entries) {
    std::vector<std::string> keys;
    for (const LedgerEntry& e : entries) keys.push_back(e.key);
    return keys;
  }

  std::unique_ptr<StoreFactory> factory_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreConformanceTest, NewStoreIsEmpty) {
  Snapshot s = LoadOk();
  EXPECT_TRUE(s.projects.empty());
  EXPECT_TRUE(s.users.empty());
  EXPECT_TRUE(s.access_keys.empty());
  EXPECT_TRUE(s.nodes.empty());
  EXPECT_TRUE(s.tasks.empty());
  EXPECT_TRUE(s.prices.empty());
  EXPECT_TRUE(s.nonces.empty());
  EXPECT_TRUE(s.credits_micros.empty());
  EXPECT_TRUE(s.usage_micros.empty());
  EXPECT_TRUE(s.settings.empty());
  EXPECT_TRUE(EventsOk("t-1").empty());
  EXPECT_TRUE(LedgerOk(Query("p-1")).empty());
}

TEST_P(StoreConformanceTest, EveryRecordKindRoundTripsExactlyAcrossReopen) {
  WriteBatch b;
  b.projects = {SampleProject("p-1")};
  b.users = {SampleUser("u-1")};
  b.access_keys = {SampleAccessKey("AK1")};
  b.nodes = {SampleNode("n-1")};
  Task unplaced = SampleTask("t-2", 2);
  unplaced.placement.reset();
  unplaced.state = TaskState::kPending;
  b.tasks = {SampleTask("t-1", 1), unplaced};
  b.prices = {
      Price{.resource = "gpu:A100-80GB", .micros_per_hour = 2'500'000, .effective_ms = 1000}};
  b.events = {SampleEvent("t-1", 5, "bound to n-1")};
  b.ledger = {SampleLedger("credit-1", "p-1", LedgerKind::kCredit, 1'000'000, 10),
              SampleLedger("t-1:0", "p-1", LedgerKind::kUsage, 250'000, 20, "t-1")};
  b.nonces = {Nonce{.access_key = "AK1", .nonce = "n0nce", .timestamp_ms = 99}};
  b.settings = {{"bootstrap_done", "1"}, {"empty", ""}};
  b.snapshots = {SampleSnapshot("s-2", 2, "t-1"), SampleSnapshot("s-1", 1, "t-2")};
  b.snapshots[0].image = SavedImage{"sha256:" + std::string(64, 'b'), "busybox:1", 4096, true};
  b.volumes = {SampleVolume("v-2", 2, "imagenet"), SampleVolume("v-1", 1, "data")};
  b.volumes[0].shared = true;
  b.volumes[0].node = "";
  b.volumes[0].deleting = true;
  b.datasets = {SampleDataset("d-2", 2, "imagenet"), SampleDataset("d-1", 1, "empty")};
  b.datasets[0].published = true;
  b.datasets[0].versions.push_back({.version = 3,
                                    .manifest = std::string(64, 'c'),
                                    .files = 1'281'167,
                                    .bytes = int64_t{150} << 30,
                                    .new_bytes = 1'500'000,
                                    .created_ms = 1'700'000'000'900,
                                    .created_by = "u-2"});
  b.datasets[1].versions.clear();
  const WriteBatch expected = b;
  WriteOk(std::move(b));

  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "before reopen" : "after reopen");
    Snapshot s = LoadOk();
    EXPECT_EQ(s.projects, expected.projects);
    EXPECT_EQ(s.users, expected.users);
    EXPECT_EQ(s.access_keys, expected.access_keys);
    EXPECT_EQ(NodesDiff(s.nodes, expected.nodes), "");
    EXPECT_EQ(s.tasks, expected.tasks);
    EXPECT_EQ(s.prices, expected.prices);
    EXPECT_EQ(s.nonces, expected.nonces);
    EXPECT_EQ(s.settings, expected.settings);
    EXPECT_EQ(s.snapshots,
              (std::vector<TaskSnapshot>{expected.snapshots[1], expected.snapshots[0]}));  // by seq
    EXPECT_EQ(s.volumes, (std::vector<Volume>{expected.volumes[1], expected.volumes[0]}));
    EXPECT_EQ(s.datasets, (std::vector<Dataset>{expected.datasets[1], expected.datasets[0]}));
    EXPECT_EQ(s.credits_micros, (Micros{{"p-1", 1'000'000}}));
    EXPECT_EQ(s.usage_micros, (Micros{{"p-1", 250'000}}));
    EXPECT_EQ(EventsOk("t-1"), expected.events);
    EXPECT_EQ(LedgerOk(Query("p-1")), expected.ledger);
    ASSERT_NO_FATAL_FAILURE(Reopen());
  }
}

TEST_P(StoreConformanceTest, AHeldTaskStaysHeldAcrossReopenUntilReleased) {
  Task held = SampleTask("t-1", 1);
  held.placement.reset();
  held.state = TaskState::kPending;
  held.held = true;
  Task queued = held;
  queued.id = "t-2";
  queued.seq = 2;
  queued.held = false;
  WriteBatch b;
  b.tasks = {held, queued};
  WriteOk(std::move(b));
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(LoadOk().tasks, (std::vector<Task>{held, queued}));

  Task released = held;
  released.held = false;
  released.reason = "released by u-1";
  WriteBatch release;
  release.tasks = {released};
  WriteOk(std::move(release));
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(LoadOk().tasks, (std::vector<Task>{released, queued}));
}

TEST_P(StoreConformanceTest, LoadOrdersTasksBySeqAndPricesByResourceThenTime) {
  WriteBatch b;
  b.tasks = {SampleTask("t-b", 30), SampleTask("t-a", 10), SampleTask("t-c", 20)};
  b.prices = {Price{.resource = "gpu:*", .micros_per_hour = 3, .effective_ms = 200},
              Price{.resource = "cpu", .micros_per_hour = 2, .effective_ms = 100},
              Price{.resource = "gpu:*", .micros_per_hour = 1, .effective_ms = 100},
              Price{.resource = "cpu", .micros_per_hour = 4, .effective_ms = 50}};
  WriteOk(std::move(b));
  Snapshot s = LoadOk();
  std::vector<std::string> ids;
  for (const Task& t : s.tasks) ids.push_back(t.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"t-a", "t-c", "t-b"}));
  std::vector<std::pair<std::string, int64_t>> prices;
  for (const Price& p : s.prices) prices.emplace_back(p.resource, p.effective_ms);
  EXPECT_EQ(prices, (std::vector<std::pair<std::string, int64_t>>{
                        {"cpu", 50}, {"cpu", 100}, {"gpu:*", 100}, {"gpu:*", 200}}));
}

TEST_P(StoreConformanceTest, UpsertsReplaceTheRecordWithTheSameKey) {
  WriteBatch first;
  first.projects = {SampleProject("p-1"), SampleProject("p-2")};
  first.users = {SampleUser("u-1")};
  first.access_keys = {SampleAccessKey("AK1")};
  first.nodes = {SampleNode("n-1")};
  first.tasks = {SampleTask("t-1", 1)};
  first.prices = {Price{.resource = "cpu", .micros_per_hour = 10, .effective_ms = 5}};
  first.nonces = {Nonce{.access_key = "AK1", .nonce = "x", .timestamp_ms = 1}};
  first.settings = {{"k", "v1"}};
  WriteOk(first);

  WriteBatch second;
  Project p = SampleProject("p-1");
  p.name = "renamed";
  p.max_tasks = -1;
  User u = SampleUser("u-1");
  u.role = Role::kMember;
  u.projects = {};
  AccessKey k = SampleAccessKey("AK1");
  k.revoked_ms = 0;
  NodeInfo n = SampleNode("n-1");
  n.node.gpus.pop_back();
  n.node.labels.clear();
  n.status = NodeStatus::kReady;
  Task t = SampleTask("t-1", 1);
  t.state = TaskState::kSucceeded;
  t.placement.reset();
  t.command = {};
  second.projects = {p};
  second.users = {u};
  second.access_keys = {k};
  second.nodes = {n};
  second.tasks = {t};
  second.prices = {Price{.resource = "cpu", .micros_per_hour = 20, .effective_ms = 5}};
  second.nonces = {Nonce{.access_key = "AK1", .nonce = "x", .timestamp_ms = 2}};
  second.settings = {{"k", "v2"}};
  WriteOk(second);

  Snapshot s = LoadOk();
  EXPECT_EQ(s.projects, (std::vector<Project>{p, SampleProject("p-2")}));
  EXPECT_EQ(s.users, std::vector<User>{u});
  EXPECT_EQ(s.access_keys, std::vector<AccessKey>{k});
  EXPECT_EQ(NodesDiff(s.nodes, {n}), "");
  EXPECT_EQ(s.tasks, std::vector<Task>{t});
  EXPECT_EQ(s.prices, second.prices);
  EXPECT_EQ(s.nonces, second.nonces);
  EXPECT_EQ(s.settings, second.settings);
}

TEST_P(StoreConformanceTest, WithinABatchTheLaterRecordWins) {
  WriteBatch b;
  Task first = SampleTask("t-1", 1);
  Task second = first;
  second.state = TaskState::kFailed;
  b.tasks = {first, second};
  b.settings = {{"k", "v"}};
  WriteOk(std::move(b));
  EXPECT_EQ(LoadOk().tasks, std::vector<Task>{second});
}

TEST_P(StoreConformanceTest, BatchesApplyInWriteOrderSoTheLaterBatchWins) {
  constexpr int kBatches = 50;
  DoneLatch latch;
  for (int i = 0; i < kBatches; ++i) {
    WriteBatch b;
    Task t = SampleTask("t-1", 1);
    t.updated_ms = i;
    b.tasks = {t};
    b.settings = {{"last", std::to_string(i)}};
    store_->Write(std::move(b), latch.Callback(i));
  }
  for (const auto& [index, status] : latch.Wait(kBatches)) {
    EXPECT_TRUE(status) << "batch " << index << ": " << status.error().message;
  }
  Snapshot s = LoadOk();
  ASSERT_EQ(s.tasks.size(), 1u);
  EXPECT_EQ(s.tasks[0].updated_ms, kBatches - 1);
  EXPECT_EQ(s.settings["last"], std::to_string(kBatches - 1));
}

TEST_P(StoreConformanceTest, SnapshotsGoWithTheirTaskOrOneByOne) {
  WriteBatch b;
  b.tasks = {SampleTask("t-1", 1), SampleTask("t-2", 2)};
  b.snapshots = {SampleSnapshot("s-1", 1, "t-1"), SampleSnapshot("s-2", 2, "t-2"),
                 SampleSnapshot("s-3", 3, "t-2"), SampleSnapshot("s-4", 4, "t-1")};
  WriteOk(std::move(b));
  WriteBatch del;
  del.deleted_tasks = {"t-1"};
  del.deleted_snapshots = {"s-2"};
  WriteOk(std::move(del));
  ASSERT_NO_FATAL_FAILURE(Reopen());
  const Snapshot s = LoadOk();
  ASSERT_EQ(s.snapshots.size(), 1u);
  EXPECT_EQ(s.snapshots[0].id, "s-3");
}

TEST_P(StoreConformanceTest, DatasetsAreReplacedAndDeletedByTheirId) {
  WriteBatch b;
  b.datasets = {SampleDataset("d-1", 1, "imagenet"), SampleDataset("d-2", 2, "coco")};
  WriteOk(std::move(b));
  WriteBatch change;
  Dataset pushed = SampleDataset("d-1", 1, "imagenet");
  pushed.versions.push_back({.version = 2, .manifest = std::string(64, 'b'), .created_by = "u-1"});
  change.datasets = {pushed};
  change.deleted_datasets = {"d-2"};
  WriteOk(std::move(change));
  ASSERT_NO_FATAL_FAILURE(Reopen());
  const Snapshot s = LoadOk();
  EXPECT_EQ(s.datasets, std::vector<Dataset>{pushed});
}

TEST_P(StoreConformanceTest, VolumesAreReplacedAndDeletedByTheirId) {
  WriteBatch b;
  b.volumes = {SampleVolume("v-1", 1, "data"), SampleVolume("v-2", 2, "scratch")};
  WriteOk(std::move(b));
  WriteBatch change;
  Volume moved = SampleVolume("v-1", 1, "data");
  moved.node = "n-2";
  moved.size_bytes = int64_t{300} << 30;
  change.volumes = {moved};
  change.deleted_volumes = {"v-2"};
  WriteOk(std::move(change));
  ASSERT_NO_FATAL_FAILURE(Reopen());
  const Snapshot s = LoadOk();
  EXPECT_EQ(s.volumes, std::vector<Volume>{moved});
}

TEST_P(StoreConformanceTest, DeletedTasksLoseTheirEventsButKeepTheirLedger) {
  WriteBatch b;
  b.tasks = {SampleTask("t-1", 1), SampleTask("t-2", 2)};
  b.events = {SampleEvent("t-1", 1, "a"), SampleEvent("t-2", 2, "b"), SampleEvent("t-1", 3, "c")};
  b.ledger = {SampleLedger("t-1:0", "p-1", LedgerKind::kUsage, 500, 10, "t-1")};
  WriteOk(std::move(b));

  WriteBatch del;
  del.deleted_tasks = {"t-1", "t-unknown"};
  WriteOk(std::move(del));

  Snapshot s = LoadOk();
  ASSERT_EQ(s.tasks.size(), 1u);
  EXPECT_EQ(s.tasks[0].id, "t-2");
  EXPECT_TRUE(EventsOk("t-1").empty());
  EXPECT_EQ(EventsOk("t-2"), std::vector<TaskEvent>{SampleEvent("t-2", 2, "b")});
  EXPECT_EQ(Keys(LedgerOk(Query("p-1", "t-1"))), std::vector<std::string>{"t-1:0"});
  EXPECT_EQ(s.usage_micros, (Micros{{"p-1", 500}}));

  // Upserts come before deletions within a batch, events after them.
  WriteBatch same;
  same.tasks = {SampleTask("t-2", 2)};
  same.deleted_tasks = {"t-2"};
  same.events = {SampleEvent("t-2", 9, "after delete")};
  WriteOk(std::move(same));
  EXPECT_TRUE(LoadOk().tasks.empty());
  EXPECT_EQ(EventsOk("t-2"), std::vector<TaskEvent>{SampleEvent("t-2", 9, "after delete")});
}

// Tasks a, b, c in project p-1 and d in p-2, each in its own state and node, for the reads below.
inline std::vector<Task> TasksToRead() {
  Task a = SampleTask("t-a", 1);
  a.state = TaskState::kSucceeded;
  a.finished_ms = 100;
  Task b = SampleTask("t-b", 2);  // running on n-1
  b.finished_ms = 0;
  Task c = SampleTask("t-c", 3);
  c.state = TaskState::kPending;
  c.placement.reset();
  c.finished_ms = 0;
  Task d = SampleTask("t-d", 4);
  d.project_id = "p-2";
  d.state = TaskState::kFailed;
  d.placement->node = "n-2";
  d.finished_ms = 300;
  return {a, b, c, d};
}

inline std::vector<std::string> Ids(const std::vector<Task>& tasks) {
  std::vector<std::string> ids;
  for (const Task& t : tasks) ids.push_back(t.id);
  return ids;
}

TEST_P(StoreConformanceTest, ReadTaskFindsOneTaskByIdAcrossReopen) {
  WriteBatch b;
  b.tasks = TasksToRead();
  WriteOk(std::move(b));
  ASSERT_NO_FATAL_FAILURE(Reopen());
  Result<std::optional<Task>> d = store_->ReadTask("t-d");
  ASSERT_TRUE(d) << d.error().message;
  ASSERT_TRUE(d->has_value());
  EXPECT_EQ(**d, TasksToRead()[3]);
  Result<std::optional<Task>> none = store_->ReadTask("t-unknown");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  EXPECT_EQ(store_->ReadTask("").error().code, ErrorCode::kInvalidArgument);

  WriteBatch del;
  del.deleted_tasks = {"t-d"};
  WriteOk(std::move(del));
  EXPECT_FALSE(store_->ReadTask("t-d")->has_value());
}

TEST_P(StoreConformanceTest, ListTasksPagesInSeqOrderByProjectStateAndNode) {
  WriteBatch b;
  b.tasks = TasksToRead();
  WriteOk(std::move(b));
  auto list = [&](TaskQuery q) {
    Result<std::vector<Task>> page = store_->ListTasks(q);
    EXPECT_TRUE(page) << page.error().message;
    return page ? Ids(*page) : std::vector<std::string>{};
  };
  using Ids = std::vector<std::string>;
  EXPECT_EQ(list(TaskQuery{}), (Ids{"t-a", "t-b", "t-c", "t-d"}));
  EXPECT_EQ(list(TaskPage({"p-1"})), (Ids{"t-a", "t-b", "t-c"}));
  EXPECT_EQ(list(TaskPage({"p-2", "p-9"})), (Ids{"t-d"}));
  EXPECT_EQ(list(TaskPage({}, {TaskState::kFailed, TaskState::kPending})), (Ids{"t-c", "t-d"}));
  EXPECT_EQ(list(TaskPage({}, {}, "n-1")), (Ids{"t-a", "t-b"}));
  EXPECT_EQ(list(TaskPage({"p-1"}, {TaskState::kRunning}, "n-1")), (Ids{"t-b"}));
  // The cursor and the limit: pages of two, then the rest.
  EXPECT_EQ(list(TaskPage({}, {}, "", 0, 2)), (Ids{"t-a", "t-b"}));
  EXPECT_EQ(list(TaskPage({}, {}, "", 2, 2)), (Ids{"t-c", "t-d"}));
  EXPECT_EQ(list(TaskPage({}, {}, "", 4)), Ids{});
  EXPECT_EQ(list(TaskPage({"p-2", "p-1"}, {}, "", 1, 2)), (Ids{"t-b", "t-c"}));
  EXPECT_EQ(list(TaskPage({}, {TaskState::kFailed, TaskState::kSucceeded}, "", 0, 1)), Ids{"t-a"});
  // A task whose seq changes moves in the order (an upsert replaces it).
  WriteBatch moved;
  moved.tasks = {SampleTask("t-a", 9)};
  WriteOk(std::move(moved));
  EXPECT_EQ(list(TaskPage({"p-1"})), (Ids{"t-b", "t-c", "t-a"}));

  for (const TaskQuery& bad :
       {TaskPage({}, {}, "", 0, 0), TaskPage({}, {}, "", 0, kMaxTaskQueryLimit + 1),
        TaskPage({}, {}, "", -1), TaskPage({""})}) {
    Result<std::vector<Task>> refused = store_->ListTasks(bad);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument) << refused.error().message;
  }
}

TEST_P(StoreConformanceTest, ArrayElementsRoundTripAndListByArray) {
  WriteBatch b;
  for (int64_t i = 0; i < 4; ++i) {
    Task t = SampleTask("t-" + std::to_string(10 + i), 10 + i);
    if (i < 3) {
      t.array_id = "a-10";
      t.array_index = 5 * i;
      t.array_limit = 2;
    }
    b.tasks.push_back(t);
  }
  const std::vector<Task> written = b.tasks;
  WriteOk(std::move(b));
  TaskQuery q;
  q.array_id = "a-10";
  Result<std::vector<Task>> page = store_->ListTasks(q);
  ASSERT_TRUE(page) << page.error().message;
  EXPECT_EQ(*page, (std::vector<Task>{written[0], written[1], written[2]}))
      << "only the array's elements, with their index and limit, in seq order";
  q.project_ids = {"p-1"};
  q.after_seq = 10;
  q.limit = 1;
  page = store_->ListTasks(q);
  ASSERT_TRUE(page) << page.error().message;
  EXPECT_EQ(Ids(*page), std::vector<std::string>{"t-11"});
  Reopen();
  EXPECT_EQ(LoadOk().tasks, written) << "the array fields survive a reopen";

  WriteBatch bad;
  bad.tasks = {SampleTask("t-20", 20)};
  bad.tasks[0].array_index = 3;  // an index without an array
  EXPECT_FALSE(store_->WriteSync(std::move(bad)));
}

TEST_P(StoreConformanceTest, LoadLeavesOutTasksFinishedBeforeTheCutoff) {
  WriteBatch b;
  b.tasks = TasksToRead();  // finished: t-a at 100, t-d at 300; t-b, t-c live
  WriteOk(std::move(b));
  ASSERT_NO_FATAL_FAILURE(Reopen());
  auto loaded = [&](int64_t since) {
    Result<Snapshot> s = store_->Load(LoadOptions{.finished_since_ms = since});
    EXPECT_TRUE(s) << s.error().message;
    return s ? Ids(s->tasks) : std::vector<std::string>{};
  };
  using Ids = std::vector<std::string>;
  EXPECT_EQ(loaded(0), (Ids{"t-a", "t-b", "t-c", "t-d"}));
  EXPECT_EQ(loaded(100), (Ids{"t-a", "t-b", "t-c", "t-d"})) << "finished at the cutoff: kept";
  EXPECT_EQ(loaded(101), (Ids{"t-b", "t-c", "t-d"}));
  EXPECT_EQ(loaded(1'000), (Ids{"t-b", "t-c"})) << "live tasks always come back";
  EXPECT_EQ(store_->ReadTask("t-a")->value().id, "t-a") << "left out of Load, still stored";
  EXPECT_EQ(store_->Load(LoadOptions{.finished_since_ms = 1'000})->max_task_seq, 4)
      << "the highest seq counts the tasks left out (t-d)";
}

TEST_P(StoreConformanceTest, TaskEventsComeBackInInsertionOrder) {
  // Times deliberately out of order: the order is the order of writing.
  WriteBatch first;
  first.events = {SampleEvent("t-1", 30, "one"), SampleEvent("t-2", 1, "other"),
                  SampleEvent("t-1", 10, "two")};
  WriteOk(std::move(first));
  WriteBatch second;
  second.events = {SampleEvent("t-1", 20, "three")};
  WriteOk(std::move(second));
  std::vector<std::string> reasons;
  for (const TaskEvent& e : EventsOk("t-1")) reasons.push_back(e.reason);
  EXPECT_EQ(reasons, (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_TRUE(EventsOk("t-3").empty());
  Result<std::vector<TaskEvent>> empty_id = store_->TaskEvents("");
  ASSERT_FALSE(empty_id);
  EXPECT_EQ(empty_id.error().code, ErrorCode::kInvalidArgument);
}

TEST_P(StoreConformanceTest, DuplicateLedgerKeyIsANoOpAndKeepsTheFirstEntry) {
  const LedgerEntry first = SampleLedger("credit-1", "p-1", LedgerKind::kCredit, 1000, 10);
  LedgerEntry again = first;
  again.amount_micros = 999'999;
  again.detail = "retry";
  WriteBatch b;
  b.ledger = {first, again};  // a duplicate within one batch
  WriteOk(std::move(b));
  WriteBatch retry;
  retry.ledger = {again};  // and in a later batch
  WriteOk(std::move(retry));
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(LedgerOk(Query("p-1")), std::vector<LedgerEntry>{first});
  Snapshot s = LoadOk();
  EXPECT_EQ(s.credits_micros, (Micros{{"p-1", 1000}}));
  EXPECT_TRUE(s.usage_micros.empty());
}

TEST_P(StoreConformanceTest, LoadSumsCreditsAndUsagePerProject) {
  WriteBatch b;
  b.ledger = {SampleLedger("c1", "p-1", LedgerKind::kCredit, 10'000, 1),
              SampleLedger("u1", "p-1", LedgerKind::kUsage, 2'500, 2, "t-1"),
              SampleLedger("c2", "p-1", LedgerKind::kCredit, 500, 3),
              SampleLedger("u2", "p-2", LedgerKind::kUsage, 700, 4, "t-2"),
              SampleLedger("c3", "p-3", LedgerKind::kCredit, 1, 5)};
  WriteOk(std::move(b));
  // Only projects with entries of a kind appear in that kind's map.
  const Micros credits = {{"p-1", 10'500}, {"p-3", 1}};
  const Micros usage = {{"p-1", 2'500}, {"p-2", 700}};
  for (int round = 0; round < 2; ++round) {
    Snapshot s = LoadOk();
    EXPECT_EQ(s.credits_micros, credits);
    EXPECT_EQ(s.usage_micros, usage);
    ASSERT_NO_FATAL_FAILURE(Reopen());
  }
}

TEST_P(StoreConformanceTest, LedgerQueryFiltersByProjectTaskAndTimeAndPages) {
  WriteBatch b;
  // created_ms ties (20) keep the order of writing.
  b.ledger = {SampleLedger("a", "p-1", LedgerKind::kCredit, 1, 30),
              SampleLedger("b", "p-1", LedgerKind::kUsage, 1, 10, "t-1"),
              SampleLedger("c", "p-1", LedgerKind::kUsage, 1, 20, "t-2"),
              SampleLedger("d", "p-2", LedgerKind::kUsage, 1, 15, "t-1"),
              SampleLedger("e", "p-1", LedgerKind::kUsage, 1, 20, "t-1"),
              SampleLedger("f", "p-1", LedgerKind::kUsage, 1, 40, "t-1")};
  WriteOk(std::move(b));
  using KeyList = std::vector<std::string>;
  EXPECT_EQ(Keys(LedgerOk(Query("p-1"))), (KeyList{"b", "c", "e", "a", "f"}));
  EXPECT_EQ(Keys(LedgerOk(Query("p-2"))), (KeyList{"d"}));
  EXPECT_EQ(Keys(LedgerOk(Query("p-3"))), (KeyList{}));
  EXPECT_EQ(Keys(LedgerOk(Query("p-1", "t-1"))), (KeyList{"b", "e", "f"}));
  EXPECT_EQ(Keys(LedgerOk(Query("p-1", "", 20, 40))), (KeyList{"c", "e", "a"}));
  EXPECT_EQ(Keys(LedgerOk(Query("p-1", "", 20))), (KeyList{"c", "e", "a", "f"}));
  EXPECT_EQ(Keys(LedgerOk(Query("p-1", "t-1", 11, 41))), (KeyList{"e", "f"}));
  // Paging: consecutive pages cover everything once.
  KeyList paged;
  for (int64_t offset = 0; offset < 10; offset += 2) {
    KeyList page = Keys(LedgerOk(Page("p-1", offset, 2)));
    EXPECT_LE(page.size(), 2u);
    paged.insert(paged.end(), page.begin(), page.end());
  }
  EXPECT_EQ(paged, (KeyList{"b", "c", "e", "a", "f"}));
  EXPECT_EQ(Keys(LedgerOk(Page("p-1", 4, 10))), (KeyList{"f"}));
  EXPECT_EQ(Keys(LedgerOk(Page("p-1", 5, 1000))), (KeyList{}));
}

TEST_P(StoreConformanceTest, MalformedLedgerQueriesAreInvalidArguments) {
  const std::vector<LedgerQuery> bad = {
      Query(""),
      Page("p-1", -1, 10),
      Page("p-1", 0, 0),
      Query("p-1", "", 0, -5),
      Query("p-1", "", 50, 10),
  };
  for (const LedgerQuery& q : bad) {
    Result<std::vector<LedgerEntry>> r = store_->Ledger(q);
    ASSERT_FALSE(r) << "project '" << q.project_id << "' offset " << q.offset;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_FALSE(r.error().message.empty());
  }
}

// The audit log: entries only added (a seq written again keeps the first entry), a page after a
// seq cursor filtered by actor and target, the highest seq known after a reopen.
TEST_P(StoreConformanceTest, AuditEntriesAppendOnceAndPageAfterASeqByActorAndTarget) {
  auto entry = [](int64_t seq, std::string actor, std::string action, std::string target) {
    return AuditEntry{.seq = seq,
                      .time_ms = 1000 + seq,
                      .actor = std::move(actor),
                      .access_key = "AK-" + std::to_string(seq),
                      .action = std::move(action),
                      .target = std::move(target),
                      .detail = "d\u00e9tail " + std::to_string(seq)};
  };
  auto page = [this](int64_t after, int64_t limit, std::string actor = "",
                     std::string target = "") {
    AuditQuery q;
    q.after_seq = after;
    q.limit = limit;
    q.actor = std::move(actor);
    q.target = std::move(target);
    auto entries = store_->Audit(q);
    EXPECT_TRUE(entries) << entries.error().message;
    std::vector<int64_t> seqs;
    for (const AuditEntry& e : entries.value_or(std::vector<AuditEntry>{})) seqs.push_back(e.seq);
    return seqs;
  };
  EXPECT_EQ(LoadOk().max_audit_seq, 0);
  WriteBatch b;
  b.audit = {entry(1, "root", "user.create", "u-1"), entry(2, "root", "key.create", "u-1"),
             entry(3, "ada", "project.update", "p-1")};
  WriteOk(std::move(b));
  WriteBatch again;
  again.audit = {entry(2, "mallory", "user.update", "u-9"), entry(4, "ada", "credit.add", "p-1")};
  WriteOk(std::move(again));
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(LoadOk().max_audit_seq, 4);
  AuditQuery all;
  all.limit = 10;
  auto entries = store_->Audit(all);
  ASSERT_TRUE(entries);
  ASSERT_EQ(entries->size(), 4u);
  EXPECT_EQ(entries->at(1), entry(2, "root", "key.create", "u-1")) << "the first entry 2 stays";
  EXPECT_EQ(page(0, 2), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(page(2, 10), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(page(0, 10, "ada"), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(page(0, 10, "", "u-1"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(page(0, 10, "ada", "u-1"), (std::vector<int64_t>{}));
  EXPECT_EQ(page(4, 10), (std::vector<int64_t>{}));
  AuditQuery bad;
  bad.limit = 0;
  EXPECT_EQ(store_->Audit(bad).error().code, ErrorCode::kInvalidArgument);
  WriteBatch invalid;
  invalid.audit = {entry(0, "root", "user.create", "u-1")};
  EXPECT_EQ(store_->WriteSync(std::move(invalid)).error().code, ErrorCode::kInvalidArgument);
}

TEST_P(StoreConformanceTest, NoncesExpireByTimestampAfterTheBatchsNonces) {
  WriteBatch b;
  b.nonces = {Nonce{.access_key = "AK1", .nonce = "a", .timestamp_ms = 100},
              Nonce{.access_key = "AK1", .nonce = "b", .timestamp_ms = 200},
              Nonce{.access_key = "AK2", .nonce = "a", .timestamp_ms = 300}};
  WriteOk(std::move(b));
  EXPECT_EQ(LoadOk().nonces.size(), 3u);

  WriteBatch expire;
  // Recorded first, then expired by the same batch: 150 < 250.
  expire.nonces = {Nonce{.access_key = "AK3", .nonce = "late", .timestamp_ms = 150},
                   Nonce{.access_key = "AK3", .nonce = "fresh", .timestamp_ms = 250}};
  expire.expire_nonces_before_ms = 250;
  WriteOk(std::move(expire));
  EXPECT_EQ(
      LoadOk().nonces,
      (std::vector<Nonce>{Nonce{.access_key = "AK2", .nonce = "a", .timestamp_ms = 300},
                          Nonce{.access_key = "AK3", .nonce = "fresh", .timestamp_ms = 250}}));

  WriteBatch keep;  // expire_nonces_before_ms 0: nothing expires
  keep.settings = {{"x", "y"}};
  WriteOk(std::move(keep));
  EXPECT_EQ(LoadOk().nonces.size(), 2u);
}

TEST_P(StoreConformanceTest, SettingsAreKeyValueFactsThatSurviveReopen) {
  WriteBatch b;
  b.settings = {{"bootstrap_done", "1"}, {"cluster_name", "lab"}};
  WriteOk(std::move(b));
  WriteBatch update;
  update.settings = {{"cluster_name", "prod"}, {"blank", ""}};
  WriteOk(std::move(update));
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(LoadOk().settings,
            (std::map<std::string, std::string>{
                {"blank", ""}, {"bootstrap_done", "1"}, {"cluster_name", "prod"}}));
}

TEST_P(StoreConformanceTest, EmptyBatchSucceeds) {
  WriteBatch b;
  EXPECT_TRUE(b.Empty());
  WriteOk(std::move(b));
  EXPECT_TRUE(LoadOk().tasks.empty());
}

TEST_P(StoreConformanceTest, InvalidBatchesAreRefusedWhole) {
  struct Case {
    std::string name;
    std::function<void(WriteBatch&)> spoil;
  };
  const std::vector<Case> cases = {
      {"empty project id", [](WriteBatch& b) { b.projects.push_back(SampleProject("")); }},
      {"empty user id", [](WriteBatch& b) { b.users.push_back(SampleUser("")); }},
      {"empty access key", [](WriteBatch& b) { b.access_keys.push_back(SampleAccessKey("")); }},
      {"empty node name", [](WriteBatch& b) { b.nodes.push_back(SampleNode("")); }},
      {"empty task id", [](WriteBatch& b) { b.tasks.push_back(SampleTask("", 5)); }},
      {"empty price resource", [](WriteBatch& b) { b.prices.push_back(Price{}); }},
      {"empty deleted task id", [](WriteBatch& b) { b.deleted_tasks.push_back(""); }},
      {"snapshot without a task",
       [](WriteBatch& b) { b.snapshots.push_back(SampleSnapshot("s-1", 1, "")); }},
      {"empty event task id", [](WriteBatch& b) { b.events.push_back(SampleEvent("", 1, "x")); }},
      {"empty ledger key",
       [](WriteBatch& b) {
         b.ledger.push_back(SampleLedger("", "p-1", LedgerKind::kCredit, 1, 1));
       }},
      {"empty ledger project",
       [](WriteBatch& b) { b.ledger.push_back(SampleLedger("k", "", LedgerKind::kCredit, 1, 1)); }},
      {"zero ledger amount",
       [](WriteBatch& b) {
         b.ledger.push_back(SampleLedger("k", "p-1", LedgerKind::kUsage, 0, 1));
       }},
      {"negative ledger amount",
       [](WriteBatch& b) {
         b.ledger.push_back(SampleLedger("k", "p-1", LedgerKind::kUsage, -5, 1));
       }},
      {"empty nonce",
       [](WriteBatch& b) {
         b.nonces.push_back(Nonce{.access_key = "AK1", .nonce = "", .timestamp_ms = 1});
       }},
      {"empty nonce access key",
       [](WriteBatch& b) {
         b.nonces.push_back(Nonce{.access_key = "", .nonce = "n", .timestamp_ms = 1});
       }},
      {"negative nonce expiry", [](WriteBatch& b) { b.expire_nonces_before_ms = -1; }},
      {"empty setting key", [](WriteBatch& b) { b.settings[""] = "v"; }},
      {"task state out of range",
       [](WriteBatch& b) {
         Task t = SampleTask("t-bad", 9);
         t.state = static_cast<TaskState>(99);
         b.tasks.push_back(t);
       }},
      {"command not utf-8",
       [](WriteBatch& b) {
         Task t = SampleTask("t-bad", 9);
         t.command = {"echo", "\xc3\x28"};
         b.tasks.push_back(t);
       }},
      {"held task not pending",
       [](WriteBatch& b) {
         Task t = SampleTask("t-bad", 9);  // running
         t.held = true;
         b.tasks.push_back(t);
       }},
      {"node label not utf-8",
       [](WriteBatch& b) {
         NodeInfo n = SampleNode("n-bad");
         n.node.labels["k"] = "\xff";
         b.nodes.push_back(n);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    WriteBatch b;
    b.projects = {SampleProject("p-valid")};  // valid, and must not be applied
    b.ledger = {SampleLedger("valid-credit", "p-valid", LedgerKind::kCredit, 5, 1)};
    c.spoil(b);
    Status s = store_->WriteSync(std::move(b));
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument) << s.error().message;
    EXPECT_FALSE(s.error().message.empty());
  }
  Snapshot s = LoadOk();
  EXPECT_TRUE(s.projects.empty());
  EXPECT_TRUE(s.tasks.empty());
  EXPECT_TRUE(s.nodes.empty());
  EXPECT_TRUE(s.credits_micros.empty());
  EXPECT_TRUE(LedgerOk(Query("p-valid")).empty());
}

TEST_P(StoreConformanceTest, AFailingBatchDoesNotTakeOthersDown) {
  constexpr size_t kBatches = 9;
  DoneLatch latch;
  for (size_t i = 0; i < kBatches; ++i) {
    WriteBatch b;
    b.projects = {SampleProject("p-" + std::to_string(i))};
    if (i % 3 == 1) b.tasks = {SampleTask("", 1)};  // empty id: refused
    store_->Write(std::move(b), latch.Callback(i));
  }
  std::set<std::string> expected;
  for (const auto& [index, status] : latch.Wait(kBatches)) {
    if (index % 3 == 1) {
      ASSERT_FALSE(status) << "batch " << index;
      EXPECT_EQ(status.error().code, ErrorCode::kInvalidArgument);
    } else {
      EXPECT_TRUE(status) << "batch " << index << ": " << status.error().message;
      expected.insert("p-" + std::to_string(index));
    }
  }
  std::set<std::string> ids;
  for (const Project& p : LoadOk().projects) ids.insert(p.id);
  EXPECT_EQ(ids, expected);
}

TEST_P(StoreConformanceTest, ConcurrentWritersLandExactlyOnce) {
  constexpr int kThreads = 16;
  constexpr int kBatchesPerThread = 200;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kBatchesPerThread; ++i) {
        const std::string id = "t-" + std::to_string(w) + "-" + std::to_string(i);
        WriteBatch b;
        b.tasks = {SampleTask(id, int64_t{w} * kBatchesPerThread + i)};
        b.events = {SampleEvent(id, i, "submitted")};
        b.ledger = {SampleLedger(id + ":0", "p-" + std::to_string(w % 4), LedgerKind::kUsage, w + 1,
                                 i, id)};
        if (!store_->WriteSync(std::move(b))) ++failures[w];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < kThreads; ++w) EXPECT_EQ(failures[w], 0) << "writer " << w;

  ASSERT_NO_FATAL_FAILURE(Reopen());
  Snapshot s = LoadOk();
  ASSERT_EQ(s.tasks.size(), size_t{kThreads} * kBatchesPerThread);
  std::set<std::string> ids;
  for (const Task& t : s.tasks) ids.insert(t.id);
  EXPECT_EQ(ids.size(), s.tasks.size());
  Micros expected_usage;
  for (int w = 0; w < kThreads; ++w) {
    expected_usage["p-" + std::to_string(w % 4)] += int64_t{w + 1} * kBatchesPerThread;
  }
  size_t ledger_entries = 0;
  for (int p = 0; p < 4; ++p) {
    ledger_entries += LedgerOk(Page("p-" + std::to_string(p), 0, 100'000)).size();
  }
  EXPECT_EQ(ledger_entries, size_t{kThreads} * kBatchesPerThread);
  EXPECT_EQ(s.usage_micros, expected_usage);
  EXPECT_TRUE(s.credits_micros.empty());
  EXPECT_EQ(EventsOk("t-3-17"), std::vector<TaskEvent>{SampleEvent("t-3-17", 17, "submitted")});
}

TEST_P(StoreConformanceTest, CloseFinishesQueuedWritesThenRefusesNewOnes) {
  constexpr size_t kBatches = 100;
  DoneLatch latch;
  for (size_t i = 0; i < kBatches; ++i) {
    WriteBatch b;
    b.tasks = {SampleTask("t-" + std::to_string(i), static_cast<int64_t>(i))};
    store_->Write(std::move(b), latch.Callback(i));
  }
  store_->Close();
  for (const auto& [index, status] : latch.Wait(kBatches)) {
    EXPECT_TRUE(status) << "batch " << index << ": " << status.error().message;
  }

  DoneLatch after;
  WriteBatch late;
  late.tasks = {SampleTask("t-late", 1000)};
  store_->Write(std::move(late), after.Callback(0));
  Status late_status = after.Wait(1)[0];
  ASSERT_FALSE(late_status);
  EXPECT_EQ(late_status.error().code, ErrorCode::kUnavailable);
  Status sync = store_->WriteSync(WriteBatch{});
  ASSERT_FALSE(sync);
  EXPECT_EQ(sync.error().code, ErrorCode::kUnavailable);
  store_->Close();  // idempotent

  ASSERT_NO_FATAL_FAILURE(Reopen());
  Snapshot s = LoadOk();
  EXPECT_EQ(s.tasks.size(), kBatches);
  for (const Task& t : s.tasks) EXPECT_NE(t.id, "t-late");
}

// ---- Join tokens and agent credentials ----

TEST_P(StoreConformanceTest, JoinTokensAndAgentCredentialsRoundTripExactlyAcrossReopen) {
  EXPECT_TRUE(LoadOk().join_tokens.empty());
  WriteBatch b;
  JoinToken active = SampleJoinToken("JT-b");
  active.expires_ms = 0;
  active.revoked_ms = 0;
  b.join_tokens = {active, SampleJoinToken("JT-a")};  // loaded in id order
  b.access_keys = {SampleAgentKey("AK2", "n-1", "JT-b"), SampleAccessKey("AK1")};
  WriteOk(std::move(b));
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "before reopen" : "after reopen");
    Snapshot s = LoadOk();
    EXPECT_EQ(s.join_tokens, (std::vector<JoinToken>{SampleJoinToken("JT-a"), active}));
    EXPECT_EQ(s.access_keys, (std::vector<AccessKey>{SampleAccessKey("AK1"),
                                                     SampleAgentKey("AK2", "n-1", "JT-b")}));
    ASSERT_NO_FATAL_FAILURE(Reopen());
  }
}

TEST_P(StoreConformanceTest, RevokingAJoinTokenAndItsCredentialsIsAnUpsert) {
  WriteBatch b;
  JoinToken token = SampleJoinToken("JT-1");
  token.revoked_ms = 0;
  AccessKey agent = SampleAgentKey("AK2", "n-1", "JT-1");
  agent.revoked_ms = 0;
  b.join_tokens = {token};
  b.access_keys = {agent};
  WriteOk(std::move(b));

  WriteBatch revoke;
  token.revoked_ms = 1'700'000'000'100;
  agent.revoked_ms = token.revoked_ms;
  revoke.join_tokens = {token};
  revoke.access_keys = {agent};
  WriteOk(std::move(revoke));
  ASSERT_NO_FATAL_FAILURE(Reopen());
  Snapshot s = LoadOk();
  EXPECT_EQ(s.join_tokens, std::vector<JoinToken>{token});
  EXPECT_EQ(s.access_keys, std::vector<AccessKey>{agent});
}

TEST_P(StoreConformanceTest, MalformedJoinTokensAndAgentCredentialsAreRefused) {
  struct Case {
    std::string name;
    std::function<void(WriteBatch&)> spoil;
    std::string message;  // a part of the error message
  };
  const std::vector<Case> cases = {
      {"empty join token id", [](WriteBatch& b) { b.join_tokens.push_back(SampleJoinToken("")); },
       "join token id must not be empty"},
      {"empty secret digest",
       [](WriteBatch& b) {
         JoinToken t = SampleJoinToken("JT-1");
         t.secret_digest.clear();
         b.join_tokens.push_back(t);
       },
       "secret_digest of join token 'JT-1'"},
      {"key of a user and a node",
       [](WriteBatch& b) {
         AccessKey k = SampleAgentKey("AK9", "n-1", "JT-1");
         k.user_id = "u-1";
         b.access_keys.push_back(k);
       },
       "exactly one of user_id and node"},
      {"key of nobody",
       [](WriteBatch& b) {
         AccessKey k = SampleAccessKey("AK9");
         k.user_id.clear();
         b.access_keys.push_back(k);
       },
       "exactly one of user_id and node"},
      {"user key with a join token",
       [](WriteBatch& b) {
         AccessKey k = SampleAccessKey("AK9");
         k.join_token_id = "JT-1";
         b.access_keys.push_back(k);
       },
       "join_token_id 'JT-1'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    WriteBatch b;
    b.join_tokens = {SampleJoinToken("JT-valid")};  // valid, and must not be applied
    c.spoil(b);
    Status s = store_->WriteSync(std::move(b));
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(s.error().message.find(c.message), std::string::npos) << s.error().message;
  }
  Snapshot s = LoadOk();
  EXPECT_TRUE(s.join_tokens.empty());
  EXPECT_TRUE(s.access_keys.empty());
}

}  // namespace gpupool::store::testing
