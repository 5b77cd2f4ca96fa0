// What the Controller's tests share: a hand-driven clock, a fixture that opens a Controller over
// an AsyncStore on a MemoryStore with the bootstrap admin (and reopens it, as after a restart or a
// crash), helpers that wait for the answer of the asynchronous calls (the store acknowledges
// writes on its own writer thread, as SqliteStore does in production; reads of tasks that left
// memory come from the blocking-work executor), a project member, and a sink that records the
// live events it is given.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/controller.h"
#include "store/async_store.h"
#include "store/memory_store.h"

namespace gpupool::server::testing {

// Atomic: the test thread moves it while the controller's loop thread reads it.
class FakeClock : public Clock {
 public:
  int64_t NowMs() override { return now_ms; }
  std::atomic<int64_t> now_ms = 1'700'000'000'000;
};

// A Controller with `options_` over an AsyncStore on a MemoryStore whose data outlives it, and
// the admin its bootstrap made. Fixtures set options_ before SetUp (in their constructor) or
// before Reopen. Write callbacks come from the store's writer thread, outside the controller's
// lock; a test holds durable writes back with store_->Hold() (see store/async_store.h).
class ControllerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = store::MemoryStore::NewData();
    Reopen();
    if (HasFatalFailure()) return;
    auto key = c_->Bootstrap();
    ASSERT_TRUE(key && key->has_value());
    admin_key_ = (*key)->key.access_key;
    admin_secret_ = (*key)->secret;
    admin_ = c_->LookupKey(admin_key_)->caller;
  }

  // As the server stops: the loop first, then the store (queued writes commit and are answered
  // while the controller still lives), then the controller.
  void TearDown() override { Shutdown(); }

  void Shutdown() {
    if (c_) c_->Stop();
    if (store_) store_->Close();
    c_.reset();
  }

  // A fresh controller over the same durable data, as after a restart: writes queued or held
  // commit first, as at a graceful stop.
  void Reopen() {
    Shutdown();
    store_ = std::make_unique<store::AsyncStore>(std::make_unique<store::MemoryStore>(data_));
    auto c = Controller::Open(*store_, clock_, SecretBox::FromKey(key_), options_);
    ASSERT_TRUE(c) << c.error().message;
    c_ = std::move(*c);
  }

  // As after kill -9: the writes held back (never durable, never acknowledged) are lost, and the
  // controller restarts from what the store holds.
  void CrashAndReopen() {
    store_->DropHeld();
    Reopen();
  }

  ControllerOptions options_;
  std::array<uint8_t, SecretBox::kKeyBytes> key_{1, 2, 3};
  std::shared_ptr<store::MemoryStore::Data> data_;
  FakeClock clock_;
  std::unique_ptr<store::AsyncStore> store_;
  std::unique_ptr<Controller> c_;  // after store_ and clock_: destroyed before them
  Caller admin_;
  std::string admin_key_;
  std::string admin_secret_;
};

// A ControllerFixture whose server keeps chunks (snapshots, datasets): a ChunkStore in a fresh
// temporary directory that collects unlisted chunks at once (no minimum age), removed with the
// test. Subclasses call its SetUp first.
class ChunkStoreFixture : public ControllerFixture {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::path(::testing::TempDir()) / "chunks.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    chunks_ = std::make_unique<ChunkStore>(dir_ + "/chunks", /*collect_min_age_ms=*/0);
    options_.chunks = chunks_.get();
    ControllerFixture::SetUp();
  }
  void TearDown() override {
    ControllerFixture::TearDown();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string dir_;
  std::unique_ptr<ChunkStore> chunks_;  // outlives the controller: TearDown stops it first
};

// How long the helpers below wait for an answer before they fail the test (a lost callback, not
// a slow one: the store answers in microseconds).
inline constexpr std::chrono::seconds kAnswerLimit{10};

// Calls `call` and waits for the answer it gives its callback (on the store's writer thread for
// a write, at once for a refusal).
template <typename T>
Result<T> Await(const std::function<void(Done<T>)>& call) {
  auto answer = std::make_shared<std::promise<Result<T>>>();
  std::future<Result<T>> future = answer->get_future();
  call([answer](Result<T> r) { answer->set_value(std::move(r)); });
  if (future.wait_for(kAnswerLimit) != std::future_status::ready) {
    ADD_FAILURE() << "the callback did not run";
    return MakeError(ErrorCode::kInternal, "no answer");
  }
  return future.get();
}

