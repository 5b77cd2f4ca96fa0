// SimulatedProbe: the --simulate-gpus grammar, MIG layouts checked with core's placement rules,
// and samples computed from the loads the runtime attaches.
#include "agent/gpu/simulated_probe.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "core/mig.h"

namespace gpupool::agent {
namespace {

constexpr int kMaxPerItem = 64;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t from = 0;
  while (true) {
    const size_t at = s.find(sep, from);
    out.push_back(
        s.substr(from, at == std::string_view::npos ? std::string_view::npos : at - from));
    if (at == std::string_view::npos) return out;
    from = at + 1;
  }
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string KnownModels() {
  std::vector<std::string> names;
  for (const GpuModelInfo& m : KnownGpuModels()) names.push_back(m.name);
  return Join(names);
}

std::string ProfileNames(const GpuModelInfo& model) {
  std::vector<std::string> names;
  for (const MigProfile& p : model.mig_profiles) names.push_back(p.name);
  return Join(names);
}

std::string SanitizeSeed(std::string_view seed) {
  std::string out;
  for (char ch : Trim(seed)) {
    const auto c = static_cast<unsigned char>(ch);
    out.push_back(std::isalnum(c) || ch == '-' || ch == '_' ? ch : '-');
  }
  return out.empty() ? "local" : out;
}

uint32_t SpanMask(int start, int size) { return ((1u << size) - 1u) << start; }

// Why `instances` is not a legal MIG layout of `model`, or empty when it is.
std::string LayoutProblem(const GpuModelInfo& model, const std::vector<MigInstance>& instances) {
  const int n_profiles = static_cast<int>(model.mig_profiles.size());
  for (size_t k = 0; k < instances.size(); ++k) {
    const MigInstance& m = instances[k];
    const std::string which = "instance " + std::to_string(k + 1);
    if (m.profile < 0 || m.profile >= n_profiles) {
      return which + ": profile index " + std::to_string(m.profile) + " out of range (" +
             model.name + " has " + std::to_string(n_profiles) + " MIG profiles)";
    }
    const MigProfile& p = model.mig_profiles[static_cast<size_t>(m.profile)];
    const std::string what = which + " (" + p.name + " at slot " + std::to_string(m.start) + ")";
    if (std::find(p.starts.begin(), p.starts.end(), m.start) == p.starts.end()) {
      std::string legal;
      for (int s : p.starts) legal += (legal.empty() ? "" : ", ") + std::to_string(s);
      return what + ": " + p.name + " may only start at slot " + legal;
    }
    int same = 0;
    for (size_t j = 0; j < k; ++j) {
      const MigInstance& o = instances[j];
      if (o.profile == m.profile) ++same;
      const MigProfile& op = model.mig_profiles[static_cast<size_t>(o.profile)];
      if (SpanMask(o.start, op.memory_slices) & SpanMask(m.start, p.memory_slices)) {
        return what + " overlaps instance " + std::to_string(j + 1) + " (" + op.name + " at slot " +
               std::to_string(o.start) + ")";
      }
    }
    if (same >= p.max_instances) {
      return what + ": at most " + std::to_string(p.max_instances) + " " + p.name + " per GPU";
    }
  }
  return {};
}

// Parses "3g.40gb+3g.40gb+1g.10gb+me" for `model`, placing each instance at its first legal
// start in order. Errors are the message after the item.
Result<std::vector<MigInstance>> ParseLayout(const GpuModelInfo& model, std::string_view text) {
  std::vector<std::string> names;
  for (std::string_view part : Split(text, '+')) {
    part = Trim(part);
    // "+me" belongs to the profile before it ("1g.10gb+me").
    if (part == "me" && !names.empty() && !names.back().ends_with("+me")) {
      names.back() += "+me";
      continue;
    }
    if (part.empty()) return InvalidArgument("empty MIG profile in '" + std::string(text) + "'");
    names.emplace_back(part);
  }
  std::vector<MigInstance> out;
  Gpu gpu;
  gpu.mig_enabled = true;
  for (size_t k = 0; k < names.size(); ++k) {
    const int profile = model.ProfileIndex(names[k]);
    if (profile < 0) {
      return InvalidArgument(model.name + " has no MIG profile " + names[k] +
                             " (profiles: " + ProfileNames(model) + ")");
    }
    const uint32_t occupied = MigOccupiedSlots(model, gpu);
    const int existing = static_cast<int>(std::count_if(
        out.begin(), out.end(), [&](const MigInstance& m) { return m.profile == profile; }));
    int start = -1;
    for (int s : model.mig_profiles[static_cast<size_t>(profile)].starts) {
      if (MigStartLegal(model, profile, s, occupied, existing)) {
        start = s;
        break;
      }
    }
    if (start < 0) {
      return InvalidArgument("no room for " + names[k] + " (instance " + std::to_string(k + 1) +
                             ") on " + model.name + " after the instances before it");
    }
    out.push_back(MigInstance{profile, start, false});
    gpu.mig_instances = out;
  }
  return out;
}

std::string Pids(const std::vector<int>& pids) {
  std::string out;
  for (int p : pids) out += (out.empty() ? "" : ", ") + std::to_string(p);
  return out;
}

}  // namespace

Result<std::unique_ptr<SimulatedProbe>> SimulatedProbe::Parse(std::string_view spec,
                                                              std::string_view seed) {
  if (Trim(spec).empty())
    return InvalidArgument("empty GPU spec (expected e.g. 'A100-80GB:4,T4:2')");
  std::unique_ptr<SimulatedProbe> probe(new SimulatedProbe(SanitizeSeed(seed)));
  int next_group = 0;  // link groups are numbered across the items
  for (std::string_view raw : Split(spec, ',')) {
    const std::string_view item = Trim(raw);
    const std::string quoted = "'" + std::string(item) + "'";
    if (item.empty()) {
      return InvalidArgument("empty item in GPU spec '" + std::string(spec) + "'");
    }
    std::vector<std::string_view> parts = Split(item, ':');
    for (std::string_view& p : parts) p = Trim(p);
    if (parts.size() < 2 || parts.size() > 4) {
      return InvalidArgument(quoted + ": expected MODEL:COUNT[:mig[=PROFILE+…]][:links=K]");
    }
    const GpuModelInfo* model = FindGpuModel(parts[0]);
    if (model == nullptr) {
      return InvalidArgument(quoted + ": unknown GPU model " + std::string(parts[0]) +
                             " (known: " + KnownModels() + ")");
    }
    const auto number = [](std::string_view text, int max) {
      int value = 0;
      bool digits = !text.empty() && text.size() <= 3;
      for (char ch : text) {
        digits = digits && std::isdigit(static_cast<unsigned char>(ch));
        if (digits) value = value * 10 + (ch - '0');
      }
      return digits && value >= 1 && value <= max ? value : -1;
    };
    const int count = number(parts[1], kMaxPerItem);
    if (count < 0) {
      return InvalidArgument(quoted + ": count '" + std::string(parts[1]) +
                             "' must be an integer from 1 to " + std::to_string(kMaxPerItem));
    }
    bool mig = false;
    int links = 0;  // GPUs per link group; 0: groups not known
    std::vector<MigInstance> layout;
    for (size_t k = 2; k < parts.size(); ++k) {
      const std::string_view opt = parts[k];
      if (opt.starts_with("links=")) {
        links = number(opt.substr(6), kMaxPerItem);
        if (links < 0) {
          return InvalidArgument(quoted + ": links '" + std::string(opt.substr(6)) +
                                 "' must be an integer from 1 to " + std::to_string(kMaxPerItem) +
                                 " (GPUs per NVLink group)");
        }
        continue;
      }
      if (opt != "mig" && !opt.starts_with("mig=")) {
        return InvalidArgument(quoted + ": unknown option '" + std::string(opt) +
                               "' (expected mig, mig=PROFILE+PROFILE… or links=K)");
      }
      if (!model->MigCapable()) {
        return InvalidArgument(quoted + ": " + model->name + " is not MIG-capable");
      }
      mig = true;
      if (opt.starts_with("mig=")) {
        Result<std::vector<MigInstance>> parsed = ParseLayout(*model, opt.substr(4));
        if (!parsed) return InvalidArgument(quoted + ": " + parsed.error().message);
        layout = std::move(*parsed);
      }
    }
    if (static_cast<int>(probe->gpus_.size()) + count > kMaxGpus) {
      return InvalidArgument(quoted + ": more than " + std::to_string(kMaxGpus) +
                             " simulated GPUs in all");
    }
    const int first_group = next_group;
    if (links > 0) next_group += (count + links - 1) / links;
    for (int i = 0; i < count; ++i) {
      SimGpu g;
      g.model = model;
      g.gpu.model = model->name;
      if (links > 0) g.gpu.link_group = first_group + i / links;
      g.gpu.uuid = "GPU-sim-" + probe->seed_ + "-" + std::to_string(probe->gpus_.size());
      g.gpu.mem_mib = g.gpu.mem_free_mib = model->mem_mib;
      probe->gpus_.push_back(std::move(g));
      probe->SetInstances(static_cast<int>(probe->gpus_.size()) - 1, mig, layout);
    }
  }
  probe->Reindex();
  return probe;
}

std::string SimulatedProbe::MigUuid(int gpu_index, const MigInstance& m) const {
  const SimGpu& g = gpus_[static_cast<size_t>(gpu_index)];
  return "MIG-sim-" + seed_ + "-" + std::to_string(gpu_index) + "-" + std::to_string(m.start) +
         "-" + g.model->mig_profiles[static_cast<size_t>(m.profile)].name;
}

void SimulatedProbe::SetInstances(int gpu_index, bool mig_enabled,
                                  std::vector<MigInstance> instances) {
  SimGpu& g = gpus_[static_cast<size_t>(gpu_index)];
  std::sort(instances.begin(), instances.end(),
            [](const MigInstance& a, const MigInstance& b) { return a.start < b.start; });
  g.gpu.mig_enabled = mig_enabled;
  g.gpu.mig_instances.clear();
  g.mig_uuids.clear();
  for (MigInstance m : instances) {
    m.in_use = false;
    g.gpu.mig_instances.push_back(m);
    g.mig_uuids.push_back(MigUuid(gpu_index, m));
  }
}

void SimulatedProbe::Reindex() {
  where_.clear();
  for (size_t i = 0; i < gpus_.size(); ++i) {
    where_[gpus_[i].gpu.uuid] = {static_cast<int>(i), -1};
    for (size_t k = 0; k < gpus_[i].mig_uuids.size(); ++k) {
      where_[gpus_[i].mig_uuids[k]] = {static_cast<int>(i), static_cast<int>(k)};
    }
  }
}

int SimulatedProbe::GpuCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(gpus_.size());
}

