// The DMA model against the public on-board copy anchors (A2/A3, all cores reading a
// 12288 x 12288 fp16 matrix from GM): large contiguous blocks 215.82 us, 128-byte rows
// 564.84 us, ND -> NZ into L1 230.24 us (docs/fidelity.md, "Copies"). Each must hold within
// +-10 % with the a3 config, for every kernel alike.
#include <gtest/gtest.h>

#include "test_util.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/sim.h"
#include "tilepipe/verify.h"

namespace tilepipe {
namespace {

using namespace lang;

constexpr int64_t kN = 12288;

enum class Shape { Blocks, Rows128, Nd2NzL1 };

/// Every worker reads its share of the matrix into a ring of 2 buffers, so that its copies
/// stream back to back: blocks of 2 whole rows (48 KiB, one contiguous run) into UB on the
/// 48 AIVs; 256 x 64 tiles (256 runs of 128 B) into UB; or 128 x 256 tiles into L1 on the
/// 24 AICs (the Cube's ND -> NZ load).
ir::Program read_matrix(Shape shape) {
  KernelBuilder k("read", 24);
  auto X = k.input("X", {kN, kN}, f16);
  auto [cid, vid] = k.launch();
  if (shape == Shape::Nd2NzL1) {
    scope_c([&] {
      auto t = alloc_L1("t", {2, 128, 256}, f16);
      const int64_t cols = kN / 256, tiles = (kN / 128) * cols;
      serial(tiles / 24, [&](Ex k) {
        Ex i = cid + k * 24;
        copy(X(rows(i / cols * 128, 128), slice(i % cols * 256, 256)), t[k % 2]);
      });
    });
  } else {
    scope_v([&] {
      Ex w = cid * 2 + vid;
      if (shape == Shape::Blocks) {
        auto t = alloc_ub("t", {2, 2, kN}, f16);
        serial(kN / 2 / 48,
               [&](Ex k) { copy(X(rows((w + k * 48) * 2, 2), slice(0, kN)), t[k % 2]); });
      } else {
        auto t = alloc_ub("t", {2, 256, 64}, f16);
        const int64_t cols = kN / 64, tiles = (kN / 256) * cols;
        serial(tiles / 48, [&](Ex k) {
          Ex i = w + k * 48;
          copy(X(rows(i / cols * 256, 256), slice(i % cols * 64, 64)), t[k % 2]);
        });
      }
    });
  }
  return k.finish();
}

double simulated_us(Shape shape) {
  const ChipConfig& chip = testing::a3();
  ir::Program p = read_matrix(shape);
  verify_or_throw(p, chip);
  sim::SimOptions o;
  o.mode = sim::Mode::Timing;
  auto r = sim::simulate(lower::lower(p, chip), chip, nullptr, o);
  return r.cycles / chip.clock_mhz;
}

TEST(DmaAnchors, LargeContiguousBlocks) {
  EXPECT_NEAR(simulated_us(Shape::Blocks), 215.82, 21.6);
}

TEST(DmaAnchors, RowsOf128Bytes) {
  EXPECT_NEAR(simulated_us(Shape::Rows128), 564.84, 56.5);
}

TEST(DmaAnchors, NdToNzIntoL1) {
  EXPECT_NEAR(simulated_us(Shape::Nd2NzL1), 230.24, 23.0);
}

}  // namespace
}  // namespace tilepipe
