// Vectorisation: a Parallel loop over rows becomes tile ops over all rows (golden IR), a
// per-row scalar becomes a row broadcast, the values match the serial loop, and a loop that
// cannot be vectorised is an error naming the statement.
#include "passes/vectorize.h"

#include <gtest/gtest.h>

#include "test_util.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/passes.h"
#include "tilepipe/sim.h"

namespace tilepipe {
namespace {

using namespace lang;

/// y[r] = (x[r] - m[r]) * 2 per row r of an 8 x 64 tile, as a Parallel (or serial) loop.
ir::Program rows(bool parallel_loop) {
  KernelBuilder kb("rows", 1);
  auto x = kb.input("x", {2, 8, 64}, f32);
  auto y = kb.output("y", {2, 8, 64}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {8, 64}, f32);
    auto b = alloc_ub("b", {8, 64}, f32);
    auto m = alloc_ub("m", {8, 1}, f32);
    copy(x(vid, all, all), a);
    reduce_max(a, m);
    auto body = [&](Ex r) {
      tile::sub(b(r, all), a(r, all), at(m, {r, 0}));
      tile::mul(b(r, all), b(r, all), 2.0);
    };
    if (parallel_loop)
      parallel(8, body);
    else
      serial(8, body);
    copy(b, y(vid, all, all));
  });
  return kb.finish();
}

TEST(Vectorize, ParallelRowsBecomeTileOpsWithARowBroadcast) {
  auto p = passes::vectorize(rows(true), testing::a3(), {});
  std::string ir = ir::print(p);
  EXPECT_NE(
      ir.find("    tile.broadcast b, m, column\n    tile.sub b, a, b\n    tile.mul b, b, 2.0\n"),
      std::string::npos)
      << ir;
  EXPECT_EQ(ir.find("parallel"), std::string::npos) << ir;
}

TEST(Vectorize, ValuesMatchTheSerialLoop) {
  sim::HostData results[2];
  for (int par = 0; par < 2; ++par) {
    ir::Program p = rows(par == 1);
    passes::PassOptions o;
    verify_or_throw(p, testing::a3(), passes::verify_options(o));
    auto low = lower::lower(passes::run_passes(p, testing::a3(), o), testing::a3());
    std::vector<double> x(2 * 8 * 64);
    for (size_t e = 0; e < x.size(); ++e) x[e] = static_cast<double>(e % 11) - 5;
    results[par] = {{"x", x}};
    sim::SimOptions so;
    so.detect_races = true;
    sim::simulate(low, testing::a3(), &results[par], so);
  }
  EXPECT_EQ(results[0].at("y"), results[1].at("y"));
}

/// d[i, j] = (a[i, j] + v[i]) * w[j] over an 8 x 64 tile, as a 2-D nest of element ops.
ir::Program element_nest() {
  KernelBuilder kb("nest", 1);
  auto x = kb.input("x", {2, 8, 64}, f32);
  auto vg = kb.input("v", {8}, f32);
  auto wg = kb.input("w", {64}, f32);
  auto y = kb.output("y", {2, 8, 64}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {8, 64}, f32);
    auto v = alloc_ub("v_ub", {8}, f32);
    auto w = alloc_ub("w_ub", {64}, f32);
    auto d = alloc_ub("d", {8, 64}, f32);
    copy(x(vid, all, all), a);
    copy(vg, v);
    copy(wg, w);
    parallel(8, [&](Ex i) {
      parallel(64, [&](Ex j) {
        tile::add(d(i, j), a(i, j), v(i));
        tile::mul(d(i, j), d(i, j), w(j));
      });
    });
    copy(d, y(vid, all, all));
  });
  return kb.finish();
}

TEST(Vectorize, AnElementNestBroadcastsRowAndColumnVectors) {
  auto p = passes::vectorize(element_nest(), testing::a3(), {});
  std::string ir = ir::print(p);
  // v[i] varies down the rows: reshaped [8, 1] first; w[j] broadcasts as a row
  EXPECT_NE(ir.find("    alloc par_bc1: UB f32[8, 64]\n    tile.broadcast par_bc1, v_ub, column\n"
                    "    tile.add d, a, par_bc1\n    alloc par_bc2: UB f32[8, 64]\n"
                    "    tile.broadcast par_bc2, w_ub, row\n    tile.mul d, d, par_bc2\n"),
            std::string::npos)
      << ir;
  EXPECT_EQ(ir.find("parallel"), std::string::npos) << ir;

  passes::PassOptions o;
  ir::Program q = element_nest();
  verify_or_throw(q, testing::a3(), passes::verify_options(o));
  auto low = lower::lower(passes::run_passes(q, testing::a3(), o), testing::a3());
  std::vector<double> x(2 * 8 * 64), v(8), w(64);
  for (size_t e = 0; e < x.size(); ++e) x[e] = static_cast<double>(e % 13) - 6;
  for (size_t e = 0; e < v.size(); ++e) v[e] = static_cast<double>(e) * 0.5;
  for (size_t e = 0; e < w.size(); ++e) w[e] = static_cast<double>(e % 5) - 2;
  sim::HostData data = {{"x", x}, {"v", v}, {"w", w}};
  sim::SimOptions so;
  so.detect_races = true;
  sim::simulate(low, testing::a3(), &data, so);
  for (size_t i = 0; i < 2 * 8; ++i)
    for (size_t j = 0; j < 64; ++j)
      EXPECT_EQ(data.at("y")[i * 64 + j], (x[i * 64 + j] + v[i % 8]) * w[j]) << i << ", " << j;
}

