// cudashim_bench: what the GPU-memory interposer adds to an allocation + free pair
// (cuMemAlloc_v2 + cuMemFree_v2 of 1 MiB, and cuMemCreate + cuMemRelease of 2 MiB), against the
// in-tree fake driver: the driver's functions called directly, and the shim's (dlopened from its
// build path, a limit set, so every call is counted), on 1 and 2 threads. Also cuMemGetInfo.
// The fake driver costs about what a hash-map insert does; the difference is the shim's.
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "cudashim/cuda_api.h"

namespace {

struct Api {
  decltype(&cuMemAlloc_v2) alloc;
  decltype(&cuMemFree_v2) free;
  decltype(&cuMemCreate) create;
  decltype(&cuMemRelease) release;
  decltype(&cuMemGetInfo_v2) info;
};

CUcontext Context() {
  static CUcontext ctx = [] {
    CUcontext c = nullptr;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&c, 0) != CUDA_SUCCESS) {
      std::fprintf(stderr, "cudashim_bench: the fake driver did not start\n");
      std::exit(1);
    }
    return c;
  }();
  return ctx;
}

const Api& Direct() {
  static const Api api{&cuMemAlloc_v2, &cuMemFree_v2, &cuMemCreate, &cuMemRelease,
                       &cuMemGetInfo_v2};
  return api;
}

const Api& Shim() {
  static const Api api = [] {
    // 1 TiB: never reached, but every call is checked and recorded.
    setenv("GPUPOOL_GPU_MEM_LIMIT_BYTES", "1099511627776", 1);
    void* shim = dlopen(CUDASHIM_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (shim == nullptr) {
      std::fprintf(stderr, "cudashim_bench: %s\n", dlerror());
      std::exit(1);
    }
    const auto get = [&](const char* name) {
      void* fn = dlsym(shim, name);
      if (fn == nullptr) std::exit(1);
      return fn;
    };
    return Api{reinterpret_cast<decltype(&cuMemAlloc_v2)>(get("cuMemAlloc_v2")),
               reinterpret_cast<decltype(&cuMemFree_v2)>(get("cuMemFree_v2")),
               reinterpret_cast<decltype(&cuMemCreate)>(get("cuMemCreate")),
               reinterpret_cast<decltype(&cuMemRelease)>(get("cuMemRelease")),
               reinterpret_cast<decltype(&cuMemGetInfo_v2)>(get("cuMemGetInfo_v2"))};
  }();
  return api;
}

void AllocFree(benchmark::State& state, const Api& api) {
  cuCtxSetCurrent(Context());
  for (auto _ : state) {
    CUdeviceptr p = 0;
    if (api.alloc(&p, 1 << 20) != CUDA_SUCCESS || api.free(p) != CUDA_SUCCESS) {
      state.SkipWithError("allocation failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void CreateRelease(benchmark::State& state, const Api& api) {
  cuCtxSetCurrent(Context());
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  for (auto _ : state) {
    CUmemGenericAllocationHandle h = 0;
    if (api.create(&h, 2 << 20, &prop, 0) != CUDA_SUCCESS || api.release(h) != CUDA_SUCCESS) {
      state.SkipWithError("cuMemCreate failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void GetInfo(benchmark::State& state, const Api& api) {
  cuCtxSetCurrent(Context());
  for (auto _ : state) {
    size_t free_bytes = 0, total = 0;
    benchmark::DoNotOptimize(api.info(&free_bytes, &total));
  }
}

void BM_AllocFree_Direct(benchmark::State& state) { AllocFree(state, Direct()); }
void BM_AllocFree_Shim(benchmark::State& state) { AllocFree(state, Shim()); }
void BM_CreateRelease_Direct(benchmark::State& state) { CreateRelease(state, Direct()); }
void BM_CreateRelease_Shim(benchmark::State& state) { CreateRelease(state, Shim()); }
void BM_MemGetInfo_Direct(benchmark::State& state) { GetInfo(state, Direct()); }
void BM_MemGetInfo_Shim(benchmark::State& state) { GetInfo(state, Shim()); }

BENCHMARK(BM_AllocFree_Direct)->Threads(1)->Threads(2);
BENCHMARK(BM_AllocFree_Shim)->Threads(1)->Threads(2);
BENCHMARK(BM_CreateRelease_Direct);
BENCHMARK(BM_CreateRelease_Shim);
BENCHMARK(BM_MemGetInfo_Direct);
BENCHMARK(BM_MemGetInfo_Shim);

}  // namespace

BENCHMARK_MAIN();
