// The verifier: one must-fail test per diagnostic kind (message, fix and the file:line of the
// offending DSL call), plus programs it must accept, including slices it cannot prove safe
// but must not reject (those are checked at run time by the simulator).
#include <gtest/gtest.h>

#include <functional>
#include <source_location>
#include <string>
#include <vector>

#include "test_util.h"
#include "tilepipe/ir.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/sim.h"
#include "tilepipe/verify.h"

namespace tilepipe {
namespace {

using namespace lang;
using testing::expect_diag;
using testing::here;

std::vector<Diagnostic> diags_of(const ir::Program& p) {
  return verify(p, testing::a3());
}

/// Every diagnostic, one per line, for failure messages.
std::string text_of(const std::vector<Diagnostic>& d) {
  std::string s;
  for (const auto& x : d) s += x.kind + ": " + x.str() + "\n";
  return s;
}

#define EXPECT_VERIFIES(program)                    \
  do {                                              \
    auto diags_ = diags_of(program);                \
    EXPECT_TRUE(diags_.empty()) << text_of(diags_); \
  } while (0)

// ---- programs the verifier accepts ------------------------------------------------------

/// One row per AIV: load, f32 softmax-style math, store, with its flags.
ir::Program build_good_vector() {
  KernelBuilder kb("good_v", 2);
  auto x = kb.input("x", {4, 128}, f16);
  auto y = kb.output("y", {4, 128}, f16);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto xin = alloc_ub("xin", {128}, f16);
    auto work = alloc_ub("work", {1, 128}, f32);
    auto buf = alloc_ub("buf", {1, 128}, f32);
    auto m = alloc_ub("m", {1, 1}, f32);
    Ex r = cid * 2 + vid;
    copy(x(r), xin);
    set_flag(Pipe::MTE2, Pipe::V, 0);
    wait_flag(Pipe::MTE2, Pipe::V, 0);
    tile::cast(work, xin);
    reduce_max(work, m);
    tile::broadcast(buf, m);
    tile::sub(work, work, buf);
    tile::exp(work, work);
    tile::axpy(work, buf, at(m, {0, 0}));
    tile::cast(xin, work);
    set_flag(Pipe::V, Pipe::MTE3, 0);
    wait_flag(Pipe::V, Pipe::MTE3, 0);
    copy(xin, y(r));
  });
  return kb.finish();
}

/// A K-looped matmul whose result goes to the vector cores through a workspace.
ir::Program build_good_cube() {
  return testing::small_cube_program("good_c");
}

TEST(Verify, SmallCorrectProgramsHaveNoDiagnostics) {
  EXPECT_VERIFIES(build_good_vector());
  EXPECT_VERIFIES(build_good_cube());
}

TEST(Verify, SliceStartCorrelatedWithCidThroughALoopBoundIsNotRejected) {
  // i runs over [0, 4 - cid), so cid + i <= 3 always. Interval arithmetic alone gives
  // cid + i in [0, 6]; since the loop bound depends on cid that range is not exact, and an
  // inexact range only rejects slices that are out of bounds for every value.
  KernelBuilder kb("k", 4);
  auto x = kb.input("x", {4, 64}, f16);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    serial(0, 4 - cid, [&](Ex i) { copy(x(cid + i), u); });
  });
  EXPECT_VERIFIES(kb.finish());
}

TEST(Verify, SteppedLoopCoveringTheBufferExactlyIsAccepted) {
  // off takes 0, 64, 128, 192: the last tile ends exactly at 256 (not at 255 + 64).
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {256}, f16);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    serial(0, 256, 64, [&](Ex off) { copy(x(slice(off, 64)), u); });
  });
  EXPECT_VERIFIES(kb.finish());
}

TEST(Verify, SteppedLoopOvershootingTheBufferIsRejected) {
  // off takes 0, 64, ..., 256: the last tile reads [256, 320).
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {256}, f16);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    serial(0, 257, 64, [&](Ex off) { copy(x(slice(off, 64)), u); });
  });
  expect_diag(kb.finish(), "slice-bounds", {"reads [256, 320)", here(-2)});
}

TEST(Verify, GuardedTailSliceIsNotRejected) {
  // The fourth tile would run past the end, but the if keeps it from executing.
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {192}, f16);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    serial(4, [&](Ex i) { if_(i < 3, [&] { copy(x(slice(i * 64, 64)), u); }); });
  });
  EXPECT_VERIFIES(kb.finish());
}

TEST(Verify, ScaledUnknownRangeDoesNotOverflowTheRangeArithmetic) {
  // 3 / i has no useful bound where i may be 0; scaling that "unknown" range must saturate
  // (int64 overflow would be undefined behaviour) and the slice is left to the run.
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {256}, f16);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    serial(4, [&](Ex i) { copy(x(slice(Ex(3) / i * 1024 * 1024 * 1024, 64)), u); });
  });
  EXPECT_VERIFIES(kb.finish());
}

TEST(Verify, IfOnAnotherVariableStillChecksTheSliceExactly) {
  // The guard is on cid, not on i: every i still runs, so i = 3 is a real overrun.
  KernelBuilder kb("k", 2);
  auto x = kb.input("x", {192}, f16);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    serial(4, [&](Ex i) { if_(cid == 0, [&] { copy(x(slice(i * 64, 64)), u); }); });
  });
  expect_diag(kb.finish(), "slice-bounds", {"reads [192, 256)", here(-2)});
}

