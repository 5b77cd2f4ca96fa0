// Byte counts for people, as the CLI, the server's and the agent's messages write them.
#pragma once

#include <cstdint>
#include <string>

namespace gpupool {

// "512 B", "1.5 KiB", "12.0 MiB", "3.2 GiB": one decimal in the largest binary unit (up to PiB)
// that keeps the number at least 1.
std::string FormatBytes(int64_t bytes);

}  // namespace gpupool
