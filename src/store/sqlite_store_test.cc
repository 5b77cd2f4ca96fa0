// Tests for store/sqlite_store: the Store conformance suite on a fresh database per test, plus
// what only SQLite has: schema migrations (recorded once, newer schemas refused), WAL mode, group
// commit, a savepoint per batch, errors for unusable or corrupt files, and a full disk (a real
// tmpfs) that a write waits out.
#include "store/sqlite_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "store/migrations.h"
#include "store/store_conformance.h"
#include "store/temp_dir.h"

namespace gpupool::store::testing {
namespace {

// A database file in its own temporary directory; every Open opens that file.
class SqliteFactory : public StoreFactory {
 public:
  std::unique_ptr<Store> Open() override {
    if (!dir_.ok()) {
      ADD_FAILURE() << "cannot create a temporary directory";
      return nullptr;
    }
    Result<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(dir_.File("gpupool.db"));
    if (!store) {
      ADD_FAILURE() << store.error().message;
      return nullptr;
    }
    return std::move(*store);
  }

 private:
  TempDir dir_;
};

INSTANTIATE_TEST_SUITE_P(Sqlite, StoreConformanceTest,
                         ::testing::Values(StoreParam{
                             "Sqlite", [] { return std::make_unique<SqliteFactory>(); }}));

// A plain connection to the same file, as an operator's sqlite3 shell would have.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    sqlite3_busy_timeout(db_, 10'000);
  }
  ~RawDb() { sqlite3_close(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  void Exec(const std::string& sql) {
    char* error = nullptr;
    ASSERT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << sql << ": " << (error != nullptr ? error : "");
    sqlite3_free(error);
  }
  // The rows of `sql`, each as its columns' text joined by '|'.
  std::vector<std::string> Rows(const std::string& sql) {
    std::vector<std::string> rows;
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      std::string row;
      for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
        if (c > 0) row += "|";
        const unsigned char* text = sqlite3_column_text(stmt, c);
        row += text != nullptr ? reinterpret_cast<const char*>(text) : "NULL";
      }
      rows.push_back(row);
    }
    sqlite3_finalize(stmt);
    return rows;
  }

 private:
  sqlite3* db_ = nullptr;
};

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dir_.ok()); }

  std::unique_ptr<SqliteStore> OpenOk() {
    Result<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path_);
    EXPECT_TRUE(store) << store.error().message;
    return store ? std::move(*store) : nullptr;
  }

  TempDir dir_;
  const std::string path_ = dir_.File("gpupool.db");
};

TEST(SqliteMigrations, EmbeddedMigrationsAreNumberedWithoutGaps) {
  std::span<const Migration> migrations = EmbeddedMigrations();
  ASSERT_FALSE(migrations.empty());
  for (size_t i = 0; i < migrations.size(); ++i) {
    EXPECT_EQ(migrations[i].version, static_cast<int>(i) + 1);
    EXPECT_TRUE(migrations[i].name.ends_with(".sql")) << migrations[i].name;
    EXPECT_NE(migrations[i].sql.find(';'), std::string_view::npos)
        << migrations[i].name << " has no statement";
  }
  EXPECT_EQ(migrations[0].name, "0001_initial.sql");
  EXPECT_NE(migrations[0].sql.find("CREATE TABLE"), std::string_view::npos);
}

TEST_F(SqliteStoreTest, MigrationsAreRecordedOnceAndNotReappliedOnReopen) {
  OpenOk().reset();
  std::vector<std::string> first;
  {
    RawDb raw(path_);
    first = raw.Rows("SELECT version, applied_ms FROM schema_migrations ORDER BY version");
  }
  ASSERT_EQ(first.size(), EmbeddedMigrations().size());
  EXPECT_TRUE(first[0].starts_with("1|")) << first[0];

  std::unique_ptr<SqliteStore> store = OpenOk();
  ASSERT_NE(store, nullptr);
  WriteBatch b;
  b.projects = {SampleProject("p-1")};
  ASSERT_TRUE(store->WriteSync(std::move(b)));
  store.reset();

  // Reapplying 0001 would fail (its tables exist) or wipe data; neither happened.
  store = OpenOk();
  ASSERT_NE(store, nullptr);
  RawDb raw(path_);
  EXPECT_EQ(raw.Rows("SELECT version, applied_ms FROM schema_migrations ORDER BY version"), first);
  Result<Snapshot> snapshot = store->Load({});
  ASSERT_TRUE(snapshot);
  EXPECT_EQ(snapshot->projects, std::vector<Project>{SampleProject("p-1")});
}