TEST(Verify, DynamicOutOfRangeIsLeftToTheSimulator) {
  // i runs over [0, 5 - cid): one trip too many on every core, but only the run shows it
  // (the range of cid + i is inexact, and its low end is in bounds).
  KernelBuilder kb("k", 4);
  auto x = kb.input("x", {4, 64}, f16);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    serial(0, 5 - cid, [&](Ex i) { copy(x(cid + i), u); });
  });
  const std::string copy_line = here(-2);
  ir::Program p = kb.finish();
  EXPECT_VERIFIES(p);
  testing::expect_user_error(
      [&] {
        auto low = lower::lower(p, testing::a3());
        sim::HostData io;
        sim::simulate(low, testing::a3(), &io);
      },
      {"slice of 'x' dimension 0 covers [4, 5) but the dimension has 4 elements", copy_line});
}

// ---- one test per diagnostic kind -------------------------------------------------------

TEST(Verify, ZeroBlocksIsABadLaunch) {
  KernelBuilder kb("k", 0);
  expect_diag(kb.finish(), "bad-launch", {"block_num must be >= 1, found 0", here(-1)});
}

TEST(Verify, ZeroSizedDimensionIsABadShape) {
  KernelBuilder kb("k", 1);
  kb.input("x", {16, 0}, f16);
  expect_diag(kb.finish(), "bad-shape",
              {"buffer 'x' has shape [16, 0]; every dimension must be >= 1", here(-2)});
}

TEST(Verify, RankZeroAllocationIsABadShape) {
  KernelBuilder kb("k", 1);
  scope_v([&] { alloc_ub("s", {}, f32); });
  expect_diag(kb.finish(), "bad-shape", {"buffer 's' has rank 0", "e.g. {1}", here(-1)});
}

TEST(Verify, BufferUsedOutsideItsAllocatingBlockIsUndefined) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {64}, f16);
  Tensor u;
  scope_v([&] { u = alloc_ub("u", {64}, f16); });
  const std::string alloc_line = here(-1);
  scope_v([&] { copy(x, u); });
  expect_diag(
      kb.finish(), "undefined-buffer",
      {"buffer 'u' (allocated at " + alloc_line + ") is used outside the block that allocates it",
       "allocate it in a block that encloses every use", here(-4)});
}

TEST(Verify, SliceWithTooFewIndicesIsASliceRankError) {
  // The DSL fills trailing dimensions; a hand-built region (e.g. from a pass) may not.
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {2, 64}, f16);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    copy(Tile(ir::Region{x.ir(), {ir::make_int(0)}, {64}}), u);
  });
  expect_diag(kb.finish(), "slice-rank",
              {"slice of 'x' has 1 indices, buffer rank is 2", here(-3)});
}

TEST(Verify, ExtentLargerThanTheDimensionIsOutOfBounds) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {64}, f16);
  scope_v([&] {
    auto u = alloc_ub("u", {128}, f16);
    copy(x(slice(0, 128)), u);
  });
  expect_diag(kb.finish(), "slice-bounds",
              {"slice of 'x' dimension 0: extent 128 outside [1, 64] (shape [64])", here(-3)});
}

TEST(Verify, ConstantStartPastTheEndIsOutOfBounds) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {128}, f16);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    copy(x(slice(96, 64)), u);
  });
  expect_diag(kb.finish(), "slice-bounds",
              {"slice x[96:+64] of 'x' dimension 0 reads [96, 160) at the extreme, but the "
               "dimension has 128 elements (shape [128])",
               "keep start in [0, 64] for extent 64", here(-5)});
}

TEST(Verify, LoopVariableSliceThatOvershootsIsOutOfBounds) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {128}, f16);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    serial(3, [&](Ex i) { copy(x(slice(i * 64, 64)), u); });
  });
  expect_diag(kb.finish(), "slice-bounds",
              {"slice x[(i * 64):+64] of 'x' dimension 0 reads [128, 192)", here(-3)});
}

TEST(Verify, CidSliceBeyondTheTensorIsOutOfBounds) {
  // Eight blocks, four rows: blocks 4..7 would read past the end.
  KernelBuilder kb("k", 8);
  auto x = kb.input("x", {4, 64}, f16);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    copy(x(cid), u);
  });
  expect_diag(kb.finish(), "slice-bounds", {"dimension 0 reads [7, 8)", here(-2)});
}

TEST(Verify, CopyOutsideAScopeIsRejected) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {64}, f16);
  auto u = alloc_ub("u", {64}, f16);
  copy(x, u);
  expect_diag(kb.finish(), "outside-scope",
              {"copy outside a scope: expert-mode code runs on a Cube or Vector core",
               "wrap it in scope_c(...) (Cube) or scope_v(...) (Vector)", here(-3)});
}

TEST(Verify, TileOpOutsideAScopeIsRejected) {
  KernelBuilder kb("k", 1);
  auto u = alloc_ub("u", {64}, f16);
  tile::exp(u, u);
  expect_diag(kb.finish(), "outside-scope", {"tile.exp outside a scope", here(-1)});
}

TEST(Verify, NestedScopesBreakTheScopeRule) {
  KernelBuilder kb("k", 1);
  scope_c([&] { scope_v([&] {}); });
  expect_diag(kb.finish(), "scope-rule",
              {"scope V nested inside scope C", "scopes do not nest", here(-2)});
}

TEST(Verify, CopyIntoTheOtherCoresBufferBreaksTheScopeRule) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {64, 64}, f16);
  auto a1 = alloc_L1("a1", {64, 64}, f16);
  scope_v([&] { copy(x, a1); });
  expect_diag(kb.finish(), "scope-rule",
              {"copy destination operand 'a1' lives in L1 (a Cube core buffer) but the op is in "
               "scope V",
               "move the op into scope_c, or exchange data through a GM workspace", here(-4)});
}

TEST(Verify, AllocationInTheWrongScopeBreaksTheScopeRule) {
  KernelBuilder kb("k", 1);
  scope_c([&] { alloc_ub("u", {64}, f16); });
  expect_diag(kb.finish(), "scope-rule",
              {"UB buffer 'u' allocated in scope C; UB belongs to the Vector core", here(-2)});
}

