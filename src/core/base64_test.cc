// Tests of base64.h: RFC 4648 test vectors, binary round trips, and strict refusal of malformed
// text.
#include "core/base64.h"

#include <gtest/gtest.h>

#include <string>

namespace gpupool {
namespace {

TEST(Base64Test, Rfc4648Vectors) {
  const std::pair<std::string, std::string> cases[] = {
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"},
  };
  for (const auto& [plain, encoded] : cases) {
    EXPECT_EQ(Base64Encode(plain), encoded) << plain;
    EXPECT_EQ(Base64Decode(encoded), plain) << encoded;
  }
}

TEST(Base64Test, EveryByteRoundTrips) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t n = 0; n <= all.size(); n += 37) {
    const std::string part = all.substr(0, n);
    EXPECT_EQ(Base64Decode(Base64Encode(part)), part) << n;
  }
}

TEST(Base64Test, RefusesMalformedText) {
  for (const char* bad : {"Zg=", "Zg", "Z===", "Zh==", "Zm9v!A==", "Zg==Zg==", "=Zg=", "Zm\n9v"}) {
    EXPECT_FALSE(Base64Decode(bad).has_value()) << bad;
  }
  EXPECT_FALSE(Base64Decode(std::string("Zm9\0", 4)).has_value());
}

}  // namespace
}  // namespace gpupool
