// NvmlProbe: NVML resolved with dlopen/dlsym (declarations in nvml_api.h), GPUs and their MIG
// instances read at Discover, utilisation, memory and processes read at Sample; and the pure
// NVML name → catalog mappings.
#include "agent/gpu/nvml_probe.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "agent/gpu/nvml_api.h"
#include "core/mig.h"

namespace gpupool::agent {
namespace {

constexpr unsigned long long kMiB = 1024ULL * 1024ULL;

std::vector<std::string> Tokens(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c)) {
      cur.push_back(static_cast<char>(std::tolower(c)));
    } else if (!cur.empty()) {
      out.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

// "80gb" → 80; anything else → -1.
int GbToken(const std::string& t) {
  if (t.size() < 3 || !t.ends_with("gb")) return -1;
  int gb = 0;
  for (size_t i = 0; i + 2 < t.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(t[i])) || gb > 100000) return -1;
    gb = gb * 10 + (t[i] - '0');
  }
  return gb;
}

// How NVML product names map to catalog models: every `family` token present, no `forbid`
// token present, and a "<N>gb" token, when the name has one, equal to `nominal_gb`.
struct ModelRule {
  const char* canonical;
  std::array<const char*, 2> family;
  std::array<const char*, 3> forbid;
  int nominal_gb;
};

constexpr ModelRule kModelRules[] = {
    {"A100-40GB", {"a100"}, {}, 40},
    {"A100-80GB", {"a100"}, {}, 80},
    {"H100-80GB", {"h100"}, {"nvl"}, 80},  // H100 NVL has 94 GB
    {"H200-141GB", {"h200"}, {}, 141},
    {"A30-24GB", {"a30"}, {}, 24},
    {"V100-16GB", {"v100"}, {}, 16},
    {"V100-32GB", {"v100"}, {}, 32},
    {"P100-16GB", {"p100"}, {}, 16},
    {"T4", {"t4"}, {}, 16},
    {"A10", {"a10"}, {}, 24},
    {"L40S", {"l40s"}, {}, 48},
    {"RTX3090", {"rtx", "3090"}, {"ti", "laptop"}, 24},
    {"RTX4090", {"rtx", "4090"}, {"ti", "d", "laptop"}, 24},
};

bool Has(const std::vector<std::string>& tokens, const char* t) {
  return std::find(tokens.begin(), tokens.end(), t) != tokens.end();
}

bool MemoryFits(int64_t reported_mib, int64_t catalog_mib) {
  if (reported_mib <= 0 || catalog_mib <= 0) return true;
  const int64_t diff =
      reported_mib > catalog_mib ? reported_mib - catalog_mib : catalog_mib - reported_mib;
  return diff * 10 <= catalog_mib;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

int64_t ToMiB(unsigned long long bytes) { return static_cast<int64_t>(bytes / kMiB); }

// The profile's compute slices and whether it is a media-extension ("+me") or double-memory 1g
// profile, by NVML GPU instance profile id; compute 0 when unknown.
struct NvmlProfileShape {
  int compute = 0;
  bool media_ext = false;
  bool double_memory = false;
};

NvmlProfileShape ShapeOf(unsigned int id) {
  switch (id) {
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE:
      return {1, false, false};
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE:
      return {2, false, false};
    case NVML_GPU_INSTANCE_PROFILE_3_SLICE:
      return {3, false, false};
    case NVML_GPU_INSTANCE_PROFILE_4_SLICE:
      return {4, false, false};
    case NVML_GPU_INSTANCE_PROFILE_7_SLICE:
      return {7, false, false};
    case NVML_GPU_INSTANCE_PROFILE_8_SLICE:
      return {8, false, false};
    case NVML_GPU_INSTANCE_PROFILE_6_SLICE:
      return {6, false, false};
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1:
      return {1, true, false};
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1:
      return {2, true, false};
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2:
      return {1, false, true};
    default:
      return {};
  }
}

// dlsym into a typed function pointer (nullptr when absent).
template <typename Fn>
Fn Sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  Fn fn = nullptr;
  static_assert(sizeof(fn) == sizeof(p));
  std::memcpy(&fn, &p, sizeof(fn));
  return fn;
}

}  // namespace