TEST_F(SqliteStoreTest, DatabaseWithANewerSchemaIsRefused) {
  OpenOk().reset();
  const int newer = EmbeddedMigrations().back().version + 1;
  {
    RawDb raw(path_);
    raw.Exec("INSERT INTO schema_migrations (version, applied_ms) VALUES (" +
             std::to_string(newer) + ", 1)");
  }
  Result<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path_);
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(store.error().message.find("schema version " + std::to_string(newer)),
            std::string::npos)
      << store.error().message;
  EXPECT_NE(store.error().message.find(path_), std::string::npos) << store.error().message;
}

TEST_F(SqliteStoreTest, AVersionOneDatabaseUpgradesKeepingItsKeys) {
  {
    // The schema of a release that knew only 0001, with a user's key in it.
    RawDb raw(path_);
    raw.Exec(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
        "applied_ms INTEGER NOT NULL) STRICT");
    raw.Exec(std::string(EmbeddedMigrations()[0].sql));
    raw.Exec("INSERT INTO schema_migrations (version, applied_ms) VALUES (1, 1)");
    raw.Exec(
        "INSERT INTO access_keys (access_key, user_id, sealed_secret, description, "
        "created_ms, revoked_ms) VALUES ('AK1', 'u-1', X'00ff', 'laptop', 5, 0)");
  }
  std::unique_ptr<SqliteStore> store = OpenOk();
  ASSERT_NE(store, nullptr);
  Result<Snapshot> snapshot = store->Load({});
  ASSERT_TRUE(snapshot) << snapshot.error().message;
  const AccessKey old{.access_key = "AK1",
                      .user_id = "u-1",
                      .sealed_secret = std::string("\0\xff", 2),
                      .description = "laptop",
                      .created_ms = 5};
  EXPECT_EQ(snapshot->access_keys, std::vector<AccessKey>{old});  // a user's key: no node
  EXPECT_TRUE(snapshot->join_tokens.empty());

  WriteBatch b;
  b.join_tokens = {SampleJoinToken("JT-1")};
  b.access_keys = {SampleAgentKey("AK2", "n-1", "JT-1")};
  ASSERT_TRUE(store->WriteSync(std::move(b)));
  snapshot = store->Load({});
  ASSERT_TRUE(snapshot);
  EXPECT_EQ(snapshot->join_tokens, std::vector<JoinToken>{SampleJoinToken("JT-1")});
  EXPECT_EQ(snapshot->access_keys,
            (std::vector<AccessKey>{old, SampleAgentKey("AK2", "n-1", "JT-1")}));
}

