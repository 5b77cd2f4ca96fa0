// Hexadecimal text of bytes: digests, random ids and \xNN escapes in messages (lower case), and
// percent-encoding (upper case, RFC 3986 §2.1).
#pragma once

#include <string>
#include <string_view>

namespace gpupool {

enum class HexCase { kLower, kUpper };

// Two hex digits per byte, most significant nibble first.
std::string HexEncode(std::string_view bytes, HexCase letters = HexCase::kLower);

// The value 0..15 of one hex digit of either case; -1 for any other character.
int HexDigitValue(char c);

// Whether `text` has only lower-case hex digits (true for the empty text).
bool IsLowerHex(std::string_view text);

}  // namespace gpupool
