// Implementation of task_job.h: job ids and members' indexes.
#include "core/task_job.h"

#include <charconv>

namespace gpupool {

std::string JobId(int64_t first_seq) { return "j-" + std::to_string(first_seq); }

int64_t JobFirstSeq(std::string_view id) {
  if (id.size() < 3 || id.size() > 20 || id.substr(0, 2) != "j-") return 0;
  int64_t seq = 0;
  const char* begin = id.data() + 2;
  const char* end = id.data() + id.size();
  const auto [stop, ec] = std::from_chars(begin, end, seq);
  if (ec != std::errc() || stop != end || seq <= 0 || *begin == '0') return 0;
  return seq;
}

bool IsJobId(std::string_view id) { return JobFirstSeq(id) > 0; }

bool IsJobMember(const Task& task) { return IsJobId(task.request.gang_id); }

int MemberIndex(const Task& task) {
  const int64_t first = JobFirstSeq(task.request.gang_id);
  if (first == 0 || task.seq < first || task.seq - first >= task.request.gang_size) return -1;
  return static_cast<int>(task.seq - first);
}

JobOutcome JobOutcomeOf(std::span<const Task> members) {
  JobOutcome out;
  for (size_t i = 0; i < members.size(); ++i) {
    const Task& m = members[i];
    if (!IsTerminal(m.state) || m.state == TaskState::kSucceeded || !m.ended_by.empty()) continue;
    if (out.cause < 0 || m.finished_ms < members[static_cast<size_t>(out.cause)].finished_ms) {
      out.cause = static_cast<int>(i);
    }
  }
  if (out.cause >= 0) {
    out.state = members[static_cast<size_t>(out.cause)].state;
    out.ended_by_member = true;
    return out;
  }
  for (const TaskState s : {TaskState::kPending, TaskState::kPreempted, TaskState::kScheduled,
                            TaskState::kStarting, TaskState::kRunning}) {
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i].state != s) continue;
      out.state = s == TaskState::kPreempted ? TaskState::kPending : s;
      out.cause = static_cast<int>(i);
      return out;
    }
  }
  // Every member ended and none ended the job: all succeeded, or a member stopped with the job
  // when the one that ended it is gone from what was read (then the first ended one says).
  out.state = TaskState::kSucceeded;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].state != TaskState::kSucceeded) {
      out.state = members[i].state;
      out.cause = static_cast<int>(i);
      break;
    }
  }
  return out;
}

}  // namespace gpupool
