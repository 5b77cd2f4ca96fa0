// Wire types of nodes (docs/api.md "Nodes" and the agent routes): a node's registration by its
// agent, the node as the API shows it, heartbeats and the assignments an agent long-polls.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "proto/common.h"
#include "proto/describe.h"
#include "proto/snapshots.h"
#include "proto/tasks.h"
#include "proto/volumes.h"

namespace gpupool::proto {

struct MigInstanceSpec {
  std::string profile;
  int32_t start = 0;
  static constexpr std::string_view kName = "MigInstanceSpec";
  static constexpr std::string_view kDoc = "A MIG instance that exists on a GPU.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("profile", s.profile, {.required = true, .max_bytes = 64, .doc = "e.g. 3g.40gb"});
    v("start", s.start, {.required = true, .min = 0, .max = 63, .doc = "First memory slice"});
  }
};

struct GpuSpec {
  std::string model;
  std::string uuid;
  int64_t mem_mib = 0;
  bool mig_enabled = false;
  std::vector<MigInstanceSpec> mig_instances;
  int32_t link_group = -1;
  static constexpr std::string_view kName = "GpuSpec";
  static constexpr std::string_view kDoc = "One GPU of a registering node, in index order.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("model", s.model, {.required = true, .max_bytes = 128, .doc = "e.g. A100-80GB"});
    v("uuid", s.uuid, {.max_bytes = 128});
    v("mem_mib", s.mem_mib, {.min = 0, .doc = "0: the model's"});
    v("mig_enabled", s.mig_enabled);
    v("mig_instances", s.mig_instances, {.max_items = 7});
    v("link_group", s.link_group,
      {.min = -1,
       .max = 63,
       .doc = "GPUs with one link group share their closest interconnect (an NVLink domain, a "
              "PCIe switch): a task's GPUs come from one group where they fit; -1: not known"});
  }
};

// POST /v1/agent/nodes.
struct NodeRegistration {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t disk_gib = 0;
  std::vector<GpuSpec> gpus;
  std::map<std::string, std::string> labels;
  bool docker = false;
  bool docker_gpus = false;
  bool shared_storage = false;
  std::string runtime_note;
  std::string ssh_host_key;
  std::string address;
  static constexpr std::string_view kName = "NodeRegistration";
  static constexpr std::string_view kDoc = "A node's capacity, as its agent registers it.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("name", s.name, {.required = true, .format = Format::kIdentifier});
    v("cpu_milli", s.cpu_milli, {.required = true, .min = 1});
    v("memory_mib", s.memory_mib, {.required = true, .min = 1});
    v("disk_gib", s.disk_gib,
      {.min = 0,
       .doc = "Disk for task workspaces: free on the file system of the agent's task root, GiB "
              "(0: not reported; then disk is not scheduled)"});
    v("gpus", s.gpus, {.max_items = 64});
    v("labels", s.labels, {.max_bytes = 1024, .max_items = 256});
    v("docker", s.docker,
      {.doc = "The agent's docker runtime works: tasks with an image may be placed here"});
    v("docker_gpus", s.docker_gpus,
      {.doc = "Its containers can be given the node's GPUs: simulated ones (the environment "
              "alone), or real ones through the NVIDIA container runtime"});
    v("shared_storage", s.shared_storage,
      {.doc = "The agent mounts the shared storage (--shared-storage): tasks with shared "
              "volumes may be placed here"});
    v("runtime_note", s.runtime_note,
      {.max_bytes = 1024,
       .doc = "What the agent says of its runtimes: the docker daemon, or why image tasks cannot "
              "run here; why it cannot checkpoint processes (else its label "
              "gpupool.process-checkpoint=criu says it can)"});
    v("ssh_host_key", s.ssh_host_key,
      {.max_bytes = 16 * 1024,
       .doc = "The public host key (TYPE BASE64) of the SSH server the agent runs for tasks; "
              "empty: none (ssh into its tasks is refused)"});
    v("address", s.address,
      {.max_bytes = 255,
       .doc = "Where other nodes reach this one (IP address or host name): distributed jobs' "
              "MASTER_ADDR and GPUPOOL_MEMBER_HOSTS; empty: its name"});
  }
};

