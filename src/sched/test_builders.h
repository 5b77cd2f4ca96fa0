// Builders for the scheduler's tests (not part of gpupool_sched): nodes with chosen GPUs and what
// is left on them, task requests built up from one form (Share(250).Cpu(1000, 1024).Priority(2)),
// readers of a node's GPUs, a policy that must exist, and test names from table rows.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/node.h"
#include "core/task.h"
#include "sched/policy.h"

namespace gpupool::sched {

// GPU memory of a GPU whose model is not in the catalog ("G1", "G2", … as in the traces).
inline constexpr int64_t kOpaqueGpuMemMib = 16384;

// A node with every resource free and one GPU per entry of `models`; catalog models get their own
// memory, opaque ones kOpaqueGpuMemMib.
inline Node TestNode(const std::string& name, const std::vector<std::string>& models,
                     int64_t cpu_milli, int64_t memory_mib) {
  Node n = Node::Make(name, cpu_milli, memory_mib, 0, "");
  for (const std::string& m : models) {
    const int64_t mem = FindGpuModel(m) != nullptr ? 0 : kOpaqueGpuMemMib;
    Gpu g = Node::Make(name, 0, 0, 1, m, mem).gpus.at(0);
    g.uuid = "GPU-" + name + "-" + std::to_string(n.gpus.size());  // as Node::Make numbers them
    n.gpus.push_back(std::move(g));
  }
  return n;
}

// `count` GPUs of `model` (the same node as Node::Make makes).
inline Node TestNode(const std::string& name, int count, const std::string& model,
                     int64_t cpu_milli, int64_t memory_mib) {
  return TestNode(name, std::vector<std::string>(static_cast<size_t>(count), model), cpu_milli,
                  memory_mib);
}

// In a lefts list: the GPU is in MIG mode (no instances).
inline constexpr int32_t kMig = -1;

// Sets the milli left on each GPU, as if tasks held the rest (kMig: MIG mode instead).
inline Node WithLefts(Node n, const std::vector<int32_t>& lefts) {
  for (size_t i = 0; i < lefts.size(); ++i) {
    if (lefts[i] == kMig) {
      n.gpus.at(i).mig_enabled = true;
    } else {
      n.gpus.at(i).milli_free = lefts[i];
    }
  }
  return n;
}

inline Node WithCpuFree(Node n, int64_t cpu_free_milli) {
  n.cpu_free_milli = cpu_free_milli;
  return n;
}

inline Node WithMemFree(Node n, int gpu, int64_t mem_free_mib) {
  n.gpus.at(static_cast<size_t>(gpu)).mem_free_mib = mem_free_mib;
  return n;
}

inline Node WithModel(Node n, int gpu, const std::string& model) {
  n.gpus.at(static_cast<size_t>(gpu)).model = model;
  return n;
}

inline Node Cordoned(Node n) {
  n.schedulable = false;
  return n;
}

// A MIG instance by profile name, start slot and whether a task uses it.
struct MigInst {
  const char* profile;
  int start;
  bool in_use;
};

// Puts GPU `gpu` (a catalog model) in MIG mode (or not, with `mig_mode` false) with `instances`.
inline Node WithMig(Node n, int gpu, const std::vector<MigInst>& instances, bool mig_mode = true) {
  Gpu& g = n.gpus.at(static_cast<size_t>(gpu));
  g.mig_enabled = mig_mode;
  const GpuModelInfo* info = FindGpuModel(g.model);
  for (const MigInst& i : instances) {
    g.mig_instances.push_back(MigInstance{info->ProfileIndex(i.profile), i.start, i.in_use});
  }
  return n;
}

// The milli left on each GPU of `n`.
inline std::vector<int32_t> MilliFree(const Node& n) {
  std::vector<int32_t> v;
  for (const Gpu& g : n.gpus) v.push_back(g.milli_free);
  return v;
}

// The GPU memory free on each GPU of `n`.
inline std::vector<int64_t> MemFree(const Node& n) {
  std::vector<int64_t> v;
  for (const Gpu& g : n.gpus) v.push_back(g.mem_free_mib);
  return v;
}

// A TaskRequest built up a field at a time; each step returns a changed copy.
struct Req : TaskRequest {
  Req Cpu(int64_t milli, int64_t mib = 0) const {
    return Set(&TaskRequest::cpu_milli, milli).Set(&TaskRequest::memory_mib, mib);
  }
  Req Share(int32_t milli) const { return Set(&TaskRequest::gpu_milli, milli); }
  Req Whole(int count) const { return Set(&TaskRequest::gpu_count, count); }
  Req Mig(std::string profile) const { return Set(&TaskRequest::mig_profile, std::move(profile)); }
  Req GpuMem(int64_t mib) const { return Set(&TaskRequest::gpu_mem_mib, mib); }
  Req Models(std::vector<std::string> models) const {
    return Set(&TaskRequest::gpu_models, std::move(models));
  }
  Req Priority(int value) const { return Set(&TaskRequest::priority, value); }
  Req Gang(std::string id, int size) const {
    return Set(&TaskRequest::gang_id, std::move(id)).Set(&TaskRequest::gang_size, size);
  }
  Req PerNode(int members) const { return Set(&TaskRequest::members_per_node, members); }
  Req Topology(std::string label, gpupool::Topology mode) const {
    return Set(&TaskRequest::topology_label, std::move(label)).Set(&TaskRequest::topology, mode);
  }
  Req OnNode(std::string name) const { return Set(&TaskRequest::node, std::move(name)); }
  Req SharedStorage() const { return Set(&TaskRequest::shared_storage, true); }
  Req Prefer(std::vector<std::string> nodes) const {
    return Set(&TaskRequest::prefer_nodes, std::move(nodes));
  }

 private:
  template <typename T>
  Req Set(T TaskRequest::*field, T value) const {
    Req r = *this;
    r.*field = std::move(value);
    return r;
  }
};

// The forms, asking for no CPU or memory (add them with .Cpu, or start from CpuOnly).
inline Req CpuOnly(int64_t milli, int64_t mib = 0) { return Req{}.Cpu(milli, mib); }
inline Req Share(int32_t milli) { return Req{}.Share(milli); }
inline Req Whole(int count) { return Req{}.Whole(count); }
inline Req Mig(std::string profile) { return Req{}.Mig(std::move(profile)); }

// The policy called `name`; a failure to make it fails the test.
inline std::unique_ptr<Policy> MustMakePolicy(const std::string& name, PolicyOptions options = {}) {
  Result<std::unique_ptr<Policy>> p = MakePolicy(name, options);
  EXPECT_TRUE(p.has_value()) << name << ": " << p.error().message;
  return p ? std::move(*p) : nullptr;
}

// Test names from the rows' `name` (INSTANTIATE_TEST_SUITE_P's last argument).
struct RowName {
  template <typename Row>
  std::string operator()(const testing::TestParamInfo<Row>& row) const {
    return std::string(row.param.name);
  }
};

}  // namespace gpupool::sched