TEST_F(SqliteStoreTest, AVersionTwoDatabaseUpgradesKeepingItsTasksNotHeld) {
  {
    // The schema of a release that knew 0001 and 0002, with a pending task in it.
    RawDb raw(path_);
    raw.Exec(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
        "applied_ms INTEGER NOT NULL) STRICT");
    raw.Exec(std::string(EmbeddedMigrations()[0].sql));
    raw.Exec(std::string(EmbeddedMigrations()[1].sql));
    raw.Exec("INSERT INTO schema_migrations (version, applied_ms) VALUES (1, 1), (2, 2)");
    raw.Exec(
        "INSERT INTO tasks (id, seq, project_id, user_id, name, request, image, command, "
        "disk_gib, max_runtime_ms, stop_when, restartable, state, reason, placement, created_ms, "
        "updated_ms, bound_ms, started_ms, finished_ms, billed_until_ms, exit_code, preemptions) "
        "VALUES ('t-1', 1, 'p-1', 'u-1', 'train', '{\"gpu_count\":1}', '', '[\"true\"]', 0, "
        "0, '', 0, 'pending', 'submitted', NULL, 10, 11, 0, 0, 0, 0, 0, 0)");
  }
  std::unique_ptr<SqliteStore> store = OpenOk();
  ASSERT_NE(store, nullptr);
  Result<Snapshot> snapshot = store->Load({});
  ASSERT_TRUE(snapshot) << snapshot.error().message;
  ASSERT_EQ(snapshot->tasks.size(), 1u);
  const Task old = snapshot->tasks[0];  // a copy: the snapshot is loaded again below
  EXPECT_EQ(old.id, "t-1");
  EXPECT_EQ(old.name, "train");
  EXPECT_EQ(old.request.gpu_count, 1);
  EXPECT_EQ(old.command, std::vector<std::string>{"true"});
  EXPECT_EQ(old.state, TaskState::kPending);
  EXPECT_EQ(old.updated_ms, 11);
  EXPECT_FALSE(old.held) << "a task from before holds existed was never held";

  Task held = old;
  held.id = "t-2";
  held.seq = 2;
  held.held = true;
  WriteBatch b;
  b.tasks = {held};
  ASSERT_TRUE(store->WriteSync(std::move(b)));
  snapshot = store->Load({});
  ASSERT_TRUE(snapshot);
  EXPECT_EQ(snapshot->tasks, (std::vector<Task>{old, held}));
  RawDb raw(path_);
  EXPECT_EQ(raw.Rows("SELECT id, held FROM tasks ORDER BY seq"),
            (std::vector<std::string>{"t-1|0", "t-2|1"}));
}

TEST_F(SqliteStoreTest, UsesWriteAheadLogging) {
  std::unique_ptr<SqliteStore> store = OpenOk();
  ASSERT_NE(store, nullptr);
  RawDb raw(path_);
  EXPECT_EQ(raw.Rows("PRAGMA journal_mode"), std::vector<std::string>{"wal"});
}

TEST_F(SqliteStoreTest, OpenReportsAnUnusablePath) {
  Result<std::unique_ptr<SqliteStore>> missing_dir =
      SqliteStore::Open(dir_.File("no/such/dir/gpupool.db"));
  ASSERT_FALSE(missing_dir);
  EXPECT_NE(missing_dir.error().message.find("no/such/dir"), std::string::npos)
      << missing_dir.error().message;

  std::ofstream(path_) << "this is not a database, just some text that is long enough";
  Result<std::unique_ptr<SqliteStore>> not_db = SqliteStore::Open(path_);
  ASSERT_FALSE(not_db);
  EXPECT_NE(not_db.error().message.find(path_), std::string::npos) << not_db.error().message;
}

TEST_F(SqliteStoreTest, CorruptRowsAreReportedByLoad) {
  std::unique_ptr<SqliteStore> store = OpenOk();
  ASSERT_NE(store, nullptr);
  WriteBatch b;
  b.tasks = {SampleTask("t-1", 1)};
  ASSERT_TRUE(store->WriteSync(std::move(b)));
  {
    RawDb raw(path_);
    raw.Exec("UPDATE tasks SET request = '{not json' WHERE id = 't-1'");
  }
  Result<Snapshot> snapshot = store->Load({});
  ASSERT_FALSE(snapshot);
  EXPECT_EQ(snapshot.error().code, ErrorCode::kInternal);
  EXPECT_NE(snapshot.error().message.find("task 't-1'"), std::string::npos)
      << snapshot.error().message;
  {
    RawDb raw(path_);
    raw.Exec("UPDATE tasks SET request = '{}', state = 'dancing' WHERE id = 't-1'");
  }
  snapshot = store->Load({});
  ASSERT_FALSE(snapshot);
  EXPECT_NE(snapshot.error().message.find("'dancing'"), std::string::npos)
      << snapshot.error().message;
}

