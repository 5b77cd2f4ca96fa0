// A CUDA program for the interposer's tests (cudashim_test.cc runs it with the shim preloaded over
// the fake driver): it obtains the driver's memory entry points one of the ways real programs do,
// runs the operations named on its command line, and prints one line per operation
// ("alloc 0 #3": the CUresult, then what it made), so a test reads what each call answered.
//
//   cudashim_probe MODE OP...
//   MODE: link (calls bound by the dynamic linker), dlsym (dlopen libcuda.so.1 + dlsym),
//         proc (cuGetProcAddress_v2, legacy stream), proc-ptsz (per-thread stream), proc-v1
//         (the CUDA 11.3 cuGetProcAddress, version 12000)
//   OP:   alloc N | pitch WIDTH HEIGHT | managed N | async N | pool N | free #ID | freeasync #ID |
//         vmm N | map #ID | unmap #ID | release #ID | retain #ID | array W H | array3d W H D |
//         mipmap W H LEVELS | destroy #ID | destroymip #ID | info | total DEVICE | device DEVICE |
//         wait (until stdin closes) | rtld_next | fork N (a child allocates N, exits 0 on
//         success; prints its exit status)
//   N:    bytes, with an optional Ki, Mi or Gi suffix
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "cudashim/cuda_api.h"

namespace {

struct Api {
  decltype(&cuMemAlloc_v2) alloc = nullptr;
  decltype(&cuMemAllocPitch_v2) pitch = nullptr;
  decltype(&cuMemFree_v2) free = nullptr;
  decltype(&cuMemAllocManaged) managed = nullptr;
  decltype(&cuMemAllocAsync) async = nullptr;
  decltype(&cuMemAllocFromPoolAsync) pool = nullptr;
  decltype(&cuMemFreeAsync) free_async = nullptr;
  decltype(&cuMemCreate) create = nullptr;
  decltype(&cuMemRelease) release = nullptr;
  decltype(&cuMemMap) map = nullptr;
  decltype(&cuMemUnmap) unmap = nullptr;
  decltype(&cuMemRetainAllocationHandle) retain = nullptr;
  decltype(&cuArrayCreate_v2) array = nullptr;
  decltype(&cuArray3DCreate_v2) array3d = nullptr;
  decltype(&cuArrayDestroy) destroy = nullptr;
  decltype(&cuMipmappedArrayCreate) mipmap = nullptr;
  decltype(&cuMipmappedArrayDestroy) destroy_mipmap = nullptr;
  decltype(&cuMemGetInfo_v2) info = nullptr;
  decltype(&cuDeviceTotalMem_v2) total = nullptr;
};

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "cudashim_probe: %s\n", why.c_str());
  std::exit(2);
}

Api Linked() {
  return Api{&cuMemAlloc_v2,
             &cuMemAllocPitch_v2,
             &cuMemFree_v2,
             &cuMemAllocManaged,
             &cuMemAllocAsync,
             &cuMemAllocFromPoolAsync,
             &cuMemFreeAsync,
             &cuMemCreate,
             &cuMemRelease,
             &cuMemMap,
             &cuMemUnmap,
             &cuMemRetainAllocationHandle,
             &cuArrayCreate_v2,
             &cuArray3DCreate_v2,
             &cuArrayDestroy,
             &cuMipmappedArrayCreate,
             &cuMipmappedArrayDestroy,
             &cuMemGetInfo_v2,
             &cuDeviceTotalMem_v2};
}

