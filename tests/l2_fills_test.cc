// The L2's in-flight fills (src/sim/bandwidth.h L2Fills): a read that hits a line another
// read's miss is still bringing from HBM learns when that fill lands; lines already landed,
// and lines this read misses itself, make it wait for nothing.
#include <gtest/gtest.h>

#include "sim/bandwidth.h"

namespace tilepipe::sim {
namespace {

constexpr int64_t kLine = 128;

TEST(L2Fills, AHitOnALineStillFillingWaitsForItsFill) {
  L2Residency l2({64 * kLine}, 1 << 20);
  L2Fills fills(1);
  // Core A misses lines 0-7 at cycle 0; its data lands at 1500.
  EXPECT_EQ(fills.before_touch(l2, 0, 0, 8 * kLine, 0), 0);
  EXPECT_EQ(l2.touch(0, 0, 8 * kLine, 8 * kLine).first, 8 * kLine);
  fills.filled(1500);
  // Core B reads lines 4-11 at cycle 100: 4-7 hit lines in flight, 8-11 are its own misses.
  EXPECT_EQ(fills.before_touch(l2, 0, 4 * kLine, 12 * kLine, 100), 1500);
  EXPECT_EQ(l2.touch(0, 4 * kLine, 12 * kLine, 8 * kLine).first, 4 * kLine);
  fills.filled(1700);
  // At cycle 1600 lines 0-7 have landed, 8-11 have not.
  EXPECT_EQ(fills.before_touch(l2, 0, 0, 8 * kLine, 1600), 0);
  EXPECT_EQ(fills.before_touch(l2, 0, 9 * kLine, 10 * kLine, 1600), 1700);
  // A part of a line counts as the line.
  EXPECT_EQ(fills.before_touch(l2, 0, 8 * kLine + 5, 8 * kLine + 9, 1600), 1700);
  // Once every line has landed nothing waits.
  EXPECT_EQ(fills.before_touch(l2, 0, 0, 12 * kLine, 1700), 0);
}

TEST(L2Fills, OnlyTheMissesOfTheLastTouchAreStamped) {
  L2Residency l2({16 * kLine, 16 * kLine}, 1 << 20);
  L2Fills fills(2);
  fills.before_touch(l2, 0, 0, 4 * kLine, 0);
  l2.touch(0, 0, 4 * kLine, 4 * kLine);
  fills.before_touch(l2, 1, 0, 2 * kLine, 0);
  l2.touch(1, 0, 2 * kLine, 2 * kLine);
  fills.filled(900);
  // A hit stamps nothing: the lines keep the fill time of the miss that brought them.
  EXPECT_EQ(fills.before_touch(l2, 0, 0, 4 * kLine, 10), 900);
  l2.touch(0, 0, 4 * kLine, 4 * kLine);
  fills.filled(5000);
  EXPECT_EQ(fills.before_touch(l2, 0, 0, 4 * kLine, 901), 0);
  EXPECT_EQ(fills.before_touch(l2, 1, kLine, 2 * kLine, 899), 900);
}

}  // namespace
}  // namespace tilepipe::sim
