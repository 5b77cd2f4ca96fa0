// UTF-8 well-formedness (RFC 3629): what task paths, JSON text and the store's text columns
// require. Overlong forms, UTF-16 surrogates and code points above U+10FFFF are not UTF-8.
#pragma once

#include <cstddef>
#include <string_view>

namespace gpupool {

// Length (1..4) of the well-formed UTF-8 sequence that starts at text[i], or 0 when none does
// (a stray continuation byte, a truncated or overlong sequence, a surrogate, past U+10FFFF).
// Requires i < text.size().
size_t Utf8SequenceLength(std::string_view text, size_t i);

// Whether all of `text` is well-formed UTF-8.
bool IsValidUtf8(std::string_view text);

// Length of the control character that starts at text[i]: 1 for C0 (U+0000..U+001F) and DEL, 2
// for C1 (U+0080..U+009F, encoded C2 80..C2 9F), 0 for anything else. Requires i < text.size().
// What the API refuses in names and the CLI escapes in what it prints.
size_t ControlCharacterLength(std::string_view text, size_t i);

}  // namespace gpupool