TEST(Verify, GmAllocationInsideTheKernelBreaksTheScopeRule) {
  KernelBuilder kb("k", 1);
  kb.alloc("g", ir::Scope::GM, {64}, f16, ir::Loc{"model.py", 7, 3});
  expect_diag(kb.finish(), "scope-rule",
              {"'g' allocated in GM inside the kernel", "declare GM tensors with input/output",
               "model.py:7"});
}

TEST(Verify, GemmInVectorScopeBreaksTheScopeRule) {
  KernelBuilder kb("k", 1);
  auto a0 = alloc_L0A("a0", {16, 16}, f16);
  auto b0 = alloc_L0B("b0", {16, 16}, f16);
  auto c0 = alloc_L0C("c0", {16, 16}, f32);
  scope_v([&] { gemm(a0, b0, c0); });
  expect_diag(kb.finish(), "scope-rule",
              {"gemm in scope V: matrix multiply runs on the Cube core", here(-2)});
}

TEST(Verify, TileOpInCubeScopeBreaksTheScopeRule) {
  KernelBuilder kb("k", 1);
  auto u = alloc_ub("u", {64}, f16);
  scope_c([&] { tile::add(u, u, u); });
  expect_diag(kb.finish(), "scope-rule",
              {"tile.add in scope C: vector ops run on the Vector core", here(-2)});
}

TEST(Verify, ReduceInCubeScopeBreaksTheScopeRule) {
  KernelBuilder kb("k", 1);
  auto u = alloc_ub("u", {8, 64}, f32);
  auto m = alloc_ub("m", {8, 1}, f32);
  scope_c([&] { reduce_sum(u, m); });
  expect_diag(kb.finish(), "scope-rule", {"reduce in scope C", here(-1)});
}

TEST(Verify, CopyOnAPipeTheCoreLacksBreaksTheScopeRule) {
  KernelBuilder kb("k", 1);
  auto y = kb.output("y", {64}, f16);
  auto u = alloc_ub("u", {64}, f16);
  scope_c([&] { copy(u, y); });
  expect_diag(kb.finish(), "scope-rule",
              {"copy UB -> GM runs on pipe MTE3, which the Cube core does not have", here(-2)});
}

TEST(Verify, CopyFromGmToL0AIsNotADataPath) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {16, 16}, f16);
  scope_c([&] {
    auto a0 = alloc_L0A("a0", {16, 16}, f16);
    copy(x, a0);
  });
  expect_diag(kb.finish(), "copy-direction",
              {"copy from GM to L0A is not a hardware data path",
               "legal copies: GM->L1, GM->UB, L1->L0A/L0B, L0C->GM/L1, UB->GM, UB->UB", here(-4)});
}

TEST(Verify, CopyFromL0CToUbSuggestsAGmWorkspace) {
  KernelBuilder kb("k", 1);
  auto u = alloc_ub("u", {16, 16}, f32);
  scope_c([&] {
    auto c0 = alloc_L0C("c0", {16, 16}, f32);
    copy(c0, u);
  });
  expect_diag(kb.finish(), "copy-direction",
              {"copy from L0C to UB is not a hardware data path",
               "there is no direct L0C<->UB path on A2/A3: go through a GM workspace", here(-4)});
}

TEST(Verify, CopyThatChangesDtypeOffTheFixPipeIsADtypeMismatch) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {16, 16}, f16);
  scope_c([&] {
    auto a1 = alloc_L1("a1", {16, 16}, f32);
    copy(x, a1);
  });
  expect_diag(kb.finish(), "dtype-mismatch",
              {"copy x -> a1 changes dtype f16 -> f32; only FIX (L0C f32 -> f16/bf16), UB -> "
               "UB copies and, with the copy_cast pass, GM <-> UB copies cast",
               "then tile::cast on UB", here(-5)});
}

TEST(Verify, TileOpOnMixedDtypesIsADtypeMismatch) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {64}, f16);
    auto b = alloc_ub("b", {64}, f32);
    tile::add(a, a, b);
  });
  expect_diag(kb.finish(), "dtype-mismatch",
              {"tile.add: source 'b' is f32 but destination 'a' is f16", "tile::cast", here(-3)});
}

TEST(Verify, SinOnAnIntegerTileIsADtypeMismatch) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {64}, i32);
    tile::sin(a, a);
  });
  expect_diag(kb.finish(), "dtype-mismatch",
              {"tile.sin on i32 tile 'a': this op is defined for f16/bf16/f32",
               "tile::cast to f32 first", here(-4)});
}

TEST(Verify, SortNeedsWhole32ElementBlocks) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {40}, f32);
    auto d = alloc_ub("d", {80}, f32);
    tile::sort(d, a, 40);
  });
  expect_diag(kb.finish(), "shape-mismatch",
              {"tile.sort: source a has 40 elements; expected a multiple of 32",
               "allocate the source with 64 elements", here(-4)});
}

TEST(Verify, SortOfIntegersIsADtypeMismatch) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {32}, i32);
    auto d = alloc_ub("d", {64}, i32);
    tile::sort(d, a, 32);
  });
  expect_diag(kb.finish(), "dtype-mismatch",
              {"tile.sort: 'd' is i32; sorting takes f32 or f16 tiles", here(-3)});
}

TEST(Verify, SortCountPastTheSourceIsAShapeMismatch) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {32}, f32);
    auto d = alloc_ub("d", {64}, f32);
    tile::sort(d, a, 33);
  });
  expect_diag(kb.finish(), "shape-mismatch",
              {"33 valid elements, but the source a has 32", here(-3)});
}

