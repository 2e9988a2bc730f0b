// The compiled fast forms of index expressions (CExpr::finalize) against the postfix
// program they come from, over random expressions and slot values, and the forms the
// simulator relies on (affine, ring-buffer modulo) being found.
#include <gtest/gtest.h>

#include <optional>
#include <random>

#include "tilepipe/lower.h"

namespace tilepipe::lower {
namespace {

using ir::BinOp;

/// Appends a random expression of at most `depth` levels over slots 0..3 to `c`.
void random_expr(std::mt19937_64& rng, int depth, CExpr& c) {
  const int pick = static_cast<int>(rng() % (depth > 0 ? 6 : 2));
  if (pick == 0) {
    c.ops.push_back({CExpr::Const, BinOp::Add, static_cast<int64_t>(rng() % 17) - 8});
  } else if (pick == 1) {
    c.ops.push_back({CExpr::Slot, BinOp::Add, static_cast<int64_t>(rng() % 4)});
  } else if (pick == 5) {
    for (int i = 0; i < 3; ++i) random_expr(rng, depth - 1, c);
    c.ops.push_back({CExpr::Sel, BinOp::Add, 0});
  } else {
    static const BinOp kOps[] = {BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div,
                                 BinOp::Mod, BinOp::Min, BinOp::Max, BinOp::Lt};
    random_expr(rng, depth - 1, c);
    random_expr(rng, depth - 1, c);
    c.ops.push_back({CExpr::Bin, kOps[rng() % 8], 0});
  }
}

TEST(CExpr, FastFormsEvaluateLikeThePostfixProgram) {
  std::mt19937_64 rng(7);
  int fast = 0;
  for (int n = 0; n < 20000; ++n) {
    CExpr c;
    random_expr(rng, 1 + static_cast<int>(rng() % 4), c);
    c.finalize();
    fast += c.form != CExpr::Form::Stack;
    for (int k = 0; k < 8; ++k) {
      int64_t slots[4];
      for (auto& s : slots) s = static_cast<int64_t>(rng() % 41) - 20;
      // A division by zero throws in both forms alike (the simulator reports it).
      auto outcome = [](auto f) -> std::optional<int64_t> {
        try {
          return f();
        } catch (const lower::DivisionByZero&) {
          return std::nullopt;
        }
      };
      ASSERT_EQ(outcome([&] { return c.eval(slots); }),
                outcome([&] { return c.eval_stack(slots, nullptr); }))
          << "expression " << n;
    }
  }
  EXPECT_GT(fast, 5000);  // the property is tested on fast forms, not only on fallbacks
}

TEST(CExpr, DivisionByZeroThrowsInEveryForm) {
  // x / 0 with a constant 0 (never made a fast form), 7 % x and x / x at x = 0.
  for (auto ops : std::vector<std::vector<CExpr::Op>>{{{CExpr::Slot, BinOp::Add, 0},
                                                       {CExpr::Const, BinOp::Add, 0},
                                                       {CExpr::Bin, BinOp::Div, 0}},
                                                      {{CExpr::Const, BinOp::Add, 7},
                                                       {CExpr::Slot, BinOp::Add, 0},
                                                       {CExpr::Bin, BinOp::Mod, 0}},
                                                      {{CExpr::Slot, BinOp::Add, 0},
                                                       {CExpr::Slot, BinOp::Add, 0},
                                                       {CExpr::Bin, BinOp::Div, 0}}}) {
    CExpr c;
    c.ops = ops;
    c.finalize();
    const int64_t zero[1] = {0};
    EXPECT_THROW(c.eval(zero), lower::DivisionByZero);
    EXPECT_THROW(c.eval_stack(zero, nullptr), lower::DivisionByZero);
  }
}

TEST(CExpr, RingBufferSlotIsAffineModulo) {
  // (k * 4 + i) % 3 with k in slot 2, i in slot 3.
  CExpr c;
  c.ops = {{CExpr::Slot, BinOp::Add, 2}, {CExpr::Const, BinOp::Add, 4},
           {CExpr::Bin, BinOp::Mul, 0},  {CExpr::Slot, BinOp::Add, 3},
           {CExpr::Bin, BinOp::Add, 0},  {CExpr::Const, BinOp::Add, 3},
           {CExpr::Bin, BinOp::Mod, 0}};
  c.finalize();
  EXPECT_EQ(c.form, CExpr::Form::Affine);
  EXPECT_EQ(c.aff.nterms, 2);
  EXPECT_EQ(c.aff.nposts, 1);
  int64_t slots[4] = {0, 0, 5, 2};
  EXPECT_EQ(c.eval(slots), 22 % 3);
}

TEST(CExpr, ConstantOperationsChainAfterTheAffinePart) {
  // 1 - i % 3: modulo, then subtracted from a constant.
  CExpr c;
  c.ops = {{CExpr::Const, BinOp::Add, 1},
           {CExpr::Slot, BinOp::Add, 0},
           {CExpr::Const, BinOp::Add, 3},
           {CExpr::Bin, BinOp::Mod, 0},
           {CExpr::Bin, BinOp::Sub, 0}};
  c.finalize();
  EXPECT_EQ(c.form, CExpr::Form::Affine);
  EXPECT_EQ(c.aff.nposts, 2);
  int64_t slots[1] = {-4};
  EXPECT_EQ(c.eval(slots), -1);
}

TEST(CExpr, PowerOfTwoPostsRunAsUniformSteps) {
  // 5 - ((i * 3 + j) % 4) * 8, then / 2: the modulo with what follows it is one step, the
  // division a second.
  CExpr c;
  c.ops = {
      {CExpr::Const, BinOp::Add, 5}, {CExpr::Slot, BinOp::Add, 0}, {CExpr::Const, BinOp::Add, 3},
      {CExpr::Bin, BinOp::Mul, 0},   {CExpr::Slot, BinOp::Add, 1}, {CExpr::Bin, BinOp::Add, 0},
      {CExpr::Const, BinOp::Add, 4}, {CExpr::Bin, BinOp::Mod, 0},  {CExpr::Const, BinOp::Add, 8},
      {CExpr::Bin, BinOp::Mul, 0},   {CExpr::Bin, BinOp::Sub, 0},  {CExpr::Const, BinOp::Add, 2},
      {CExpr::Bin, BinOp::Div, 0}};
  c.finalize();
  ASSERT_EQ(c.form, CExpr::Form::Affine);
  EXPECT_EQ(c.aff.nposts, 4);
  EXPECT_EQ(c.aff.nsteps, 2);
  for (int64_t i = -6; i < 7; ++i)
    for (int64_t j = -6; j < 7; ++j) {
      int64_t slots[2] = {i, j};
      EXPECT_EQ(c.eval(slots), c.eval_stack(slots, nullptr)) << i << " " << j;
    }
  // A modulo by 3 has no step: the posts run one by one.
  CExpr d;
  d.ops = {
      {CExpr::Slot, BinOp::Add, 0}, {CExpr::Const, BinOp::Add, 3}, {CExpr::Bin, BinOp::Mod, 0}};
  d.finalize();
  EXPECT_EQ(d.aff.nsteps, -1);
}

TEST(CExpr, TwoNonLinearOperandsStayOnTheStack) {
  // i % 3 + j % 3
  CExpr c;
  c.ops = {{CExpr::Slot, BinOp::Add, 0}, {CExpr::Const, BinOp::Add, 3}, {CExpr::Bin, BinOp::Mod, 0},
           {CExpr::Slot, BinOp::Add, 1}, {CExpr::Const, BinOp::Add, 3}, {CExpr::Bin, BinOp::Mod, 0},
           {CExpr::Bin, BinOp::Add, 0}};
  c.finalize();
  EXPECT_EQ(c.form, CExpr::Form::Stack);
  int64_t slots[2] = {4, 5};
  EXPECT_EQ(c.eval(slots), 3);
}

TEST(CExpr, AffineSidesOfANonLinearOperationFoldIntoLeaves) {
  // min(i * 2 + 1, 9 - j % 4): two affine parts and the min, instead of ten ops.
  CExpr c;
  c.ops = {
      {CExpr::Slot, BinOp::Add, 0},  {CExpr::Const, BinOp::Add, 2}, {CExpr::Bin, BinOp::Mul, 0},
      {CExpr::Const, BinOp::Add, 1}, {CExpr::Bin, BinOp::Add, 0},   {CExpr::Const, BinOp::Add, 9},
      {CExpr::Slot, BinOp::Add, 1},  {CExpr::Const, BinOp::Add, 4}, {CExpr::Bin, BinOp::Mod, 0},
      {CExpr::Bin, BinOp::Sub, 0},   {CExpr::Bin, BinOp::Min, 0}};
  c.finalize();
  EXPECT_EQ(c.form, CExpr::Form::Stack);
  ASSERT_EQ(c.folded.size(), 3u);
  EXPECT_EQ(c.folded[0].kind, CExpr::Leaf);
  EXPECT_EQ(c.folded[1].kind, CExpr::Leaf);
  EXPECT_EQ(c.leaves.size(), 2u);
  for (int64_t i = -3; i < 4; ++i)
    for (int64_t j = -5; j < 6; ++j) {
      int64_t slots[2] = {i, j};
      EXPECT_EQ(c.eval(slots), c.eval_stack(slots, nullptr));
    }
}

}  // namespace
}  // namespace tilepipe::lower
