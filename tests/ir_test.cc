// Tile IR: the printed form of DSL-built programs (golden text), printer details, structural
// equality up to loop-variable renaming, and the visitor / mutator traversals.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <variant>

#include "test_util.h"
#include "tilepipe/ir.h"
#include "tilepipe/ir_range.h"
#include "tilepipe/lang.h"

namespace tilepipe {
namespace {

using namespace lang;

/// Vector side of a tiny scaled-row kernel: every tile-op family once.
ir::Program build_vector_kernel() {
  KernelBuilder kb("vrow", 2);
  auto x = kb.input("x", {4, 256}, f16);
  auto y = kb.output("y", {4, 256}, f16);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto xin = alloc_ub("xin", {128}, f16);
    auto work = alloc_ub("work", {128}, f32);
    auto row = alloc_ub("row", {2, 128}, f32);
    auto m = alloc_ub("m", {2, 1}, f32);
    set_flag(Pipe::V, Pipe::MTE2, 0);
    serial(2, [&](Ex i) {
      wait_flag(Pipe::V, Pipe::MTE2, 0);
      copy(x(cid * 2 + i, slice(vid * 128, 128)), xin,
           {.transpose = false, .pad_value = -INFINITY});
      set_flag(Pipe::MTE2, Pipe::V, 0);
      wait_flag(Pipe::MTE2, Pipe::V, 0);
      tile::cast(work, xin);
      set_flag(Pipe::V, Pipe::MTE2, 0);
      tile::mul(work, work, 0.5);
      tile::fill(row[i], 1.0);
      tile::add(row[i], row[i], work);
      reduce_max(row, m, /*dim=*/-1);
      reduce_sum(row[i], m(i), -1, /*clear=*/false);
      tile::broadcast(row, m);
      tile::axpy(row[i], work, at(m, {i, 0}));
      tile::exp(work, work);
      tile::compare(row[0], row[1], work, CmpMode::GT);
      tile::cast(xin, work);
      pipe_barrier(Pipe::V);
      copy(xin, y(cid * 2 + i, slice(vid * 128, 128)));
    });
    wait_flag(Pipe::V, Pipe::MTE2, 0);
  });
  return kb.finish();
}

TEST(Ir, VectorKernelPrintsGolden) {
  EXPECT_EQ(ir::print(build_vector_kernel()),
            R"(kernel vrow(x: GM f16[4, 256] in, y: GM f16[4, 256] out) block_num=2 {
  scope V {
    alloc xin: UB f16[128]
    alloc work: UB f32[128]
    alloc row: UB f32[2, 128]
    alloc m: UB f32[2, 1]
    set_flag V->MTE2 #0
    for i in serial(0, 2) {
      wait_flag V->MTE2 #0
      copy x[((cid * 2) + i):+1, (vid * 128):+128] -> xin pad=-inf
      set_flag MTE2->V #0
      wait_flag MTE2->V #0
      tile.cast work, xin
      set_flag V->MTE2 #0
      tile.mul work, work, 0.5
      tile.fill row[i:+1, 0:+128], 1.0
      tile.add row[i:+1, 0:+128], row[i:+1, 0:+128], work
      reduce_max row -> m dim=-1
      reduce_sum row[i:+1, 0:+128] -> m[i:+1, 0:+1] dim=-1 merge
      tile.broadcast row, m
      tile.axpy row[i:+1, 0:+128], work, m[i:+1, 0:+1]
      tile.exp work, work
      tile.compare.GT row[0:+1, 0:+128], row[1:+1, 0:+128], work
      tile.cast xin, work
      pipe_barrier V
      copy xin -> y[((cid * 2) + i):+1, (vid * 128):+128]
    }
    wait_flag V->MTE2 #0
  }
}
)");
}

/// Cube side of a K-looped matmul handing its result to the vector cores via a workspace.
ir::Program build_cube_kernel() {
  return testing::small_cube_program("mm");
}

