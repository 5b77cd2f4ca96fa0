// A fake libnvidia-ml for nvml_probe_test: the subset of NVML that nvml_api.h declares, serving
// an A100-80GB in MIG mode, a T4 and a device that refuses to open. FakeNvml* functions let the
// test change what it serves. Built twice: with and without
// nvmlDeviceGetComputeRunningProcesses_v3.
#include <cstring>

#include "agent/gpu/nvml_api.h"

struct nvmlDevice_st {
  int gpu;  // parent GPU index
  int mig;  // -1: the GPU itself; else which MIG device
};

struct nvmlGpuInstance_st {
  int gi;
};

namespace {

constexpr unsigned long long kMiB = 1024ULL * 1024ULL;

struct FakeMig {
  const char* uuid;
  const char* name;
  unsigned int gi_id;
  unsigned long long used_mib;
  unsigned int pid;  // 0: no process
  unsigned long long pid_mib;
};

struct FakeGi {
  unsigned int id;
  unsigned int profile_id;
  unsigned int start;
  unsigned int size;
};

// GPU 0's MIG devices, by MIG device index; nullptr entries are empty indexes. GI 2 has two
// compute instances (two MIG devices).
const FakeMig kMig0 = {"MIG-fake-gi1", "NVIDIA A100-SXM4-80GB MIG 3g.40gb", 1, 4096, 100, 4096};
const FakeMig kMig2 = {
    "MIG-fake-gi2-ci0", "NVIDIA A100-SXM4-80GB MIG 1c.1g.10gb", 2, 512, 101, 512};
const FakeMig kMig3 = {"MIG-fake-gi2-ci1", "NVIDIA A100-SXM4-80GB MIG 1c.1g.10gb", 2, 0, 0, 0};
const FakeMig kMig4 = {"MIG-fake-gi3", "NVIDIA A100-SXM4-80GB MIG 1g.20gb", 3, 0, 0, 0};
const FakeMig* const kMigs[7] = {&kMig0, nullptr, &kMig2, &kMig3, &kMig4, nullptr, nullptr};
const FakeGi kGis[] = {{1, 2, 4, 4}, {2, 0, 0, 1}, {3, 9, 2, 2}};

nvmlDevice_st g_gpus[3] = {{0, -1}, {1, -1}, {2, -1}};
nvmlDevice_st g_migs[7] = {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5}, {0, 6}};
nvmlGpuInstance_st g_gi_handles[3] = {{0}, {1}, {2}};

int g_device_count = 3;
nvmlReturn_t g_init_result = NVML_SUCCESS;
bool g_privileged = true;
unsigned int g_extra_t4_processes = 0;
int g_linked = 0;  // FakeNvmlSetLinks
int g_inits = 0;
int g_shutdowns = 0;

void Copy(char* dst, unsigned int length, const char* src) {
  std::strncpy(dst, src, length);
  if (length > 0) dst[length - 1] = '\0';
}

const FakeMig* MigOf(nvmlDevice_t d) {
  return d != nullptr && d->mig >= 0 ? kMigs[d->mig] : nullptr;
}

}  // namespace