struct MigInstanceView {
  std::string profile;
  int32_t start = 0;
  bool in_use = false;
  int32_t memory_slices = 0;
  static constexpr std::string_view kName = "MigInstance";
  static constexpr std::string_view kDoc = "A MIG instance on a GPU.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("profile", s.profile);
    v("start", s.start, {.doc = "The first memory slice it occupies"});
    v("in_use", s.in_use);
    v("memory_slices", s.memory_slices,
      {.doc = "Memory slices it occupies from start (of the GPU's mig_memory_slots)"});
  }
};

struct GpuView {
  int32_t index = 0;
  std::string model;
  std::string uuid;
  int64_t mem_mib = 0;
  bool mig_enabled = false;
  std::vector<MigInstanceView> mig_instances;
  int64_t milli_free = 0;
  int32_t mig_memory_slots = 0;
  int32_t link_group = -1;
  static constexpr std::string_view kName = "Gpu";
  static constexpr std::string_view kDoc = "One GPU of a node.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("index", s.index);
    v("model", s.model);
    v("uuid", s.uuid);
    v("mem_mib", s.mem_mib);
    v("mig_enabled", s.mig_enabled);
    v("mig_instances", s.mig_instances);
    v("milli_free", s.milli_free,
      {.doc = "Milli-GPU not given to tasks, 0..1000 (in MIG mode: 1000 less the compute-slice "
              "share of the instances in use)"});
    v("mig_memory_slots", s.mig_memory_slots,
      {.doc = "Memory slices of its model in MIG mode (8, or 4 on A30); 0 when not MIG-capable"});
    v("link_group", s.link_group,
      {.doc = "The GPUs of the node sharing its closest interconnect with it; -1: not known"});
  }
};

struct NodeView {
  std::string name;
  std::string status;
  bool cordoned = false;
  bool draining = false;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t disk_gib = 0;
  int64_t cpu_free_milli = 0;
  int64_t memory_free_mib = 0;
  int64_t disk_free_gib = 0;
  int64_t gpu_milli_free = 0;
  bool docker = false;
  bool docker_gpus = false;
  bool shared_storage = false;
  std::string runtime_note;
  std::string ssh_host_key;
  std::string address;
  std::vector<GpuView> gpus;
  std::map<std::string, std::string> labels;
  std::vector<std::string> tasks;
  int64_t registered_ms = 0;
  int64_t last_heartbeat_ms = 0;
  static constexpr std::string_view kName = "Node";
  static constexpr std::string_view kDoc = "A node of the pool with what is free on it.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("name", s.name);
    v("status", s.status, {.one_of = kNodeStatuses});
    v("cordoned", s.cordoned, {.doc = "No new tasks are placed on it"});
    v("draining", s.draining, {.doc = "Cordoned and its tasks are being stopped"});
    v("cpu_milli", s.cpu_milli);
    v("memory_mib", s.memory_mib);
    v("disk_gib", s.disk_gib, {.doc = "Disk for task workspaces, GiB (0: not reported)"});
    v("cpu_free_milli", s.cpu_free_milli);
    v("memory_free_mib", s.memory_free_mib);
    v("disk_free_gib", s.disk_free_gib,
      {.doc = "disk_gib less what the tasks bound here reserve (their disk_gib)"});
    v("gpu_milli_free", s.gpu_milli_free);
    v("docker", s.docker, {.doc = "Tasks with an image may run here (its docker runtime works)"});
    v("docker_gpus", s.docker_gpus,
      {.doc = "Tasks with an image and GPUs may run here (simulated GPUs, or the NVIDIA container "
              "runtime)"});
    v("shared_storage", s.shared_storage,
      {.doc = "Tasks with shared volumes may run here (its agent has the shared storage)"});
    v("runtime_note", s.runtime_note,
      {.doc =
           "The agent's word on its runtimes: the docker daemon, or why image tasks cannot run"});
    v("ssh_host_key", s.ssh_host_key,
      {.doc = "The public host key (TYPE BASE64) of its tasks' SSH server, which gpupool "
              "ssh-config pins; empty: ssh into its tasks is refused"});
    v("address", s.address, {.doc = "Where other nodes reach it (distributed jobs' MASTER_ADDR)"});
    v("gpus", s.gpus);
    v("labels", s.labels);
    v("tasks", s.tasks, {.doc = "Ids of the tasks bound to it (admins only)"});
    v("registered_ms", s.registered_ms);
    v("last_heartbeat_ms", s.last_heartbeat_ms);
  }
};