std::string CatalogModelForNvmlName(std::string_view nvml_name, int64_t mem_mib) {
  const std::string name = Trim(nvml_name);
  if (const GpuModelInfo* exact = FindGpuModel(name)) return exact->name;
  const std::vector<std::string> tokens = Tokens(name);
  int name_gb = -1;
  for (const std::string& t : tokens) {
    if (const int gb = GbToken(t); gb > 0) name_gb = gb;
  }
  const char* found = nullptr;
  for (const ModelRule& r : kModelRules) {
    bool ok = true;
    for (const char* f : r.family) ok = ok && (f == nullptr || Has(tokens, f));
    for (const char* f : r.forbid) ok = ok && (f == nullptr || !Has(tokens, f));
    if (!ok || (name_gb > 0 && name_gb != r.nominal_gb)) continue;
    const GpuModelInfo* info = FindGpuModel(r.canonical);
    if (info == nullptr || !MemoryFits(mem_mib, info->mem_mib)) continue;
    if (found != nullptr) return name;  // ambiguous (e.g. "A100" without memory): opaque
    found = r.canonical;
  }
  return found != nullptr ? std::string(found) : name;
}

int CatalogMigProfileForNvml(const GpuModelInfo& model, unsigned int nvml_profile_id,
                             unsigned int memory_slices) {
  const NvmlProfileShape shape = ShapeOf(nvml_profile_id);
  if (shape.compute == 0) return -1;
  for (size_t i = 0; i < model.mig_profiles.size(); ++i) {
    const MigProfile& p = model.mig_profiles[i];
    const bool me = p.name.find("+me") != std::string::npos;
    if (p.compute_slices != shape.compute || me != shape.media_ext) continue;
    if (memory_slices > 0 && p.memory_slices != static_cast<int>(memory_slices)) continue;
    // Without the placement size, 1g profiles differ by memory: REV2 has two slices.
    if (memory_slices == 0 && shape.compute == 1 && !shape.media_ext &&
        (p.memory_slices > 1) != shape.double_memory) {
      continue;
    }
    return static_cast<int>(i);
  }
  return -1;
}

int CatalogMigProfileForMigDeviceName(const GpuModelInfo& model, std::string_view nvml_name) {
  const std::string name = Trim(nvml_name);
  const size_t space = name.rfind(' ');
  std::string profile = space == std::string::npos ? name : name.substr(space + 1);
  // A compute instance smaller than its GPU instance is named "1c.3g.40gb".
  const size_t dot = profile.find('.');
  if (dot != std::string::npos && dot > 0 && profile[dot - 1] == 'c' &&
      profile.find('.', dot + 1) != std::string::npos) {
    profile = profile.substr(dot + 1);
  }
  return model.ProfileIndex(profile);
}

// ---------------------------------------------------------------------------------------------

struct NvmlProbe::Impl {
  struct Api {
    void* lib = nullptr;
    nvmlInit_v2_fn init = nullptr;
    nvmlShutdown_fn shutdown = nullptr;
    nvmlDeviceGetCount_v2_fn get_count = nullptr;
    nvmlDeviceGetHandleByIndex_v2_fn get_handle = nullptr;
    nvmlDeviceGetName_fn get_name = nullptr;
    nvmlDeviceGetUUID_fn get_uuid = nullptr;
    nvmlDeviceGetMemoryInfo_fn get_memory = nullptr;
    // Optional: missing in old drivers, or features this build can live without.
    nvmlErrorString_fn error_string = nullptr;
    nvmlSystemGetDriverVersion_fn driver_version = nullptr;
    nvmlDeviceGetUtilizationRates_fn get_util = nullptr;
    nvmlDeviceGetComputeRunningProcesses_fn get_processes = nullptr;  // _v3, else _v2
    nvmlDeviceGetMigMode_fn get_mig_mode = nullptr;
    nvmlDeviceGetMaxMigDeviceCount_fn get_max_mig = nullptr;
    nvmlDeviceGetMigDeviceHandleByIndex_fn get_mig_handle = nullptr;
    nvmlDeviceGetGpuInstanceId_fn get_gi_id = nullptr;
    nvmlDeviceGetGpuInstanceById_fn get_gi_by_id = nullptr;
    nvmlGpuInstanceGetInfo_fn get_gi_info = nullptr;
    nvmlDeviceGetP2PStatus_fn get_p2p = nullptr;
    nvmlDeviceGetTopologyCommonAncestor_fn get_common_ancestor = nullptr;
  };

