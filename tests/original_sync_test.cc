// AUTO_SYNC as the original compiler places it (passes/original_sync.h): golden IR of the
// full barriers around a paged gather, the same values with race detection on, and the
// serialised gather costing what the barriers make it cost.
#include <gtest/gtest.h>

#include <string>

#include "passes/auto_sync.h"
#include "test_util.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/sim.h"
#include "tilepipe/verify.h"

namespace tilepipe {
namespace {

using namespace lang;

void gather_rows(Tensor src, Tensor table, Tensor idx, Tensor out, int64_t n, bool lets);

/// Row j of `out` is row table[idx[j] / 4] * 4 + idx[j] % 4 of `src`, in two column halves
/// (two copies through the same loads), taken only when idx[j] >= 0, on AIV 0. No hand flags.
/// With `lets` the index and the row are bindings (`let_`), as the Python front end makes
/// `index = idx_ub[j]` and `row = ...`.
ir::Program gather(int64_t n, bool lets = false) {
  KernelBuilder kb("gather", 1);
  auto src = kb.input("src", {16, 16}, f32);
  auto table = kb.input("table", {4}, i32);
  auto idx = kb.input("idx", {n}, i32);
  auto out = kb.output("out", {n, 16}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] { if_(vid == 0, [&] { gather_rows(src, table, idx, out, n, lets); }); });
  return kb.finish();
}

void gather_rows(Tensor src, Tensor table, Tensor idx, Tensor out, int64_t n, bool lets) {
  {
    auto iub = alloc_ub("iub", {n}, i32);
    auto row = alloc_ub("row", {n, 16}, f32);
    copy(idx, iub);
    tile::fill(row, 0.0);
    serial(n, [&](Ex j) {
      Ex i = lets ? let_("at", load(iub, {j})) : load(iub, {j});
      if_(i >= 0, [&] {
        Ex r = load(table, {i / 4}) * 4 + i % 4;
        if (lets) r = let_("r", r);
        copy(src(r, rows(0, 8)), row(j, rows(0, 8)));
        copy(src(r, rows(8, 8)), row(j, rows(8, 8)));
      });
    });
    copy(row, out(all, all));
  }
}

ir::Program synced(const ir::Program& p, bool original) {
  passes::PassOptions o;
  o.original_sync = original;
  ir::Program out = passes::auto_sync(p, testing::a3(), o);
  verify_or_throw(out, testing::a3());
  return out;
}

/// The text without each line's indentation (the golden is a fragment at some depth).
std::string unindented(const std::string& text) {
  std::string out;
  bool start = true;
  for (char c : text) {
    if (start && c == ' ') continue;
    start = c == '\n';
    out += c;
  }
  return out;
}

sim::SimResult run(const ir::Program& p, sim::HostData& io, sim::Mode mode) {
  auto low = lower::lower(p, testing::a3());
  sim::SimOptions o;
  o.mode = mode;
  o.detect_races = mode == sim::Mode::Functional;
  return sim::simulate(low, testing::a3(), &io, o);
}

/// One full barrier on the Vector core, as original_sync spells it (the printed IR).
const std::string kBarrier = R"(set_flag MTE2->S #7
        wait_flag MTE2->S #7
        set_flag V->S #7
        wait_flag V->S #7
        set_flag MTE3->S #7
        wait_flag MTE3->S #7)";

TEST(OriginalSync, FullBarriersAroundTheIfAndBeforeTheFirstCopyThroughTheLoads) {
  std::string text = ir::print(synced(gather(4), true));
  // One barrier before the `if` (whose condition binds the index), one before the copies
  // (the page-table read; the second copy shares it), one after the `if`.
  const std::string golden = kBarrier + R"(
        if (load(iub[i]) >= 0) {
          set_flag MTE2->S #7
          wait_flag MTE2->S #7
          set_flag V->S #7
          wait_flag V->S #7
          set_flag MTE3->S #7
          wait_flag MTE3->S #7
          copy src[((load(table[(load(iub[i]) / 4)]) * 4) + (load(iub[i]) % 4)):+1, 0:+8] -> row[i:+1, 0:+8]
          copy src[((load(table[(load(iub[i]) / 4)]) * 4) + (load(iub[i]) % 4)):+1, 8:+8] -> row[i:+1, 8:+8]
        }
        )" + kBarrier;
  EXPECT_NE(unindented(text).find(unindented(golden)), std::string::npos) << text;
  // Without the option, auto_sync alone: no barrier id.
  EXPECT_EQ(ir::print(synced(gather(4), false)).find("#7"), std::string::npos);
}