struct NodeList {
  std::vector<NodeView> nodes;
  static constexpr std::string_view kName = "NodeList";
  static constexpr std::string_view kDoc = "Every node of the pool.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("nodes", s.nodes);
  }
};

struct HeartbeatAck {
  std::string name;
  bool ok = true;
  int64_t node_timeout_ms = 0;
  static constexpr std::string_view kName = "HeartbeatAck";
  static constexpr std::string_view kDoc = "A heartbeat was recorded.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("name", s.name);
    v("ok", s.ok);
    v("node_timeout_ms", s.node_timeout_ms,
      {.min = 0,
       .doc = "How long the server waits for the next heartbeat before it declares the node "
              "lost and re-queues its restartable tasks; the agent kills its tasks sooner when "
              "it cannot renew their lease (docs/api.md, \"Node loss\"). 0: not said (a "
              "server older than this field; the agent keeps the lease it has)"});
  }
};

struct AssignmentsQuery {
  int64_t after = 0;
  int64_t wait_ms = 25'000;
  static constexpr std::string_view kName = "AssignmentsQuery";
  static constexpr std::string_view kDoc = "Long-poll: answer once the version passes `after`.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("after", s.after, {.min = 0, .doc = "The version the agent has"});
    v("wait_ms", s.wait_ms, {.min = 0, .max = 30'000, .doc = "How long to wait for a change"});
  }
};

// How a distributed job's member finds the others (the agent turns it into MASTER_ADDR, RANK, …).
struct Rendezvous {
  std::string job_id;
  int32_t member_index = 0;
  int32_t members = 0;
  std::string master_addr;
  int32_t master_port = 0;
  std::vector<std::string> member_hosts;
  static constexpr std::string_view kName = "Rendezvous";
  static constexpr std::string_view kDoc =
      "A distributed job's member's view of its job for this run.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("job_id", s.job_id);
    v("member_index", s.member_index, {.doc = "RANK and NODE_RANK"});
    v("members", s.members, {.doc = "WORLD_SIZE"});
    v("master_addr", s.master_addr, {.doc = "Member 0's node's address"});
    v("master_port", s.master_port);
    v("member_hosts", s.member_hosts,
      {.max_items = 4096, .doc = "Every member's node address, in index order"});
  }
};

struct Assignments {
  std::string node;
  int64_t version = 0;
  std::vector<Task> tasks;
  std::map<std::string, std::string> task_tokens;
  std::map<std::string, Rendezvous> rendezvous;
  std::map<std::string, SnapshotRef> restores;
  std::map<std::string, SnapshotOrder> snapshots;
  std::map<std::string, VolumeView> volumes;
  std::vector<std::string> remove_volumes;
  std::string gateway_origin;
  static constexpr std::string_view kName = "Assignments";
  static constexpr std::string_view kDoc =
      "What a node must run (scheduled, starting and running tasks) and the version of that "
      "set.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("node", s.node);
    v("version", s.version);
    v("tasks", s.tasks);
    v("task_tokens", s.task_tokens,
      {.max_items = 4096,
       .doc = "Each task's own credential (its GPUPOOL_TASK_TOKEN), by task id: it reads that "
              "task's usage and metrics while this binding lasts, nothing else"});
    v("rendezvous", s.rendezvous,
      {.max_items = 4096, .doc = "Each distributed job member's rendezvous, by task id"});
    v("restores", s.restores,
      {.max_items = 4096,
       .doc = "The snapshot each task's run restores its workspace from, by task id"});
    v("snapshots", s.snapshots,
      {.max_items = 4096,
       .doc = "Snapshots to take, by task id: asked for by users, or the last of a task taken "
              "off this node (stopped, preempted, drained), which the node stops once it has it"});
    v("volumes", s.volumes,
      {.max_items = 4096, .doc = "The volumes this node's tasks mount, by id"});
    v("remove_volumes", s.remove_volumes,
      {.max_items = 4096,
       .doc = "Deleted volumes whose files this node removes (its own node-local ones; shared "
              "ones when it has the shared storage), then says so (volumeRemoved)"});
    v("gateway_origin", s.gateway_origin,
      {.doc = "The server's --gateway-domain as an origin (http(s)://<domain>[:port]): tasks' "
              "ports are served at <port>--<task>.<domain>, which their GPUPOOL_URL_<port> "
              "names; empty: under /t/<task>/<port>/ of the server"});
  }
};

}  // namespace gpupool::proto