// Holding the write lock from another connection makes the writer thread wait in BEGIN; the
// batches written meanwhile queue up and the next group takes all of them.
TEST_F(SqliteStoreTest, QueuedBatchesShareOneCommit) {
  std::unique_ptr<SqliteStore> store = OpenOk();
  ASSERT_NE(store, nullptr);
  constexpr size_t kBatches = 100;
  DoneLatch latch;
  {
    RawDb raw(path_);
    raw.Exec("BEGIN IMMEDIATE");
    for (size_t i = 0; i < kBatches; ++i) {
      WriteBatch b;
      b.tasks = {SampleTask("t-" + std::to_string(i), static_cast<int64_t>(i))};
      store->Write(std::move(b), latch.Callback(i));
    }
    raw.Exec("COMMIT");
  }
  for (const auto& [index, status] : latch.Wait(kBatches)) {
    EXPECT_TRUE(status) << "batch " << index << ": " << status.error().message;
  }
  const SqliteStore::Stats stats = store->GetStats();
  EXPECT_EQ(stats.batches, static_cast<int64_t>(kBatches));
  // The first batch may have been taken alone before the others were queued.
  EXPECT_LE(stats.commits, 2);
  EXPECT_EQ(stats.failed_batches, 0);
}

// A batch that fails halfway (a trigger refuses its ledger entry after its project was written)
// is rolled back to its savepoint alone; the batches before and after it in the same transaction
// commit.
TEST_F(SqliteStoreTest, ABatchFailingMidwayIsRolledBackAloneWithinItsGroup) {
  std::unique_ptr<SqliteStore> store = OpenOk();
  ASSERT_NE(store, nullptr);
  DoneLatch latch;
  {
    RawDb raw(path_);
    raw.Exec(
        "CREATE TRIGGER refuse_boom BEFORE INSERT ON ledger WHEN NEW.detail = 'boom' "
        "BEGIN SELECT RAISE(ABORT, 'boom refused'); END");
    raw.Exec("BEGIN IMMEDIATE");
    for (size_t i = 0; i < 5; ++i) {
      WriteBatch b;
      b.projects = {SampleProject("p-" + std::to_string(i))};
      LedgerEntry credit = SampleLedger("c-" + std::to_string(i), "p-" + std::to_string(i),
                                        LedgerKind::kCredit, 100, 1);
      if (i == 2 || i == 3) credit.detail = "boom";
      b.ledger = {credit};
      store->Write(std::move(b), latch.Callback(i));
    }
    raw.Exec("COMMIT");
  }
  std::map<size_t, Status> results = latch.Wait(5);
  for (size_t i : {0u, 1u, 4u}) EXPECT_TRUE(results[i]) << results[i].error().message;
  for (size_t i : {2u, 3u}) {
    ASSERT_FALSE(results[i]);
    EXPECT_EQ(results[i].error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(results[i].error().message.find("ledger entry 'c-" + std::to_string(i) + "'"),
              std::string::npos)
        << results[i].error().message;
    EXPECT_NE(results[i].error().message.find("boom refused"), std::string::npos)
        << results[i].error().message;
  }
  Result<Snapshot> snapshot = store->Load({});
  ASSERT_TRUE(snapshot);
  std::vector<std::string> ids;
  for (const Project& p : snapshot->projects) ids.push_back(p.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"p-0", "p-1", "p-4"}));
  EXPECT_EQ(snapshot->credits_micros,
            (std::map<std::string, int64_t>{{"p-0", 100}, {"p-1", 100}, {"p-4", 100}}));
  const SqliteStore::Stats stats = store->GetStats();
  EXPECT_EQ(stats.batches, 3);
  EXPECT_EQ(stats.failed_batches, 2);
  EXPECT_LE(stats.commits, 2);
}

TEST_F(SqliteStoreTest, DoneMayWriteAgainFromTheWriterThread) {
  std::unique_ptr<SqliteStore> store = OpenOk();
  ASSERT_NE(store, nullptr);
  DoneLatch latch;
  WriteBatch first;
  first.settings = {{"step", "1"}};
  store->Write(std::move(first), [&](Status s) {
    EXPECT_TRUE(s);
    WriteBatch second;
    second.settings = {{"step", "2"}};
    store->Write(std::move(second), latch.Callback(0));
  });
  ASSERT_TRUE(latch.Wait(1)[0]);
  Result<Snapshot> snapshot = store->Load({});
  ASSERT_TRUE(snapshot);
  EXPECT_EQ(snapshot->settings["step"], "2");
}

