// Sample records with every field set to a non-default value, for the store's tests (the
// conformance suite, the JSON round trips) and its benchmark.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/records.h"
#include "core/snapshot.h"

namespace gpupool::store::testing {

inline Project SampleProject(const std::string& id) {
  return Project{.id = id,
                 .name = "Project " + id,
                 .max_gpu_milli = 16'000,
                 .max_tasks = 42,
                 .stop_grace_ms = 30'000,
                 .created_ms = 1'700'000'000'000,
                 .max_storage_bytes = int64_t{5} << 30};
}

inline User SampleUser(const std::string& id) {
  return User{.id = id,
              .name = "Zoë " + id,
              .role = Role::kAdmin,
              .projects = {"p-1", "p-2"},
              .created_ms = 1'700'000'000'001,
              .ssh_keys = {{.name = "zoë@laptop",
                            .public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO1FzrfO07qkSSTT6f",
                            .fingerprint = "SHA256:k8flRrTgclSVM4w8vzimHe+94OexcAdZ9KhIQt8NVjI",
                            .created_ms = 1'700'000'000'005}}};
}

inline AccessKey SampleAccessKey(const std::string& id) {
  return AccessKey{.access_key = id,
                   .user_id = "u-1",
                   .sealed_secret = std::string("sealed\0bytes\xff", 13),
                   .description = "ci key",
                   .created_ms = 1'700'000'000'002,
                   .revoked_ms = 1'700'000'000'003};
}

// An agent credential: a key of node `node` minted with join token `join_token_id`.
inline AccessKey SampleAgentKey(const std::string& id, const std::string& node,
                                const std::string& join_token_id) {
  AccessKey k = SampleAccessKey(id);
  k.user_id.clear();
  k.description = "agent of " + node;
  k.node = node;
  k.join_token_id = join_token_id;
  return k;
}

inline JoinToken SampleJoinToken(const std::string& id) {
  return JoinToken{.id = id,
                   .secret_digest = std::string(64, 'a'),
                   .description = "rack 7 — GPU nodes",
                   .created_by = "u-1",
                   .created_ms = 1'700'000'000'020,
                   .expires_ms = 1'700'000'000'021,
                   .revoked_ms = 1'700'000'000'022};
}

inline NodeInfo SampleNode(const std::string& name) {
  NodeInfo n;
  n.node.name = name;
  n.node.cpu_milli = 64'000;
  n.node.memory_mib = 512 * 1024;
  n.node.cpu_free_milli = 32'000;
  n.node.memory_free_mib = 256 * 1024;
  n.node.disk_gib = 3500;
  n.node.ssh_host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKey";
  n.node.address = "10.0.0.7";
  Gpu whole{.model = "A100-80GB",
            .uuid = "GPU-0000",
            .mem_mib = 81920,
            .milli_free = 250,
            .mem_free_mib = 40960,
            .mig_enabled = false,
            .mig_instances = {}};
  Gpu mig{.model = "H100-80GB",
          .uuid = "GPU-0001",
          .mem_mib = 81920,
          .milli_free = 0,
          .mem_free_mib = 0,
          .mig_enabled = true,
          .mig_instances = {{.profile = 2, .start = 0, .in_use = true},
                            {.profile = 0, .start = 4, .in_use = false}}};
  n.node.gpus = {whole, mig};
  n.node.labels = {{"zone", "eu-1"}, {"rack", "r7"}};
  n.node.schedulable = false;
  n.status = NodeStatus::kLost;
  n.draining = true;
  n.registered_ms = 1'700'000'000'004;
  n.last_heartbeat_ms = 1'700'000'000'005;
  return n;
}

inline Task SampleTask(const std::string& id, int64_t seq) {
  Task t;
  t.id = id;
  t.seq = seq;
  t.project_id = "p-1";
  t.user_id = "u-1";
  t.name = "train " + id;
  t.request = TaskRequest{.cpu_milli = 8000,
                          .memory_mib = 65536,
                          .gpu_count = 2,
                          .gpu_milli = 0,
                          .gpu_mem_mib = 1024,
                          .mig_profile = "3g.40gb",
                          .gpu_models = {"A100-80GB", "H100-80GB"},
                          .priority = 7,
                          .gang_id = "j-1",
                          .gang_size = 4,
                          .members_per_node = 2,
                          .topology_label = "rack",
                          .topology = Topology::kRequired};
  t.image = "pytorch:2.3";
  t.command = {"python", "train.py", "--name", "naïve \"quoted\"", ""};
  t.disk_gib = 100;
  t.max_runtime_ms = 3'600'000;
  t.stop_when = "loss < 0.1";
  t.restartable = true;
  t.ports = {8888, 6006};
  t.state = TaskState::kRunning;
  t.reason = "started by agent";
  t.placement = TaskPlacement{.node = "n-1",
                              .gpus = {0, 3},
                              .milli_per_gpu = 1000,
                              .gpu_mem_mib = 2048,
                              .mig_profile = 1,
                              .mig_start = 4,
                              .rendezvous_port = 29501};
  t.created_ms = 1'700'000'000'010;
  t.updated_ms = 1'700'000'000'011;
  t.bound_ms = 1'700'000'000'012;
  t.started_ms = 1'700'000'000'013;
  t.finished_ms = 1'700'000'000'014;
  t.billed_until_ms = 1'700'000'000'015;
  t.exit_code = -9;
  t.preemptions = 3;
  t.ended_by = "t-2";
  t.snapshot_every_ms = 600'000;
  t.checkpoint_signal = "SIGUSR2";
  t.checkpoint_timeout_ms = 45'000;
  t.run = 4;
  t.resume_from = "s-7";
  t.work_lost_ms = 12'345;
  t.volumes = {{.volume_id = "v-1", .name = "data", .path = "/root/data", .read_only = false},
               {.volume_id = "v-2",
                .name = "imagenet",
                .path = "/root/in",
                .read_only = true,
                .shared = true}};
  t.datasets = {{.dataset_id = "d-3",
                 .name = "imagenet",
                 .version = 2,
                 .path = "/root/imagenet",
                 .project_id = "p-9",
                 .manifest = std::string(64, 'e')}};
  return t;
}

inline Volume SampleVolume(const std::string& id, int64_t seq, const std::string& name) {
  return Volume{.id = id,
                .seq = seq,
                .project_id = "p-1",
                .name = name,
                .size_bytes = int64_t{200} << 30,
                .shared = false,
                .node = "n-1",
                .deleting = false,
                .created_ms = 1'700'000'000'200,
                .created_by = "u-1"};
}

inline Dataset SampleDataset(const std::string& id, int64_t seq, const std::string& name) {
  return Dataset{.id = id,
                 .seq = seq,
                 .project_id = "p-1",
                 .name = name,
                 .published = false,
                 .versions = {{.version = 1,
                               .manifest = std::string(64, 'a'),
                               .files = 3,
                               .bytes = 1 << 20,
                               .new_bytes = 1 << 20,
                               .created_ms = 1'700'000'000'300,
                               .created_by = "u-1"}},
                 .created_ms = 1'700'000'000'250,
                 .created_by = "u-1"};
}

inline TaskSnapshot SampleSnapshot(const std::string& id, int64_t seq, const std::string& task_id) {
  return TaskSnapshot{.id = id,
                      .seq = seq,
                      .task_id = task_id,
                      .project_id = "p-1",
                      .run = 2,
                      .trigger = SnapshotTrigger::kPreempt,
                      .consistency = Consistency::kApplication,
                      .node = "n-1",
                      .manifest = std::string(64, 'a'),
                      .files = 3,
                      .bytes = 1 << 30,
                      .new_bytes = 10 << 20,
                      .taken_ms = 1'700'000'000'100,
                      .frozen_ms = 80,
                      .duration_ms = 400};
}

inline TaskEvent SampleEvent(const std::string& task_id, int64_t time_ms, std::string reason) {
  return TaskEvent{.task_id = task_id,
                   .time_ms = time_ms,
                   .from = TaskState::kScheduled,
                   .to = TaskState::kRunning,
                   .reason = std::move(reason)};
}

inline LedgerEntry SampleLedger(const std::string& key, const std::string& project, LedgerKind kind,
                                int64_t amount, int64_t created_ms, const std::string& task = "") {
  return LedgerEntry{.key = key,
                     .project_id = project,
                     .task_id = task,
                     .kind = kind,
                     .amount_micros = amount,
                     .from_ms = created_ms - 60'000,
                     .to_ms = created_ms,
                     .detail = "A100-80GB 1000 milli, 60 s",
                     .created_ms = created_ms};
}

// The first difference between two node lists ("" when they are equal), field by field:
// NodeInfo's defaulted operator== is deleted because Node and Gpu have none.
inline std::string NodesDiff(const std::vector<NodeInfo>& a, const std::vector<NodeInfo>& b) {
  if (a.size() != b.size()) {
    return "node count " + std::to_string(a.size()) + " != " + std::to_string(b.size());
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const NodeInfo& x = a[i];
    const NodeInfo& y = b[i];
    const std::string at = "node " + std::to_string(i) + " ('" + x.node.name + "'): ";
    if (x.node.name != y.node.name) return at + "name differs";
    if (x.node.cpu_milli != y.node.cpu_milli || x.node.memory_mib != y.node.memory_mib ||
        x.node.cpu_free_milli != y.node.cpu_free_milli ||
        x.node.memory_free_mib != y.node.memory_free_mib || x.node.disk_gib != y.node.disk_gib) {
      return at + "capacity differs";
    }
    if (x.node.labels != y.node.labels) return at + "labels differ";
    if (x.node.schedulable != y.node.schedulable) return at + "schedulable differs";
    if (x.status != y.status || x.draining != y.draining || x.registered_ms != y.registered_ms ||
        x.last_heartbeat_ms != y.last_heartbeat_ms) {
      return at + "status fields differ";
    }
    if (x.node.gpus.size() != y.node.gpus.size()) return at + "gpu count differs";
    for (size_t g = 0; g < x.node.gpus.size(); ++g) {
      const Gpu& p = x.node.gpus[g];
      const Gpu& q = y.node.gpus[g];
      if (p.model != q.model || p.uuid != q.uuid || p.mem_mib != q.mem_mib ||
          p.milli_free != q.milli_free || p.mem_free_mib != q.mem_free_mib ||
          p.mig_enabled != q.mig_enabled || p.mig_instances != q.mig_instances) {
        return at + "gpu " + std::to_string(g) + " differs";
      }
    }
  }
  return "";
}

}  // namespace gpupool::store::testing
