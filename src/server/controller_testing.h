// What the Controller's tests share: a hand-driven clock, a fixture that opens a Controller over a
// MemoryStore with the bootstrap admin (and reopens it, as after a restart), helpers that take the
// answer out of the asynchronous calls (on a MemoryStore they answer before returning), and a
// project member.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "server/controller.h"
#include "store/memory_store.h"

namespace gpupool::server::testing {

class FakeClock : public Clock {
 public:
  int64_t NowMs() override { return now_ms; }
  int64_t now_ms = 1'700'000'000'000;
};

// A Controller with `options_` over a MemoryStore whose data outlives it, and the admin its
// bootstrap made. Fixtures set options_ before SetUp (in their constructor) or before Reopen.
class ControllerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = store::MemoryStore::NewData();
    Reopen();
    if (HasFatalFailure()) return;
    auto key = c_->Bootstrap();
    ASSERT_TRUE(key && key->has_value());
    admin_ = c_->LookupKey((*key)->key.access_key)->caller;
  }

  // A fresh controller over the same durable data, as after a restart (or kill -9: the memory
  // store holds exactly what was acknowledged).
  void Reopen() {
    c_.reset();
    store_ = std::make_unique<store::MemoryStore>(data_);
    auto c = Controller::Open(*store_, clock_, SecretBox::FromKey(key_), options_);
    ASSERT_TRUE(c) << c.error().message;
    c_ = std::move(*c);
  }

  ControllerOptions options_;
  std::array<uint8_t, SecretBox::kKeyBytes> key_{1, 2, 3};
  std::shared_ptr<store::MemoryStore::Data> data_;
  FakeClock clock_;
  std::unique_ptr<store::MemoryStore> store_;
  std::unique_ptr<Controller> c_;  // after store_ and clock_: destroyed before them
  Caller admin_;
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
