// For tests (not part of gpupool_core): bytes that do not compress and are the same for a seed
// (what chunking, snapshot, dataset and transfer tests cut, send and compare). A file's bytes:
// os/test_files.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

namespace gpupool {

inline std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

}  // namespace gpupool
