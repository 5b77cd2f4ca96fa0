#include "core/snapshot.h"

#include <array>
#include <charconv>
#include <utility>

namespace gpupool {
namespace {

constexpr std::array<std::pair<SnapshotTrigger, std::string_view>, 6> kTriggers{{
    {SnapshotTrigger::kManual, "manual"},
    {SnapshotTrigger::kPeriodic, "periodic"},
    {SnapshotTrigger::kStop, "stop"},
    {SnapshotTrigger::kPreempt, "preempt"},
    {SnapshotTrigger::kDrain, "drain"},
    {SnapshotTrigger::kMove, "move"},
}};
constexpr std::array<std::pair<Consistency, std::string_view>, 2> kConsistencies{{
    {Consistency::kCrash, "crash"},
    {Consistency::kApplication, "application"},
}};

template <typename E, size_t N>
std::string_view NameOf(const std::array<std::pair<E, std::string_view>, N>& names, E e) {
  for (const auto& [value, name] : names) {
    if (value == e) return name;
  }
  return "unknown";
}
template <typename E, size_t N>
std::optional<E> ValueOf(const std::array<std::pair<E, std::string_view>, N>& names,
                         std::string_view text) {
  for (const auto& [value, name] : names) {
    if (name == text) return value;
  }
  return std::nullopt;
}

}  // namespace

std::string_view SnapshotTriggerName(SnapshotTrigger t) { return NameOf(kTriggers, t); }
std::optional<SnapshotTrigger> ParseSnapshotTrigger(std::string_view name) {
  return ValueOf(kTriggers, name);
}
bool IsLastSnapshotTrigger(SnapshotTrigger t) {
  return t == SnapshotTrigger::kStop || t == SnapshotTrigger::kPreempt ||
         t == SnapshotTrigger::kDrain || t == SnapshotTrigger::kMove;
}

std::string_view ConsistencyName(Consistency c) { return NameOf(kConsistencies, c); }
std::optional<Consistency> ParseConsistency(std::string_view name) {
  return ValueOf(kConsistencies, name);
}

std::string SnapshotId(int64_t seq) { return "s-" + std::to_string(seq); }

std::optional<int64_t> SnapshotSeq(std::string_view id) {
  if (!id.starts_with("s-") || id.size() < 3 || id[2] == '0') return std::nullopt;
  int64_t seq = 0;
  const char* end = id.data() + id.size();
  const auto [p, ec] = std::from_chars(id.data() + 2, end, seq);
  if (ec != std::errc() || p != end || seq <= 0) return std::nullopt;
  return seq;
}

}  // namespace gpupool
