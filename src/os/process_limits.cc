// Implementation of process_limits.h.
#include "os/process_limits.h"

#include <sys/resource.h>

#include <algorithm>

namespace gpupool::os {

uint64_t RaiseOpenFileLimit() {
  constexpr rlim_t kMost = rlim_t{1} << 20;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  const rlim_t wanted = std::min(limit.rlim_max, kMost);
  if (limit.rlim_cur < wanted) {
    rlimit raised = limit;
    raised.rlim_cur = wanted;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return static_cast<uint64_t>(limit.rlim_cur);
}

}  // namespace gpupool::os