Result<std::vector<Gpu>> SimulatedProbe::Discover() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Gpu> out;
  out.reserve(gpus_.size());
  for (const SimGpu& g : gpus_) out.push_back(g.gpu);
  return out;
}

Result<std::vector<GpuSample>> SimulatedProbe::Sample() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<GpuSample> out(gpus_.size());
  // Σ per GPU (whole-GPU loads) and per MIG instance, before capping.
  std::vector<int64_t> gpu_util(gpus_.size(), 0);
  std::vector<int64_t> gpu_mem(gpus_.size(), 0);
  for (size_t i = 0; i < gpus_.size(); ++i) {
    out[i].index = static_cast<int>(i);
    out[i].uuid = gpus_[i].gpu.uuid;
    for (size_t k = 0; k < gpus_[i].mig_uuids.size(); ++k) {
      out[i].mig.push_back(
          MigSample{gpus_[i].mig_uuids[k], gpus_[i].gpu.mig_instances[k].start, 0, 0});
    }
  }
  for (const Load& l : loads_) {
    const auto it = where_.find(l.uuid);
    if (it == where_.end()) continue;
    const auto [gi, mi] = it->second;
    GpuSample& s = out[static_cast<size_t>(gi)];
    if (mi < 0) {
      gpu_util[static_cast<size_t>(gi)] += l.util_pct;
      gpu_mem[static_cast<size_t>(gi)] += l.mem_mib;
      s.processes.push_back(GpuProcess{l.pid, l.mem_mib, ""});
    } else {
      MigSample& m = s.mig[static_cast<size_t>(mi)];
      m.util_pct += l.util_pct;  // capped below
      m.mem_used_mib += l.mem_mib;
      s.processes.push_back(GpuProcess{l.pid, l.mem_mib, m.uuid});
    }
  }
  for (size_t i = 0; i < gpus_.size(); ++i) {
    const SimGpu& g = gpus_[i];
    GpuSample& s = out[i];
    int64_t util = gpu_util[i];
    if (!s.mig.empty()) {
      const int64_t total = std::max(1, g.model->mig_compute_slices);
      int64_t weighted = 0;
      for (size_t k = 0; k < s.mig.size(); ++k) {
        const MigProfile& p =
            g.model->mig_profiles[static_cast<size_t>(g.gpu.mig_instances[k].profile)];
        MigSample& m = s.mig[k];
        m.util_pct = std::min(m.util_pct, 100);
        m.mem_used_mib = std::min(m.mem_used_mib, p.mem_mib);
        weighted += int64_t{m.util_pct} * p.compute_slices;
        gpu_mem[i] += m.mem_used_mib;
      }
      util += (weighted + total / 2) / total;
    }
    s.util_pct = static_cast<int>(std::min<int64_t>(util, 100));
    s.mem_used_mib = std::min(gpu_mem[i], g.gpu.mem_mib);
    std::sort(s.processes.begin(), s.processes.end(), [](const GpuProcess& a, const GpuProcess& b) {
      return a.pid != b.pid ? a.pid < b.pid : a.mig_uuid < b.mig_uuid;
    });
  }
  return out;
}

