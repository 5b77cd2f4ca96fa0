// libgpupool_cudashim.so: an LD_PRELOAD interposer over the CUDA driver API that holds a process
// to its GPU-memory reservation (GPUPOOL_GPU_MEM_LIMIT_BYTES, limits.h). It defines the driver's
// memory entry points (entry_points.h) itself, so calls bound by the dynamic linker reach it; it
// wraps dlsym, so lookups on a handle of libcuda.so.1 (what the CUDA runtime does) get its
// wrappers; and it wraps cuGetProcAddress, through which the runtime ≥ 11.3 obtains every other
// entry point. An allocation that would take the process past its limit on a device fails with
// CUDA_ERROR_OUT_OF_MEMORY (the driver is not called); cuMemGetInfo and cuDeviceTotalMem report
// the limit as the device's total. The real functions come from libcuda.so.1 itself (dlopen +
// the real dlsym), never through these wrappers. No C++ exception leaves this file: every
// allocation of the tables is caught where it happens (ledger.cc) and refuses the allocation.
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "cudashim/array_bytes.h"
#include "cudashim/cuda_api.h"
#include "cudashim/entry_points.h"
#include "cudashim/ledger.h"
#include "cudashim/limits.h"

namespace gpupool::cudashim {
namespace {

// Writes one line to stderr ("gpupool-cudashim: ..."); no allocation, no stdio buffering.
void Log(const char* text) {
  char line[512];
  const int n = std::snprintf(line, sizeof line, "gpupool-cudashim: %s\n", text);
  if (n <= 0) return;
  const size_t length = std::min(static_cast<size_t>(n), sizeof line - 1);
  for (size_t done = 0; done < length;) {
    const ssize_t w = write(STDERR_FILENO, line + done, length - done);
    if (w <= 0) return;
    done += static_cast<size_t>(w);
  }
}

// ---- The real dlsym and the real driver ---------------------------------------------------------

using DlsymFn = void* (*)(void*, const char*);

DlsymFn RealDlsym() {
  static std::atomic<DlsymFn> real{nullptr};
  DlsymFn fn = real.load(std::memory_order_acquire);
  if (fn == nullptr) {
    // glibc ≥ 2.34 has dlsym in libc as GLIBC_2.34; older ones only as GLIBC_2.2.5.
    fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
    if (fn == nullptr) fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
    real.store(fn, std::memory_order_release);
  }
  return fn;
}

struct Driver {
  std::atomic<void*> fn[kEntryPointCount];
  CUresult (*ctx_get_device)(CUdevice*) = nullptr;
};

Driver& GetDriver() {
  // Never destroyed: CUDA calls may come from other libraries' destructors at exit.
  static Driver* const driver = [] {
    alignas(Driver) static unsigned char storage[sizeof(Driver)];
    Driver* d = new (storage) Driver();
    void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) handle = dlopen("libcuda.so.1", RTLD_LAZY);
    const DlsymFn real_dlsym = RealDlsym();
    if (handle == nullptr || real_dlsym == nullptr) {
      char why[400];
      std::snprintf(why, sizeof why, "cannot load libcuda.so.1: %s",
                    handle == nullptr ? dlerror() : "no dlsym in libc");
      Log(why);
      for (auto& fn : d->fn) fn.store(nullptr, std::memory_order_relaxed);
      return d;
    }
    for (int i = 0; i < kEntryPointCount; ++i) {
      d->fn[i].store(real_dlsym(handle, kEntryPoints[i].name), std::memory_order_relaxed);
    }
    d->ctx_get_device =
        reinterpret_cast<CUresult (*)(CUdevice*)>(real_dlsym(handle, "cuCtxGetDevice"));
    return d;
  }();
  return *driver;
}

template <EntryPoint E>
struct FnType;
#define GPUPOOL_CUDASHIM_FN_TYPE(base, variant, version, per_thread) \
  template <>                                                        \
  struct FnType<k_##variant> {                                       \
    using type = decltype(&::variant);                               \
  };
GPUPOOL_CUDASHIM_ENTRY_POINTS(GPUPOOL_CUDASHIM_FN_TYPE)
#undef GPUPOOL_CUDASHIM_FN_TYPE

