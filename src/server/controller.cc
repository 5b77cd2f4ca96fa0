// Controller: start-up (rebuild from the store, bootstrap), authentication support, tasks, nodes
// and the agent-facing calls. Accounts and billing are in controller_accounts.cc, the scheduling
// loop and housekeeping in scheduler_loop.cc.
#include "server/controller.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "core/gpu_catalog.h"
#include "core/gpu_names.h"
#include "meter/meter.h"
#include "os/sha256.h"
#include "proto/tasks.h"
#include "server/metric_families.h"

namespace gpupool::server {
namespace {

constexpr int64_t kMaxListLimit = 1000;

// What the nonce cache keeps of a (key, nonce): 64 bits of their SHA-256 instead of the ~50 bytes
// of text and two strings' overhead, since the cache holds every signed request of the window
// (millions at a high request rate). Nonces are random, so a false "already used" needs a 64-bit
// collision within one window; a client cannot aim one at another's nonce it does not know.
uint64_t NonceKey(const std::string& access_key, const std::string& nonce) {
  const std::string digest = os::Sha256Hex(access_key + '\n' + nonce);
  return std::stoull(digest.substr(0, 16), nullptr, 16);
}

// A request rate as people write it: "100", "0.5".
std::string FormatRate(double per_s) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", per_s);
  return text;
}

// Why a task that ended cannot be stopped.
tl::unexpected<Error> AlreadyEnded(const Task& t) {
  return MakeError(ErrorCode::kFailedPrecondition,
                   "task " + t.id + " already ended (" + std::string(TaskStateName(t.state)) + ")");
}

// Why a task that is not held cannot be released.
tl::unexpected<Error> NotHeld(const Task& t) {
  return MakeError(ErrorCode::kFailedPrecondition,
                   t.state == TaskState::kPending
                       ? "task " + t.id + " is not held: it is already in the queue"
                       : "task " + t.id + " is " + std::string(TaskStateName(t.state)) +
                             ", not held: only a held pending task can be released");
}

// Why a task that has not ended cannot be deleted.
tl::unexpected<Error> NotEnded(const Task& t) {
  return MakeError(ErrorCode::kFailedPrecondition, "task " + t.id + " is " +
                                                       std::string(TaskStateName(t.state)) +
                                                       ": stop it before deleting it");
}

// Why a held task waits: it is not in the queue at all.
std::string HeldReason(const std::string& id) {
  return "held: release it with POST /v1/tasks/" + id + "/release (gpupool release " + id + ")";
}

}  // namespace

int64_t SystemClock::NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool Caller::InProject(const std::string& project_id) const {
  return role == Role::kAdmin ||
         std::find(projects.begin(), projects.end(), project_id) != projects.end();
}

Controller::Controller(store::Store& store, Clock& clock, SecretBox secrets,
                       ControllerOptions options)
    : store_(store),
      clock_(clock),
      secrets_(std::move(secrets)),
      options_(std::move(options)),
      disk_(options_.free_bytes, options_.disk_reserve_bytes, [this] { return clock_.NowMs(); }),
      events_(std::make_unique<EventHub>(
          options_.events, &Controller::MayView,
          [this](const std::string& task, int64_t offset, int64_t max_bytes) {
            return ReadStoredStdout(task, offset, max_bytes);
          })),
      blocking_(
          std::make_unique<BlockingExecutor>(options_.blocking_threads, options_.blocking_queue)) {
  // Every family is on /metrics from the start; the counters count from 0 (a counter that
  // appears only at its first event hides that event from rate()).
  metrics_.Declare(metric::kGpus);
  metrics_.Declare(metric::kGpusAllocated);
  metrics_.Declare(metric::kNodeStatus);
  metrics_.Declare(metric::kTasks);
  metrics_.Declare(metric::kQueueDepth);
  metrics_.Declare(metric::kQueueOldest);
  metrics_.Declare(metric::kTaskGpus);
  metrics_.Declare(metric::kProjectBalance);
  metrics_.Declare(metric::kProjectUsage);
  metrics_.Declare(metric::kNodeCpu);
  metrics_.Declare(metric::kNodeMemory);
  metrics_.Declare(metric::kGpuUtilization);
  metrics_.Declare(metric::kGpuMemory);
  metrics_.Declare(metric::kTaskCpu);
  metrics_.Declare(metric::kTaskMemory);
  metrics_.Declare(metric::kTaskGpuUtilization);
  metrics_.Declare(metric::kTaskGpuMemory);
  metrics_.Declare(metric::kTaskGpuIdle);
  metrics_.Declare(metric::kApiRequestDuration);
  metrics_.Declare(metric::kSchedulerCycle);
  metrics_.Add(metric::kSchedulerPlaced, {}, 0);
  metrics_.Add(metric::kSchedulerNodesCopied, {}, 0);
  metrics_.Add(metric::kSchedulerStale, {}, 0);
  metrics_.Add(metric::kPreemptions, {}, 0);
  metrics_.Add(metric::kMoves, {}, 0);
  metrics_.Add(metric::kRequestsThrottled, {"rate"}, 0);
  metrics_.Add(metric::kRequestsThrottled, {"cache"}, 0);
  metrics_.Declare(metric::kHttpConnections);
  metrics_.Declare(metric::kHttpConnectionsReserved);
  metrics_.Declare(metric::kHttpConnectionsRefused);
}

Controller::~Controller() { Stop(); }

Result<std::unique_ptr<Controller>> Controller::Open(store::Store& store, Clock& clock,
                                                     SecretBox secrets, ControllerOptions options) {
  // Bounds that keep the rate's arithmetic (microseconds, int64) far from overflow.
  if (options.key_rate_per_s != 0 &&
      !(options.key_rate_per_s >= 0.01 && options.key_rate_per_s <= 1e6)) {
    return InvalidArgument(
        "the rate of signed requests per access key (--key-rate) must be 0 "
        "(no limit) or 0.01..1000000 a second, got " +
        FormatRate(options.key_rate_per_s));
  }
  if (options.key_burst < 1 || options.key_burst > 1'000'000) {
    return InvalidArgument(
        "the burst of signed requests per access key (--key-burst) must be "
        "1..1000000, got " +
        std::to_string(options.key_burst));
  }
  if (options.max_nonces < 1) {
    return InvalidArgument("the nonce cache (--max-nonces) must hold at least 1 entry");
  }
  auto policy =
      sched::MakePolicy(options.policy == "default" ? sched::DefaultPolicyName() : options.policy,
                        sched::PolicyOptions{});
  if (!policy) return tl::unexpected(policy.error());
  // Tasks that finished before the retention stay in the store only.
  auto snapshot = store.Load(
      store::LoadOptions{.finished_since_ms = clock.NowMs() - options.retain_finished_ms});
  if (!snapshot) return tl::unexpected(snapshot.error());
  std::unique_ptr<TaskOutput> output;
  if (!options.output_dir.empty()) {
    auto opened = TaskOutput::Open(options.output_dir, options.max_output_bytes);
    if (!opened) return tl::unexpected(opened.error());
    output = std::move(*opened);
  }
  std::unique_ptr<Controller> c(
      new Controller(store, clock, std::move(secrets), std::move(options)));
  c->policy_ = std::move(*policy);
  c->output_ = std::move(output);
  if (c->output_) {
    c->output_->SetAppendObserver([hub = c->events_.get()](const std::string& task,
                                                           OutputStream stream, int64_t offset,
                                                           std::string_view data) {
      if (stream == OutputStream::kStdout && hub->Active()) hub->PublishStdout(task, offset, data);
    });
  }
  if (auto ok = c->Rebuild(std::move(*snapshot)); !ok) return tl::unexpected(ok.error());
  return c;
}

