// Synthetic distributed jobs and rack labels for the replay (see job_mix.h).
#include "sim/job_mix.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

namespace gpupool::sim {
namespace {

int64_t Median(std::vector<int64_t> values) {
  std::sort(values.begin(), values.end());
  return NearestRank(values, 50);
}

}  // namespace

Result<JobShape> MedianWholeGpuShape(const std::vector<ReplayTask>& tasks, int gpus) {
  std::vector<int64_t> cpu;
  std::vector<int64_t> memory;
  std::vector<int64_t> runtime;
  for (const ReplayTask& t : tasks) {
    const TaskRequest& r = t.request;
    if (r.gang_size > 1 || r.Form() != GpuForm::kWhole || r.gpu_count != gpus) continue;
    cpu.push_back(r.cpu_milli);
    memory.push_back(r.memory_mib);
    runtime.push_back(t.runtime_s);
  }
  if (cpu.empty()) {
    return InvalidArgument("no task asks " + std::to_string(gpus) +
                           " whole GPUs to take a job member's CPU, memory and runtime from");
  }
  JobShape s;
  s.tasks = static_cast<int64_t>(cpu.size());
  s.cpu_milli = Median(std::move(cpu));
  s.memory_mib = Median(std::move(memory));
  s.runtime_s = Median(std::move(runtime));
  return s;
}

Result<std::vector<ReplayTask>> SyntheticJobs(const std::vector<ReplayTask>& tasks,
                                              const JobMix& mix) {
  if (mix.count < 0 || mix.count > kMaxSyntheticJobs) {
    return InvalidArgument("count must be 0.." + std::to_string(kMaxSyntheticJobs) + ", got " +
                           std::to_string(mix.count));
  }
  if (mix.members < 2 || mix.members > kMaxGangSize) {
    return InvalidArgument("members must be 2.." + std::to_string(kMaxGangSize) + ", got " +
                           std::to_string(mix.members));
  }
  if (mix.gpus < 1 || mix.gpus > kMaxGpusPerTask) {
    return InvalidArgument("gpus must be 1.." + std::to_string(kMaxGpusPerTask) + ", got " +
                           std::to_string(mix.gpus));
  }
  if (mix.runtime_s < 1) {
    return InvalidArgument("runtime_s must be >= 1, got " + std::to_string(mix.runtime_s));
  }
  TaskRequest request;
  request.cpu_milli = mix.cpu_milli;
  request.memory_mib = mix.memory_mib;
  request.gpu_count = mix.gpus;
  request.priority = mix.priority;
  request.gang_id = "job";  // each job's own below
  request.gang_size = mix.members;
  request.members_per_node = mix.members_per_node;
  request.topology_label = mix.topology_label;
  request.topology = mix.topology;
  if (auto ok = Validate(request); !ok) return tl::unexpected(ok.error());

  int64_t first = 0;
  int64_t last = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    first = i == 0 ? tasks[i].arrival_s : std::min(first, tasks[i].arrival_s);
    last = i == 0 ? tasks[i].arrival_s : std::max(last, tasks[i].arrival_s);
  }
  const int64_t span = last - first;
  std::unordered_set<std::string> taken;
  for (const ReplayTask& t : tasks) taken.insert(t.name);
  const size_t width = std::to_string(std::max<int64_t>(mix.count - 1, 0)).size();

  std::vector<ReplayTask> out;
  out.reserve(static_cast<size_t>(mix.count * mix.members));
  for (int64_t k = 0; k < mix.count; ++k) {
    std::string id = std::to_string(k);
    id = "job-" + std::string(width - std::min(width, id.size()), '0') + id;
    const int64_t arrival = first + (2 * k + 1) * span / (2 * mix.count);
    for (int m = 0; m < mix.members; ++m) {
      ReplayTask t;
      t.name = id + "-" + std::to_string(m);
      if (taken.count(t.name)) {
        return InvalidArgument("job member name " + t.name + " is a task's name already");
      }
      t.request = request;
      t.request.gang_id = id;
      t.arrival_s = arrival;
      t.runtime_s = mix.runtime_s;
      out.push_back(std::move(t));
    }
  }
  return out;
}

Status LabelRacks(std::vector<Node>& nodes, int racks, const std::string& label) {
  const int64_t n = static_cast<int64_t>(nodes.size());
  if (racks < 1 || racks > n) {
    return InvalidArgument("racks must be 1.." + std::to_string(n) + " (the node count), got " +
                           std::to_string(racks));
  }
  for (int64_t i = 0; i < n; ++i) {
    nodes[static_cast<size_t>(i)].labels[label] = "r" + std::to_string(i * racks / n);
  }
  return {};
}

}  // namespace gpupool::sim