// The driver's own function for entry point E (null when the driver lacks it).
template <EntryPoint E>
typename FnType<E>::type Real() {
  return reinterpret_cast<typename FnType<E>::type>(
      GetDriver().fn[E].load(std::memory_order_acquire));
}

// What this library hands out instead of the driver's function `i`. A function-local table: a
// dlsym made by another library's constructor, before this library's own ran, still finds it.
void* Wrapper(int i) {
  static const void* const wrappers[kEntryPointCount] = {
#define GPUPOOL_CUDASHIM_WRAPPER(base, variant, version, per_thread) \
  reinterpret_cast<const void*>(&::variant),
      GPUPOOL_CUDASHIM_ENTRY_POINTS(GPUPOOL_CUDASHIM_WRAPPER)
#undef GPUPOOL_CUDASHIM_WRAPPER
  };
  return const_cast<void*>(wrappers[i]);
}

// ---- The ledger ---------------------------------------------------------------------------------

Ledger& GetLedger();

void PrepareFork() { GetLedger().PrepareFork(); }
void AfterForkInParent() { GetLedger().AfterForkInParent(); }
void AfterForkInChild() { GetLedger().AfterForkInChild(); }

Ledger& GetLedger() {
  // Never destroyed (see GetDriver). Built in static storage: nothing here may throw.
  static Ledger* const ledger = [] {
    alignas(Ledger) static unsigned char storage[sizeof(Ledger)];
    Limits limits;
    try {
      limits = ParseLimits(std::getenv(kLimitVariable));
    } catch (const std::bad_alloc&) {
      limits = Limits{};
      limits.enforced = true;  // all zero: refuse rather than run unlimited
      limits.error = "out of memory";
    }
    if (!limits.error.empty()) Log(limits.error.c_str());
    Ledger* l = new (storage) Ledger(limits);
    if (limits.enforced) pthread_atfork(&PrepareFork, &AfterForkInParent, &AfterForkInChild);
    return l;
  }();
  return *ledger;
}

