// The original_split pass (passes/original_split.h): an unscoped body, one block per source
// statement, split into Cube and Vector scopes as TileLang-Ascend's compiler splits it
// (golden IR), hand-offs per iteration of matching loops, the author's flags keeping a loop
// serial, bindings per core, the values through the whole pipeline, located refusals.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "passes/original_split.h"
#include "test_util.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/passes.h"
#include "tilepipe/sim.h"

namespace tilepipe {
namespace {

using namespace lang;

/// One source statement of an unscoped body: a block, as the Python front end emits each
/// statement for the pass.
void stmt(const std::function<void()>& body, SrcLoc l = SrcLoc::current()) {
  auto& kb = KernelBuilder::current(l);
  kb.begin_block(ir::Loc::from(l));
  body();
  kb.end_block(ir::Loc::from(l));
}

ir::Program split(const ir::Program& p) {
  ir::Program out = passes::original_split(p, testing::a3(), {});
  verify_or_throw(out, testing::a3());
  return out;
}

/// Y = 2 * (A x B): the Cube multiplies `tiles` tiles into W (one statement per tile op,
/// each tile in a loop when `looped`), the Vector doubles each tile of W into Y, each
/// AIV its rows, over `v_tiles` iterations of its own loop; with `stages` > 1 one
/// Pipelined loop holds both.
ir::Program mm_double(bool looped, int64_t tiles = 1, int64_t v_tiles = 1, int stages = 0) {
  KernelBuilder kb("mm_double", 1);
  auto a = kb.input("A", {tiles * 32, 32}, f16);
  auto b = kb.input("B", {32, 32}, f16);
  auto w = kb.workspace("W", {tiles * 32, 32}, f32);
  auto y = kb.output("Y", {tiles * 32, 32}, f32);
  auto [cid, vid] = kb.launch();
  stmt([&] {
    auto a1 = alloc_L1("a1", {32, 32}, f16);
    auto b1 = alloc_L1("b1", {32, 32}, f16);
    auto a0 = alloc_L0A("a0", {32, 32}, f16);
    auto b0 = alloc_L0B("b0", {32, 32}, f16);
    auto c0 = alloc_L0C("c0", {32, 32}, f32);
    auto u = alloc_ub("u", {16, 32}, f32);
    auto cube = [&](Ex i) {
      stmt([&] { copy(a(rows(i * 32, 32), all), a1); });
      stmt([&] { copy(b, b1); });
      stmt([&] { copy(a1, a0); });
      stmt([&] { copy(b1, b0); });
      stmt([&] { gemm(a0, b0, c0); });
      stmt([&] { copy(c0, w(rows(i * 32, 32), all)); });
    };
    auto vector = [&](Ex i) {
      stmt([&] { copy(w(rows(i * 32 + vid * 16, 16), all), u); });
      stmt([&] { tile::add(u, u, u); });
      stmt([&] { copy(u, y(rows(i * 32 + vid * 16, 16), all)); });
    };
    if (!looped) {
      cube(0);
      vector(0);
      return;
    }
    if (stages > 1) {
      stmt([&] {
        pipelined(tiles, {stages}, [&](Ex i) {
          cube(i);
          vector(i);
        });
      });
      return;
    }
    stmt([&] { serial(tiles, cube); });
    stmt([&] { serial(v_tiles, vector); });
  });
  return kb.finish();
}

TEST(OriginalSplit, EachCoreGetsItsStatementsAndTheTensorIsHandedOver) {
  // W is the Cube's (FIX) and the Vector's (MTE2): the Cube waits `free` (#1) before its
  // write and sets `ready` (#0) after it; the Vector waits `ready` before its read and
  // frees W after it. The Vector grants the first `free`, the Cube takes the last back.
  EXPECT_EQ(
      ir::print(split(mm_double(false))),
      R"(kernel mm_double(A: GM f16[32, 32] in, B: GM f16[32, 32] in, Y: GM f32[32, 32] out) block_num=1 {
  workspace W: GM f32[32, 32] workspace
  scope C {
    alloc a1: L1 f16[32, 32]
    alloc b1: L1 f16[32, 32]
    alloc a0: L0A f16[32, 32]
    alloc b0: L0B f16[32, 32]
    alloc c0: L0C f32[32, 32]
    copy A -> a1
    copy B -> b1
    copy a1 -> a0
    copy b1 -> b0
    gemm a0 x b0 -> c0 init
    wait_cross_flag #1
    copy c0 -> W
    set_cross_flag FIX #0 mode=2
    wait_cross_flag #1
  }
  scope V {
    set_cross_flag MTE2 #1 mode=2
    alloc u: UB f32[16, 32]
    wait_cross_flag #0
    copy W[(0 + (vid * 16)):+16, 0:+32] -> u
    set_cross_flag MTE2 #1 mode=2
    tile.add u, u, u
    copy u -> Y[(0 + (vid * 16)):+16, 0:+32]
  }
}
)");
}

TEST(OriginalSplit, LoopsOfTheSameTripsHandOverPerIteration) {
  std::string text = ir::print(split(mm_double(true, 2, 2)));
  for (const char* frag : {"    for i in serial(0, 2) {\n      copy A[(i * 32):+32, 0:+32] -> a1\n",
                           "      wait_cross_flag #1\n      copy c0 -> W[(i * 32):+32, 0:+32]\n"
                           "      set_cross_flag FIX #0 mode=2\n    }\n",
                           "    for i.1 in serial(0, 2) {\n      wait_cross_flag #0\n"
                           "      copy W[((i.1 * 32) + (vid * 16)):+16, 0:+32] -> u\n"
                           "      set_cross_flag MTE2 #1 mode=2\n"})
    EXPECT_NE(text.find(frag), std::string::npos) << frag << "\nin:\n" << text;
  // Trips that differ: one hand-off around each core's loop.
  text = ir::print(split(mm_double(true, 2, 1)));
  EXPECT_NE(text.find("    wait_cross_flag #1\n    for i in serial(0, 2) {"), std::string::npos)
      << text;
  EXPECT_NE(text.find("    }\n    set_cross_flag FIX #0 mode=2\n"), std::string::npos) << text;
}

TEST(OriginalSplit, AMixedPipelinedLoopBecomesACrossCorePipeline) {
  // Stages C then V; each core runs batches of 2 iterations, each stage a loop over the
  // batch; W gets a slot per iteration of the batch (2 credits).
  std::string text = ir::print(split(mm_double(true, 3, 3, 2)));
  for (const char* frag :
       {"workspace W_slots: GM f32[2, 96, 32] workspace", "  scope C {\n",
        "    for i_batch in serial(0, 2) {\n"
        "      for i_stage in serial(0, min(2, (3 - (i_batch * 2)))) {\n"
        "        copy A[(((i_batch * 2) + i_stage) * 32):+32, 0:+32] -> a1\n",
        "        wait_cross_flag #1\n"
        "        copy c0 -> W_slots[i_stage:+1, (((i_batch * 2) + i_stage) * 32):+32, 0:+32]\n"
        "        set_cross_flag FIX #0 mode=2\n",
        "  scope V {\n    set_cross_flag MTE2 #1 mode=2\n    set_cross_flag MTE2 #1 mode=2\n"})
    EXPECT_NE(text.find(frag), std::string::npos) << frag << "\nin:\n" << text;
}

TEST(OriginalSplit, TheWholePipelineComputesTheProduct) {
  for (int stages : {0, 2}) {
    ir::Program p = mm_double(true, 2, 2, stages);
    passes::PassOptions o;
    o.original_split = true;
    ir::Program c = passes::run_passes(p, testing::a3(), o);
    std::vector<double> as(64 * 32), bs(32 * 32);
    for (size_t i = 0; i < as.size(); ++i) as[i] = static_cast<double>(i % 7) - 3;
    for (size_t i = 0; i < bs.size(); ++i) bs[i] = static_cast<double>(i % 5) - 2;
    sim::HostData io = {{"A", as}, {"B", bs}};
    sim::SimOptions so;
    so.mode = sim::Mode::Functional;
    so.detect_races = true;
    sim::simulate(lower::lower(c, testing::a3()), testing::a3(), &io, so);
    const auto& y = io.at("Y");
    for (int64_t r = 0; r < 64; ++r)
      for (int64_t n = 0; n < 32; ++n) {
        double s = 0;
        for (int64_t k = 0; k < 32; ++k)
          s += as[static_cast<size_t>(r * 32 + k)] * bs[static_cast<size_t>(k * 32 + n)];
        ASSERT_DOUBLE_EQ(y[static_cast<size_t>(r * 32 + n)], 2 * s)
            << stages << ": " << r << ", " << n;
      }
  }
}

TEST(OriginalSplit, TheAuthorsFlagsKeepTheirCoresLoopSerialAndBindingsGoWhereRead) {
  KernelBuilder kb("flags", 1);
  auto x = kb.input("X", {4, 64}, f32);
  auto idx = kb.input("I", {8}, i32);
  auto y = kb.output("Y", {4, 64}, f32);
  kb.launch();
  stmt([&] {
    auto u = alloc_ub("u", {1, 64}, f32);
    auto l1 = alloc_L1("l1", {1, 64}, f32);
    Ex row = let_("row", load(idx, {Ex(0)}));
    stmt([&] {
      pipelined(4, {2}, [&](Ex i) {
        stmt([&] { copy(x(slice(i, 1), all), u); });
        stmt([&] { set_flag(Pipe::MTE2, Pipe::MTE3, 0); });
        stmt([&] { wait_flag(Pipe::MTE2, Pipe::MTE3, 0); });
        stmt([&] { copy(u, y(slice(row, 1), all)); });
      });
    });
    stmt([&] { pipelined(4, {2}, [&](Ex i) { stmt([&] { copy(x(slice(i, 1), all), l1); }); }); });
  });
  std::string text = ir::print(split(kb.finish()));
  // The Vector's loop is serial (its flags order the serial loop); the Cube's stays
  // Pipelined. `row` is read by the Vector alone.
  EXPECT_NE(text.find("scope C {\n    alloc l1: L1 f32[1, 64]\n    for i in pipelined(0, 4"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("scope V {\n    alloc u: UB f32[1, 64]\n    let row = load(I[0])\n"
                      "    for i.1 in serial(0, 4) {"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("let row"), text.rfind("let row")) << text;
}

TEST(OriginalSplit, WhatItCannotSplitIsRefusedOrLeftAlone) {
  // W written by both cores and read across them.
  KernelBuilder kb("both", 1);
  auto x = kb.input("X", {16, 32}, f32);
  auto w = kb.workspace("W", {16, 32}, f32);
  kb.launch();
  stmt([&] {
    auto u = alloc_ub("u", {16, 32}, f32);
    auto l1 = alloc_L1("l1", {16, 32}, f32);
    auto c0 = alloc_L0C("c0", {16, 32}, f32);
    stmt([&] { copy(x, u); });
    stmt([&] { copy(u, w); });
    stmt([&] { copy(c0, w); });
    stmt([&] { copy(w, l1); });
  });
  auto p = kb.finish();
  testing::expect_user_error([&] { split(p); },
                             {"GM tensor 'W' is written by both the Cube and the Vector code",
                              "give each direction its own workspace"});
  // Scoped programs (expert code) are cv_split's and this pass's business alike: unchanged.
  auto scoped = testing::small_cube_program("scoped");
  EXPECT_TRUE(ir::equal(passes::original_split(scoped, testing::a3(), {}), scoped));
  // Off by default.
  EXPECT_FALSE(passes::PassOptions{}.original_split);
}

}  // namespace
}  // namespace tilepipe
