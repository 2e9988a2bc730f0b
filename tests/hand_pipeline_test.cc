// The hand_pipeline pass (passes/hand_pipeline.h): a Pipelined loop in a hand-synced scope
// scheduled as TileLang-Ascend's compiler schedules it (golden IR), the values of the serial
// loop, the program order when there is one stage, located refusals, off by default.
#include <gtest/gtest.h>

#include <string>

#include "passes/hand_pipeline.h"
#include "test_util.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/passes.h"
#include "tilepipe/sim.h"

namespace tilepipe {
namespace {

using namespace lang;

ir::Program pipelined_out(const ir::Program& p) {
  ir::Program out = passes::hand_pipeline(p, testing::a3(), {});
  verify_or_throw(out, testing::a3());
  return out;
}

/// Sums `trips` chunks of X into s on each AIV: per iteration a GM -> UB copy of chunk i,
/// an MTE2 -> V handshake, the add and a V -> MTE2 handshake. `after` uses `a` once more
/// after the loop; `guarded` puts the copy under `if i > 0` (a nested GM copy).
ir::Program sum_chunks(int64_t trips, bool after = false, bool guarded = false) {
  KernelBuilder kb("sum_chunks", 1);
  auto x = kb.input("X", {1, 64 * trips}, f32);
  auto y = kb.output("Y", {2, 64}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {1, 64}, f32);
    auto s = alloc_ub("s", {1, 64}, f32);
    tile::fill(s, 0.0);
    pipelined(trips, {2}, [&](Ex i) {
      if (guarded)
        if_(i > 0, [&] { copy(x(0, slice(i * 64, 64)), a); });
      else
        copy(x(0, slice(i * 64, 64)), a);
      set_flag(Pipe::MTE2, Pipe::V, 0);
      wait_flag(Pipe::MTE2, Pipe::V, 0);
      tile::add(s, s, a);
      set_flag(Pipe::V, Pipe::MTE2, 0);
      wait_flag(Pipe::V, Pipe::MTE2, 0);
    });
    if (after) tile::add(s, s, a);
    set_flag(Pipe::V, Pipe::MTE3, 0);
    wait_flag(Pipe::V, Pipe::MTE3, 0);
    copy(s, y(vid, all));
  });
  return kb.finish();
}

/// Y of a functional run with race detection, X = 0, 0.25, 0.5, ...
std::vector<double> run(const ir::Program& p, int64_t trips) {
  std::vector<double> xs(64 * trips);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<double>(i % 97) * 0.25;
  sim::HostData io = {{"X", xs}};
  sim::SimOptions o;
  o.mode = sim::Mode::Functional;
  o.detect_races = true;
  sim::simulate(lower::lower(p, testing::a3()), testing::a3(), &io, o);
  return io.at("Y");
}

TEST(HandPipeline, CopiesOfLaterIterationsRunAheadOverVersionedBuffers) {
  // Blocks: the copy (stage 0, ordered right after the add that reads it), the flags and the
  // add (stage 2): two copies in the prologue; each steady iteration adds i - 2 and copies
  // i into the version that add read (the original's race at four iterations). `a_v`
  // replaces `a`, whose allocation goes.
  EXPECT_EQ(ir::print(pipelined_out(sum_chunks(4))),
            R"(kernel sum_chunks(X: GM f32[1, 256] in, Y: GM f32[2, 64] out) block_num=1 {
  scope V {
    alloc s: UB f32[1, 64]
    tile.fill s, 0.0
    alloc a_v: UB f32[2, 1, 64]
    copy X[0:+1, 0:+64] -> a_v[0:+1, 0:+1, 0:+64]
    copy X[0:+1, 64:+64] -> a_v[1:+1, 0:+1, 0:+64]
    for i_pipe in serial(2, 4) {
      set_flag MTE2->V #0
      wait_flag MTE2->V #0
      tile.add s, s, a_v[((i_pipe - 2) % 2):+1, 0:+1, 0:+64]
      copy X[0:+1, (i_pipe * 64):+64] -> a_v[(i_pipe % 2):+1, 0:+1, 0:+64]
      set_flag V->MTE2 #0
      wait_flag V->MTE2 #0
    }
    set_flag MTE2->V #0
    wait_flag MTE2->V #0
    tile.add s, s, a_v[0:+1, 0:+1, 0:+64]
    set_flag V->MTE2 #0
    wait_flag V->MTE2 #0
    set_flag MTE2->V #0
    wait_flag MTE2->V #0
    tile.add s, s, a_v[1:+1, 0:+1, 0:+64]
    set_flag V->MTE2 #0
    wait_flag V->MTE2 #0
    set_flag V->MTE3 #0
    wait_flag V->MTE3 #0
    copy s -> Y[vid:+1, 0:+64]
  }
}
)");
}

