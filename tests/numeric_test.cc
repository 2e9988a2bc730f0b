// Storage formats (include/tilepipe/numeric.h): float -> f16 rounding at every boundary the
// format has (exact values, ties to even, the subnormal range, overflow, NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tilepipe/numeric.h"

namespace {

using tilepipe::f16_to_float;
using tilepipe::float_to_f16;

TEST(Numeric, EveryF16ValueRoundTrips) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = f16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_EQ(float_to_f16(f) & 0x7e00u, 0x7e00u) << std::hex << h;
    } else {
      EXPECT_EQ(float_to_f16(f), h) << std::hex << h;
    }
  }
}

TEST(Numeric, MidpointsRoundToEvenAndNeighboursToNearest) {
  // Between each pair of adjacent finite f16 values of one sign (subnormals included).
  for (uint32_t h = 0; h < 0x7bffu; ++h) {
    const double lo = f16_to_float(static_cast<uint16_t>(h));
    const double hi = f16_to_float(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);  // exact in float
    const uint16_t even = (h & 1u) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    EXPECT_EQ(float_to_f16(mid), even) << std::hex << h;
    EXPECT_EQ(float_to_f16(std::nextafter(mid, 0.0f)), h) << std::hex << h;
    EXPECT_EQ(float_to_f16(std::nextafter(mid, 1e9f)), h + 1) << std::hex << h;
    EXPECT_EQ(float_to_f16(-mid), even | 0x8000u) << std::hex << h;
  }
}

TEST(Numeric, OverflowUnderflowAndSpecials) {
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bffu);
  EXPECT_EQ(float_to_f16(std::nextafter(65520.0f, 0.0f)), 0x7bffu);  // below the midpoint
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00u);                        // tie to even: inf
  EXPECT_EQ(float_to_f16(1e10f), 0x7c00u);
  EXPECT_EQ(float_to_f16(-std::numeric_limits<float>::infinity()), 0xfc00u);
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000u);  // half the least subnormal: to even
  EXPECT_EQ(float_to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001u);
  EXPECT_EQ(float_to_f16(1e-30f), 0x0000u);
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000u);
  EXPECT_EQ(float_to_f16(std::nanf("")), 0x7e00u);
  EXPECT_EQ(float_to_f16(-std::nanf("")), 0xfe00u);
}

}  // namespace