TEST(Verify, Sort32NeedsEightBytesPerKeyAndU32Indices) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {64}, f16);
    auto i = alloc_ub("i", {64}, u32);
    auto d = alloc_ub("d", {128}, f16);  // f16 pairs take 4 elements each: 256
    tile::sort32(d, a, i);
  });
  expect_diag(kb.finish(), "shape-mismatch",
              {"tile.sort32: 64 keys, 64 indices, 128 destination elements",
               "give the destination 256 elements", here(-4)});
  KernelBuilder kb2("k", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {32}, f32);
    auto i = alloc_ub("i", {32}, i32);
    auto d = alloc_ub("d", {64}, f32);
    tile::sort32(d, a, i);
  });
  expect_diag(kb2.finish(), "dtype-mismatch", {"tile.sort32: indices 'i' are i32; expected u32"});
}

TEST(Verify, MergeSortNeedsRoomForEveryPair) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {16}, f32);
    auto b = alloc_ub("b", {16}, f32);
    auto d = alloc_ub("d", {24}, f32);
    tile::merge_sort(d, {a, b});
  });
  expect_diag(kb.finish(), "shape-mismatch",
              {"tile.merge_sort: destination d has 24 elements; the merged lists have 32",
               "allocate the destination with 32 elements", here(-4)});
}

// T.reinterpretcast: a copy of the bytes at the cast, used only where a view reads the same.
TEST(Verify, AReinterpretViewIsUsedOnlyWhereItsCopyReadsTheSame) {
  auto diags = [](const std::function<void(Tile, Tile, Tile)>& body) {
    KernelBuilder kb("k", 1);
    scope_v([&] {
      auto a = alloc_ub("a", {64}, i32);
      auto v = alloc_ub("v", {64}, f32);
      auto o = alloc_ub("o", {64}, f32);
      body(a, v, o);
    });
    return text_of(diags_of(kb.finish()));
  };
  EXPECT_EQ(diags([](Tile a, Tile v, Tile o) {
              tile::fill(a, 4);
              tile::reinterpret(v, a);
              tile::add(o, v, v);
            }),
            "");
  EXPECT_NE(diags([](Tile a, Tile v, Tile o) {
              tile::reinterpret(v, a);
              tile::fill(a, 4);  // the view would see it
              tile::add(o, v, v);
            }).find("reads 'v', a view of 'a', after 'a' was written"),
            std::string::npos);
  EXPECT_NE(diags([](Tile a, Tile v, Tile) {
              tile::reinterpret(v, a);
              tile::fill(v, 1);  // a would see it
            }).find("this op writes 'v', a T.reinterpretcast view of 'a'"),
            std::string::npos);
  EXPECT_NE(diags([](Tile a, Tile v, Tile o) {
              tile::add(o, v, v);
              tile::reinterpret(v, a);
            }).find("reads 'v' before it is made a view of 'a'"),
            std::string::npos);
  // Across element widths the byte counts match: f32 [64] is f16 [128], not f16 [64].
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {64}, f32);
    auto h = alloc_ub("h", {64}, f16);
    tile::reinterpret(h, a);
  });
  EXPECT_NE(text_of(diags_of(kb.finish())).find("holds 256 bytes"), std::string::npos);
  KernelBuilder wide("k", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {64}, f32);
    auto h = alloc_ub("h", {128}, f16);
    tile::reinterpret(h, a);
  });
  EXPECT_TRUE(diags_of(wide.finish()).empty());
}

TEST(Verify, GatherMaskDestinationMustHoldTheKeptElements) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {64}, f32);
    auto d = alloc_ub("d", {16}, f32);
    tile::gather_mask(d, a, 1);
    tile::gather_mask(a, a, 9);
  });
  auto p = kb.finish();
  expect_diag(
      p, "shape-mismatch",
      {"the pattern keeps 32 of the source's 64 elements but destination d holds 16", here(-6)});
  expect_diag(p, "bad-operand", {"pattern 9; expected 1..7", here(-6)});
}

TEST(Verify, GatherbBlocksPastTheDestinationAreAShapeMismatch) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {256}, i32);
    auto o = alloc_ub("o", {16}, u32);
    auto d = alloc_ub("d", {128}, i32);  // 16 blocks of 32 bytes
    tile::gatherb(d, a, o, 2, 1, 16);    // the second repeat starts at block 16
  });
  expect_diag(kb.finish(), "shape-mismatch",
              {"the last block written is block 23 of destination d, which holds 16", here(-3)});
}

TEST(Verify, AtomicAddIntoUbIsACopyDirectionError) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {64}, f32);
    auto b = alloc_ub("b", {64}, f32);
    copy(a, b, {.transpose = false, .pad_value = std::nullopt, .atomic_add = true});
  });
  expect_diag(kb.finish(), "copy-direction",
              {"atomic add UB -> UB: the DMA unit adds into GM only", here(-3)});
}

TEST(Verify, PowWithAMismatchedExponentTileIsAShapeMismatch) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {64}, f32);
    auto e = alloc_ub("e", {32}, f32);
    tile::pow(a, a, e);
  });
  expect_diag(kb.finish(), "shape-mismatch", {"has 32 elements", "has 64", here(-2)});
}

TEST(Verify, GemmOnMixedInputDtypesIsADtypeMismatch) {
  KernelBuilder kb("k", 1);
  scope_c([&] {
    auto a0 = alloc_L0A("a0", {16, 16}, bf16);
    auto b0 = alloc_L0B("b0", {16, 16}, f16);
    auto c0 = alloc_L0C("c0", {16, 16}, f32);
    gemm(a0, b0, c0);
  });
  expect_diag(kb.finish(), "dtype-mismatch", {"gemm dtypes bf16 x f16 -> f32; expected", here(-2)});
}

TEST(Verify, HalfPrecisionAccumulatorIsADtypeMismatch) {
  KernelBuilder kb("k", 1);
  scope_c([&] { alloc_L0C("c0", {16, 16}, f16); });
  expect_diag(kb.finish(), "dtype-mismatch",
              {"L0C buffer 'c0' is f16; the cube accumulates in f32", here(-2)});
}

