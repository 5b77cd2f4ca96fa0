// Tests for core/mig.
#include <gtest/gtest.h>
TEST(Placeholder, mig) { EXPECT_TRUE(true); }
