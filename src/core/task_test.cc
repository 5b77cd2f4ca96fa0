// Tests for core/task.
#include <gtest/gtest.h>
TEST(Placeholder, task) { EXPECT_TRUE(true); }