TEST(Verify, ExpOnIntegersIsADtypeMismatch) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto n = alloc_ub("n", {64}, i32);
    tile::exp(n, n);
  });
  expect_diag(kb.finish(), "dtype-mismatch",
              {"tile.exp on i32 tile 'n': this op is defined for f16/bf16/f32", here(-3)});
}

TEST(Verify, TransposeOffTheMte1PathIsABadOperand) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {16, 16}, f16);
  scope_c([&] {
    auto a1 = alloc_L1("a1", {16, 16}, f16);
    copy(x, a1, {.transpose = true, .pad_value = std::nullopt});
  });
  expect_diag(kb.finish(), "bad-operand",
              {"transpose is only available on L1 -> L0A/L0B copies (MTE1)", here(-3)});
}

TEST(Verify, PadValueOffTheGmToUbPathIsABadOperand) {
  KernelBuilder kb("k", 1);
  auto y = kb.output("y", {64}, f16);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    copy(u, y, {.transpose = false, .pad_value = 0.0});
  });
  expect_diag(kb.finish(), "bad-operand",
              {"pad_value is only available on GM -> UB copies", here(-3)});
}

TEST(Verify, TileOpWithTheWrongNumberOfSourcesIsABadOperand) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    ir::TileOpStmt s;
    s.op = ir::TileOpKind::Exp;
    s.dst = Tile(u).ir();
    s.srcs = {Tile(u).ir(), Tile(u).ir()};
    KernelBuilder::current().emit(
        ir::make_stmt(std::move(s), ir::Loc::from(std::source_location::current())));
  });
  expect_diag(kb.finish(), "bad-operand",
              {"tile.exp takes 1 tile source(s); found 2 tile(s)", here(-3)});
}

TEST(Verify, UnassignedTensorOperandIsABadOperand) {
  KernelBuilder kb("k", 1);
  Tensor unset;
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    copy(unset, u);
  });
  expect_diag(kb.finish(), "bad-operand", {"copy source operand is empty", here(-2)});
}

TEST(Verify, CopyOfDifferentElementCountsIsAShapeMismatch) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {64}, f16);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    copy(x(slice(0, 32)), u);
  });
  expect_diag(kb.finish(), "shape-mismatch",
              {"copy moves 32 elements from x[0:+32] [32] into 64 elements of u [64]", here(-3)});
}

TEST(Verify, TileOpOnDifferentElementCountsIsAShapeMismatch) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {64}, f32);
    auto b = alloc_ub("b", {32}, f32);
    tile::add(a, a, b);
  });
  expect_diag(kb.finish(), "shape-mismatch",
              {"tile.add: source b has 32 elements [32] but destination a has 64 [64]",
               "use tile::broadcast", here(-4)});
}

TEST(Verify, ScalarReadOfAWholeRowIsAShapeMismatch) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto u = alloc_ub("u", {8}, f32);
    auto m = alloc_ub("m", {2, 8}, f32);
    tile::mul(u, u, at(m, {0}));
  });
  expect_diag(kb.finish(), "shape-mismatch",
              {"scalar operand m[0:+1, 0:+8] has 8 elements; expected one element",
               "index every dimension of the scalar read", here(-4)});
}

TEST(Verify, BroadcastOfAVectorThatFitsNeitherAxisIsAShapeMismatch) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto buf = alloc_ub("buf", {8, 64}, f32);
    auto m = alloc_ub("m", {4, 1}, f32);
    tile::broadcast(buf, m);
  });
  expect_diag(kb.finish(), "shape-mismatch",
              {"broadcast m [4, 1] -> buf [8, 64]: expected [R] or [R,1] -> [R,C]", here(-3)});
}

TEST(Verify, ABroadcastsStatedDirectionMustFitTheVector) {
  // an [8] vector of an [8, 64] tile is a column (one value per row), not a row; and a
  // direction must be one of the three
  for (int64_t dir : {int64_t{2}, int64_t{7}}) {
    KernelBuilder kb("k", 1);
    scope_v([&] {
      auto buf = alloc_ub("buf", {8, 64}, f32);
      auto m = alloc_ub("m", {8}, f32);
      ir::TileOpStmt bc;
      bc.op = ir::TileOpKind::Broadcast;
      bc.dst = Tile(buf).ir();
      bc.srcs = {Tile(m).ir()};
      bc.attrs[0] = dir;
      KernelBuilder::current().emit(ir::make_stmt(std::move(bc), ir::Loc{"v.cc", 7, 1}));
    });
    if (dir == 2)
      expect_diag(kb.finish(), "shape-mismatch", {"broadcast m [8] -> buf [8, 64]"});
    else
      expect_diag(kb.finish(), "bad-operand", {"broadcast direction 7 is not one of"});
  }
}

TEST(Verify, ReduceIntoTheWrongNumberOfValuesIsAShapeMismatch) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto work = alloc_ub("work", {8, 64}, f32);
    auto m = alloc_ub("m", {4, 1}, f32);
    reduce_max(work, m);
  });
  expect_diag(kb.finish(), "shape-mismatch",
              {"reduce work [8, 64] along dim -1 gives 8 values, but destination m holds 4",
               "use a destination of 8 elements, e.g. [8, 1]", here(-4)});
}

TEST(Verify, GemmWithMismatchedKIsAShapeMismatch) {
  KernelBuilder kb("k", 1);
  scope_c([&] {
    auto a0 = alloc_L0A("a0", {32, 32}, f16);
    auto b0 = alloc_L0B("b0", {16, 32}, f16);
    auto c0 = alloc_L0C("c0", {32, 32}, f32);
    gemm(a0, b0, c0);
  });
  expect_diag(
      kb.finish(), "shape-mismatch",
      {"gemm [32x32] x [16x32] -> [32x32]: expected A [M,K] x B [K,N] -> C [M,N]", here(-4)});
}

