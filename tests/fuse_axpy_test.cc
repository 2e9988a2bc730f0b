// Axpy fusion: mul by a scalar into a dead temporary followed by add / sub into a tile
// becomes one axpy (golden IR); a temporary read later, a source written in between, a
// temporary carried around the loop and hand-synced scopes stay as written; through the
// whole pipeline the fused program computes the same values as the unfused one. Per-row
// muls + adds loops become broadcast + axpy (golden IR, same values), unsafe ones stay.
#include "passes/fuse_axpy.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "test_util.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/passes.h"
#include "tilepipe/sim.h"

namespace tilepipe {
namespace {

using namespace lang;

/// Per row i of each AIV: out = y + 0.5 x - 3 x + m[i] * x, through one temporary t.
ir::Program two_pairs(int64_t rows, int64_t cols) {
  KernelBuilder kb("fuse", 1);
  auto x = kb.input("x", {2, rows, cols}, f32);
  auto y = kb.input("y", {2, rows, cols}, f32);
  auto ms = kb.input("ms", {2, rows, 8}, f32);
  auto out = kb.output("out", {2, rows, cols}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto xb = alloc_ub("xb", {cols}, f32);
    auto acc = alloc_ub("acc", {cols}, f32);
    auto t = alloc_ub("t", {cols}, f32);
    auto m = alloc_ub("m", {rows, 8}, f32);
    copy(ms(vid, all, all), m);
    serial(rows, [&](Ex i) {
      copy(x(vid, i, all), xb);
      copy(y(vid, i, all), acc);
      tile::mul(t, xb, 0.5);
      tile::add(acc, acc, t);
      tile::mul(t, xb, 3.0);
      tile::sub(acc, acc, t);
      tile::mul(t, xb, at(m, {i, 0}));
      tile::add(acc, t, acc);
      copy(acc, out(vid, i, all));
    });
  });
  return kb.finish();
}

ir::Program fused(const ir::Program& p) {
  verify_or_throw(p, testing::a3(), passes::verify_options({}));
  auto out = passes::fuse_axpy(p, testing::a3(), {});
  verify_or_throw(out, testing::a3(), passes::verify_options({}));
  return out;
}

TEST(FuseAxpy, MulThenAddOrSubOnADeadTemporaryBecomesAxpy) {
  const std::string before = ir::print(two_pairs(3, 40));
  EXPECT_NE(before.find(R"(    for i in serial(0, 3) {
      copy x[vid:+1, i:+1, 0:+40] -> xb
      copy y[vid:+1, i:+1, 0:+40] -> acc
      tile.mul t, xb, 0.5
      tile.add acc, acc, t
      tile.mul t, xb, 3.0
      tile.sub acc, acc, t
      tile.mul t, xb, m[i:+1, 0:+1]
      tile.add acc, t, acc
      copy acc -> out[vid:+1, i:+1, 0:+40]
    })"),
            std::string::npos)
      << before;
  EXPECT_EQ(
      ir::print(fused(two_pairs(3, 40))),
      R"(kernel fuse(x: GM f32[2, 3, 40] in, y: GM f32[2, 3, 40] in, ms: GM f32[2, 3, 8] in, out: GM f32[2, 3, 40] out) block_num=1 {
  scope V {
    alloc xb: UB f32[40]
    alloc acc: UB f32[40]
    alloc t: UB f32[40]
    alloc m: UB f32[3, 8]
    copy ms[vid:+1, 0:+3, 0:+8] -> m
    for i in serial(0, 3) {
      copy x[vid:+1, i:+1, 0:+40] -> xb
      copy y[vid:+1, i:+1, 0:+40] -> acc
      tile.axpy acc, xb, 0.5
      tile.axpy acc, xb, -3.0
      tile.axpy acc, xb, m[i:+1, 0:+1]
      copy acc -> out[vid:+1, i:+1, 0:+40]
    }
  }
}
)");
}

enum class Hazard {
  None,
  ReadLater,
  SourceWrittenBetween,
  CarriedAroundLoop,
  DestTouchedBetween,
  UsedOutsideTheLoop,
  HalfPrecision,
};

