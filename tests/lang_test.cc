// The embedded DSL: misuse of the builder is a BuildError at the calling kernel line, and
// every node records the line of the DSL call that made it.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "test_util.h"
#include "tilepipe/ir.h"
#include "tilepipe/lang.h"

namespace tilepipe {
namespace {

using namespace lang;
using testing::here;

/// The BuildError thrown by `fn` (a failure is recorded if there is none).
BuildError build_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const BuildError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a BuildError, but the calls were accepted";
  return BuildError(ir::Loc{}, "");
}

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << part << "' not in:\n" << text;
}

TEST(Lang, TooManySliceIndicesIsABuildErrorAtTheCallingLine) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {4, 64}, f16);
  auto e = build_error([&] { x(0, 1, slice(0, 16)); });
  EXPECT_EQ(e.loc.str(), here(-1));
  EXPECT_EQ(e.message,
            "slice of 'x' has 3 indices, but the buffer has rank 2 (shape [4, 64]); pass at most "
            "2 indices");
}

TEST(Lang, ScalarReadWithTooManyIndicesIsABuildErrorAtTheCallingLine) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {64}, f32);
  auto e = build_error([&] { at(x, {0, 0}); });
  EXPECT_EQ(e.loc.str(), here(-1));
  EXPECT_TRUE(Contains(e.message, "slice of 'x' has 2 indices, but the buffer has rank 1"));
}

TEST(Lang, SlicingATensorWithoutABufferIsABuildError) {
  KernelBuilder kb("k", 1);
  Tensor unset;
  auto e = build_error([&] { unset(0); });
  EXPECT_EQ(e.loc.str(), here(-1));
  EXPECT_TRUE(Contains(e.message, "holds no buffer"));
}

TEST(Lang, EndForWithAScopeOpenIsABuildError) {
  KernelBuilder kb("k", 1);
  const ir::Loc loop{"model.py", 10, 1}, scope{"model.py", 11, 3}, end{"model.py", 12, 1};
  kb.begin_for("i", 0, 4, 1, ir::ForKind::Serial, {}, loop);
  kb.begin_scope(ir::CoreKind::V, scope);
  auto e = build_error([&] { kb.end_for(end); });
  EXPECT_EQ(e.loc.str(), "model.py:12");
  EXPECT_EQ(e.message,
            "end of loop found, but the innermost open block is a scope (opened at "
            "model.py:11); close blocks in reverse order");
}

TEST(Lang, LoopBodyThatLeavesAScopeOpenFailsAtTheLoopLine) {
  KernelBuilder kb("k", 1);
  auto e = build_error([&] {
    serial(4, [&](Ex) { kb.begin_scope(ir::CoreKind::C, ir::Loc{"model.py", 1, 1}); });
  });
  EXPECT_EQ(e.loc.str(), here(-2));
  EXPECT_TRUE(Contains(e.message, "end of loop found, but the innermost open block is a scope"));
}

TEST(Lang, EndScopeWithALoopOpenIsABuildError) {
  KernelBuilder kb("k", 1);
  kb.begin_scope(ir::CoreKind::C, ir::Loc{"model.py", 3, 1});
  kb.begin_for("k", 0, 8, 1, ir::ForKind::Serial, {}, ir::Loc{"model.py", 4, 3});
  auto e = build_error([&] { kb.end_scope(ir::Loc{"model.py", 6, 1}); });
  EXPECT_EQ(e.loc.str(), "model.py:6");
  EXPECT_TRUE(Contains(e.message,
                       "end of scope found, but the innermost open block is a loop "
                       "(opened at model.py:4)"));
}

TEST(Lang, EndWithNothingOpenIsABuildError) {
  KernelBuilder kb("k", 1);
  auto e = build_error([&] { kb.end_if(ir::Loc{"model.py", 9, 1}); });
  EXPECT_EQ(e.loc.str(), "model.py:9");
  EXPECT_TRUE(Contains(e.message, "end of if found, but the innermost open block is a kernel"));
}