TEST(Verify, GemmWithMNotAMultipleOf16BreaksFractalAlignment) {
  KernelBuilder kb("k", 1);
  scope_c([&] {
    auto a0 = alloc_L0A("a0", {8, 32}, f16);
    auto b0 = alloc_L0B("b0", {32, 16}, f16);
    auto c0 = alloc_L0C("c0", {8, 16}, f32);
    gemm(a0, b0, c0);
  });
  expect_diag(kb.finish(), "fractal-alignment",
              {"gemm M=8 N=16 K=32: cube operands are 16x16 fractals, so M and N must be "
               "multiples of 16 and K a multiple of 16 for f16",
               here(-5)});
}

TEST(Verify, GemmOperandInL1IsAGemmOperandError) {
  KernelBuilder kb("k", 1);
  scope_c([&] {
    auto a1 = alloc_L1("a1", {16, 16}, f16);
    auto b0 = alloc_L0B("b0", {16, 16}, f16);
    auto c0 = alloc_L0C("c0", {16, 16}, f32);
    gemm(a1, b0, c0);
  });
  expect_diag(kb.finish(), "gemm-operand",
              {"gemm A operand 'a1' is in L1; expected L0A", "copy L1 tiles to L0A (A)", here(-3)});
}

TEST(Verify, TileOpOnAGmTensorIsATileOperandError) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {64}, f16);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    tile::add(u, u, x);
  });
  expect_diag(kb.finish(), "tile-operand",
              {"tile.add operand 'x' is in GM; vector ops take UB tiles",
               "copy the data into a UB buffer first", here(-4)});
}

TEST(Verify, ReduceIntoAGmTensorIsATileOperandError) {
  KernelBuilder kb("k", 1);
  auto y = kb.output("y", {8, 1}, f32);
  scope_v([&] {
    auto u = alloc_ub("u", {8, 64}, f32);
    reduce_sum(u, y);
  });
  expect_diag(kb.finish(), "tile-operand",
              {"reduce operand 'y' is in GM; reductions take UB tiles", here(-3)});
}

TEST(Verify, OddElementOffsetInUbBreaksUbAlignment) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    auto v = alloc_ub("v", {16}, f16);
    tile::relu(v, u(slice(1, 16)));
  });
  expect_diag(kb.finish(), "ub-alignment",
              {"tile.relu operand u[1:+16] may start at a byte offset that is a multiple of only 2 "
               "bytes; UB operands must be 32-byte aligned",
               here(-5)});
}

TEST(Verify, LoopStrideOfHalfABlockBreaksUbAlignment) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    auto v = alloc_ub("v", {16}, f16);
    serial(4, [&](Ex i) { tile::relu(v, u(slice(i * 8, 16))); });
    serial(4, [&](Ex i) { tile::relu(v, u(slice(i * 16, 16))); });  // 32 bytes: fine
  });
  auto diags = diags_of(kb.finish());
  ASSERT_EQ(diags.size(), 1u) << text_of(diags);
  EXPECT_EQ(diags[0].kind, "ub-alignment");
  EXPECT_NE(diags[0].str().find("multiple of only 16 bytes"), std::string::npos);
  EXPECT_EQ(diags[0].loc.str(), here(-7));
}

TEST(Verify, MinAndMaxOfAlignedOffsetsStayAligned) {
  // min / max is one of its operands: min(i * 16, 32) of f16 is on a 32-byte block, and
  // min(i * 16, 8) is not (8 halves are 16 bytes).
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    auto v = alloc_ub("v", {16}, f16);
    serial(4, [&](Ex i) { tile::relu(v, u(slice(max(min(i * 16, Ex(32)), Ex(0)), 16))); });
    serial(4, [&](Ex i) { tile::relu(v, u(slice(min(i * 16, Ex(8)), 16))); });
  });
  auto diags = diags_of(kb.finish());
  ASSERT_EQ(diags.size(), 1u) << text_of(diags);
  EXPECT_NE(diags[0].str().find("multiple of only 16 bytes"), std::string::npos);
  EXPECT_EQ(diags[0].loc.str(), here(-5));
}

TEST(Verify, IllegalVectorPipePairIsAFlagPipesError) {
  KernelBuilder kb("k", 1);
  scope_v([&] { set_flag(Pipe::V, Pipe::M, 0); });
  expect_diag(kb.finish(), "flag-pipes",
              {"set_flag V->M is not a legal pipe pair on the Vector core",
               "Vector pairs: any two of S, V, MTE2, MTE3", here(-3)});
}

TEST(Verify, ReluOnACopyIsFixPipesOnly) {
  KernelBuilder kb("k", 1);
  auto y = kb.output("y", {64}, f32);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f32);
    tile::fill(u, -1.0);
    copy(u, y, {.transpose = false, .pad_value = std::nullopt, .atomic_add = false, .relu = true});
  });
  expect_diag(kb.finish(), "copy-direction",
              {"a copy UB -> GM with relu: only FixPipe (out of L0C", here(-3)});
}

TEST(Verify, CubeOrdersAFixPipeStoreBeforeAnMte2LoadWithFixToMte2) {
  // AscendC's HardEvent FIX_MTE2 / MTE2_FIX (A2 / A3): legal on the Cube, as the original's
  // opt_gdn examples use it; MTE3 pairs are not (the Cube has no MTE3 here).
  KernelBuilder kb("k", 1);
  scope_c([&] {
    set_flag(Pipe::FIX, Pipe::MTE2, 0);
    wait_flag(Pipe::FIX, Pipe::MTE2, 0);
    set_flag(Pipe::MTE2, Pipe::FIX, 1);
    wait_flag(Pipe::MTE2, Pipe::FIX, 1);
  });
  EXPECT_TRUE(diags_of(kb.finish()).empty());
  KernelBuilder bad("k", 1);
  scope_c([&] { set_flag(Pipe::FIX, Pipe::V, 0); });
  expect_diag(bad.finish(), "flag-pipes",
              {"set_flag FIX->V is not a legal pipe pair on the Cube core", here(-2)});
}

