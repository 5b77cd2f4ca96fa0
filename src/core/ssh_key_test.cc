// ParseSshPublicKey: the lines of real .pub files are taken and reduced to TYPE BASE64; what a
// user gets wrong (a private key, a DSA key, a cut line, options in front) is refused saying so.
#include "core/ssh_key.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

// Made with ssh-keygen (public halves only).
constexpr const char* kEd25519 =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO1FzrfO07qkSSTT6fTpOmTzTBmX7XUZITTGMy62m4lS";
constexpr const char* kEcdsa =
    "ecdsa-sha2-nistp256 "
    "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBLLFdv6LuD50k222hCc2XU84LPms8kn465DVWhNlc"
    "Tpv+sD3Znn9WM5qFwcPhBxM2qgn5sG2VqxnufmWKsHf73w=";

std::string ErrorOf(std::string_view text) {
  Result<SshPublicKey> key = ParseSshPublicKey(text);
  EXPECT_FALSE(key) << text;
  return key ? "" : key.error().message;
}

TEST(SshKeyTest, TakesAPubFilesLineAndDropsItsComment) {
  Result<SshPublicKey> key = ParseSshPublicKey(std::string(kEd25519) + " alice@laptop\n");
  ASSERT_TRUE(key) << key.error().message;
  EXPECT_EQ(key->type, "ssh-ed25519");
  EXPECT_EQ(key->comment, "alice@laptop");
  EXPECT_EQ(key->Line(), kEd25519);
  EXPECT_EQ(key->blob.size(), 4u + 11 + 4 + 32);

  key = ParseSshPublicKey(std::string("  ") + kEcdsa + " \r\n");
  ASSERT_TRUE(key) << key.error().message;
  EXPECT_EQ(key->Line(), kEcdsa);
  EXPECT_EQ(key->comment, "");
}

TEST(SshKeyTest, RefusesWhatIsNoPublicKeySayingWhy) {
  EXPECT_NE(ErrorOf("").find("is empty"), std::string::npos);
  EXPECT_NE(ErrorOf("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n")
                .find("is a private key: give the public one"),
            std::string::npos);
  EXPECT_NE(ErrorOf("ssh-dss AAAAB3NzaC1kc3MAAACBAP8=").find("DSA keys are refused"),
            std::string::npos);
  EXPECT_NE(ErrorOf(std::string("no-pty ") + kEd25519).find("must start with its key type"),
            std::string::npos);
  EXPECT_NE(ErrorOf("ssh-ed25519").find("is not base64"), std::string::npos);
  EXPECT_NE(ErrorOf("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO1Fzrf").find("is not base64"),
            std::string::npos);
  // An ECDSA key's bytes on an ed25519 line.
  const std::string swapped = "ssh-ed25519 " + std::string(kEcdsa).substr(20);
  EXPECT_NE(ErrorOf(swapped).find("are not a ssh-ed25519 key"), std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kEd25519) + "\n" + kEcdsa).find("one line"), std::string::npos);
}

TEST(SshKeyTest, NamesAreShortWordsThatSitInAUrl) {
  EXPECT_TRUE(IsSshKeyName("alice-laptop"));
  EXPECT_TRUE(IsSshKeyName("work-2026_v1.key"));
  EXPECT_FALSE(IsSshKeyName("alice@laptop"));
  EXPECT_EQ(SshKeyNameOf("alice@laptop"), "alice-laptop");
  EXPECT_EQ(SshKeyNameOf("..-my key+yubi"), "my-key-yubi");
  EXPECT_EQ(SshKeyNameOf("@@@"), "");
  EXPECT_EQ(SshKeyNameOf(std::string(70, 'k')), std::string(64, 'k'));
  EXPECT_FALSE(IsSshKeyName(""));
  EXPECT_FALSE(IsSshKeyName("-rf"));
  EXPECT_FALSE(IsSshKeyName(".hidden"));
  EXPECT_FALSE(IsSshKeyName("a/b"));
  EXPECT_FALSE(IsSshKeyName("with space"));
  EXPECT_FALSE(IsSshKeyName(std::string(65, 'k')));
}

}  // namespace
}  // namespace gpupool
