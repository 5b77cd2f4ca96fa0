// Crash test for store/sqlite_store: a child writes batches from several threads and reports each
// acknowledged one on a pipe; SIGKILL at an arbitrary acknowledgement, reopen, and every
// acknowledged batch must be there once and whole. Several rounds: recovery after recovery.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/sqlite_store.h"
#include "store/temp_dir.h"
#include "store/test_records.h"

namespace gpupool::store {
namespace {

constexpr int kRounds = 5;
constexpr int kWriters = 8;
constexpr char kProject[] = "p-crash";

// The batch with id `id`: a task and its ledger entry (alternately credit and usage).
WriteBatch MakeBatch(const std::string& id, int64_t seq) {
  WriteBatch b;
  b.tasks = {testing::SampleTask(id, seq)};
  const LedgerKind kind = seq % 2 == 0 ? LedgerKind::kCredit : LedgerKind::kUsage;
  b.ledger = {testing::SampleLedger(id, kProject, kind, 1 + seq % 1000, seq, id)};
  return b;
}

void WriteAll(int fd, const std::string& text) {
  // Lines are shorter than PIPE_BUF, so each write is atomic.
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) _exit(3);
}

// The child: writes until killed. Prints "ok <id>" as soon as a batch is acknowledged, or
// "error <message>" and exits.
[[noreturn]] void RunChild(const std::string& path, int round, int fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
  Result<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path);
  if (!store) {
    WriteAll(fd, "error " + store.error().message + "\n");
    _exit(2);
  }
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int64_t i = 0;; ++i) {
        const std::string id =
            "r" + std::to_string(round) + "-w" + std::to_string(w) + "-" + std::to_string(i);
        const int64_t seq = (int64_t{round} * kWriters + w) * 1'000'000 + i;
        std::promise<Status> acked;
        (*store)->Write(MakeBatch(id, seq), [&](Status s) {
          WriteAll(fd, s ? "ok " + id + "\n" : "error " + s.error().message + "\n");
          acked.set_value(std::move(s));
        });
        if (!acked.get_future().get()) _exit(4);
      }
    });
  }
  for (std::thread& t : writers) t.join();  // never: the parent kills the process
  _exit(0);
}

// Reads lines from `fd`; stops after `stop_after` acknowledgements (0: at end of file).
// Returns false when the child reported an error.
bool ReadAcks(int fd, size_t stop_after, std::string& buffer, std::set<std::string>& acked,
              std::string& error) {
  size_t count = 0;
  char chunk[4096];
  for (;;) {
    for (size_t nl; (nl = buffer.find('\n')) != std::string::npos;) {
      const std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      if (line.starts_with("ok ")) {
        EXPECT_TRUE(acked.insert(line.substr(3)).second) << "acknowledged twice: " << line;
        if (++count == stop_after) return true;
      } else {
        error = line;
        return false;
      }
    }
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (stop_after == 0) return true;
      error = "the child exited before " + std::to_string(stop_after) + " acknowledgements";
      return false;
    }
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

TEST(SqliteCrash, AcknowledgedBatchesSurviveSigkillRoundAfterRound) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("crash.db");
  std::set<std::string> acked;

  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(fds[0]);
      RunChild(path, round, fds[1]);
    }
    close(fds[1]);

    // Kill after a different number of acknowledgements each round: mid-group, at an arbitrary
    // point of the writer's work.
    std::string buffer, error;
    const size_t kill_after = 300 + 397 * static_cast<size_t>(round);
    const bool reached = ReadAcks(fds[0], kill_after, buffer, acked, error);
    kill(child, SIGKILL);
    int wstatus = 0;
    ASSERT_EQ(waitpid(child, &wstatus, 0), child);
    ASSERT_TRUE(reached) << error;
    // What the child wrote before dying was acknowledged too.
    ASSERT_TRUE(ReadAcks(fds[0], 0, buffer, acked, error)) << error;
    close(fds[0]);
    EXPECT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL) << wstatus;

    Result<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path);
    ASSERT_TRUE(store) << store.error().message;
    Result<Snapshot> snapshot = (*store)->Load({});
    ASSERT_TRUE(snapshot) << snapshot.error().message;
    LedgerQuery everything;
    everything.project_id = kProject;
    everything.limit = 1'000'000;
    Result<std::vector<LedgerEntry>> ledger = (*store)->Ledger(everything);
    ASSERT_TRUE(ledger) << ledger.error().message;

    std::map<std::string, int> task_count, ledger_count;
    for (const Task& t : snapshot->tasks) ++task_count[t.id];
    int64_t sum = 0;
    for (const LedgerEntry& e : *ledger) {
      ++ledger_count[e.key];
      sum += e.kind == LedgerKind::kCredit ? e.amount_micros : -e.amount_micros;
    }
    for (const std::string& id : acked) {
      EXPECT_EQ(task_count[id], 1) << "acknowledged task " << id;
      EXPECT_EQ(ledger_count[id], 1) << "acknowledged ledger entry " << id;
    }
    // Batches are atomic: a task without its ledger entry (or the reverse) is half a batch.
    EXPECT_EQ(task_count.size(), ledger_count.size());
    for (const auto& [id, n] : task_count) {
      EXPECT_EQ(n, 1) << id;
      EXPECT_EQ(ledger_count.count(id), 1u) << "task " << id << " without its ledger entry";
    }
    EXPECT_GE(task_count.size(), acked.size());
    EXPECT_EQ(snapshot->credits_micros[kProject] - snapshot->usage_micros[kProject], sum);
    std::printf("round %d: %zu batches acknowledged so far, %zu committed\n", round, acked.size(),
                task_count.size());
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace gpupool::store
