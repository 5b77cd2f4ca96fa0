// Bounded server memory under a long history, measured (not a test): a real `gpupool server`
// process (SQLite in a temp dir, loopback only, --retain-finished short) with one registered
// node, and --tasks tasks (default 1,000,000) submitted by keep-alive signed clients and finished
// by an agent of the bench's own — one thread long-polls the node's assignments as `gpupool
// agent` does, reporters report each bound task running, then succeeded, all through the typed
// client. At most --window tasks are unfinished at a time. Prints, every --every finished tasks,
// the server's resident memory (VmRSS), the tasks its memory holds (the gpupool_tasks gauge) and
// the rate; then the growth of the RSS after the first row.
//   retention_bench [--tasks 1000000] [--every 100000] [--clients 8] [--reporters 8]
//                   [--window 512] [--retain-s 10]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "api/client.h"
#include "api/resources.h"
#include "bench/submit_load.h"
#include "tests/server_process.h"

namespace gpupool::bench {
namespace {

constexpr const char* kNode = "retention-node";

// What the bench's threads share: the counts, the tasks bound and not yet reported, and the
// waits for room (submitters) and for work (reporters).
struct Shared {
  int64_t total = 0;
  int64_t window = 0;
  std::mutex mu;
  std::condition_variable cv;
  int64_t submitted = 0;
  int64_t finished = 0;
  int64_t errors = 0;
  std::deque<std::pair<std::string, int64_t>> bound;  // (task id, bound_ms) to report
  bool stop = false;
};

void Fail(const char* what, const Error& e) {
  std::fprintf(stderr, "retention_bench: %s: %s\n", what, e.message.c_str());
  std::exit(1);
}

// Submits until `total` were submitted, never more than `window` unfinished.
void Submitter(const testing::Credentials& admin, Shared& s) {
  api::Client client(admin.endpoint, admin.access_key, admin.secret_key);
  proto::TaskSubmit task;
  task.name = "retention";
  task.cpu_milli = 100;
  task.memory_mib = 64;
  task.command = {"true"};
  for (;;) {
    {
      std::unique_lock lock(s.mu);
      s.cv.wait(lock, [&] {
        return s.stop || s.submitted == s.total || s.submitted - s.finished < s.window;
      });
      if (s.stop || s.submitted == s.total) return;
      ++s.submitted;
    }
    if (auto t = client.Tasks().Submit(task); !t) Fail("submit", t.error());
  }
}

// The agent's long-poll: each task bound to the node is handed to the reporters once.
void Watcher(const testing::Credentials& admin, Shared& s) {
  api::Client client(admin.endpoint, admin.access_key, admin.secret_key);
  proto::AssignmentsQuery q;
  q.wait_ms = 1'000;
  std::unordered_set<std::string> handed;  // bound tasks already given to a reporter
  for (;;) {
    {
      std::lock_guard lock(s.mu);
      if (s.stop) return;
    }
    auto a = client.Agent().Watch(kNode, q);
    if (!a) Fail("watch assignments", a.error());
    q.after = a->version;
    std::unordered_set<std::string> now;
    std::vector<std::pair<std::string, int64_t>> fresh;
    for (const proto::Task& t : a->tasks) {
      now.insert(t.id);
      if (!handed.count(t.id)) fresh.emplace_back(t.id, t.bound_ms);
    }
    handed = std::move(now);  // tasks no longer bound drop out
    if (fresh.empty()) continue;
    {
      std::lock_guard lock(s.mu);
      for (auto& f : fresh) s.bound.push_back(std::move(f));
    }
    s.cv.notify_all();
  }
}

// Reports each bound task running, then succeeded.
void Reporter(const testing::Credentials& admin, Shared& s) {
  api::Client client(admin.endpoint, admin.access_key, admin.secret_key);
  for (;;) {
    std::pair<std::string, int64_t> task;
    {
      std::unique_lock lock(s.mu);
      s.cv.wait(lock, [&] { return s.stop || !s.bound.empty(); });
      if (s.stop) return;
      task = std::move(s.bound.front());
      s.bound.pop_front();
    }
    proto::TaskReport r;
    r.bound_ms = task.second;
    r.state = "running";
    bool ok = static_cast<bool>(client.Agent().Report(task.first, r));
    r.state = "succeeded";
    ok = ok && static_cast<bool>(client.Agent().Report(task.first, r));
    {
      std::lock_guard lock(s.mu);
      ++s.finished;
      if (!ok) ++s.errors;
      if (s.finished == s.total) s.stop = true;
    }
    s.cv.notify_all();
  }
}

// The tasks the server's memory holds: Σ of the gpupool_tasks gauge.
double TasksInMemory(const testing::Credentials& admin) {
  double n = 0;
  for (const auto& [name, value] : ScrapeMetrics(admin)) {
    if (name.rfind("gpupool_tasks{", 0) == 0) n += value;
  }
  return n;
}

void Run(int64_t total, int64_t every, int clients, int reporters, int64_t window, int retain_s) {
  const std::string dir = testing::MakeTempDir("gpupool-retention-bench");
  {
    // The node never heartbeats: a day's timeout keeps it ready. Metering hourly: nothing to
    // bill here (no prices), and no ledger growth.
    testing::ServerProcess server(
        dir, {"--node-timeout", "86400", "--meter-interval", "3600", "--retain-finished",
              std::to_string(retain_s) + "s", "--key-rate", "0"});
    testing::Credentials admin = server.ReadCredentials();
    admin.endpoint = server.endpoint();
    {
      api::Client client(admin.endpoint, admin.access_key, admin.secret_key);
      proto::NodeRegistration node;
      node.name = kNode;
      node.cpu_milli = 1'024'000;   // room for 10,240 tasks of 100 milli
      node.memory_mib = 4'194'304;  // 4 TiB
      if (auto r = client.Agent().Register(node); !r) Fail("register the node", r.error());
    }
    const Rss idle = ProcessRss(server.pid());
    std::printf(
        "retention_bench: %lld tasks, %d submitting clients, %d reporters, at most %lld "
        "unfinished, --retain-finished %ds; idle server RSS %.0f MiB\n",
        static_cast<long long>(total), clients, reporters, static_cast<long long>(window), retain_s,
        idle.rss_mib);
    std::printf("%10s %9s %9s %10s %10s\n", "finished", "s", "tasks/s", "RSS MiB", "in memory");
    Shared s;
    s.total = total;
    s.window = window;
    std::vector<std::thread> threads;
    const auto t0 = Clock::now();
    for (int i = 0; i < clients; ++i) threads.emplace_back([&] { Submitter(admin, s); });
    threads.emplace_back([&] { Watcher(admin, s); });
    for (int i = 0; i < reporters; ++i) threads.emplace_back([&] { Reporter(admin, s); });
    std::vector<double> rows;  // RSS at each row
    auto last_t = t0;
    int64_t last_n = 0;
    for (int64_t next = std::min(every, total); next <= total;) {
      {
        std::unique_lock lock(s.mu);
        s.cv.wait(lock, [&] { return s.finished >= next || s.stop; });
        if (s.finished < next) break;
      }
      const auto now = Clock::now();
      const double rss = ProcessRss(server.pid()).rss_mib;
      rows.push_back(rss);
      std::printf(
          "%10lld %9.1f %9.0f %10.0f %10.0f\n", static_cast<long long>(next),
          std::chrono::duration<double>(now - t0).count(),
          static_cast<double>(next - last_n) / std::chrono::duration<double>(now - last_t).count(),
          rss, TasksInMemory(admin));
      std::fflush(stdout);
      last_t = now;
      last_n = next;
      if (next == total) break;
      next = std::min(next + every, total);
    }
    for (auto& t : threads) t.join();
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    const Rss end = ProcessRss(server.pid());
    const double first = rows.empty() ? 0 : rows.front();
    const double highest = rows.empty() ? 0 : *std::max_element(rows.begin(), rows.end());
    std::printf(
        "%lld tasks submitted and finished in %.1f s (%.0f/s, %lld failed reports); "
        "server RSS after the first %lld: %.0f MiB, highest row %.0f MiB (%+.1f %%), at "
        "the end %.0f MiB (peak %.0f MiB)\n",
        static_cast<long long>(total), elapsed, static_cast<double>(total) / elapsed,
        static_cast<long long>(s.errors), static_cast<long long>(std::min(every, total)), first,
        highest, first > 0 ? (highest - first) / first * 100 : 0, end.rss_mib, end.peak_mib);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpupool::bench

int main(int argc, char** argv) {
  using namespace gpupool::bench;
  const int tasks = Flag(argc, argv, "--tasks", 1'000'000);
  const int every = Flag(argc, argv, "--every", 100'000);
  const int clients = Flag(argc, argv, "--clients", 8);
  const int reporters = Flag(argc, argv, "--reporters", 8);
  const int window = Flag(argc, argv, "--window", 512);
  const int retain_s = Flag(argc, argv, "--retain-s", 10);
  if (tasks < 1 || every < 1 || clients < 1 || reporters < 1 || window < 1 || retain_s < 1) {
    std::fprintf(stderr, "retention_bench: every flag must be ≥ 1\n");
    return 2;
  }
  Run(tasks, every, clients, reporters, window, retain_s);
  return 0;
}
