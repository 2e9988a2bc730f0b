// Buffers of more than four dimensions (lower::kMaxDims) through verify, lower and the
// simulator: a region is walked as at most four strided dimensions (adjacent ones merged),
// so a kernel over rank-5..7 buffers gives the values and the cycles of the same kernel over
// the buffers reshaped to rank 4, while bounds checks still name the buffer's own dimension.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/sim.h"
#include "tilepipe/verify.h"

namespace tilepipe {
namespace {

using namespace lang;

/// Per (cid, h, vid): X[cid, h, 2 vid : +2, :, off : +8] -> UB, squared, to Y[cid, h, vid];
/// t (all dims > 1) filled, doubled and stored to Z[cid, vid]. `off` is a scalar load of
/// Off[cid, h0, 0, 0, vid] (h = h0 unless bad_h). With high = false every buffer has the outer dims
/// merged to rank 4 and every index merged the same way.
ir::Program build(bool high, bool bad_h = false) {
  KernelBuilder k(high ? "rank7" : "rank4", 2);
  auto X = high ? k.input("X", {2, 3, 4, 8, 16}, f32) : k.input("X", {6, 4, 8, 16}, f32);
  auto Off = high ? k.input("Off", {2, 3, 1, 1, 2}, i32) : k.input("Off", {6, 1, 1, 2}, i32);
  auto Y = high ? k.output("Y", {2, 3, 2, 2, 8, 8}, f32) : k.output("Y", {12, 2, 8, 8}, f32);
  auto Z = high ? k.output("Z", {2, 2, 2, 2, 2, 4, 4}, f32) : k.output("Z", {16, 2, 4, 4}, f32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto u = high ? alloc_ub("u", {1, 1, 2, 8, 8}, f32) : alloc_ub("u", {1, 2, 8, 8}, f32);
    auto t = high ? alloc_ub("t", {2, 2, 2, 4, 4}, f32) : alloc_ub("t", {4, 2, 4, 4}, f32);
    serial(3, [&](Ex h0) {
      // bad_h: h runs 0, 1, 3; h0 used twice leaves the verifier's interval inexact.
      Ex h = bad_h ? (h0 * h0 + h0) / 2 : h0;
      Ex off = high ? load(Off, {cid, h0, 0, 0, vid}) : load(Off, {cid * 3 + h0, 0, 0, vid});
      if (high)
        copy(X(cid, h, slice(vid * 2, 2), all, slice(off, 8)), u);
      else
        copy(X(cid * 3 + h, slice(vid * 2, 2), all, slice(off, 8)), u);
      set_flag(Pipe::MTE2, Pipe::V, 0);
      wait_flag(Pipe::MTE2, Pipe::V, 0);
      tile::mul(u, u, u);
      set_flag(Pipe::V, Pipe::MTE3, 0);
      wait_flag(Pipe::V, Pipe::MTE3, 0);
      if (high)
        copy(u, Y(cid, h, vid, all, all, all));
      else
        copy(u, Y(cid * 6 + h * 2 + vid, all, all, all));
      set_flag(Pipe::MTE3, Pipe::MTE2, 0);
      wait_flag(Pipe::MTE3, Pipe::MTE2, 0);
    });
    tile::fill(t, 0.5);
    tile::adds(t, t, vid + cid * 2);
    set_flag(Pipe::V, Pipe::MTE3, 1);
    wait_flag(Pipe::V, Pipe::MTE3, 1);
    if (high)
      copy(t, Z(cid, vid, all, all, all, all, all));
    else
      copy(t, Z(slice((cid * 2 + vid) * 4, 4), all, all, all));
  });
  return k.finish();
}

sim::HostData inputs() {
  std::vector<double> x(2 * 3 * 4 * 8 * 16), off(12);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i % 37) * 0.25 - 3;
  for (size_t i = 0; i < off.size(); ++i) off[i] = (i * 5) % 9;  // column starts 0..8
  return {{"X", x}, {"Off", off}};
}

struct Outcome {
  sim::SimResult res;
  sim::HostData io;
};

Outcome run(const ir::Program& p, sim::Mode mode) {
  const ChipConfig& chip = testing::a3();
  verify_or_throw(p, chip);
  lower::LoweredProgram low = lower::lower(p, chip);
  Outcome r{{}, inputs()};
  sim::SimOptions o;
  o.mode = mode;
  r.res = sim::simulate(low, chip, &r.io, o);
  return r;
}

