// The Ledger: limits per device, allocations kept until freed (and kept when a free fails),
// the virtual-memory API's references and mappings, concurrency, and the state after fork.
#include "cudashim/ledger.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace gpupool::cudashim {
namespace {

TEST(Ledger, ReservesUpToTheLimitAndNotPastIt) {
  Ledger ledger(ParseLimits("1000,50"));
  EXPECT_TRUE(ledger.Reserve(0, 600));
  EXPECT_TRUE(ledger.Reserve(0, 400));
  EXPECT_FALSE(ledger.Reserve(0, 1));
  EXPECT_EQ(ledger.used(0), 1000u);
  EXPECT_TRUE(ledger.Reserve(1, 50));  // devices count apart
  EXPECT_FALSE(ledger.Reserve(1, 1));
  EXPECT_FALSE(ledger.Reserve(2, 1));  // past the list: nothing
  EXPECT_FALSE(ledger.Reserve(-1, 1));
  EXPECT_FALSE(ledger.Reserve(kMaxDevices, 0));
  ledger.Unreserve(0, 400);
  EXPECT_TRUE(ledger.Reserve(0, 400));
  EXPECT_FALSE(ledger.Reserve(0, UINT64_MAX));
}

TEST(Ledger, FreesReturnTheirBytesAndFailedFreesKeepThem) {
  Ledger ledger(ParseLimits("1000"));
  ASSERT_TRUE(ledger.Reserve(0, 300));
  ASSERT_TRUE(ledger.Record(Kind::kDevicePointer, 0xa000, 0, 300));
  // A failed free: back in the table, still counted.
  Ledger::Pending failed = ledger.Take(Kind::kDevicePointer, 0xa000);
  ASSERT_FALSE(failed.node.empty());
  ledger.Finish(std::move(failed), /*freed=*/false);
  EXPECT_EQ(ledger.used(0), 300u);
  // Another kind's key of the same value is another allocation.
  EXPECT_TRUE(ledger.Take(Kind::kArray, 0xa000).node.empty());
  Ledger::Pending freed = ledger.Take(Kind::kDevicePointer, 0xa000);
  ASSERT_FALSE(freed.node.empty());
  ledger.Finish(std::move(freed), /*freed=*/true);
  EXPECT_EQ(ledger.used(0), 0u);
  // An unknown pointer: nothing to do either way.
  ledger.Finish(ledger.Take(Kind::kDevicePointer, 0xb000), true);
  EXPECT_EQ(ledger.used(0), 0u);
}

TEST(Ledger, AKeyTheDriverHandsOutAgainReplacesItsStaleRecord) {
  Ledger ledger(ParseLimits("1000"));
  ASSERT_TRUE(ledger.Reserve(0, 300));
  ASSERT_TRUE(ledger.Record(Kind::kDevicePointer, 0xa000, 0, 300));
  ASSERT_TRUE(ledger.Reserve(0, 200));
  ASSERT_TRUE(ledger.Record(Kind::kDevicePointer, 0xa000, 0, 200));
  EXPECT_EQ(ledger.used(0), 200u);
}

TEST(Ledger, VirtualMemoryCountsUntilReleasedAndUnmapped) {
  Ledger ledger(ParseLimits("1000"));
  ASSERT_TRUE(ledger.Reserve(0, 800));
  ASSERT_TRUE(ledger.RecordHandle(7, 0, 800));
  ASSERT_TRUE(ledger.Mapped(0x10000, 800, 7));
  Ledger::HandleRelease release = ledger.BeginRelease(7);
  ASSERT_NE(release.physical, nullptr);
  ledger.FinishRelease(7, std::move(release), /*released=*/true);
  EXPECT_EQ(ledger.used(0), 800u) << "still mapped";
  // Retained again through its mapping, released again.
  ASSERT_TRUE(ledger.Retained(7, 0x10000 + 100));
  ledger.FinishRelease(7, ledger.BeginRelease(7), true);
  EXPECT_EQ(ledger.used(0), 800u);
  ledger.Unmapped(0x10000, 800);
  EXPECT_EQ(ledger.used(0), 0u);
}

TEST(Ledger, AFailedReleaseKeepsTheHandle) {
  Ledger ledger(ParseLimits("1000"));
  ASSERT_TRUE(ledger.Reserve(0, 500));
  ASSERT_TRUE(ledger.RecordHandle(9, 0, 500));
  ledger.FinishRelease(9, ledger.BeginRelease(9), /*released=*/false);
  EXPECT_EQ(ledger.used(0), 500u);
  ledger.FinishRelease(9, ledger.BeginRelease(9), true);
  EXPECT_EQ(ledger.used(0), 0u);
  // Unknown handles and mappings of them are the driver's business only.
  EXPECT_EQ(ledger.BeginRelease(9).physical, nullptr);
  EXPECT_TRUE(ledger.Mapped(0x20000, 10, 9));
  ledger.Unmapped(0x20000, 10);
  EXPECT_EQ(ledger.used(0), 0u);
}

TEST(Ledger, ExtraReferencesNeedTheirOwnRelease) {
  Ledger ledger(ParseLimits("1000"));
  ASSERT_TRUE(ledger.Reserve(0, 100));
  ASSERT_TRUE(ledger.RecordHandle(3, 0, 100));
  ASSERT_TRUE(ledger.Retained(3, 0));  // a retain of a live handle: by its value
  ledger.FinishRelease(3, ledger.BeginRelease(3), true);
  EXPECT_EQ(ledger.used(0), 100u);
  ledger.FinishRelease(3, ledger.BeginRelease(3), true);
  EXPECT_EQ(ledger.used(0), 0u);
}

TEST(Ledger, ConcurrentAllocationsNeverPassTheLimit) {
  Ledger ledger(ParseLimits("1000"));
  std::atomic<uint64_t> next_key{1};
  std::atomic<bool> exceeded{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        if (!ledger.Reserve(0, 100)) continue;
        if (ledger.used(0) > 1000) exceeded = true;
        const uint64_t key = next_key++;
        ASSERT_TRUE(ledger.Record(Kind::kDevicePointer, key, 0, 100));
        ledger.Finish(ledger.Take(Kind::kDevicePointer, key), true);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(exceeded);
  EXPECT_EQ(ledger.used(0), 0u);
}

TEST(Ledger, AForkedChildStartsEmpty) {
  Ledger ledger(ParseLimits("1000"));
  ASSERT_TRUE(ledger.Reserve(0, 1000));
  ASSERT_TRUE(ledger.Record(Kind::kDevicePointer, 1, 0, 1000));
  ledger.PrepareFork();
  ledger.AfterForkInChild();
  EXPECT_EQ(ledger.used(0), 0u);
  EXPECT_TRUE(ledger.Take(Kind::kDevicePointer, 1).node.empty());
  EXPECT_TRUE(ledger.Reserve(0, 1000));  // and the lock works
}

TEST(Ledger, UnsetLimitsAreNotEnforced) {
  EXPECT_FALSE(Ledger(ParseLimits(nullptr)).enforced());
  EXPECT_TRUE(Ledger(ParseLimits("5")).enforced());
}

}  // namespace
}  // namespace gpupool::cudashim