// A full disk, for real: the database on a small tmpfs filled by another file. A write then
// waits, unapplied and in order, instead of failing (the server used to exit 70 on it), and
// commits once space is freed; a store closed while the disk is still full answers
// kInsufficientStorage. Mounting needs root: elsewhere the test skips, saying so.
class SqliteFullDiskTest : public SqliteStoreTest {
 protected:
  void SetUp() override {
    SqliteStoreTest::SetUp();
    if (::mount("tmpfs", dir_.path().c_str(), "tmpfs", 0, "size=4m") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs at " << dir_.path() << " (" << std::strerror(errno)
                   << "; needs root): the full-disk test did not run";
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) ::umount2(dir_.path().c_str(), MNT_DETACH);
  }
  // Writes a file until the file system is full.
  void Fill() {
    const int fd = ::open(filler_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    const std::string block(64 << 10, 'f');
    while (::write(fd, block.data(), block.size()) > 0) {
    }
    ::close(fd);
  }
  // Many tasks: more than the write-ahead log has room for.
  static WriteBatch Big(const std::string& prefix) {
    WriteBatch b;
    for (int i = 0; i < 3000; ++i) b.tasks.push_back(SampleTask(prefix + std::to_string(i), i));
    return b;
  }
  static bool Eventually(const std::function<bool()>& done) {
    for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
         std::chrono::steady_clock::now() < deadline;
         std::this_thread::sleep_for(std::chrono::milliseconds(10))) {
      if (done()) return true;
    }
    return done();
  }

  bool mounted_ = false;
  const std::string filler_ = dir_.File("filler");
};

TEST_F(SqliteFullDiskTest, AWriteWaitsForSpaceInOrderAndCommitsOnceItIsFreed) {
  std::unique_ptr<SqliteStore> store = OpenOk();
  ASSERT_NE(store, nullptr);
  WriteBatch small;
  small.projects = {SampleProject("p-before")};
  ASSERT_TRUE(store->WriteSync(std::move(small)));
  Fill();

  DoneLatch latch;
  store->Write(Big("a-"), latch.Callback(0));
  WriteBatch after;  // queued behind the big one: it must not commit before it
  after.projects = {SampleProject("p-after")};
  store->Write(std::move(after), latch.Callback(1));
  ASSERT_TRUE(Eventually([&] { return store->GetStats().full_disk_retries >= 2; }))
      << "the writer never met the full disk";
  Result<std::optional<Task>> none = store->ReadTask("a-0");
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_FALSE(none->has_value()) << "nothing of the waiting group is applied";
  Result<Snapshot> waiting = store->Load({});
  ASSERT_TRUE(waiting);
  EXPECT_EQ(waiting->projects.size(), 1u) << "the batch behind it waits too";

  std::filesystem::remove(filler_);
  std::map<size_t, Status> results = latch.Wait(2);
  EXPECT_TRUE(results[0]) << results[0].error().message;
  EXPECT_TRUE(results[1]) << results[1].error().message;
  Result<std::optional<Task>> last = store->ReadTask("a-2999");
  ASSERT_TRUE(last) << last.error().message;
  EXPECT_TRUE(last->has_value());
  EXPECT_EQ(store->GetStats().failed_batches, 0);
}

TEST_F(SqliteFullDiskTest, AStoreClosedWhileTheDiskIsFullAnswersInsufficientStorage) {
  std::unique_ptr<SqliteStore> store = OpenOk();
  ASSERT_NE(store, nullptr);
  Fill();
  DoneLatch latch;
  store->Write(Big("b-"), latch.Callback(0));
  ASSERT_TRUE(Eventually([&] { return store->GetStats().full_disk_retries >= 1; }));
  store->Close();
  std::map<size_t, Status> results = latch.Wait(1);
  ASSERT_FALSE(results[0]);
  EXPECT_EQ(results[0].error().code, ErrorCode::kInsufficientStorage);
  EXPECT_NE(results[0].error().message.find("full"), std::string::npos)
      << results[0].error().message;
}

}  // namespace
}  // namespace gpupool::store::testing
