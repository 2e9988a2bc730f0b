// Dependence analysis: accesses per statement and pipe, overlap within an iteration, and
// loop-carried distances (ring-buffer slots, per-iteration slices, far and opaque indices).
#include "passes/dependence.h"

#include <gtest/gtest.h>

#include "test_util.h"
#include "tilepipe/lang.h"

namespace tilepipe {
namespace {

using namespace lang;
using passes::Access;
using passes::AccessKind;

ir::Buffer ub(const std::string& name, std::vector<int64_t> shape) {
  return ir::make_buffer(name, ir::Scope::UB, ir::DType::F32, std::move(shape),
                         ir::TensorRole::None, {});
}

Access acc(const ir::Buffer& b, std::vector<ir::Expr> start, std::vector<int64_t> extent,
           AccessKind k, ir::Pipe p = ir::Pipe::V) {
  Access a;
  a.region = ir::Region{b, std::move(start), std::move(extent)};
  a.kind = k;
  a.pipe = p;
  return a;
}

ir::ForStmt loop(const ir::Var& v, int64_t begin, int64_t end) {
  ir::ForStmt f;
  f.var = v;
  f.begin = ir::make_int(begin);
  f.end = ir::make_int(end);
  f.body = ir::make_stmt(ir::SeqStmt{}, {});
  return f;
}

ir::Expr I(int64_t v) {
  return ir::make_int(v);
}
ir::Expr V(const ir::Var& v) {
  return ir::make_var_ref(v);
}
ir::Expr bin(ir::BinOp op, ir::Expr a, ir::Expr b) {
  return ir::make_binary(op, std::move(a), std::move(b));
}

TEST(Dependence, CopyReadsSourceAndWritesDestinationOnItsPipe) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {64}, f32);
  scope_v([&] {
    auto b = alloc_ub("b", {64}, f32);
    auto m = alloc_ub("m", {8}, f32);
    copy(x, b);
    tile::sub(b, b, at(m, {3}));
  });
  auto p = kb.finish();
  auto accs = passes::collect_accesses(p.body, {});
  ASSERT_EQ(accs.size(), 5u);
  EXPECT_EQ(accs[0].region.buffer->name, "x");
  EXPECT_EQ(accs[0].kind, AccessKind::Read);
  EXPECT_EQ(accs[0].pipe, ir::Pipe::MTE2);
  EXPECT_EQ(accs[1].region.buffer->name, "b");
  EXPECT_EQ(accs[1].kind, AccessKind::Write);
  EXPECT_EQ(accs[1].pipe, ir::Pipe::MTE2);
  // tile.sub reads b, writes b on V; the scalar operand is read by the scalar unit.
  EXPECT_EQ(accs[2].pipe, ir::Pipe::V);
  EXPECT_EQ(accs[3].kind, AccessKind::Write);
  EXPECT_EQ(accs[4].region.buffer->name, "m");
  EXPECT_EQ(accs[4].pipe, ir::Pipe::S);
  EXPECT_EQ(accs[4].kind, AccessKind::Read);
}

TEST(Dependence, AccumulatingGemmAndAxpyReadTheirDestination) {
  KernelBuilder kb("k", 1);
  scope_c([&] {
    auto a = alloc_L0A("a", {16, 16}, f16);
    auto b = alloc_L0B("b", {16, 16}, f16);
    auto c = alloc_L0C("c", {16, 16}, f32);
    mma(a, b, c, /*init=*/false);
  });
  scope_v([&] {
    auto x = alloc_ub("x", {64}, f32);
    auto y = alloc_ub("y", {64}, f32);
    tile::axpy(y, x, 2.0);
  });
  auto accs = passes::collect_accesses(kb.finish().body, {});
  int reads_c = 0, reads_y = 0;
  for (const auto& a : accs) {
    if (a.kind != AccessKind::Read) continue;
    reads_c += a.region.buffer->name == "c";
    reads_y += a.region.buffer->name == "y";
  }
  EXPECT_EQ(reads_c, 1);
  EXPECT_EQ(reads_y, 1);
}

TEST(Dependence, DisjointSlicesDoNotConflictOverlappingOnesDo) {
  auto b = ub("b", {128});
  auto w0 = acc(b, {I(0)}, {64}, AccessKind::Write);
  auto r1 = acc(b, {I(64)}, {64}, AccessKind::Read);
  auto r2 = acc(b, {I(63)}, {64}, AccessKind::Read);
  EXPECT_FALSE(passes::may_conflict(w0, r1, {}));
  EXPECT_TRUE(passes::may_conflict(w0, r2, {}));
  // Two reads never conflict.
  EXPECT_FALSE(passes::may_conflict(r1, r2, {}));
}

TEST(Dependence, CommonVariablesCancelLocalOnesRange) {
  auto b = ub("b", {8, 64});
  auto i = ir::make_var("i");
  passes::VarRanges outer{{i->id, passes::Range::of(0, 7)}};
  // Same row i on both sides: conflict. Row i vs row i + 1: none.
  auto w = acc(b, {V(i), I(0)}, {1, 64}, AccessKind::Write);
  auto r_same = acc(b, {V(i), I(0)}, {1, 64}, AccessKind::Read);
  auto r_next = acc(b, {bin(ir::BinOp::Add, V(i), I(1)), I(0)}, {1, 64}, AccessKind::Read);
  EXPECT_TRUE(passes::may_conflict(w, r_same, outer));
  EXPECT_FALSE(passes::may_conflict(w, r_next, outer));
  // A loop inside the compared statement: its variable takes every value of its range.
  auto j = ir::make_var("j");
  auto inner = loop(j, 0, 8);
  auto r_any = acc(b, {V(j), I(0)}, {1, 64}, AccessKind::Read);
  r_any.loops = {&inner};
  r_any.local_ranges[j->id] = passes::Range::of(0, 7);
  EXPECT_TRUE(passes::may_conflict(w, r_any, outer));
}

