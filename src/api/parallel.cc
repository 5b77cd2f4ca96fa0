// ForEachParallel (api/parallel.h).
#include "api/parallel.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace gpupool::api {

Status ForEachParallel(Client& client, size_t n, int parallel,
                       const std::function<Status(Client&, size_t)>& work,
                       const std::function<bool()>& cancelled) {
  const size_t threads = std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(parallel), n));
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status first;
  auto run = [&](Client& c) {
    while (true) {
      {
        std::lock_guard lock(mu);
        if (!first) return;
      }
      const size_t i = next.fetch_add(1);
      if (i >= n) return;
      Status s = cancelled && cancelled() ? Status(MakeError(ErrorCode::kUnavailable, "cancelled"))
                                          : work(c, i);
      if (!s) {
        std::lock_guard lock(mu);
        if (first) first = s;
        return;
      }
    }
  };
  std::vector<std::unique_ptr<Client>> siblings;
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) {
    siblings.push_back(client.Sibling());
    pool.emplace_back([&, c = siblings.back().get()] { run(*c); });
  }
  run(client);
  for (std::thread& t : pool) t.join();
  return first;
}

}  // namespace gpupool::api
