// nlohmann_json encoders and decoders for the nested parts of records (see record_json.h).
// nlohmann reports errors by exception; they are caught here and never leave this file.
#include "store/record_json.h"

#include <exception>
#include <nlohmann/json.hpp>

namespace gpupool::store {
namespace {

using nlohmann::json;

// Sets `*field` from `j[key]` when present (a missing key keeps the default).
template <typename T>
void Get(const json& j, const char* key, T* field) {
  if (auto it = j.find(key); it != j.end()) it->get_to(*field);
}

json Encode(const TaskRequest& r) {
  return json{{"cpu_milli", r.cpu_milli},
              {"memory_mib", r.memory_mib},
              {"gpu_count", r.gpu_count},
              {"gpu_milli", r.gpu_milli},
              {"gpu_mem_mib", r.gpu_mem_mib},
              {"mig_profile", r.mig_profile},
              {"gpu_models", r.gpu_models},
              {"priority", r.priority},
              {"gang_id", r.gang_id},
              {"gang_size", r.gang_size},
              {"members_per_node", r.members_per_node},
              {"topology_label", r.topology_label},
              {"topology", TopologyName(r.topology)}};
}

void Decode(const json& j, TaskRequest* r) {
  Get(j, "cpu_milli", &r->cpu_milli);
  Get(j, "memory_mib", &r->memory_mib);
  Get(j, "gpu_count", &r->gpu_count);
  Get(j, "gpu_milli", &r->gpu_milli);
  Get(j, "gpu_mem_mib", &r->gpu_mem_mib);
  Get(j, "mig_profile", &r->mig_profile);
  Get(j, "gpu_models", &r->gpu_models);
  Get(j, "priority", &r->priority);
  Get(j, "gang_id", &r->gang_id);
  Get(j, "gang_size", &r->gang_size);
  // Absent in records from before distributed jobs.
  Get(j, "members_per_node", &r->members_per_node);
  Get(j, "topology_label", &r->topology_label);
  if (auto it = j.find("topology"); it != j.end()) {
    r->topology = ParseTopology(it->get<std::string>()).value_or(Topology::kPreferred);
  }
}

json Encode(const TaskPlacement& p) {
  return json{{"node", p.node},
              {"gpus", p.gpus},
              {"milli_per_gpu", p.milli_per_gpu},
              {"gpu_mem_mib", p.gpu_mem_mib},
              {"mig_profile", p.mig_profile},
              {"mig_start", p.mig_start},
              {"rendezvous_port", p.rendezvous_port}};
}

void Decode(const json& j, TaskPlacement* p) {
  Get(j, "node", &p->node);
  Get(j, "gpus", &p->gpus);
  Get(j, "milli_per_gpu", &p->milli_per_gpu);
  Get(j, "gpu_mem_mib", &p->gpu_mem_mib);
  Get(j, "mig_profile", &p->mig_profile);
  Get(j, "mig_start", &p->mig_start);
  Get(j, "rendezvous_port", &p->rendezvous_port);
}

json Encode(const Gpu& g) {
  json instances = json::array();
  for (const MigInstance& m : g.mig_instances) {
    instances.push_back(json{{"profile", m.profile}, {"start", m.start}, {"in_use", m.in_use}});
  }
  return json{{"model", g.model},
              {"uuid", g.uuid},
              {"mem_mib", g.mem_mib},
              {"milli_free", g.milli_free},
              {"mem_free_mib", g.mem_free_mib},
              {"mig_enabled", g.mig_enabled},
              {"mig_instances", std::move(instances)},
              {"link_group", g.link_group}};
}

void Decode(const json& j, Gpu* g) {
  Get(j, "model", &g->model);
  Get(j, "uuid", &g->uuid);
  Get(j, "mem_mib", &g->mem_mib);
  Get(j, "milli_free", &g->milli_free);
  Get(j, "mem_free_mib", &g->mem_free_mib);
  Get(j, "mig_enabled", &g->mig_enabled);
  if (auto it = j.find("mig_instances"); it != j.end()) {
    for (const json& m : it->get_ref<const json::array_t&>()) {
      MigInstance& instance = g->mig_instances.emplace_back();
      Get(m, "profile", &instance.profile);
      Get(m, "start", &instance.start);
      Get(m, "in_use", &instance.in_use);
    }
  }
  Get(j, "link_group", &g->link_group);  // absent in records from before link groups
}

json Encode(const Node& n) {
  json gpus = json::array();
  for (const Gpu& g : n.gpus) gpus.push_back(Encode(g));
  return json{{"cpu_milli", n.cpu_milli},
              {"memory_mib", n.memory_mib},
              {"cpu_free_milli", n.cpu_free_milli},
              {"memory_free_mib", n.memory_free_mib},
              {"gpus", std::move(gpus)},
              {"labels", n.labels},
              {"schedulable", n.schedulable},
              {"disk_gib", n.disk_gib},
              {"disk_free_gib", n.disk_free_gib},
              {"docker", n.docker},
              {"docker_gpus", n.docker_gpus},
              {"shared_storage", n.shared_storage},
              {"runtime_note", n.runtime_note},
              {"ssh_host_key", n.ssh_host_key},
              {"address", n.address}};
}

void Decode(const json& j, Node* n) {
  Get(j, "cpu_milli", &n->cpu_milli);
  Get(j, "memory_mib", &n->memory_mib);
  Get(j, "cpu_free_milli", &n->cpu_free_milli);
  Get(j, "memory_free_mib", &n->memory_free_mib);
  if (auto it = j.find("gpus"); it != j.end()) {
    for (const json& g : it->get_ref<const json::array_t&>()) Decode(g, &n->gpus.emplace_back());
  }
  Get(j, "labels", &n->labels);
  Get(j, "schedulable", &n->schedulable);
  // Absent in records from before agents reported them.
  Get(j, "disk_gib", &n->disk_gib);
  Get(j, "disk_free_gib", &n->disk_free_gib);
  Get(j, "docker", &n->docker);
  Get(j, "docker_gpus", &n->docker_gpus);
  Get(j, "shared_storage", &n->shared_storage);
  Get(j, "runtime_note", &n->runtime_note);
  Get(j, "ssh_host_key", &n->ssh_host_key);
  Get(j, "address", &n->address);
}

json Encode(const std::vector<SshKey>& keys) {
  json out = json::array();
  for (const SshKey& k : keys) {
    out.push_back(json{{"name", k.name},
                       {"public_key", k.public_key},
                       {"fingerprint", k.fingerprint},
                       {"created_ms", k.created_ms}});
  }
  return out;
}

void Decode(const json& j, std::vector<SshKey>* keys) {
  for (const json& k : j.get_ref<const json::array_t&>()) {
    SshKey& key = keys->emplace_back();
    Get(k, "name", &key.name);
    Get(k, "public_key", &key.public_key);
    Get(k, "fingerprint", &key.fingerprint);
    Get(k, "created_ms", &key.created_ms);
  }
}

json Encode(const std::vector<VolumeMount>& mounts) {
  json out = json::array();
  for (const VolumeMount& m : mounts) {
    out.push_back(json{{"volume_id", m.volume_id},
                       {"name", m.name},
                       {"path", m.path},
                       {"read_only", m.read_only},
                       {"shared", m.shared}});
  }
  return out;
}

void Decode(const json& j, std::vector<VolumeMount>* mounts) {
  for (const json& m : j.get_ref<const json::array_t&>()) {
    VolumeMount& mount = mounts->emplace_back();
    Get(m, "volume_id", &mount.volume_id);
    Get(m, "name", &mount.name);
    Get(m, "path", &mount.path);
    Get(m, "read_only", &mount.read_only);
    Get(m, "shared", &mount.shared);
  }
}

json Encode(const std::vector<DatasetMount>& mounts) {
  json out = json::array();
  for (const DatasetMount& m : mounts) {
    out.push_back(json{{"dataset_id", m.dataset_id},
                       {"name", m.name},
                       {"version", m.version},
                       {"path", m.path},
                       {"project_id", m.project_id},
                       {"manifest", m.manifest}});
  }
  return out;
}

void Decode(const json& j, std::vector<DatasetMount>* mounts) {
  for (const json& m : j.get_ref<const json::array_t&>()) {
    DatasetMount& mount = mounts->emplace_back();
    Get(m, "dataset_id", &mount.dataset_id);
    Get(m, "name", &mount.name);
    Get(m, "version", &mount.version);
    Get(m, "path", &mount.path);
    Get(m, "project_id", &mount.project_id);
    Get(m, "manifest", &mount.manifest);
  }
}

json Encode(const std::vector<DatasetVersion>& versions) {
  json out = json::array();
  for (const DatasetVersion& v : versions) {
    out.push_back(json{{"version", v.version},
                       {"manifest", v.manifest},
                       {"files", v.files},
                       {"bytes", v.bytes},
                       {"new_bytes", v.new_bytes},
                       {"created_ms", v.created_ms},
                       {"created_by", v.created_by}});
  }
  return out;
}

void Decode(const json& j, std::vector<DatasetVersion>* versions) {
  for (const json& v : j.get_ref<const json::array_t&>()) {
    DatasetVersion& version = versions->emplace_back();
    Get(v, "version", &version.version);
    Get(v, "manifest", &version.manifest);
    Get(v, "files", &version.files);
    Get(v, "bytes", &version.bytes);
    Get(v, "new_bytes", &version.new_bytes);
    Get(v, "created_ms", &version.created_ms);
    Get(v, "created_by", &version.created_by);
  }
}

template <typename T>
Result<std::string> Dump(const T& value, std::string_view what) {
  try {
    return Encode(value).dump();
  } catch (const std::exception& e) {
    return InvalidArgument(std::string(what) + " cannot be stored as json: " + e.what());
  }
}

// Parses `text` as an object (or, for lists, an array) and decodes it into `*out`.
template <typename T>
Status Parse(std::string_view text, T* out, std::string_view what) {
  try {
    const json j = json::parse(text);
    constexpr bool kList = requires(T t) { t.begin(); };
    if (kList ? !j.is_array() : !j.is_object()) {
      return MakeError(ErrorCode::kInternal,
                       std::string(what) + " json is not an " + (kList ? "array" : "object"));
    }
    *out = T{};
    Decode(j, out);
    return {};
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInternal, std::string(what) + " json is corrupt: " + e.what());
  }
}

}  // namespace

