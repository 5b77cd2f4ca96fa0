// Small text helpers the parsers of several modules share (HTTP header values, CLI flags): ASCII
// only, locale-free, no allocation.
#pragma once

#include <string_view>

namespace gpupool {

// `s` without leading and trailing spaces and tabs.
std::string_view TrimBlanks(std::string_view s);

// Equal but for the case of ASCII letters.
bool EqualsIgnoringCase(std::string_view a, std::string_view b);

}  // namespace gpupool
