// A node as the scheduler sees it: capacity, what is free, and its GPUs (with MIG layouts).
// Plain data; the scheduler's ClusterState keeps the indexes over these.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpupool {

inline constexpr int32_t kMilliPerGpu = 1000;

// One MIG GPU instance on a GPU in MIG mode: a profile (index into the model's mig_profiles)
// placed at a start slot. `in_use` is true while a task is bound to it.
struct MigInstance {
  int profile = -1;
  int start = 0;
  bool in_use = false;

  friend bool operator==(const MigInstance&, const MigInstance&) = default;
};

struct Gpu {
  std::string model;    // canonical catalog name, or an opaque name ("G2")
  std::string uuid;     // NVML UUID ("GPU-…"), or a generated one for simulated GPUs
  int64_t mem_mib = 0;  // total memory; 0 when unknown (opaque trace models)
  int32_t milli_free = kMilliPerGpu;  // compute share not yet given to tasks (0..1000)
  int64_t mem_free_mib = 0;           // memory not yet reserved by fractional tasks
  bool mig_enabled = false;           // in MIG mode: only MIG requests may use it
  std::vector<MigInstance> mig_instances;
  // The GPUs of a node with one link group share its closest interconnect (an NVLink domain, or
  // one PCIe switch): a task's GPUs are taken from one group where they fit. -1: not known.
  int link_group = -1;

  bool Idle() const;  // nothing bound: full share free and no MIG instance in use

  friend bool operator==(const Gpu&, const Gpu&) = default;
};

struct Node {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t cpu_free_milli = 0;
  int64_t memory_free_mib = 0;
  std::vector<Gpu> gpus;
  std::map<std::string, std::string> labels;
  bool schedulable = true;  // false once cordoned
  // Disk for task workspaces (free on the file system of its agent's task root when it
  // registered), GiB; 0: not reported, and then disk is not scheduled on it. disk_free_gib: what
  // the tasks bound to it have not reserved.
  int64_t disk_gib = 0;
  int64_t disk_free_gib = 0;
  // Its agent's docker runtime works (tasks with an image may run here), and can give
  // containers its GPUs (simulated ones, or real ones through the NVIDIA container runtime).
  bool docker = false;
  bool docker_gpus = false;
  // Its agent mounts the shared storage (--shared-storage): tasks with shared volumes run here.
  bool shared_storage = false;
  std::string runtime_note;  // its agent's word on them ("docker 20.10.24 …", or why not)
  // The public host key ("TYPE BASE64") of the SSH server its agent runs for tasks (ssh into a
  // task, docs/api.md "SSH"); empty: the node offers none.
  std::string ssh_host_key;
  // Where other nodes reach it (an IP address or host name; its agent's --advertise-addr, or the
  // address it reaches the server from): a distributed job's MASTER_ADDR and member hosts.
  // Empty: not said (then its name stands in).
  std::string address;

  // A node with every resource free, `gpu_count` GPUs of `model` (memory from the catalog,
  // or `gpu_mem_mib` when given).
  static Node Make(std::string name, int64_t cpu_milli, int64_t memory_mib, int gpu_count,
                   const std::string& model, int64_t gpu_mem_mib = 0);

  friend bool operator==(const Node&, const Node&) = default;
};

}  // namespace gpupool