TEST(Rank, HighRankKernelGivesTheValuesAndCyclesOfItsRank4Form) {
  for (sim::Mode mode : {sim::Mode::Functional, sim::Mode::Timing}) {
    Outcome hi = run(build(true), mode), lo = run(build(false), mode);
    EXPECT_EQ(hi.res.cycles, lo.res.cycles);
    EXPECT_EQ(hi.res.instructions, lo.res.instructions);
    if (mode != sim::Mode::Functional) continue;
    EXPECT_EQ(hi.io.at("Y"), lo.io.at("Y"));
    EXPECT_EQ(hi.io.at("Z"), lo.io.at("Z"));
    // And against the host: Y[cid, h, vid, r, c, j] = X[cid, h, 2 vid + r, c, off + j]^2.
    const auto x = inputs().at("X"), offs = inputs().at("Off");
    const auto& y = hi.io.at("Y");
    for (int cid = 0; cid < 2; ++cid)
      for (int h = 0; h < 3; ++h)
        for (int vid = 0; vid < 2; ++vid) {
          const auto off = static_cast<int>(offs[static_cast<size_t>((cid * 3 + h) * 2 + vid)]);
          for (int r = 0; r < 2; ++r)
            for (int c = 0; c < 8; ++c)
              for (int j = 0; j < 8; ++j) {
                const double v = x[static_cast<size_t>(
                    (((cid * 3 + h) * 4 + vid * 2 + r) * 8 + c) * 16 + off + j)];
                EXPECT_EQ(
                    y[static_cast<size_t>(((((cid * 3 + h) * 2 + vid) * 2 + r) * 8 + c) * 8 + j)],
                    v * v);
              }
        }
    const auto& z = hi.io.at("Z");
    for (size_t i = 0; i < z.size(); ++i) EXPECT_EQ(z[i], 0.5 + static_cast<double>(i / 128));
  }
}

TEST(Rank, WalkMergesOuterDimensionsIntoFourStridedOnes) {
  const ir::Program p = build(true);  // the lowered accesses point at its buffers
  lower::LoweredProgram low = lower::lower(p, testing::a3());
  for (const auto& t : low.aiv.instrs) {
    if (t.op != lower::Opcode::Copy || t.acc[1].buffer->name != "X") continue;
    const auto& a = t.acc[1];
    EXPECT_EQ(a.dims, 5);
    EXPECT_EQ(a.nvar, 4);  // cid, h, the rows of vid, the loaded column: each checked
    ASSERT_EQ(a.rank, 4);
    EXPECT_EQ(std::vector<int64_t>(a.extent.begin(), a.extent.end()),
              (std::vector<int64_t>{1, 2, 8, 8}));
    EXPECT_EQ(std::vector<int64_t>(a.stride.begin(), a.stride.end()),
              (std::vector<int64_t>{512, 128, 16, 1}));
  }
}

TEST(Rank, BoundsAreCheckedPerBufferDimension) {
  // h reaches 3 in a dimension of 3 while the element stays inside X (cid = 0): the merged
  // walk would not see it, the per-dimension check does (at run time: the verifier's
  // interval for h is not exact).
  try {
    run(build(true, true), sim::Mode::Timing);
    ADD_FAILURE() << "expected a slice-bounds error";
  } catch (const UserError& e) {
    const std::string text = e.what();
    ASSERT_FALSE(e.diagnostics().empty());
    EXPECT_EQ(e.diagnostics().front().kind, "slice-bounds") << text;
    EXPECT_NE(text.find("dimension 1 covers [3, 4) but the dimension has 3"), std::string::npos)
        << text;
  }
}

TEST(Rank, RegionNeedingFiveStridedDimensionsIsALocatedError) {
  KernelBuilder k("five", 1);
  // Rows of 16 f16 (32 bytes): the DMA's bursts stay on 32-byte blocks of UB.
  auto X = k.input("X", {4, 4, 4, 4, 32}, f16);
  (void)k.launch();
  int line = 0;
  scope_v([&] {
    auto u = alloc_ub("u", {2, 2, 2, 2, 16}, f16);
    line = __LINE__ + 1;
    copy(X(slice(0, 2), slice(0, 2), slice(0, 2), slice(0, 2), slice(0, 16)), u);
  });
  ir::Program p = k.finish();
  verify_or_throw(p, testing::a3());
  testing::expect_user_error([&] { lower::lower(p, testing::a3()); },
                             {"rank_test.cc:" + std::to_string(line), "needs 5 strided dimensions",
                              "at most 4", "extent 1"});
}

TEST(Rank, BufferOfRankNineIsALocatedError) {
  KernelBuilder k("nine", 1);
  auto X = k.input("X", {1, 1, 1, 1, 1, 1, 1, 2, 16}, f16);
  (void)k.launch();
  int line = 0;
  scope_v([&] {
    auto u = alloc_ub("u", {2, 16}, f16);
    line = __LINE__ + 1;
    copy(X(0, 0, 0, 0, 0, 0, 0, all, all), u);
  });
  ir::Program p = k.finish();
  verify_or_throw(p, testing::a3());
  testing::expect_user_error([&] { lower::lower(p, testing::a3()); },
                             {"rank_test.cc:" + std::to_string(line), "has rank 9", "at most 8"});
}

}  // namespace
}  // namespace tilepipe