Status Controller::Rebuild(store::Snapshot snap) {
  std::lock_guard lock(mu_);
  const int64_t now = clock_.NowMs();
  for (auto& p : snap.projects) projects_.emplace(p.id, std::move(p));
  {
    std::lock_guard auth(auth_mu_);
    for (auto& u : snap.users) users_.emplace(u.id, std::move(u));
    for (auto& k : snap.access_keys) {
      if (k.revoked_ms == 0) {
        auto plain = secrets_.Open(k.sealed_secret);
        if (!plain) {
          return MakeError(ErrorCode::kInternal,
                           "cannot unseal the secret of access key " + k.access_key + ": " +
                               plain.error().message +
                               " (is master.key the one it was sealed with?)");
        }
        plain_secrets_[k.access_key] = std::move(*plain);
      }
      keys_.emplace(k.access_key, std::move(k));
    }
    for (auto& t : snap.join_tokens) join_tokens_.emplace(t.id, std::move(t));
  }
  for (auto& n : snap.nodes) {
    // What is free follows from the tasks bound below; MIG instances start unused.
    Node node = n.node;
    node.cpu_free_milli = node.cpu_milli;
    node.memory_free_mib = node.memory_mib;
    node.disk_free_gib = node.disk_gib;
    for (Gpu& g : node.gpus) {
      g.milli_free = kMilliPerGpu;
      g.mem_free_mib = g.mem_mib;
      for (MigInstance& m : g.mig_instances) m.in_use = false;
    }
    node.schedulable = n.node.schedulable && n.status == NodeStatus::kReady && !n.draining;
    cluster_.AddNode(std::move(node));
    // Heartbeats are not stored: every agent gets a full timeout to reconnect after a restart.
    n.last_heartbeat_ms = now;
    node_version_[n.node.name] = now * 1000;
    nodes_.emplace(n.node.name, std::move(n));
  }
  prices_ = std::move(snap.prices);
  price_table_ = meter::PriceTable(prices_);
  settings_ = std::move(snap.settings);
  for (TaskSnapshot& s : snap.snapshots) AddSnapshot(std::move(s));
  if (auto it = settings_.find("snapshot_seq"); it != settings_.end()) {
    next_snapshot_seq_ = std::max<int64_t>(next_snapshot_seq_, std::stoll(it->second) + 1);
  }
  for (Volume& v : snap.volumes) {
    next_volume_seq_ = std::max(next_volume_seq_, v.seq + 1);
    volumes_.emplace(v.id, std::move(v));
  }
  if (auto it = settings_.find("volume_seq"); it != settings_.end()) {
    next_volume_seq_ = std::max<int64_t>(next_volume_seq_, std::stoll(it->second) + 1);
  }
  for (Dataset& d : snap.datasets) {
    next_dataset_seq_ = std::max(next_dataset_seq_, d.seq + 1);
    datasets_.emplace(d.id, std::move(d));
  }
  if (auto it = settings_.find("dataset_seq"); it != settings_.end()) {
    next_dataset_seq_ = std::max<int64_t>(next_dataset_seq_, std::stoll(it->second) + 1);
  }
  for (const auto& [id, micros] : snap.credits_micros) use_[id].credits_micros = micros;
  for (const auto& [id, micros] : snap.usage_micros) use_[id].usage_micros = micros;
  {
    std::lock_guard nonce_lock(nonce_mu_);
    for (auto& n : snap.nonces) {
      if (n.timestamp_ms < now - options_.nonce_window_ms) continue;
      nonces_.insert(NonceKey(n.access_key, n.nonce));
      nonce_order_.emplace(n.timestamp_ms, NonceKey(n.access_key, n.nonce));
    }
  }

  assignment_clock_ = now * 1000;
  next_seq_ = snap.max_task_seq + 1;    // past the tasks left in the store too
  audit_seq_ = snap.max_audit_seq;
  gone_up_to_seq_ = snap.max_task_seq;  // some of them may have been left out
  store::WriteBatch repairs;
  for (auto& t : snap.tasks) {
    next_seq_ = std::max(next_seq_, t.seq + 1);
    seq_of_[t.id] = t.seq;
    Task& task = tasks_.emplace(t.seq, std::move(t)).first->second;
    Index(task);
    if (!IsTerminal(task.state)) ++use_[task.project_id].active_tasks;
    if (task.state == TaskState::kPending) {
      if (!task.held) pending_.emplace(-task.request.priority, task.seq);
      recent_requests_.push_back(task.request);
    }
    if (!HoldsResources(task.state)) continue;
    // Re-adopt the task where it was bound; if that is impossible the task is lost (its node
    // vanished from the store), never placed a second time.
    auto placement = ToPlacement(task);
    Status bound = placement
                       ? cluster_.Bind(task.id, PlacementRequest(task), *placement, WorkOf(task))
                       : MakeError(ErrorCode::kNotFound, "its node is gone");
    if (bound) {
      use_[task.project_id].gpu_milli += TaskGpuMilli(task);
    } else {
      Transition(task, TaskState::kLost, "cannot re-adopt after restart: " + bound.error().message,
                 now, repairs);
    }
  }
  while (static_cast<int64_t>(recent_requests_.size()) > options_.typical_window) {
    recent_requests_.pop_front();
  }
  LoadSnapshotWaits(now);  // once the tasks and their snapshots are known
  if (!repairs.Empty()) {
    if (auto ok = store_.WriteSync(std::move(repairs)); !ok) return ok;
  }
  last_meter_ms_ = now;
  return {};
}

Result<std::optional<NewAccessKey>> Controller::Bootstrap() {
  std::unique_lock lock(mu_);
  if (settings_.count("bootstrapped")) return std::optional<NewAccessKey>();
  const int64_t now = clock_.NowMs();
  store::WriteBatch batch;
  Project project{.id = "default", .name = "default", .created_ms = now};
  User admin{.id = "admin",
             .name = "admin",
             .role = Role::kAdmin,
             .projects = {"default"},
             .created_ms = now,
             .ssh_keys = {}};
  NewAccessKey key;
  key.secret = NewSecretKey();
  key.key = AccessKey{.access_key = NewAccessKeyId(),
                      .user_id = admin.id,
                      .sealed_secret = secrets_.Seal(key.secret),
                      .description = "bootstrap admin key",
                      .created_ms = now};
  projects_[project.id] = project;
  {
    std::lock_guard auth(auth_mu_);
    users_[admin.id] = admin;
    keys_[key.key.access_key] = key.key;
    plain_secrets_[key.key.access_key] = key.secret;
  }
  settings_["bootstrapped"] = std::to_string(now);
  batch.projects.push_back(project);
  batch.users.push_back(admin);
  batch.access_keys.push_back(key.key);
  batch.settings = settings_;
  lock.unlock();
  if (auto ok = store_.WriteSync(std::move(batch)); !ok) return tl::unexpected(ok.error());
  return std::optional<NewAccessKey>(std::move(key));
}

// ---------------------------------------------------------------------------------------------
// Authentication support.

Result<KeyGrant> Controller::LookupKey(const std::string& access_key) {
  std::lock_guard lock(auth_mu_);  // not mu_: every signed request comes here first
  return GrantOf(access_key);
}

Result<KeyGrant> Controller::GrantOf(const std::string& access_key) const {
  auto it = keys_.find(access_key);
  if (it == keys_.end()) {
    return MakeError(ErrorCode::kUnauthenticated, "unknown access key " + access_key);
  }
  if (!it->second.node.empty()) return AgentGrant(it->second);
  if (it->second.revoked_ms != 0) {
    return MakeError(ErrorCode::kUnauthenticated, "access key " + access_key + " was revoked");
  }
  auto user = users_.find(it->second.user_id);
  if (user == users_.end()) {
    return MakeError(ErrorCode::kUnauthenticated,
                     "access key " + access_key + " belongs to no user");
  }
  KeyGrant grant;
  grant.caller = Caller{.user_id = user->second.id,
                        .access_key = access_key,
                        .role = user->second.role,
                        .projects = user->second.projects};
  grant.secret = plain_secrets_.at(access_key);
  return grant;
}

