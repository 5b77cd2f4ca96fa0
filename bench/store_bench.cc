// store_bench: durable SqliteStore batches per second (one Task upsert + one TaskEvent, what a task
// submission writes) with 1 and 64 writers each waiting for durability, and batches per commit.
// Usage: store_bench [--seconds=S] [--dir=DIR] [writers...]   (defaults: 3 s, $TMPDIR, 1 64)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "store/sqlite_store.h"
#include "store/temp_dir.h"
#include "store/test_records.h"

namespace gpupool::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  int writers = 0;
  int64_t batches = 0;
  int64_t commits = 0;
  double seconds = 0;
};

// The batch a task submission writes.
store::WriteBatch Submission(const std::string& id, int64_t seq, int64_t now_ms) {
  store::WriteBatch b;
  Task t = store::testing::SampleTask(id, seq);
  t.state = TaskState::kPending;
  t.placement.reset();
  t.reason = "queued";
  t.created_ms = t.updated_ms = now_ms;
  t.bound_ms = t.started_ms = t.finished_ms = t.billed_until_ms = 0;
  b.tasks = {std::move(t)};
  b.events = {TaskEvent{.task_id = id,
                        .time_ms = now_ms,
                        .from = TaskState::kPending,
                        .to = TaskState::kPending,
                        .reason = "submitted"}};
  return b;
}

// Runs `writers` threads writing submissions for `seconds` into a fresh database under `dir`.
bool Measure(const std::string& dir, int writers, double seconds, Row& row) {
  const std::string path = dir + "/bench-" + std::to_string(writers) + ".db";
  Result<std::unique_ptr<store::SqliteStore>> opened = store::SqliteStore::Open(path);
  if (!opened) {
    std::fprintf(stderr, "store_bench: %s\n", opened.error().message.c_str());
    return false;
  }
  store::SqliteStore& db = **opened;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(seconds));
  std::vector<int64_t> counts(static_cast<size_t>(writers), 0);
  std::vector<int> failures(static_cast<size_t>(writers), 0);
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      for (int64_t i = 0; Clock::now() < deadline; ++i) {
        const int64_t seq = int64_t{w} * 100'000'000 + i;
        const std::string id = "t-" + std::to_string(seq);
        if (db.WriteSync(Submission(id, seq, 1'700'000'000'000 + i))) {
          ++counts[static_cast<size_t>(w)];
        } else {
          ++failures[static_cast<size_t>(w)];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  row.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const store::SqliteStore::Stats stats = db.GetStats();
  db.Close();
  row.writers = writers;
  for (int64_t c : counts) row.batches += c;
  row.commits = stats.commits;
  for (int f : failures) {
    if (f != 0) {
      std::fprintf(stderr, "store_bench: %d writes failed\n", f);
      return false;
    }
  }
  return stats.batches == row.batches;
}

int Main(int argc, char** argv) {
  double seconds = 3;
  std::string dir;
  std::vector<int> writer_counts;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--seconds=")) {
      seconds = std::atof(argv[i] + 10);
    } else if (arg.starts_with("--dir=")) {
      dir = std::string(arg.substr(6));
    } else if (!arg.empty() && arg[0] != '-' && std::atoi(argv[i]) > 0) {
      writer_counts.push_back(std::atoi(argv[i]));
    } else {
      std::fprintf(stderr, "usage: store_bench [--seconds=S] [--dir=DIR] [writers...]\n");
      return 2;
    }
  }
  if (writer_counts.empty()) writer_counts = {1, 64};
  store::TempDir temp;
  if (dir.empty()) {
    if (!temp.ok()) {
      std::fprintf(stderr, "store_bench: cannot create a temporary directory\n");
      return 1;
    }
    dir = temp.path();
  }

  std::printf(
      "SqliteStore durable writes (WAL, synchronous=FULL), batch = 1 task upsert + 1 task "
      "event, %.1f s per row, database in %s\n",
      seconds, dir.c_str());
  std::printf("%8s %10s %12s %15s %10s\n", "writers", "batches", "batches/s", "batches/commit",
              "commits/s");
  for (int writers : writer_counts) {
    Row row;
    if (!Measure(dir, writers, seconds, row)) return 1;
    const double per_commit =
        row.commits > 0 ? static_cast<double>(row.batches) / static_cast<double>(row.commits) : 0;
    std::printf("%8d %10lld %12.0f %15.1f %10.0f\n", row.writers,
                static_cast<long long>(row.batches), static_cast<double>(row.batches) / row.seconds,
                per_commit, static_cast<double>(row.commits) / row.seconds);
  }
  return 0;
}

}  // namespace
}  // namespace gpupool::bench

int main(int argc, char** argv) { return gpupool::bench::Main(argc, argv); }
