// Tests for core/records: a task's runtime (TaskRuntimeMs), the one definition the API answers
// (GET /v1/tasks/{id}: runtime_ms) and the CLI and SDK show.
#include "core/records.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

Task At(TaskState state, int64_t started_ms, int64_t finished_ms) {
  Task t;
  t.state = state;
  t.started_ms = started_ms;
  t.finished_ms = finished_ms;
  return t;
}

TEST(TaskRuntimeMs, RunningCountsToNowEndedToItsEnd) {
  EXPECT_EQ(TaskRuntimeMs(At(TaskState::kPending, 0, 0), 9'000), 0) << "never started";
  EXPECT_EQ(TaskRuntimeMs(At(TaskState::kRunning, 1'000, 0), 4'500), 3'500);
  EXPECT_EQ(TaskRuntimeMs(At(TaskState::kRunning, 5'000, 0), 4'500), 0) << "a clock behind";
  EXPECT_EQ(TaskRuntimeMs(At(TaskState::kSucceeded, 1'000, 61'000), 999'000), 60'000)
      << "ended: its end, whatever the time now";
  EXPECT_EQ(TaskRuntimeMs(At(TaskState::kStopped, 1'000, 0), 9'000), 0) << "no end recorded";
}

}  // namespace
}  // namespace gpupool
