// Implementation of cgroup.h: mountinfo parsing, per-task groups and their limits, OOM counts and
// whole-group kills for cgroup v1 and v2.
#include "agent/runtime/cgroup.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <set>
#include <thread>

#include "agent/runtime/linux_proc.h"

namespace gpupool::agent {
namespace {

// cpuacct only counts (v1 mounts it apart from cpu on some hosts; v2 counts in cpu.stat).
constexpr const char* kControllers[] = {"cpu", "cpuacct", "memory", "pids", "freezer"};
constexpr int64_t kCpuPeriodUs = 100'000;

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = s.find(sep, start);
    if (end == std::string_view::npos) {
      out.push_back(s.substr(start));
      break;
    }
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool ok = true;
      for (size_t k = 1; k <= 3; ++k) {
        if (s[i + k] < '0' || s[i + k] > '7') {
          ok = false;
          break;
        }
        v = v * 8 + (s[i + k] - '0');
      }
      if (ok) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::string StripTrailingSlash(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// The value after `key` on its own line of a "key value" file (memory.events, oom_control).
std::optional<int64_t> KeyedValue(const std::string& text, std::string_view key) {
  for (std::string_view line : Split(text, '\n')) {
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      std::string_view v = line.substr(key.size() + 1);
      int64_t out = 0;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
      if (ec == std::errc()) return out;
    }
  }
  return std::nullopt;
}

bool ContainsWord(const std::string& text, std::string_view word) {
  for (std::string_view w : Split(text, ' ')) {
    while (!w.empty() && (w.back() == '\n' || w.back() == ' ')) w.remove_suffix(1);
    if (w == word) return true;
  }
  return false;
}

// Makes `dir` (one level); true when it exists afterwards. `why` gets the failure.
bool MakeDir(const std::string& dir, std::string* why) {
  if (mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) return true;
  *why = "cannot create " + dir + ": " + ErrnoText(errno);
  return false;
}

std::string WriteNote(const std::string& file, int err) {
  return "cannot write " + file + ": " + ErrnoText(err);
}

}  // namespace

std::string CgroupHierarchy::Dir(const std::string& path) const {
  std::string p = path.empty() ? "/" : path;
  if (mount_root == "/") return StripTrailingSlash(mount_point + (p == "/" ? "" : p));
  if (p == mount_root) return mount_point;
  if (p.size() > mount_root.size() && p.compare(0, mount_root.size(), mount_root) == 0 &&
      p[mount_root.size()] == '/') {
    return StripTrailingSlash(mount_point + p.substr(mount_root.size()));
  }
  return "";
}

CgroupLayout ParseCgroupLayout(std::string_view mountinfo, std::string_view proc_cgroup) {
  std::map<std::string, std::string> v1_paths;  // controller -> the agent's path
  std::optional<std::string> v2_path;
  for (std::string_view line : Split(proc_cgroup, '\n')) {
    const size_t a = line.find(':');
    if (a == std::string_view::npos) continue;
    const size_t b = line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const std::string_view ids = line.substr(0, a);
    const std::string_view ctrls = line.substr(a + 1, b - a - 1);
    const std::string path(line.substr(b + 1));
    if (ids == "0" && ctrls.empty()) {
      v2_path = path;
      continue;
    }
    for (std::string_view c : Split(ctrls, ',')) v1_paths.emplace(std::string(c), path);
  }

  CgroupLayout layout;
  for (std::string_view line : Split(mountinfo, '\n')) {
    const std::vector<std::string_view> f = Split(line, ' ');
    size_t sep = 0;
    for (size_t i = 6; i < f.size(); ++i) {
      if (f[i] == "-") {
        sep = i;
        break;
      }
    }
    if (sep == 0 || sep + 3 >= f.size()) continue;
    const std::string_view fstype = f[sep + 1];
    const std::string_view super = f[sep + 3];
    CgroupHierarchy h;
    h.mount_root = Unescape(f[3]);
    h.mount_point = Unescape(f[4]);
    if (fstype == "cgroup2") {
      if (layout.v2 || !v2_path) continue;
      h.own = *v2_path;
      layout.v2 = h;
    } else if (fstype == "cgroup") {
      for (std::string_view opt : Split(super, ',')) {
        for (const char* c : kControllers) {
          if (opt != c || layout.v1.count(c)) continue;
          const auto it = v1_paths.find(c);
          if (it == v1_paths.end()) continue;
          CgroupHierarchy hc = h;
          hc.own = it->second;
          layout.v1.emplace(c, hc);
        }
      }
    }
  }
  return layout;
}

std::vector<std::string> TaskCgroup::Dirs() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : controllers) {
    if (std::find(out.begin(), out.end(), e.dir) == out.end()) out.push_back(e.dir);
  }
  if (!v2_dir.empty() && std::find(out.begin(), out.end(), v2_dir) == out.end()) {
    out.push_back(v2_dir);
  }
  return out;
}

