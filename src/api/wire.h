// The server's side of the wire contract: the domain records and the control plane's views as
// proto's wire types (ToWire), and decoded request bodies turned into what the control plane
// takes (FromWire), with the checks a field description cannot state (TaskRequest's Validate,
// MIG placement rules, the stop condition's syntax, price resources). Errors name the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/records.h"
#include "core/result.h"
#include "core/snapshot.h"
#include "proto/accounts.h"
#include "proto/billing.h"
#include "proto/console.h"
#include "proto/datasets.h"
#include "proto/events.h"
#include "proto/nodes.h"
#include "proto/tasks.h"
#include "proto/telemetry.h"
#include "server/services.h"

namespace gpupool::api {

// --- records and views → wire ---
proto::Task ToWire(const Task& task);
proto::Snapshot ToWire(const TaskSnapshot& snapshot);
proto::VolumeView ToWire(const Volume& volume, const std::vector<std::string>& used_by = {});
proto::VolumeView ToWire(const server::VolumeInfo& info);
proto::DatasetView ToWire(const server::DatasetInfo& info);
proto::TaskDetail ToWire(const server::TaskView& view);
proto::TaskArray ToWire(const server::TaskArrayView& view);
proto::Job ToWire(const server::JobView& view);
proto::TaskEvent ToWire(const TaskEvent& event);
proto::NodeView ToWire(const server::NodeView& view);
proto::Assignments ToWire(const server::NodeAssignments& assignments);
proto::ProjectView ToWire(const Project& project);
proto::UserView ToWire(const User& user);
proto::AccessKeyView ToWire(const AccessKey& key);            // never the secret
proto::NewAccessKey ToWire(const server::NewAccessKey& key);  // with secret_key, shown once
proto::SshKeyView ToWire(const std::string& user, const SshKey& key);
proto::JoinTokenView ToWire(const server::JoinTokenView& view);
proto::NewJoinToken ToWire(const server::NewJoinToken& created);
proto::AgentCredentials ToWire(const server::AgentCredentials& credentials);
proto::ConsoleSession ToWire(const server::SessionGrant& session);  // with its CSRF token
proto::BalanceView ToWire(const server::Balance& balance);
proto::LedgerEntryView ToWire(const LedgerEntry& entry);
proto::AuditEntryView ToWire(const AuditEntry& entry);
proto::TaskCostView ToWire(const server::TaskCost& cost);
proto::StatementView ToWire(const server::Statement& statement);
proto::PriceView ToWire(const Price& price);
proto::TelemetryAck ToWire(const std::vector<server::OutputOffsets>& offsets);
proto::LogSlice ToWire(const server::LogSlice& slice, server::OutputStream stream);
proto::TaskMetrics ToWire(const server::TaskMetrics& metrics);
proto::NodeMetrics ToWire(const server::NodeMetrics& metrics);
proto::UsageOverview ToWire(const server::UsageOverview& overview);
// The live events' payloads (proto/events.h).
proto::StreamHello ToWire(const server::StreamStarted& started);
proto::Deleted ToWire(const server::TaskDeletedEvent& deleted);
proto::TaskUsageEvent ToWire(const server::TaskUsageEvent& event);
proto::TaskLogEvent ToWire(const server::TaskLogEvent& event);  // stdout
proto::TaskMetricsEvent ToWire(const server::TaskMetricsEvent& event);
proto::NodeUsageEvent ToWire(const server::NodeUsageEvent& event);

// --- wire → what the control plane takes ---
// The TaskRequest passes Validate(); GPU models and the stop condition in canonical form.
Result<server::TaskSpec> FromWire(proto::TaskSubmit submit);
// A job's submission: its task spec, and the job's size and placement rules.
Result<std::pair<server::TaskSpec, server::JobSpec>> FromWire(proto::JobSubmit submit);
// The name and size are the VolumeService's to check (core/volume.h).
server::VolumeSpec FromWire(proto::VolumeCreate create);
// MIG instances by profile name, checked against the GPU model's placement rules.
Result<Node> FromWire(proto::NodeRegistration registration);
Result<Project> FromWire(proto::ProjectCreate create);
Result<User> FromWire(proto::UserCreate create);
// effective_ms defaults to `now_ms`; resource is cpu, memory, gpu:<model> or gpu:*.
Result<Price> FromWire(proto::PriceSet price, int64_t now_ms);
// Malformed metric lines are skipped (a task's file is its own business); GPUs of a node sample
// must come in index order.
Result<server::NodeTelemetry> FromWire(proto::TelemetryBatch batch, const std::string& node);

// A patch over the current record; the result is checked as a whole.
Status ApplyPatch(const proto::ProjectPatch& patch, Project* project);
Status ApplyPatch(const proto::UserPatch& patch, User* user);

}  // namespace gpupool::api
