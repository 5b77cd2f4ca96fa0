// For tests (not part of gpupool_os): a file's whole contents, as the snapshot and dataset tests
// compare what was written with what was meant.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace gpupool {

// The file's bytes; empty when it cannot be read.
inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace gpupool
