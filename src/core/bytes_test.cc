// Byte counts for people (core/bytes.h).
#include "core/bytes.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(FormatBytesTest, OneDecimalInTheLargestUnitThatKeepsItAtLeastOne) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(12 << 20), "12.0 MiB");
  EXPECT_EQ(FormatBytes(int64_t{5} << 40), "5.0 TiB");
  EXPECT_EQ(FormatBytes(int64_t{5} << 50), "5.0 PiB");
  EXPECT_EQ(FormatBytes(int64_t{5000} << 50), "5000.0 PiB");
}

}  // namespace
}  // namespace gpupool
