// Linux control groups for task processes: finds where the kernel offers the cpu, memory, pids and
// freezer controllers (cgroup v1 hierarchies, the v2 unified hierarchy, or a mix, detected at run
// time), makes one group per task with its limits, and counts OOM kills and kills every member.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::agent {

enum class CgroupVersion { kV1 = 1, kV2 = 2 };

// One mounted hierarchy as the agent sees it.
struct CgroupHierarchy {
  std::string mount_point;  // "/sys/fs/cgroup/memory"
  std::string mount_root;   // the hierarchy path mounted there ("/" outside containers)
  std::string own;          // the agent's own group in this hierarchy ("/system.slice/x")

  // The directory of hierarchy path `path` ("/a/b"), or "" when the mount does not show it.
  std::string Dir(const std::string& path) const;

  friend bool operator==(const CgroupHierarchy&, const CgroupHierarchy&) = default;
};

// The controllers the runtime uses ("cpu", "cpuacct", "memory", "pids", "freezer"), by where they
// are mounted as v1 hierarchies, and the unified (v2) hierarchy if one is mounted.
struct CgroupLayout {
  std::map<std::string, CgroupHierarchy> v1;
  std::optional<CgroupHierarchy> v2;
};

// From the texts of /proc/self/mountinfo and /proc/self/cgroup (pure: tests feed it samples).
CgroupLayout ParseCgroupLayout(std::string_view mountinfo, std::string_view proc_cgroup);

// What a task asks for; 0 means no limit.
struct CgroupLimits {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t pids_max = 0;
};

// Which asked-for limits the kernel enforces. A flag is false when the limit was not asked for
// (0) or could not be set; `not_enforced` names each asked-for limit that is not in force and
// why ("memory: no memory controller; pids: …"), empty when all are.
struct LimitStatus {
  bool cpu = false;
  bool memory = false;
  bool pids = false;
  std::string not_enforced;

  friend bool operator==(const LimitStatus&, const LimitStatus&) = default;
};

// One task's groups. Copyable plain data: the runtime persists it in the task's state file so
// that a restarted agent can still kill the task's processes and read its OOM count.
struct TaskCgroup {
  struct Entry {
    CgroupVersion version = CgroupVersion::kV1;
    std::string dir;
    friend bool operator==(const Entry&, const Entry&) = default;
  };
  std::map<std::string, Entry> controllers;  // controller -> the task's group for it
  std::string v2_dir;                        // the task's unified group, "" if none

  bool empty() const { return controllers.empty() && v2_dir.empty(); }
  // The distinct directories whose cgroup.procs the task's first process joins.
  std::vector<std::string> Dirs() const;
  // The processes in the task's group now (empty when it has no group).
  std::vector<pid_t> Members() const;
  // Sends `sig` to every member. SIGKILL uses cgroup.kill where the kernel has it, else freezes
  // the group (v1 freezer, v2 cgroup.freeze) so that no member can fork while it is killed.
  void Kill(int sig) const;
  // Freezes (v1 freezer.state FROZEN, v2 cgroup.freeze) or thaws every member; freezing waits up
  // to `wait_ms` until the kernel says the group is frozen. False when the group has no freezer,
  // the write failed, or it did not freeze in time (it may still be freezing: thaw it).
  bool Freeze(bool frozen, int64_t wait_ms) const;
  // OOM kills inside the group so far (v1 memory.oom_control, v2 memory.events "oom_kill");
  // nullopt when there is no memory group or the kernel does not count them.
  std::optional<int64_t> OomKills() const;
  // Times the memory limit was hit (v1 memory.failcnt, v2 memory.events "max"); 0 if unknown.
  int64_t MemoryLimitHits() const;
  // CPU time the group's processes used so far (v1 cpuacct.usage, v2 cpu.stat usage_usec), in
  // nanoseconds; nullopt without an accounting group.
  std::optional<int64_t> CpuUsageNs() const;
  // Memory the group uses now (v1 memory.usage_in_bytes, v2 memory.current); nullopt without a
  // memory group.
  std::optional<int64_t> MemoryBytes() const;
  // Removes the task's groups, waiting up to `wait_ms` for killed members to go. Returns false
  // when a group is still there. Also removes the runtime's group when it is left empty.
  bool Remove(int64_t wait_ms) const;

  friend bool operator==(const TaskCgroup&, const TaskCgroup&) = default;

 private:
  // The file that freezes the group: v1 freezer.state, v2 cgroup.freeze; "" without a freezer.
  std::string FreezeFile() const;
};

// Makes the per-task groups under <parent>/<name>, where parent is a hierarchy path ("" means the
// agent's own group). With v2 the controllers are enabled down that path (cgroup.subtree_control);
// that fails where the agent's own group holds processes, so a v2 agent should be given a
// delegated group with `parent` (systemd Delegate=yes) — the limits are otherwise reported as not
// enforced and the task still runs.
class Cgroups {
 public:
  // Reads /proc/self/mountinfo and /proc/self/cgroup. `enabled` false: never uses cgroups.
  static Cgroups Detect(bool enabled, std::string parent, std::string name);
  Cgroups(CgroupLayout layout, std::string parent, std::string name);

  // Creates the task's groups and writes its limits; what could not be done goes into `status`.
  // Never fails as a whole: a task without groups still runs, unlimited.
  TaskCgroup Create(const std::string& task_id, const CgroupLimits& limits,
                    LimitStatus* status) const;

  const CgroupLayout& layout() const { return layout_; }
  // Where each controller is offered: "cpu:v1 memory:v1 pids:v1 freezer:v1", "cpu:v2 …" (v2:
  // present in the top group's cgroup.controllers, not necessarily enableable), or "none".
  std::string Describe() const;

 private:
  std::string RuntimeDir(const CgroupHierarchy& h) const;
  // Enables `controller` for children of the runtime's v2 group; "" or the reason it failed.
  std::string EnableV2(const std::string& controller) const;

  CgroupLayout layout_;
  std::string parent_;
  std::string name_;
};

}  // namespace gpupool::agent