TEST(Lang, ElseWithoutAnOpenIfIsABuildError) {
  KernelBuilder kb("k", 1);
  kb.begin_scope(ir::CoreKind::V, ir::Loc{"model.py", 2, 1});
  auto e = build_error([&] { kb.begin_else(ir::Loc{"model.py", 3, 1}); });
  EXPECT_EQ(e.loc.str(), "model.py:3");
  EXPECT_TRUE(
      Contains(e.message, "else without an open if (innermost block: scope at model.py:2)"));
  // A second else on the same if is just as wrong.
  kb.begin_if(1, ir::Loc{"model.py", 4, 1});
  kb.begin_else(ir::Loc{"model.py", 5, 1});
  auto again = build_error([&] { kb.begin_else(ir::Loc{"model.py", 6, 1}); });
  EXPECT_EQ(again.loc.str(), "model.py:6");
}

TEST(Lang, FinishWithAnOpenBlockNamesWhereItWasOpened) {
  KernelBuilder kb("attn", 1);
  kb.begin_scope(ir::CoreKind::V, ir::Loc{"model.py", 20, 1});
  kb.begin_if(1, ir::Loc{"model.py", 21, 3});
  auto e = build_error([&] { kb.finish(); });
  EXPECT_EQ(e.loc.str(), here(-1));
  EXPECT_EQ(e.message,
            "kernel 'attn' finished with a if still open (opened at model.py:21); close it with "
            "the matching end_ call");
}

TEST(Lang, DslCallOutsideAKernelBuilderIsABuildError) {
  const std::string want = "DSL call outside a kernel: create a KernelBuilder before building ops";
  auto e = build_error([] { alloc_ub("u", {16}, f16); });
  EXPECT_EQ(e.loc.str(), here(-1));
  EXPECT_EQ(e.message, want);

  Tensor x(ir::make_buffer("x", ir::Scope::GM, f16, {16}, ir::TensorRole::Input, {}));
  Tensor u(ir::make_buffer("u", ir::Scope::UB, f16, {16}, ir::TensorRole::None, {}));
  EXPECT_EQ(build_error([&] { copy(x, u); }).loc.str(), here());
  EXPECT_EQ(build_error([&] { tile::add(u, u, 1.0); }).loc.str(), here());
  EXPECT_EQ(build_error([] { set_flag(Pipe::V, Pipe::MTE2, 0); }).loc.str(), here());
  EXPECT_EQ(build_error([] { scope_v([] {}); }).loc.str(), here());
  EXPECT_EQ(build_error([] { serial(4, [](Ex) {}); }).loc.str(), here());
}

TEST(Lang, BuilderIsNoLongerCurrentAfterItIsDestroyed) {
  {
    KernelBuilder kb("k", 1);
    // A failing build unwinds through the lambda sugar; the builder still unregisters.
    build_error([&] { scope_v([&] { alloc_ub("u", {16}, f16)(0, 0); }); });
  }
  auto e = build_error([] { alloc_ub("u", {16}, f16); });
  EXPECT_TRUE(Contains(e.message, "DSL call outside a kernel"));
}

TEST(Lang, InnerBuilderIsCurrentUntilItIsDestroyed) {
  KernelBuilder outer("outer", 1);
  {
    KernelBuilder inner("inner", 1);
    alloc_ub("in_inner", {16}, f16);
    EXPECT_TRUE(Contains(ir::print(inner.finish()), "alloc in_inner"));
  }
  alloc_ub("in_outer", {16}, f16);
  std::string text = ir::print(outer.finish());
  EXPECT_TRUE(Contains(text, "alloc in_outer"));
  EXPECT_EQ(text.find("in_inner"), std::string::npos);
}

