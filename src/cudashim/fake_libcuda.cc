// A fake CUDA driver for the interposer's tests and benchmark (built as libcuda.so.1 in its own
// build directory; never installed): two devices of kFakeDeviceBytes each, contexts, and the
// memory entry points of entry_points.h over a fake device address space (addresses only: nothing
// on the host dereferences device memory), with the driver's bookkeeping and errors (an unknown
// pointer or handle is CUDA_ERROR_INVALID_VALUE, a full device CUDA_ERROR_OUT_OF_MEMORY, the
// virtual-memory API's memory lives until its last reference and mapping are gone).
// cuGetProcAddress returns its own functions by NVIDIA's versioning rule. It is linked with
// -Bsymbolic, as the real driver behaves: what it hands out is its own function, never an
// interposer's of the same name. With GPUPOOL_FAKE_CUDA_STATE naming a file, the devices' use is
// shared by every process that names it (one fake GPU for several processes).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "cudashim/array_bytes.h"
#include "cudashim/cuda_api.h"
#include "cudashim/entry_points.h"

namespace {

constexpr int kFakeDevices = 2;
constexpr uint64_t kFakeDeviceBytes = uint64_t{16} << 30;
constexpr int kFakeDriverVersion = 13000;

// The devices' bytes in use: in a shared file, or in this process.
struct DeviceUse {
  std::atomic<uint64_t> used[kFakeDevices];
};

DeviceUse& Use() {
  static DeviceUse* const use = [] {
    if (const char* path = std::getenv("GPUPOOL_FAKE_CUDA_STATE")) {
      const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      if (fd >= 0 && ftruncate(fd, sizeof(DeviceUse)) == 0) {
        void* shared = mmap(nullptr, sizeof(DeviceUse), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (shared != MAP_FAILED) return static_cast<DeviceUse*>(shared);
      }
      std::abort();  // a test set-up error: fail loudly
    }
    static DeviceUse local{};
    return &local;
  }();
  return *use;
}

bool Take(int device, uint64_t bytes) {
  std::atomic<uint64_t>& used = Use().used[device];
  uint64_t current = used.load();
  do {
    if (bytes > kFakeDeviceBytes - current) return false;
  } while (!used.compare_exchange_weak(current, current + bytes));
  return true;
}

void Give(int device, uint64_t bytes) { Use().used[device].fetch_sub(bytes); }

struct FakeContext {
  int device;
};
FakeContext g_contexts[kFakeDevices] = {{0}, {1}};
thread_local FakeContext* t_current = nullptr;
std::atomic<bool> g_initialized{false};

struct Allocation {
  int device;
  uint64_t bytes;
};
struct Physical {
  int device;
  uint64_t bytes;
  uint32_t references;
  uint32_t mappings;
};
struct Mapping {
  uint64_t size;
  CUmemGenericAllocationHandle handle;
};

std::mutex g_mu;
std::unordered_map<uint64_t, Allocation> g_allocations;  // device pointers, arrays, mipmaps
std::unordered_map<uint64_t, Physical> g_physical;       // by handle, until freed
std::map<uint64_t, Mapping> g_mappings;                  // by address
std::unordered_map<uint64_t, uint64_t> g_reservations;   // address ranges: start -> size
std::atomic<uint64_t> g_next_address{uint64_t{1} << 40};
std::atomic<uint64_t> g_next_handle{1};

uint64_t NewAddress(uint64_t bytes) {
  const uint64_t aligned = (bytes + 0xfffff) & ~uint64_t{0xfffff};
  return g_next_address.fetch_add(aligned + 0x100000);
}

CUresult CurrentDevice(int* device) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *device = t_current->device;
  return CUDA_SUCCESS;
}

// An allocation of `bytes` on the current device under a new key (an address).
CUresult Allocate(uint64_t bytes, CUdeviceptr* key) {
  int device = 0;
  if (const CUresult r = CurrentDevice(&device); r != CUDA_SUCCESS) return r;
  if (key == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (!Take(device, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  *key = NewAddress(bytes);
  std::lock_guard lock(g_mu);
  g_allocations[*key] = {device, bytes};
  return CUDA_SUCCESS;
}

CUresult Free(uint64_t key) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  std::lock_guard lock(g_mu);
  auto it = g_allocations.find(key);
  if (it == g_allocations.end()) return CUDA_ERROR_INVALID_VALUE;
  Give(it->second.device, it->second.bytes);
  g_allocations.erase(it);
  return CUDA_SUCCESS;
}

void DropPhysicalLocked(CUmemGenericAllocationHandle handle) {
  auto it = g_physical.find(handle);
  if (it != g_physical.end() && it->second.references == 0 && it->second.mappings == 0) {
    Give(it->second.device, it->second.bytes);
    g_physical.erase(it);
  }
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  g_initialized = true;
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = kFakeDriverVersion;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = kFakeDevices;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (device == nullptr || ordinal < 0 || ordinal >= kFakeDevices) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= kFakeDevices) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = kFakeDeviceBytes;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= kFakeDevices) return CUDA_ERROR_INVALID_DEVICE;
  *ctx = reinterpret_cast<CUcontext>(&g_contexts[dev]);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  if (dev < 0 || dev >= kFakeDevices) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  t_current = reinterpret_cast<FakeContext*>(ctx);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* ctx) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *ctx = reinterpret_cast<CUcontext>(t_current);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* device) {
  int d = 0;
  if (const CUresult r = CurrentDevice(&d); r != CUDA_SUCCESS) return r;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *device = d;
  return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  int device = 0;
  if (const CUresult r = CurrentDevice(&device); r != CUDA_SUCCESS) return r;
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *total = kFakeDeviceBytes;
  *free = kFakeDeviceBytes - Use().used[device].load();
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) { return Allocate(bytesize, dptr); }

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes) {
  if (pPitch == nullptr || WidthInBytes == 0 || Height == 0 ||
      (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const uint64_t pitch = (uint64_t{WidthInBytes} + 511) & ~uint64_t{511};
  if (Height > UINT64_MAX / pitch) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult r = Allocate(pitch * Height, dptr);
  if (r == CUDA_SUCCESS) *pPitch = pitch;
  return r;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) { return Free(dptr); }

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  return Allocate(bytesize, dptr);
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream) {
  return Allocate(bytesize, dptr);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream) {
  return Allocate(bytesize, dptr);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Allocate(bytesize, dptr);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Allocate(bytesize, dptr);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream) { return Free(dptr); }

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream) { return Free(dptr); }

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t, CUdeviceptr,
                             unsigned long long) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (ptr == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  *ptr = NewAddress(size);
  std::lock_guard lock(g_mu);
  g_reservations[*ptr] = size;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  std::lock_guard lock(g_mu);
  auto it = g_reservations.find(ptr);
  if (it == g_reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  g_reservations.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) {
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (handle == nullptr || prop == nullptr || size == 0 || flags != 0 ||
      prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
      prop->location.id >= kFakeDevices) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const int device = prop->location.id;
  if (!Take(device, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  *handle = g_next_handle.fetch_add(1);
  std::lock_guard lock(g_mu);
  g_physical[*handle] = {device, size, 1, 0};
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  std::lock_guard lock(g_mu);
  auto it = g_physical.find(handle);
  if (it == g_physical.end() || it->second.references == 0) return CUDA_ERROR_INVALID_VALUE;
  --it->second.references;
  DropPhysicalLocked(handle);
  return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  std::lock_guard lock(g_mu);
  auto it = g_physical.find(handle);
  if (it == g_physical.end() || it->second.references == 0 || offset != 0 || flags != 0 ||
      size != it->second.bytes || g_mappings.count(ptr) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  g_mappings[ptr] = {size, handle};
  ++it->second.mappings;
  return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  std::lock_guard lock(g_mu);
  auto it = g_mappings.lower_bound(ptr);
  if (it == g_mappings.end() || it->first != ptr) return CUDA_ERROR_INVALID_VALUE;
  while (it != g_mappings.end() && it->first - ptr < size) {
    const CUmemGenericAllocationHandle handle = it->second.handle;
    --g_physical[handle].mappings;
    it = g_mappings.erase(it);
    DropPhysicalLocked(handle);
  }
  return CUDA_SUCCESS;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t address = reinterpret_cast<uintptr_t>(addr);
  std::lock_guard lock(g_mu);
  auto it = g_mappings.upper_bound(address);
  if (it == g_mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (address - it->first >= it->second.size) return CUDA_ERROR_INVALID_VALUE;
  *handle = it->second.handle;
  ++g_physical[*handle].references;
  return CUDA_SUCCESS;
}

CUresult cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* desc) {
  if (pHandle == nullptr || desc == nullptr || desc->Width == 0) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d3{};
  d3.Width = desc->Width;
  d3.Height = desc->Height;
  d3.Format = desc->Format;
  d3.NumChannels = desc->NumChannels;
  CUdeviceptr key = 0;
  const CUresult r = Allocate(gpupool::cudashim::ArrayBytes(d3, 1), &key);
  if (r == CUDA_SUCCESS) *pHandle = reinterpret_cast<CUarray>(key);
  return r;
}

CUresult cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  if (pHandle == nullptr || desc == nullptr || desc->Width == 0) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr key = 0;
  const CUresult r = Allocate(gpupool::cudashim::ArrayBytes(*desc, 1), &key);
  if (r == CUDA_SUCCESS) *pHandle = reinterpret_cast<CUarray>(key);
  return r;
}

CUresult cuArrayDestroy(CUarray hArray) { return Free(reinterpret_cast<uintptr_t>(hArray)); }

CUresult cuMipmappedArrayCreate(CUmipmappedArray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                unsigned int levels) {
  if (pHandle == nullptr || desc == nullptr || desc->Width == 0 || levels == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUdeviceptr key = 0;
  const CUresult r = Allocate(gpupool::cudashim::ArrayBytes(*desc, levels), &key);
  if (r == CUDA_SUCCESS) *pHandle = reinterpret_cast<CUmipmappedArray>(key);
  return r;
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  return Free(reinterpret_cast<uintptr_t>(hMipmappedArray));
}

}  // extern "C"

namespace {

// The functions cuGetProcAddress hands out: the table's entry points, then the rest of the fake.
const void* const kImplementations[gpupool::cudashim::kEntryPointCount] = {
#define GPUPOOL_FAKE_IMPL(base, variant, version, per_thread) \
  reinterpret_cast<const void*>(&::variant),
    GPUPOOL_CUDASHIM_ENTRY_POINTS(GPUPOOL_FAKE_IMPL)
#undef GPUPOOL_FAKE_IMPL
};

struct Other {
  const char* name;
  const void* fn;
};
const Other kOthers[] = {
    {"cuInit", reinterpret_cast<const void*>(&cuInit)},
    {"cuDriverGetVersion", reinterpret_cast<const void*>(&cuDriverGetVersion)},
    {"cuDeviceGetCount", reinterpret_cast<const void*>(&cuDeviceGetCount)},
    {"cuDeviceGet", reinterpret_cast<const void*>(&cuDeviceGet)},
    {"cuDevicePrimaryCtxRetain", reinterpret_cast<const void*>(&cuDevicePrimaryCtxRetain)},
    {"cuDevicePrimaryCtxRelease", reinterpret_cast<const void*>(&cuDevicePrimaryCtxRelease_v2)},
    {"cuCtxSetCurrent", reinterpret_cast<const void*>(&cuCtxSetCurrent)},
    {"cuCtxGetCurrent", reinterpret_cast<const void*>(&cuCtxGetCurrent)},
    {"cuCtxGetDevice", reinterpret_cast<const void*>(&cuCtxGetDevice)},
    {"cuMemAddressReserve", reinterpret_cast<const void*>(&cuMemAddressReserve)},
    {"cuMemAddressFree", reinterpret_cast<const void*>(&cuMemAddressFree)},
};

CUresult GetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                        CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (cuda_version > kFakeDriverVersion) return CUDA_ERROR_INVALID_VALUE;
  const void* found = nullptr;
  if (const int i = gpupool::cudashim::ResolveEntryPoint(symbol, cuda_version, flags); i >= 0) {
    found = kImplementations[i];
  }
  for (const Other& other : kOthers) {
    if (found == nullptr && std::strcmp(other.name, symbol) == 0) found = other.fn;
  }
  *pfn = const_cast<void*>(found);
  if (status != nullptr) {
    *status = found != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus) {
  return GetProcAddress(symbol, pfn, cudaVersion, flags, symbolStatus);
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  return GetProcAddress(symbol, pfn, cudaVersion, flags, nullptr);
}

}  // extern "C"
