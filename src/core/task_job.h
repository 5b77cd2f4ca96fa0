// Distributed jobs (gpupool submit --nodes N): one submission of N member tasks that are placed
// together (a gang), find each other through a rendezvous (torchrun's MASTER_ADDR/MASTER_PORT,
// RANK, WORLD_SIZE, …) and share their fate. A job is named after its first member's seq, as an
// array is: members t-<first>..t-<first+N-1> are its members 0..N-1, and the job's id is the
// gang id of each.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/records.h"

namespace gpupool {

// The ports the server hands out as a job's MASTER_PORT on its member 0's node, one per job
// running there. Members' nodes must let each other reach them (docs/api.md "Distributed jobs").
inline constexpr int32_t kRendezvousPortFirst = 29500;
inline constexpr int32_t kRendezvousPortLast = 29999;

// "j-<seq>".
std::string JobId(int64_t first_seq);
// Whether `id` has the form of a job id ("j-" and a positive decimal number).
bool IsJobId(std::string_view id);
// The first member's seq of a job id ("j-7" → 7); 0 when `id` is not one.
int64_t JobFirstSeq(std::string_view id);
// Whether the task is a member of a job (its gang id is a job id).
bool IsJobMember(const Task& task);
// A member's index in its job (0 for member 0, the rendezvous host); -1 for a task in no job.
int MemberIndex(const Task& task);

// How a member finds the others in its current run: what its agent puts into its environment
// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, GPUPOOL_MEMBER_HOSTS, …).
struct Rendezvous {
  std::string job_id;
  int member_index = 0;
  int members = 0;
  std::string master_addr;                // member 0's node's address
  int32_t master_port = 0;                // TaskPlacement::rendezvous_port
  std::vector<std::string> member_hosts;  // every member's node address, in index order

  friend bool operator==(const Rendezvous&, const Rendezvous&) = default;
};

// A job's state as its members' say, and the member that decides it.
struct JobOutcome {
  TaskState state = TaskState::kPending;
  // The member whose end ended the job (failed, stopped or lost by itself; the earliest), or
  // while it has not ended, the first member in the job's state; -1: none (all succeeded).
  int cause = -1;
  bool ended_by_member = false;  // `cause` ended the job
};
// `members` in index order. Ended when a member ended other than by succeeding and not because
// of another member (ended_by empty): the job took that member's state. Else succeeded when all
// succeeded; pending while any waits; scheduled, then starting, while any is on its way; running.
JobOutcome JobOutcomeOf(std::span<const Task> members);

}  // namespace gpupool
