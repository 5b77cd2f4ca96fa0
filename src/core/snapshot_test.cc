#include "core/snapshot.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(SnapshotId, RoundTripsAndRefusesOtherText) {
  EXPECT_EQ(SnapshotId(12), "s-12");
  EXPECT_EQ(SnapshotSeq("s-12"), 12);
  for (const char* bad :
       {"", "s-", "s-0", "s-012", "t-12", "s-1x", "s--1", "s-99999999999999999999"}) {
    EXPECT_EQ(SnapshotSeq(bad), std::nullopt) << bad;
  }
}

TEST(SnapshotNames, RoundTrip) {
  for (SnapshotTrigger t :
       {SnapshotTrigger::kManual, SnapshotTrigger::kPeriodic, SnapshotTrigger::kStop,
        SnapshotTrigger::kPreempt, SnapshotTrigger::kDrain, SnapshotTrigger::kMove}) {
    EXPECT_EQ(ParseSnapshotTrigger(SnapshotTriggerName(t)), t);
  }
  EXPECT_EQ(ParseSnapshotTrigger("Manual"), std::nullopt);
  EXPECT_TRUE(IsLastSnapshotTrigger(SnapshotTrigger::kDrain));
  EXPECT_TRUE(IsLastSnapshotTrigger(SnapshotTrigger::kMove));
  EXPECT_FALSE(IsLastSnapshotTrigger(SnapshotTrigger::kPeriodic));
  EXPECT_EQ(ParseConsistency("application"), Consistency::kApplication);
  EXPECT_EQ(ConsistencyName(Consistency::kCrash), "crash");
}

}  // namespace
}  // namespace gpupool