inline Status AwaitStatus(const std::function<void(DoneStatus)>& call) {
  auto answer = std::make_shared<std::promise<Status>>();
  std::future<Status> future = answer->get_future();
  call([answer](Status s) { answer->set_value(std::move(s)); });
  if (future.wait_for(kAnswerLimit) != std::future_status::ready) {
    ADD_FAILURE() << "the callback did not run";
    return MakeError(ErrorCode::kInternal, "no answer");
  }
  return future.get();
}

// The reads, waited for (they answer through a callback: a task that left memory comes from the
// store on the blocking-work executor).
inline Result<TaskView> AwaitTask(Controller& c, const Caller& caller, const std::string& id) {
  return Await<TaskView>([&](Done<TaskView> d) { c.GetTask(caller, id, d); });
}
inline Result<TaskPage> AwaitList(Controller& c, const Caller& caller, const TaskFilter& filter) {
  return Await<TaskPage>([&](Done<TaskPage> d) { c.ListTasks(caller, filter, d); });
}
inline Result<TaskMetrics> AwaitMetrics(Controller& c, const Caller& caller, const std::string& id,
                                        int64_t from_ms, int64_t to_ms, Resolution resolution) {
  return Await<TaskMetrics>(
      [&](Done<TaskMetrics> d) { c.GetTaskMetrics(caller, id, from_ms, to_ms, resolution, d); });
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

// An EventSink that records what it is given; tests wait for what they expect. Hold() makes the
// next Deliver wait (on the hub's thread) until Resume(), so that events pile up behind it.
class RecordingSink : public EventSink {
 public:
  bool Deliver(const Event& event) override {
    std::unique_lock lock(mu_);
    events_.push_back(event);
    cv_.notify_all();
    if (hold_) {
      in_deliver_ = true;
      cv_.notify_all();
      cv_.wait(lock, [this] { return !hold_; });
    }
    return true;
  }
  bool KeepAlive() override {
    std::lock_guard lock(mu_);
    ++keep_alives_;
    cv_.notify_all();
    return true;
  }
  void Overflowed(size_t limit) override {
    std::lock_guard lock(mu_);
    overflowed_ = limit;
    cv_.notify_all();
  }

  void Hold() {
    std::lock_guard lock(mu_);
    hold_ = true;
  }
  // Waits until the hub's thread is held in Deliver.
  bool AwaitHeld() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kAnswerLimit, [this] { return in_deliver_; });
  }
  void Resume() {
    std::lock_guard lock(mu_);
    hold_ = false;
    cv_.notify_all();
  }

  // Waits (up to kAnswerLimit) until `done` holds for the events so far; returns them.
  std::vector<Event> WaitFor(const std::function<bool(const std::vector<Event>&)>& done) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, kAnswerLimit, [&] { return done(events_); })) {
      ADD_FAILURE() << "the expected events did not come; got " << events_.size();
    }
    return events_;
  }
  // Waits until `count` keep-alives came.
  bool AwaitKeepAlives(int count) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kAnswerLimit, [&] { return keep_alives_ >= count; });
  }
  // Waits until Overflowed was called; its limit.
  std::optional<size_t> AwaitOverflow() {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, kAnswerLimit, [&] { return overflowed_.has_value(); });
    return overflowed_;
  }
  std::vector<Event> events() {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
  int keep_alives_ = 0;
  std::optional<size_t> overflowed_;
  bool hold_ = false;
  bool in_deliver_ = false;
};

// What a subscriber asks for: node events; a task's (its stdout from `logs_from`).
inline EventInterest WithNodes() {
  EventInterest i;
  i.nodes = true;
  return i;
}
inline EventInterest Watching(std::string task, std::optional<int64_t> logs_from = std::nullopt) {
  EventInterest i;
  i.task = std::move(task);
  i.logs_from = logs_from;
  return i;
}

// The events of type E among `events`.
template <typename E>
std::vector<E> EventsOf(const std::vector<Event>& events) {
  std::vector<E> out;
  for (const Event& e : events) {
    if (const E* x = std::get_if<E>(&e)) out.push_back(*x);
  }
  return out;
}

}  // namespace gpupool::server::testing