TEST(Ir, CubeKernelPrintsGolden) {
  EXPECT_EQ(ir::print(build_cube_kernel()),
            R"(kernel mm(a: GM f16[32, 64] in, bt: GM f16[32, 64] in) block_num=24 {
  workspace ws: GM f32[24, 32, 32] workspace
  scope C {
    alloc a1: L1 f16[32, 64]
    alloc b1: L1 f16[32, 64]
    alloc a0: L0A f16[2, 32, 32]
    alloc b0: L0B f16[2, 32, 32]
    alloc c0: L0C f32[32, 32]
    copy a -> a1
    copy bt -> b1
    set_flag MTE2->MTE1 #0
    wait_flag MTE2->MTE1 #0
    for i in serial(0, 2) {
      copy a1[0:+32, (i * 32):+32] -> a0[i:+1, 0:+32, 0:+32]
      copy b1[0:+32, (i * 32):+32] -> b0[i:+1, 0:+32, 0:+32] transpose
      pipe_barrier MTE1
      if (i == 0) {
        gemm a0[i:+1, 0:+32, 0:+32] x b0[i:+1, 0:+32, 0:+32] -> c0 init
      }
      else {
        gemm a0[i:+1, 0:+32, 0:+32] x b0[i:+1, 0:+32, 0:+32] -> c0 acc
      }
    }
    set_flag M->FIX #0
    wait_flag M->FIX #0
    copy c0 -> ws[cid:+1, 0:+32, 0:+32]
    set_cross_flag FIX #3 mode=2
  }
  scope V {
    alloc out: UB f32[16, 32]
    wait_cross_flag #3
    copy ws[cid:+1, (vid * 16):+16, 0:+32] -> out
  }
}
)");
}

TEST(Ir, FullBufferRegionPrintsAsBareName) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {1, 64}, f16);
  // Every way of naming the whole buffer is the bare name ...
  EXPECT_EQ(ir::print(Tile(x).ir()), "x");
  EXPECT_EQ(ir::print(x(all, all).ir()), "x");
  EXPECT_EQ(ir::print(x(0).ir()), "x");
  EXPECT_EQ(ir::print(x(0, slice(0, 64)).ir()), "x");
  // ... and anything smaller, or starting elsewhere, is a slice.
  EXPECT_EQ(ir::print(x(0, slice(0, 32)).ir()), "x[0:+1, 0:+32]");
  EXPECT_EQ(ir::print(x(0, slice(32, 32)).ir()), "x[0:+1, 32:+32]");
}

TEST(Ir, UnnamedTrailingDimensionsAreTakenWhole) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {2, 4, 64}, f16);
  EXPECT_EQ(ir::print(x(1).ir()), "x[1:+1, 0:+4, 0:+64]");
  EXPECT_EQ(ir::print(x[1].ir()), "x[1:+1, 0:+4, 0:+64]");
  EXPECT_EQ(ir::print(x(1, rows(2, 2)).ir()), "x[1:+1, 2:+2, 0:+64]");
}

TEST(Ir, NestedLoopsAreNamedByDepth) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {64}, f16);
  scope_v([&] {
    auto u = alloc_ub("u", {16}, f16);
    serial(2, [&](Ex i) {
      serial(2,
             [&](Ex j) { serial(2, [&](Ex k) { copy(x(slice(i * 32 + j * 16 + k, 16)), u); }); });
    });
  });
  EXPECT_EQ(ir::print(kb.finish()), R"(kernel k(x: GM f16[64] in) block_num=1 {
  scope V {
    alloc u: UB f16[16]
    for i in serial(0, 2) {
      for j in serial(0, 2) {
        for k in serial(0, 2) {
          copy x[(((i * 32) + (j * 16)) + k):+16] -> u
        }
      }
    }
  }
}
)");
}

TEST(Ir, DistinctVariablesWithTheSameNameGetSuffixes) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {64}, f16);
  scope_v([&] {
    auto u = alloc_ub("u", {16}, f16);
    serial(4, [&](Ex i) { copy(x(slice(i * 16, 16)), u); });
    serial(4, [&](Ex i) { copy(u, x(slice(i * 16, 16))); });
    Ex t = kb.begin_for("i", 0, 4, 1, ir::ForKind::Serial, {}, ir::Loc{});
    copy(x(slice(t * 16, 16)), u);
    kb.end_for(ir::Loc{});
  });
  EXPECT_EQ(ir::print(kb.finish()), R"(kernel k(x: GM f16[64] in) block_num=1 {
  scope V {
    alloc u: UB f16[16]
    for i in serial(0, 4) {
      copy x[(i * 16):+16] -> u
    }
    for i.1 in serial(0, 4) {
      copy u -> x[(i.1 * 16):+16]
    }
    for i.2 in serial(0, 4) {
      copy x[(i.2 * 16):+16] -> u
    }
  }
}
)");
}

