// SecretBox (AES-256-GCM through OpenSSL EVP, master key file handling) and random tokens.
#include "server/secrets.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/base64.h"
#include "core/hex.h"
#include "core/unique_fd.h"
#include "os/files.h"
#include "os/sha256.h"

namespace gpupool::server {
namespace {

using Key = std::array<uint8_t, SecretBox::kKeyBytes>;

// A failure of the random generator or of the cipher itself: there is no safe way on (see Seal).
[[noreturn]] void Die(const char* what) {
  char reason[256] = "";
  ERR_error_string_n(ERR_get_error(), reason, sizeof reason);
  std::fprintf(stderr, "gpupool: fatal: %s failed: %s\n", what, reason);
  std::abort();
}

void RandomBytes(uint8_t* out, size_t n) {
  if (n > INT_MAX || RAND_bytes(out, static_cast<int>(n)) != 1) Die("RAND_bytes");
}

std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

// Closes a file descriptor on every way out.
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

CipherCtx NewCipherCtx() {
  CipherCtx ctx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
  if (ctx == nullptr) Die("EVP_CIPHER_CTX_new");
  return ctx;
}

Result<SecretBox> ReadKey(const UniqueFd& fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return MakeError(ErrorCode::kInternal, Errno("cannot stat key file", path));
  }
  if (!S_ISREG(st.st_mode)) {
    return MakeError(ErrorCode::kFailedPrecondition, "key file " + path + " is not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return MakeError(ErrorCode::kFailedPrecondition,
                     "key file " + path + " has mode " + mode +
                         ": group and others must have no access (chmod 600 " + path + ")");
  }
  if (st.st_size != static_cast<off_t>(SecretBox::kKeyBytes)) {
    return MakeError(ErrorCode::kFailedPrecondition, "key file " + path + " holds " +
                                                         std::to_string(st.st_size) +
                                                         " bytes; a master key is exactly 32");
  }
  Key key{};
  size_t got = 0;
  while (got < key.size()) {
    const ssize_t n = ::read(fd.get(), key.data() + got, key.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return MakeError(ErrorCode::kInternal, Errno("cannot read key file", path));
    if (n == 0) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "key file " + path + " shrank while it was read");
    }
    got += static_cast<size_t>(n);
  }
  SecretBox box = SecretBox::FromKey(key);
  OPENSSL_cleanse(key.data(), key.size());
  return box;
}

// Writes a new key file; nullopt when a file appeared at `path` meanwhile (then it is read).
// Atomic and durable: a half-written key is never found at the next start, and a crash cannot
// lose the key after secrets were sealed under it.
std::optional<Result<SecretBox>> CreateKey(const std::string& path) {
  Key key{};
  RandomBytes(key.data(), key.size());
  const Status written = os::WriteFileAtomically(
      path, std::string_view(reinterpret_cast<const char*>(key.data()), key.size()),
      {.mode = 0600, .replace = false});
  SecretBox box = SecretBox::FromKey(key);
  OPENSSL_cleanse(key.data(), key.size());
  if (!written) {
    if (written.error().code == ErrorCode::kAlreadyExists) return std::nullopt;
    return tl::unexpected(written.error());
  }
  return box;
}

constexpr char kBase32[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

// RFC 4648 base32 without padding: ceil(8n / 5) characters.
std::string Base32(const uint8_t* data, size_t n) {
  std::string out;
  uint32_t bits = 0;
  int nbits = 0;
  for (size_t i = 0; i < n; ++i) {
    bits = (bits << 8) | data[i];
    nbits += 8;
    while (nbits >= 5) {
      nbits -= 5;
      out += kBase32[(bits >> nbits) & 31];
    }
  }
  if (nbits > 0) out += kBase32[(bits << (5 - nbits)) & 31];
  return out;
}

std::string RandomBase32(size_t bytes) {
  std::string raw(bytes, '\0');
  auto* data = reinterpret_cast<uint8_t*>(raw.data());
  RandomBytes(data, raw.size());
  std::string out = Base32(data, raw.size());
  OPENSSL_cleanse(raw.data(), raw.size());
  return out;
}

}  // namespace

