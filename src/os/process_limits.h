// The process's open-file limit (RLIMIT_NOFILE): a server raises its soft limit to the hard
// one at start, as network servers do, and derives its connection limits from the result.
#pragma once

#include <cstdint>

namespace gpupool::os {

// Raises the soft RLIMIT_NOFILE to the hard limit (at most 1,048,576) where it is lower, and
// returns the soft limit then in force (1024, the usual default, if it cannot be read).
uint64_t RaiseOpenFileLimit();

}  // namespace gpupool::os
