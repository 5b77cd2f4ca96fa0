// Tests for core/gpu_catalog.
#include <gtest/gtest.h>
TEST(Placeholder, gpu_catalog) { EXPECT_TRUE(true); }