TEST(Ir, PrintedNamesDoNotDependOnGlobalIdCounters) {
  // A second build allocates fresh variable and buffer ids; the text must not change.
  EXPECT_EQ(ir::print(build_vector_kernel()), ir::print(build_vector_kernel()));
}

TEST(Ir, ConstantsFoldWithFloorDivision) {
  EXPECT_EQ(ir::print((Ex(2) * 64 + 1).ir()), "129");
  EXPECT_EQ(ir::print((Ex(-7) / 2).ir()), "-4");
  EXPECT_EQ(ir::print((Ex(-7) % 2).ir()), "1");
  EXPECT_EQ(ir::print(min(Ex(3), 5).ir()), "3");
  EXPECT_EQ(ir::print((Ex(3) < 5).ir()), "1");
  // Division by a constant zero is not folded, so it stays visible in the IR.
  EXPECT_EQ(ir::print((Ex(7) / 0).ir()), "(7 / 0)");
  // Only constant operands fold; vid * (4 * 16) keeps vid.
  KernelBuilder kb("k", 1);
  auto [cid, vid] = kb.launch();
  EXPECT_EQ(ir::print((vid * (Ex(4) * 16)).ir()), "(vid * 64)");
  EXPECT_EQ(ir::print(max(cid, 1).ir()), "max(cid, 1)");
  EXPECT_EQ(ir::print(select(cid == 0, vid, 2).ir()), "select((cid == 0), vid, 2)");
}

TEST(Ir, LoopHeadersPrintStepAndPipelineOptions) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {256}, f16);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    serial(0, 256, 64, [&](Ex off) { copy(x(slice(off, 64)), u); });
    pipelined(4, {.num_stages = 3, .cross_interval = 2},
              [&](Ex i) { copy(x(slice(i * 64, 64)), u); });
    parallel(64, [&](Ex) { tile::relu(u, u); });
  });
  EXPECT_EQ(ir::print(kb.finish()), R"(kernel k(x: GM f16[256] in) block_num=1 {
  scope V {
    alloc u: UB f16[64]
    for i in serial(0, 256, step=64) {
      copy x[i:+64] -> u
    }
    for i.1 in pipelined(0, 4, num_stages=3, cross_interval=2) {
      copy x[(i.1 * 64):+64] -> u
    }
    for i.2 in parallel(0, 64) {
      tile.relu u, u
    }
  }
}
)");
}

// ---- structural equality ----------------------------------------------------------------

/// One small kernel with knobs, so single edits can be compared against the original.
struct Knobs {
  int64_t rows = 64;
  bool use_sub = false;
  int flag_id = 1;
  int trips = 4;
};

ir::Program build_knobbed(const Knobs& kn) {
  KernelBuilder kb("knob", 24);
  auto x = kb.input("x", {256, 64}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto u = alloc_ub("u", {kn.rows, 64}, f32);
    serial(kn.trips, [&](Ex i) {
      serial(2, [&](Ex j) {
        copy(x(rows(i * 64 + j * 32, kn.rows / 2), all), u(rows(0, kn.rows / 2), all));
        if (kn.use_sub)
          tile::sub(u, u, 1.0);
        else
          tile::add(u, u, 1.0);
        set_flag(Pipe::V, Pipe::MTE2, kn.flag_id);
      });
    });
  });
  return kb.finish();
}

TEST(IrEqual, TwoBuildsOfTheSameKernelAreEqual) {
  ir::Program a = build_knobbed({}), b = build_knobbed({});
  EXPECT_TRUE(ir::equal(a, b));
  EXPECT_TRUE(ir::equal(a.body, b.body));
  EXPECT_TRUE(ir::equal(build_cube_kernel(), build_cube_kernel()));
}

TEST(IrEqual, ChangingOneExtentMakesProgramsUnequal) {
  EXPECT_FALSE(ir::equal(build_knobbed({}), build_knobbed({.rows = 32})));
}

TEST(IrEqual, ChangingOneOpMakesProgramsUnequal) {
  EXPECT_FALSE(ir::equal(build_knobbed({}), build_knobbed({.use_sub = true})));
}

