// The node agent's view of its GPUs: GpuProbe discovers them (as core::Gpu, with MIG layouts),
// samples utilisation and memory per GPU and per process, and re-partitions MIG. Implemented by
// NvmlProbe (real GPUs, NVML loaded at run time) and SimulatedProbe (development and tests).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/node.h"
#include "core/result.h"

namespace gpupool::agent {

// GPU memory one process holds.
struct GpuProcess {
  int pid = 0;
  int64_t used_mib = -1;  // -1 when the driver does not say (no permission, WDDM)
  std::string mig_uuid;   // the MIG instance it runs in; empty when on the whole GPU

  friend bool operator==(const GpuProcess&, const GpuProcess&) = default;
};

// One MIG instance at sampling time.
struct MigSample {
  std::string uuid;           // "MIG-…"
  int start = 0;              // start slot: identifies the instance on its GPU
  int util_pct = -1;          // -1: unknown (NVML does not report utilisation per MIG instance)
  int64_t mem_used_mib = -1;  // -1: unknown

  friend bool operator==(const MigSample&, const MigSample&) = default;
};

// One GPU at sampling time. Utilisation and memory are -1 when the driver cannot say (NVML
// reports no utilisation for a GPU in MIG mode, for instance).
struct GpuSample {
  int index = 0;
  std::string uuid;
  int util_pct = -1;  // 0..100
  int64_t mem_used_mib = -1;
  std::vector<GpuProcess> processes;  // sorted by pid
  std::vector<MigSample> mig;         // in MIG mode: one per instance, by start slot

  friend bool operator==(const GpuSample&, const GpuSample&) = default;
};

// Every method is thread-safe: the agent's sampler thread and its runtime thread share a probe.
class GpuProbe {
 public:
  virtual ~GpuProbe() = default;

  // "nvml", "simulated", or "none" (a node without GPUs).
  virtual std::string_view Kind() const = 0;

  // The GPUs in index order: canonical catalog model (an opaque name when unknown), uuid, total
  // memory (mem_free_mib = mem_mib: nothing is reserved by the probe), MIG mode and instances
  // (profile index into the catalog model's profiles, start slot, in_use false). Re-reads the
  // hardware: call again after a re-partition.
  virtual Result<std::vector<Gpu>> Discover() = 0;

  // Utilisation and memory now, one entry per GPU in index order. Cheap: meant for 1 Hz.
  virtual Result<std::vector<GpuSample>> Sample() = 0;

  // The uuid of the MIG instance starting at `start` on GPU `gpu_index` (what a task's
  // CUDA_VISIBLE_DEVICES names). kNotFound when there is none.
  virtual Result<std::string> MigInstanceUuid(int gpu_index, int start) = 0;

  // Simulated GPUs only (real GPUs measure themselves; NvmlProbe ignores these): process `pid`
  // uses `util_pct` of the GPU or MIG instance named by its uuid and `mem_mib` of its memory.
  // Setting the same (uuid, pid) again replaces the load; a uuid the probe does not know is kept
  // but counts nowhere.
  virtual void SetLoad(const std::string& gpu_or_mig_uuid, int pid, int util_pct,
                       int64_t mem_mib) = 0;
  // Removes every load of `pid`.
  virtual void ClearLoad(int pid) = 0;

  // Sets GPU `gpu_index`'s MIG mode and exact instance layout (in_use is ignored). Instances that
  // appear in both layouts (same profile and start) are kept; the others are destroyed and
  // created. Refused with kInvalidArgument for an illegal layout (start not allowed, overlap,
  // too many of a profile, MIG on a model without MIG) and kFailedPrecondition when processes
  // run where the change would reset.
  virtual Status ApplyMigLayout(int gpu_index, bool mig_enabled,
                                const std::vector<MigInstance>& instances) = 0;
};

}  // namespace gpupool::agent
