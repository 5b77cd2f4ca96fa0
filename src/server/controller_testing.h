// What the Controller's tests share: a hand-driven clock, helpers that take the answer out of
// the asynchronous calls (on a MemoryStore they answer before returning), and a project member.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
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

// Makes `user` a member of `project` (created when missing) with an access key; its caller.
inline Caller MakeMember(Controller& c, const Caller& admin, const std::string& user,
                         const std::string& project) {
  if (!c.GetProject(admin, project)) {
    Project p;
    p.id = project;
    EXPECT_TRUE(Await<Project>([&](Done<Project> d) { c.CreateProject(admin, p, d); }));
  }
  User u;
  u.id = user;
  u.projects = {project};
  EXPECT_TRUE(Await<User>([&](Done<User> d) { c.CreateUser(admin, u, d); }));
  auto key =
      Await<NewAccessKey>([&](Done<NewAccessKey> d) { c.CreateAccessKey(admin, user, "test", d); });
  return c.LookupKey(key->key.access_key)->caller;
}

}  // namespace gpupool::server::testing