TEST(IrEqual, ChangingOneFlagIdMakesProgramsUnequal) {
  EXPECT_FALSE(ir::equal(build_knobbed({}), build_knobbed({.flag_id = 2})));
}

TEST(IrEqual, ChangingOneLoopBoundMakesProgramsUnequal) {
  EXPECT_FALSE(ir::equal(build_knobbed({}), build_knobbed({.trips = 3})));
}

/// for i { for j { copy x[use_outer ? i : j] } }
ir::Stmt nested_loop_reading(bool use_outer) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {64}, f16);
  scope_v([&] {
    auto u = alloc_ub("u", {16}, f16);
    serial(4, [&](Ex i) {
      serial(4, [&](Ex j) { copy(x(slice((use_outer ? i : j) * 16, 16)), u); });
    });
  });
  return kb.finish().body;
}

TEST(IrEqual, SwappingWhichLoopVariableIsReadMakesStatementsUnequal) {
  EXPECT_TRUE(ir::equal(nested_loop_reading(true), nested_loop_reading(true)));
  EXPECT_FALSE(ir::equal(nested_loop_reading(true), nested_loop_reading(false)));
}

TEST(IrEqual, DistinctFreeVariablesDoNotMatchOneVariable) {
  auto x = ir::make_var("x"), y = ir::make_var("y"), z = ir::make_var("z");
  auto ref = [](const ir::Var& v) { return ir::make_var_ref(v); };
  EXPECT_TRUE(ir::equal(ir::make_binary(ir::BinOp::Add, ref(x), ref(y)),
                        ir::make_binary(ir::BinOp::Add, ref(y), ref(z))));
  EXPECT_FALSE(ir::equal(ir::make_binary(ir::BinOp::Add, ref(x), ref(y)),
                         ir::make_binary(ir::BinOp::Add, ref(z), ref(z))));
  EXPECT_FALSE(ir::equal(ir::make_binary(ir::BinOp::Add, ref(z), ref(z)),
                         ir::make_binary(ir::BinOp::Add, ref(x), ref(y))));
}

/// `for v in [0, 4) { set_flag #v }` twice, with one shared variable or two distinct ones.
ir::Stmt two_loops(bool share_var) {
  auto v1 = ir::make_var("v"), v2 = share_var ? v1 : ir::make_var("w");
  auto loop = [](const ir::Var& v) {
    ir::ForStmt f;
    f.var = v;
    f.begin = ir::make_int(0);
    f.end = ir::make_int(4);
    f.body = ir::make_stmt(ir::SetFlagStmt{ir::Pipe::V, ir::Pipe::MTE2, ir::make_var_ref(v)}, {});
    return ir::make_stmt(std::move(f), {});
  };
  return ir::make_stmt(ir::SeqStmt{{loop(v1), loop(v2)}}, {});
}

TEST(IrEqual, LoopVariableBindingIsScopedToItsLoop) {
  // A pass may reuse one variable for two sibling loops; that is the same program.
  EXPECT_TRUE(ir::equal(two_loops(true), two_loops(false)));
  EXPECT_TRUE(ir::equal(two_loops(false), two_loops(true)));
}

TEST(IrEqual, BuffersCompareByNameScopeDtypeAndShape) {
  auto mk = [](const std::string& name, ir::Scope s, ir::DType t, std::vector<int64_t> shape) {
    return ir::make_stmt(
        ir::AllocStmt{ir::make_buffer(name, s, t, std::move(shape), ir::TensorRole::None, {})}, {});
  };
  auto base = mk("b", ir::Scope::UB, ir::DType::F16, {16});
  EXPECT_TRUE(ir::equal(base, mk("b", ir::Scope::UB, ir::DType::F16, {16})));
  EXPECT_FALSE(ir::equal(base, mk("c", ir::Scope::UB, ir::DType::F16, {16})));
  EXPECT_FALSE(ir::equal(base, mk("b", ir::Scope::L1, ir::DType::F16, {16})));
  EXPECT_FALSE(ir::equal(base, mk("b", ir::Scope::UB, ir::DType::F32, {16})));
  EXPECT_FALSE(ir::equal(base, mk("b", ir::Scope::UB, ir::DType::F16, {1, 16})));
}

// ---- traversals -------------------------------------------------------------------------

using IdMap = std::map<int64_t, int64_t>;