Status Controller::ConsumeNonce(const std::string& access_key, const std::string& nonce,
                                int64_t timestamp_ms, bool durable) {
  std::lock_guard lock(nonce_mu_);  // not mu_: the cache is all this touches
  const int64_t now = clock_.NowMs();
  const int64_t horizon = now - options_.nonce_window_ms;
  while (!nonce_order_.empty() && nonce_order_.top().first < horizon) {
    nonces_.erase(nonce_order_.top().second);
    nonce_order_.pop();
  }
  const uint64_t key = NonceKey(access_key, nonce);
  if (nonces_.contains(key)) {
    return MakeError(ErrorCode::kUnauthenticated,
                     "nonce " + nonce + " was already used: a replayed request is refused");
  }
  // The key's rate, as a generic cell rate algorithm (the token bucket's equivalent in one
  // number): each request moves the key's theoretical arrival time on by one interval, and a
  // request finding it more than burst - 1 intervals ahead of now is refused. Refusals take no
  // token and keep no nonce: the same signed request may come again.
  KeyBucket* bucket = nullptr;
  int64_t interval_us = 0;
  const int64_t now_us = now * 1000;
  if (const double rate = options_.key_rate_per_s; rate > 0) {
    interval_us = std::max<int64_t>(1, std::llround(1e6 / rate));
    const int64_t tolerance_us = (options_.key_burst - 1) * interval_us;
    if (now - buckets_pruned_ms_ >= options_.nonce_window_ms) {
      // A key whose arrival time has passed has its whole burst again, as a new one would.
      std::erase_if(key_buckets_, [&](const auto& entry) { return entry.second.tat_us <= now_us; });
      buckets_pruned_ms_ = now;
    }
    bucket = &key_buckets_[access_key];
    bucket->tat_us = std::max(bucket->tat_us, now_us);
    if (const int64_t ahead_us = bucket->tat_us - now_us - tolerance_us; ahead_us > 0) {
      Error e{ErrorCode::kResourceExhausted,
              "access key " + access_key + " is past its rate of " + FormatRate(rate) +
                  " signed requests per second (bursts of " + std::to_string(options_.key_burst) +
                  "): retry later"};
      e.retry_after_ms = (ahead_us + 999) / 1000;
      metrics_.Add(metric::kRequestsThrottled, {"rate"}, 1);
      return tl::unexpected(std::move(e));
    }
  }
  if (nonces_.size() >= options_.max_nonces) {
    // The oldest nonce leaves the window first; forgetting one early would open it to replay.
    Error e{ErrorCode::kUnavailable,
            "the server holds the nonces of " + std::to_string(nonces_.size()) +
                " signed requests of the last " + std::to_string(options_.nonce_window_ms / 1000) +
                " s, its limit: retry later"};
    e.retry_after_ms =
        nonce_order_.empty() ? 1000 : std::max<int64_t>(1, nonce_order_.top().first - horizon + 1);
    metrics_.Add(metric::kRequestsThrottled, {"cache"}, 1);
    return tl::unexpected(std::move(e));
  }
  if (bucket != nullptr) bucket->tat_us += interval_us;
  nonces_.insert(key);
  nonce_order_.emplace(timestamp_ms, key);
  if (durable) {
    store::WriteBatch batch;
    batch.nonces.push_back(Nonce{access_key, nonce, timestamp_ms});
    batch.expire_nonces_before_ms = horizon;
    // Ordered before the request's own write: once that is acknowledged, so is the nonce.
    Commit(std::move(batch), [](Status) {});
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Shared helpers.

Task* Controller::FindTask(const std::string& id) {
  auto it = seq_of_.find(id);
  if (it == seq_of_.end()) return nullptr;
  return &tasks_.at(it->second);
}

bool Controller::MayView(const Caller& caller, const Task& task) {
  if (caller.IsTask()) return task.id == caller.task_id;
  return caller.IsAgent() ? task.placement && task.placement->node == caller.agent_node
                          : caller.InProject(task.project_id);
}

Result<Task*> Controller::VisibleTask(const Caller& caller, const std::string& id) {
  Task* task = FindTask(id);
  if (task == nullptr || !MayView(caller, *task)) return NotFound("task " + id + " not found");
  return task;
}

void Controller::ReadTask(const Caller& caller, const std::string& id, Done<Task> done) {
  {
    std::unique_lock lock(mu_);
    if (FindTask(id) != nullptr) {
      Result<Task*> task = VisibleTask(caller, id);
      Result<Task> copy = task ? Result<Task>(**task) : tl::unexpected(task.error());
      lock.unlock();
      return done(std::move(copy));
    }
  }
  ReadHistory<Task>(
      [this, caller, id]() -> Result<Task> {
        Result<std::optional<Task>> stored = store_.ReadTask(id);
        if (!stored) return tl::unexpected(stored.error());
        if (!stored->has_value() || !MayView(caller, **stored)) {
          return NotFound("task " + id + " not found");
        }
        return std::move(**stored);
      },
      std::move(done));
}

void Controller::Index(const Task& task) {
  ++by_state_[task.project_id][static_cast<size_t>(task.state)];
  if (!task.array_id.empty()) {
    ArrayUse& a = arrays_[task.array_id];
    a.project_id = task.project_id;
    a.limit = task.array_limit;
    a.last_seq = std::max(a.last_seq, task.seq);
    ++a.in_memory;
    if (HoldsResources(task.state)) ++a.holding;
  }
  if (IsTerminal(task.state)) {
    finished_.emplace(task.finished_ms, task.seq);
  } else {
    live_.insert(task.seq);
  }
}

void Controller::Unindex(const Task& task) {
  --by_state_[task.project_id][static_cast<size_t>(task.state)];
  if (!task.array_id.empty()) {
    auto it = arrays_.find(task.array_id);
    if (HoldsResources(task.state)) --it->second.holding;
    if (--it->second.in_memory == 0) arrays_.erase(it);
  }
  if (IsTerminal(task.state)) {
    finished_.erase({task.finished_ms, task.seq});
  } else {
    live_.erase(task.seq);
  }
}

std::vector<std::string> Controller::DropFinished(int64_t cutoff_ms) {
  std::vector<std::string> dropped;
  while (!finished_.empty() && finished_.begin()->first < cutoff_ms) {
    const int64_t seq = finished_.begin()->second;
    auto it = tasks_.find(seq);
    Unindex(it->second);
    gone_up_to_seq_ = std::max(gone_up_to_seq_, seq);
    dropped.push_back(it->second.id);
    seq_of_.erase(it->second.id);
    tasks_.erase(it);
  }
  return dropped;
}

void Controller::ForgetTasks(const std::vector<std::string>& ids) {
  if (ids.empty()) return;
  ForgetTelemetry(ids);
  for (const std::string& id : ids) {
    if (output_) output_->Forget(id);
    if (options_.task_files != nullptr) options_.task_files->Forget(id);
  }
}

Status Controller::RequireAdmin(const Caller& caller) const {
  if (caller.IsAdmin()) return {};
  return MakeError(ErrorCode::kPermissionDenied, "only an admin may do this");
}

Result<std::string> Controller::ResolveProject(const Caller& caller,
                                               const std::string& project_id) const {
  if (project_id.empty()) {
    if (caller.projects.size() == 1) return caller.projects.front();
    if (caller.projects.empty()) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "user " + caller.user_id + " belongs to no project");
    }
    return InvalidArgument("project is required: user " + caller.user_id + " belongs to " +
                           std::to_string(caller.projects.size()) + " projects");
  }
  if (!projects_.count(project_id) || !caller.InProject(project_id)) {
    return NotFound("project " + project_id + " not found");
  }
  return project_id;
}

int64_t Controller::TaskGpuMilli(const Task& task) const {
  return QuotaMilli(task.request, TaskGpuModel(task));
}

std::string Controller::TaskGpuModel(const Task& task) const {
  if (!task.placement || task.placement->gpus.empty()) return "";
  auto it = nodes_.find(task.placement->node);
  if (it == nodes_.end()) return "";
  const auto& gpus = it->second.node.gpus;
  const auto g = static_cast<size_t>(task.placement->gpus.front());
  return g < gpus.size() ? gpus[g].model : "";
}

std::optional<sched::Placement> Controller::ToPlacement(const Task& task) const {
  if (!task.placement) return std::nullopt;
  const int node = cluster_.FindNode(task.placement->node);
  if (node < 0) return std::nullopt;
  sched::Placement p;
  p.node = node;
  p.gpus = task.placement->gpus;
  p.milli_per_gpu = task.placement->milli_per_gpu;
  p.gpu_mem_mib = task.placement->gpu_mem_mib;
  if (task.placement->mig_profile >= 0) {
    MigPlacement mig;
    mig.action = MigAction::kUseFree;
    mig.profile = task.placement->mig_profile;
    mig.start = task.placement->mig_start;
    if (p.gpus.empty()) return std::nullopt;
    const Gpu& gpu = cluster_.node(node).gpus.at(static_cast<size_t>(p.gpus.front()));
    for (size_t i = 0; i < gpu.mig_instances.size(); ++i) {
      if (gpu.mig_instances[i].start == mig.start && gpu.mig_instances[i].profile == mig.profile) {
        mig.instance = static_cast<int>(i);
      }
    }
    if (mig.instance < 0) return std::nullopt;
    p.mig = mig;
  }
  return p;
}