/// The causal mask: y[i, j] = j <= i + 3 ? x[i, j] : -100, each lane's indices computed as
/// values (arange), compared and selected.
ir::Program causal_nest() {
  KernelBuilder kb("causal", 1);
  auto x = kb.input("x", {8, 64}, f32);
  auto y = kb.output("y", {8, 64}, f32);
  kb.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {8, 64}, f32);
    auto col = alloc_ub("col", {8, 64}, f32);
    auto row = alloc_ub("row", {8, 64}, f32);
    auto m = alloc_ub("m", {8, 64}, u8);
    copy(x, a);
    parallel(8, [&](Ex i) {
      parallel(64, [&](Ex j) {
        tile::arange(col(i, j), j);
        tile::arange(row(i, j), i + 3);
        tile::compare(m(i, j), col(i, j), row(i, j), ir::CmpMode::LE);
        tile::select(a(i, j), m(i, j), a(i, j), -100.0);
      });
    });
    copy(a, y);
  });
  return kb.finish();
}

TEST(Vectorize, AnIndexUsedAsAValueIsAnArangeAlongItsLaneBroadcast) {
  auto p = passes::vectorize(causal_nest(), testing::a3(), {});
  std::string ir = ir::print(p);
  EXPECT_NE(ir.find("    alloc par_row1: UB f32[1, 64]\n    tile.arange par_row1, 0\n"
                    "    tile.broadcast col, par_row1, row\n"
                    "    alloc par_col1: UB f32[8]\n    tile.arange par_col1, 3\n"
                    "    tile.broadcast row, par_col1, column\n"),
            std::string::npos)
      << ir;

  passes::PassOptions o;
  ir::Program q = causal_nest();
  verify_or_throw(q, testing::a3(), passes::verify_options(o));
  auto low = lower::lower(passes::run_passes(q, testing::a3(), o), testing::a3());
  std::vector<double> x(8 * 64);
  for (size_t e = 0; e < x.size(); ++e) x[e] = static_cast<double>(e % 17);
  sim::HostData data = {{"x", x}};
  sim::SimOptions so;
  so.detect_races = true;
  sim::simulate(low, testing::a3(), &data, so);
  for (size_t i = 0; i < 8; ++i)
    for (size_t j = 0; j < 64; ++j)
      EXPECT_EQ(data.at("y")[i * 64 + j], j <= i + 3 ? x[i * 64 + j] : -100.0) << i << ", " << j;
}

TEST(Vectorize, AnIndexValueOtherThanALanePlusAnOffsetIsAnError) {
  testing::expect_user_error(
      [] {
        KernelBuilder kb("k", 1);
        scope_v([&] {
          auto a = alloc_ub("a", {8, 64}, f32);
          parallel(8, [&](Ex i) { parallel(64, [&](Ex j) { tile::arange(a(i, j), i + j); }); });
        });
        passes::vectorize(kb.finish(), testing::a3(), {});
      },
      {"this Parallel loop stays scalar", "is not one Parallel variable plus a lane-free offset",
       "i + j is the sum of two such values"});
}

TEST(Vectorize, ALoopThatStaysScalarIsAnError) {
  testing::expect_user_error(
      [] {
        KernelBuilder kb("k", 1);
        scope_v([&] {
          auto a = alloc_ub("a", {8, 64}, f32);
          auto s = alloc_ub("s", {64}, f32);
          parallel(8, [&](Ex r) { tile::add(a(r, all), a(r, all), s); });
        });
        passes::vectorize(kb.finish(), testing::a3(), {});
      },
      {"this Parallel loop stays scalar", "operand s is the same tile for every lane",
       "broadcast it into a tile of the destination's shape before the loop"});
  testing::expect_user_error(
      [] {
        KernelBuilder kb("k", 1);
        scope_v([&] {
          auto a = alloc_ub("a", {16, 64}, f32);
          parallel(8, [&](Ex r) { tile::exp(a(r * 2, all), a(r * 2, all)); });
        });
        passes::vectorize(kb.finish(), testing::a3(), {});
      },
      {"this Parallel loop stays scalar",
       "operand a[(i * 2):+1, 0:+64] indexes a dimension with "
       "a Parallel variable other than as `v` or `v + offset`",
       "vectorize_test.cc:", "write it with serial(...)"});
  testing::expect_user_error(
      [] {
        KernelBuilder kb("k", 1);
        scope_v([&] {
          auto a = alloc_ub("a", {8, 64}, f32);
          parallel(8, [&](Ex r) { serial(2, [&](Ex) { tile::exp(a(r, all), a(r, all)); }); });
        });
        passes::vectorize(kb.finish(), testing::a3(), {});
      },
      {"this Parallel loop stays scalar", "a loop, a branch"});
}

}  // namespace
}  // namespace tilepipe
