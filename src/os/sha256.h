// SHA-256 (FIPS 180-4) through OpenSSL's EVP, as lower-case hex: the one implementation for
// request signing (with HMAC over it), stored secrets' digests, and task files (hashed while they
// stream, on either side of a transfer).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX

namespace gpupool::os {

// A digest computed as the bytes arrive. Aborts the process if OpenSSL cannot set it up (out of
// memory), as any allocation failure would.
class Sha256 {
 public:
  Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  ~Sha256();

  void Update(std::string_view data);
  // Adds `length` bytes of `fd` from `offset` (pread: the descriptor's offset is not moved).
  // Returns 0 or the errno of the failure; EIO when the file ends before offset + length.
  int UpdateFromFile(int fd, int64_t offset, int64_t length);
  // The digest of everything added so far; more may be added afterwards.
  std::string HexDigest() const;
  // The same, as its 32 bytes.
  std::string Digest() const;

 private:
  struct Free {
    void operator()(evp_md_ctx_st* ctx) const;
  };
  std::unique_ptr<evp_md_ctx_st, Free> ctx_;
};

// The digest of `data` at once.
std::string Sha256Hex(std::string_view data);

// HMAC-SHA256 (RFC 2104) of `data` under `key`, as its 32 bytes. Built on Sha256 rather than
// OpenSSL's MAC interface, whose first use in a process loads all of OpenSSL's error strings —
// a fifth of the instructions of a CLI invocation (docs/benchmarks.md "CLI cost").
std::string HmacSha256(std::string_view key, std::string_view data);

// The digest of the whole file behind `fd` (its size at the start, read with pread); the error
// names the errno.
Result<std::string> Sha256OfFile(int fd);

// Whether `text` has the form of a digest: 64 lower-case hex digits.
bool IsSha256Hex(std::string_view text);

// An SSH key's fingerprint as OpenSSH prints it (ssh-keygen -l): "SHA256:" and the unpadded
// base64 of the SHA-256 of the key's bytes (`blob`: its base64 text decoded).
std::string SshFingerprint(std::string_view blob);

}  // namespace gpupool::os