TaskPlacement Controller::FromPlacement(const sched::Placement& p, const TaskRequest&) const {
  TaskPlacement tp;
  tp.node = cluster_.node(p.node).name;
  tp.gpus = p.gpus;
  tp.milli_per_gpu = p.milli_per_gpu;
  tp.gpu_mem_mib = p.gpu_mem_mib;
  if (p.mig) {
    tp.mig_profile = p.mig->profile;
    tp.mig_start = p.mig->start;
  }
  return tp;
}

void Controller::Commit(store::WriteBatch batch, DoneStatus done) {
  ShareJobFate(batch);
  if (events_->Active()) PublishChanges(batch);
  store_.Write(std::move(batch), [this, done = std::move(done)](Status s) {
    if (!s) {
      // Memory already holds the change; continuing would let it run ahead of the disk. Stop,
      // as databases do on a failed fsync: a restart rebuilds from what is durable. A refusal by
      // the store's validation never comes here: the handlers that write what a caller sent check
      // store::ValidateBatch before memory changes and answer the caller with the error; the
      // batches the controller makes of its own state are valid by construction. A full disk
      // comes here only from a store closing while still full (an open store keeps the batch
      // until it fits, and the disk reserve keeps that rare): what shutdown could not save.
      std::fprintf(stderr, "gpupool: fatal: a durable write failed (%s): %s\n",
                   std::string(ErrorCodeName(s.error().code)).c_str(), s.error().message.c_str());
      std::fflush(stderr);
      std::_Exit(70);
    }
    done(s);
  });
}

void Controller::Audit(const Caller& caller, std::string action, std::string target,
                       std::string detail, store::WriteBatch& batch) {
  batch.audit.push_back(AuditEntry{.seq = ++audit_seq_,
                                   .time_ms = clock_.NowMs(),
                                   .actor = caller.user_id,
                                   .access_key = caller.access_key,
                                   .action = std::move(action),
                                   .target = std::move(target),
                                   .detail = std::move(detail)});
}

void Controller::Transition(Task& task, TaskState to, std::string reason, int64_t now_ms,
                            store::WriteBatch& batch) {
  const TaskState from = task.state;
  Unindex(task);
  if (from == TaskState::kPending) {
    pending_.erase({-task.request.priority, task.seq});
    fresh_.erase({-task.request.priority, task.seq});
    task.held = false;  // a held task that is stopped is no longer held
  }
  if (HoldsResources(from) && !HoldsResources(to)) Release(task, now_ms, batch);
  if (IsTerminal(from) && !IsTerminal(to)) {  // a lost restartable task queued again
    ++use_[task.project_id].active_tasks;
    task.finished_ms = 0;
  }
  task.state = to;
  task.reason = reason;
  task.updated_ms = now_ms;
  if (to == TaskState::kPending) {
    task.placement.reset();
    task.started_ms = 0;
    pending_.emplace(-task.request.priority, task.seq);
    fresh_.emplace(-task.request.priority, task.seq);
    Wake();
  }
  if (to == TaskState::kScheduled) task.ended_by.clear();  // a new run: its own until it ends
  if (to == TaskState::kRunning && task.started_ms == 0) task.started_ms = now_ms;
  if (IsTerminal(to)) {
    task.finished_ms = now_ms;
    why_pending_.erase(task.id);
    --use_[task.project_id].active_tasks;
  }
  if (to == TaskState::kPreempted) ++task.preemptions;
  Index(task);
  batch.events.push_back(TaskEvent{task.id, now_ms, from, to, std::move(reason)});
}

void Controller::Release(Task& task, int64_t end_ms, store::WriteBatch& batch) {
  Bill(task, end_ms, batch);
  use_[task.project_id].gpu_milli -= TaskGpuMilli(task);
  (void)cluster_.Unbind(task.id);
  task.bound_ms = 0;  // the placement stays on record: where the task ran
  if (task.placement) TouchNode(task.placement->node);
  RetryAll();
}

void Controller::LoseNode(NodeInfo& info, int64_t now_ms, store::WriteBatch& batch) {
  info.status = NodeStatus::kLost;
  SetNodeDatasets(info.node.name, {});
  const int i = cluster_.FindNode(info.node.name);
  cluster_.SetSchedulable(i, false);
  const int64_t end_ms = info.last_heartbeat_ms;
  const std::string why = "node " + info.node.name + " lost: no heartbeat since " +
                          std::to_string((now_ms - end_ms) / 1000) + " s";
  const std::vector<std::string> on_node = cluster_.TasksOn(i);
  for (const std::string& id : on_node) {
    Task* t = FindTask(id);
    if (t == nullptr || !HoldsResources(t->state)) continue;
    // Usage ends at the last heartbeat, or at the task's binding or start where those came later
    // (a report the server accepted proves the task was there then): never before it started. A
    // meter tick may have billed past that end: credit it back.
    const int64_t task_end = std::max({end_ms, t->bound_ms, t->started_ms});
    if (t->billed_until_ms > task_end && t->bound_ms > 0) {
      const meter::Usage usage = meter::UsageOf(t->request, TaskGpuModel(*t));
      const int64_t refund =
          meter::CostMicros(price_table_, usage, t->bound_ms, task_end, t->billed_until_ms);
      if (refund > 0) {
        LedgerEntry e;
        e.key = t->id + ":refund:" + std::to_string(task_end);
        e.project_id = t->project_id;
        e.task_id = t->id;
        e.kind = LedgerKind::kCredit;
        e.amount_micros = refund;
        e.from_ms = task_end;
        e.to_ms = t->billed_until_ms;
        e.detail = "refund: usage billed after the last heartbeat of " + info.node.name;
        e.created_ms = now_ms;
        batch.ledger.push_back(e);
        use_[t->project_id].credits_micros += refund;
      }
      t->billed_until_ms = task_end;
    }
    if (t->state == TaskState::kRunning) NoteInterruption(*t, task_end);
    Transition(*t, TaskState::kLost, why, task_end, batch);
    if (t->restartable) {
      Transition(*t, TaskState::kPending, "re-queued: its node was lost", now_ms, batch);
    }
    batch.tasks.push_back(*t);
  }
  PersistNode(i, batch);
}

void Controller::Bill(Task& task, int64_t until_ms, store::WriteBatch& batch) {
  if (task.bound_ms == 0 || until_ms <= task.billed_until_ms) return;
  const meter::Usage usage = meter::UsageOf(task.request, TaskGpuModel(task));
  const int64_t cost =
      meter::CostMicros(price_table_, usage, task.bound_ms, task.billed_until_ms, until_ms);
  if (cost > 0) {
    batch.ledger.push_back(meter::UsageEntry(task.project_id, task.id, usage, task.billed_until_ms,
                                             until_ms, cost, until_ms));
    use_[task.project_id].usage_micros += cost;
  }
  task.billed_until_ms = until_ms;
}

// ---------------------------------------------------------------------------------------------
// Tasks.

void Controller::Enqueue(const Task& task) {
  pending_.emplace(-task.request.priority, task.seq);
  fresh_.emplace(-task.request.priority, task.seq);
  // A gang is placed only with all its members in one pass: bring back the ones already waiting.
  if (!task.request.gang_id.empty()) retry_all_ = true;
}

Status Controller::CheckSpec(const TaskSpec& spec) {
  if (auto ok = Validate(spec.request); !ok) return ok;
  if (spec.command.empty() && spec.image.empty()) {
    return InvalidArgument("command or image is required");
  }
  // exec(2) takes C strings: a NUL would cut an argument short on the node, and an empty program
  // name cannot be run (both failed there with exit 126 instead of here).
  if (!spec.command.empty() && spec.command[0].empty()) {
    return InvalidArgument("command[0] (the program) must not be empty");
  }
  for (size_t i = 0; i < spec.command.size(); ++i) {
    if (spec.command[i].find('\0') != std::string::npos) {
      return InvalidArgument("command[" + std::to_string(i) + "] must not contain a NUL byte");
    }
  }
  if (spec.disk_gib < 0) {
    return InvalidArgument("disk_gib must be ≥ 0, got " + std::to_string(spec.disk_gib));
  }
  if (spec.max_runtime_ms < 0 || spec.max_runtime_ms > proto::kMaxRuntimeMs) {
    return InvalidArgument("max_runtime_ms must be 0.." + std::to_string(proto::kMaxRuntimeMs) +
                           " (365 days), got " + std::to_string(spec.max_runtime_ms));
  }
  return {};
}

