// The small subset of NVML (nvml.h, NVIDIA Management Library) that NvmlProbe resolves with
// dlsym, declared here so the agent builds without the CUDA toolkit. Types, constants and
// signatures follow nvml.h of CUDA 11.x/12.x; fake_nvml.cc implements the same subset for tests.
#pragma once

#include <cstddef>

extern "C" {

typedef int nvmlReturn_t;  // an enum in nvml.h; int-sized on every ABI NVML ships for
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlGpuInstance_st* nvmlGpuInstance_t;

// nvmlReturn_t values used here.
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
constexpr nvmlReturn_t NVML_ERROR_NO_PERMISSION = 4;
constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr nvmlReturn_t NVML_ERROR_DRIVER_NOT_LOADED = 9;
constexpr nvmlReturn_t NVML_ERROR_GPU_IS_LOST = 15;
constexpr nvmlReturn_t NVML_ERROR_UNKNOWN = 999;

constexpr unsigned int NVML_DEVICE_MIG_ENABLE = 1;            // nvmlDeviceGetMigMode
constexpr unsigned int NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;  // nvmlDeviceGetName
constexpr unsigned int NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;  // nvmlDeviceGetUUID
constexpr unsigned int NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;
constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = ~0ULL;  // usedGpuMemory unknown

// nvmlGpuTopologyLevel_t (nvmlDeviceGetTopologyCommonAncestor): the closest common ancestor of
// two GPUs, nearest first.
typedef int nvmlGpuTopologyLevel_t;
constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_INTERNAL = 0;     // one board
constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_SINGLE = 10;      // one PCIe switch
constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_MULTIPLE = 20;    // several PCIe switches
constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_HOSTBRIDGE = 30;  // one host bridge
constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_NODE = 40;        // one NUMA node
constexpr nvmlGpuTopologyLevel_t NVML_TOPOLOGY_SYSTEM = 50;      // across NUMA nodes

// nvmlDeviceGetP2PStatus: which capability is asked, and its answer.
typedef int nvmlGpuP2PCapsIndex_t;
constexpr nvmlGpuP2PCapsIndex_t NVML_P2P_CAPS_INDEX_NVLINK = 2;
typedef int nvmlGpuP2PStatus_t;
constexpr nvmlGpuP2PStatus_t NVML_P2P_STATUS_OK = 0;

// GPU instance profile ids (NVML_GPU_INSTANCE_PROFILE_*), as nvmlGpuInstanceInfo_t.profileId.
constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_1_SLICE = 0x0;
constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_2_SLICE = 0x1;
constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_3_SLICE = 0x2;
constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_4_SLICE = 0x3;
constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_7_SLICE = 0x4;
constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_8_SLICE = 0x5;
constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_6_SLICE = 0x6;
constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 = 0x7;  // 1g with media extensions
constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 = 0x8;  // 2g with media extensions
constexpr unsigned int NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 = 0x9;  // 1g with 2 memory slices

typedef struct nvmlMemory_st {  // v1, bytes
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlUtilization_st {  // percent over the driver's last sample period
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

// nvmlProcessInfo_v2_t, the struct that both nvmlDeviceGetComputeRunningProcesses_v2 and _v3
// fill (24 bytes: 4 bytes of padding after pid). The v1 struct (pid, usedGpuMemory only) belongs
// to the unversioned function, which is not used. Some DCGM copies of nvml.h add a trailing
// usedGpuCcProtectedMemory; the driver headers' nvmlProcessInfo_t does not have it, and the
// struct size is what the driver writes, so this is the one place to revisit if NVIDIA changes it.
typedef struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes, or NVML_VALUE_NOT_AVAILABLE
  unsigned int gpuInstanceId;        // 0xFFFFFFFF when MIG is off
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

typedef struct nvmlGpuInstancePlacement_st {
  unsigned int start;  // first memory slice
  unsigned int size;   // memory slices
} nvmlGpuInstancePlacement_t;

typedef struct nvmlGpuInstanceInfo_st {
  nvmlDevice_t device;  // parent device
  unsigned int id;
  unsigned int profileId;  // NVML_GPU_INSTANCE_PROFILE_*
  nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(sizeof(nvmlUtilization_t) == 8);
static_assert(sizeof(nvmlProcessInfo_t) == 24);
static_assert(offsetof(nvmlProcessInfo_t, usedGpuMemory) == 8);
static_assert(sizeof(nvmlGpuInstanceInfo_t) == 24);

// Function types, one per symbol resolved.
typedef nvmlReturn_t (*nvmlInit_v2_fn)();
typedef nvmlReturn_t (*nvmlShutdown_fn)();
typedef const char* (*nvmlErrorString_fn)(nvmlReturn_t result);
typedef nvmlReturn_t (*nvmlSystemGetDriverVersion_fn)(char* version, unsigned int length);
typedef nvmlReturn_t (*nvmlDeviceGetCount_v2_fn)(unsigned int* device_count);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_v2_fn)(unsigned int index, nvmlDevice_t* device);
typedef nvmlReturn_t (*nvmlDeviceGetName_fn)(nvmlDevice_t device, char* name, unsigned int length);
typedef nvmlReturn_t (*nvmlDeviceGetUUID_fn)(nvmlDevice_t device, char* uuid, unsigned int length);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_fn)(nvmlDevice_t device, nvmlMemory_t* memory);
typedef nvmlReturn_t (*nvmlDeviceGetUtilizationRates_fn)(nvmlDevice_t device,
                                                         nvmlUtilization_t* utilization);
// _v3 and _v2 share this signature and struct.
typedef nvmlReturn_t (*nvmlDeviceGetComputeRunningProcesses_fn)(nvmlDevice_t device,
                                                                unsigned int* info_count,
                                                                nvmlProcessInfo_t* infos);
typedef nvmlReturn_t (*nvmlDeviceGetMigMode_fn)(nvmlDevice_t device, unsigned int* current_mode,
                                                unsigned int* pending_mode);
typedef nvmlReturn_t (*nvmlDeviceGetMaxMigDeviceCount_fn)(nvmlDevice_t device, unsigned int* count);
typedef nvmlReturn_t (*nvmlDeviceGetMigDeviceHandleByIndex_fn)(nvmlDevice_t device,
                                                               unsigned int index,
                                                               nvmlDevice_t* mig_device);
typedef nvmlReturn_t (*nvmlDeviceGetGpuInstanceId_fn)(nvmlDevice_t mig_device, unsigned int* id);
// Needs a privileged user on most drivers; NvmlProbe falls back when it fails.
typedef nvmlReturn_t (*nvmlDeviceGetGpuInstanceById_fn)(nvmlDevice_t device, unsigned int id,
                                                        nvmlGpuInstance_t* gpu_instance);
typedef nvmlReturn_t (*nvmlGpuInstanceGetInfo_fn)(nvmlGpuInstance_t gpu_instance,
                                                  nvmlGpuInstanceInfo_t* info);
typedef nvmlReturn_t (*nvmlDeviceGetTopologyCommonAncestor_fn)(nvmlDevice_t device1,
                                                               nvmlDevice_t device2,
                                                               nvmlGpuTopologyLevel_t* path_info);
typedef nvmlReturn_t (*nvmlDeviceGetP2PStatus_fn)(nvmlDevice_t device1, nvmlDevice_t device2,
                                                  nvmlGpuP2PCapsIndex_t p2p_index,
                                                  nvmlGpuP2PStatus_t* p2p_status);

}  // extern "C"