/// Renumbers every set_flag event id through `map` (e.g. to make room for another handshake).
class RenumberSetFlags : public ir::StmtMutator {
 public:
  explicit RenumberSetFlags(IdMap map) : map_(std::move(map)) {}
  ir::Stmt mutate_leaf(const ir::Stmt& self) override {
    auto* f = std::get_if<ir::SetFlagStmt>(&self->node);
    if (!f) return self;
    auto it = map_.find(ir::as_const(f->event_id).value_or(-1));
    if (it == map_.end()) return self;
    ir::SetFlagStmt g = *f;
    g.event_id = ir::make_int(it->second);
    return ir::make_stmt(std::move(g), self->loc);
  }

 private:
  IdMap map_;
};

/// `text` with its first `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << "'" << from << "' not in:\n" << text;
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

/// The i-th statement of a SeqStmt.
const ir::Stmt& child(const ir::Stmt& s, size_t i) {
  return std::get<ir::SeqStmt>(s->node).body.at(i);
}
const ir::Stmt& body_of_scope(const ir::Stmt& s) {
  return std::get<ir::ScopeStmt>(s->node).body;
}

TEST(IrMutator, RewritesSetFlagIdsAndSharesUntouchedSubtrees) {
  ir::Program p = build_cube_kernel();
  const std::string before = ir::print(p);
  ir::Stmt out = RenumberSetFlags(IdMap{{0, 5}}).mutate(p.body);

  // Only the two set_flag #0 lines change in the text.
  std::string want = replaced(before, "set_flag MTE2->MTE1 #0", "set_flag MTE2->MTE1 #5");
  want = replaced(want, "set_flag M->FIX #0", "set_flag M->FIX #5");
  ir::Program q = p;
  q.body = out;
  EXPECT_EQ(ir::print(q), want);
  EXPECT_EQ(ir::print(p), before) << "the input program must not change";

  // Path to the changes is rebuilt; everything else is the same node.
  ASSERT_NE(out, p.body);
  const ir::Stmt &c_old = body_of_scope(child(p.body, 0)), &c_new = body_of_scope(child(out, 0));
  EXPECT_NE(c_old, c_new);
  EXPECT_EQ(child(out, 1), child(p.body, 1)) << "scope V has no set_flag: shared";
  EXPECT_EQ(child(c_new, 0), child(c_old, 0)) << "alloc a1 shared";
  EXPECT_EQ(child(c_new, 8), child(c_old, 8)) << "wait_flag shared";
  EXPECT_EQ(child(c_new, 9), child(c_old, 9)) << "the K loop has no set_flag: shared";
  EXPECT_NE(child(c_new, 7), child(c_old, 7)) << "set_flag MTE2->MTE1 #0 replaced";
  EXPECT_EQ(child(c_new, 7)->loc.line, child(c_old, 7)->loc.line) << "location kept";
}

TEST(IrMutator, MutatorThatChangesNothingReturnsTheSameTree) {
  ir::Program p = build_cube_kernel();
  EXPECT_EQ(RenumberSetFlags(IdMap{{7, 6}}).mutate(p.body), p.body);
  EXPECT_EQ(ir::StmtMutator().mutate(p.body), p.body);
}

/// Drops every pipe_barrier (returning null removes a statement from its sequence).
class DropBarriers : public ir::StmtMutator {
 public:
  ir::Stmt mutate_leaf(const ir::Stmt& self) override {
    return std::holds_alternative<ir::PipeBarrierStmt>(self->node) ? nullptr : self;
  }
};

TEST(IrMutator, ReturningNullRemovesTheStatement) {
  ir::Program p = build_vector_kernel();
  const std::string before = ir::print(p);
  p.body = DropBarriers().mutate(p.body);
  EXPECT_EQ(ir::print(p), replaced(before, "      pipe_barrier V\n", ""));
}