Result<std::string> Controller::CheckSubmission(const Caller& caller, TaskSpec& spec,
                                                int64_t count) {
  if (!spec.request.gpu_models.empty() || !spec.request.mig_profile.empty()) {
    // Models or a MIG profile no node has (and none may) would wait for ever: refused.
    std::set<std::string> pool;
    for (int m = 0; m < cluster_.ModelCount(); ++m) {
      if (!cluster_.NodesOfModel(m).empty()) pool.insert(cluster_.ModelName(m));
    }
    Status ok = CheckGpuModelsInPool(spec.request.gpu_models, pool);
    if (ok) ok = CheckMigProfileInPool(spec.request.mig_profile, spec.request.gpu_models, pool);
    if (!ok) return tl::unexpected(ok.error());
  }
  auto project_id = ResolveProject(caller, spec.project_id);
  if (!project_id) return project_id;
  if (!spec.from_snapshot.empty()) {
    const TaskSnapshot* from = FindSnapshot(spec.from_snapshot);
    if (from == nullptr || from->project_id != *project_id) {
      return NotFound("from_snapshot: snapshot " + spec.from_snapshot + " not found in project " +
                      *project_id);
    }
  }
  if (!spec.volumes.empty()) {
    Result<std::vector<VolumeMount>> mounts = ResolveMounts(*project_id, std::move(spec.volumes));
    if (!mounts) return tl::unexpected(mounts.error());
    spec.volumes = std::move(*mounts);
  }
  if (!spec.datasets.empty()) {
    Result<std::vector<DatasetMount>> mounts =
        ResolveDatasetMounts(*project_id, std::move(spec.datasets), spec.volumes);
    if (!mounts) return tl::unexpected(mounts.error());
    spec.datasets = std::move(*mounts);
  }
  const Project& project = projects_.at(*project_id);
  const ProjectUse& use = use_[project.id];
  if (project.max_tasks >= 0 && use.active_tasks + count > project.max_tasks) {
    return MakeError(ErrorCode::kResourceExhausted,
                     "project " + project.id + " has " + std::to_string(use.active_tasks) +
                         " active tasks, its quota max_tasks is " +
                         std::to_string(project.max_tasks) +
                         (count > 1 ? ": " + std::to_string(count) + " more do not fit" : ""));
  }
  if (const int64_t milli = UnplacedQuotaMilli(spec.request);
      project.max_gpu_milli >= 0 && milli > project.max_gpu_milli) {
    return MakeError(ErrorCode::kResourceExhausted, "the task asks for " + std::to_string(milli) +
                                                        " milli-GPU, more than project " +
                                                        project.id + "'s quota max_gpu_milli " +
                                                        std::to_string(project.max_gpu_milli));
  }
  if (BillingEnabled() && BalanceOf(project.id) <= 0) {
    return MakeError(ErrorCode::kResourceExhausted, "project " + project.id + " has no balance (" +
                                                        std::to_string(BalanceOf(project.id)) +
                                                        " micros): add credit");
  }
  return project_id;
}

Task Controller::NewTask(const Caller& caller, const std::string& project_id, const TaskSpec& spec,
                         int64_t seq, int64_t now_ms, const std::string& note) const {
  Task task;
  task.seq = seq;
  task.id = "t-" + std::to_string(task.seq);
  task.project_id = project_id;
  task.user_id = caller.user_id;
  task.name = spec.name.empty() ? task.id : spec.name;
  task.request = spec.request;
  task.image = spec.image;
  task.command = spec.command;
  task.disk_gib = spec.disk_gib;
  task.max_runtime_ms = spec.max_runtime_ms;
  task.stop_when = spec.stop_when;
  task.restartable = spec.restartable;
  task.ports = std::move(spec.ports);
  task.volumes = spec.volumes;
  task.datasets = spec.datasets;
  task.snapshot_every_ms = spec.snapshot_every_ms;
  task.checkpoint_signal = spec.checkpoint_signal;
  task.checkpoint_timeout_ms = spec.checkpoint_timeout_ms;
  task.resume_from = spec.from_snapshot;
  // Started from a snapshot that holds a saved image, it runs in that image unless it names one.
  if (const TaskSnapshot* from = FindSnapshot(spec.from_snapshot);
      task.image.empty() && from != nullptr && from->image) {
    task.image = from->image->base;
  }
  task.held = spec.hold;
  task.state = TaskState::kPending;
  task.reason = (task.held ? "submitted, " + HeldReason(task.id) : "submitted") + note;
  task.created_ms = now_ms;
  task.updated_ms = now_ms;
  return task;
}

void Controller::Admit(Task task) {
  next_seq_ = std::max(next_seq_, task.seq + 1);
  ++use_[task.project_id].active_tasks;  // a held task counts toward max_tasks: not terminal
  if (!task.held) Enqueue(task);
  seq_of_[task.id] = task.seq;
  recent_requests_.push_back(task.request);
  if (static_cast<int64_t>(recent_requests_.size()) > options_.typical_window) {
    recent_requests_.pop_front();
  }
  ++requests_since_policy_;
  const int64_t seq = task.seq;
  Index(tasks_.emplace(seq, std::move(task)).first->second);
}

Status Controller::AdmitNew(std::vector<Task> tasks, store::WriteBatch& batch) {
  batch.tasks.reserve(batch.tasks.size() + tasks.size());
  batch.events.reserve(batch.events.size() + tasks.size());
  for (Task& task : tasks) {
    batch.events.push_back(
        TaskEvent{task.id, task.created_ms, TaskState::kPending, TaskState::kPending, task.reason});
    batch.tasks.push_back(std::move(task));
  }
  if (Status ok = store::ValidateBatch(batch); !ok) return ok;
  for (const Task& task : batch.tasks) Admit(task);
  return {};
}

void Controller::SubmitTask(const Caller& caller, TaskSpec spec, Done<Task> done) {
  if (Status ok = CheckSpec(spec); !ok) return done(tl::unexpected(ok.error()));
  std::unique_lock lock(mu_);
  Result<std::string> project_id = CheckSubmission(caller, spec, 1);
  if (!project_id) return lock.unlock(), done(tl::unexpected(project_id.error()));
  Task task = NewTask(caller, *project_id, spec, next_seq_, clock_.NowMs());
  store::WriteBatch batch;
  if (Status ok = AdmitNew({task}, batch); !ok) {
    return lock.unlock(), done(tl::unexpected(ok.error()));
  }
  const bool queued = !task.held;
  Commit(std::move(batch), [done = std::move(done), copy = std::move(task)](Status) mutable {
    done(std::move(copy));
  });
  lock.unlock();
  if (queued) Wake();
}

void Controller::GetTask(const Caller& caller, const std::string& id, Done<TaskView> done) {
  std::unique_lock lock(mu_);
  if (FindTask(id) == nullptr) {
    // Not in memory: a task that finished long ago, read from the store (or none).
    lock.unlock();
    return ReadTask(caller, id, [this, done = std::move(done)](Result<Task> task) {
      if (!task) return done(tl::unexpected(task.error()));
      TaskView view;
      view.task = std::move(*task);
      view.runtime_ms = TaskRuntimeMs(view.task, clock_.NowMs());
      done(std::move(view));
    });
  }
  auto task = VisibleTask(caller, id);
  if (!task) return lock.unlock(), done(tl::unexpected(task.error()));
  TaskView view;
  view.task = **task;
  view.runtime_ms = TaskRuntimeMs(view.task, clock_.NowMs());
  if ((*task)->held) {
    view.pending_reason = HeldReason(id);
  } else if ((*task)->state == TaskState::kPending) {
    const PendingKey key{-(*task)->request.priority, (*task)->seq};
    view.queue_position = 1 + std::distance(pending_.begin(), pending_.find(key));
    auto why = why_pending_.find(id);
    if (why != why_pending_.end()) {
      view.pending_reason = why->second.reason;
      view.pending_nodes = why->second.nodes;
    } else {
      view.pending_reason = "waiting for the next scheduling pass";
    }
  }
  lock.unlock();
  done(std::move(view));
}

