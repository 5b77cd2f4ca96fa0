// Controller: distributed jobs (task_service.h, core/task_job.h) — one submission of N member
// tasks placed as a gang, their rendezvous (the agents' MASTER_ADDR, MASTER_PORT, RANK, …), and
// fate sharing: a member that fails, is stopped or is lost ends its job's run for all members.
#include <algorithm>
#include <set>

#include "server/controller.h"

namespace gpupool::server {
namespace {

tl::unexpected<Error> NoJob(const std::string& id) { return NotFound("job " + id + " not found"); }

// What happened to a member whose event moved it `to` (its state now, or pending when it was
// re-queued), for its siblings' reasons: "failed (exit code 3)", "was lost", ….
std::string WhatHappened(const Task& t, TaskState to) {
  switch (to) {
    case TaskState::kFailed:
      return "failed (exit code " + std::to_string(t.exit_code) + ")";
    case TaskState::kStopped:
      return "was stopped";
    case TaskState::kLost:
      return "was lost";
    default:
      return "was preempted";
  }
}

}  // namespace

void Controller::SubmitJob(const Caller& caller, TaskSpec spec, JobSpec job, Done<JobView> done) {
  if (job.members < 2 || job.members > kMaxGangSize) {
    return done(InvalidArgument("nodes must be 2.." + std::to_string(kMaxGangSize) + ", got " +
                                std::to_string(job.members)));
  }
  if (job.members_per_node < 1) {
    return done(InvalidArgument("members_per_node must be >= 1, got " +
                                std::to_string(job.members_per_node)));
  }
  if (spec.request.Form() == GpuForm::kShare) {
    return done(InvalidArgument(
        "gpu_milli: a distributed job's members use whole GPUs (gpu_count) or a MIG instance "
        "(mig_profile), not a share of a GPU"));
  }
  std::unique_lock lock(mu_);
  const int64_t first = next_seq_;
  JobView view;
  view.id = JobId(first);
  TaskRequest& r = spec.request;
  r.gang_id = view.id;
  r.gang_size = job.members;
  r.members_per_node = job.members_per_node;
  r.topology_label = job.topology_label;
  r.topology = job.topology;
  if (Status ok = CheckSpec(spec); !ok) return lock.unlock(), done(tl::unexpected(ok.error()));
  Result<std::string> project_id = CheckSubmission(caller, spec, job.members);
  if (!project_id) return lock.unlock(), done(tl::unexpected(project_id.error()));
  const Project& project = projects_.at(*project_id);
  if (const int64_t milli = UnplacedQuotaMilli(spec.request) * job.members;
      project.max_gpu_milli >= 0 && milli > project.max_gpu_milli) {
    return lock.unlock(),
           done(MakeError(ErrorCode::kResourceExhausted,
                          "the job's " + std::to_string(job.members) + " members ask for " +
                              std::to_string(milli) + " milli-GPU, more than project " +
                              project.id + "'s quota max_gpu_milli " +
                              std::to_string(project.max_gpu_milli)));
  }
  const int64_t now = clock_.NowMs();
  for (int k = 0; k < job.members; ++k) {
    Task& task = view.members.emplace_back(
        NewTask(caller, *project_id, spec, first + k, now,
                " (member " + std::to_string(k) + " of job " + view.id + ")"));
    task.name = (spec.name.empty() ? view.id : spec.name) + "[" + std::to_string(k) + "]";
  }
  store::WriteBatch batch;
  if (Status ok = AdmitNew(view.members, batch); !ok) {
    return lock.unlock(), done(tl::unexpected(ok.error()));
  }
  const bool queued = !spec.hold;
  Commit(std::move(batch), [done = std::move(done), view = std::move(view)](Status) mutable {
    done(std::move(view));
  });
  lock.unlock();
  if (queued) Wake();
}

std::vector<Task*> Controller::MembersInMemory(const std::string& job_id) {
  const int64_t first = JobFirstSeq(job_id);
  auto head = tasks_.find(first);
  if (first == 0 || head == tasks_.end() || head->second.request.gang_id != job_id) return {};
  std::vector<Task*> members;
  const int size = head->second.request.gang_size;
  for (int k = 0; k < size; ++k) {
    auto it = tasks_.find(first + k);
    if (it == tasks_.end() || it->second.request.gang_id != job_id) return {};
    members.push_back(&it->second);
  }
  return members;
}

void Controller::ReadJob(const Caller& caller, const std::string& id, Done<JobView> done) {
  const int64_t first = JobFirstSeq(id);
  if (first == 0) return done(NoJob(id));
  ReadHistory<JobView>(
      [this, caller, id, first]() -> Result<JobView> {
        JobView view;
        view.id = id;
        store::TaskQuery q;
        q.after_seq = first - 1;
        int64_t size = 1;
        while (static_cast<int64_t>(view.members.size()) < size) {
          q.limit = std::min<int64_t>(size - static_cast<int64_t>(view.members.size()),
                                      store::kMaxTaskQueryLimit);
          Result<std::vector<Task>> page = store_.ListTasks(q);
          if (!page) return tl::unexpected(page.error());
          if (page->empty()) break;
          for (Task& t : *page) {
            if (t.request.gang_id != id ||
                t.seq != first + static_cast<int64_t>(view.members.size())) {
              return NoJob(id);
            }
            if (view.members.empty()) {
              if (!MayView(caller, t)) return NoJob(id);
              size = t.request.gang_size;
            }
            q.after_seq = t.seq;
            view.members.push_back(std::move(t));
          }
        }
        if (view.members.empty() || static_cast<int64_t>(view.members.size()) != size) {
          return NoJob(id);
        }
        std::lock_guard lock(mu_);
        for (const Task& m : view.members) {
          if (m.placement) view.addresses[m.placement->node] = NodeAddress(m.placement->node);
          if (auto why = why_pending_.find(m.id); why != why_pending_.end()) {
            view.pending_reasons[m.id] = why->second.reason;
          }
        }
        return view;
      },
      std::move(done));
}

void Controller::GetJob(const Caller& caller, const std::string& id, Done<JobView> done) {
  ReadJob(caller, id, std::move(done));
}

void Controller::StopJob(const Caller& caller, const std::string& id, Done<JobView> done) {
  std::unique_lock lock(mu_);
  const std::vector<Task*> members = MembersInMemory(id);
  if (members.empty()) return lock.unlock(), ReadJob(caller, id, std::move(done));
  if (!MayView(caller, *members.front())) return lock.unlock(), done(NoJob(id));
  const int64_t now = clock_.NowMs();
  store::WriteBatch batch;
  for (Task* t : members) {
    if (IsTerminal(t->state)) continue;
    Transition(*t, TaskState::kStopped, "stopped by " + caller.user_id + " with job " + id, now,
               batch);
    batch.tasks.push_back(*t);
  }
  Commit(std::move(batch), [this, caller, id, done = std::move(done)](Status) mutable {
    ReadJob(caller, id, std::move(done));
  });
}

void Controller::ReleaseJob(const Caller& caller, const std::string& id, Done<JobView> done) {
  std::unique_lock lock(mu_);
  const std::vector<Task*> members = MembersInMemory(id);
  if (members.empty()) return lock.unlock(), ReadJob(caller, id, std::move(done));
  if (!MayView(caller, *members.front())) return lock.unlock(), done(NoJob(id));
  const bool any_held =
      std::any_of(members.begin(), members.end(), [](const Task* t) { return t->held; });
  if (!any_held) {
    return lock.unlock(),
           done(MakeError(ErrorCode::kFailedPrecondition, "job " + id +
                                                              " is not held (only a job submitted "
                                                              "with hold waits to be released)"));
  }
  const int64_t now = clock_.NowMs();
  store::WriteBatch batch;
  for (Task* t : members) {
    if (!t->held) continue;
    t->held = false;
    t->reason = "released by " + caller.user_id + " with job " + id;
    t->updated_ms = now;
    Enqueue(*t);
    batch.tasks.push_back(*t);
    batch.events.push_back(
        TaskEvent{t->id, now, TaskState::kPending, TaskState::kPending, t->reason});
  }
  Commit(std::move(batch), [this, caller, id, done = std::move(done)](Status) mutable {
    ReadJob(caller, id, std::move(done));
  });
  lock.unlock();
  Wake();
}

void Controller::ShareJobFate(store::WriteBatch& batch) {
  std::set<std::string> handled;  // jobs whose run this batch already ended
  int64_t now = 0;
  // The loop reads events that it appends to: a sibling moved here has ended_by set, and is
  // skipped.
  for (size_t i = 0; i < batch.events.size(); ++i) {
    const TaskState to = batch.events[i].to;
    if (to != TaskState::kFailed && to != TaskState::kStopped && to != TaskState::kLost &&
        to != TaskState::kPreempted) {
      continue;
    }
    const std::string cause_id = batch.events[i].task_id;
    Task* cause = FindTask(cause_id);
    if (cause == nullptr || !IsJobMember(*cause) || !cause->ended_by.empty()) continue;
    const std::string job = cause->request.gang_id;
    if (!handled.insert(job).second) continue;
    if (now == 0) now = clock_.NowMs();
    // Re-queued (lost and restartable, or preempted): the job runs again as a whole.
    const bool requeue = cause->state == TaskState::kPending;
    const std::string what = "member " + std::to_string(MemberIndex(*cause)) + " (" + cause->id +
                             ") " + WhatHappened(*cause, to);
    for (Task* sibling : MembersInMemory(job)) {
      if (sibling == cause || IsTerminal(sibling->state)) continue;
      if (requeue) {
        if (!HoldsResources(sibling->state)) continue;  // waiting already: it waits with them
        sibling->ended_by = cause->id;
        Transition(*sibling, TaskState::kPreempted, "re-queued with job " + job + ": " + what, now,
                   batch);
        Transition(*sibling, TaskState::kPending, "re-queued with job " + job, now, batch);
      } else {
        sibling->ended_by = cause->id;
        Transition(*sibling, TaskState::kStopped,
                   "stopped with job " + job + ": " + what + ": " + cause->reason, now, batch);
      }
      batch.tasks.push_back(*sibling);
    }
  }
}

std::string Controller::NodeAddress(const std::string& node) const {
  auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.node.address.empty()) return node;
  return it->second.node.address;
}

