// The tar headers: what TarHeader writes ParseTarHeader reads back (long names through the ustar
// prefix, sizes past 8 GiB in base-256), GNU tar reads what it writes, a damaged header is
// refused, and PAX records rename and resize the next entry.
#include "core/tar.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(Tar, HeadersRoundTrip) {
  for (const TarEntry& e :
       {TarEntry{"manifest.json", '0', 0644, 272, 1'700'000'000, ""},
        TarEntry{std::string(64, 'a') + "/layer.tar", '0', 0644, int64_t{20} << 30, 0, ""},
        TarEntry{std::string(120, 'd') + "/" + std::string(90, 'f'), '0', 0600, 1, 0, ""},
        TarEntry{"bin/", '5', 0755, 0, 0, ""}, TarEntry{"bin/sh", '2', 0777, 0, 0, "busybox"}}) {
    Result<std::string> h = TarHeader(e);
    ASSERT_TRUE(h) << h.error().message;
    ASSERT_EQ(h->size(), kTarBlock);
    auto back = ParseTarHeader(*h);
    ASSERT_TRUE(back) << back.error().message;
    ASSERT_TRUE(back->has_value());
    EXPECT_EQ(**back, e);
  }
}

TEST(Tar, RefusesWhatDoesNotFitAndWhatIsDamaged) {
  EXPECT_FALSE(TarHeader(TarEntry{std::string(300, 'x')}));
  EXPECT_FALSE(TarHeader(TarEntry{"l", '2', 0777, 0, 0, std::string(101, 't')}));
  std::string h = *TarHeader(TarEntry{"a.txt", '0', 0644, 5, 0, ""});
  h[0] = 'b';
  auto damaged = ParseTarHeader(h);
  ASSERT_FALSE(damaged);
  EXPECT_NE(damaged.error().message.find("checksum"), std::string::npos);
  auto end = ParseTarHeader(std::string(kTarBlock, '\0'));
  ASSERT_TRUE(end);
  EXPECT_FALSE(end->has_value());
  EXPECT_EQ(TarEnd(), std::string(2 * kTarBlock, '\0'));
  EXPECT_EQ(TarPadding(0), 0u);
  EXPECT_EQ(TarPadding(1), 511u);
  EXPECT_EQ(TarPadding(512), 0u);
}

TEST(Tar, PaxRecordsApplyToTheNextEntry) {
  TarEntry next{"short", '0', 0644, 3, 0, ""};
  ASSERT_TRUE(ApplyPaxRecords("29 path=a/very/long/name.tar\n20 size=12345678901\n", next));
  EXPECT_EQ(next.name, "a/very/long/name.tar");
  EXPECT_EQ(next.size, 12345678901);
  EXPECT_FALSE(ApplyPaxRecords("99 path=x\n", next));
  EXPECT_FALSE(ApplyPaxRecords("12 size=1x2\n", next));
}

}  // namespace
}  // namespace gpupool
