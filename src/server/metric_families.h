// Every metric family the server exports on /metrics: its name, type, help and label names, once.
// Names follow Prometheus' conventions (base units: seconds, bytes, cores, ratios 0..1;
// counters end in _total, nothing else does); money is in the API's micros. The labels mean the
// same in every family: `project` and `task` are ids, `node` the node's name, `gpu` the GPU's
// index on its node, `model` the catalog's GPU model name, `state` a task state, `status` a
// node status, `route` an API route pattern, `code` an HTTP status code, `auth` whether a
// connection authenticated (anonymous, authenticated), `reason` why a connection or request was
// refused. docs/monitoring/
// (dashboard, alerts) uses these names, and a test checks it.
#pragma once

#include "server/metrics.h"

namespace gpupool::server::metric {

// --- the pool (CollectGauges) ---
inline constexpr MetricFamily<1> kGpus{
    "gpupool_gpus", MetricType::kGauge, "GPUs of ready nodes, by model.", {"model"}};
inline constexpr MetricFamily<1> kGpusAllocated{
    "gpupool_gpus_allocated",
    MetricType::kGauge,
    "GPUs of ready nodes bound to tasks, by model: a share counts its fraction, a MIG instance its "
    "slices (free: gpupool_gpus minus this).",
    {"model"}};
inline constexpr MetricFamily<2> kNodeStatus{
    "gpupool_node_status",
    MetricType::kGauge,
    "1 for the node's status (ready or lost), 0 for the others.",
    {"node", "status"}};
inline constexpr MetricFamily<2> kTasks{
    "gpupool_tasks",
    MetricType::kGauge,
    "Tasks in the server's memory by project and state: the live ones, and the finished ones for "
    "--retain-finished after their end.",
    {"project", "state"}};
inline constexpr MetricFamily<1> kQueueDepth{
    "gpupool_queue_depth",
    MetricType::kGauge,
    "Tasks waiting in the scheduler's queue, by project (pending and not held).",
    {"project"}};
inline constexpr MetricFamily<1> kQueueOldest{
    "gpupool_queue_oldest_task_timestamp_seconds",
    MetricType::kGauge,
    "When the project's longest-waiting queued task entered the queue (submitted, released or "
    "re-queued), in seconds since the epoch; absent when nothing of the project waits.",
    {"project"}};
inline constexpr MetricFamily<3> kTaskGpus{
    "gpupool_task_gpus",
    MetricType::kGauge,
    "GPUs a task holds (scheduled, starting or running): a share counts its fraction, a MIG "
    "instance its slices.",
    {"project", "task", "node"}};

// --- billing (CollectGauges; balances only while billing is on) ---
inline constexpr MetricFamily<1> kProjectBalance{
    "gpupool_project_balance_micros",
    MetricType::kGauge,
    "The project's balance (credits minus usage), in micros of the currency; exported while "
    "billing is on (some price is not zero).",
    {"project"}};
inline constexpr MetricFamily<1> kProjectUsage{
    "gpupool_project_usage_micros_total",
    MetricType::kCounter,
    "Usage billed to the project since it was created, in micros of the currency.",
    {"project"}};

// --- usage, as the agents last reported it (CollectTelemetryGauges) ---
inline constexpr MetricFamily<1> kNodeCpu{"gpupool_node_cpu_used_cores",
                                          MetricType::kGauge,
                                          "CPU a ready node uses, in cores.",
                                          {"node"}};
inline constexpr MetricFamily<1> kNodeMemory{
    "gpupool_node_memory_used_bytes", MetricType::kGauge, "Memory a ready node uses.", {"node"}};
inline constexpr MetricFamily<3> kGpuUtilization{
    "gpupool_gpu_utilization_ratio",
    MetricType::kGauge,
    "Utilisation of each GPU of a ready node, 0..1 (a MIG-partitioned GPU: the whole GPU).",
    {"node", "gpu", "model"}};
inline constexpr MetricFamily<3> kGpuMemory{"gpupool_gpu_memory_used_bytes",
                                            MetricType::kGauge,
                                            "Memory used on each GPU of a ready node.",
                                            {"node", "gpu", "model"}};
inline constexpr MetricFamily<3> kTaskCpu{"gpupool_task_cpu_used_cores",
                                          MetricType::kGauge,
                                          "CPU a running task uses, in cores.",
                                          {"project", "task", "node"}};
inline constexpr MetricFamily<3> kTaskMemory{"gpupool_task_memory_used_bytes",
                                             MetricType::kGauge,
                                             "Memory a running task uses.",
                                             {"project", "task", "node"}};
inline constexpr MetricFamily<3> kTaskGpuUtilization{
    "gpupool_task_gpu_utilization_ratio",
    MetricType::kGauge,
    "Mean utilisation of a running task's GPUs, 0..1 (a shared GPU: the whole GPU's).",
    {"project", "task", "node"}};
inline constexpr MetricFamily<3> kTaskGpuMemory{"gpupool_task_gpu_memory_used_bytes",
                                                MetricType::kGauge,
                                                "GPU memory a running task's processes use.",
                                                {"project", "task", "node"}};
inline constexpr MetricFamily<3> kTaskGpuIdle{
    "gpupool_task_gpu_idle_seconds",
    MetricType::kGauge,
    "How long a running task's GPUs have been idle (0 % utilisation) without a break, as of its "
    "latest sample: the stop conditions' gpu_idle_s.",
    {"project", "task", "node"}};

// --- the API and the scheduler (recorded as they happen) ---
inline constexpr MetricFamily<2> kApiRequestDuration{
    "gpupool_api_request_duration_seconds",
    MetricType::kHistogram,
    "API request handling time by route pattern and HTTP status code.",
    {"route", "code"}};
inline constexpr MetricFamily<0> kSchedulerCycle{
    "gpupool_scheduler_cycle_seconds",
    MetricType::kHistogram,
    "Time of one scheduling pass (snapshot refresh, ScheduleOnce, apply).",
    {}};
inline constexpr MetricFamily<0> kSchedulerPlaced{
    "gpupool_scheduler_placed_total", MetricType::kCounter, "Tasks placed by the scheduler.", {}};
inline constexpr MetricFamily<0> kSchedulerNodesCopied{
    "gpupool_scheduler_snapshot_nodes_copied_total",
    MetricType::kCounter,
    "Nodes the passes copied into their snapshot (changed since the last pass).",
    {}};
inline constexpr MetricFamily<0> kSchedulerStale{
    "gpupool_scheduler_stale_total",
    MetricType::kCounter,
    "Placements the plan applier refused because the state had moved on.",
    {}};
inline constexpr MetricFamily<0> kPreemptions{
    "gpupool_preemptions_total", MetricType::kCounter, "Tasks preempted.", {}};
inline constexpr MetricFamily<0> kMoves{
    "gpupool_moves_total",
    MetricType::kCounter,
    "Running tasks moved to another node to make room for a waiting one (snapshotted first).",
    {}};

// --- the HTTP server's connections (read at each scrape: api::HttpServer::connection_figures) ---
inline constexpr MetricFamily<1> kHttpConnections{
    "gpupool_http_connections",
    MetricType::kGauge,
    "Connections open (WebSockets and tunnels included), by whether a request on them "
    "authenticated yet.",
    {"auth"}};
inline constexpr MetricFamily<0> kHttpConnectionsReserved{
    "gpupool_http_connections_reserved",
    MetricType::kGauge,
    "Connections open that were accepted past --max-connections, into the reserve for agents and "
    "admins.",
    {}};
inline constexpr MetricFamily<1> kHttpConnectionsRefused{
    "gpupool_http_connections_refused_total",
    MetricType::kCounter,
    "Connections refused with a 503 and closed: peer (its address had "
    "--max-connections-per-peer anonymous ones open), full (the limit and the reserve both "
    "full), reserve (accepted into the reserve, but its first request was no agent's or "
    "admin's), user (its request authenticated a user with --max-connections-per-user open).",
    {"reason"}};
// --- signed requests refused before their nonce was kept (ConsumeNonce) ---
inline constexpr MetricFamily<1> kRequestsThrottled{
    "gpupool_api_requests_throttled_total",
    MetricType::kCounter,
    "Signed requests refused to bound the nonce cache: rate (429: the access key was past "
    "--key-rate and --key-burst), cache (503: the cache held --max-nonces).",
    {"reason"}};

}  // namespace gpupool::server::metric