std::optional<store::TaskQuery> Controller::VisibleQuery(const Caller& caller,
                                                         const TaskFilter& filter) const {
  store::TaskQuery q;
  if (!filter.project_id.empty()) {
    q.project_ids = {filter.project_id};
  } else if (!caller.IsAdmin()) {
    if (caller.projects.empty()) return std::nullopt;
    q.project_ids = caller.projects;
  }
  q.states = filter.states;
  q.node = filter.node;
  q.array_id = filter.array_id;
  q.after_seq = filter.after_seq;
  q.limit = filter.limit + 1;  // one more than asked: whether there is a next page
  return q;
}

void Controller::ListTasks(const Caller& caller, const TaskFilter& filter, Done<TaskPage> done) {
  if (filter.limit < 1 || filter.limit > kMaxListLimit) {
    return done(InvalidArgument("limit must be 1..1000, got " + std::to_string(filter.limit)));
  }
  if (!filter.metrics.empty()) {
    // Whichever path answers, the page gets the listed tasks' latest values (no lock held then).
    done = [this, names = filter.metrics, done = std::move(done)](Result<TaskPage> page) {
      if (page) AddLatestMetrics(names, *page);
      done(std::move(page));
    };
  }
  if (filter.after_seq < 0) {
    return done(InvalidArgument("after must be ≥ 0, got " + std::to_string(filter.after_seq)));
  }
  // The page as the tasks come, in seq order: `limit` of them, and the cursor when more follow.
  auto paged = [limit = filter.limit](std::vector<Task> tasks) {
    TaskPage page;
    page.tasks = std::move(tasks);
    if (static_cast<int>(page.tasks.size()) > limit) {
      page.tasks.resize(static_cast<size_t>(limit));
      page.next_after_seq = page.tasks.back().seq;
    }
    return page;
  };
  std::unique_lock lock(mu_);
  if (!filter.project_id.empty() &&
      (!projects_.count(filter.project_id) || !caller.InProject(filter.project_id))) {
    lock.unlock();
    return done(NotFound("project " + filter.project_id + " not found"));
  }
  const std::optional<store::TaskQuery> query = VisibleQuery(caller, filter);
  if (!query) return lock.unlock(), done(TaskPage{});
  const bool live_only =
      !filter.states.empty() && std::none_of(filter.states.begin(), filter.states.end(),
                                             [](TaskState s) { return IsTerminal(s); });
  if (live_only || filter.after_seq >= gone_up_to_seq_) {
    // Live tasks are all in memory, and so are all tasks past gone_up_to_seq_: the page comes
    // from the index of the one or the other.
    std::vector<Task> tasks;
    auto take = [&](const Task& t) {
      if (store::TaskQueryMatches(*query, t)) tasks.push_back(t);
      return static_cast<int64_t>(tasks.size()) < query->limit;
    };
    if (live_only) {
      for (auto it = live_.upper_bound(filter.after_seq); it != live_.end(); ++it) {
        if (!take(tasks_.at(*it))) break;
      }
    } else {
      for (auto it = tasks_.upper_bound(filter.after_seq); it != tasks_.end(); ++it) {
        if (!take(it->second)) break;
      }
    }
    lock.unlock();
    return done(paged(std::move(tasks)));
  }
  lock.unlock();
  // Finished tasks may have left memory: the store has them all.
  ReadHistory<TaskPage>(
      [this, q = *query, paged]() -> Result<TaskPage> {
        Result<std::vector<Task>> tasks = store_.ListTasks(q);
        if (!tasks) return tl::unexpected(tasks.error());
        return paged(std::move(*tasks));
      },
      std::move(done));
}

void Controller::StopTask(const Caller& caller, const std::string& id, bool discard,
                          Done<Task> done) {
  std::unique_lock lock(mu_);
  if (FindTask(id) == nullptr) {  // left memory: it ended long ago (or there is none)
    lock.unlock();
    return ReadTask(caller, id, [done = std::move(done)](Result<Task> task) {
      done(task ? AlreadyEnded(*task) : tl::unexpected(task.error()));
    });
  }
  auto task = VisibleTask(caller, id);
  if (!task) return lock.unlock(), done(tl::unexpected(task.error()));
  Task& t = **task;
  if (IsTerminal(t.state)) return lock.unlock(), done(AlreadyEnded(t));
  store::WriteBatch batch;
  const int64_t now = clock_.NowMs();
  if (t.state == TaskState::kRunning) {
    NoteInterruption(t, now);
    if (!discard) OrderLastSnapshot(t, SnapshotTrigger::kStop, now, batch);
  }
  Transition(t, TaskState::kStopped, "stopped by " + caller.user_id, now, batch);
  batch.tasks.push_back(t);
  Commit(std::move(batch),
         [done = std::move(done), copy = t](Status) mutable { done(std::move(copy)); });
}

void Controller::ReleaseTask(const Caller& caller, const std::string& id, Done<Task> done) {
  std::unique_lock lock(mu_);
  if (FindTask(id) == nullptr) {  // left memory: it ended long ago (or there is none)
    lock.unlock();
    return ReadTask(caller, id, [done = std::move(done)](Result<Task> task) {
      done(task ? NotHeld(*task) : tl::unexpected(task.error()));
    });
  }
  auto task = VisibleTask(caller, id);
  if (!task) return lock.unlock(), done(tl::unexpected(task.error()));
  Task& t = **task;
  if (!t.held) return lock.unlock(), done(NotHeld(t));
  // Into the queue as a fresh submission (in its submission order among equal priorities).
  const int64_t now = clock_.NowMs();
  t.held = false;
  t.reason = "released by " + caller.user_id;
  t.updated_ms = now;
  Enqueue(t);
  store::WriteBatch batch;
  batch.tasks.push_back(t);
  batch.events.push_back(TaskEvent{t.id, now, TaskState::kPending, TaskState::kPending, t.reason});
  Commit(std::move(batch),
         [done = std::move(done), copy = t](Status) mutable { done(std::move(copy)); });
  lock.unlock();
  Wake();
}

void Controller::DeleteTask(const Caller& caller, const std::string& id, DoneStatus done) {
  std::unique_lock lock(mu_);
  if (FindTask(id) == nullptr) {  // left memory: it ended long ago (or there is none)
    lock.unlock();
    return ReadTask(caller, id, [this, id, done = std::move(done)](Result<Task> task) {
      if (!task) return done(tl::unexpected(task.error()));
      Result<BlockingExecutor::Slot> slot = blocking_->Reserve();
      if (!slot) return done(tl::unexpected(slot.error()));
      std::lock_guard relock(mu_);
      CommitDeletion(id, task->project_id, *slot, done);
    });
  }
  auto task = VisibleTask(caller, id);
  if (!task) return lock.unlock(), done(tl::unexpected(task.error()));
  if (!IsTerminal((*task)->state)) return lock.unlock(), done(NotEnded(**task));
  // The output and files go on the blocking-work executor (possibly hundreds of MiB): its place
  // is taken before anything changes, so a full queue refuses the deletion rather than leaving
  // the removal undone.
  Result<BlockingExecutor::Slot> slot = blocking_->Reserve();
  if (!slot) return lock.unlock(), done(tl::unexpected(slot.error()));
  Unindex(**task);
  const std::string project_id = (*task)->project_id;
  tasks_.erase((*task)->seq);
  seq_of_.erase(id);
  why_pending_.erase(id);
  CommitDeletion(id, project_id, *slot, std::move(done));
}

void Controller::CommitDeletion(const std::string& id, const std::string& project_id,
                                BlockingExecutor::Slot slot, DoneStatus done) {
  if (events_->Active()) events_->PublishTaskDeleted(id, project_id);
  store::WriteBatch batch;
  batch.deleted_tasks.push_back(id);  // its snapshots' records with it
  // Its snapshots go with it: the chunks the project's other snapshots do not list are collected.
  std::optional<std::vector<std::string>> keep;
  if (DropSnapshots(id)) keep = ManifestsOf(project_id);
  snapshot_orders_.erase(id);
  Commit(std::move(batch),
         [this, id, project_id, keep = std::move(keep), slot, done = std::move(done)](Status) {
           ForgetTelemetry({id});
           slot.Run([this, id, project_id, keep, done] {
             if (output_) output_->Remove(id);
             if (options_.task_files != nullptr) options_.task_files->Remove(id);
             if (keep) CollectChunksNow(project_id, *keep);
             done({});
           });
         });
}

