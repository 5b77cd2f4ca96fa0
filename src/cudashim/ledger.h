// The interposer's accounting: per device, the bytes a process holds against its limit, and
// which allocation holds how many (device pointers, arrays, and the virtual-memory API's physical
// allocations with their references and mappings). Thread-safe; no CUDA calls of its own, so the
// wrappers in shim.cc decide the order of counting and calling the driver, and tests drive it
// directly.
#ifndef GPUPOOL_CUDASHIM_LEDGER_H_
#define GPUPOOL_CUDASHIM_LEDGER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "cudashim/limits.h"

namespace gpupool::cudashim {

// What a key names: the three kinds of handle live in separate tables (their values may collide).
enum class Kind : uint8_t { kDevicePointer = 0, kArray = 1, kMipmappedArray = 2 };

// A physical allocation of the virtual-memory API and who still holds it.
struct Physical {
  int device;
  uint64_t bytes;
  uint32_t references;  // cuMemCreate's, plus one per cuMemRetainAllocationHandle
  uint32_t mappings;
};

class Ledger {
 public:
  explicit Ledger(const Limits& limits);
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  bool enforced() const { return enforced_; }
  // 0 for an ordinal past kMaxDevices (or negative): nothing may be allocated there.
  uint64_t limit(int device) const;
  uint64_t used(int device) const;

  // Counts `bytes` against `device`'s limit; false, counting nothing, if that would pass it.
  bool Reserve(int device, uint64_t bytes);
  void Unreserve(int device, uint64_t bytes);

  // An allocation the driver made after a successful Reserve, kept under its key until freed.
  // False (nothing recorded) only when the table cannot grow: host memory is exhausted.
  bool Record(Kind kind, uint64_t key, int device, uint64_t bytes);

  // A free in progress: the allocation is out of the table but its bytes stay counted until
  // Finish, so an allocation that reuses the address meanwhile is never confused with it.
  struct Pending {
    Kind kind = Kind::kDevicePointer;
    std::unordered_map<uint64_t, std::pair<int, uint64_t>>::node_type node;  // empty: untracked
  };
  Pending Take(Kind kind, uint64_t key);
  // freed: the driver freed it (its bytes are released); otherwise it goes back into the table.
  void Finish(Pending pending, bool freed);

  // The virtual-memory API (cuMemCreate): a physical allocation counts from its creation until
  // its handle's last reference is released *and* its last mapping is unmapped, as the driver
  // frees it then.
  bool RecordHandle(uint64_t handle, int device, uint64_t bytes);
  // cuMemRetainAllocationHandle gave `handle` for the mapping at `address`: one more reference.
  // False only when the table cannot grow.
  bool Retained(uint64_t handle, uint64_t address);
  struct HandleRelease {
    std::shared_ptr<Physical> physical;  // null: not a handle this ledger knows
    bool last = false;                   // the last reference: out of the table meanwhile
  };
  HandleRelease BeginRelease(uint64_t handle);
  void FinishRelease(uint64_t handle, HandleRelease release, bool released);
  // cuMemMap mapped `handle` at [address, address + size). False only when the table cannot grow.
  bool Mapped(uint64_t address, uint64_t size, uint64_t handle);
  // cuMemUnmap unmapped [address, address + size): every mapping that starts there ends.
  void Unmapped(uint64_t address, uint64_t size);

  // fork(2): the child has no device memory (CUDA does not survive a fork), so it starts empty.
  void PrepareFork();
  void AfterForkInParent();
  void AfterForkInChild();

 private:
  void DropMappingLocked(Physical& physical);

  const bool enforced_;
  const std::array<uint64_t, kMaxDevices> limits_;
  std::array<std::atomic<uint64_t>, kMaxDevices> used_{};

  std::mutex mu_;
  // key -> (device, bytes), one table per Kind.
  std::array<std::unordered_map<uint64_t, std::pair<int, uint64_t>>, 3> allocations_;
  std::unordered_map<uint64_t, std::shared_ptr<Physical>> handles_;
  struct Mapping {
    uint64_t size;
    std::shared_ptr<Physical> physical;
  };
  std::map<uint64_t, Mapping> mappings_;  // by start address
};

}  // namespace gpupool::cudashim

#endif  // GPUPOOL_CUDASHIM_LEDGER_H_
