// Tests for store/async_store: the Store conformance suite over an AsyncStore on a MemoryStore,
// plus what is particular to it: callbacks on its writer thread in Write order, writes held back
// (not applied, not acknowledged) until stepped or released, dropped as in a crash, and Close
// from a callback.
#include "store/async_store.h"

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/memory_store.h"
#include "store/store_conformance.h"

namespace gpupool::store::testing {
namespace {

// Every Open is a new AsyncStore over a new MemoryStore on the same Data.
class AsyncFactory : public StoreFactory {
 public:
  std::unique_ptr<Store> Open() override {
    return std::make_unique<AsyncStore>(std::make_unique<MemoryStore>(data_));
  }

 private:
  std::shared_ptr<MemoryStore::Data> data_ = MemoryStore::NewData();
};

INSTANTIATE_TEST_SUITE_P(Async, StoreConformanceTest,
                         ::testing::Values(StoreParam{
                             "Async", [] { return std::make_unique<AsyncFactory>(); }}));

WriteBatch ProjectBatch(const std::string& id) {
  WriteBatch b;
  b.projects = {SampleProject(id)};
  return b;
}

class AsyncStoreTest : public ::testing::Test {
 protected:
  std::vector<std::string> DurableProjects() {
    const Result<Snapshot> snapshot = store_.Load({});
    EXPECT_TRUE(snapshot) << snapshot.error().message;
    std::vector<std::string> ids;
    if (snapshot) {
      for (const Project& p : snapshot->projects) ids.push_back(p.id);
    }
    return ids;
  }

  std::shared_ptr<MemoryStore::Data> data_ = MemoryStore::NewData();
  AsyncStore store_{std::make_unique<MemoryStore>(data_)};
};

TEST_F(AsyncStoreTest, CallsBackOnItsOwnThreadInWriteOrder) {
  constexpr size_t kWrites = 50;
  std::mutex mu;
  std::vector<size_t> order;
  std::set<std::thread::id> threads;
  DoneLatch latch;
  for (size_t i = 0; i < kWrites; ++i) {
    auto record = latch.Callback(i);
    store_.Write(ProjectBatch("p-" + std::to_string(i)), [&, i, record](Status s) {
      {
        std::lock_guard lock(mu);
        order.push_back(i);
        threads.insert(std::this_thread::get_id());
      }
      record(std::move(s));
    });
  }
  for (const auto& [index, status] : latch.Wait(kWrites)) EXPECT_TRUE(status) << index;
  std::lock_guard lock(mu);
  ASSERT_EQ(order.size(), kWrites);
  for (size_t i = 0; i < kWrites; ++i) EXPECT_EQ(order[i], i);
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_NE(*threads.begin(), std::this_thread::get_id());
  EXPECT_EQ(store_.applied(), kWrites);
}

TEST_F(AsyncStoreTest, HeldWritesAreNeitherDurableNorAcknowledgedUntilSteppedOrReleased) {
  store_.Hold();
  DoneLatch latch;
  for (size_t i = 0; i < 3; ++i)
    store_.Write(ProjectBatch("p-" + std::to_string(i)), latch.Callback(i));
  std::vector<WriteBatch> held = store_.AwaitHeld(3);
  ASSERT_EQ(held.size(), 3u);
  EXPECT_EQ(held[0].projects.at(0).id, "p-0");
  EXPECT_EQ(held[2].projects.at(0).id, "p-2");
  EXPECT_TRUE(DurableProjects().empty());
  EXPECT_EQ(store_.applied(), 0u);

  store_.Step(1);
  EXPECT_TRUE(latch.Wait(1).at(0));
  EXPECT_EQ(store_.AwaitHeld(2).size(), 2u) << "the two after it stay held";
  EXPECT_EQ(DurableProjects(), std::vector<std::string>{"p-0"});

  store_.Release();
  EXPECT_EQ(latch.Wait(3).size(), 3u);
  EXPECT_EQ(DurableProjects(), (std::vector<std::string>{"p-0", "p-1", "p-2"}));
  EXPECT_TRUE(store_.AwaitHeld(1).empty()) << "nothing is held once released";
}

TEST_F(AsyncStoreTest, DroppedWritesAreLostAsInACrashAndNeverCallBack) {
  ASSERT_TRUE(store_.WriteSync(ProjectBatch("p-acked")));
  store_.Hold();
  bool called = false;
  store_.Write(ProjectBatch("p-lost"), [&](Status) { called = true; });
  ASSERT_EQ(store_.AwaitHeld(1).size(), 1u);
  EXPECT_EQ(store_.DropHeld(), 1u);
  store_.Close();
  EXPECT_FALSE(called);
  MemoryStore reopened(data_);
  ASSERT_EQ(reopened.Load({})->projects.size(), 1u);
  EXPECT_EQ(reopened.Load({})->projects[0].id, "p-acked");
}

TEST_F(AsyncStoreTest, CloseLetsHeldWritesThroughAndMayBeCalledFromACallback) {
  store_.Hold();
  std::promise<Status> second;
  store_.Write(ProjectBatch("p-0"), [&](Status s) {
    EXPECT_TRUE(s);
    store_.Close();  // on the writer thread: it must not join itself
  });
  store_.Write(ProjectBatch("p-1"), [&](Status s) { second.set_value(std::move(s)); });
  ASSERT_EQ(store_.AwaitHeld(2).size(), 2u);
  store_.Close();
  EXPECT_TRUE(second.get_future().get()) << "queued before Close: applied";
  EXPECT_EQ(DurableProjects(), (std::vector<std::string>{"p-0", "p-1"}));
  const Status late = store_.WriteSync(ProjectBatch("p-2"));
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace gpupool::store::testing
