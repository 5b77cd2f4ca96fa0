// Tests for BlockingExecutor: jobs run on its workers, a full queue refuses (reservations count),
// a reserved place is never refused later and is given back when unused, and destruction runs
// what was queued.
#include "server/blocking_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <thread>

namespace gpupool::server {
namespace {

constexpr std::chrono::seconds kLimit{10};

// Occupies the executor's one worker until Release.
class BusyWorker {
 public:
  explicit BusyWorker(BlockingExecutor& e) {
    std::shared_future<void> gate = gate_.get_future().share();
    EXPECT_TRUE(e.Post([this, gate] {
      started_.set_value();
      gate.wait();
    }));
    EXPECT_EQ(started_.get_future().wait_for(kLimit), std::future_status::ready);
  }
  ~BusyWorker() { Release(); }
  void Release() {
    if (!released_) gate_.set_value();
    released_ = true;
  }

 private:
  std::promise<void> gate_;
  std::promise<void> started_;
  bool released_ = false;
};

TEST(BlockingExecutorTest, RunsJobsOnItsWorkersNotOnTheCaller) {
  BlockingExecutor e(2, 8);
  EXPECT_FALSE(e.OnWorker());
  std::promise<std::pair<bool, std::thread::id>> ran;
  ASSERT_TRUE(e.Post([&] { ran.set_value({e.OnWorker(), std::this_thread::get_id()}); }));
  auto future = ran.get_future();
  ASSERT_EQ(future.wait_for(kLimit), std::future_status::ready);
  const auto [on_worker, thread] = future.get();
  EXPECT_TRUE(on_worker);
  EXPECT_NE(thread, std::this_thread::get_id());
}

TEST(BlockingExecutorTest, AFullQueueRefusesInsteadOfGrowing) {
  BlockingExecutor e(1, 2);
  BusyWorker busy(e);
  std::atomic<int> ran = 0;
  EXPECT_TRUE(e.Post([&] { ++ran; }));
  Result<BlockingExecutor::Slot> slot = e.Reserve();  // a reservation takes a place too
  ASSERT_TRUE(slot);
  EXPECT_EQ(e.Queued(), 2u);
  const Status refused = e.Post([&] { ++ran; });
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(refused.error().message,
            "the server's blocking-work queue is full (2 jobs waiting); retry later");
  EXPECT_FALSE(e.Reserve());
  std::promise<void> reserved_ran;
  slot->Run([&] { reserved_ran.set_value(); });  // never refused: its place was kept
  busy.Release();
  EXPECT_EQ(reserved_ran.get_future().wait_for(kLimit), std::future_status::ready);
  EXPECT_EQ(ran, 1);
}

TEST(BlockingExecutorTest, AnUnusedReservationGivesItsPlaceBackAndASlotRunsOnce) {
  BlockingExecutor e(1, 1);
  {
    Result<BlockingExecutor::Slot> slot = e.Reserve();
    ASSERT_TRUE(slot);
    const BlockingExecutor::Slot copy = *slot;  // callbacks carry copies
    EXPECT_FALSE(e.Reserve());
  }
  EXPECT_EQ(e.Queued(), 0u) << "the last copy went unused";
  Result<BlockingExecutor::Slot> slot = e.Reserve();
  ASSERT_TRUE(slot);
  std::atomic<int> runs = 0;
  std::promise<void> done;
  slot->Run([&] {
    ++runs;
    done.set_value();
  });
  slot->Run([&] { ++runs; });  // ignored
  ASSERT_EQ(done.get_future().wait_for(kLimit), std::future_status::ready);
  EXPECT_EQ(runs, 1);
}

TEST(BlockingExecutorTest, DestructionRunsWhatWasQueuedAndWhatWasReserved) {
  std::atomic<int> ran = 0;
  std::thread late;
  {
    BlockingExecutor e(1, 8);
    auto busy = std::make_unique<BusyWorker>(e);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(e.Post([&] { ++ran; }));
    Result<BlockingExecutor::Slot> slot = e.Reserve();
    ASSERT_TRUE(slot);
    // The reserved job is handed over from another thread (as a store callback would), after
    // the worker is free again.
    late = std::thread([slot = *slot, &ran, b = std::move(busy)]() mutable {
      b->Release();
      slot.Run([&] { ++ran; });
    });
    slot = MakeError(ErrorCode::kInternal, "dropped");  // only the thread's copy remains
  }
  late.join();
  EXPECT_EQ(ran, 4);
}

}  // namespace
}  // namespace gpupool::server