  // One GPU instance (a MIG instance in the catalog's sense). A GPU instance split into several
  // compute instances has one MIG device handle per compute instance: all are kept (processes
  // are listed per handle), the first one names the instance.
  struct Instance {
    unsigned int gi_id = 0;
    int profile = -1;  // catalog profile index, -1 when unknown
    int start = -1;    // -1 until known
    std::string uuid;
    std::vector<nvmlDevice_t> handles;
  };

  struct Device {
    nvmlDevice_t handle = nullptr;
    std::string uuid;
    bool mig_enabled = false;
    std::vector<Instance> instances;  // by start slot
  };

  Api api;

  // Gpu::link_group from what NVML says of each pair: GPUs joined by NVLink (directly or through
  // others: an NVSwitch domain) form a group; on a node without NVLink, GPUs under one PCIe
  // switch tree (common ancestor at most NVML_TOPOLOGY_MULTIPLE) do. Left -1 when the driver
  // answers neither question.
  void AssignLinkGroups(const std::vector<Device>& found, std::vector<Gpu>& gpus) const {
    const size_t n = found.size();
    std::vector<size_t> parent(n);
    for (size_t i = 0; i < n; ++i) parent[i] = i;
    const auto root = [&](size_t i) {
      while (parent[i] != i) i = parent[i] = parent[parent[i]];
      return i;
    };
    const auto join = [&](const auto& linked) {
      bool any = false;
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = i + 1; j < n; ++j) {
          if (!linked(found[i].handle, found[j].handle)) continue;
          parent[root(i)] = root(j);
          any = true;
        }
      }
      return any;
    };
    bool known = false;
    if (api.get_p2p != nullptr) {
      known = join([&](nvmlDevice_t a, nvmlDevice_t b) {
        nvmlGpuP2PStatus_t status = -1;
        return api.get_p2p(a, b, NVML_P2P_CAPS_INDEX_NVLINK, &status) == NVML_SUCCESS &&
               status == NVML_P2P_STATUS_OK;
      });
    }
    if (!known && api.get_common_ancestor != nullptr) {
      bool answered = false;
      join([&](nvmlDevice_t a, nvmlDevice_t b) {
        nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_SYSTEM;
        if (api.get_common_ancestor(a, b, &level) != NVML_SUCCESS) return false;
        answered = true;
        return level <= NVML_TOPOLOGY_MULTIPLE;
      });
      known = answered;
    }
    if (!known || n < 2) return;
    std::map<size_t, int> group_of_root;  // groups numbered by their first GPU's index
    for (size_t i = 0; i < n; ++i) {
      const int next = static_cast<int>(group_of_root.size());
      gpus[i].link_group = group_of_root.emplace(root(i), next).first->second;
    }
  }
  std::mutex mu;
  std::vector<Device> devices;  // as of the last Discover
  std::vector<nvmlProcessInfo_t> scratch = std::vector<nvmlProcessInfo_t>(64);

  ~Impl() {
    if (api.shutdown != nullptr) api.shutdown();
    if (api.lib != nullptr) dlclose(api.lib);
  }

  std::string Describe(const char* fn, nvmlReturn_t r) const {
    std::string s = std::string(fn) + ": NVML error " + std::to_string(r);
    if (api.error_string != nullptr) {
      if (const char* text = api.error_string(r)) s += std::string(" (") + text + ")";
    }
    return s;
  }

  std::string DeviceString(nvmlDevice_t h, nvmlDeviceGetName_fn fn) const {
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (fn(h, buf, sizeof(buf)) != NVML_SUCCESS) return {};
    buf[sizeof(buf) - 1] = '\0';
    return buf;
  }

  // The device's MIG instances (empty when not in MIG mode or NVML cannot list them).
  std::vector<Instance> ReadInstances(nvmlDevice_t parent, const GpuModelInfo* model) const {
    std::vector<Instance> out;
    unsigned int max = 0;
    if (api.get_max_mig == nullptr || api.get_mig_handle == nullptr ||
        api.get_max_mig(parent, &max) != NVML_SUCCESS) {
      return out;
    }
    for (unsigned int i = 0; i < max; ++i) {
      nvmlDevice_t mig = nullptr;
      if (api.get_mig_handle(parent, i, &mig) != NVML_SUCCESS || mig == nullptr) continue;
      unsigned int gi_id = 1000 + i;  // without the id, every handle is its own instance
      if (api.get_gi_id != nullptr) api.get_gi_id(mig, &gi_id);
      auto it = std::find_if(out.begin(), out.end(),
                             [&](const Instance& in) { return in.gi_id == gi_id; });
      if (it != out.end()) {
        it->handles.push_back(mig);
        continue;
      }
      Instance in;
      in.gi_id = gi_id;
      in.uuid = DeviceString(mig, api.get_uuid);
      in.handles.push_back(mig);
      if (model != nullptr) {
        nvmlGpuInstance_t gi = nullptr;
        nvmlGpuInstanceInfo_t info{};
        // Needs a privileged user on most drivers; without it, the profile comes from the MIG
        // device's name and the start is inferred below.
        if (api.get_gi_by_id != nullptr && api.get_gi_info != nullptr &&
            api.get_gi_by_id(parent, gi_id, &gi) == NVML_SUCCESS &&
            api.get_gi_info(gi, &info) == NVML_SUCCESS) {
          in.profile = CatalogMigProfileForNvml(*model, info.profileId, info.placement.size);
          in.start = static_cast<int>(info.placement.start);
        }
        if (in.profile < 0) {
          in.profile = CatalogMigProfileForMigDeviceName(*model, DeviceString(mig, api.get_name));
        }
      }
      out.push_back(std::move(in));
    }
    if (model == nullptr) return out;
    // Instances whose start NVML did not give: the first legal start left, in order (exact for
    // layouts created in that order, as `nvidia-smi mig -cgi` does without placements).
    Gpu scratch_gpu;
    for (const Instance& in : out) {
      if (in.profile >= 0 && in.start >= 0) {
        scratch_gpu.mig_instances.push_back(MigInstance{in.profile, in.start, false});
      }
    }
    for (Instance& in : out) {
      if (in.profile < 0 || in.start >= 0) continue;
      const uint32_t occupied = MigOccupiedSlots(*model, scratch_gpu);
      const int existing = static_cast<int>(
          std::count_if(scratch_gpu.mig_instances.begin(), scratch_gpu.mig_instances.end(),
                        [&](const MigInstance& m) { return m.profile == in.profile; }));
      for (int s : model->mig_profiles[static_cast<size_t>(in.profile)].starts) {
        if (MigStartLegal(*model, in.profile, s, occupied, existing)) {
          in.start = s;
          scratch_gpu.mig_instances.push_back(MigInstance{in.profile, s, false});
          break;
        }
      }
    }
    std::sort(out.begin(), out.end(),
              [](const Instance& a, const Instance& b) { return a.start < b.start; });
    return out;
  }

  // Appends the compute processes on `h` (tagged with `mig_uuid`) to `out`.
  void ReadProcesses(nvmlDevice_t h, const std::string& mig_uuid, std::vector<GpuProcess>& out) {
    if (api.get_processes == nullptr) return;
    unsigned int count = static_cast<unsigned int>(scratch.size());
    nvmlReturn_t r = api.get_processes(h, &count, scratch.data());
    for (int tries = 0; r == NVML_ERROR_INSUFFICIENT_SIZE && tries < 4; ++tries) {
      scratch.resize(std::max<size_t>(count, scratch.size()) + 16);
      count = static_cast<unsigned int>(scratch.size());
      r = api.get_processes(h, &count, scratch.data());
    }
    if (r != NVML_SUCCESS) return;
    count = std::min<unsigned int>(count, static_cast<unsigned int>(scratch.size()));
    for (unsigned int i = 0; i < count; ++i) {
      const nvmlProcessInfo_t& p = scratch[i];
      out.push_back(GpuProcess{
          static_cast<int>(p.pid),
          p.usedGpuMemory == NVML_VALUE_NOT_AVAILABLE ? int64_t{-1} : ToMiB(p.usedGpuMemory),
          mig_uuid});
    }
  }
};