TEST(Lang, NodesRecordTheLineOfTheDslCall) {
  std::string kernel_line = here(1);
  KernelBuilder kb("k", 1);
  std::string input_line = here(1);
  auto x = kb.input("x", {64}, f16);
  std::string scope_line = here(1), alloc_line, loop_line, copy_line, op_line, flag_line;
  scope_v([&] {
    alloc_line = here(1);
    auto u = alloc_ub("u", {16}, f16);
    loop_line = here(1);
    serial(4, [&](Ex i) {
      copy_line = here(1);
      copy(x(slice(i * 16, 16)), u);
      op_line = here(1);
      tile::relu(u, u);
    });
    flag_line = here(1);
    set_flag(Pipe::V, Pipe::MTE2, 0);
  });
  ir::Program p = kb.finish();

  EXPECT_EQ(p.loc.str(), kernel_line);
  EXPECT_EQ(p.params.at(0)->loc.str(), input_line);
  const auto& scope = p.body;
  EXPECT_EQ(scope->loc.str(), scope_line);
  const auto& body = std::get<ir::SeqStmt>(std::get<ir::ScopeStmt>(scope->node).body->node).body;
  ASSERT_EQ(body.size(), 3u);
  EXPECT_EQ(body[0]->loc.str(), alloc_line);
  EXPECT_EQ(std::get<ir::AllocStmt>(body[0]->node).buffer->loc.str(), alloc_line);
  EXPECT_EQ(body[1]->loc.str(), loop_line);
  EXPECT_EQ(body[2]->loc.str(), flag_line);
  const auto& loop_body =
      std::get<ir::SeqStmt>(std::get<ir::ForStmt>(body[1]->node).body->node).body;
  ASSERT_EQ(loop_body.size(), 2u);
  EXPECT_EQ(loop_body[0]->loc.str(), copy_line);
  EXPECT_EQ(loop_body[1]->loc.str(), op_line);
}

TEST(Lang, ImperativeBuilderRecordsTheLocationsItIsGiven) {
  // What a Python front end does: drive the builder with the user's file:line.
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {64}, f16);
  kb.begin_scope(ir::CoreKind::V, ir::Loc{"model.py", 5, 1});
  Tensor u = kb.alloc("u", ir::Scope::UB, {16}, f16, ir::Loc{"model.py", 6, 5});
  Ex i = kb.begin_for("i", 0, 4, 1, ir::ForKind::Serial, {}, ir::Loc{"model.py", 7, 5});
  kb.emit(ir::make_stmt(ir::CopyStmt{x(slice(i * 16, 16)).ir(), Tile(u).ir(), false, std::nullopt},
                        ir::Loc{"model.py", 8, 9}));
  kb.end_for(ir::Loc{"model.py", 8, 9});
  kb.end_scope(ir::Loc{"model.py", 8, 9});
  ir::Program p = kb.finish();

  const auto& scope = p.body;
  EXPECT_EQ(scope->loc.str(), "model.py:5");
  const auto& body = std::get<ir::SeqStmt>(std::get<ir::ScopeStmt>(scope->node).body->node).body;
  ASSERT_EQ(body.size(), 2u);
  EXPECT_EQ(body[0]->loc.str(), "model.py:6");
  EXPECT_EQ(body[1]->loc.str(), "model.py:7");
  EXPECT_EQ(std::get<ir::ForStmt>(body[1]->node).body->loc.str(), "model.py:8");
}

TEST(Lang, ExplicitLoopVariableNamesAreKept) {
  KernelBuilder kb("k", 1);
  kb.begin_scope(ir::CoreKind::V, {});
  Ex kv = kb.begin_for("kv_tile", 2, 10, 2, ir::ForKind::Serial, {}, {});
  set_flag(Pipe::V, Pipe::MTE2, kv % 2);
  kb.end_for({});
  kb.end_scope({});
  EXPECT_EQ(ir::print(kb.finish()), R"(kernel k() block_num=1 {
  scope V {
    for kv_tile in serial(2, 10, step=2) {
      set_flag V->MTE2 #(kv_tile % 2)
    }
  }
}
)");
}

}  // namespace
}  // namespace tilepipe
