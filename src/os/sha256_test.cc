// Tests of sha256.h: FIPS 180-4 / NIST known answers, streaming in any split equal to one-shot,
// the digest read mid-stream without disturbing it, hashing a file's byte range, and the form of
// a digest, and an SSH key's fingerprint.
#include "os/sha256.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>

#include "core/base64.h"
#include "core/hex.h"
#include "core/unique_fd.h"
#include "os/files.h"

namespace gpupool::os {
namespace {

struct Vector {
  std::string message;
  const char* digest;
};

// FIPS 180-4 examples and NIST's SHA-256 "long message" vector.
const Vector kVectors[] = {
    {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    {std::string(1'000'000, 'a'),
     "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
};

TEST(Sha256Test, KnownAnswers) {
  for (const Vector& v : kVectors) {
    EXPECT_EQ(Sha256Hex(v.message), v.digest) << v.message.size() << " bytes";
  }
}

TEST(Sha256Test, StreamingInAnySplitEqualsOneShot) {
  for (const Vector& v : kVectors) {
    for (const size_t piece : {size_t{1}, size_t{3}, size_t{63}, size_t{64}, size_t{65536}}) {
      Sha256 h;
      for (size_t at = 0; at < v.message.size(); at += piece) {
        h.Update(std::string_view(v.message).substr(at, piece));
      }
      EXPECT_EQ(h.HexDigest(), v.digest) << v.message.size() << " bytes in pieces of " << piece;
    }
  }
}

TEST(Sha256Test, DigestMidStreamLeavesTheStreamGoing) {
  Sha256 h;
  h.Update("ab");
  EXPECT_EQ(h.HexDigest(), Sha256Hex("ab"));
  EXPECT_EQ(h.HexDigest(), Sha256Hex("ab"));  // reading it twice changes nothing
  h.Update("c");
  EXPECT_EQ(h.HexDigest(), kVectors[1].digest);
  Sha256 moved = std::move(h);
  moved.Update("d");
  EXPECT_EQ(moved.HexDigest(), Sha256Hex("abcd"));
}

class Sha256FileTest : public testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::TempDir() + "sha256_test." + std::to_string(::getpid());
    ASSERT_TRUE(WriteFileAtomically(path_, content_));
    fd_ = UniqueFd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd_.ok()) << path_;
  }
  void TearDown() override { ::unlink(path_.c_str()); }

  const std::string content_ = std::string(3 << 20, 'x') + "tail";  // crosses read blocks
  std::string path_;
  UniqueFd fd_;
};

TEST_F(Sha256FileTest, RangesAndWholeFile) {
  Sha256 h;
  ASSERT_EQ(h.UpdateFromFile(fd_.get(), 0, 0), 0);
  ASSERT_EQ(h.UpdateFromFile(fd_.get(), 5, (2 << 20) + 7), 0);
  EXPECT_EQ(h.HexDigest(), Sha256Hex(content_.substr(5, (2 << 20) + 7)));
  ASSERT_EQ(h.UpdateFromFile(fd_.get(), (2 << 20) + 12,
                             static_cast<int64_t>(content_.size()) - (2 << 20) - 12),
            0);
  EXPECT_EQ(h.HexDigest(), Sha256Hex(content_.substr(5)));
  const Result<std::string> whole = Sha256OfFile(fd_.get());
  ASSERT_TRUE(whole) << whole.error().message;
  EXPECT_EQ(*whole, Sha256Hex(content_));
  EXPECT_EQ(::lseek(fd_.get(), 0, SEEK_CUR), 0) << "pread must not move the offset";
}

TEST_F(Sha256FileTest, FileShorterThanTheRangeIsEio) {
  Sha256 h;
  EXPECT_EQ(h.UpdateFromFile(fd_.get(), 0, static_cast<int64_t>(content_.size()) + 1), EIO);
  EXPECT_EQ(h.UpdateFromFile(-1, 0, 1), EBADF);
  const Result<std::string> closed = Sha256OfFile(-1);
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().message, "cannot read the file: Bad file descriptor");
}

// RFC 4231's test cases 1, 2 and 6 (a key longer than the block is hashed first), and OpenSSL's
// own HMAC for keys of every length around the block size.
TEST(HmacSha256Test, MatchesRfc4231AndOpenSsl) {
  const auto hex = [](std::string_view bytes) { return HexEncode(bytes); };
  EXPECT_EQ(hex(HmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hex(HmacSha256(std::string(131, '\xaa'),
                           "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  for (size_t key_length = 0; key_length <= 130; ++key_length) {
    std::string key(key_length, '\0');
    for (size_t i = 0; i < key_length; ++i) key[i] = static_cast<char>(i * 37 + key_length);
    const std::string data = "message of key " + std::to_string(key_length);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    ASSERT_NE(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                   reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &length),
              nullptr);
    EXPECT_EQ(HmacSha256(key, data), std::string(reinterpret_cast<char*>(mac), length))
        << "key of " << key_length << " bytes";
  }
}

TEST(Sha256Test, AnSshKeysFingerprintIsOpenSshs) {
  // What ssh-keygen -lf prints for this ed25519 key.
  const std::optional<std::string> blob =
      Base64Decode("AAAAC3NzaC1lZDI1NTE5AAAAIO1FzrfO07qkSSTT6fTpOmTzTBmX7XUZITTGMy62m4lS");
  ASSERT_TRUE(blob);
  EXPECT_EQ(SshFingerprint(*blob), "SHA256:k8flRrTgclSVM4w8vzimHe+94OexcAdZ9KhIQt8NVjI");
}

TEST(Sha256Test, FormOfADigest) {
  EXPECT_TRUE(IsSha256Hex(kVectors[0].digest));
  EXPECT_FALSE(IsSha256Hex(std::string(kVectors[0].digest).substr(1)));
  EXPECT_FALSE(IsSha256Hex(std::string(kVectors[0].digest) + "0"));
  EXPECT_FALSE(IsSha256Hex("E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"));
  EXPECT_FALSE(IsSha256Hex(""));
}

}  // namespace
}  // namespace gpupool::os