std::unique_ptr<GpuProbe> NvmlProbe::Open(std::string* why_not, const std::string& library) {
  std::string ignored;
  std::string& why = why_not != nullptr ? *why_not : ignored;
  auto impl = std::make_unique<Impl>();
  Impl::Api& a = impl->api;
  a.lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (a.lib == nullptr) {
    const char* err = dlerror();
    const std::string text = err != nullptr ? err : "dlopen failed";
    why = text.find(library) != std::string::npos ? text : library + ": " + text;
    return nullptr;
  }
  a.error_string = Sym<nvmlErrorString_fn>(a.lib, "nvmlErrorString");
  a.driver_version = Sym<nvmlSystemGetDriverVersion_fn>(a.lib, "nvmlSystemGetDriverVersion");
  a.get_util = Sym<nvmlDeviceGetUtilizationRates_fn>(a.lib, "nvmlDeviceGetUtilizationRates");
  a.get_processes = Sym<nvmlDeviceGetComputeRunningProcesses_fn>(
      a.lib, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (a.get_processes == nullptr) {
    a.get_processes = Sym<nvmlDeviceGetComputeRunningProcesses_fn>(
        a.lib, "nvmlDeviceGetComputeRunningProcesses_v2");
  }
  a.get_mig_mode = Sym<nvmlDeviceGetMigMode_fn>(a.lib, "nvmlDeviceGetMigMode");
  a.get_max_mig = Sym<nvmlDeviceGetMaxMigDeviceCount_fn>(a.lib, "nvmlDeviceGetMaxMigDeviceCount");
  a.get_mig_handle =
      Sym<nvmlDeviceGetMigDeviceHandleByIndex_fn>(a.lib, "nvmlDeviceGetMigDeviceHandleByIndex");
  a.get_gi_id = Sym<nvmlDeviceGetGpuInstanceId_fn>(a.lib, "nvmlDeviceGetGpuInstanceId");
  a.get_gi_by_id = Sym<nvmlDeviceGetGpuInstanceById_fn>(a.lib, "nvmlDeviceGetGpuInstanceById");
  a.get_gi_info = Sym<nvmlGpuInstanceGetInfo_fn>(a.lib, "nvmlGpuInstanceGetInfo");
  a.get_p2p = Sym<nvmlDeviceGetP2PStatus_fn>(a.lib, "nvmlDeviceGetP2PStatus");
  a.get_common_ancestor =
      Sym<nvmlDeviceGetTopologyCommonAncestor_fn>(a.lib, "nvmlDeviceGetTopologyCommonAncestor");

  for (const char* name :
       {"nvmlInit_v2", "nvmlShutdown", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
        "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetMemoryInfo"}) {
    if (dlsym(a.lib, name) == nullptr) {
      why = library + " has no " + name + " (driver too old?)";
      return nullptr;  // ~Impl closes the library; shutdown is still null
    }
  }
  a.init = Sym<nvmlInit_v2_fn>(a.lib, "nvmlInit_v2");
  a.get_count = Sym<nvmlDeviceGetCount_v2_fn>(a.lib, "nvmlDeviceGetCount_v2");
  a.get_handle = Sym<nvmlDeviceGetHandleByIndex_v2_fn>(a.lib, "nvmlDeviceGetHandleByIndex_v2");
  a.get_name = Sym<nvmlDeviceGetName_fn>(a.lib, "nvmlDeviceGetName");
  a.get_uuid = Sym<nvmlDeviceGetUUID_fn>(a.lib, "nvmlDeviceGetUUID");
  a.get_memory = Sym<nvmlDeviceGetMemoryInfo_fn>(a.lib, "nvmlDeviceGetMemoryInfo");

  if (const nvmlReturn_t r = a.init(); r != NVML_SUCCESS) {
    why = library + ": " + impl->Describe("nvmlInit_v2", r);
    return nullptr;
  }
  a.shutdown = Sym<nvmlShutdown_fn>(a.lib, "nvmlShutdown");  // from here on ~Impl shuts down

  unsigned int count = 0;
  if (const nvmlReturn_t r = a.get_count(&count); r != NVML_SUCCESS) {
    why = library + ": " + impl->Describe("nvmlDeviceGetCount_v2", r);
    return nullptr;
  }
  if (count == 0) {
    why = library + ": NVML reports no GPU";
    return nullptr;
  }
  std::unique_ptr<NvmlProbe> probe(new NvmlProbe(std::move(impl)));
  Result<std::vector<Gpu>> gpus = probe->Discover();
  if (!gpus) {
    why = library + ": " + gpus.error().message;
    return nullptr;
  }
  if (gpus->empty()) {
    why = library + ": no GPU could be read";
    return nullptr;
  }
  return probe;
}

NvmlProbe::NvmlProbe(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NvmlProbe::~NvmlProbe() = default;

Result<std::vector<Gpu>> NvmlProbe::Discover() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const Impl::Api& a = impl_->api;
  unsigned int count = 0;
  if (const nvmlReturn_t r = a.get_count(&count); r != NVML_SUCCESS) {
    return MakeError(ErrorCode::kUnavailable, impl_->Describe("nvmlDeviceGetCount_v2", r));
  }
  std::vector<Impl::Device> devices;
  std::vector<Gpu> gpus;
  // A device NVML cannot open (no permission in this container, lost) is left out: the node
  // offers the GPUs it can use.
  for (unsigned int i = 0; i < count; ++i) {
    Impl::Device d;
    if (a.get_handle(i, &d.handle) != NVML_SUCCESS || d.handle == nullptr) continue;
    nvmlMemory_t mem{};
    if (a.get_memory(d.handle, &mem) != NVML_SUCCESS) continue;
    d.uuid = impl_->DeviceString(d.handle, a.get_uuid);
    if (d.uuid.empty()) continue;
    Gpu g;
    g.mem_mib = g.mem_free_mib = ToMiB(mem.total);
    g.model = CatalogModelForNvmlName(impl_->DeviceString(d.handle, a.get_name), g.mem_mib);
    if (g.model.empty()) g.model = "unknown";
    g.uuid = d.uuid;
    unsigned int current = 0;
    unsigned int pending = 0;
    d.mig_enabled = a.get_mig_mode != nullptr &&
                    a.get_mig_mode(d.handle, &current, &pending) == NVML_SUCCESS &&
                    current == NVML_DEVICE_MIG_ENABLE;
    g.mig_enabled = d.mig_enabled;
    if (d.mig_enabled) {
      const GpuModelInfo* model = FindGpuModel(g.model);
      d.instances = impl_->ReadInstances(d.handle, model);
      for (const Impl::Instance& in : d.instances) {
        if (in.profile >= 0 && in.start >= 0) {
          g.mig_instances.push_back(MigInstance{in.profile, in.start, false});
        }
      }
    }
    devices.push_back(std::move(d));
    gpus.push_back(std::move(g));
  }
  impl_->AssignLinkGroups(devices, gpus);
  impl_->devices = std::move(devices);
  return gpus;
}

Result<std::vector<GpuSample>> NvmlProbe::Sample() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const Impl::Api& a = impl_->api;
  std::vector<GpuSample> out;
  out.reserve(impl_->devices.size());
  for (size_t i = 0; i < impl_->devices.size(); ++i) {
    const Impl::Device& d = impl_->devices[i];
    GpuSample s;
    s.index = static_cast<int>(i);
    s.uuid = d.uuid;
    nvmlUtilization_t util{};
    if (a.get_util != nullptr && a.get_util(d.handle, &util) == NVML_SUCCESS) {
      s.util_pct = static_cast<int>(std::min(util.gpu, 100u));
    }
    nvmlMemory_t mem{};
    if (a.get_memory(d.handle, &mem) == NVML_SUCCESS) s.mem_used_mib = ToMiB(mem.used);
    if (d.instances.empty()) {
      impl_->ReadProcesses(d.handle, "", s.processes);
    } else {
      // In MIG mode the parent lists processes only to privileged users; each MIG device lists
      // its own to anyone.
      for (const Impl::Instance& in : d.instances) {
        MigSample m;
        m.uuid = in.uuid;
        m.start = in.start;
        nvmlMemory_t mig_mem{};
        if (a.get_memory(in.handles.front(), &mig_mem) == NVML_SUCCESS) {
          m.mem_used_mib = ToMiB(mig_mem.used);
        }
        for (nvmlDevice_t h : in.handles) impl_->ReadProcesses(h, in.uuid, s.processes);
        s.mig.push_back(std::move(m));
      }
    }
    // By pid; a process listed by two compute instances of one GPU instance counts once.
    std::sort(s.processes.begin(), s.processes.end(), [](const GpuProcess& x, const GpuProcess& y) {
      return x.pid != y.pid ? x.pid < y.pid : x.mig_uuid < y.mig_uuid;
    });
    s.processes.erase(std::unique(s.processes.begin(), s.processes.end(),
                                  [](const GpuProcess& x, const GpuProcess& y) {
                                    return x.pid == y.pid && x.mig_uuid == y.mig_uuid;
                                  }),
                      s.processes.end());
    if (s.mem_used_mib < 0 && !s.mig.empty()) {  // the parent did not say: Σ of its instances
      s.mem_used_mib = 0;
      for (const MigSample& m : s.mig) s.mem_used_mib += std::max<int64_t>(m.mem_used_mib, 0);
    }
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::string> NvmlProbe::MigInstanceUuid(int gpu_index, int start) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (gpu_index < 0 || gpu_index >= static_cast<int>(impl_->devices.size())) {
    return NotFound("gpu index " + std::to_string(gpu_index) + " out of range (" +
                    std::to_string(impl_->devices.size()) + " GPUs)");
  }
  for (const Impl::Instance& in : impl_->devices[static_cast<size_t>(gpu_index)].instances) {
    if (in.start == start && !in.uuid.empty()) return in.uuid;
  }
  return NotFound("GPU " + std::to_string(gpu_index) + " has no MIG instance at slot " +
                  std::to_string(start));
}

Status NvmlProbe::ApplyMigLayout(int, bool, const std::vector<MigInstance>&) {
  return MakeError(ErrorCode::kFailedPrecondition,
                   "MIG re-partitioning through NVML is not supported by this build");
}

std::string NvmlProbe::DriverVersion() const {
  if (impl_->api.driver_version == nullptr) return {};
  char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (impl_->api.driver_version(buf, sizeof(buf)) != NVML_SUCCESS) return {};
  buf[sizeof(buf) - 1] = '\0';
  return buf;
}

}  // namespace gpupool::agent
