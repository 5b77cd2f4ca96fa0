// Readers for the Alibaba cluster-trace-gpu-v2023 files (the FGD paper's "openb" trace): node list,
// pod list and the exact arrival orders of the FGD experiments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/node.h"
#include "core/result.h"
#include "core/task.h"

namespace gpupool::sim {

struct TracePod {
  std::string name;
  TaskRequest request;
  int64_t creation_s = -1;   // seconds from trace start; -1 when the file has no times
  int64_t deletion_s = -1;
  int64_t scheduled_s = -1;
  // Scheduling priority (0..1000) for the replay: the explicit `priority` column when the file
  // has one, else derived from `qos` (see QosPriority). Kept out of `request` so that protocols
  // without priorities (the FGD experiment) see exactly the trace's requests.
  int priority = 0;
};

// Priority of a trace QoS class. Higher wins and may preempt strictly lower:
//   LS (latency-sensitive service) 200 = Guaranteed (requests == limits) 200
//   > Burstable 100 > BE (best effort) 0; an empty class is 0.
// Error for any other value (the openb CSVs hold only these four).
Result<int> QosPriority(const std::string& qos);

// `sn,cpu_milli,memory_mib,gpu,model` rows; GPU model names are canonicalised.
Result<std::vector<Node>> LoadNodesCsv(const std::string& path);

// `name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,pod_phase,creation_time,
// deletion_time,scheduled_time][,priority]` rows (columns found by name). A pod with num_gpu = 1
// and gpu_milli < 1000 is a share of one GPU; num_gpu = k with gpu_milli 1000 (values above are
// clamped) asks for k whole GPUs.
Result<std::vector<TracePod>> LoadPodsCsv(const std::string& path);

// One pod name per line; `<name>-tuned-<i>` is a copy of pod `<name>`. Returns indexes into
// `pods` in arrival order.
Result<std::vector<int>> LoadArrivals(const std::string& path, const std::vector<TracePod>& pods);

}  // namespace gpupool::sim
