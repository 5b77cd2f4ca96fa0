// The interposer's accounting (ledger.h).
#include "cudashim/ledger.h"

#include <new>

namespace gpupool::cudashim {

namespace {
bool ValidDevice(int device) { return device >= 0 && device < kMaxDevices; }
}  // namespace

Ledger::Ledger(const Limits& limits) : enforced_(limits.enforced), limits_(limits.bytes) {}

uint64_t Ledger::limit(int device) const { return ValidDevice(device) ? limits_[device] : 0; }

uint64_t Ledger::used(int device) const {
  return ValidDevice(device) ? used_[device].load(std::memory_order_relaxed) : 0;
}

bool Ledger::Reserve(int device, uint64_t bytes) {
  if (!ValidDevice(device)) return false;
  std::atomic<uint64_t>& used = used_[device];
  uint64_t current = used.load(std::memory_order_relaxed);
  do {
    if (current > limits_[device] || bytes > limits_[device] - current) return false;
  } while (!used.compare_exchange_weak(current, current + bytes, std::memory_order_relaxed));
  return true;
}

void Ledger::Unreserve(int device, uint64_t bytes) {
  if (ValidDevice(device)) used_[device].fetch_sub(bytes, std::memory_order_relaxed);
}

bool Ledger::Record(Kind kind, uint64_t key, int device, uint64_t bytes) {
  std::lock_guard lock(mu_);
  auto& table = allocations_[static_cast<int>(kind)];
  try {
    auto [it, inserted] = table.try_emplace(key, device, bytes);
    if (!inserted) {
      // The driver handed out a key we still list: its free went past us (a path we do not
      // wrap). What it held is no longer held.
      Unreserve(it->second.first, it->second.second);
      it->second = {device, bytes};
    }
  } catch (const std::bad_alloc&) {
    return false;
  }
  return true;
}

Ledger::Pending Ledger::Take(Kind kind, uint64_t key) {
  std::lock_guard lock(mu_);
  return Pending{kind, allocations_[static_cast<int>(kind)].extract(key)};
}

void Ledger::Finish(Pending pending, bool freed) {
  if (pending.node.empty()) return;
  if (freed) {
    Unreserve(pending.node.mapped().first, pending.node.mapped().second);
    return;
  }
  std::lock_guard lock(mu_);
  // Reinserting a node allocates nothing. A key recorded meanwhile (the driver reused it while
  // this free failed) keeps the newer record; this one's bytes are then released.
  auto result = allocations_[static_cast<int>(pending.kind)].insert(std::move(pending.node));
  if (!result.inserted) Unreserve(result.node.mapped().first, result.node.mapped().second);
}

bool Ledger::RecordHandle(uint64_t handle, int device, uint64_t bytes) {
  std::lock_guard lock(mu_);
  try {
    handles_[handle] = std::make_shared<Physical>(Physical{device, bytes, 1, 0});
  } catch (const std::bad_alloc&) {
    return false;
  }
  return true;
}

bool Ledger::Retained(uint64_t handle, uint64_t address) {
  std::lock_guard lock(mu_);
  if (auto it = handles_.find(handle); it != handles_.end()) {
    ++it->second->references;
    return true;
  }
  // A handle already released while still mapped: found through its mapping.
  auto it = mappings_.upper_bound(address);
  if (it == mappings_.begin()) return true;
  --it;
  if (address - it->first >= it->second.size) return true;
  try {
    handles_.emplace(handle, it->second.physical);
  } catch (const std::bad_alloc&) {
    return false;
  }
  ++it->second.physical->references;
  return true;
}

Ledger::HandleRelease Ledger::BeginRelease(uint64_t handle) {
  std::lock_guard lock(mu_);
  auto it = handles_.find(handle);
  if (it == handles_.end()) return {};
  HandleRelease release{it->second, it->second->references <= 1};
  if (release.last) handles_.erase(it);
  return release;
}

void Ledger::FinishRelease(uint64_t handle, HandleRelease release, bool released) {
  if (release.physical == nullptr) return;
  std::lock_guard lock(mu_);
  Physical& physical = *release.physical;
  if (!released) {
    if (!release.last) return;
    // Back under its handle; a handle value the driver reused meanwhile keeps the newer record.
    // emplace may fail only for want of host memory: the allocation then stays counted until
    // the process ends (over-counting, never under-counting).
    try {
      handles_.emplace(handle, release.physical);
    } catch (const std::bad_alloc&) {
    }
    return;
  }
  if (physical.references > 0) --physical.references;
  if (physical.references == 0 && physical.mappings == 0)
    Unreserve(physical.device, physical.bytes);
}

bool Ledger::Mapped(uint64_t address, uint64_t size, uint64_t handle) {
  std::lock_guard lock(mu_);
  auto it = handles_.find(handle);
  if (it == handles_.end()) return true;  // memory this ledger does not count (imported)
  try {
    auto [at, inserted] = mappings_.try_emplace(address, Mapping{size, it->second});
    if (!inserted) {
      DropMappingLocked(*at->second.physical);
      at->second = Mapping{size, it->second};
    }
  } catch (const std::bad_alloc&) {
    return false;
  }
  ++it->second->mappings;
  return true;
}

void Ledger::Unmapped(uint64_t address, uint64_t size) {
  std::lock_guard lock(mu_);
  auto it = mappings_.lower_bound(address);
  while (it != mappings_.end() && it->first - address < size) {
    DropMappingLocked(*it->second.physical);
    it = mappings_.erase(it);
  }
}

void Ledger::DropMappingLocked(Physical& physical) {
  if (physical.mappings > 0) --physical.mappings;
  if (physical.references == 0 && physical.mappings == 0)
    Unreserve(physical.device, physical.bytes);
}

void Ledger::PrepareFork() { mu_.lock(); }

void Ledger::AfterForkInParent() { mu_.unlock(); }

void Ledger::AfterForkInChild() {
  for (auto& table : allocations_) table.clear();
  handles_.clear();
  mappings_.clear();
  for (auto& used : used_) used.store(0, std::memory_order_relaxed);
  mu_.unlock();
}

}  // namespace gpupool::cudashim
