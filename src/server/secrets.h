// Access-key secrets at rest: the server needs each plain secret to verify HMAC signatures, so it
// stores them sealed (AES-256-GCM) under a master key kept in a 0600 file, and generates new
// access key ids and secrets from the OpenSSL random generator. Join-token secrets, which the
// server only has to recognise, are kept as SHA-256 digests instead.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpupool::server {

// Seals and opens short secrets under one 256-bit master key. Sealed text is base64 of
// nonce (12 random bytes) ‖ AES-256-GCM ciphertext ‖ tag (16 bytes); Open() accepts only text
// whose tag verifies under this key, so a changed byte or another key is an error.
class SecretBox {
 public:
  static constexpr size_t kKeyBytes = 32;
  static constexpr size_t kNonceBytes = 12;
  static constexpr size_t kTagBytes = 16;

  // Reads the master key from `key_path`, or, when no file is there, creates it with 32 random
  // bytes, mode 0600 (os::WriteFileAtomically, never replacing a file). Refuses, naming
  // the path, a key file that group or others may access, that is not a regular file, or that does
  // not hold exactly 32 bytes: a key is never silently replaced.
  static Result<SecretBox> LoadOrCreate(const std::string& key_path);

  // A box over a key already in memory (tests, key rotation tools).
  static SecretBox FromKey(const std::array<uint8_t, kKeyBytes>& key);

  SecretBox(const SecretBox&) = default;
  SecretBox& operator=(const SecretBox&) = default;
  ~SecretBox();  // wipes the key

  // Seals `plain` with a fresh random nonce (random 96-bit nonces stay safe far beyond the number
  // of secrets one server ever seals). Aborts the process if the random generator or the cipher
  // fails: a repeated or predictable nonce would be worse than stopping.
  std::string Seal(std::string_view plain) const;

  // The plain text of `sealed`; an error when it is not well-formed base64 of the right length or
  // its tag does not verify (tampered, or sealed under another key).
  Result<std::string> Open(std::string_view sealed) const;

  // Lower-case hex of HMAC-SHA256 over `data` under a key derived from the master key for
  // `purpose` (HMAC of the purpose under the master key), so that a MAC made for one purpose is
  // never valid for another: credentials the server recognises without storing them (a task's
  // token), valid across restarts as long as master.key is the same.
  std::string Mac(std::string_view purpose, std::string_view data) const;

 private:
  explicit SecretBox(const std::array<uint8_t, kKeyBytes>& key) : key_(key) {}
  std::array<uint8_t, kKeyBytes> key_;
};

// Lower-case hex of `bytes` random bytes (2 × bytes characters). Aborts if the generator fails.
std::string RandomToken(size_t bytes);

// A new public access key id: "AK" and 16 upper-case base32 characters (RFC 4648 alphabet,
// A–Z and 2–7), 80 random bits.
std::string NewAccessKeyId();

// A new secret key: 40 base32 characters, 200 random bits.
std::string NewSecretKey();

// A new public join token id: "JT" and 16 upper-case base32 characters, 80 random bits.
std::string NewJoinTokenId();

// A new console session's cookie value or CSRF token: 32 random bytes (256 bits) as base64url
// without padding (43 characters of A-Z a-z 0-9 - _).
std::string NewSessionToken();

// Lower-case hex SHA-256 of `secret`: how the server keeps a secret it only has to recognise (a
// join token's), never to use. Such secrets carry 200 random bits, so a plain hash is enough.
std::string SecretDigest(std::string_view secret);

// Whether `secret` has `digest` (as SecretDigest makes it), compared in constant time.
bool MatchesDigest(std::string_view secret, std::string_view digest);

}  // namespace gpupool::server