void Controller::TaskEvents(const Caller& caller, const std::string& id,
                            Done<std::vector<TaskEvent>> done) {
  ReadTask(caller, id, [this, id, done = std::move(done)](Result<Task> task) {
    if (!task) return done(tl::unexpected(task.error()));
    ReadHistory<std::vector<TaskEvent>>([this, id] { return store_.TaskEvents(id); }, done);
  });
}

// ---------------------------------------------------------------------------------------------
// Nodes.

NodeView Controller::MakeNodeView(const NodeInfo& info, bool with_tasks) const {
  NodeView v;
  v.info = info;
  const int i = cluster_.FindNode(info.node.name);
  if (i >= 0) {
    const Node& live = cluster_.node(i);
    v.info.node = live;
    v.info.node.schedulable = info.node.schedulable;
    v.cpu_free_milli = live.cpu_free_milli;
    v.memory_free_mib = live.memory_free_mib;
    for (const Gpu& g : live.gpus) v.gpu_milli_free += g.mig_enabled ? 0 : g.milli_free;
    if (with_tasks) v.tasks = cluster_.TasksOn(i);
  }
  return v;
}

std::vector<NodeView> Controller::ListNodes(const Caller& caller) {
  std::lock_guard lock(mu_);
  std::vector<NodeView> out;
  out.reserve(nodes_.size());
  for (const auto& [name, info] : nodes_) out.push_back(MakeNodeView(info, caller.IsAdmin()));
  return out;
}

Result<NodeView> Controller::GetNode(const Caller& caller, const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return NotFound("node " + name + " not found");
  return MakeNodeView(it->second, caller.IsAdmin());
}

void Controller::PersistNode(int node_index, store::WriteBatch& batch) {
  const Node& live = cluster_.node(node_index);
  NodeInfo& info = nodes_.at(live.name);
  // Keep the MIG layout (it changes when the scheduler creates instances); free amounts are
  // derived at load, so they are not stored as facts.
  for (size_t g = 0; g < live.gpus.size() && g < info.node.gpus.size(); ++g) {
    info.node.gpus[g].mig_enabled = live.gpus[g].mig_enabled;
    info.node.gpus[g].mig_instances = live.gpus[g].mig_instances;
  }
  batch.nodes.push_back(info);
}

void Controller::SetCordon(const Caller& caller, const std::string& name, bool cordoned,
                           Done<NodeView> done) {
  std::unique_lock lock(mu_);
  if (auto ok = RequireAdmin(caller); !ok) return lock.unlock(), done(tl::unexpected(ok.error()));
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return lock.unlock(), done(NotFound("node " + name + " not found"));
  NodeInfo& info = it->second;
  info.node.schedulable = !cordoned;
  if (!cordoned) info.draining = false;
  const int i = cluster_.FindNode(name);
  cluster_.SetSchedulable(i, info.node.schedulable && info.status == NodeStatus::kReady);
  if (!cordoned) RetryAll();
  store::WriteBatch batch;
  PersistNode(i, batch);
  Audit(caller, cordoned ? "node.cordon" : "node.uncordon", name, "", batch);
  NodeView view = MakeNodeView(info, true);
  Commit(std::move(batch), [done = std::move(done), view = std::move(view)](Status) mutable {
    done(std::move(view));
  });
}

void Controller::DrainNode(const Caller& caller, const std::string& name, Done<NodeView> done) {
  std::unique_lock lock(mu_);
  if (auto ok = RequireAdmin(caller); !ok) return lock.unlock(), done(tl::unexpected(ok.error()));
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return lock.unlock(), done(NotFound("node " + name + " not found"));
  NodeInfo& info = it->second;
  info.node.schedulable = false;
  info.draining = true;
  const int i = cluster_.FindNode(name);
  cluster_.SetSchedulable(i, false);
  const int64_t now = clock_.NowMs();
  store::WriteBatch batch;
  const std::vector<std::string> on_node = cluster_.TasksOn(i);
  for (const std::string& id : on_node) {
    Task* t = FindTask(id);
    if (t == nullptr) continue;
    if (t->state == TaskState::kRunning) {
      NoteInterruption(*t, now);
      OrderLastSnapshot(*t, SnapshotTrigger::kDrain, now, batch);  // while it has a node
    }
    if (t->restartable) {
      Transition(*t, TaskState::kPreempted, "node " + name + " drained", now, batch);
      Transition(*t, TaskState::kPending, "re-queued after node " + name + " was drained", now,
                 batch);
    } else {
      Transition(*t, TaskState::kStopped, "node " + name + " drained", now, batch);
    }
    batch.tasks.push_back(*t);
  }
  PersistNode(i, batch);
  Audit(caller, "node.drain", name,
        std::to_string(on_node.size()) + " task" + (on_node.size() == 1 ? "" : "s") + " on it",
        batch);
  NodeView view = MakeNodeView(info, true);
  Commit(std::move(batch), [done = std::move(done), view = std::move(view)](Status) mutable {
    done(std::move(view));
  });
}

void Controller::RegisterNode(const Caller& caller, Node node, Done<NodeView> done) {
  if (node.name.empty()) return done(InvalidArgument("name is required"));
  if (node.cpu_milli <= 0) {
    return done(InvalidArgument("cpu_milli must be > 0, got " + std::to_string(node.cpu_milli)));
  }
  if (node.memory_mib <= 0) {
    return done(InvalidArgument("memory_mib must be > 0, got " + std::to_string(node.memory_mib)));
  }
  for (size_t g = 0; g < node.gpus.size(); ++g) {
    Gpu& gpu = node.gpus[g];
    if (gpu.model.empty()) {
      return done(InvalidArgument("gpus[" + std::to_string(g) + "].model is required"));
    }
    gpu.model = CanonicalGpuModelName(gpu.model);
    const GpuModelInfo* info = FindGpuModel(gpu.model);
    if (gpu.mem_mib <= 0 && info != nullptr) gpu.mem_mib = info->mem_mib;
    if (gpu.mig_enabled && (info == nullptr || !info->MigCapable())) {
      return done(InvalidArgument("gpus[" + std::to_string(g) + "]: " + gpu.model +
                                  " does not support MIG"));
    }
    if (gpu.uuid.empty()) gpu.uuid = "GPU-" + node.name + "-" + std::to_string(g);
    gpu.milli_free = kMilliPerGpu;
    gpu.mem_free_mib = gpu.mem_mib;
  }
  node.cpu_free_milli = node.cpu_milli;
  node.memory_free_mib = node.memory_mib;
  node.disk_free_gib = node.disk_gib;
  {
    store::WriteBatch probe;  // the record the store would be given, before anything changes
    probe.nodes.push_back(NodeInfo{.node = node, .status = NodeStatus::kReady});
    if (auto ok = store::ValidateBatch(probe); !ok) return done(tl::unexpected(ok.error()));
  }
  std::unique_lock lock(mu_);
  if (auto ok = RequireAgentOf(caller, node.name, "register node " + node.name); !ok) {
    return lock.unlock(), done(tl::unexpected(ok.error()));
  }
  const int64_t now = clock_.NowMs();
  auto it = nodes_.find(node.name);
  int index = cluster_.FindNode(node.name);
  if (it != nodes_.end()) {
    // A known node re-registering: its tasks stay bound, and what its agent reports now — CPU,
    // memory, GPUs (only while idle), disk, docker (a restarted agent may have docker again) —
    // replaces what it reported before, unless its bound tasks hold more than that.
    NodeInfo& info = it->second;
    if (auto ok = cluster_.UpdateNode(index, node); !ok) {
      return lock.unlock(), done(tl::unexpected(ok.error()));
    }
    const Node& live = cluster_.node(index);
    info.status = NodeStatus::kReady;
    info.last_heartbeat_ms = now;
    info.node.labels = node.labels;
    info.node.cpu_milli = live.cpu_milli;
    info.node.memory_mib = live.memory_mib;
    info.node.gpus = node.gpus;  // PersistNode below keeps the MIG layout the cluster has
    info.node.disk_gib = live.disk_gib;
    info.node.docker = live.docker;
    info.node.docker_gpus = live.docker_gpus;
    info.node.shared_storage = live.shared_storage;
    info.node.runtime_note = live.runtime_note;
    info.node.ssh_host_key = live.ssh_host_key;
    info.node.address = live.address;
    cluster_.SetSchedulable(index, info.node.schedulable && !info.draining);
  } else {
    NodeInfo info;
    info.node = node;
    info.status = NodeStatus::kReady;
    info.registered_ms = now;
    info.last_heartbeat_ms = now;
    index = cluster_.AddNode(node);
    node_version_[node.name] = ++assignment_clock_;
    it = nodes_.emplace(node.name, std::move(info)).first;
  }
  RetryAll();
  store::WriteBatch batch;
  PersistNode(index, batch);
  NodeView view = MakeNodeView(it->second, true);
  Commit(std::move(batch), [done = std::move(done), view = std::move(view)](Status) mutable {
    done(std::move(view));
  });
}

