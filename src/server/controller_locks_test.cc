// The Controller's lock split (controller.h, "Locks"): a signed request's key lookup and nonce
// check do not wait for the state lock (mu_) that scheduling passes and writes hold; a key
// revoked is refused by the next lookup; a durable nonce is still queued for the store before the
// request's own write; a nonce replayed from many threads at once is taken by exactly one.
#include <gtest/gtest.h>

#include <atomic>
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

TEST_F(ControllerLocksTest, KeyLookupDoesNotWaitForTheStateLock) {
  std::unique_lock state = LockState();
  auto grant = std::async(std::launch::async, [&] { return c_->LookupKey(admin_key_); });
  const bool answered = grant.wait_for(kAnswerLimit) == std::future_status::ready;
  state.unlock();
  ASSERT_TRUE(answered) << "LookupKey waited for mu_";
  const Result<KeyGrant> got = grant.get();
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->secret, admin_secret_);
  EXPECT_EQ(got->caller.user_id, admin_.user_id);
}

TEST_F(ControllerLocksTest, ARevokedKeyIsRefusedByTheNextLookup) {
  const Caller alice = testing::MakeMember(*c_, admin_, "alice", "vision");
  ASSERT_TRUE(c_->LookupKey(alice.access_key));
  // Revoked in memory at once (the answer waits for the store; the lookup must not).
  store_->Hold();
  auto answered = std::make_shared<std::atomic<bool>>(false);  // outlives an early return
  c_->RevokeAccessKey(admin_, alice.access_key,
                      [answered](Result<AccessKey>) { *answered = true; });
  const Result<KeyGrant> after = c_->LookupKey(alice.access_key);
  ASSERT_FALSE(after);
  EXPECT_EQ(after.error().code, ErrorCode::kUnauthenticated);
  EXPECT_NE(after.error().message.find("revoked"), std::string::npos) << after.error().message;
  EXPECT_FALSE(*answered) << "held by the store";
  store_->Release();
}

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
  std::unique_lock state = LockState();  // the nonce is queued while mu_ is held elsewhere
  auto consumed = std::async(std::launch::async, [&] {
    return c_->ConsumeNonce(admin_.access_key, "n-1", clock_.now_ms, /*durable=*/true);
  });
  const bool answered = consumed.wait_for(kAnswerLimit) == std::future_status::ready;
  state.unlock();  // before any assertion: the future's destructor waits for the call
  ASSERT_TRUE(answered) << "ConsumeNonce waited for mu_";
  ASSERT_TRUE(consumed.get());
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
