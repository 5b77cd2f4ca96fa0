// What the control-plane benchmarks share: keep-alive signed clients submitting tasks to a real
// server until a count or a deadline (each acknowledgement's latency and time kept), a scrape of
// the server's /metrics, the resident memory of a process, percentiles and integer flags.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/server_process.h"

namespace gpupool::bench {

using Clock = std::chrono::steady_clock;

// The p-th percentile (0..100) of `v`, nearest rank; 0 for none.
double Percentile(std::vector<double> v, double p);

// The integer after `name` on the command line, or `fallback`.
int Flag(int argc, char** argv, const char* name, int fallback);
// Whether the flag `name` (taking no value) is among argv.
bool HasFlag(int argc, char** argv, const char* name);

// `clients` threads, each with its own keep-alive signed client, POST /v1/tasks with the body
// `body(i)` for the i-th submission (i counts all clients' submissions from 0) until `limit`
// submissions were made or `deadline` passed. A submission counts when the server answers 201
// (after its write is durable); any other answer is an error.
class SubmitLoad {
 public:
  struct Ack {
    double at_s;  // since the load started
    double latency_ms;
  };

  SubmitLoad(const testing::Credentials& admin, int clients, int64_t limit,
             Clock::time_point deadline, std::function<std::string(int64_t)> body);
  ~SubmitLoad();  // Wait()
  SubmitLoad(const SubmitLoad&) = delete;
  SubmitLoad& operator=(const SubmitLoad&) = delete;

  int64_t acknowledged() const { return acknowledged_.load(); }
  int64_t errors() const { return errors_.load(); }
  bool done() const { return running_.load() == 0; }
  // Joins the clients; then acks() and elapsed_s() are final.
  void Wait();
  // Every acknowledgement, all clients together, in no particular order (after Wait).
  std::vector<Ack> acks() const;
  double elapsed_s() const { return elapsed_s_; }

 private:
  std::function<std::string(int64_t)> body_;
  std::atomic<int64_t> next_{0};
  std::atomic<int64_t> acknowledged_{0};
  std::atomic<int64_t> errors_{0};
  std::atomic<int> running_{0};
  Clock::time_point start_;
  double elapsed_s_ = 0;
  std::vector<std::vector<Ack>> acks_;  // one per client
  std::vector<std::thread> threads_;
};

// The server's /metrics: each sample line's value by its full name with labels
// ("gpupool_scheduler_cycle_seconds_bucket{le=\"0.001\"}"). Empty when the scrape failed.
std::map<std::string, double> ScrapeMetrics(const testing::Credentials& admin);

// VmRSS and VmHWM of process `pid`, in MiB (0 when unreadable).
struct Rss {
  double rss_mib = 0;
  double peak_mib = 0;
};
Rss ProcessRss(pid_t pid);

}  // namespace gpupool::bench