Result<int64_t> Controller::Heartbeat(const Caller& caller, const std::string& name,
                                      std::vector<std::string> datasets) {
  std::lock_guard lock(mu_);
  if (auto ok = RequireAgentOf(caller, name, "heartbeat for node " + name); !ok) {
    return tl::unexpected(ok.error());
  }
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return NotFound("node " + name + " not found");
  NodeInfo& info = it->second;
  info.last_heartbeat_ms = clock_.NowMs();
  SetNodeDatasets(name, std::move(datasets));
  if (info.status == NodeStatus::kLost) {
    // Back from the dead: ready again, empty (its tasks were ended or re-queued when it was
    // lost; the agent's reconciliation stops whatever still runs there).
    info.status = NodeStatus::kReady;
    const int i = cluster_.FindNode(name);
    cluster_.SetSchedulable(i, info.node.schedulable && !info.draining);
    store::WriteBatch batch;
    PersistNode(i, batch);
    Commit(std::move(batch), [](Status) {});
    RetryAll();
  }
  return options_.node_timeout_ms;
}

void Controller::TouchNode(const std::string& node) {
  node_version_[node] = ++assignment_clock_;
  watchers_due_ = true;
}

NodeAssignments Controller::AssignmentsOf(const std::string& node) const {
  NodeAssignments a;
  a.node = node;
  auto v = node_version_.find(node);
  a.version = v == node_version_.end() ? 0 : v->second;
  const int i = cluster_.FindNode(node);
  if (i < 0) return a;
  for (const std::string& id : cluster_.TasksOn(i)) {
    auto seq = seq_of_.find(id);
    if (seq == seq_of_.end()) continue;
    const Task& t = tasks_.at(seq->second);
    a.tasks.push_back(t);
    a.task_tokens.emplace(t.id, TaskToken(t));
    if (IsJobMember(t)) a.rendezvous.emplace(t.id, RendezvousOf(t));
    if (t.state != TaskState::kRunning && !t.resume_from.empty()) {
      if (const TaskSnapshot* from = FindSnapshot(t.resume_from)) {
        TaskSnapshot restore = *from;
        // Its saved image is run only by a task of the image it was saved from.
        if (restore.image && restore.image->base != t.image) restore.image.reset();
        a.restores.emplace(t.id, std::move(restore));
      }
    }
  }
  for (const auto& [id, wait] : snapshot_orders_) {
    if (wait.node == node) a.snapshots.emplace(id, wait.order);
  }
  for (const Task& t : a.tasks) {
    for (const VolumeMount& m : t.volumes) {
      if (const auto vol = volumes_.find(m.volume_id); vol != volumes_.end()) {
        a.volumes.emplace(vol->first, vol->second);
      }
    }
  }
  const auto self = nodes_.find(node);
  const bool shared_storage = self != nodes_.end() && self->second.node.shared_storage;
  for (const auto& [id, vol] : volumes_) {
    if (vol.deleting && (vol.shared ? shared_storage : vol.node == node)) {
      a.remove_volumes.push_back(id);
    }
  }
  return a;
}

void Controller::WatchAssignments(const Caller& caller, const std::string& node,
                                  int64_t after_version, int64_t wait_ms,
                                  Done<NodeAssignments> done) {
  std::unique_lock lock(mu_);
  if (auto ok = RequireAgentOf(caller, node, "watch the assignments of node " + node); !ok) {
    return lock.unlock(), done(tl::unexpected(ok.error()));
  }
  if (!nodes_.count(node)) return lock.unlock(), done(NotFound("node " + node + " not found"));
  NodeAssignments now = AssignmentsOf(node);
  if (now.version > after_version || wait_ms <= 0 || stopping_) {
    lock.unlock();
    return done(std::move(now));
  }
  watchers_.push_back(Watcher{node, after_version, clock_.NowMs() + wait_ms, std::move(done)});
}

void Controller::AnswerWatchers(bool all) {
  std::vector<std::pair<Done<NodeAssignments>, NodeAssignments>> ready;
  {
    std::lock_guard lock(mu_);
    if (all) stopping_ = true;
    const int64_t now = clock_.NowMs();
    std::vector<Watcher> waiting;
    for (Watcher& w : watchers_) {
      auto v = node_version_.find(w.node);
      const bool moved = v != node_version_.end() && v->second > w.after_version;
      if (all || moved || now >= w.deadline_ms) {
        ready.emplace_back(std::move(w.done), AssignmentsOf(w.node));
      } else {
        waiting.push_back(std::move(w));
      }
    }
    watchers_ = std::move(waiting);
    watchers_due_ = false;
  }
  for (auto& [done, answer] : ready) done(std::move(answer));
}

void Controller::ReportTask(const Caller& caller, const std::string& id, TaskState to,
                            int64_t time_ms, int exit_code, std::string reason, int64_t bound_ms,
                            Done<Task> done) {
  std::unique_lock lock(mu_);
  if (auto ok = RequireAgent(caller); !ok) return lock.unlock(), done(tl::unexpected(ok.error()));
  Task* t = FindTask(id);
  if (t == nullptr) return lock.unlock(), done(NotFound("task " + id + " not found"));
  // An agent reports only on the tasks bound (or last bound) to its node.
  const std::string task_node = t->placement ? t->placement->node : "";
  if (auto ok = RequireAgentOf(caller, task_node,
                               "report on task " + id + " (bound to " +
                                   (task_node.empty() ? "no node" : "node " + task_node) + ")");
      !ok) {
    return lock.unlock(), done(tl::unexpected(ok.error()));
  }
  if (bound_ms > 0 && bound_ms != t->bound_ms) {
    lock.unlock();
    return done(MakeError(ErrorCode::kFailedPrecondition,
                          "the report is about an earlier binding of task " + id + " (bound at " +
                              std::to_string(bound_ms) + "); it is " +
                              std::string(TaskStateName(t->state)) + " now"));
  }
  if (t->state == to) return lock.unlock(), done(*t);  // a repeated report changes nothing
  if (!CanTransition(t->state, to) || to == TaskState::kPending || to == TaskState::kScheduled) {
    lock.unlock();
    return done(MakeError(ErrorCode::kFailedPrecondition,
                          "task " + id + " cannot go from " + std::string(TaskStateName(t->state)) +
                              " to " + std::string(TaskStateName(to))));
  }
  const int64_t now = clock_.NowMs();
  // The agent's clock is trusted within what the server knows: never before the binding, never
  // in the future.
  int64_t at = time_ms > 0 ? std::min(time_ms, now) : now;
  if (t->bound_ms > 0) at = std::max(at, t->bound_ms);
  store::WriteBatch batch;
  t->exit_code = exit_code;
  if (to == TaskState::kRunning) {
    t->started_ms = at;
    // Usage is billed from the true start the agent reports, not from the binding: the time
    // before it (launching) is skipped unless a meter tick already billed it.
    if (t->bound_ms > 0 && t->billed_until_ms < at) t->billed_until_ms = at;
  }
  Transition(*t, to, reason.empty() ? "reported by the agent" : std::move(reason), at, batch);
  if (to == TaskState::kPreempted) {
    Transition(*t, TaskState::kPending, "re-queued after preemption", now, batch);
  }
  if (to == TaskState::kRunning) (void)cluster_.SetWork(t->id, WorkOf(*t));
  batch.tasks.push_back(*t);
  Commit(std::move(batch),
         [done = std::move(done), copy = *t](Status) mutable { done(std::move(copy)); });
}

}  // namespace gpupool::server