/// One mul / add pair on t with an optional hazard that forbids the fusion.
ir::Program one_pair(Hazard h) {
  DType dt = h == Hazard::HalfPrecision ? f16 : f32;
  KernelBuilder kb("pair", 1);
  auto x = kb.input("x", {2, 4, 32}, dt);
  auto out = kb.output("out", {2, 4, 32}, dt);
  auto out2 = kb.output("out2", {2, 4, 32}, dt);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto xb = alloc_ub("xb", {32}, dt);
    auto acc = alloc_ub("acc", {32}, dt);
    auto t = alloc_ub("t", {32}, dt);
    tile::fill(acc, 1.0);
    if (h == Hazard::UsedOutsideTheLoop) tile::fill(t, 0.0);
    serial(4, [&](Ex i) {
      if (h == Hazard::CarriedAroundLoop) copy(t, out2(vid, i, all));  // last iteration's t
      copy(x(vid, i, all), xb);
      tile::mul(t, xb, 2.0);
      if (h == Hazard::SourceWrittenBetween) tile::relu(xb, xb);
      if (h == Hazard::DestTouchedBetween) copy(acc, out2(vid, i, all));
      tile::add(acc, acc, t);
      if (h == Hazard::ReadLater) copy(t, out2(vid, i, all));
      copy(acc, out(vid, i, all));
    });
    if (h == Hazard::UsedOutsideTheLoop) copy(t, out2(vid, 0, all));
  });
  return kb.finish();
}

int count_ops(const ir::Program& p, ir::TileOpKind k) {
  struct Count : ir::StmtVisitor {
    ir::TileOpKind k;
    int n = 0;
    void visit_tile(const ir::TileOpStmt& t, const ir::StmtNode&) override { n += t.op == k; }
  } c;
  c.k = k;
  c.visit(p.body);
  return c.n;
}

TEST(FuseAxpy, FusesOnlyWhenTheTemporaryIsDeadAndTheOperandsUntouched) {
  // The control: without a hazard the pair fuses.
  auto control = fused(one_pair(Hazard::None));
  EXPECT_EQ(count_ops(control, ir::TileOpKind::Axpy), 1) << ir::print(control);
  EXPECT_EQ(count_ops(control, ir::TileOpKind::Mul), 0);
  EXPECT_EQ(count_ops(control, ir::TileOpKind::Add), 0);
  for (Hazard h : {Hazard::ReadLater, Hazard::SourceWrittenBetween, Hazard::CarriedAroundLoop,
                   Hazard::DestTouchedBetween, Hazard::UsedOutsideTheLoop, Hazard::HalfPrecision}) {
    SCOPED_TRACE(static_cast<int>(h));
    auto p = one_pair(h);
    EXPECT_TRUE(ir::equal(fused(p), p)) << ir::print(fused(p));
  }
}

TEST(FuseAxpy, HandSyncedScopeIsLeftUnchanged) {
  auto build = [](bool hand) {
    KernelBuilder kb("hand", 1);
    auto x = kb.input("x", {2, 32}, f32);
    auto out = kb.output("out", {2, 32}, f32);
    auto [cid, vid] = kb.launch();
    scope_v([&] {
      auto xb = alloc_ub("xb", {32}, f32);
      auto acc = alloc_ub("acc", {32}, f32);
      auto t = alloc_ub("t", {32}, f32);
      copy(x(vid, all), xb);
      if (hand) {
        set_flag(Pipe::MTE2, Pipe::V, 0);
        wait_flag(Pipe::MTE2, Pipe::V, 0);
      }
      tile::fill(acc, 1.0);
      tile::mul(t, xb, 2.0);
      tile::add(acc, acc, t);
      if (hand) {
        set_flag(Pipe::V, Pipe::MTE3, 0);
        wait_flag(Pipe::V, Pipe::MTE3, 0);
      }
      copy(acc, out(vid, all));
    });
    return kb.finish();
  };
  auto hand = build(true);
  EXPECT_TRUE(ir::equal(fused(hand), hand)) << ir::print(fused(hand));
  EXPECT_EQ(count_ops(fused(build(false)), ir::TileOpKind::Axpy), 1);
}