Result<SecretBox> SecretBox::LoadOrCreate(const std::string& key_path) {
  if (key_path.empty()) return InvalidArgument("key_path must not be empty");
  // Two rounds: if another process creates the file between our open and our O_EXCL create,
  // the second round reads the key it wrote.
  for (int round = 0; round < 2; ++round) {
    UniqueFd fd(::open(key_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() >= 0) return ReadKey(fd, key_path);
    if (errno != ENOENT) {
      return MakeError(ErrorCode::kInternal, Errno("cannot open key file", key_path));
    }
    if (std::optional<Result<SecretBox>> created = CreateKey(key_path)) return *std::move(created);
  }
  return MakeError(ErrorCode::kFailedPrecondition,
                   "key file " + key_path + " exists but cannot be opened (a dangling symlink?)");
}

SecretBox SecretBox::FromKey(const std::array<uint8_t, kKeyBytes>& key) { return SecretBox(key); }

SecretBox::~SecretBox() { OPENSSL_cleanse(key_.data(), key_.size()); }

std::string SecretBox::Seal(std::string_view plain) const {
  if (plain.size() > INT_MAX - kNonceBytes - kTagBytes) Die("Seal (plain text over 2 GiB)");
  std::string blob(kNonceBytes + plain.size() + kTagBytes, '\0');
  auto* nonce = reinterpret_cast<uint8_t*>(blob.data());
  uint8_t* cipher = nonce + kNonceBytes;
  uint8_t* tag = cipher + plain.size();
  RandomBytes(nonce, kNonceBytes);

  CipherCtx ctx = NewCipherCtx();
  int len = 0;
  if (EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kNonceBytes, nullptr) != 1 ||
      EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr, key_.data(), nonce) != 1) {
    Die("AES-256-GCM init");
  }
  if (!plain.empty() &&
      EVP_EncryptUpdate(ctx.get(), cipher, &len, reinterpret_cast<const uint8_t*>(plain.data()),
                        static_cast<int>(plain.size())) != 1) {
    Die("AES-256-GCM encrypt");
  }
  int final_len = 0;  // GCM is a stream mode: nothing is held back for Final
  if (EVP_EncryptFinal_ex(ctx.get(), cipher + len, &final_len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, tag) != 1) {
    Die("AES-256-GCM tag");
  }
  return Base64Encode(blob);
}

Result<std::string> SecretBox::Open(std::string_view sealed) const {
  std::optional<std::string> blob = Base64Decode(sealed);
  if (!blob) return InvalidArgument("sealed secret is not valid base64");
  if (blob->size() < kNonceBytes + kTagBytes || blob->size() > INT_MAX) {
    return InvalidArgument("sealed secret has " + std::to_string(blob->size()) +
                           " bytes; at least 28 (nonce and tag) are needed");
  }
  const auto* nonce = reinterpret_cast<const uint8_t*>(blob->data());
  const uint8_t* cipher = nonce + kNonceBytes;
  const size_t cipher_len = blob->size() - kNonceBytes - kTagBytes;
  // EVP_CTRL_GCM_SET_TAG takes a non-const pointer but only reads from it.
  auto* tag = reinterpret_cast<uint8_t*>(blob->data()) + kNonceBytes + cipher_len;

  std::string plain(cipher_len, '\0');
  CipherCtx ctx = NewCipherCtx();
  int len = 0;
  if (EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kNonceBytes, nullptr) != 1 ||
      EVP_DecryptInit_ex(ctx.get(), nullptr, nullptr, key_.data(), nonce) != 1) {
    Die("AES-256-GCM init");
  }
  if (cipher_len > 0 && EVP_DecryptUpdate(ctx.get(), reinterpret_cast<uint8_t*>(plain.data()), &len,
                                          cipher, static_cast<int>(cipher_len)) != 1) {
    Die("AES-256-GCM decrypt");
  }
  int final_len = 0;
  if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag) != 1) {
    Die("AES-256-GCM set tag");
  }
  if (EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<uint8_t*>(plain.data()) + len, &final_len) !=
      1) {
    // Unauthenticated plain text must not leak out, not even in memory that is freed later.
    OPENSSL_cleanse(plain.data(), plain.size());
    ERR_clear_error();
    return MakeError(ErrorCode::kFailedPrecondition,
                     "sealed secret does not verify: altered, or sealed under another master key");
  }
  return plain;
}

std::string SecretBox::Mac(std::string_view purpose, std::string_view data) const {
  unsigned char derived[EVP_MAX_MD_SIZE];
  unsigned int derived_len = 0;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  if (HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
           reinterpret_cast<const unsigned char*>(purpose.data()), purpose.size(), derived,
           &derived_len) == nullptr ||
      HMAC(EVP_sha256(), derived, static_cast<int>(derived_len),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac,
           &mac_len) == nullptr) {
    std::fprintf(stderr, "gpupool: fatal: HMAC-SHA256 failed\n");
    std::abort();
  }
  OPENSSL_cleanse(derived, sizeof derived);
  return HexEncode(std::string_view(reinterpret_cast<const char*>(mac), mac_len));
}

std::string RandomToken(size_t bytes) {
  std::string raw(bytes, '\0');
  auto* data = reinterpret_cast<uint8_t*>(raw.data());
  RandomBytes(data, raw.size());
  std::string out = HexEncode(raw);
  OPENSSL_cleanse(raw.data(), raw.size());
  return out;
}

// 10 bytes = 80 bits = 16 base32 characters exactly.
std::string NewAccessKeyId() { return "AK" + RandomBase32(10); }

// 25 bytes = 200 bits = 40 base32 characters exactly.
std::string NewSecretKey() { return RandomBase32(25); }

std::string NewJoinTokenId() { return "JT" + RandomBase32(10); }

std::string NewSessionToken() {
  std::string raw(32, '\0');
  RandomBytes(reinterpret_cast<uint8_t*>(raw.data()), raw.size());
  std::string out = Base64Encode(raw);
  OPENSSL_cleanse(raw.data(), raw.size());
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return out;
}

std::string SecretDigest(std::string_view secret) { return os::Sha256Hex(secret); }

bool MatchesDigest(std::string_view secret, std::string_view digest) {
  const std::string actual = SecretDigest(secret);
  return actual.size() == digest.size() &&
         CRYPTO_memcmp(actual.data(), digest.data(), digest.size()) == 0;
}

}  // namespace gpupool::server