/// Counts statements by kind; recursion is the default behaviour of the base class.
class CountByKind : public ir::StmtVisitor {
 public:
  std::map<std::string, int> n;
  void visit_seq(const ir::SeqStmt& s, const ir::StmtNode& node) override {
    ++n["seq"];
    StmtVisitor::visit_seq(s, node);
  }
  void visit_for(const ir::ForStmt& s, const ir::StmtNode& node) override {
    ++n["for"];
    StmtVisitor::visit_for(s, node);
  }
  void visit_if(const ir::IfStmt& s, const ir::StmtNode& node) override {
    ++n["if"];
    StmtVisitor::visit_if(s, node);
  }
  void visit_scope(const ir::ScopeStmt& s, const ir::StmtNode& node) override {
    ++n[s.kind == ir::CoreKind::C ? "scope C" : "scope V"];
    StmtVisitor::visit_scope(s, node);
  }
  void visit_alloc(const ir::AllocStmt&, const ir::StmtNode&) override { ++n["alloc"]; }
  void visit_copy(const ir::CopyStmt&, const ir::StmtNode&) override { ++n["copy"]; }
  void visit_gemm(const ir::GemmStmt&, const ir::StmtNode&) override { ++n["gemm"]; }
  void visit_tile(const ir::TileOpStmt&, const ir::StmtNode&) override { ++n["tile"]; }
  void visit_reduce(const ir::ReduceStmt&, const ir::StmtNode&) override { ++n["reduce"]; }
  void visit_set_flag(const ir::SetFlagStmt&, const ir::StmtNode&) override { ++n["set_flag"]; }
  void visit_wait_flag(const ir::WaitFlagStmt&, const ir::StmtNode&) override { ++n["wait_flag"]; }
  void visit_barrier(const ir::PipeBarrierStmt&, const ir::StmtNode&) override { ++n["barrier"]; }
  void visit_set_cross(const ir::SetCrossFlagStmt&, const ir::StmtNode&) override {
    ++n["set_cross"];
  }
  void visit_wait_cross(const ir::WaitCrossFlagStmt&, const ir::StmtNode&) override {
    ++n["wait_cross"];
  }
};

TEST(IrVisitor, CountsEveryNodeKindIncludingBothIfBranches) {
  CountByKind c;
  c.visit(build_cube_kernel().body);
  const std::map<std::string, int> want = {
      // A block of one statement is that statement: only 4 blocks here need a SeqStmt (kernel,
      // scope C, loop body, scope V); the if branches hold a single gemm each.
      {"seq", 4},       {"scope C", 1},   {"scope V", 1},   {"alloc", 6},   {"copy", 6},
      {"for", 1},       {"if", 1},        {"gemm", 2},      {"barrier", 1}, {"set_flag", 2},
      {"wait_flag", 2}, {"set_cross", 1}, {"wait_cross", 1}};
  EXPECT_EQ(c.n, want);
}

TEST(IrVisitor, VisitsTileOpsAndReductionsInLoops) {
  CountByKind c;
  c.visit(build_vector_kernel().body);
  EXPECT_EQ(c.n["tile"], 9);
  EXPECT_EQ(c.n["reduce"], 2);
  EXPECT_EQ(c.n["copy"], 2);
  EXPECT_EQ(c.n["for"], 1);
}

TEST(IrRange, GuardsAreDecidedOnlyWhenEveryValueAgrees) {
  using ir::BinOp;
  auto j = ir::make_var("j");
  ir::Expr jr = ir::make_var_ref(j);
  // j in [0, 7]: min(2, 16 - 2 j) is 2 for every j; cid in [0, 23].
  ir::VarRanges r = {{j->id, ir::Range::of(0, 7)}, {ir::kCidVar, ir::Range::of(0, 23)}};
  auto trips = ir::make_binary(BinOp::Min, ir::make_int(2),
                               ir::make_binary(BinOp::Sub, ir::make_int(16),
                                               ir::make_binary(BinOp::Mul, ir::make_int(2), jr)));
  EXPECT_EQ(ir::eval_range(trips, r).lo, 2);
  EXPECT_EQ(ir::decided(ir::make_binary(BinOp::Lt, ir::make_int(0), trips), r), true);
  EXPECT_EQ(ir::decided(ir::make_binary(BinOp::Ge, jr, ir::make_int(8)), r), false);
  EXPECT_EQ(ir::decided(ir::make_binary(BinOp::Ge, jr, ir::make_int(1)), r), std::nullopt);
  // An unbounded variable or a load decides nothing.
  auto k = ir::make_var("k");
  EXPECT_EQ(ir::decided(ir::make_binary(BinOp::Ge, ir::make_var_ref(k), ir::make_int(0)), r),
            std::nullopt);
  EXPECT_EQ(ir::decided(ir::make_int(1), r), true);
}

}  // namespace
}  // namespace tilepipe
