// Standard base64 (RFC 4648 §4, with padding): how binary bytes travel inside JSON — sealed
// secrets, and task output (logs, metric lines) shipped by agents.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpupool {

std::string Base64Encode(std::string_view bytes);

// Strict inverse of Base64Encode: whole quartets, padding only at the end, unused bits zero;
// nullopt for anything else.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace gpupool
