// Tests for store/memory_store: the Store conformance suite, plus what is particular to
// MemoryStore (stores on one Data share it; closing one leaves the others open).
#include "store/memory_store.h"

#include <gtest/gtest.h>

#include <memory>

#include "store/store_conformance.h"

namespace gpupool::store::testing {
namespace {

// Every Open is a new MemoryStore on the same Data, as reopening a database file would be.
class MemoryFactory : public StoreFactory {
 public:
  std::unique_ptr<Store> Open() override { return std::make_unique<MemoryStore>(data_); }

 private:
  std::shared_ptr<MemoryStore::Data> data_ = MemoryStore::NewData();
};

INSTANTIATE_TEST_SUITE_P(Memory, StoreConformanceTest,
                         ::testing::Values(StoreParam{
                             "Memory", [] { return std::make_unique<MemoryFactory>(); }}));

TEST(MemoryStore, StoresOnOneDataShareRecordsAndCloseIndependently) {
  std::shared_ptr<MemoryStore::Data> data = MemoryStore::NewData();
  MemoryStore a(data);
  MemoryStore b(data);
  WriteBatch batch;
  batch.projects = {SampleProject("p-1")};
  ASSERT_TRUE(a.WriteSync(std::move(batch)));
  Result<Snapshot> seen = b.Load({});
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->projects, std::vector<Project>{SampleProject("p-1")});

  a.Close();
  Status closed = a.WriteSync(WriteBatch{});
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(b.WriteSync(WriteBatch{}));
}

TEST(MemoryStore, WriteCallsDoneBeforeReturning) {
  MemoryStore store;
  bool called = false;
  WriteBatch batch;
  batch.settings = {{"k", "v"}};
  store.Write(std::move(batch), [&](Status s) {
    EXPECT_TRUE(s);
    called = true;
  });
  EXPECT_TRUE(called);
}

}  // namespace
}  // namespace gpupool::store::testing