/// Runs `p` through the whole pipeline (fusion on or off) in functional mode, race-checked.
sim::HostData run(const ir::Program& p, bool fuse, sim::HostData io) {
  passes::PassOptions o;
  o.fuse = fuse;
  verify_or_throw(p, testing::a3(), passes::verify_options(o));
  auto low = lower::lower(passes::run_passes(p, testing::a3(), o), testing::a3());
  sim::SimOptions so;
  so.detect_races = true;
  sim::simulate(low, testing::a3(), &io, so);
  return io;
}

TEST(FuseAxpy, FusedProgramComputesTheSameValuesThroughThePipeline) {
  const int64_t rows = 7, cols = 40;  // odd trip count, 5 x 32-byte columns
  auto p = two_pairs(rows, cols);
  passes::PassOptions o;
  auto compiled = passes::run_passes(p, testing::a3(), o);
  EXPECT_EQ(count_ops(compiled, ir::TileOpKind::Axpy), 3);
  EXPECT_EQ(count_ops(compiled, ir::TileOpKind::Mul), 0);
  std::vector<double> x(static_cast<size_t>(2 * rows * cols)), y(x.size()),
      ms(static_cast<size_t>(2 * rows * 8));
  for (size_t e = 0; e < x.size(); ++e) {
    x[e] = static_cast<double>(e % 13) * 0.375 - 2;
    y[e] = static_cast<double>(e % 7) - 3.5;
  }
  for (size_t e = 0; e < ms.size(); ++e) ms[e] = static_cast<double>(e % 5) * 0.75 - 1;
  sim::HostData in{{"x", x}, {"y", y}, {"ms", ms}};
  auto on = run(p, true, in), off = run(p, false, in);
  passes::PassOptions unfused;
  unfused.fuse = false;
  EXPECT_EQ(count_ops(passes::run_passes(p, testing::a3(), unfused), ir::TileOpKind::Mul), 3);
  ASSERT_EQ(on.at("out").size(), x.size());
  EXPECT_EQ(on.at("out"), off.at("out"));
  // And both are the reference: y + 0.5 x - 3 x + m x, exactly in f32 for these values.
  for (int64_t v = 0; v < 2; ++v)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        size_t at = static_cast<size_t>((v * rows + r) * cols + c);
        float m = static_cast<float>(ms[static_cast<size_t>((v * rows + r) * 8)]);
        float xv = static_cast<float>(x[at]);
        float want = static_cast<float>(y[at]) + 0.5f * xv;
        want = want - 3.0f * xv;
        want = m * xv + want;
        ASSERT_EQ(on.at("out")[at], want) << v << " " << r << " " << c;
      }
}

TEST(FuseAxpy, KeptPairsComputeTheSameValuesAsUnfused) {
  // A fusion the rules wrongly allowed would change out or out2 here.
  std::vector<double> x(2 * 4 * 32);
  for (size_t e = 0; e < x.size(); ++e) x[e] = static_cast<double>(e % 11) - 5;
  for (Hazard h :
       {Hazard::None, Hazard::ReadLater, Hazard::SourceWrittenBetween, Hazard::CarriedAroundLoop,
        Hazard::DestTouchedBetween, Hazard::UsedOutsideTheLoop, Hazard::HalfPrecision}) {
    SCOPED_TRACE(static_cast<int>(h));
    auto p = one_pair(h);
    auto on = run(p, true, {{"x", x}}), off = run(p, false, {{"x", x}});
    EXPECT_EQ(on.at("out"), off.at("out"));
    EXPECT_EQ(on.at("out2"), off.at("out2"));
  }
}

enum class RowLoop { Vector, ThreeOps, ScalarFromDest, MisalignedColumn, ShiftedRow };

