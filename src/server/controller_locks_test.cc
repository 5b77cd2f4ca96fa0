// The Controller's lock split (controller.h, "Locks"): the nonce cache has its own lock, so a
// signed request's nonce check does not wait for the state lock (mu_) that scheduling passes and
// writes hold; a durable nonce is still queued for the store before the request's own write, and
// a nonce replayed from many threads at once is taken by exactly one of them.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/controller.h"
#include "server/controller_testing.h"

namespace gpupool::server {

using testing::Await;
using testing::kAnswerLimit;

// Befriended by Controller: holds its state lock while other threads call it.
class ControllerLocksTest : public testing::ControllerFixture {
 protected:
  std::unique_lock<std::mutex> LockState() { return std::unique_lock(c_->mu_); }
};

TEST_F(ControllerLocksTest, NonceCheckDoesNotWaitForTheStateLock) {
  std::unique_lock state = LockState();  // as a long scheduling pass would
  auto consumed = std::async(std::launch::async, [&] {
    return c_->ConsumeNonce(admin_.access_key, "n-1", clock_.now_ms, /*durable=*/true);
  });
  const bool answered = consumed.wait_for(kAnswerLimit) == std::future_status::ready;
  state.unlock();  // lets a blocked call finish either way, so that the test ends
  ASSERT_TRUE(answered) << "ConsumeNonce waited for mu_";
  EXPECT_TRUE(consumed.get());
}

TEST_F(ControllerLocksTest, DurableNonceIsQueuedBeforeTheRequestsOwnWrite) {
  store_->Hold();
  {
    std::unique_lock state = LockState();
    auto consumed = std::async(std::launch::async, [&] {
      return c_->ConsumeNonce(admin_.access_key, "n-1", clock_.now_ms, /*durable=*/true);
    });
    ASSERT_EQ(consumed.wait_for(kAnswerLimit), std::future_status::ready);
    ASSERT_TRUE(consumed.get());
  }
  // The request's own write, after its nonce check on the same thread.
  TaskSpec spec;
  spec.request.cpu_milli = 1000;
  spec.request.memory_mib = 1024;
  spec.command = {"true"};
  auto answer = std::make_shared<std::promise<Result<Task>>>();  // outlives an early return
  std::future<Result<Task>> submitted = answer->get_future();
  c_->SubmitTask(admin_, spec, [answer](Result<Task> t) { answer->set_value(std::move(t)); });
  const std::vector<store::WriteBatch> held = store_->AwaitHeld(2);
  ASSERT_EQ(held.size(), 2u);
  ASSERT_EQ(held[0].nonces.size(), 1u) << "the nonce's batch first";
  EXPECT_EQ(held[0].nonces[0].nonce, "n-1");
  ASSERT_EQ(held[1].tasks.size(), 1u) << "then the submission's";
  store_->Release();
  ASSERT_EQ(submitted.wait_for(kAnswerLimit), std::future_status::ready);
  EXPECT_TRUE(submitted.get());
}

TEST_F(ControllerLocksTest, ANonceReplayedFromManyThreadsIsTakenOnce) {
  constexpr int kThreads = 8;
  std::vector<std::future<Status>> tries;
  for (int i = 0; i < kThreads; ++i) {
    tries.push_back(std::async(std::launch::async, [&] {
      return c_->ConsumeNonce(admin_.access_key, "n-same", clock_.now_ms, /*durable=*/true);
    }));
  }
  int taken = 0;
  for (auto& t : tries) {
    const Status s = t.get();
    if (s) {
      ++taken;
    } else {
      EXPECT_EQ(s.error().code, ErrorCode::kUnauthenticated);
    }
  }
  EXPECT_EQ(taken, 1);
}

}  // namespace gpupool::server