extern "C" {

// Test controls.
__attribute__((visibility("default"))) void FakeNvmlSetDeviceCount(int n) { g_device_count = n; }
__attribute__((visibility("default"))) void FakeNvmlSetInitResult(int r) { g_init_result = r; }
__attribute__((visibility("default"))) void FakeNvmlSetPrivileged(int p) { g_privileged = p; }
__attribute__((visibility("default"))) void FakeNvmlSetExtraT4Processes(unsigned int n) {
  g_extra_t4_processes = n;
}
__attribute__((visibility("default"))) int FakeNvmlOpenSessions() { return g_inits - g_shutdowns; }
// 0: nvmlDeviceGetP2PStatus and nvmlDeviceGetTopologyCommonAncestor answer NOT_SUPPORTED; 1: GPUs 0
// and 1 are joined by NVLink; 2: no NVLink, and GPUs 0 and 1 share one PCIe switch; 3: neither
// (no NVLink, apart NUMA nodes).
__attribute__((visibility("default"))) void FakeNvmlSetLinks(int mode) { g_linked = mode; }

nvmlReturn_t nvmlInit_v2() {
  if (g_init_result == NVML_SUCCESS) ++g_inits;
  return g_init_result;
}

nvmlReturn_t nvmlShutdown() {
  ++g_shutdowns;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  Copy(version, length, "550.54.15");
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, nvmlGpuP2PCapsIndex_t index,
                                    nvmlGpuP2PStatus_t* status) {
  if (g_linked == 0 || a == nullptr || b == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  const bool pair = (a->gpu == 0 && b->gpu == 1) || (a->gpu == 1 && b->gpu == 0);
  *status = index == NVML_P2P_CAPS_INDEX_NVLINK && g_linked == 1 && pair ? NVML_P2P_STATUS_OK : 5;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
                                                 nvmlGpuTopologyLevel_t* level) {
  if (g_linked == 0 || a == nullptr || b == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  const bool pair = (a->gpu == 0 && b->gpu == 1) || (a->gpu == 1 && b->gpu == 0);
  *level = g_linked == 2 && pair ? NVML_TOPOLOGY_SINGLE : NVML_TOPOLOGY_SYSTEM;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = static_cast<unsigned int>(g_device_count);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (index >= static_cast<unsigned int>(g_device_count)) return NVML_ERROR_INVALID_ARGUMENT;
  if (index == 2) return NVML_ERROR_NO_PERMISSION;  // e.g. not in this container's cgroup
  *device = &g_gpus[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  if (const FakeMig* m = MigOf(device)) {
    Copy(name, length, m->name);
  } else {
    Copy(name, length, device->gpu == 0 ? "NVIDIA A100-SXM4-80GB" : "Tesla T4");
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  if (const FakeMig* m = MigOf(device)) {
    Copy(uuid, length, m->uuid);
  } else {
    Copy(uuid, length, device->gpu == 0 ? "GPU-fake-a100" : "GPU-fake-t4");
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  unsigned long long total_mib = 0;
  unsigned long long used_mib = 0;
  if (const FakeMig* m = MigOf(device)) {
    total_mib = 40960;
    used_mib = m->used_mib;
  } else if (device->gpu == 0) {
    total_mib = 81920;
    used_mib = 5000;
  } else {
    total_mib = 15360;
    used_mib = 1536;
  }
  memory->total = total_mib * kMiB;
  memory->used = used_mib * kMiB;
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* util) {
  if (device->mig >= 0 || device->gpu == 0) return NVML_ERROR_NOT_SUPPORTED;  // MIG mode
  util->gpu = 37;
  util->memory = 12;
  return NVML_SUCCESS;
}

namespace {

nvmlReturn_t Processes(nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos) {
  nvmlProcessInfo_t list[128];
  unsigned int n = 0;
  if (const FakeMig* m = MigOf(device)) {
    if (m->pid != 0) list[n++] = {m->pid, m->pid_mib * kMiB, m->gi_id, 0};
  } else if (device->gpu == 0) {
    return NVML_ERROR_NO_PERMISSION;  // the parent of MIG devices, unprivileged
  } else {
    list[n++] = {200, 1024 * kMiB, 0xFFFFFFFFu, 0xFFFFFFFFu};
    list[n++] = {201, NVML_VALUE_NOT_AVAILABLE, 0xFFFFFFFFu, 0xFFFFFFFFu};
    for (unsigned int i = 0; i < g_extra_t4_processes && n < 128; ++i) {
      list[n++] = {300 + i, kMiB, 0xFFFFFFFFu, 0xFFFFFFFFu};
    }
  }
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  *count = n;
  for (unsigned int i = 0; i < n; ++i) infos[i] = list[i];
  return NVML_SUCCESS;
}

}  // namespace

#ifndef FAKE_NVML_NO_V3
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return Processes(device, count, infos);
}
#endif

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return Processes(device, count, infos);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                  unsigned int* pending) {
  if (device->gpu != 0) return NVML_ERROR_NOT_SUPPORTED;
  *current = *pending = NVML_DEVICE_MIG_ENABLE;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  *count = device->gpu == 0 ? 7 : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t* mig) {
  if (device->gpu != 0 || index >= 7) return NVML_ERROR_INVALID_ARGUMENT;
  if (kMigs[index] == nullptr) return NVML_ERROR_NOT_FOUND;
  *mig = &g_migs[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  const FakeMig* m = MigOf(device);
  if (m == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  *id = m->gi_id;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t* gi) {
  if (!g_privileged) return NVML_ERROR_NO_PERMISSION;
  if (device->gpu != 0) return NVML_ERROR_NOT_SUPPORTED;
  for (int i = 0; i < 3; ++i) {
    if (kGis[i].id == id) {
      *gi = &g_gi_handles[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gi, nvmlGpuInstanceInfo_t* info) {
  const FakeGi& g = kGis[gi->gi];
  info->device = &g_gpus[0];
  info->id = g.id;
  info->profileId = g.profile_id;
  info->placement = {g.start, g.size};
  return NVML_SUCCESS;
}

}  // extern "C"
