// Domain records ↔ wire types for the REST API (see wire.h).
#include "api/wire.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <utility>

#include "core/base64.h"
#include "core/gpu_catalog.h"
#include "core/gpu_names.h"
#include "core/mig.h"
#include "core/stop_condition.h"
#include "core/task.h"
#include "core/task_job.h"
#include "core/task_ports.h"

namespace gpupool::api {
namespace {

std::string MigProfileName(const std::string& model, int profile) {
  const GpuModelInfo* info = FindGpuModel(model);
  if (info != nullptr && profile >= 0 && profile < static_cast<int>(info->mig_profiles.size())) {
    return info->mig_profiles[static_cast<size_t>(profile)].name;
  }
  return "#" + std::to_string(profile);
}

std::string Str(std::string_view s) { return std::string(s); }

// A gauge on the wire: null where unknown (server::kUnknown, < 0).
std::optional<int64_t> Gauge(int64_t v) {
  if (v < 0) return std::nullopt;
  return v;
}
int64_t Gauge(const std::optional<int64_t>& v) { return v ? *v : server::kUnknown; }

proto::UsageSample UsageToWire(const server::UsageSample& s) {
  proto::UsageSample w;
  w.time_ms = s.time_ms;
  w.cpu_milli = Gauge(s.values[server::usage::kCpuMilli]);
  w.memory_mib = Gauge(s.values[server::usage::kMemoryMib]);
  w.gpu_util_pct = Gauge(s.values[server::usage::kGpuUtilPct]);
  w.gpu_mem_mib = Gauge(s.values[server::usage::kGpuMemMib]);
  return w;
}

server::UsageSample UsageFromWire(const proto::UsageSample& w) {
  server::UsageSample s;
  s.time_ms = w.time_ms;
  s.values[server::usage::kCpuMilli] = Gauge(w.cpu_milli);
  s.values[server::usage::kMemoryMib] = Gauge(w.memory_mib);
  s.values[server::usage::kGpuUtilPct] = Gauge(w.gpu_util_pct);
  s.values[server::usage::kGpuMemMib] = Gauge(w.gpu_mem_mib);
  return s;
}

proto::NodeSample NodeSampleToWire(const server::NodeSample& s) {
  proto::NodeSample w;
  static_cast<proto::UsageSample&>(w) = UsageToWire(s.usage);
  for (size_t i = 0; i < s.gpus.size(); ++i) {
    w.gpus.push_back(proto::GpuSample{static_cast<int32_t>(i),
                                      Gauge(s.gpus[i].values[server::gpu_usage::kUtilPct]),
                                      Gauge(s.gpus[i].values[server::gpu_usage::kMemMib])});
  }
  return w;
}

template <typename Values>
proto::UsageGauges GaugesToWire(const Values& v) {
  return proto::UsageGauges{Gauge(v[server::usage::kCpuMilli]), Gauge(v[server::usage::kMemoryMib]),
                            Gauge(v[server::usage::kGpuUtilPct]),
                            Gauge(v[server::usage::kGpuMemMib])};
}

template <typename Values>
proto::GpuGauges GpuGaugesToWire(const Values& v) {
  return proto::GpuGauges{Gauge(v[server::gpu_usage::kUtilPct]),
                          Gauge(v[server::gpu_usage::kMemMib])};
}

// A history point (usage or a GPU's): its time, sample count, and mean and max gauges.
template <typename Wire, typename Point, typename ToGauges>
Wire PointToWire(const Point& p, ToGauges gauges) {
  Wire w;
  w.time_ms = p.time_ms;
  w.samples = p.samples;
  w.mean = gauges(p.mean);
  w.max = gauges(p.max);
  return w;
}

proto::UsagePoint PointToWire(const server::UsagePoint& p) {
  return PointToWire<proto::UsagePoint>(p, [](const auto& v) { return GaugesToWire(v); });
}

proto::GpuPoint PointToWire(const server::GpuPoint& p) {
  return PointToWire<proto::GpuPoint>(p, [](const auto& v) { return GpuGaugesToWire(v); });
}

std::string ResolutionName(server::Resolution r) {
  return r == server::Resolution::kRaw ? "raw" : "1m";
}

proto::TaskBody BodyToWire(const Task& t) {
  const TaskRequest& q = t.request;
  proto::TaskBody w;
  w.name = t.name;
  w.cpu_milli = q.cpu_milli;
  w.memory_mib = q.memory_mib;
  w.gpu_count = q.gpu_count;
  w.gpu_milli = q.gpu_milli;
  w.gpu_mem_mib = q.gpu_mem_mib;
  w.mig_profile = q.mig_profile;
  w.gpu_models = q.gpu_models;
  w.priority = q.priority;
  w.image = t.image;
  w.command = t.command;
  w.disk_gib = t.disk_gib;
  w.max_runtime_ms = t.max_runtime_ms;
  w.stop_when = t.stop_when;
  w.restartable = t.restartable;
  w.ports = t.ports;
  w.snapshot_every_ms = t.snapshot_every_ms;
  w.checkpoint_signal = t.checkpoint_signal;
  w.checkpoint_timeout_ms = t.checkpoint_timeout_ms;
  for (const VolumeMount& m : t.volumes) {
    w.volumes.push_back({m.name, m.path, m.read_only, m.volume_id, m.shared});
  }
  for (const DatasetMount& m : t.datasets) {
    w.datasets.push_back({m.name, m.version, m.path, m.dataset_id, m.project_id, m.manifest});
  }
  return w;
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Records and views → wire

proto::Task ToWire(const Task& t) {
  proto::Task w;
  static_cast<proto::TaskBody&>(w) = BodyToWire(t);
  w.id = t.id;
  w.seq = t.seq;
  w.project = t.project_id;
  w.user = t.user_id;
  w.state = Str(TaskStateName(t.state));
  w.reason = t.reason;
  w.held = t.held;
  w.array_id = t.array_id;
  w.array_index = t.array_index;
  w.array_limit = t.array_limit;
  if (IsJobMember(t)) {
    w.job_id = t.request.gang_id;
    w.member_index = MemberIndex(t);
    w.ended_by = t.ended_by;
  }
  if (t.placement) {
    const TaskPlacement& p = *t.placement;
    proto::Placement placement;
    placement.node = p.node;
    placement.gpus.assign(p.gpus.begin(), p.gpus.end());
    placement.milli_per_gpu = p.milli_per_gpu;
    placement.gpu_mem_mib = p.gpu_mem_mib;
    if (p.mig_profile >= 0) {
      placement.mig_profile = t.request.mig_profile;
      placement.mig_start = p.mig_start;
    }
    placement.rendezvous_port = p.rendezvous_port;
    w.placement = std::move(placement);
  }
  w.created_ms = t.created_ms;
  w.updated_ms = t.updated_ms;
  w.bound_ms = t.bound_ms;
  w.started_ms = t.started_ms;
  w.finished_ms = t.finished_ms;
  w.billed_until_ms = t.billed_until_ms;
  w.exit_code = t.exit_code;
  w.preemptions = t.preemptions;
  w.run = t.run;
  w.resume_from = t.resume_from;
  w.work_lost_ms = t.work_lost_ms;
  return w;
}

proto::Snapshot ToWire(const TaskSnapshot& s) {
  proto::Snapshot w;
  w.id = s.id;
  w.task_id = s.task_id;
  w.project = s.project_id;
  w.run = s.run;
  w.trigger = Str(SnapshotTriggerName(s.trigger));
  w.consistency = Str(ConsistencyName(s.consistency));
  w.node = s.node;
  w.manifest = s.manifest;
  w.files = s.files;
  w.bytes = s.bytes;
  w.new_bytes = s.new_bytes;
  w.taken_ms = s.taken_ms;
  w.frozen_ms = s.frozen_ms;
  w.duration_ms = s.duration_ms;
  if (s.image)
    w.image = proto::SnapshotImage{s.image->id, s.image->base, s.image->bytes, s.image->saved};
  return w;
}

proto::VolumeView ToWire(const Volume& v, const std::vector<std::string>& used_by) {
  proto::VolumeView w;
  w.id = v.id;
  w.name = v.name;
  w.project = v.project_id;
  w.size_bytes = v.size_bytes;
  w.shared = v.shared;
  w.node = v.node;
  w.state = v.deleting ? "deleting" : "ready";
  w.created_ms = v.created_ms;
  w.created_by = v.created_by;
  w.used_by = used_by;
  return w;
}

proto::VolumeView ToWire(const server::VolumeInfo& info) {
  return ToWire(info.volume, info.used_by);
}

proto::DatasetView ToWire(const server::DatasetInfo& info) {
  const Dataset& d = info.dataset;
  proto::DatasetView w;
  w.id = d.id;
  w.name = d.name;
  w.project = d.project_id;
  w.published = d.published;
  for (const DatasetVersion& v : d.versions) {
    const auto nodes = info.nodes.find(v.version);
    w.versions.push_back({v.version, v.manifest, v.files, v.bytes, v.new_bytes, v.created_ms,
                          v.created_by,
                          nodes == info.nodes.end() ? std::vector<std::string>{} : nodes->second});
  }
  w.created_ms = d.created_ms;
  w.created_by = d.created_by;
  w.used_by = info.used_by;
  return w;
}

proto::TaskArray ToWire(const server::TaskArrayView& view) {
  proto::TaskArray w;
  w.id = view.id;
  w.project = view.project_id;
  w.array = ArraySpecText(view.spec);
  w.limit = view.spec.limit;
  w.tasks = view.task_ids;
  for (int s = 0; s < kTaskStateCount; ++s) {
    if (view.states[static_cast<size_t>(s)] == 0) continue;
    w.states.push_back(
        {Str(TaskStateName(static_cast<TaskState>(s))), view.states[static_cast<size_t>(s)]});
  }
  return w;
}

proto::Job ToWire(const server::JobView& view) {
  proto::Job w;
  w.id = view.id;
  if (view.members.empty()) return w;
  const Task& head = view.members.front();
  const TaskRequest& r = head.request;
  w.project = head.project_id;
  const std::string& name = head.name;
  w.name = name.size() > 3 && name.ends_with("[0]") ? name.substr(0, name.size() - 3) : name;
  w.nodes = r.gang_size;
  w.members_per_node = r.members_per_node;
  w.topology_label = r.topology_label;
  w.topology = Str(TopologyName(r.topology));
  const JobOutcome outcome = JobOutcomeOf(view.members);
  w.state = Str(TaskStateName(outcome.state));
  w.held = std::any_of(view.members.begin(), view.members.end(), [](const Task& m) {
    return m.state == TaskState::kPending && m.held;
  });
  // A waiting member's reason is the scheduler's, as a task's pending_reason is.
  auto reason_of = [&](const Task& t) {
    auto why = view.pending_reasons.find(t.id);
    return t.state == TaskState::kPending && why != view.pending_reasons.end() ? why->second
                                                                               : t.reason;
  };
  if (outcome.cause >= 0) {
    const Task& cause = view.members[static_cast<size_t>(outcome.cause)];
    w.reason =
        "member " + std::to_string(outcome.cause) + " (" + cause.id + "): " + reason_of(cause);
    if (outcome.ended_by_member) {
      w.first_failed = cause.id;
      w.exit_code = cause.exit_code;
    }
  }
  auto address = [&](const std::string& node) {
    auto it = view.addresses.find(node);
    return it == view.addresses.end() ? node : it->second;
  };
  if (HoldsResources(head.state) && head.placement) {
    w.master_addr = address(head.placement->node);
    w.master_port = head.placement->rendezvous_port;
  }
  for (const Task& m : view.members) {
    proto::JobMember member;
    member.index = MemberIndex(m);
    member.task = m.id;
    member.state = Str(TaskStateName(m.state));
    member.reason = reason_of(m);
    if (m.placement) {
      member.node = m.placement->node;
      member.address = address(m.placement->node);
    }
    member.exit_code = m.exit_code;
    member.ended_by = m.ended_by;
    w.members.push_back(std::move(member));
  }
  return w;
}

proto::TaskDetail ToWire(const server::TaskView& view) {
  proto::TaskDetail w;
  static_cast<proto::Task&>(w) = ToWire(view.task);
  w.queue_position = view.queue_position;
  w.pending_reason = view.pending_reason;
  for (const auto& [reason, count] : view.pending_nodes) w.pending_nodes.push_back({reason, count});
  w.runtime_ms = view.runtime_ms;
  return w;
}

proto::TaskEvent ToWire(const TaskEvent& e) {
  return {e.task_id, e.time_ms, Str(TaskStateName(e.from)), Str(TaskStateName(e.to)), e.reason};
}

proto::NodeView ToWire(const server::NodeView& view) {
  const NodeInfo& info = view.info;
  const Node& n = info.node;
  proto::NodeView w;
  w.name = n.name;
  w.status = Str(NodeStatusName(info.status));
  w.cordoned = !n.schedulable;
  w.draining = info.draining;
  w.cpu_milli = n.cpu_milli;
  w.memory_mib = n.memory_mib;
  w.disk_gib = n.disk_gib;
  w.cpu_free_milli = view.cpu_free_milli;
  w.memory_free_mib = view.memory_free_mib;
  w.disk_free_gib = n.disk_gib > 0 ? n.disk_free_gib : 0;
  w.gpu_milli_free = view.gpu_milli_free;
  w.docker = n.docker;
  w.docker_gpus = n.docker_gpus;
  w.shared_storage = n.shared_storage;
  w.runtime_note = n.runtime_note;
  w.ssh_host_key = n.ssh_host_key;
  w.address = n.address;
  for (size_t i = 0; i < n.gpus.size(); ++i) {
    const Gpu& g = n.gpus[i];
    proto::GpuView gpu{static_cast<int32_t>(i), g.model, g.uuid, g.mem_mib, g.mig_enabled, {}};
    gpu.link_group = g.link_group;
    const GpuModelInfo* model = FindGpuModel(g.model);
    gpu.mig_memory_slots = model != nullptr ? model->mig_memory_slots : 0;
    gpu.milli_free = g.mig_enabled ? kMilliPerGpu : g.milli_free;
    for (const MigInstance& m : g.mig_instances) {
      const std::string profile = MigProfileName(g.model, m.profile);
      const MigProfile* p = model != nullptr ? model->FindProfile(profile) : nullptr;
      gpu.mig_instances.push_back({profile, m.start, m.in_use, p != nullptr ? p->memory_slices : 0});
      if (m.in_use && g.mig_enabled) gpu.milli_free -= MigMilli(g.model, profile);
    }
    w.gpus.push_back(std::move(gpu));
  }
  w.labels = n.labels;
  w.tasks = view.tasks;
  w.registered_ms = info.registered_ms;
  w.last_heartbeat_ms = info.last_heartbeat_ms;
  return w;
}

proto::Assignments ToWire(const server::NodeAssignments& a) {
  proto::Assignments w;
  w.node = a.node;
  w.version = a.version;
  w.task_tokens = a.task_tokens;
  for (const Task& t : a.tasks) w.tasks.push_back(ToWire(t));
  for (const auto& [id, r] : a.rendezvous) {
    w.rendezvous[id] = {r.job_id,      r.member_index, r.members,
                        r.master_addr, r.master_port,  r.member_hosts};
  }
  for (const auto& [id, s] : a.restores) {
    w.restores[id] = {s.id, s.manifest, s.taken_ms, s.image ? s.image->id : std::string()};
  }
  for (const auto& [id, o] : a.snapshots) {
    w.snapshots[id] = {o.run, std::string(SnapshotTriggerName(o.trigger)), o.request, o.image};
  }
  for (const auto& [id, v] : a.volumes) w.volumes[id] = ToWire(v);
  w.remove_volumes = a.remove_volumes;
  return w;
}

proto::ProjectView ToWire(const Project& p) {
  return {p.id,           p.name,         p.max_gpu_milli,    p.max_tasks,
          p.stop_grace_ms, p.max_storage_bytes, p.created_ms};
}

proto::UserView ToWire(const User& u) {
  return {u.id, u.name, Str(RoleName(u.role)), u.projects, u.created_ms};
}

proto::AccessKeyView ToWire(const AccessKey& k) {
  return {k.access_key, k.user_id, k.description, k.created_ms, k.revoked_ms, k.revoked_ms == 0};
}

proto::SshKeyView ToWire(const std::string& user, const SshKey& k) {
  return {user, k.name, k.public_key, k.fingerprint, k.created_ms};
}

proto::NewAccessKey ToWire(const server::NewAccessKey& k) {
  proto::NewAccessKey w;
  static_cast<proto::AccessKeyView&>(w) = ToWire(k.key);
  w.secret_key = k.secret;
  return w;
}

proto::JoinTokenView ToWire(const server::JoinTokenView& v) {
  const JoinToken& t = v.token;
  const std::string state = t.revoked_ms != 0 ? "revoked" : v.expired ? "expired" : "active";
  return {t.id,         t.description, t.created_by, t.created_ms,
          t.expires_ms, t.revoked_ms,  state,        v.nodes};
}

proto::NewJoinToken ToWire(const server::NewJoinToken& created) {
  proto::NewJoinToken w;
  static_cast<proto::JoinTokenView&>(w) = ToWire(created.view);
  w.token = created.token;
  return w;
}

proto::AgentCredentials ToWire(const server::AgentCredentials& c) {
  return {c.key.node, c.key.access_key, c.secret, c.key.join_token_id, c.key.created_ms};
}

proto::ConsoleSession ToWire(const server::SessionGrant& s) {
  return {s.caller.user_id,  s.caller.access_key, Str(RoleName(s.caller.role)),
          s.caller.projects, s.csrf_token,        s.expires_ms};
}

proto::BalanceView ToWire(const server::Balance& b) {
  return {b.project_id, b.balance_micros, b.credits_micros, b.usage_micros};
}

proto::LedgerEntryView ToWire(const LedgerEntry& e) {
  return {e.key,           e.project_id, e.task_id, Str(LedgerKindName(e.kind)),
          e.amount_micros, e.from_ms,    e.to_ms,   e.detail,
          e.created_ms};
}

proto::AuditEntryView ToWire(const AuditEntry& e) {
  return {e.seq, e.time_ms, e.actor, e.access_key, e.action, e.target, e.detail};
}

proto::TaskCostView ToWire(const server::TaskCost& c) {
  proto::TaskCostView w{c.task_id,        c.cost_micros, c.billed_until_ms,
                        c.accrued_micros, c.as_of_ms,    {}};
  for (const LedgerEntry& e : c.entries) w.entries.push_back(ToWire(e));
  return w;
}

proto::StatementView ToWire(const server::Statement& s) {
  proto::StatementView w{s.project_id, s.from_ms, s.to_ms, s.credits_micros, s.usage_micros, {}};
  for (const auto& [task, micros] : s.by_task) w.by_task.push_back({task, micros});
  return w;
}

proto::PriceView ToWire(const Price& p) { return {p.resource, p.micros_per_hour, p.effective_ms}; }

proto::TelemetryAck ToWire(const std::vector<server::OutputOffsets>& offsets) {
  proto::TelemetryAck w;
  for (const server::OutputOffsets& o : offsets) {
    w.tasks.push_back({o.task_id, o.stdout_bytes, o.stderr_bytes, o.metrics_bytes, o.refused});
  }
  return w;
}

proto::LogSlice ToWire(const server::LogSlice& s, server::OutputStream stream) {
  return {s.task_id,         Str(server::OutputStreamName(stream)),
          s.slice.offset,    s.slice.next_offset,
          s.slice.size,      Base64Encode(s.slice.data),
          s.slice.truncated, s.complete};
}

proto::TaskMetrics ToWire(const server::TaskMetrics& m) {
  proto::TaskMetrics w;
  w.task_id = m.task_id;
  w.resolution = ResolutionName(m.resolution);
  for (const server::UsagePoint& p : m.usage) w.usage.push_back(PointToWire(p));
  for (const server::ReportedMetrics& r : m.reported) {
    w.reported.push_back({r.time_ms, {r.values.begin(), r.values.end()}});
  }
  w.latest = {m.latest.begin(), m.latest.end()};
  return w;
}

proto::NodeMetrics ToWire(const server::NodeMetrics& m) {
  proto::NodeMetrics w;
  w.node = m.node;
  w.resolution = ResolutionName(m.resolution);
  for (const server::UsagePoint& p : m.usage) w.usage.push_back(PointToWire(p));
  for (const auto& series : m.gpus) {
    std::vector<proto::GpuPoint>& points = w.gpus.emplace_back();
    for (const server::GpuPoint& p : series) points.push_back(PointToWire(p));
  }
  return w;
}

proto::UsageOverview ToWire(const server::UsageOverview& o) {
  proto::UsageOverview w;
  for (const auto& row : o.nodes) {
    proto::NodeUsage n;
    n.name = row.info.node.name;
    n.status = Str(NodeStatusName(row.info.status));
    n.gpus = static_cast<int64_t>(row.info.node.gpus.size());
    if (row.latest) n.latest = NodeSampleToWire(*row.latest);
    w.nodes.push_back(std::move(n));
  }
  for (const auto& row : o.tasks) {
    const Task& t = row.task;
    proto::TaskUsageRow r;
    r.id = t.id;
    r.name = t.name;
    r.project = t.project_id;
    if (t.placement) {
      r.node = t.placement->node;
      r.gpus.assign(t.placement->gpus.begin(), t.placement->gpus.end());
    }
    if (row.latest) r.latest = UsageToWire(*row.latest);
    r.reported = {row.reported.begin(), row.reported.end()};
    w.tasks.push_back(std::move(r));
  }
  w.queue.waiting = o.queue.waiting;
  w.queue.held = o.queue.held;
  if (!o.queue.oldest_id.empty()) {
    w.queue.oldest_task = o.queue.oldest_id;
    w.queue.oldest_since_ms = o.queue.oldest_since_ms;
  }
  return w;
}

// ------------------------------------------------------------------------------------------
// Wire → the control plane's inputs

proto::StreamHello ToWire(const server::StreamStarted& started) { return {started.time_ms}; }

proto::Deleted ToWire(const server::TaskDeletedEvent& deleted) { return {deleted.id, true}; }

proto::TaskUsageEvent ToWire(const server::TaskUsageEvent& event) {
  return {event.task, UsageToWire(event.sample)};
}

proto::TaskLogEvent ToWire(const server::TaskLogEvent& event) {
  proto::TaskLogEvent w;
  w.task = event.task;
  w.stream = Str(server::OutputStreamName(server::OutputStream::kStdout));
  w.offset = event.offset;
  w.data_b64 = Base64Encode(event.data);
  return w;
}

proto::TaskMetricsEvent ToWire(const server::TaskMetricsEvent& event) {
  proto::TaskMetricsEvent w;
  w.task = event.task;
  w.time_ms = event.metrics.time_ms;
  w.values = {event.metrics.values.begin(), event.metrics.values.end()};
  return w;
}

proto::NodeUsageEvent ToWire(const server::NodeUsageEvent& event) {
  return {event.node, NodeSampleToWire(event.sample)};
}

Result<server::TaskSpec> FromWire(proto::TaskSubmit s) {
  server::TaskSpec spec;
  spec.name = std::move(s.name);
  spec.project_id = s.project.value_or("");
  TaskRequest& req = spec.request;
  req.cpu_milli = s.cpu_milli;
  req.memory_mib = s.memory_mib;
  req.gpu_count = s.gpu_count;
  req.gpu_milli = s.gpu_milli;
  req.gpu_mem_mib = s.gpu_mem_mib;
  req.mig_profile = std::move(s.mig_profile);
  req.gpu_models = std::move(s.gpu_models);
  req.priority = s.priority;
  spec.image = std::move(s.image);
  spec.command = std::move(s.command);
  spec.disk_gib = s.disk_gib;
  spec.max_runtime_ms = s.max_runtime_ms;
  spec.restartable = s.restartable;
  spec.hold = s.hold;
  if (Status valid = ValidateTaskPorts(s.ports); !valid) return tl::unexpected(valid.error());
  spec.ports = std::move(s.ports);
  if (s.snapshot_every_ms > 0 && s.snapshot_every_ms < kMinSnapshotEveryMs) {
    return InvalidArgument("snapshot_every_ms must be 0 or at least " +
                           std::to_string(kMinSnapshotEveryMs) + " (10 s), got " +
                           std::to_string(s.snapshot_every_ms));
  }
  spec.snapshot_every_ms = s.snapshot_every_ms;
  spec.checkpoint_signal = std::move(s.checkpoint_signal);
  spec.checkpoint_timeout_ms = s.checkpoint_timeout_ms;
  spec.from_snapshot = s.from_snapshot.value_or("");
  for (proto::VolumeMountSpec& m : s.volumes) {
    Result<std::string> path =
        VolumeMountPath(m.path, "volumes[" + std::to_string(spec.volumes.size()) + "].path");
    if (!path) return tl::unexpected(path.error());
    spec.volumes.push_back(VolumeMount{.volume_id = "",
                                       .name = std::move(m.volume),
                                       .path = std::move(*path),
                                       .read_only = m.read_only});
  }
  if (Status valid = ValidateVolumeMounts(spec.volumes); !valid) {
    return tl::unexpected(valid.error());
  }
  for (proto::DatasetMountSpec& m : s.datasets) {
    Result<std::string> path =
        VolumeMountPath(m.path, "datasets[" + std::to_string(spec.datasets.size()) + "].path");
    if (!path) return tl::unexpected(path.error());
    spec.datasets.push_back(
        DatasetMount{.name = std::move(m.dataset), .version = m.version, .path = std::move(*path)});
  }
  if (Status valid = ValidateDatasetMounts(spec.datasets, spec.volumes); !valid) {
    return tl::unexpected(valid.error());
  }
  if (spec.command.empty() && spec.image.empty()) {
    return InvalidArgument("command must not be empty when no image is given");
  }
  req.gpu_models = ExpandGpuModelNames(req.gpu_models);  // "A100" → A100-40GB, A100-80GB
  if (Status valid = Validate(req); !valid) return tl::unexpected(valid.error());
  if (!s.stop_when.empty()) {
    // Refused here with the column; stored in its canonical form.
    Result<StopCondition> condition = ParseStopCondition(s.stop_when);
    if (!condition) return tl::unexpected(condition.error());
    spec.stop_when = condition->ToString();
  }
  return spec;
}

Result<std::pair<server::TaskSpec, server::JobSpec>> FromWire(proto::JobSubmit s) {
  server::JobSpec job;
  job.members = s.nodes;
  job.members_per_node = s.members_per_node;
  job.topology_label = std::move(s.topology_label);
  job.topology = ParseTopology(s.topology).value_or(Topology::kPreferred);  // one_of checked it
  if (job.topology == Topology::kRequired && job.topology_label.empty()) {
    return InvalidArgument(
        "topology: required needs a topology_label (the node label to keep "
        "the members under)");
  }
  Result<server::TaskSpec> spec = FromWire(std::move(static_cast<proto::TaskSubmit&>(s)));
  if (!spec) return tl::unexpected(spec.error());
  return std::pair{std::move(*spec), std::move(job)};
}

server::VolumeSpec FromWire(proto::VolumeCreate c) {
  return server::VolumeSpec{std::move(c.name), c.project.value_or(""), c.size_bytes, c.shared,
                            c.node.value_or("")};
}

Result<Node> FromWire(proto::NodeRegistration r) {
  Node node;
  node.name = std::move(r.name);
  node.cpu_milli = r.cpu_milli;
  node.memory_mib = r.memory_mib;
  node.disk_gib = r.disk_gib;
  node.disk_free_gib = r.disk_gib;
  node.docker = r.docker;
  node.docker_gpus = r.docker_gpus;
  node.shared_storage = r.shared_storage;
  node.runtime_note = std::move(r.runtime_note);
  node.ssh_host_key = std::move(r.ssh_host_key);
  node.address = std::move(r.address);
  for (const char c : node.address) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != ':' &&
        c != '_') {
      return InvalidArgument("address must be an IP address or a host name, got '" + node.address +
                             "'");
    }
  }
  node.cpu_free_milli = node.cpu_milli;
  node.memory_free_mib = node.memory_mib;
  node.labels = std::move(r.labels);
  for (size_t i = 0; i < r.gpus.size(); ++i) {
    const std::string at = "gpus[" + std::to_string(i) + "]";
    proto::GpuSpec& g = r.gpus[i];
    Gpu gpu;
    if (g.model.empty()) return InvalidArgument(at + ".model must not be empty");
    gpu.model = CanonicalGpuModelName(g.model);
    gpu.uuid = std::move(g.uuid);
    gpu.mem_mib = g.mem_mib;
    gpu.mig_enabled = g.mig_enabled;
    gpu.link_group = g.link_group;
    const GpuModelInfo* model = FindGpuModel(gpu.model);
    if (gpu.mem_mib == 0 && model != nullptr) gpu.mem_mib = model->mem_mib;
    gpu.mem_free_mib = gpu.mem_mib;
    if (gpu.mig_enabled && (model == nullptr || !model->MigCapable())) {
      return InvalidArgument(at + ".mig_enabled: " + gpu.model + " is not MIG-capable");
    }
    if (!g.mig_instances.empty()) {
      if (!gpu.mig_enabled)
        return InvalidArgument(at + ".mig_instances requires mig_enabled: true");
      uint32_t occupied = 0;
      std::vector<int> per_profile(model->mig_profiles.size(), 0);
      for (size_t j = 0; j < g.mig_instances.size(); ++j) {
        const std::string iat = at + ".mig_instances[" + std::to_string(j) + "]";
        const proto::MigInstanceSpec& inst = g.mig_instances[j];
        const int profile = model->ProfileIndex(inst.profile);
        if (profile < 0) {
          return InvalidArgument(iat + ".profile '" + inst.profile + "' is not a MIG profile of " +
                                 model->name);
        }
        const MigProfile& p = model->mig_profiles[static_cast<size_t>(profile)];
        if (!MigStartLegal(*model, profile, inst.start, occupied,
                           per_profile[static_cast<size_t>(profile)])) {
          return InvalidArgument(iat + ": " + p.name + " cannot start at slot " +
                                 std::to_string(inst.start) +
                                 " (not a legal start, overlaps another instance, or too many "
                                 "instances of the profile)");
        }
        occupied |= ((1u << p.memory_slices) - 1u) << inst.start;
        ++per_profile[static_cast<size_t>(profile)];
        gpu.mig_instances.push_back(MigInstance{profile, inst.start, false});
      }
    }
    node.gpus.push_back(std::move(gpu));
  }
  return node;
}

Result<Project> FromWire(proto::ProjectCreate c) {
  Project p;
  p.id = std::move(c.id);
  if (c.name && c.name->empty()) return InvalidArgument("name must not be empty");
  p.name = c.name ? std::move(*c.name) : p.id;  // the id is a fine name
  p.max_gpu_milli = c.max_gpu_milli;
  p.max_tasks = c.max_tasks;
  p.stop_grace_ms = c.stop_grace_ms;
  p.max_storage_bytes = c.max_storage_bytes;
  return p;
}

Status ApplyPatch(const proto::ProjectPatch& patch, Project* project) {
  if (patch.name && patch.name->empty()) return InvalidArgument("name must not be empty");
  if (patch.name) project->name = *patch.name;
  if (patch.max_gpu_milli) project->max_gpu_milli = *patch.max_gpu_milli;
  if (patch.max_tasks) project->max_tasks = *patch.max_tasks;
  if (patch.stop_grace_ms) project->stop_grace_ms = *patch.stop_grace_ms;
  if (patch.max_storage_bytes) project->max_storage_bytes = *patch.max_storage_bytes;
  return {};
}

Result<User> FromWire(proto::UserCreate c) {
  User u;
  u.id = std::move(c.id);
  if (c.name && c.name->empty()) return InvalidArgument("name must not be empty");
  u.name = c.name ? std::move(*c.name) : u.id;         // the id is a fine name
  u.role = ParseRole(c.role).value_or(Role::kMember);  // the decoder checked the name
  u.projects = std::move(c.projects);
  return u;
}

Status ApplyPatch(const proto::UserPatch& patch, User* user) {
  if (patch.role) user->role = ParseRole(*patch.role).value_or(user->role);
  if (patch.projects) user->projects = *patch.projects;
  return {};
}

Result<Price> FromWire(proto::PriceSet w, int64_t now_ms) {
  Price p;
  p.resource = std::move(w.resource);
  p.micros_per_hour = w.micros_per_hour;
  p.effective_ms = w.effective_ms.value_or(now_ms);
  const std::string& res = p.resource;
  const bool known =
      res == "cpu" || res == "memory" || (res.rfind("gpu:", 0) == 0 && res.size() > 4);
  if (!known) {
    return InvalidArgument("resource must be cpu, memory, gpu:<model> or gpu:*, got '" + res + "'");
  }
  if (res.rfind("gpu:", 0) == 0 && res != "gpu:*") {
    p.resource = "gpu:" + CanonicalGpuModelName(res.substr(4));
  }
  return p;
}

Result<server::NodeTelemetry> FromWire(proto::TelemetryBatch w, const std::string& node) {
  server::NodeTelemetry batch;
  batch.node = node;
  for (size_t i = 0; i < w.samples.size(); ++i) {
    const proto::NodeSample& ws = w.samples[i];
    server::NodeSample s;
    s.usage = UsageFromWire(ws);
    for (size_t g = 0; g < ws.gpus.size(); ++g) {
      const proto::GpuSample& wg = ws.gpus[g];
      if (wg.index != static_cast<int32_t>(g)) {
        return InvalidArgument("samples[" + std::to_string(i) + "].gpus[" + std::to_string(g) +
                               "].index must be " + std::to_string(g) +
                               " (GPUs in index order), got " + std::to_string(wg.index));
      }
      server::GpuSample gs;
      gs.time_ms = s.usage.time_ms;
      gs.values[server::gpu_usage::kUtilPct] = Gauge(wg.util_pct);
      gs.values[server::gpu_usage::kMemMib] = Gauge(wg.mem_used_mib);
      s.gpus.push_back(gs);
    }
    batch.samples.push_back(std::move(s));
  }
  for (proto::TaskTelemetry& wt : w.tasks) {
    server::TaskTelemetry t;
    t.task_id = std::move(wt.task_id);
    t.bound_ms = wt.bound_ms;
    t.output_complete = wt.complete;
    for (const proto::UsageSample& s : wt.samples) t.samples.push_back(UsageFromWire(s));
    for (proto::OutputChunk& wc : wt.output) {
      server::OutputChunk chunk;
      chunk.stream = server::ParseOutputStream(wc.stream).value_or(server::OutputStream::kStdout);
      chunk.offset = wc.offset;
      chunk.data = Base64Decode(wc.data_b64).value_or("");  // the decoder checked it
      t.output.push_back(std::move(chunk));
    }
    batch.tasks.push_back(std::move(t));
  }
  return batch;
}

}  // namespace gpupool::api