TEST(Verify, BarrierOnAPipeTheCoreLacksIsAFlagPipesError) {
  KernelBuilder kb("k", 1);
  scope_v([&] { pipe_barrier(Pipe::M); });
  expect_diag(kb.finish(), "flag-pipes",
              {"pipe_barrier(M) in scope V: that pipe has no barrier on this core", here(-2)});
}

TEST(Verify, EventIdPastSevenIsAFlagIdError) {
  KernelBuilder kb("k", 1);
  scope_v([&] { set_flag(Pipe::V, Pipe::MTE2, 8); });
  expect_diag(kb.finish(), "flag-id", {"set_flag id 8 may be 8; ids are 0..7", here(-1)});
}

TEST(Verify, EventIdFromALoopVariableThatReachesEightIsAFlagIdError) {
  KernelBuilder kb("k", 1);
  scope_v([&] { serial(9, [&](Ex s) { wait_flag(Pipe::MTE2, Pipe::V, s); }); });
  expect_diag(kb.finish(), "flag-id", {"wait_flag id i may be 8; ids are 0..7", here(-1)});
}

TEST(Verify, CrossFlagIdPastFifteenIsAFlagIdError) {
  KernelBuilder kb("k", 1);
  scope_c([&] { set_cross_flag(Pipe::FIX, 16); });
  expect_diag(kb.finish(), "flag-id", {"set_cross_flag id 16 may be 16; ids are 0..15", here(-1)});
}

TEST(Verify, CrossFlagOutsideAScopeIsACrossFlagError) {
  KernelBuilder kb("k", 1);
  set_cross_flag(Pipe::FIX, 0);
  expect_diag(
      kb.finish(), "cross-flag",
      {"set_cross_flag outside a scope: cross-core flags go between a C and a V scope", here(-3)});
}

TEST(Verify, CrossFlagWaitOutsideAScopeIsACrossFlagError) {
  KernelBuilder kb("k", 1);
  wait_cross_flag(0);
  expect_diag(kb.finish(), "cross-flag", {"wait_cross_flag outside a scope", here(-1)});
}

TEST(Verify, CrossFlagOnAPipeTheCoreLacksIsACrossFlagError) {
  KernelBuilder kb("k", 1);
  scope_v([&] { set_cross_flag(Pipe::M, 0); });
  expect_diag(kb.finish(), "cross-flag",
              {"set_cross_flag on pipe M, which the Vector core does not have", here(-2)});
}

TEST(Verify, CrossFlagModeOtherThanTwoIsACrossFlagError) {
  KernelBuilder kb("k", 1);
  scope_c([&] { set_cross_flag(Pipe::FIX, 0, /*mode=*/1); });
  expect_diag(kb.finish(), "cross-flag", {"set_cross_flag mode 1 is not modelled", here(-1)});
}

TEST(Verify, ZeroStepLoopIsABadLoop) {
  KernelBuilder kb("k", 1);
  scope_v([&] { serial(0, 8, 0, [&](Ex) {}); });
  expect_diag(kb.finish(), "bad-loop",
              {"loop step must be >= 1, found 0", "iterate upward with a positive step", here(-2)});
}

TEST(Verify, PipelinedWithZeroCrossIntervalIsABadLoop) {
  KernelBuilder kb("k", 1);
  scope_v([&] { pipelined(8, {.num_stages = 2, .cross_interval = 0}, [&](Ex) {}); });
  expect_diag(kb.finish(), "bad-loop",
              {"Pipelined needs num_stages >= 0 and cross_interval >= 1, found num_stages=2, "
               "cross_interval=0",
               here(-4)});
}

TEST(Verify, ParallelLoopWithoutTheVectorizePassIsUnsupported) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    parallel(64, [&](Ex) { tile::relu(u, u); });
  });
  expect_diag(kb.finish(), "unsupported",
              {"Parallel loops need the vectorize pass, which is off; the loop would silently run "
               "serially",
               "write the loop with serial(...)", here(-5)});
}

TEST(Verify, PipelinedLoopOutsideAScopeIsUnsupported) {
  KernelBuilder kb("k", 1);
  pipelined(8, {.num_stages = 2}, [&](Ex) {});
  expect_diag(kb.finish(), "unsupported",
              {"Pipelined loops outside a scope need the Cube/Vector split", here(-2)});
}

TEST(Verify, CrossIntervalOnAnIntraCorePipelinedLoopIsAnError) {
  KernelBuilder kb("k", 1);
  scope_v([&] { pipelined(8, {.num_stages = 2, .cross_interval = 2}, [&](Ex) {}); });
  expect_diag(kb.finish(), "bad-loop", {"cross_interval=2 has no effect", here(-1)});
}

TEST(Verify, UbOverflowNamesLargestBufferAndFix) {
  KernelBuilder kb("k", 1);
  std::string a_line, big_line;
  scope_v([&] {
    alloc_ub("a", {32, 256}, f32);  // 32 KiB
    a_line = here(-1);
    alloc_ub("big", {128, 256}, f32);  // 128 KiB
    big_line = here(-1);
    alloc_ub("c", {64, 256}, f32);  // 64 KiB: crosses 191.75 KiB
  });
  const std::string c_line = here(-2);
  auto p = kb.finish();
  expect_diag(p, "capacity",
              {"UB overflow on AIV: 224.0 KiB needed, 191.8 KiB available (229376 bytes > "
               "196352)",
               c_line + ":", "big           128.0 KiB  " + big_line,
               "c              64.0 KiB  " + c_line, "a              32.0 KiB  " + a_line,
               "hint: free 32.2 KiB : shrink 'big' (smaller blocks) or drop a buffer"});
  // The notes list the largest buffer first.
  auto d = diags_of(p);
  ASSERT_EQ(d.size(), 1u) << text_of(d);
  ASSERT_EQ(d[0].notes.size(), 3u);
  EXPECT_EQ(d[0].notes[0].rfind("big", 0), 0u) << d[0].notes[0];
}