Rendezvous Controller::RendezvousOf(const Task& member) const {
  Rendezvous r;
  r.job_id = member.request.gang_id;
  r.member_index = MemberIndex(member);
  r.members = member.request.gang_size;
  r.master_port = member.placement ? member.placement->rendezvous_port : 0;
  const int64_t first = JobFirstSeq(r.job_id);
  for (int k = 0; k < r.members; ++k) {
    auto it = tasks_.find(first + k);
    const bool placed =
        it != tasks_.end() && HoldsResources(it->second.state) && it->second.placement.has_value();
    r.member_hosts.push_back(placed ? NodeAddress(it->second.placement->node) : "");
  }
  if (!r.member_hosts.empty()) r.master_addr = r.member_hosts.front();
  return r;
}

int32_t Controller::FreeRendezvousPort(const std::string& node) const {
  std::set<int32_t> used;
  for (const int64_t seq : live_) {
    const Task& t = tasks_.at(seq);
    if (HoldsResources(t.state) && t.placement && t.placement->node == node &&
        t.placement->rendezvous_port > 0 && MemberIndex(t) == 0) {
      used.insert(t.placement->rendezvous_port);
    }
  }
  for (int32_t port = kRendezvousPortFirst; port <= kRendezvousPortLast; ++port) {
    if (!used.count(port)) return port;
  }
  return 0;
}

}  // namespace gpupool::server