Result<std::string> SimulatedProbe::MigInstanceUuid(int gpu_index, int start) {
  std::lock_guard<std::mutex> lock(mu_);
  if (gpu_index < 0 || gpu_index >= static_cast<int>(gpus_.size())) {
    return NotFound("gpu index " + std::to_string(gpu_index) + " out of range (" +
                    std::to_string(gpus_.size()) + " GPUs)");
  }
  const SimGpu& g = gpus_[static_cast<size_t>(gpu_index)];
  for (size_t k = 0; k < g.gpu.mig_instances.size(); ++k) {
    if (g.gpu.mig_instances[k].start == start) return g.mig_uuids[k];
  }
  return NotFound("GPU " + std::to_string(gpu_index) + " has no MIG instance at slot " +
                  std::to_string(start));
}

void SimulatedProbe::SetLoad(const std::string& gpu_or_mig_uuid, int pid, int util_pct,
                             int64_t mem_mib) {
  util_pct = std::clamp(util_pct, 0, 100);
  mem_mib = std::max<int64_t>(mem_mib, 0);
  std::lock_guard<std::mutex> lock(mu_);
  for (Load& l : loads_) {
    if (l.pid == pid && l.uuid == gpu_or_mig_uuid) {
      l.util_pct = util_pct;
      l.mem_mib = mem_mib;
      return;
    }
  }
  loads_.push_back(Load{gpu_or_mig_uuid, pid, util_pct, mem_mib});
}

