// Blocks run as the hardware runs them (docs/simulator.md, "Cores and blocks"): with more
// blocks than AI cores, a core starts its next block only when the previous one has
// finished on every core of the AI core, die.block_start_us later; flags do not carry over;
// the kernel's first blocks start after die.launch_us.
#include <gtest/gtest.h>

#include <string>

#include "test_util.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/sim.h"
#include "tilepipe/verify.h"

namespace tilepipe {
namespace {

using namespace lang;

constexpr int64_t kRowsPerAiv = 8, kCols = 256;

/// Each AIV scales its rows of block `cid` (f32, 8 KiB): flags order the copy in, the
/// multiply and the copy out inside a block, and nothing orders one block against the next
/// on the same core (they reuse the same UB).
ir::Program scale_rows(int64_t blocks) {
  KernelBuilder k("scale_rows", blocks);
  auto X = k.input("X", {blocks * 2 * kRowsPerAiv, kCols}, f32);
  auto Y = k.output("Y", {blocks * 2 * kRowsPerAiv, kCols}, f32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {kRowsPerAiv, kCols}, f32);
    Ex row = (cid * 2 + vid) * kRowsPerAiv;
    copy(X(rows(row, kRowsPerAiv), all), x);
    set_flag(Pipe::MTE2, Pipe::V, 0);
    wait_flag(Pipe::MTE2, Pipe::V, 0);
    tile::muls(x, x, 2.0);
    set_flag(Pipe::V, Pipe::MTE3, 0);
    wait_flag(Pipe::V, Pipe::MTE3, 0);
    copy(x, Y(rows(row, kRowsPerAiv), all));
  });
  return k.finish();
}

sim::SimResult run(const ir::Program& p, sim::Mode mode, bool races = false,
                   const ChipConfig& chip = testing::a3()) {
  verify_or_throw(p, chip);
  lower::LoweredProgram low = lower::lower(p, chip);
  sim::SimOptions o;
  o.mode = mode;
  o.detect_races = races;
  sim::HostData io;
  return sim::simulate(low, chip, &io, o);
}

TEST(Blocks, FlagFreeBlocksOnOneCoreAreRaceFreeAtAnyGrid) {
  // 32 blocks: cores 0-7 run two; 512: every core runs 21 or 22 back to back.
  for (int64_t blocks : {24, 32, 512})
    EXPECT_NO_THROW(run(scale_rows(blocks), sim::Mode::Functional, true)) << blocks;
}

/// A die of two AI cores: its four AIVs' copies stay far below the shared bandwidth, so a
/// block's time does not depend on where it falls in the bandwidth ledger's buckets.
ChipConfig two_cores() {
  ChipConfig c = testing::a3();
  c.ai_cores = 2;
  return c;
}

TEST(Blocks, TheNextBlockStartsWhenThePreviousHasFinished) {
  const ChipConfig c = two_cores();
  const double one = run(scale_rows(2), sim::Mode::Timing, false, c).cycles;
  const double two = run(scale_rows(4), sim::Mode::Timing, false, c).cycles;
  // Every core runs the same block twice: the second starts block_start after the first
  // has ended (its copy out included), so the run is the launch, two blocks and one start.
  const double block = one - c.launch_cycles();
  EXPECT_NEAR(two, c.launch_cycles() + 2 * block + c.block_start_cycles(), 1e-9 * two);
}

TEST(Blocks, WaitingForTheOtherCoresIsChargedToBarrier) {
  const sim::SimResult r = run(scale_rows(48), sim::Mode::Timing);
  for (const auto& core : r.cores) {
    const auto& s = core.pipes[static_cast<size_t>(ir::Pipe::S)].account;
    EXPECT_GE(s.barrier, testing::a3().block_start_cycles()) << core.name;
    EXPECT_NEAR(s.sum(), r.cycles, 1e-9 * r.cycles) << core.name;
  }
}

TEST(Blocks, EveryCoreStartsAfterTheLaunch) {
  const ChipConfig& c = testing::a3();
  ASSERT_GT(c.launch_cycles(), 0);
  const sim::SimResult r = run(scale_rows(24), sim::Mode::Timing);
  for (const auto& core : r.cores) {
    EXPECT_DOUBLE_EQ(core.pipes[static_cast<size_t>(ir::Pipe::S)].account.head, c.launch_cycles());
    EXPECT_GE(core.pipes[static_cast<size_t>(ir::Pipe::MTE2)].account.head, c.launch_cycles());
  }
  // The launch moves the whole run, the 48 AIVs' contention for HBM included.
  ChipConfig without = c;
  without.launch_us = 0;
  EXPECT_NEAR(r.cycles - run(scale_rows(24), sim::Mode::Timing, false, without).cycles,
              c.launch_cycles(), 1e-6);
}

TEST(Blocks, FunctionalAndTimingAgreeOnTheBlockSchedule) {
  EXPECT_EQ(run(scale_rows(512), sim::Mode::Functional).cycles,
            run(scale_rows(512), sim::Mode::Timing).cycles);
}

TEST(Blocks, LowerBoundStaysBelowTheTimedRun) {
  const ir::Program p = scale_rows(512);
  const ChipConfig& chip = testing::a3();
  lower::LoweredProgram low = lower::lower(p, chip);
  sim::SimOptions o;
  o.mode = sim::Mode::Timing;
  o.lower_bound_only = true;
  sim::HostData io;
  const double bound = sim::simulate(low, chip, &io, o).cycles;
  EXPECT_GT(bound, chip.launch_cycles() + 20 * chip.block_start_cycles());
  EXPECT_LE(bound, run(p, sim::Mode::Timing).cycles);
}

TEST(Blocks, AFlagLeftSetAtTheEndOfABlockDoesNotCarryOver) {
  // Block cid sets a flag its successor on the core (cid + 24) waits for: on the hardware
  // the second block starts after the first has ended, with nothing left to wait for.
  std::string line;
  auto build = [&] {
    KernelBuilder k("carry", 48);
    auto [cid, vid] = k.launch();
    scope_v([&] {
      auto x = alloc_ub("x", {64}, f32);
      if_(cid >= 24, [&] { wait_flag(Pipe::V, Pipe::MTE2, 1); });
      tile::fill(x, 1.0);
      line = testing::here(1) + ":";
      if_(cid < 24, [&] { set_flag(Pipe::V, Pipe::MTE2, 1); });
    });
    return k.finish();
  };
  try {
    run(build(), sim::Mode::Timing);
    ADD_FAILURE() << "expected an unmatched-flag error";
  } catch (const UserError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("flag V->MTE2 #1 is still set when block cid="), std::string::npos) << text;
    EXPECT_NE(text.find(line), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace tilepipe
