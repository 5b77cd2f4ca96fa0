// The GPU-memory limits the interposer enforces, as the agent writes them into a task's
// environment: GPUPOOL_GPU_MEM_LIMIT_BYTES is one byte count for every device, or a comma-separated
// list with one per device ordinal (as the task sees them, after CUDA_VISIBLE_DEVICES). Unset:
// nothing is enforced. Malformed (anything but decimal digits and commas, an empty entry, a value
// past 2^64 − 1, more than kMaxDevices entries): every device's limit is 0, so every allocation is
// refused; a task meant to be limited never runs unlimited.
#ifndef GPUPOOL_CUDASHIM_LIMITS_H_
#define GPUPOOL_CUDASHIM_LIMITS_H_

#include <array>
#include <cstdint>
#include <string>

namespace gpupool::cudashim {

inline constexpr char kLimitVariable[] = "GPUPOOL_GPU_MEM_LIMIT_BYTES";
inline constexpr int kMaxDevices = 64;

struct Limits {
  bool enforced = false;                      // false: every call passes straight through
  std::array<uint64_t, kMaxDevices> bytes{};  // per device ordinal; 0 past the list's end
  std::string error;                          // why the variable was refused (then all 0)
};

// `value` is the variable's value, nullptr when it is unset.
Limits ParseLimits(const char* value);

}  // namespace gpupool::cudashim

#endif  // GPUPOOL_CUDASHIM_LIMITS_H_
