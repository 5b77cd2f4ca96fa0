// Durations as people type and read them ("90s", "1h30m"), in milliseconds. Shared by the CLI's
// flags (--max-runtime, --stop-grace, --stop-when-idle) and anything that turns such a text into
// a number, so that every place accepts exactly the same forms.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpupool {

// "90s", "15m", "2h", "1h30m", "1d", "500ms" → milliseconds. Units d, h, m, s, ms (any case),
// each at most once and largest first; blanks around the text are ignored. "0s" is 0 (callers
// that need a positive duration check it). A bare number, a fraction, a sign, an unknown unit or a
// total beyond int64 milliseconds is refused, the message quoting the text with an example.
Result<int64_t> ParseDurationMs(std::string_view text);

// Milliseconds → the two most significant units: "3m12s", "2h5m", "1d", "45s", "450ms".
std::string FormatDurationMs(int64_t ms);

}  // namespace gpupool
