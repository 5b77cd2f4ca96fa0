// MIG placement on one GPU: which slots a profile may take under NVIDIA's placement rules, the
// best slot for a new instance, and when an idle GPU must be re-partitioned to make room.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/node.h"

namespace gpupool {

// How a MIG request gets its instance on a GPU, cheapest first.
enum class MigAction {
  kUseFree,      // an existing, unused instance of the profile: no layout change
  kCreate,       // a new instance in free slots (allowed live while other instances run)
  kRepartition,  // unused instances must be destroyed, or MIG mode enabled on an idle GPU
};

struct MigPlacement {
  MigAction action = MigAction::kUseFree;
  int profile = -1;            // index into the model's mig_profiles
  int start = 0;               // start slot of the instance the task gets
  int instance = -1;           // kUseFree: index of the existing instance
  std::vector<int> destroy;    // kRepartition: indexes of unused instances to destroy
  bool enable_mig = false;     // kRepartition: the GPU must be switched to MIG mode (reset)

  friend bool operator==(const MigPlacement&, const MigPlacement&) = default;
};

// Bitmask of memory slots covered by instances of `gpu` (only the in-use ones when
// `in_use_only`).
uint32_t MigOccupiedSlots(const GpuModelInfo& model, const Gpu& gpu, bool in_use_only = false);

// Whether an instance of `profile` may start at `start` given the slots `occupied` and the
// number of instances of that profile already present.
bool MigStartLegal(const GpuModelInfo& model, int profile, int start, uint32_t occupied,
                   int existing_of_profile);

// The best way to give `gpu` an instance of `profile`, or nullopt when even re-partitioning
// cannot (in-use instances block every legal start). A GPU not in MIG mode is only considered
// when it is idle (enabling MIG mode resets it). Among new slots the one that keeps the most
// room for larger profiles is chosen (see SlotRoomScore in mig.cc).
std::optional<MigPlacement> FindMigPlacement(const GpuModelInfo& model, const Gpu& gpu,
                                             int profile);

// Carries out `p` on `gpu` and marks the instance in use; returns its index.
int ApplyMigPlacement(Gpu& gpu, const MigPlacement& p);

// Compute slices not covered by any instance (in use or not); compare with what FindMigPlacement
// can still place to see capacity that the layout strands.
int MigFreeComputeSlices(const GpuModelInfo& model, const Gpu& gpu);

}  // namespace gpupool
