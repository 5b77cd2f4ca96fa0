// What the Controller's tests share: a hand-driven clock, and helpers that take the answer out of
// the asynchronous calls (on a MemoryStore they answer before returning).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>

#include "server/controller.h"

namespace gpupool::server::testing {

class FakeClock : public Clock {
 public:
  int64_t NowMs() override { return now_ms; }
  int64_t now_ms = 1'700'000'000'000;
};

// The async calls answer synchronously on a MemoryStore; these take the answer out.
template <typename T>
Result<T> Await(const std::function<void(Done<T>)>& call) {
  std::optional<Result<T>> out;
  call([&](Result<T> r) { out = std::move(r); });
  EXPECT_TRUE(out.has_value()) << "the callback did not run";
  return out.value_or(MakeError(ErrorCode::kInternal, "no answer"));
}

inline Status AwaitStatus(const std::function<void(DoneStatus)>& call) {
  std::optional<Status> out;
  call([&](Status s) { out = std::move(s); });
  EXPECT_TRUE(out.has_value());
  return out.value_or(MakeError(ErrorCode::kInternal, "no answer"));
}

}  // namespace gpupool::server::testing
