// Tests for server/secrets: seal/open round trips, tamper and wrong-key detection, the master key
// file (created 0600, reused, refused when too open or the wrong size), token formats, and the
// digests join-token secrets are kept as.
#include "server/secrets.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace gpupool::server {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class SecretsTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(testing::TempDir()) / "secrets_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes `bytes` bytes to `name` with `mode`.
  std::string WriteKeyFile(const std::string& name, size_t bytes, fs::perms mode) const {
    const std::string path = Path(name);
    std::ofstream(path, std::ios::binary) << std::string(bytes, 'k');
    fs::permissions(path, mode);
    return path;
  }

  SecretBox Box(const std::string& name = "master.key") const {
    Result<SecretBox> box = SecretBox::LoadOrCreate(Path(name));
    if (!box) {
      ADD_FAILURE() << box.error().message;
      return SecretBox::FromKey({});
    }
    return *box;
  }

  fs::path dir_;
};

// Decodes standard base64 for the tests that look inside a sealed text.
std::string Unbase64(const std::string& text) {
  static const std::string alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t bits = 0;
  int nbits = 0;
  for (char c : text) {
    if (c == '=') break;
    bits = (bits << 6) | static_cast<uint32_t>(alphabet.find(c));
    nbits += 6;
    if (nbits >= 8) {
      nbits -= 8;
      out += static_cast<char>((bits >> nbits) & 0xff);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Sealing.

TEST_F(SecretsTest, RoundTrips) {
  const SecretBox box = Box();
  for (const std::string& plain : {std::string(), std::string("x"), NewSecretKey(),
                                   std::string(1000, '\xff'), std::string("with\0nul", 8)}) {
    const std::string sealed = box.Seal(plain);
    // 12-byte nonce + ciphertext + 16-byte tag, in padded base64.
    EXPECT_EQ(sealed.size(), (12 + plain.size() + 16 + 2) / 3 * 4);
    const Result<std::string> opened = box.Open(sealed);
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    EXPECT_EQ(*opened, plain);
  }
}

TEST_F(SecretsTest, KeyFileIsReusedAcrossLoads) {
  const std::string sealed = Box().Seal("the secret");
  const Result<std::string> opened = Box().Open(sealed);  // loads the file the first call made
  ASSERT_TRUE(opened.has_value()) << opened.error().message;
  EXPECT_EQ(*opened, "the secret");
}

TEST_F(SecretsTest, EverySealHasItsOwnNonce) {
  const SecretBox box = Box();
  std::set<std::string> sealed;
  std::set<std::string> nonces;
  for (int i = 0; i < 100; ++i) {
    const std::string s = box.Seal("same plain text");
    sealed.insert(s);
    nonces.insert(Unbase64(s).substr(0, 12));
  }
  EXPECT_EQ(sealed.size(), 100u);
  EXPECT_EQ(nonces.size(), 100u);
}

TEST_F(SecretsTest, AnyChangedByteIsDetected) {
  const SecretBox box = Box();
  const std::string sealed = box.Seal("AKSECRETSECRETSECRET");
  // Replace each base64 character (all but the padding) in turn: nonce, ciphertext and tag are
  // all covered.
  const size_t data_chars =
      sealed.find('=') == std::string::npos ? sealed.size() : sealed.find('=');
  for (size_t i = 0; i < data_chars; ++i) {
    std::string bad = sealed;
    bad[i] = bad[i] == 'A' ? 'B' : 'A';
    const Result<std::string> opened = box.Open(bad);
    ASSERT_FALSE(opened.has_value()) << "changed character " << i << " went unnoticed";
  }
}

TEST_F(SecretsTest, MalformedTextIsRefused) {
  const SecretBox box = Box();
  const std::string sealed = box.Seal("secret");
  struct Row {
    const char* name;
    std::string text;
    const char* error;
  };
  for (const Row& row : std::vector<Row>{
           {"empty", "", "bytes; at least 28"},
           {"truncated", sealed.substr(0, sealed.size() - 4), "does not verify"},
           {"extended", sealed + "AAAA", "not valid base64"},  // padding in the middle
           {"too_short", "AAAAAAAA", "has 6 bytes"},
           {"not_base64", std::string(sealed.size(), '*'), "not valid base64"},
           {"length_not_quartets", sealed.substr(1), "not valid base64"},
       }) {
    const Result<std::string> opened = box.Open(row.text);
    ASSERT_FALSE(opened.has_value()) << row.name;
    EXPECT_NE(opened.error().message.find(row.error), std::string::npos)
        << row.name << ": " << opened.error().message;
  }
}

TEST_F(SecretsTest, AnotherKeyCannotOpen) {
  const std::string sealed = Box("a.key").Seal("secret");
  const Result<std::string> opened = Box("b.key").Open(sealed);
  ASSERT_FALSE(opened.has_value());
  EXPECT_EQ(opened.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(opened.error().message.find("does not verify"), std::string::npos);
}

TEST(SecretBox, FromKeyMatchesTheKeyFileFormat) {
  std::array<uint8_t, SecretBox::kKeyBytes> key{};
  key[0] = 1;
  const SecretBox a = SecretBox::FromKey(key);
  const SecretBox b = SecretBox::FromKey(key);
  const Result<std::string> opened = b.Open(a.Seal("shared"));
  ASSERT_TRUE(opened.has_value()) << opened.error().message;
  EXPECT_EQ(*opened, "shared");
}

// ---------------------------------------------------------------------------------------------
// The master key file.

TEST_F(SecretsTest, CreatesA32ByteKeyFileWithMode0600) {
  const mode_t old_umask = ::umask(0);  // a permissive umask must not widen the file's mode
  Box();
  ::umask(old_umask);
  struct stat st {};
  ASSERT_EQ(::stat(Path("master.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_size, 32);
}

TEST_F(SecretsTest, RefusesAKeyFileOthersCanRead) {
  const std::string path = WriteKeyFile("open.key", 32, fs::perms(0644));
  const Result<SecretBox> box = SecretBox::LoadOrCreate(path);
  ASSERT_FALSE(box.has_value());
  EXPECT_EQ(box.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(box.error().message.find(path), std::string::npos) << box.error().message;
  EXPECT_NE(box.error().message.find("mode 0644"), std::string::npos) << box.error().message;
}

TEST_F(SecretsTest, RefusesAKeyFileTheGroupCanRead) {
  const std::string path = WriteKeyFile("group.key", 32, fs::perms(0640));
  const Result<SecretBox> box = SecretBox::LoadOrCreate(path);
  ASSERT_FALSE(box.has_value());
  EXPECT_NE(box.error().message.find("mode 0640"), std::string::npos) << box.error().message;
}

TEST_F(SecretsTest, RefusesAKeyFileOfTheWrongSize) {
  for (size_t bytes : {0, 16, 31, 33, 64}) {
    const std::string path =
        WriteKeyFile("size" + std::to_string(bytes) + ".key", bytes, fs::perms(0600));
    const Result<SecretBox> box = SecretBox::LoadOrCreate(path);
    ASSERT_FALSE(box.has_value()) << bytes << " bytes";
    EXPECT_NE(box.error().message.find(path), std::string::npos) << box.error().message;
    EXPECT_NE(box.error().message.find("holds " + std::to_string(bytes) + " bytes"),
              std::string::npos)
        << box.error().message;
    EXPECT_EQ(fs::file_size(path), bytes) << "the key file must be left as it was";
  }
}

TEST_F(SecretsTest, RefusesADirectory) {
  fs::create_directory(Path("dir.key"));
  fs::permissions(Path("dir.key"), fs::perms(0700));
  const Result<SecretBox> box = SecretBox::LoadOrCreate(Path("dir.key"));
  ASSERT_FALSE(box.has_value());
  EXPECT_NE(box.error().message.find("not a regular file"), std::string::npos)
      << box.error().message;
}

TEST_F(SecretsTest, MissingDirectoryIsAnErrorNamingThePath) {
  const std::string path = Path("no/such/dir/master.key");
  const Result<SecretBox> box = SecretBox::LoadOrCreate(path);
  ASSERT_FALSE(box.has_value());
  EXPECT_NE(box.error().message.find(path), std::string::npos) << box.error().message;
}

TEST_F(SecretsTest, ReadsAnExistingKeyFile) {
  // 32 bytes of 'k', as an operator might provision it.
  const std::string path = WriteKeyFile("given.key", 32, fs::perms(0600));
  std::array<uint8_t, SecretBox::kKeyBytes> key;
  key.fill('k');
  const Result<SecretBox> box = SecretBox::LoadOrCreate(path);
  ASSERT_TRUE(box.has_value()) << box.error().message;
  const Result<std::string> opened = box->Open(SecretBox::FromKey(key).Seal("provisioned"));
  ASSERT_TRUE(opened.has_value()) << opened.error().message;
  EXPECT_EQ(*opened, "provisioned");
}

// ---------------------------------------------------------------------------------------------
// Tokens.

bool AllOf(const std::string& s, const std::string& alphabet) {
  return s.find_first_not_of(alphabet) == std::string::npos;
}

const std::string kBase32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

TEST(Tokens, Formats) {
  const std::string token = RandomToken(16);
  EXPECT_EQ(token.size(), 32u);
  EXPECT_TRUE(AllOf(token, "0123456789abcdef")) << token;
  EXPECT_EQ(RandomToken(0), "");

  const std::string id = NewAccessKeyId();
  ASSERT_EQ(id.size(), 18u) << id;
  EXPECT_EQ(id.substr(0, 2), "AK");
  EXPECT_TRUE(AllOf(id.substr(2), kBase32)) << id;

  const std::string secret = NewSecretKey();
  EXPECT_EQ(secret.size(), 40u) << secret;
  EXPECT_TRUE(AllOf(secret, kBase32)) << secret;
}

TEST(Tokens, AreDistinct) {
  std::set<std::string> ids;
  std::set<std::string> secrets;
  std::set<std::string> tokens;
  for (int i = 0; i < 1000; ++i) {
    ids.insert(NewAccessKeyId());
    secrets.insert(NewSecretKey());
    tokens.insert(RandomToken(8));
  }
  EXPECT_EQ(ids.size(), 1000u);
  EXPECT_EQ(secrets.size(), 1000u);
  EXPECT_EQ(tokens.size(), 1000u);
}

TEST(Tokens, UseTheWholeBase32Alphabet) {
  // 1000 ids x 16 characters: every one of the 32 characters shows up (each is missed with
  // probability (31/32)^16000, about 1e-220).
  std::string seen;
  for (int i = 0; i < 1000; ++i) seen += NewAccessKeyId().substr(2);
  for (char c : kBase32) EXPECT_NE(seen.find(c), std::string::npos) << c;
}

TEST(Tokens, JoinTokenIds) {
  const std::string id = NewJoinTokenId();
  ASSERT_EQ(id.size(), 18u) << id;
  EXPECT_EQ(id.substr(0, 2), "JT");
  EXPECT_TRUE(AllOf(id.substr(2), kBase32)) << id;
  EXPECT_NE(NewJoinTokenId(), id);
}

TEST(Digests, AreSha256AndMatchOnlyTheirSecret) {
  // The SHA-256 test vector of FIPS 180-2 ("abc"), and of the empty string.
  EXPECT_EQ(SecretDigest("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(SecretDigest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string secret = NewSecretKey();
  const std::string digest = SecretDigest(secret);
  EXPECT_TRUE(MatchesDigest(secret, digest));
  EXPECT_FALSE(MatchesDigest(secret + "x", digest));
  EXPECT_FALSE(MatchesDigest(secret, digest.substr(1)));
  EXPECT_FALSE(MatchesDigest(secret, ""));
  std::string flipped = digest;
  flipped[5] = flipped[5] == '0' ? '1' : '0';
  EXPECT_FALSE(MatchesDigest(secret, flipped));
}

}  // namespace
}  // namespace gpupool::server
