// Work over many requests on several connections at once: the chunk transfers of snapshots
// (agent/snapshotter.cc) and of dataset pushes (cli/dataset_push.cc).
#pragma once

#include <cstddef>
#include <functional>

#include "api/client.h"
#include "core/result.h"

namespace gpupool::api {

// Runs `work(i)` for i in [0, n) on `parallel` threads, each with its own client (a sibling of
// `client`, the first the client itself). The first error stops the others at their next item;
// `cancelled` (when set) is asked before each item and stops the work as kUnavailable.
Status ForEachParallel(Client& client, size_t n, int parallel,
                       const std::function<Status(Client&, size_t)>& work,
                       const std::function<bool()>& cancelled = {});

}  // namespace gpupool::api
