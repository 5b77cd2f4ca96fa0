// What every fuzz harness shares: FUZZ_CHECK, which reports a broken property (with the input's
// relevant values) and aborts, so that libFuzzer records the input as a crash. Harnesses are
// built only in the fuzzing build (scripts/fuzz.sh: clang, -fsanitize=fuzzer,address,undefined).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#define FUZZ_CHECK(cond, detail)                                                      \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: property failed: %s\n  %s\n", __FILE__, __LINE__, \
                   #cond, std::string(detail).c_str());                               \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)
