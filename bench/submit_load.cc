// The control-plane benchmarks' shared load and measurement helpers (see submit_load.h).
#include "bench/submit_load.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "api/client.h"

namespace gpupool::bench {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * (v.size() - 1) + 0.5));
  return v[i];
}

int Flag(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

bool HasFlag(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return true;
  }
  return false;
}

SubmitLoad::SubmitLoad(const testing::Credentials& admin, int clients, int64_t limit,
                       Clock::time_point deadline, std::function<std::string(int64_t)> body)
    : body_(std::move(body)), start_(Clock::now()), acks_(static_cast<size_t>(clients)) {
  running_ = clients;
  for (int c = 0; c < clients; ++c) {
    threads_.emplace_back([this, admin, c, limit, deadline] {
      api::Client client(admin.endpoint, admin.access_key, admin.secret_key,
                       {.ca_file = admin.ca_file});
      auto& mine = acks_[static_cast<size_t>(c)];
      for (int64_t i = next_++; i < limit && Clock::now() < deadline; i = next_++) {
        const auto t0 = Clock::now();
        auto r = client.Call("POST", "/v1/tasks", body_(i));
        const auto t1 = Clock::now();
        if (!r || r->status != 201) {
          ++errors_;
          continue;
        }
        ++acknowledged_;
        mine.push_back({std::chrono::duration<double>(t1 - start_).count(),
                        std::chrono::duration<double, std::milli>(t1 - t0).count()});
      }
      --running_;
    });
  }
}

SubmitLoad::~SubmitLoad() { Wait(); }

void SubmitLoad::Wait() {
  if (threads_.empty()) return;
  for (auto& t : threads_) t.join();
  threads_.clear();
  elapsed_s_ = std::chrono::duration<double>(Clock::now() - start_).count();
}

std::vector<SubmitLoad::Ack> SubmitLoad::acks() const {
  std::vector<Ack> all;
  for (const auto& v : acks_) all.insert(all.end(), v.begin(), v.end());
  return all;
}

std::map<std::string, double> ScrapeMetrics(const testing::Credentials& admin) {
  std::map<std::string, double> values;
  api::Client client(admin.endpoint, admin.access_key, admin.secret_key,
                       {.ca_file = admin.ca_file});
  auto r = client.Call("GET", "/metrics");
  if (!r || r->status != 200) return values;
  std::istringstream lines(r->body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    values[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return values;
}

Rss ProcessRss(pid_t pid) {
  Rss rss;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (status >> key) {
    double kib = 0;
    if (key == "VmRSS:" && status >> kib) rss.rss_mib = kib / 1024;
    if (key == "VmHWM:" && status >> kib) rss.peak_mib = kib / 1024;
  }
  return rss;
}

}  // namespace gpupool::bench