void SimulatedProbe::ClearLoad(int pid) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(loads_, [pid](const Load& l) { return l.pid == pid; });
}

Status SimulatedProbe::ApplyMigLayout(int gpu_index, bool mig_enabled,
                                      const std::vector<MigInstance>& instances) {
  std::lock_guard<std::mutex> lock(mu_);
  if (gpu_index < 0 || gpu_index >= static_cast<int>(gpus_.size())) {
    return InvalidArgument("gpu index " + std::to_string(gpu_index) + " out of range (" +
                           std::to_string(gpus_.size()) + " GPUs)");
  }
  SimGpu& g = gpus_[static_cast<size_t>(gpu_index)];
  const std::string gpu_name = "GPU " + std::to_string(gpu_index) + " (" + g.model->name + ")";
  if (mig_enabled && !g.model->MigCapable()) {
    return InvalidArgument(gpu_name + " is not MIG-capable");
  }
  if (!mig_enabled && !instances.empty()) {
    return InvalidArgument(gpu_name + ": MIG instances given with MIG mode off");
  }
  if (const std::string problem = LayoutProblem(*g.model, instances); !problem.empty()) {
    return InvalidArgument(gpu_name + ": " + problem);
  }
  // What the change resets must be idle: the whole GPU when MIG mode changes, else the
  // instances that go away.
  auto pids_on = [&](const std::string& uuid) {
    std::vector<int> pids;
    for (const Load& l : loads_) {
      if (l.uuid == uuid) pids.push_back(l.pid);
    }
    return pids;
  };
  if (mig_enabled != g.gpu.mig_enabled) {
    std::vector<int> pids = pids_on(g.gpu.uuid);
    for (const std::string& u : g.mig_uuids) {
      const std::vector<int> more = pids_on(u);
      pids.insert(pids.end(), more.begin(), more.end());
    }
    if (!pids.empty()) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       gpu_name + " runs processes (pid " + Pids(pids) + "); turning MIG mode " +
                           (mig_enabled ? "on" : "off") + " needs an idle GPU");
    }
  } else {
    for (size_t k = 0; k < g.gpu.mig_instances.size(); ++k) {
      const MigInstance& old = g.gpu.mig_instances[k];
      const bool kept = std::any_of(instances.begin(), instances.end(), [&](const MigInstance& m) {
        return m.profile == old.profile && m.start == old.start;
      });
      if (kept) continue;
      if (const std::vector<int> pids = pids_on(g.mig_uuids[k]); !pids.empty()) {
        return MakeError(ErrorCode::kFailedPrecondition,
                         gpu_name + ": MIG instance " +
                             g.model->mig_profiles[static_cast<size_t>(old.profile)].name +
                             " at slot " + std::to_string(old.start) + " (" + g.mig_uuids[k] +
                             ") runs processes (pid " + Pids(pids) + ") and would be destroyed");
      }
    }
  }
  SetInstances(gpu_index, mig_enabled, instances);
  Reindex();
  return {};
}

}  // namespace gpupool::agent