// Fills every member through `lookup(exported name, base name)`.
template <typename Lookup>
Api Looked(Lookup&& lookup) {
  Api api;
  const auto get = [&](auto& member, const char* name, const char* base) {
    member = reinterpret_cast<std::remove_reference_t<decltype(member)>>(lookup(name, base));
    if (member == nullptr) Die(std::string("no ") + name);
  };
  get(api.alloc, "cuMemAlloc_v2", "cuMemAlloc");
  get(api.pitch, "cuMemAllocPitch_v2", "cuMemAllocPitch");
  get(api.free, "cuMemFree_v2", "cuMemFree");
  get(api.managed, "cuMemAllocManaged", "cuMemAllocManaged");
  get(api.async, "cuMemAllocAsync", "cuMemAllocAsync");
  get(api.pool, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync");
  get(api.free_async, "cuMemFreeAsync", "cuMemFreeAsync");
  get(api.create, "cuMemCreate", "cuMemCreate");
  get(api.release, "cuMemRelease", "cuMemRelease");
  get(api.map, "cuMemMap", "cuMemMap");
  get(api.unmap, "cuMemUnmap", "cuMemUnmap");
  get(api.retain, "cuMemRetainAllocationHandle", "cuMemRetainAllocationHandle");
  get(api.array, "cuArrayCreate_v2", "cuArrayCreate");
  get(api.array3d, "cuArray3DCreate_v2", "cuArray3DCreate");
  get(api.destroy, "cuArrayDestroy", "cuArrayDestroy");
  get(api.mipmap, "cuMipmappedArrayCreate", "cuMipmappedArrayCreate");
  get(api.destroy_mipmap, "cuMipmappedArrayDestroy", "cuMipmappedArrayDestroy");
  get(api.info, "cuMemGetInfo_v2", "cuMemGetInfo");
  get(api.total, "cuDeviceTotalMem_v2", "cuDeviceTotalMem");
  return api;
}

Api Lookup(const std::string& mode) {
  if (mode == "link") return Linked();
  void* driver = dlopen("libcuda.so.1", RTLD_NOW);
  if (driver == nullptr) Die(std::string("dlopen libcuda.so.1: ") + dlerror());
  if (mode == "dlsym") {
    return Looked([&](const char* name, const char*) { return dlsym(driver, name); });
  }
  if (mode == "proc" || mode == "proc-ptsz") {
    auto gpa =
        reinterpret_cast<decltype(&cuGetProcAddress_v2)>(dlsym(driver, "cuGetProcAddress_v2"));
    if (gpa == nullptr) Die("no cuGetProcAddress_v2");
    const cuuint64_t flags = mode == "proc" ? CU_GET_PROC_ADDRESS_LEGACY_STREAM
                                            : CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    return Looked([&](const char*, const char* base) -> void* {
      void* fn = nullptr;
      CUdriverProcAddressQueryResult status{};
      if (gpa(base, &fn, 13000, flags, &status) != CUDA_SUCCESS ||
          status != CU_GET_PROC_ADDRESS_SUCCESS) {
        return nullptr;
      }
      return fn;
    });
  }
  if (mode == "proc-v1") {
    auto gpa = reinterpret_cast<decltype(&cuGetProcAddress)>(dlsym(driver, "cuGetProcAddress"));
    if (gpa == nullptr) Die("no cuGetProcAddress");
    return Looked([&](const char*, const char* base) -> void* {
      void* fn = nullptr;
      return gpa(base, &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT) == CUDA_SUCCESS ? fn : nullptr;
    });
  }
  Die("unknown mode " + mode);
}

uint64_t Bytes(const char* text) {
  char* end = nullptr;
  const unsigned long long n = std::strtoull(text, &end, 10);
  if (end == text) Die(std::string("not a size: ") + text);
  if (std::strcmp(end, "Ki") == 0) return n << 10;
  if (std::strcmp(end, "Mi") == 0) return n << 20;
  if (std::strcmp(end, "Gi") == 0) return n << 30;
  if (*end != '\0') Die(std::string("not a size: ") + text);
  return n;
}

struct Object {
  uint64_t value = 0;  // device pointer, handle, array
  uint64_t size = 0;
  CUdeviceptr mapped_at = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) Die("usage: cudashim_probe MODE OP...");
  CUcontext contexts[2] = {};
  if (cuInit(0) != CUDA_SUCCESS) Die("cuInit failed");
  for (int d = 0; d < 2; ++d) {
    if (cuDevicePrimaryCtxRetain(&contexts[d], d) != CUDA_SUCCESS) Die("no context");
  }
  if (cuCtxSetCurrent(contexts[0]) != CUDA_SUCCESS) Die("cuCtxSetCurrent failed");
  const Api api = Lookup(argv[1]);
  std::vector<Object> objects;
  int device = 0;
  int i = 2;
  const auto next = [&]() -> const char* {
    if (i >= argc) Die("missing argument");
    return argv[i++];
  };
  const auto object = [&]() -> Object& {
    const char* id = next();
    const size_t n = id[0] == '#' ? std::strtoul(id + 1, nullptr, 10) : objects.size();
    if (n >= objects.size()) Die(std::string("no object ") + id);
    return objects[n];
  };
  // Prints "op result" and, on success, "#id" of a new object.
  const auto made = [&](const char* op, CUresult r, uint64_t value, uint64_t size) {
    if (r == CUDA_SUCCESS) {
      objects.push_back({value, size, 0});
      std::printf("%s %d #%zu\n", op, static_cast<int>(r), objects.size() - 1);
    } else {
      std::printf("%s %d\n", op, static_cast<int>(r));
    }
  };
  const auto done = [&](const char* op, CUresult r) {
    std::printf("%s %d\n", op, static_cast<int>(r));
  };
  const CUmemoryPool some_pool = reinterpret_cast<CUmemoryPool>(uintptr_t{0x1000});
  while (i < argc) {
    const std::string op = next();
    if (op == "alloc" || op == "managed" || op == "async" || op == "pool") {
      const uint64_t n = Bytes(next());
      CUdeviceptr p = 0;
      const CUresult r = op == "alloc"     ? api.alloc(&p, n)
                         : op == "managed" ? api.managed(&p, n, CU_MEM_ATTACH_GLOBAL)
                         : op == "async"   ? api.async(&p, n, nullptr)
                                           : api.pool(&p, n, some_pool, nullptr);
      made(op.c_str(), r, p, n);
    } else if (op == "pitch") {
      const uint64_t width = Bytes(next());
      const uint64_t height = Bytes(next());
      CUdeviceptr p = 0;
      size_t pitch = 0;
      const CUresult r = api.pitch(&p, &pitch, width, height, 4);
      made("pitch", r, p, pitch * height);
    } else if (op == "free") {
      done("free", api.free(object().value));
    } else if (op == "freeasync") {
      done("freeasync", api.free_async(object().value, nullptr));
    } else if (op == "vmm") {
      const uint64_t n = Bytes(next());
      CUmemAllocationProp prop{};
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prop.location.id = device;
      CUmemGenericAllocationHandle h = 0;
      const CUresult r = api.create(&h, n, &prop, 0);
      made("vmm", r, h, n);
    } else if (op == "map") {
      Object& o = object();
      CUresult r = cuMemAddressReserve(&o.mapped_at, o.size, 0, 0, 0);
      if (r == CUDA_SUCCESS) r = api.map(o.mapped_at, o.size, 0, o.value, 0);
      done("map", r);
    } else if (op == "unmap") {
      Object& o = object();
      done("unmap", api.unmap(o.mapped_at, o.size));
    } else if (op == "release") {
      done("release", api.release(object().value));
    } else if (op == "retain") {
      Object& o = object();
      CUmemGenericAllocationHandle h = 0;
      const CUresult r = api.retain(&h, reinterpret_cast<void*>(o.mapped_at));
      if (r == CUDA_SUCCESS && h != o.value) Die("retain gave another handle");
      done("retain", r);
    } else if (op == "array" || op == "array3d" || op == "mipmap") {
      CUDA_ARRAY3D_DESCRIPTOR desc{};
      desc.Width = Bytes(next());
      desc.Height = Bytes(next());
      desc.Format = CU_AD_FORMAT_FLOAT;
      desc.NumChannels = 1;
      CUresult r;
      uint64_t value = 0;
      if (op == "array") {
        const CUDA_ARRAY_DESCRIPTOR d2{desc.Width, desc.Height, desc.Format, desc.NumChannels};
        CUarray a = nullptr;
        r = api.array(&a, &d2);
        value = reinterpret_cast<uintptr_t>(a);
      } else if (op == "array3d") {
        desc.Depth = Bytes(next());
        CUarray a = nullptr;
        r = api.array3d(&a, &desc);
        value = reinterpret_cast<uintptr_t>(a);
      } else {
        const unsigned levels = static_cast<unsigned>(Bytes(next()));
        CUmipmappedArray m = nullptr;
        r = api.mipmap(&m, &desc, levels);
        value = reinterpret_cast<uintptr_t>(m);
      }
      made(op.c_str(), r, value, 0);
    } else if (op == "destroy") {
      done("destroy", api.destroy(reinterpret_cast<CUarray>(object().value)));
    } else if (op == "destroymip") {
      done("destroymip", api.destroy_mipmap(reinterpret_cast<CUmipmappedArray>(object().value)));
    } else if (op == "info") {
      size_t free_bytes = 0, total = 0;
      const CUresult r = api.info(&free_bytes, &total);
      std::printf("info %d %zu %zu\n", static_cast<int>(r), free_bytes, total);
    } else if (op == "total") {
      size_t total = 0;
      const CUresult r = api.total(&total, static_cast<CUdevice>(Bytes(next())));
      std::printf("total %d %zu\n", static_cast<int>(r), total);
    } else if (op == "device") {
      device = static_cast<int>(Bytes(next()));
      if (device < 0 || device > 1) Die("device 0 or 1");
      done("device", cuCtxSetCurrent(contexts[device]));
    } else if (op == "wait") {
      std::printf("wait\n");
      std::fflush(stdout);
      while (std::getchar() != EOF) {
      }
    } else if (op == "fork") {
      const uint64_t n = Bytes(next());
      std::fflush(stdout);
      const pid_t child = fork();
      if (child == 0) {
        CUdeviceptr p = 0;
        std::_Exit(api.alloc(&p, n) == CUDA_SUCCESS ? 0 : 3);
      }
      int status = 0;
      if (child < 0 || waitpid(child, &status, 0) != child) Die("fork failed");
      std::printf("fork %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    } else if (op == "rtld_next") {
      Dl_info where{};
      void* next_dlsym = dlsym(RTLD_NEXT, "dlsym");
      std::printf("rtld_next %s\n", next_dlsym != nullptr && dladdr(next_dlsym, &where) != 0 &&
                                            where.dli_fname != nullptr
                                        ? where.dli_fname
                                        : "(none)");
    } else {
      Die("unknown operation " + op);
    }
    std::fflush(stdout);
  }
  return 0;
}