Result<std::string> ToJson(const TaskRequest& request) { return Dump(request, "task request"); }

Result<std::string> ToJson(const TaskPlacement& placement) {
  return Dump(placement, "task placement");
}

Result<std::string> ToJson(const Node& node) { return Dump(node, "node"); }

Result<std::string> ToJson(const std::vector<SshKey>& keys) { return Dump(keys, "ssh keys"); }

Result<std::string> ToJson(const std::vector<VolumeMount>& mounts) {
  return Dump(mounts, "volume mounts");
}

Result<std::string> ToJson(const std::vector<DatasetMount>& mounts) {
  return Dump(mounts, "dataset mounts");
}

Result<std::string> ToJson(const std::vector<DatasetVersion>& versions) {
  return Dump(versions, "dataset versions");
}

Result<std::string> ToJson(const std::vector<std::string>& strings) {
  try {
    return json(strings).dump();
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("string list cannot be stored as json: ") + e.what());
  }
}

Status FromJson(std::string_view text, TaskRequest* request) {
  return Parse(text, request, "task request");
}

Status FromJson(std::string_view text, TaskPlacement* placement) {
  return Parse(text, placement, "task placement");
}

Status FromJson(std::string_view text, Node* node) { return Parse(text, node, "node"); }

Status FromJson(std::string_view text, std::vector<SshKey>* keys) {
  return Parse(text, keys, "ssh keys");
}

Status FromJson(std::string_view text, std::vector<VolumeMount>* mounts) {
  return Parse(text, mounts, "volume mounts");
}

Status FromJson(std::string_view text, std::vector<DatasetMount>* mounts) {
  return Parse(text, mounts, "dataset mounts");
}

Status FromJson(std::string_view text, std::vector<DatasetVersion>* versions) {
  return Parse(text, versions, "dataset versions");
}

Status FromJson(std::string_view text, std::vector<std::string>* strings) {
  try {
    const json j = json::parse(text);
    if (!j.is_array()) return MakeError(ErrorCode::kInternal, "string list json is not an array");
    *strings = j.get<std::vector<std::string>>();
    return {};
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInternal, std::string("string list json is corrupt: ") + e.what());
  }
}

}  // namespace gpupool::store
