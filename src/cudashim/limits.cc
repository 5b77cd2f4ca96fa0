// Parsing of GPUPOOL_GPU_MEM_LIMIT_BYTES (limits.h).
#include "cudashim/limits.h"

#include <limits>

namespace gpupool::cudashim {

Limits ParseLimits(const char* value) {
  Limits limits;
  if (value == nullptr) return limits;
  limits.enforced = true;
  const auto refuse = [&](const std::string& why) {
    limits.bytes.fill(0);
    std::string shown;  // the value as written, control and non-ASCII bytes as '?'
    for (const char* c = value; *c != '\0' && shown.size() < 200; ++c) {
      shown += (*c >= 0x20 && *c < 0x7f) ? *c : '?';
    }
    limits.error = std::string(kLimitVariable) + "='" + shown + "' " + why +
                   "; every GPU allocation is refused";
    return limits;
  };
  int count = 0;
  const char* p = value;
  while (true) {
    if (count == kMaxDevices) return refuse("lists more than 64 devices");
    if (*p < '0' || *p > '9') return refuse("is not a comma-separated list of byte counts");
    uint64_t n = 0;
    for (; *p >= '0' && *p <= '9'; ++p) {
      const uint64_t digit = static_cast<uint64_t>(*p - '0');
      if (n > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
        return refuse("holds a byte count past 2^64 - 1");
      }
      n = n * 10 + digit;
    }
    limits.bytes[count++] = n;
    if (*p == '\0') break;
    if (*p != ',') return refuse("is not a comma-separated list of byte counts");
    ++p;
  }
  if (count == 1) limits.bytes.fill(limits.bytes[0]);
  return limits;
}

}  // namespace gpupool::cudashim
