// A user's SSH public key as it is registered (`gpupool ssh-key add`, docs/api.md "SSH"): one
// line of an OpenSSH public key file — TYPE BASE64 [COMMENT] — checked and reduced to
// "TYPE BASE64", the form the agent writes into a task's ~/.ssh/authorized_keys.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpupool {

// The most keys one user may register.
inline constexpr size_t kMaxSshKeysPerUser = 32;

struct SshPublicKey {
  std::string type;     // "ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa", …
  std::string blob;     // the key's wire bytes (decoded base64)
  std::string comment;  // what followed the key, often user@host; may be empty

  // "TYPE BASE64": the key without its comment.
  std::string Line() const;
};

// Parses one public key line. kInvalidArgument says what is wrong in words a user acts on: a
// private key pasted by mistake, a key type an SSH server here does not take (ssh-dss), base64
// that does not decode, a key whose bytes name another type than its line.
Result<SshPublicKey> ParseSshPublicKey(std::string_view text);

// Whether `name` may name a key: 1..64 of [A-Za-z0-9._-], not starting with '.' or '-' (it
// sits in a URL's path, which takes identifiers).
bool IsSshKeyName(std::string_view name);

// The name a key's comment makes ("alice@laptop" → "alice-laptop"): every other character a
// '-', at most 64, none of '.' and '-' first; empty when nothing is left.
std::string SshKeyNameOf(std::string_view comment);

}  // namespace gpupool
