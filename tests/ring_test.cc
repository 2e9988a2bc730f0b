// The engine's FIFO (src/sim/ring.h) against std::deque over a random mix of pushes and pops:
// order kept across growth and across the restart at the first slot when it empties.
#include <gtest/gtest.h>

#include <deque>
#include <random>

#include "sim/ring.h"

namespace tilepipe::sim {
namespace {

TEST(Ring, KeepsFifoOrderAcrossGrowthAndRestartsWhenEmptied) {
  std::mt19937_64 rng(7);
  Ring<int> ring;
  std::deque<int> ref;
  int next = 0;
  for (int step = 0; step < 20000; ++step) {
    // Bursts of pushes grow the ring; runs of pops empty it again.
    const bool push = ref.empty() || rng() % 100 < (step % 2000 < 1000 ? 60 : 40);
    if (push) {
      ring.push_back(next);
      ref.push_back(next++);
    } else {
      ASSERT_EQ(ring.front(), ref.front());
      ring.pop_front();
      ref.pop_front();
    }
    ASSERT_EQ(ring.size(), ref.size());
    for (size_t i = 0; i < ref.size(); i += 7) ASSERT_EQ(ring[i], ref[i]);
  }
}

TEST(Ring, AnEmptiedRingReusesItsFirstSlot) {
  Ring<int> ring;
  for (int i = 0; i < 3; ++i) ring.push_back(i);
  const int* first = &ring.front();
  for (int i = 0; i < 3; ++i) ring.pop_front();
  ring.push_back(9);
  EXPECT_EQ(&ring.front(), first);  // the warm slot, not the one after the last pop
  EXPECT_EQ(ring.front(), 9);
}

}  // namespace
}  // namespace tilepipe::sim