TEST(Verify, UbOverflowFromASlottedBufferSuggestsFewerSlots) {
  KernelBuilder kb("k", 1);
  std::string ring_line;
  scope_v([&] {
    alloc_ub("s", {16, 256}, f32);        // 16 KiB
    alloc_ub("ring", {4, 64, 256}, f32);  // 4 x 64 KiB
    ring_line = here(-1);
  });
  expect_diag(kb.finish(), "capacity",
              {"UB overflow on AIV: 272.0 KiB needed", ring_line + ":",
               "ring          256.0 KiB (4 slots x 64.0 KiB)  " + ring_line,
               "'ring' has 4 slots; 2 slots fit (fewer slots), or use smaller "
               "blocks"});
}

TEST(Verify, UbBuffersAreRoundedUpTo32Bytes) {
  // 196320 + 2 + 2 bytes would fit; rounded to 32 each, the two scalars overflow by 32.
  KernelBuilder kb("k", 1);
  scope_v([&] {
    alloc_ub("big", {49080}, f32);
    alloc_ub("s1", {1}, f16);
    alloc_ub("s2", {1}, f16);
  });
  expect_diag(kb.finish(), "capacity", {"(196384 bytes > 196352)", here(-2)});
}

TEST(Verify, TransposeSwapsRowsAndColumns) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {16, 32}, f32);
    auto b = alloc_ub("b", {32, 16}, f32);
    tile::transpose(b, a);
  });
  EXPECT_VERIFIES(kb.finish());
  KernelBuilder kb2("k", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {16, 32}, f32);
    auto b = alloc_ub("b", {16, 32}, f32);
    tile::transpose(b, a);
  });
  expect_diag(kb2.finish(), "shape-mismatch", {"expected [R, C] -> [C, R]", here(-2)});
}

TEST(Verify, ElementStoresNeedNoVectorAlignment) {
  // ub[3] = 1 and ub[5] = ub[1] are the scalar unit's SetValue / GetValue on hardware; a
  // two-element fill at the same offset is a vector op and must be aligned.
  KernelBuilder kb("k", 1);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f32);
    tile::fill(u(slice(3, 1)), 1.0);
    copy(u(slice(1, 1)), u(slice(5, 1)));
  });
  EXPECT_VERIFIES(kb.finish());
  KernelBuilder kb2("k", 1);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f32);
    tile::fill(u(slice(3, 2)), 1.0);
  });
  expect_diag(kb2.finish(), "ub-alignment", {"multiple of only 12 bytes", here(-2)});
}

TEST(Verify, UbFilledExactlyToCapacityFits) {
  KernelBuilder kb("k", 1);
  scope_v([&] { alloc_ub("all_of_it", {196352 / 4}, f32); });
  EXPECT_VERIFIES(kb.finish());
}

TEST(Verify, L1OverflowIsACapacityError) {
  KernelBuilder kb("k", 1);
  scope_c([&] { alloc_L1("a1", {2, 128, 1024}, f16); });
  expect_diag(kb.finish(), "capacity",
              {"L1 overflow on AIC: 512.0 KiB needed, 511.8 KiB available (524288 bytes > "
               "524032)",
               "'a1' has 2 slots; 1 slots fit", here(-4)});
}

TEST(Verify, L0AOverflowIsACapacityError) {
  KernelBuilder kb("k", 1);
  scope_c([&] { alloc_L0A("a0", {128, 512}, f16); });
  expect_diag(kb.finish(), "capacity",
              {"L0A overflow on AIC: 128.0 KiB needed, 64.0 KiB available (131072 bytes > 65536)",
               here(-3)});
}

TEST(Verify, L0COverflowIsACapacityError) {
  KernelBuilder kb("k", 1);
  scope_c([&] {
    alloc_L0C("c0", {128, 128}, f32);
    alloc_L0C("c1", {128, 128}, f32);
    alloc_L0C("c2", {16, 16}, f32);
  });
  expect_diag(kb.finish(), "capacity",
              {"L0C overflow on AIC: 129.0 KiB needed, 128.0 KiB available", here(-3)});
}

// ---- reporting ------------------------------------------------------------------------

TEST(Verify, ReportsEveryProblemNotJustTheFirst) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {64}, f16);
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f16);
    copy(x(slice(32, 64)), u);
    set_flag(Pipe::V, Pipe::MTE2, 9);
  });
  ir::Program p = kb.finish();
  auto d = diags_of(p);
  ASSERT_EQ(d.size(), 2u) << text_of(d);
  EXPECT_EQ(d[0].kind, "slice-bounds");
  EXPECT_EQ(d[1].kind, "flag-id");
  testing::expect_user_error([&] { verify_or_throw(p, testing::a3()); },
                             {"reads [32, 96)", here(-9), "set_flag id 9", here(-8)});
}

TEST(Verify, StopsCollectingAtFiftyDiagnostics) {
  KernelBuilder kb("k", 1);
  scope_v([&] {
    for (int i = 0; i < 60; ++i) set_flag(Pipe::V, Pipe::MTE2, 8);
  });
  EXPECT_EQ(diags_of(kb.finish()).size(), 50u);
}

}  // namespace
}  // namespace tilepipe
