// Implementation of ssh_key.h.
#include "core/ssh_key.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "core/base64.h"

namespace gpupool {
namespace {

// The key types the node's SSH server (dropbear 2022.83, OpenSSH) accepts for public-key logins.
constexpr std::array<std::string_view, 7> kTypes = {"ssh-ed25519",
                                                    "ecdsa-sha2-nistp256",
                                                    "ecdsa-sha2-nistp384",
                                                    "ecdsa-sha2-nistp521",
                                                    "ssh-rsa",
                                                    "sk-ssh-ed25519@openssh.com",
                                                    "sk-ecdsa-sha2-nistp256@openssh.com"};

constexpr size_t kMaxLine = 16 * 1024;  // an RSA-16384 key's line is ~2.8 KiB

std::string_view Trim(std::string_view s) {
  while (!s.empty() &&
         (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// The next space- or tab-separated word of `s`, taken off it.
std::string_view NextWord(std::string_view& s) {
  s = Trim(s);
  size_t end = 0;
  while (end < s.size() && s[end] != ' ' && s[end] != '\t') ++end;
  std::string_view word = s.substr(0, end);
  s.remove_prefix(end);
  return word;
}

}  // namespace

std::string SshPublicKey::Line() const { return type + " " + Base64Encode(blob); }

Result<SshPublicKey> ParseSshPublicKey(std::string_view text) {
  text = Trim(text);
  if (text.empty()) {
    return InvalidArgument("public_key is empty: give a line of a public key file (~/.ssh/*.pub)");
  }
  if (text.size() > kMaxLine) {
    return InvalidArgument("public_key is " + std::to_string(text.size()) +
                           " bytes; a public key line is at most " + std::to_string(kMaxLine));
  }
  if (text.find("PRIVATE KEY") != std::string_view::npos) {
    return InvalidArgument(
        "public_key is a private key: give the public one (the .pub file next to it), and keep "
        "the private key to yourself");
  }
  if (text.find('\n') != std::string_view::npos) {
    return InvalidArgument("public_key must be one line (one key per call)");
  }
  std::string_view rest = text;
  const std::string_view type = NextWord(rest);
  if (std::find(kTypes.begin(), kTypes.end(), type) == kTypes.end()) {
    std::string known;
    for (std::string_view t : kTypes) known += (known.empty() ? "" : ", ") + std::string(t);
    return InvalidArgument(
        "public_key must start with its key type (one of " + known + "), got '" +
        std::string(type.substr(0, 64)) + "'" +
        (type == "ssh-dss" ? "; DSA keys are refused by current SSH servers: make an ed25519 one "
                             "(ssh-keygen -t ed25519)"
                           : ""));
  }
  const std::string_view encoded = NextWord(rest);
  std::optional<std::string> blob = Base64Decode(encoded);
  if (encoded.empty() || !blob) {
    return InvalidArgument("public_key: the key after '" + std::string(type) +
                           "' is not base64; copy the whole line of the .pub file");
  }
  // The key's own bytes start with its type: uint32 length, then the name.
  const auto byte = [&](size_t i) { return static_cast<uint8_t>((*blob)[i]); };
  const uint32_t length = blob->size() < 4 ? 0
                                           : (uint32_t(byte(0)) << 24) | (uint32_t(byte(1)) << 16) |
                                                 (uint32_t(byte(2)) << 8) | uint32_t(byte(3));
  if (blob->size() < 4 || length > blob->size() - 4 ||
      std::string_view(*blob).substr(4, length) != type || blob->size() == 4 + length) {
    return InvalidArgument("public_key: the key's bytes are not a " + std::string(type) +
                           " key; copy the whole line of the .pub file");
  }
  return SshPublicKey{std::string(type), std::move(*blob), std::string(Trim(rest))};
}

namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

}  // namespace

bool IsSshKeyName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == '.' || name.front() == '-') return false;
  return std::all_of(name.begin(), name.end(), IsNameChar);
}

std::string SshKeyNameOf(std::string_view comment) {
  std::string name;
  for (char c : comment) {
    if (name.empty() && (c == '.' || c == '-' || !IsNameChar(c))) continue;
    name += IsNameChar(c) ? c : '-';
  }
  if (name.size() > 64) name.resize(64);
  return name;
}

}  // namespace gpupool
