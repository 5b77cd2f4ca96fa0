// Typical tasks and fragment bins (see fragmentation.h). The arithmetic follows the paper's
// simulator operation by operation (double accumulation per category in typical-task order), so
// that scores truncated to integers tie and split exactly as there.
#include "sched/fragmentation.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "sched/cluster_state.h"

namespace gpupool::sched {
namespace {

std::string JoinModels(const std::vector<std::string>& models) {
  std::string s;
  for (const std::string& m : models) {
    if (!s.empty()) s += '|';
    s += m;
  }
  return s;
}

}  // namespace

std::vector<TypicalTask> TypicalTasks(std::span<const TaskRequest> workload, double coverage_pct) {
  // Shape key: (cpu, milli per GPU, GPU count, joined models).
  using Shape = std::tuple<int64_t, int32_t, int, std::string>;
  std::map<Shape, int64_t> counts;
  int64_t total = 0;
  for (const TaskRequest& r : workload) {
    Shape s;
    switch (r.Form()) {
      case GpuForm::kMig: continue;
      case GpuForm::kNone: s = {r.cpu_milli, 0, 0, ""}; break;
      case GpuForm::kShare: s = {r.cpu_milli, r.gpu_milli, 1, JoinModels(r.gpu_models)}; break;
      case GpuForm::kWhole:
        s = {r.cpu_milli, kMilliPerGpu, r.gpu_count, JoinModels(r.gpu_models)};
        break;
    }
    ++counts[s];
    ++total;
  }
  std::vector<std::pair<Shape, int64_t>> list(counts.begin(), counts.end());
  // Most frequent first; equal counts: larger shape first (the simulator sorts by the reverse of
  // cpu, then milli, then count, then model string).
  std::stable_sort(list.begin(), list.end(), [](const auto& x, const auto& y) {
    if (x.second != y.second) return x.second > y.second;
    return x.first > y.first;
  });
  const double dtotal = static_cast<double>(total);
  const double expected = coverage_pct * dtotal / 100.0;
  double cum = 0;
  size_t taken = 0;
  std::vector<double> p(list.size(), 0.0);
  while (taken < list.size() && cum < expected) {
    cum += static_cast<double>(list[taken].second);
    p[taken] = static_cast<double>(list[taken].second) / dtotal;
    ++taken;
  }
  std::vector<TypicalTask> out;
  out.reserve(taken);
  for (size_t i = 0; i < taken; ++i) {
    const auto& [cpu, milli, count, models] = list[i].first;
    TypicalTask t;
    t.cpu_milli = cpu;
    t.milli_per_gpu = milli;
    t.gpu_count = count;
    for (size_t start = 0; start < models.size();) {
      size_t bar = models.find('|', start);
      if (bar == std::string::npos) bar = models.size();
      t.models.push_back(models.substr(start, bar - start));
      start = bar + 1;
    }
    t.weight = taken < list.size() ? p[i] / (cum / dtotal) : p[i];
    out.push_back(std::move(t));
  }
  return out;
}

double FragAmount(const FragBins& b) { return b[0] + b[1] + b[3] + b[4] + b[5] + b[6]; }

double FragTotal(const FragBins& b) { return b[0] + b[1] + b[2] + b[3] + b[4] + b[5] + b[6]; }

FragModel::FragModel(std::vector<TypicalTask> typical) : typical_(std::move(typical)) {}

void FragModel::Resync(const ClusterState& state) {
  access_.assign(typical_.size(), {});
  for (size_t t = 0; t < typical_.size(); ++t) {
    auto& row = access_[t];
    row.assign(static_cast<size_t>(state.ModelCount()), typical_[t].models.empty());
    for (const std::string& m : typical_[t].models) {
      const int id = state.ModelId(m);
      if (id >= 0) row[static_cast<size_t>(id)] = true;
    }
  }
  synced_models_ = state.ModelCount();
  memo_.clear();
  memo_count_ = 0;
}

namespace {
// Slot of `key` in a table of `mask + 1` slots: the two words mixed (splitmix64's finaliser)
// so that keys differing only in a few bits spread over the table.
size_t MemoIndex(uint64_t a, uint64_t b, size_t mask) {
  uint64_t h = a ^ (b * 0x9E3779B97F4A7C15ull);
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
  return static_cast<size_t>(h ^ (h >> 31)) & mask;
}
}  // namespace

const double* FragModel::MemoFind(const Key& key) const {
  if (memo_.empty()) return nullptr;
  const size_t mask = memo_.size() - 1;
  const Key stored{key.a, key.b | kUsedBit};
  for (size_t i = MemoIndex(key.a, key.b, mask);; i = (i + 1) & mask) {
    const MemoSlot& slot = memo_[i];
    if (slot.key == stored) return &slot.value;
    if ((slot.key.b & kUsedBit) == 0) return nullptr;  // an empty slot ends the probe
  }
}

void FragModel::MemoInsert(const Key& key, double value) {
  if (2 * (memo_count_ + 1) > memo_.size()) {  // keep at most half full: short probes
    std::vector<MemoSlot> old = std::move(memo_);
    memo_.assign(std::max<size_t>(1024, 2 * old.size()), MemoSlot{});
    memo_count_ = 0;
    for (const MemoSlot& slot : old) {
      if (slot.key.b & kUsedBit) MemoInsert(Key{slot.key.a, slot.key.b & ~kUsedBit}, slot.value);
    }
  }
  const size_t mask = memo_.size() - 1;
  size_t i = MemoIndex(key.a, key.b, mask);
  while (memo_[i].key.b & kUsedBit) i = (i + 1) & mask;
  memo_[i] = MemoSlot{Key{key.a, key.b | kUsedBit}, value};
  ++memo_count_;
}

FragBins FragModel::Bins(const ClusterState& state, int model_id, int64_t cpu_left,
                         std::span<const int32_t> gpu_left) {
  SyncModels(state);
  FragBins bins{};
  int64_t left = 0;
  for (int32_t l : gpu_left) left += l;
  const double dleft = static_cast<double>(left);
  for (size_t t = 0; t < typical_.size(); ++t) {
    const TypicalTask& m = typical_[t];
    const double p = m.weight;
    if (m.milli_per_gpu == 0) {  // CPU-only task: all idle GPU is fragment to it
      bins[cpu_left >= m.cpu_milli ? kXL : kXR] += p * dleft;
      continue;
    }
    const bool access = model_id >= 0 && !gpu_left.empty() && access_[t][static_cast<size_t>(model_id)];
    if (!access) {
      bins[kNoAccess] += p * dleft;
      continue;
    }
    int fitting = 0;
    int64_t frag = 0;
    for (int32_t l : gpu_left) {
      if (l >= m.milli_per_gpu) {
        ++fitting;
      } else {
        frag += l;
      }
    }
    const bool gpu_ok = fitting >= m.gpu_count;
    const bool cpu_ok = cpu_left >= m.cpu_milli;
    if (gpu_ok && cpu_ok) {
      bins[kQ2] += p * static_cast<double>(frag);
      bins[kQ3] += p * static_cast<double>(left - frag);
    } else {
      bins[gpu_ok ? kQ4 : (cpu_ok ? kQ2 : kQ1)] += p * dleft;
    }
  }
  return bins;
}

double FragModel::CapacityAmount(int model_id, int64_t cpu_left,
                                 std::span<const int32_t> gpu_left) const {
  int64_t left = 0;
  int64_t free_gpus = 0;
  for (int32_t l : gpu_left) {
    left += l;
    free_gpus += l == kMilliPerGpu;
  }
  const double dleft = static_cast<double>(left);
  double frag = 0;
  for (size_t t = 0; t < typical_.size(); ++t) {
    const TypicalTask& m = typical_[t];
    if (m.milli_per_gpu == 0 || model_id < 0 || gpu_left.empty() ||
        !access_[t][static_cast<size_t>(model_id)]) {
      frag += m.weight * dleft;  // CPU-only, or not allowed here: no idle GPU is of use to it
      continue;
    }
    const int64_t cpu_slots = m.cpu_milli > 0 ? std::max<int64_t>(cpu_left, 0) / m.cpu_milli
                                              : INT64_MAX;
    int64_t usable = 0;
    if (m.gpu_count == 1 && m.milli_per_gpu < kMilliPerGpu) {
      // A share: ⌊left/milli⌋ instances per GPU. A fully free GPU counts whole: it is not
      // fragmented, whatever it will host.
      int64_t gpu_slots = 0;
      int64_t by_gpu = 0;
      for (int32_t l : gpu_left) {
        gpu_slots += l / m.milli_per_gpu;
        by_gpu += l == kMilliPerGpu ? l : l / m.milli_per_gpu * m.milli_per_gpu;
      }
      usable = gpu_slots <= cpu_slots ? by_gpu : int64_t{m.milli_per_gpu} * cpu_slots;
    } else {
      usable = int64_t{kMilliPerGpu} * m.gpu_count *
               std::min<int64_t>(free_gpus / m.gpu_count, cpu_slots);
    }
    frag += m.weight * static_cast<double>(left - usable);
  }
  return frag;
}

double FragModel::Amount(const ClusterState& state, int model_id, int64_t cpu_left,
                         std::span<const int32_t> gpu_left, FragMeasure measure) {
  SyncModels(state);
  const bool capacity = measure == FragMeasure::kCapacity;
  auto compute = [&] {
    return capacity ? CapacityAmount(model_id, cpu_left, gpu_left)
                    : FragAmount(Bins(state, model_id, cpu_left, gpu_left));
  };
  constexpr int kMaxMemoGpus = 8;
  if (gpu_left.size() > kMaxMemoGpus || cpu_left < 0 || cpu_left >= (int64_t{1} << 24) ||
      model_id >= 255) {
    return compute();
  }
  // Sorted (insertion sort: at most 8 values), zero-padded to 8.
  std::array<int32_t, kMaxMemoGpus> sorted{};
  for (size_t i = 0; i < gpu_left.size(); ++i) {
    size_t j = i;
    for (; j > 0 && sorted[j - 1] > gpu_left[i]; --j) sorted[j] = sorted[j - 1];
    sorted[j] = gpu_left[i];
  }
  // a: model (8 bits) | cpu_left (24) | 3 lefts (10 each);
  // b: GPU count (4) | 5 lefts (10 each) | measure (1).
  uint64_t a = static_cast<uint64_t>(model_id + 1) | (static_cast<uint64_t>(cpu_left) << 8);
  uint64_t b = gpu_left.size() | (capacity ? uint64_t{1} << 54 : 0);
  for (size_t i = 0; i < 3; ++i) a |= static_cast<uint64_t>(sorted[i]) << (32 + 10 * i);
  for (size_t i = 3; i < 8; ++i) b |= static_cast<uint64_t>(sorted[i]) << (4 + 10 * (i - 3));
  const Key key{a, b};
  if (const double* hit = MemoFind(key)) return *hit;
  const double v = compute();
  MemoInsert(key, v);
  return v;
}

namespace {
// GPU milli usable by fractional and whole-GPU tasks: MIG-mode GPUs offer none.
std::vector<int32_t> UsableLeft(const Node& n) {
  std::vector<int32_t> left;
  left.reserve(n.gpus.size());
  for (const Gpu& g : n.gpus) left.push_back(g.mig_enabled ? 0 : g.milli_free);
  return left;
}
}  // namespace

FragBins FragModel::NodeBins(const ClusterState& state, int n) {
  const Node& node = state.node(n);
  return Bins(state, state.NodeModelId(n), node.cpu_free_milli, UsableLeft(node));
}

double FragModel::NodeAmount(const ClusterState& state, int n) {
  const Node& node = state.node(n);
  return Amount(state, state.NodeModelId(n), node.cpu_free_milli, UsableLeft(node));
}

}  // namespace gpupool::sched
