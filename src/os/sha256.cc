// SHA-256 through OpenSSL's EVP (see sha256.h).
#include "os/sha256.h"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/base64.h"
#include "core/hex.h"

namespace gpupool::os {
namespace {

constexpr int64_t kReadBlock = 1 << 20;

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "gpupool: OpenSSL SHA-256 failed: %s\n", what);
  std::abort();
}

}  // namespace

void Sha256::Free::operator()(evp_md_ctx_st* ctx) const { EVP_MD_CTX_free(ctx); }

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) Die("init");
}
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;
Sha256::~Sha256() = default;

void Sha256::Update(std::string_view data) {
  if (EVP_DigestUpdate(ctx_.get(), data.data(), data.size()) != 1) Die("update");
}

int Sha256::UpdateFromFile(int fd, int64_t offset, int64_t length) {
  std::string buffer(static_cast<size_t>(std::min(length, kReadBlock)), '\0');
  const int64_t end = offset + length;
  while (offset < end) {
    const auto want = static_cast<size_t>(std::min(end - offset, kReadBlock));
    const ssize_t n = ::pread(fd, buffer.data(), want, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;  // the file is shorter than it was said to be
    Update(std::string_view(buffer.data(), static_cast<size_t>(n)));
    offset += n;
  }
  return 0;
}

std::string Sha256::Digest() const {
  const std::unique_ptr<evp_md_ctx_st, Free> copy(EVP_MD_CTX_new());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (copy == nullptr || EVP_MD_CTX_copy_ex(copy.get(), ctx_.get()) != 1 ||
      EVP_DigestFinal_ex(copy.get(), digest, &length) != 1) {
    Die("final");
  }
  return std::string(reinterpret_cast<const char*>(digest), length);
}

std::string Sha256::HexDigest() const { return HexEncode(Digest()); }

std::string Sha256Hex(std::string_view data) {
  Sha256 h;
  h.Update(data);
  return h.HexDigest();
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  constexpr size_t kBlock = 64;  // SHA-256's block size
  std::string block(kBlock, '\0');
  if (key.size() > kBlock) {
    Sha256 hashed;
    hashed.Update(key);
    const std::string digest = hashed.Digest();
    std::copy(digest.begin(), digest.end(), block.begin());
  } else {
    std::copy(key.begin(), key.end(), block.begin());
  }
  std::string inner_pad = block;
  std::string outer_pad = block;
  for (size_t i = 0; i < kBlock; ++i) {
    inner_pad[i] = static_cast<char>(inner_pad[i] ^ 0x36);
    outer_pad[i] = static_cast<char>(outer_pad[i] ^ 0x5c);
  }
  Sha256 inner;
  inner.Update(inner_pad);
  inner.Update(data);
  Sha256 outer;
  outer.Update(outer_pad);
  outer.Update(inner.Digest());
  return outer.Digest();
}

Result<std::string> Sha256OfFile(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return MakeError(ErrorCode::kInternal,
                     std::string("cannot read the file: ") + std::strerror(errno));
  }
  Sha256 h;
  if (const int err = h.UpdateFromFile(fd, 0, st.st_size); err != 0) {
    return MakeError(ErrorCode::kInternal,
                     std::string("cannot read the file: ") + std::strerror(err));
  }
  return h.HexDigest();
}

bool IsSha256Hex(std::string_view text) { return text.size() == 64 && IsLowerHex(text); }

std::string SshFingerprint(std::string_view blob) {
  Sha256 digest;
  digest.Update(blob);
  std::string text = Base64Encode(digest.Digest());
  while (!text.empty() && text.back() == '=') text.pop_back();
  return "SHA256:" + text;
}

}  // namespace gpupool::os