/// out = 0.125 * x + m per row, written as a per-row loop of muls + adds (the FA per_row
/// variant's spelling), with variants the vectoriser must leave alone.
ir::Program row_loop(int64_t rows, int64_t cols, RowLoop v = RowLoop::Vector) {
  KernelBuilder kb("rows", 1);
  const int64_t mrows = v == RowLoop::MisalignedColumn ? rows : 8;
  auto x = kb.input("x", {2, rows, cols}, f32);
  auto mm = kb.input("mm", {2, 2, mrows, 1}, f32);
  auto out = kb.output("out", {2, rows, cols}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto work = alloc_ub("work", {rows, cols}, f32);
    auto buf = alloc_ub("buf", {rows + 1, cols}, f32);
    auto m = alloc_ub("m", {2, mrows, 1}, f32);
    copy(x(vid, all, all), work);
    copy(mm(vid, all, all, all), m);
    tile::fill(buf, 0.0);
    serial(rows, [&](Ex r) {
      Ex row = v == RowLoop::ShiftedRow ? r + 1 : r;
      tile::muls(buf(row, all), work(r, all), 0.125);
      if (v == RowLoop::ScalarFromDest)
        tile::adds(buf(row, all), buf(row, all), at(buf, {row, 0}));
      else
        tile::adds(buf(row, all), buf(row, all), at(m, {1, r, 0}));
      if (v == RowLoop::ThreeOps) tile::relu(buf(row, all), buf(row, all));
    });
    copy(buf(slice(0, rows), all), out(vid, all, all));
  });
  return kb.finish();
}

TEST(FuseAxpy, PerRowScalarLoopBecomesBroadcastAndAxpy) {
  auto p = fused(row_loop(5, 40));
  EXPECT_EQ(
      ir::print(p),
      R"(kernel rows(x: GM f32[2, 5, 40] in, mm: GM f32[2, 2, 8, 1] in, out: GM f32[2, 5, 40] out) block_num=1 {
  scope V {
    alloc work: UB f32[5, 40]
    alloc buf: UB f32[6, 40]
    alloc m: UB f32[2, 8, 1]
    copy x[vid:+1, 0:+5, 0:+40] -> work
    copy mm[vid:+1, 0:+2, 0:+8, 0:+1] -> m
    tile.fill buf, 0.0
    tile.broadcast buf[0:+5, 0:+40], m[1:+1, 0:+5, 0:+1], column
    tile.axpy buf[0:+5, 0:+40], work, 0.125
    copy buf[0:+5, 0:+40] -> out[vid:+1, 0:+5, 0:+40]
  }
}
)");
  for (RowLoop v : {RowLoop::ThreeOps, RowLoop::ScalarFromDest, RowLoop::MisalignedColumn,
                    RowLoop::ShiftedRow}) {
    SCOPED_TRACE(static_cast<int>(v));
    auto q = row_loop(5, 40, v);
    EXPECT_TRUE(ir::equal(fused(q), q)) << ir::print(fused(q));
  }
}

TEST(FuseAxpy, VectorisedRowLoopComputesTheSameValues) {
  const int64_t rows = 5, cols = 40;
  for (RowLoop v : {RowLoop::Vector, RowLoop::ShiftedRow, RowLoop::MisalignedColumn}) {
    SCOPED_TRACE(static_cast<int>(v));
    const int64_t mrows = v == RowLoop::MisalignedColumn ? rows : 8;
    std::vector<double> x(static_cast<size_t>(2 * rows * cols)),
        mm(static_cast<size_t>(2 * 2 * mrows));
    for (size_t e = 0; e < x.size(); ++e) x[e] = static_cast<double>(e % 9) - 4;
    for (size_t e = 0; e < mm.size(); ++e) mm[e] = static_cast<double>(e) * 0.5 - 3;
    auto p = row_loop(rows, cols, v);
    auto on = run(p, true, {{"x", x}, {"mm", mm}}), off = run(p, false, {{"x", x}, {"mm", mm}});
    EXPECT_EQ(on.at("out"), off.at("out"));
    if (v != RowLoop::Vector) continue;
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < cols; ++k) {
          size_t at = static_cast<size_t>((c * rows + r) * cols + k);
          double want = 0.125 * x[at] + mm[static_cast<size_t>((c * 2 + 1) * mrows + r)];
          ASSERT_EQ(on.at("out")[at], want) << c << " " << r << " " << k;
        }
  }
}

}  // namespace
}  // namespace tilepipe