TEST(HandPipeline, TheScheduleComputesTheSerialLoopsValues) {
  // Two iterations: both copies in the prologue, no version reused, race-free.
  auto y = run(pipelined_out(sum_chunks(2)), 2);
  for (size_t j = 0; j < 128; ++j)
    EXPECT_DOUBLE_EQ(y[j], static_cast<double>(j % 64 % 97) * 0.25 + ((j % 64 + 64) % 97) * 0.25)
        << j;
}

TEST(HandPipeline, OneStageIsTheProgramOrder) {
  // No GM -> UB copy (the original's L1 is not its copy pattern): a serial loop, as written.
  KernelBuilder kb("no_copy", 1);
  kb.launch();
  scope_v([&] {
    auto s = alloc_ub("s", {1, 64}, f32);
    tile::fill(s, 0.0);
    pipelined(4, {2}, [&](Ex) {
      pipe_barrier(Pipe::V);
      tile::adds(s, s, 1.0);
    });
  });
  auto p = kb.finish();
  std::string text = ir::print(pipelined_out(p));
  EXPECT_NE(
      text.find("for i in serial(0, 4) {\n      pipe_barrier V\n      tile.add s, s, 1.0\n    }"),
      std::string::npos)
      << text;
}

TEST(HandPipeline, WhatTheScheduleCannotModelIsRefusedAtTheLoop) {
  testing::expect_user_error(
      [] { pipelined_out(sum_chunks(4, /*after=*/true)); },
      {"'a' needs 2 versions but is used outside the loop", "hand_pipeline_test.cc:"});
  testing::expect_user_error([] { pipelined_out(sum_chunks(4, false, /*guarded=*/true)); },
                             {"the GM copy nested in the statement at line"});
  KernelBuilder kb("run_time_trips", 2);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto s = alloc_ub("s", {1, 64}, f32);
    pipelined(cid + 2, {2}, [&](Ex) {
      pipe_barrier(Pipe::V);
      tile::adds(s, s, 1.0);
    });
  });
  auto p = kb.finish();
  testing::expect_user_error([&] { pipelined_out(p); },
                             {"a run-time trip count or a step other than 1 is not modelled"});
}

/// A loop whose condition reads the copied buffer `a`: in an if, or in a select.
ir::Program condition_on_copy(bool via_select) {
  KernelBuilder kb("condition_on_copy", 1);
  auto x = kb.input("X", {1, 256}, i32);
  kb.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {1, 64}, i32);
    auto s = alloc_ub("s", {1, 64}, f32);
    pipelined(4, {2}, [&](Ex i) {
      copy(x(0, slice(i * 64, 64)), a);
      pipe_barrier(Pipe::V);
      if (via_select) {
        Ex half = select(load(a, {0, 0}) > 0, 0, 32);
        tile::adds(s(0, slice(half, 32)), s(0, slice(half, 32)), 1.0);
      } else {
        if_(load(a, {0, 0}) > 0, [&] { tile::adds(s, s, 1.0); });
      }
    });
  });
  return kb.finish();
}

TEST(HandPipeline, AConditionReadingACopiedBufferIsRefused) {
  for (bool via_select : {false, true})
    testing::expect_user_error([&] { pipelined_out(condition_on_copy(via_select)); },
                               {"a condition reads 'a', which a GM copy writes"});
}

TEST(HandPipeline, OffByDefaultTheLoopIsMultibuffersError) {
  passes::PassOptions o;
  EXPECT_FALSE(o.hand_pipeline);
  testing::expect_user_error(
      [&] { passes::run_passes(sum_chunks(4), testing::a3(), o); },
      {"Pipelined loop in a scope with hand-written flags", "--pass hand_pipeline"});
  passes::switch_pass(o, "hand_pipeline", true);
  EXPECT_TRUE(
      ir::equal(passes::run_passes(sum_chunks(4), testing::a3(), o), pipelined_out(sum_chunks(4))));
}

}  // namespace
}  // namespace tilepipe
