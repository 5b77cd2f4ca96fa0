// The driver-API entry points the GPU-memory interposer wraps, with the versions in which each
// ABI variant appeared, and the rule by which cuGetProcAddress maps a base name, a CUDA version
// and its flags onto one variant. One table for the shim (shim.cc: which wrapper to hand out) and
// for the test driver (fake_libcuda.cc: which of its functions to return); the names and versions
// are those of cuda.h's `#define cuMemAlloc cuMemAlloc_v2` lines and its per-thread (_ptsz)
// variants.
#ifndef GPUPOOL_CUDASHIM_ENTRY_POINTS_H_
#define GPUPOOL_CUDASHIM_ENTRY_POINTS_H_

#include <cstdint>

namespace gpupool::cudashim {

// X(base name, exported variant, CUDA version that introduced the variant, per-thread stream).
#define GPUPOOL_CUDASHIM_ENTRY_POINTS(X)                                    \
  X(cuGetProcAddress, cuGetProcAddress, 11030, false)                       \
  X(cuGetProcAddress, cuGetProcAddress_v2, 12000, false)                    \
  X(cuDeviceTotalMem, cuDeviceTotalMem_v2, 3020, false)                     \
  X(cuMemGetInfo, cuMemGetInfo_v2, 3020, false)                             \
  X(cuMemAlloc, cuMemAlloc_v2, 3020, false)                                 \
  X(cuMemAllocPitch, cuMemAllocPitch_v2, 3020, false)                       \
  X(cuMemFree, cuMemFree_v2, 3020, false)                                   \
  X(cuMemAllocManaged, cuMemAllocManaged, 6000, false)                      \
  X(cuMemAllocAsync, cuMemAllocAsync, 11020, false)                         \
  X(cuMemAllocAsync, cuMemAllocAsync_ptsz, 11020, true)                     \
  X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, false)         \
  X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz, 11020, true)     \
  X(cuMemFreeAsync, cuMemFreeAsync, 11020, false)                           \
  X(cuMemFreeAsync, cuMemFreeAsync_ptsz, 11020, true)                       \
  X(cuMemCreate, cuMemCreate, 10020, false)                                 \
  X(cuMemRelease, cuMemRelease, 10020, false)                               \
  X(cuMemMap, cuMemMap, 10020, false)                                       \
  X(cuMemUnmap, cuMemUnmap, 10020, false)                                   \
  X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000, false) \
  X(cuArrayCreate, cuArrayCreate_v2, 3020, false)                           \
  X(cuArray3DCreate, cuArray3DCreate_v2, 3020, false)                       \
  X(cuArrayDestroy, cuArrayDestroy, 2000, false)                            \
  X(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 5000, false)            \
  X(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 5000, false)

enum EntryPoint : int {
#define GPUPOOL_CUDASHIM_ENUM(base, variant, version, per_thread) k_##variant,
  GPUPOOL_CUDASHIM_ENTRY_POINTS(GPUPOOL_CUDASHIM_ENUM)
#undef GPUPOOL_CUDASHIM_ENUM
      kEntryPointCount
};

struct EntryPointInfo {
  const char* base;  // what cuGetProcAddress is asked for ("cuMemAlloc")
  const char* name;  // the exported symbol ("cuMemAlloc_v2")
  int min_version;   // 1000 * major + 10 * minor
  bool per_thread;   // a _ptsz variant (CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
};

inline constexpr EntryPointInfo kEntryPoints[kEntryPointCount] = {
#define GPUPOOL_CUDASHIM_INFO(base, variant, version, per_thread) \
  {#base, #variant, version, per_thread},
    GPUPOOL_CUDASHIM_ENTRY_POINTS(GPUPOOL_CUDASHIM_INFO)
#undef GPUPOOL_CUDASHIM_INFO
};

// The table's index of the exported symbol `name`, or -1.
int FindEntryPointByName(const char* name);

// The variant cuGetProcAddress(symbol, &pfn, cuda_version, flags) stands for: the newest one not
// newer than cuda_version, per-thread when the flags ask for it (CU_GET_PROC_ADDRESS_PER_THREAD_
// DEFAULT_STREAM = 2) and the symbol has one, otherwise the legacy-stream one. -1 when the table
// has no such variant (an unknown symbol, or a version older than every variant listed).
int ResolveEntryPoint(const char* symbol, int cuda_version, uint64_t flags);

}  // namespace gpupool::cudashim

#endif  // GPUPOOL_CUDASHIM_ENTRY_POINTS_H_
