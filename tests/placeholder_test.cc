#include <gtest/gtest.h>
TEST(Build, Links) { EXPECT_TRUE(true); }