std::vector<pid_t> TaskCgroup::Members() const {
  std::string dir = v2_dir;
  for (const char* c : {"pids", "freezer", "memory", "cpu"}) {
    if (!dir.empty()) break;
    const auto it = controllers.find(c);
    if (it != controllers.end()) dir = it->second.dir;
  }
  std::vector<pid_t> out;
  if (dir.empty()) return out;
  const auto text = ReadFile(dir + "/cgroup.procs");
  if (!text) return out;
  for (std::string_view line : Split(*text, '\n')) {
    pid_t pid = 0;
    auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), pid);
    if (ec == std::errc() && pid > 0) out.push_back(pid);
  }
  return out;
}

std::string TaskCgroup::FreezeFile() const {
  const auto fz = controllers.find("freezer");
  if (fz != controllers.end() && fz->second.version == CgroupVersion::kV1) {
    return fz->second.dir + "/freezer.state";
  }
  if (!v2_dir.empty() && Exists(v2_dir + "/cgroup.freeze")) return v2_dir + "/cgroup.freeze";
  return "";
}

bool TaskCgroup::Freeze(bool frozen, int64_t wait_ms) const {
  const std::string file = FreezeFile();
  if (file.empty()) return false;
  const bool v1 = file.ends_with("freezer.state");
  if (WriteControl(file, v1 ? (frozen ? "FROZEN" : "THAWED") : (frozen ? "1" : "0")) != 0) {
    return false;
  }
  if (!frozen) return true;
  // Freezing takes a moment (members in the kernel finish their call); wait a bounded time.
  const int64_t deadline = MonotonicMs() + wait_ms;
  while (true) {
    bool done = false;
    if (v1) {
      const auto state = ReadFile(file);
      done = state && state->starts_with("FROZEN");
    } else {
      const auto ev = ReadFile(v2_dir + "/cgroup.events");
      done = ev && KeyedValue(*ev, "frozen").value_or(0) == 1;
    }
    if (done) return true;
    if (MonotonicMs() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void TaskCgroup::Kill(int sig) const {
  if (empty() || Members().empty()) return;  // an empty group stays empty: nobody to fork
  if (sig == SIGKILL && !v2_dir.empty() && Exists(v2_dir + "/cgroup.kill") &&
      WriteControl(v2_dir + "/cgroup.kill", "1") == 0) {
    return;
  }
  // Freeze so that no member forks between reading cgroup.procs and the kill.
  const bool frozen = sig == SIGKILL && (Freeze(true, 200), !FreezeFile().empty());
  std::set<pid_t> signalled;
  for (int round = 0; round < 50; ++round) {
    bool fresh = false;
    for (pid_t pid : Members()) {
      if (!signalled.insert(pid).second) continue;
      fresh = true;
      kill(pid, sig);
    }
    if (!fresh || frozen || sig != SIGKILL) break;
  }
  if (frozen) Freeze(false, 0);
}

std::optional<int64_t> TaskCgroup::OomKills() const {
  const auto it = controllers.find("memory");
  if (it == controllers.end()) return std::nullopt;
  const bool v1 = it->second.version == CgroupVersion::kV1;
  const auto text = ReadFile(it->second.dir + (v1 ? "/memory.oom_control" : "/memory.events"));
  if (!text) return std::nullopt;
  return KeyedValue(*text, "oom_kill");
}

int64_t TaskCgroup::MemoryLimitHits() const {
  const auto it = controllers.find("memory");
  if (it == controllers.end()) return 0;
  if (it->second.version == CgroupVersion::kV1) {
    const auto text = ReadFile(it->second.dir + "/memory.failcnt");
    int64_t v = 0;
    if (text) std::from_chars(text->data(), text->data() + text->size(), v);
    return v;
  }
  const auto text = ReadFile(it->second.dir + "/memory.events");
  return text ? KeyedValue(*text, "max").value_or(0) : 0;
}

std::optional<int64_t> TaskCgroup::CpuUsageNs() const {
  if (const auto it = controllers.find("cpuacct"); it != controllers.end()) {
    const auto text = ReadFile(it->second.dir + "/cpuacct.usage");
    int64_t v = 0;
    if (text && std::from_chars(text->data(), text->data() + text->size(), v).ec == std::errc()) {
      return v;
    }
    return std::nullopt;
  }
  if (v2_dir.empty()) return std::nullopt;
  const auto text = ReadFile(v2_dir + "/cpu.stat");
  if (!text) return std::nullopt;
  const std::optional<int64_t> usec = KeyedValue(*text, "usage_usec");
  if (!usec) return std::nullopt;
  return *usec * 1000;
}

std::optional<int64_t> TaskCgroup::MemoryBytes() const {
  const auto it = controllers.find("memory");
  if (it == controllers.end()) return std::nullopt;
  const bool v1 = it->second.version == CgroupVersion::kV1;
  const auto text = ReadFile(it->second.dir + (v1 ? "/memory.usage_in_bytes" : "/memory.current"));
  int64_t v = 0;
  if (!text || std::from_chars(text->data(), text->data() + text->size(), v).ec != std::errc()) {
    return std::nullopt;
  }
  return v;
}

bool TaskCgroup::Remove(int64_t wait_ms) const {
  const int64_t deadline = MonotonicMs() + wait_ms;
  bool all = true;
  for (const std::string& dir : Dirs()) {
    while (rmdir(dir.c_str()) != 0 && errno != ENOENT) {
      if (errno != EBUSY && errno != ENOTEMPTY) break;
      if (MonotonicMs() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (Exists(dir)) {
      all = false;
      continue;
    }
    // The runtime's group goes with its last task (fails harmlessly while others remain).
    const size_t slash = dir.rfind('/');
    if (slash != std::string::npos && slash > 0) rmdir(dir.substr(0, slash).c_str());
  }
  return all;
}

Cgroups::Cgroups(CgroupLayout layout, std::string parent, std::string name)
    : layout_(std::move(layout)), parent_(std::move(parent)), name_(std::move(name)) {}

Cgroups Cgroups::Detect(bool enabled, std::string parent, std::string name) {
  CgroupLayout layout;
  if (enabled) {
    const auto mountinfo = ReadFile("/proc/self/mountinfo");
    const auto proc_cgroup = ReadFile("/proc/self/cgroup");
    if (mountinfo && proc_cgroup) layout = ParseCgroupLayout(*mountinfo, *proc_cgroup);
  }
  return Cgroups(std::move(layout), std::move(parent), std::move(name));
}

std::string Cgroups::RuntimeDir(const CgroupHierarchy& h) const {
  const std::string base = h.Dir(parent_.empty() ? h.own : parent_);
  if (base.empty()) return "";
  return base + "/" + name_;
}

std::string Cgroups::EnableV2(const std::string& controller) const {
  const CgroupHierarchy& h = *layout_.v2;
  const std::string top = h.Dir(parent_.empty() ? h.own : parent_);
  if (top.empty()) return "the agent's v2 group is not visible under " + h.mount_point;
  const auto available = ReadFile(top + "/cgroup.controllers");
  if (!available || !ContainsWord(*available, controller)) {
    return "no " + controller + " controller delegated to " + top;
  }
  const auto top_enabled = ReadFile(top + "/cgroup.subtree_control");
  if (!top_enabled || !ContainsWord(*top_enabled, controller)) {
    if (const int err = WriteControl(top + "/cgroup.subtree_control", "+" + controller)) {
      std::string why = "cannot enable it below " + top + ": " + ErrnoText(err);
      if (err == EBUSY) why += " (the group holds processes; give the agent a delegated group)";
      return why;
    }
  }
  const std::string mine = top + "/" + name_;
  std::string why;
  if (!MakeDir(mine, &why)) return why;
  const auto mine_enabled = ReadFile(mine + "/cgroup.subtree_control");
  if (!mine_enabled || !ContainsWord(*mine_enabled, controller)) {
    if (const int err = WriteControl(mine + "/cgroup.subtree_control", "+" + controller)) {
      return "cannot enable it below " + mine + ": " + ErrnoText(err);
    }
  }
  return "";
}

TaskCgroup Cgroups::Create(const std::string& task_id, const CgroupLimits& limits,
                           LimitStatus* status) const {
  *status = LimitStatus{};
  std::map<std::string, std::string> missing;  // controller -> why it is not used
  TaskCgroup tc;

  for (const char* c : kControllers) {
    const auto it = layout_.v1.find(c);
    if (it == layout_.v1.end()) continue;
    const std::string runtime_dir = RuntimeDir(it->second);
    std::string why;
    if (runtime_dir.empty()) {
      missing[c] = "the agent's group is not visible under " + it->second.mount_point;
    } else if (MakeDir(runtime_dir, &why) && MakeDir(runtime_dir + "/" + task_id, &why)) {
      tc.controllers[c] = {CgroupVersion::kV1, runtime_dir + "/" + task_id};
    } else {
      missing[c] = why;
    }
  }
  // The unified hierarchy serves what v1 does not (all of it on a v2-only host).
  bool want_v2 = false;
  for (const char* c : {"cpu", "memory", "pids"}) want_v2 |= !layout_.v1.count(c);
  if (layout_.v2 && want_v2) {
    std::map<std::string, std::string> v2_missing;
    std::vector<std::string> usable;
    for (const char* c : {"cpu", "memory", "pids"}) {
      if (layout_.v1.count(c)) continue;
      const std::string why = EnableV2(c);
      if (why.empty()) {
        usable.push_back(c);
      } else {
        v2_missing[c] = why;
      }
    }
    const std::string top = layout_.v2->Dir(parent_.empty() ? layout_.v2->own : parent_);
    std::string why;
    if (!top.empty() && MakeDir(top + "/" + name_, &why) &&
        MakeDir(top + "/" + name_ + "/" + task_id, &why)) {
      tc.v2_dir = top + "/" + name_ + "/" + task_id;
      for (const std::string& c : usable) tc.controllers[c] = {CgroupVersion::kV2, tc.v2_dir};
      for (auto& [c, w] : v2_missing) missing[c] = w;
    } else {
      for (const char* c : {"cpu", "memory", "pids"}) {
        if (!layout_.v1.count(c)) missing[c] = why.empty() ? "no visible v2 group" : why;
      }
    }
  }

  std::vector<std::string> notes;
  auto not_enforced = [&](const std::string& c, const std::string& why) {
    notes.push_back(c + ": " + why);
  };
  auto reason_missing = [&](const std::string& c) {
    const auto it = missing.find(c);
    return it != missing.end() ? it->second : "no " + c + " controller";
  };

  if (limits.cpu_milli > 0) {
    const auto it = tc.controllers.find("cpu");
    const int64_t quota = std::max<int64_t>(1000, limits.cpu_milli * kCpuPeriodUs / 1000);
    if (it == tc.controllers.end()) {
      not_enforced("cpu", reason_missing("cpu"));
    } else if (it->second.version == CgroupVersion::kV1) {
      const std::string d = it->second.dir;
      int err = WriteControl(d + "/cpu.cfs_period_us", std::to_string(kCpuPeriodUs));
      if (err == 0) err = WriteControl(d + "/cpu.cfs_quota_us", std::to_string(quota));
      status->cpu = err == 0;
      if (err) not_enforced("cpu", WriteNote(d + "/cpu.cfs_quota_us", err));
    } else {
      const std::string f = it->second.dir + "/cpu.max";
      const int err = WriteControl(f, std::to_string(quota) + " " + std::to_string(kCpuPeriodUs));
      status->cpu = err == 0;
      if (err) not_enforced("cpu", WriteNote(f, err));
    }
  }
  if (limits.memory_mib > 0) {
    const auto it = tc.controllers.find("memory");
    const std::string bytes = std::to_string(limits.memory_mib << 20);
    if (it == tc.controllers.end()) {
      not_enforced("memory", reason_missing("memory"));
    } else if (it->second.version == CgroupVersion::kV1) {
      const std::string d = it->second.dir;
      const int err = WriteControl(d + "/memory.limit_in_bytes", bytes);
      status->memory = err == 0;
      if (err) not_enforced("memory", WriteNote(d + "/memory.limit_in_bytes", err));
      // Memory plus swap gets the same limit, so that going over it kills instead of swapping.
      if (err == 0 && Exists(d + "/memory.memsw.limit_in_bytes")) {
        WriteControl(d + "/memory.memsw.limit_in_bytes", bytes);
      }
    } else {
      const std::string d = it->second.dir;
      const int err = WriteControl(d + "/memory.max", bytes);
      status->memory = err == 0;
      if (err) not_enforced("memory", WriteNote(d + "/memory.max", err));
      if (err == 0 && Exists(d + "/memory.swap.max")) WriteControl(d + "/memory.swap.max", "0");
      // An OOM kill takes the whole task, as the v1 path does through the runtime.
      if (Exists(d + "/memory.oom.group")) WriteControl(d + "/memory.oom.group", "1");
    }
  }
  if (limits.pids_max > 0) {
    const auto it = tc.controllers.find("pids");
    if (it == tc.controllers.end()) {
      not_enforced("pids", reason_missing("pids"));
    } else {
      const std::string f = it->second.dir + "/pids.max";
      const int err = WriteControl(f, std::to_string(limits.pids_max));
      status->pids = err == 0;
      if (err) not_enforced("pids", WriteNote(f, err));
    }
  }
  for (size_t i = 0; i < notes.size(); ++i) {
    status->not_enforced += (i ? "; " : "") + notes[i];
  }
  return tc;
}

std::string Cgroups::Describe() const {
  std::string out;
  std::optional<std::string> v2_controllers;
  if (layout_.v2) {
    const std::string top = layout_.v2->Dir(parent_.empty() ? layout_.v2->own : parent_);
    if (!top.empty()) v2_controllers = ReadFile(top + "/cgroup.controllers");
  }
  for (const char* c : kControllers) {
    std::string where;
    if (layout_.v1.count(c)) {
      where = "v1";
    } else if (v2_controllers &&
               (std::string_view(c) == "freezer" || ContainsWord(*v2_controllers, c))) {
      where = "v2";  // the v2 freezer is part of every group
    }
    if (!where.empty()) out += (out.empty() ? "" : " ") + std::string(c) + ":" + where;
  }
  return out.empty() ? "none" : out;
}

}  // namespace gpupool::agent
