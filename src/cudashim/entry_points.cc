// The lookups over the entry-point table of entry_points.h (by exported name; cuGetProcAddress's
// base name, version and flags).
#include "cudashim/entry_points.h"

#include <cstring>

namespace gpupool::cudashim {

int FindEntryPointByName(const char* name) {
  if (name == nullptr) return -1;
  for (int i = 0; i < kEntryPointCount; ++i) {
    if (std::strcmp(kEntryPoints[i].name, name) == 0) return i;
  }
  return -1;
}

int ResolveEntryPoint(const char* symbol, int cuda_version, uint64_t flags) {
  if (symbol == nullptr) return -1;
  constexpr uint64_t kPerThreadDefaultStream = 2;  // CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
  const bool want_per_thread = (flags & kPerThreadDefaultStream) != 0;
  int best = -1;
  for (int i = 0; i < kEntryPointCount; ++i) {
    const EntryPointInfo& e = kEntryPoints[i];
    if (e.min_version > cuda_version || std::strcmp(e.base, symbol) != 0) continue;
    if (e.per_thread && !want_per_thread) continue;
    if (best < 0) {
      best = i;
      continue;
    }
    const EntryPointInfo& b = kEntryPoints[best];
    // A per-thread variant beats a legacy one when asked for; otherwise the newer one wins.
    if (e.per_thread != b.per_thread ? e.per_thread : e.min_version > b.min_version) best = i;
  }
  return best;
}

}  // namespace gpupool::cudashim