/// As the original's VisitStmt_(LetStmtNode): a barrier before each binding that reads an
/// element (the index, then the page), and around the `if`.
TEST(OriginalSync, ABarrierBeforeEachBindingThatReadsAnElement) {
  std::string text = ir::print(synced(gather(4, true), true));
  const std::string golden = kBarrier + R"(
        let at = load(iub[i])
        )" + kBarrier + R"(
        if (at >= 0) {
          )" + kBarrier + R"(
          let r = ((load(table[(at / 4)]) * 4) + (at % 4))
          copy src[r:+1, 0:+8] -> row[i:+1, 0:+8]
          copy src[r:+1, 8:+8] -> row[i:+1, 8:+8]
        }
        )" + kBarrier;
  EXPECT_NE(unindented(text).find(unindented(golden)), std::string::npos) << text;
  // The same rows as the substituted form, race-free.
  sim::HostData base = {{"src", {}}, {"table", {2, 0, 3, 1}}, {"idx", {5, -1, 14, 0}}};
  for (int i = 0; i < 16 * 16; ++i) base["src"].push_back(i);
  sim::HostData bound = base, inlined = base;
  run(synced(gather(4, true), true), bound, sim::Mode::Functional);
  run(synced(gather(4), true), inlined, sim::Mode::Functional);
  EXPECT_EQ(bound.at("out"), inlined.at("out"));
}

TEST(OriginalSync, SameValuesRaceFreeAndTheGatherSerialised) {
  const int64_t rows = 32;
  std::vector<double> idx;
  for (int64_t j = 0; j < rows; ++j) idx.push_back(j % 5 == 3 ? -1 : (j * 7) % 16);
  sim::HostData base = {{"src", {}}, {"table", {2, 0, 3, 1}}, {"idx", idx}};
  for (int i = 0; i < 16 * 16; ++i) base["src"].push_back(i);
  sim::HostData plain = base, original = base;
  run(synced(gather(rows), false), plain, sim::Mode::Functional);
  run(synced(gather(rows), true), original, sim::Mode::Functional);
  EXPECT_EQ(plain.at("out"), original.at("out"));
  sim::HostData t1 = base, t2 = base;
  double fast = run(synced(gather(rows), false), t1, sim::Mode::Timing).cycles;
  double slow = run(synced(gather(rows), true), t2, sim::Mode::Timing).cycles;
  // Each taken row waits for the previous row's reads to land: at least one L2 read
  // latency per row more than the pipelined gather.
  EXPECT_GT(slow - fast, 0.8 * rows * testing::a3().mte2_latency_l2) << fast << " " << slow;
}

/// The code generator's own barrier before the GetValue of a buffer-element scalar: one per
/// Muls call (never shared with the call before, which reads the same element), none for
/// Duplicate (fill) or for a number.
TEST(OriginalSync, ABarrierBeforeEachScalarOpReadingAnElementNoneForFill) {
  KernelBuilder kb("scalars", 1);
  auto a = kb.input("a", {16}, f32);
  auto v = kb.input("v", {8}, f32);
  auto out = kb.output("out", {16}, f32);
  kb.launch();
  scope_v([&] {
    auto au = alloc_ub("au", {16}, f32);
    auto vu = alloc_ub("vu", {8}, f32);
    auto du = alloc_ub("du", {16}, f32);
    copy(a, au);
    copy(v, vu);
    tile::fill(du, at(vu, {3}));
    tile::muls(au, au, at(vu, {3}));
    tile::muls(au, au, at(vu, {3}));
    tile::muls(au, au, 2.0);
    tile::add(du, du, au);
    copy(du, out);
  });
  std::string text = unindented(ir::print(synced(kb.finish(), true)));
  const size_t fill = text.find("tile.fill du");
  const size_t mul = text.find("tile.mul au, au, vu[3:+1]");
  ASSERT_NE(fill, std::string::npos) << text;
  ASSERT_NE(mul, std::string::npos) << text;
  const std::string barrier = unindented(kBarrier);
  // fill, then a barrier before each of the two element muls, none before the number's
  EXPECT_NE(text.find(barrier + "\ntile.mul au, au, vu[3:+1]\n" + barrier +
                      "\ntile.mul au, au, vu[3:+1]\ntile.mul au, au, 2"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.substr(0, fill).find("#7"), std::string::npos) << text;
}

}  // namespace
}  // namespace tilepipe
