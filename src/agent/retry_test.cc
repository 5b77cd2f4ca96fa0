// Unit tests of the agent's retry rules: the backoff schedule, which failures are retried and
// the problem log that speaks once per kind of problem.
#include "agent/retry.h"

#include <gtest/gtest.h>

#include <vector>

namespace gpupool::agent {
namespace {

using std::chrono::milliseconds;

TEST(Backoff, DoublesFromTheFirstWaitUpToTheCapAndStartsOverAfterReset) {
  Backoff b(milliseconds(100), milliseconds(700));
  EXPECT_EQ(b.Next(), milliseconds(100));
  EXPECT_EQ(b.Next(), milliseconds(200));
  EXPECT_EQ(b.Next(), milliseconds(400));
  EXPECT_EQ(b.Next(), milliseconds(700));
  EXPECT_EQ(b.Next(), milliseconds(700));
  b.Reset();
  EXPECT_EQ(b.Next(), milliseconds(100));
  Backoff standard;
  EXPECT_EQ(standard.Next(), Backoff::kFirst);
}

// An error of `code`, with when to retry when given.
Error Failure(ErrorCode code, int64_t retry_after_ms = 0) {
  Error e;
  e.code = code;
  e.retry_after_ms = retry_after_ms;
  return e;
}

TEST(RetryLater, RepeatsTransportAndServerFailuresAndWhatTheServerSaidToRetry) {
  EXPECT_TRUE(RetryLater(Failure(ErrorCode::kUnavailable)));
  EXPECT_TRUE(RetryLater(Failure(ErrorCode::kInternal)));
  EXPECT_TRUE(RetryLater(Failure(ErrorCode::kInsufficientStorage)))
      << "the server's disk fills, then frees";
  EXPECT_FALSE(RetryLater(Failure(ErrorCode::kFailedPrecondition)));
  EXPECT_FALSE(RetryLater(Failure(ErrorCode::kNotFound)));
  EXPECT_FALSE(RetryLater(Failure(ErrorCode::kInvalidArgument)));
  EXPECT_FALSE(RetryLater(Failure(ErrorCode::kResourceExhausted)))
      << "a quota does not pass by waiting";
  EXPECT_TRUE(RetryLater(Failure(ErrorCode::kResourceExhausted, 1000)))
      << "a rate does: the server said when";
  EXPECT_EQ(Refusal(Error{ErrorCode::kNotFound, "no task t-1"}), "HTTP 404: no task t-1");
}

TEST(ProblemLog, LogsAProblemOnceUntilItsKindChangesOrItIsOver) {
  std::vector<std::string> lines;
  ProblemLog log([&](const std::string& l) { lines.push_back(l); });
  log.Recover("fine again");  // nothing was wrong
  log.Fail("transport", "down 1");
  log.Fail("transport", "down 2");
  log.Fail("refused", "refused");
  log.Recover("fine again");
  log.Recover("fine again");
  EXPECT_EQ(lines, (std::vector<std::string>{"down 1", "refused", "fine again"}));
}

}  // namespace
}  // namespace gpupool::agent