// The device of the calling thread's current context, or the driver's error (no context).
CUresult CurrentDevice(int* device) {
  const Driver& driver = GetDriver();
  if (driver.ctx_get_device == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CUdevice d = 0;
  const CUresult result = driver.ctx_get_device(&d);
  if (result == CUDA_SUCCESS) *device = d;
  return result;
}

// The answer to an allocation that would pass the limit; the first one per device is logged.
CUresult Refuse(const Ledger& ledger, int device, uint64_t bytes) {
  static std::atomic<bool> logged[kMaxDevices];
  if (device >= 0 && device < kMaxDevices && !logged[device].exchange(true)) {
    char text[300];
    std::snprintf(text, sizeof text,
                  "device %d: refused an allocation of %llu bytes: %llu of the %llu bytes this "
                  "process may hold (%s) are in use",
                  device, static_cast<unsigned long long>(bytes),
                  static_cast<unsigned long long>(ledger.used(device)),
                  static_cast<unsigned long long>(ledger.limit(device)), kLimitVariable);
    Log(text);
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

// Counts `bytes` on `device`, runs `allocate` (the driver's call) and records what it made under
// `key()`; `undo()` frees it again when it cannot be recorded.
template <typename Allocate, typename KeyOf, typename Undo>
CUresult Admit(Ledger& ledger, Kind kind, int device, uint64_t bytes, Allocate&& allocate,
               KeyOf&& key, Undo&& undo) {
  if (!ledger.Reserve(device, bytes)) return Refuse(ledger, device, bytes);
  const CUresult result = allocate();
  if (result != CUDA_SUCCESS) {
    ledger.Unreserve(device, bytes);
    return result;
  }
  if (!ledger.Record(kind, key(), device, bytes)) {
    undo();
    ledger.Unreserve(device, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

// A device-pointer allocation on the current context's device.
template <typename Allocate>
CUresult AdmitOnCurrentDevice(Ledger& ledger, CUdeviceptr* dptr, uint64_t bytes,
                              Allocate&& allocate) {
  int device = -1;
  if (const CUresult result = CurrentDevice(&device); result != CUDA_SUCCESS) return result;
  return Admit(
      ledger, Kind::kDevicePointer, device, bytes, allocate, [&] { return *dptr; },
      [&] {
        if (auto free_fn = Real<k_cuMemFree_v2>()) (void)free_fn(*dptr);  // best effort
        *dptr = 0;
      });
}

// A free: the record leaves the table first and its bytes are released once the driver freed it.
template <typename Release>
CUresult Retire(Ledger& ledger, Kind kind, uint64_t key, Release&& release) {
  Ledger::Pending pending = ledger.Take(kind, key);
  const CUresult result = release();
  ledger.Finish(std::move(pending), result == CUDA_SUCCESS);
  return result;
}

uint64_t Key(const void* handle) { return reinterpret_cast<uintptr_t>(handle); }

// cuGetProcAddress's answer, with this library's wrapper for an entry point it wraps. The
// variant is the one whose real function the driver returned; failing that (a driver that hands
// out other addresses than it exports), the one NVIDIA's versioning rule names.
void Substitute(const char* symbol, int cuda_version, uint64_t flags, void** pfn) {
  if (pfn == nullptr || *pfn == nullptr || symbol == nullptr || !GetLedger().enforced()) return;
  Driver& driver = GetDriver();
  int chosen = -1;
  for (int i = 0; i < kEntryPointCount && chosen < 0; ++i) {
    if (std::strcmp(kEntryPoints[i].base, symbol) == 0 &&
        driver.fn[i].load(std::memory_order_acquire) == *pfn) {
      chosen = i;
    }
  }
  if (chosen < 0) chosen = ResolveEntryPoint(symbol, cuda_version, flags);
  if (chosen < 0) return;
  void* expected = nullptr;  // a variant the driver exports only through cuGetProcAddress
  driver.fn[chosen].compare_exchange_strong(expected, *pfn, std::memory_order_acq_rel);
  *pfn = Wrapper(chosen);
}

template <EntryPoint E>
CUresult AllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  const auto real = Real<E>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Ledger& ledger = GetLedger();
  if (!ledger.enforced() || dptr == nullptr) return real(dptr, bytesize, stream);
  return AdmitOnCurrentDevice(ledger, dptr, bytesize, [&] { return real(dptr, bytesize, stream); });
}

template <EntryPoint E>
CUresult AllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                            CUstream stream) {
  const auto real = Real<E>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Ledger& ledger = GetLedger();
  if (!ledger.enforced() || dptr == nullptr) return real(dptr, bytesize, pool, stream);
  return AdmitOnCurrentDevice(ledger, dptr, bytesize,
                              [&] { return real(dptr, bytesize, pool, stream); });
}

// The bytes return when the free is enqueued, not when the stream reaches it.
template <EntryPoint E>
CUresult FreeAsync(CUdeviceptr dptr, CUstream stream) {
  const auto real = Real<E>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Ledger& ledger = GetLedger();
  if (!ledger.enforced()) return real(dptr, stream);
  return Retire(ledger, Kind::kDevicePointer, dptr, [&] { return real(dptr, stream); });
}

// A CUDA array of `bytes` made by `create` into *handle, freed by cuArrayDestroy.
template <typename Create>
CUresult AdmitArray(Ledger& ledger, CUarray* handle, uint64_t bytes, Create&& create) {
  int device = -1;
  if (const CUresult result = CurrentDevice(&device); result != CUDA_SUCCESS) return result;
  return Admit(
      ledger, Kind::kArray, device, bytes, create, [&] { return Key(*handle); },
      [&] {
        if (auto destroy = Real<k_cuArrayDestroy>()) (void)destroy(*handle);  // best effort
        *handle = nullptr;
      });
}

// Arrays whose memory comes from mapped cuMemCreate allocations (counted there) hold none.
bool ArrayHoldsMemory(unsigned flags) {
  return (flags & (CUDA_ARRAY3D_DEFERRED_MAPPING | CUDA_ARRAY3D_SPARSE)) == 0;
}

// dlsym's answer for wrapped entry point `i`. The real lookup decides whether there is such a
// function; when it finds this library's own export (RTLD_DEFAULT, or a handle whose scope holds
// it), there is one only if the driver is loaded and has it, as without this library. Under a
// limit the answer is the wrapper; without one, whatever the real lookup found. The limit is
// read with getenv, not the ledger, so that a dlsym made while something initialises (a malloc
// replacement, libcuda's own loading) never waits on this library's initialisation.
void* LookUpWrapped(DlsymFn real, void* handle, const char* name, int i) {
  void* const found = real(handle, name);
  if (found == nullptr) return nullptr;
  if (found == Wrapper(i)) {
    void* const driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    const bool driver_has_it = driver != nullptr && real(driver, name) != nullptr;
    if (driver != nullptr) dlclose(driver);
    return driver_has_it ? found : nullptr;
  }
  return std::getenv(kLimitVariable) != nullptr ? Wrapper(i) : found;
}

}  // namespace
}  // namespace gpupool::cudashim

using gpupool::cudashim::Admit;
using gpupool::cudashim::AdmitOnCurrentDevice;
using gpupool::cudashim::ArrayBytes;
using gpupool::cudashim::CurrentDevice;
using gpupool::cudashim::GetLedger;
using gpupool::cudashim::Key;
using gpupool::cudashim::Kind;
using gpupool::cudashim::Ledger;
using gpupool::cudashim::Real;
using gpupool::cudashim::Refuse;
using gpupool::cudashim::Retire;
using gpupool::cudashim::Substitute;
namespace cs = gpupool::cudashim;

// ---- Exported: symbol lookup --------------------------------------------------------------------

// dlsym on any handle: a wrapped entry point's name gives the wrapper wherever the real lookup
// finds the driver's function (cs::LookUpWrapped). Everything else is the real dlsym's answer,
// reached by a tail call (the library is always built with optimisation, its CMakeLists.txt) so
// that dlsym(RTLD_NEXT) still searches past its caller's object, not past this library's.
extern "C" void* dlsym(void* handle, const char* name) {
  const cs::DlsymFn real = cs::RealDlsym();
  if (real == nullptr) return nullptr;
  // `name` is never null (dlfcn.h declares it nonnull, as for the real dlsym).
  if (name[0] == 'c' && name[1] == 'u') {
    if (const int i = cs::FindEntryPointByName(name); i >= 0) {
      return cs::LookUpWrapped(real, handle, name, i);
    }
  }
  return real(handle, name);
}

// ---- Exported: the driver API -------------------------------------------------------------------

extern "C" {

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus) {
  const auto real = Real<cs::k_cuGetProcAddress_v2>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult result = real(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (result == CUDA_SUCCESS) Substitute(symbol, cudaVersion, flags, pfn);
  return result;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  const auto real = Real<cs::k_cuGetProcAddress>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult result = real(symbol, pfn, cudaVersion, flags);
  if (result == CUDA_SUCCESS) Substitute(symbol, cudaVersion, flags, pfn);
  return result;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  const auto real = Real<cs::k_cuDeviceTotalMem_v2>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult result = real(bytes, dev);
  Ledger& ledger = GetLedger();
  if (result == CUDA_SUCCESS && ledger.enforced()) {
    *bytes = static_cast<size_t>(std::min<uint64_t>(*bytes, ledger.limit(dev)));
  }
  return result;
}

CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  const auto real = Real<cs::k_cuMemGetInfo_v2>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult result = real(free, total);
  Ledger& ledger = GetLedger();
  int device = -1;
  if (result != CUDA_SUCCESS || !ledger.enforced() || CurrentDevice(&device) != CUDA_SUCCESS) {
    return result;
  }
  const uint64_t limit = ledger.limit(device);
  const uint64_t used = ledger.used(device);
  const uint64_t left = used < limit ? limit - used : 0;
  *total = static_cast<size_t>(std::min<uint64_t>(*total, limit));
  *free = static_cast<size_t>(std::min<uint64_t>({*free, left, *total}));
  return result;
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  const auto real = Real<cs::k_cuMemAlloc_v2>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Ledger& ledger = GetLedger();
  if (!ledger.enforced() || dptr == nullptr) return real(dptr, bytesize);
  return AdmitOnCurrentDevice(ledger, dptr, bytesize, [&] { return real(dptr, bytesize); });
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes) {
  const auto real = Real<cs::k_cuMemAllocPitch_v2>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Ledger& ledger = GetLedger();
  const auto call = [&] { return real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes); };
  if (!ledger.enforced() || dptr == nullptr || pPitch == nullptr) return call();
  // The pitch is known only afterwards: the unpadded size is counted first, the padding after.
  int device = -1;
  if (const CUresult result = CurrentDevice(&device); result != CUDA_SUCCESS) return result;
  const auto size_of = [&](uint64_t width) {
    return Height != 0 && width > UINT64_MAX / Height ? UINT64_MAX : width * Height;
  };
  const uint64_t unpadded = size_of(WidthInBytes);
  if (!ledger.Reserve(device, unpadded)) return Refuse(ledger, device, unpadded);
  const CUresult result = call();
  if (result != CUDA_SUCCESS) {
    ledger.Unreserve(device, unpadded);
    return result;
  }
  const uint64_t padded = std::max(unpadded, size_of(*pPitch));
  const bool admitted = ledger.Reserve(device, padded - unpadded);
  if (!admitted || !ledger.Record(Kind::kDevicePointer, *dptr, device, padded)) {
    if (auto free_fn = Real<cs::k_cuMemFree_v2>()) (void)free_fn(*dptr);  // best effort
    ledger.Unreserve(device, admitted ? padded : unpadded);
    *dptr = 0;
    return admitted ? CUDA_ERROR_OUT_OF_MEMORY : Refuse(ledger, device, padded);
  }
  return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  const auto real = Real<cs::k_cuMemFree_v2>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Ledger& ledger = GetLedger();
  if (!ledger.enforced()) return real(dptr);
  return Retire(ledger, Kind::kDevicePointer, dptr, [&] { return real(dptr); });
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  const auto real = Real<cs::k_cuMemAllocManaged>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Ledger& ledger = GetLedger();
  if (!ledger.enforced() || dptr == nullptr) return real(dptr, bytesize, flags);
  return AdmitOnCurrentDevice(ledger, dptr, bytesize, [&] { return real(dptr, bytesize, flags); });
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return cs::AllocAsync<cs::k_cuMemAllocAsync>(dptr, bytesize, hStream);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return cs::AllocAsync<cs::k_cuMemAllocAsync_ptsz>(dptr, bytesize, hStream);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream) {
  return cs::AllocFromPoolAsync<cs::k_cuMemAllocFromPoolAsync>(dptr, bytesize, pool, hStream);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream) {
  return cs::AllocFromPoolAsync<cs::k_cuMemAllocFromPoolAsync_ptsz>(dptr, bytesize, pool, hStream);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  return cs::FreeAsync<cs::k_cuMemFreeAsync>(dptr, hStream);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  return cs::FreeAsync<cs::k_cuMemFreeAsync_ptsz>(dptr, hStream);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) {
  const auto real = Real<cs::k_cuMemCreate>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Ledger& ledger = GetLedger();
  // Host and host-NUMA locations are host memory: not counted.
  if (!ledger.enforced() || handle == nullptr || prop == nullptr ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return real(handle, size, prop, flags);
  }
  const int device = prop->location.id;
  if (!ledger.Reserve(device, size)) return Refuse(ledger, device, size);
  const CUresult result = real(handle, size, prop, flags);
  if (result != CUDA_SUCCESS) {
    ledger.Unreserve(device, size);
    return result;
  }
  if (!ledger.RecordHandle(*handle, device, size)) {
    if (auto release = Real<cs::k_cuMemRelease>()) (void)release(*handle);  // best effort
    ledger.Unreserve(device, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  const auto real = Real<cs::k_cuMemRelease>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Ledger& ledger = GetLedger();
  if (!ledger.enforced()) return real(handle);
  Ledger::HandleRelease release = ledger.BeginRelease(handle);
  const CUresult result = real(handle);
  ledger.FinishRelease(handle, std::move(release), result == CUDA_SUCCESS);
  return result;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  const auto real = Real<cs::k_cuMemMap>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult result = real(ptr, size, offset, handle, flags);
  Ledger& ledger = GetLedger();
  if (result != CUDA_SUCCESS || !ledger.enforced() || ledger.Mapped(ptr, size, handle)) {
    return result;
  }
  if (auto unmap = Real<cs::k_cuMemUnmap>()) (void)unmap(ptr, size);  // best effort
  return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  const auto real = Real<cs::k_cuMemUnmap>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult result = real(ptr, size);
  Ledger& ledger = GetLedger();
  if (result == CUDA_SUCCESS && ledger.enforced()) ledger.Unmapped(ptr, size);
  return result;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  const auto real = Real<cs::k_cuMemRetainAllocationHandle>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult result = real(handle, addr);
  Ledger& ledger = GetLedger();
  if (result != CUDA_SUCCESS || !ledger.enforced() || ledger.Retained(*handle, Key(addr))) {
    return result;
  }
  if (auto release = Real<cs::k_cuMemRelease>()) (void)release(*handle);  // best effort
  return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* pAllocateArray) {
  const auto real = Real<cs::k_cuArrayCreate_v2>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Ledger& ledger = GetLedger();
  if (!ledger.enforced() || pHandle == nullptr || pAllocateArray == nullptr) {
    return real(pHandle, pAllocateArray);
  }
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  desc.Width = pAllocateArray->Width;
  desc.Height = pAllocateArray->Height;
  desc.Format = pAllocateArray->Format;
  desc.NumChannels = pAllocateArray->NumChannels;
  return cs::AdmitArray(ledger, pHandle, ArrayBytes(desc, 1),
                        [&] { return real(pHandle, pAllocateArray); });
}

CUresult cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray) {
  const auto real = Real<cs::k_cuArray3DCreate_v2>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Ledger& ledger = GetLedger();
  if (!ledger.enforced() || pHandle == nullptr || pAllocateArray == nullptr ||
      !cs::ArrayHoldsMemory(pAllocateArray->Flags)) {
    return real(pHandle, pAllocateArray);
  }
  return cs::AdmitArray(ledger, pHandle, ArrayBytes(*pAllocateArray, 1),
                        [&] { return real(pHandle, pAllocateArray); });
}

CUresult cuArrayDestroy(CUarray hArray) {
  const auto real = Real<cs::k_cuArrayDestroy>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Ledger& ledger = GetLedger();
  if (!ledger.enforced()) return real(hArray);
  return Retire(ledger, Kind::kArray, Key(hArray), [&] { return real(hArray); });
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray* pHandle,
                                const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,
                                unsigned int numMipmapLevels) {
  const auto real = Real<cs::k_cuMipmappedArrayCreate>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Ledger& ledger = GetLedger();
  const auto call = [&] { return real(pHandle, pMipmappedArrayDesc, numMipmapLevels); };
  if (!ledger.enforced() || pHandle == nullptr || pMipmappedArrayDesc == nullptr ||
      !cs::ArrayHoldsMemory(pMipmappedArrayDesc->Flags)) {
    return call();
  }
  int device = -1;
  if (const CUresult result = CurrentDevice(&device); result != CUDA_SUCCESS) return result;
  return Admit(
      ledger, Kind::kMipmappedArray, device, ArrayBytes(*pMipmappedArrayDesc, numMipmapLevels),
      call, [&] { return Key(*pHandle); },
      [&] {
        if (auto destroy = Real<cs::k_cuMipmappedArrayDestroy>()) (void)destroy(*pHandle);
        *pHandle = nullptr;
      });
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  const auto real = Real<cs::k_cuMipmappedArrayDestroy>();
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  Ledger& ledger = GetLedger();
  if (!ledger.enforced()) return real(hMipmappedArray);
  return Retire(ledger, Kind::kMipmappedArray, Key(hMipmappedArray),
                [&] { return real(hMipmappedArray); });
}

}  // extern "C"