TEST(Dependence, RingSlotsCarryAtTheirDepth) {
  auto b = ub("b", {2, 64});
  auto i = ir::make_var("i");
  auto l = loop(i, 0, 10);
  auto slot = bin(ir::BinOp::Mod, V(i), I(2));
  auto w = acc(b, {slot, I(0)}, {1, 64}, AccessKind::Write, ir::Pipe::MTE2);
  auto r = acc(b, {slot, I(0)}, {1, 64}, AccessKind::Read, ir::Pipe::V);
  EXPECT_EQ(passes::carried_distance(r, w, l, {}), 2);
  // A single buffer carries at distance 1.
  auto s = ub("s", {64});
  EXPECT_EQ(passes::carried_distance(acc(s, {I(0)}, {64}, AccessKind::Read),
                                     acc(s, {I(0)}, {64}, AccessKind::Write), l, {}),
            1);
  // Three slots indexed through an outer variable too: (k*3 + i) % 3 carries at 3.
  auto k = ir::make_var("k");
  auto b3 = ub("b3", {3, 64});
  auto slot3 =
      bin(ir::BinOp::Mod, bin(ir::BinOp::Add, bin(ir::BinOp::Mul, V(k), I(3)), V(i)), I(3));
  passes::VarRanges outer{{k->id, passes::Range::of(0, 4)}};
  EXPECT_EQ(passes::carried_distance(acc(b3, {slot3, I(0)}, {1, 64}, AccessKind::Read),
                                     acc(b3, {slot3, I(0)}, {1, 64}, AccessKind::Write), l, outer),
            3);
}

TEST(Dependence, PerIterationSlicesCarryNothing) {
  auto g = ub("g", {4096});
  auto i = ir::make_var("i");
  auto l = loop(i, 0, 64);
  auto at_i = bin(ir::BinOp::Mul, V(i), I(64));
  EXPECT_EQ(passes::carried_distance(acc(g, {at_i}, {64}, AccessKind::Write),
                                     acc(g, {at_i}, {64}, AccessKind::Read), l, {}),
            std::nullopt);
  // ... unless the slices overlap the next one.
  EXPECT_EQ(passes::carried_distance(acc(g, {at_i}, {65}, AccessKind::Write),
                                     acc(g, {at_i}, {64}, AccessKind::Read), l, {}),
            1);
}

TEST(Dependence, DistanceBeyondTheTripCountDoesNotExist) {
  auto b = ub("b", {2, 64});
  auto i = ir::make_var("i");
  auto l = loop(i, 0, 2);  // two iterations: slot i % 2 is never reused
  auto slot = bin(ir::BinOp::Mod, V(i), I(2));
  EXPECT_EQ(passes::carried_distance(acc(b, {slot, I(0)}, {1, 64}, AccessKind::Read),
                                     acc(b, {slot, I(0)}, {1, 64}, AccessKind::Write), l, {}),
            std::nullopt);
}

TEST(Dependence, FarDistancesAreReportedAsFarAndUnboundedLoopsProveIndependence) {
  auto g = ub("g", {100000});
  auto i = ir::make_var("i");
  auto n = ir::make_var("n");
  passes::VarRanges outer;  // n unknown: the trip count is not bounded
  ir::ForStmt l = loop(i, 0, 0);
  l.end = V(n);
  // Writes g[i + 100], reads g[i]: iteration k + 100 reads what k wrote.
  auto w = acc(g, {bin(ir::BinOp::Add, V(i), I(100))}, {1}, AccessKind::Write);
  auto r = acc(g, {V(i)}, {1}, AccessKind::Read);
  EXPECT_EQ(passes::carried_distance(w, r, l, outer, 64), 65);
  // Writes g[i], reads g[i + 100]: only later iterations write what k read... never
  // the other way round at a positive distance.
  auto w2 = acc(g, {V(i)}, {1}, AccessKind::Write);
  auto r2 = acc(g, {bin(ir::BinOp::Add, V(i), I(100))}, {1}, AccessKind::Read);
  EXPECT_EQ(passes::carried_distance(w2, r2, l, outer, 64), std::nullopt);
}

TEST(Dependence, OpaqueIndicesConflictUnlessIdenticalOverCommonVariables) {
  KernelBuilder kb("k", 1);
  auto tbl = kb.input("tbl", {8}, i32);
  auto b = ub("b", {16, 64});
  auto i = ir::make_var("i");
  passes::VarRanges outer{{i->id, passes::Range::of(0, 7)}};
  auto idx = load(tbl, {Ex(V(i))}).ir();
  auto w = acc(b, {idx, I(0)}, {1, 64}, AccessKind::Write);
  auto r = acc(b, {idx, I(0)}, {1, 64}, AccessKind::Read);
  auto r_other = acc(b, {I(3), I(0)}, {1, 64}, AccessKind::Read);
  EXPECT_TRUE(passes::may_conflict(w, r, outer));        // same element
  EXPECT_TRUE(passes::may_conflict(w, r_other, outer));  // may be row 3
  // Same opaque index in both: the other dimension decides.
  auto r_apart = acc(b, {idx, I(0)}, {1, 32}, AccessKind::Read);
  auto w_apart = acc(b, {idx, I(32)}, {1, 32}, AccessKind::Write);
  EXPECT_FALSE(passes::may_conflict(w_apart, r_apart, outer));
  kb.finish();
}

}  // namespace
}  // namespace tilepipe
