// The cross_drains pass (passes/cross_drains.h): the cross-core sets a kernel leaves
// pending taken back at the end of the waiting core's last scope (golden IR), per AIV where
// the ids are `c + vid`, with loop counts compared as expressions, and nothing where the
// balance is unknown.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "passes/cross_drains.h"
#include "test_util.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/passes.h"
#include "tilepipe/sim.h"

namespace tilepipe {
namespace {

using namespace lang;

/// T.sync_all's spelling: a set of every core of the launch and its wait.
void sync_all(Pipe after) {
  set_cross_flag(after, 15, ir::kSyncAllMode);
  wait_cross_flag(15);
}

ir::Program drained(const ir::Program& p) {
  passes::PassOptions o;
  o.cross_drains = true;
  ir::Program out = passes::cross_drains(p, testing::a3(), o);
  verify_or_throw(out, testing::a3());
  return out;
}

sim::SimResult run(const ir::Program& p) {
  return sim::simulate(lower::lower(p, testing::a3()), testing::a3(), nullptr);
}

/// The Cube primes `credits` hand-offs of flag 0 before a loop of `trips` iterations that
/// hands one more over per iteration; the Vector waits once per iteration of its own loop
/// (`v_trips`). The loops' trip counts are functions of cid.
ir::Program primed(int credits, const std::function<Ex(Ex)>& trips,
                   const std::function<Ex(Ex)>& v_trips) {
  KernelBuilder kb("primed", 2);
  auto [cid, vid] = kb.launch();
  scope_c([&] {
    for (int i = 0; i < credits; ++i) set_cross_flag(Pipe::FIX, 0);
    serial(trips(cid), [&](Ex) { set_cross_flag(Pipe::FIX, 0); });
  });
  scope_v([&] { serial(v_trips(cid), [&](Ex) { wait_cross_flag(0); }); });
  return kb.finish();
}

TEST(CrossDrains, CreditsLeftSetAreWaitedAtTheEndOfTheLastVectorScope) {
  auto p = primed(
      2, [](Ex c) { return c + 3; }, [](Ex c) { return c + 3; });
  EXPECT_THROW(run(p), UserError);  // as written: two sets never waited on
  std::string text = ir::print(drained(p));
  const std::string tail =
      "      wait_cross_flag #0\n"
      "    }\n"
      "    wait_cross_flag #0\n"
      "    wait_cross_flag #0\n"
      "  }\n";
  EXPECT_NE(text.find(tail), std::string::npos) << text;
  EXPECT_GT(run(drained(p)).cycles, 0);
}

TEST(CrossDrains, BalancedOrUnknownCountsAreLeftAlone) {
  // balanced: the same count on both sides, written differently
  auto balanced = primed(
      1, [](Ex c) { return c + 3; }, [](Ex c) { return 4 + c; });
  EXPECT_TRUE(ir::equal(drained(balanced), balanced));
  // counts that differ by more than a constant: no drain
  auto unknown = primed(
      1, [](Ex c) { return c + 3; }, [](Ex c) { return c * 2; });
  EXPECT_TRUE(ir::equal(drained(unknown), unknown));
}

TEST(CrossDrains, EachVectorCoreTakesBackTheFlagItDoesNotWaitOn) {
  // The Cube sets flags 0 and 1 (both reach both AIVs); AIV v waits on flag v: AIV 0 leaves
  // flag 1 set, AIV 1 flag 0. Waits on both would deadlock.
  KernelBuilder kb("per_aiv", 1);
  auto [cid, vid] = kb.launch();
  scope_c([&] {
    set_cross_flag(Pipe::FIX, 0);
    set_cross_flag(Pipe::FIX, 1);
  });
  scope_v([&] { wait_cross_flag(vid); });
  ir::Program p = kb.finish();
  std::string text = ir::print(drained(p));
  for (const char* want :
       {"if (vid == 0) {\n      wait_cross_flag #1", "if (vid == 1) {\n      wait_cross_flag #0"})
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  EXPECT_GT(run(drained(p)).cycles, 0);
}

TEST(CrossDrains, VectorSetsAreTakenBackOnceByTheCube) {
  // Both AIVs set flag 2 once; the Cube never waits: one wait (not one per AIV), unguarded.
  KernelBuilder kb("v2c", 1);
  kb.launch();
  scope_c([&] { pipe_barrier(Pipe::M); });
  scope_v([&] { set_cross_flag(Pipe::MTE3, 2); });
  ir::Program p = kb.finish();
  std::string text = ir::print(drained(p));
  EXPECT_NE(text.find("scope C {\n    pipe_barrier M\n    wait_cross_flag #2\n  }"),
            std::string::npos)
      << text;
  EXPECT_GT(run(drained(p)).cycles, 0);
}

TEST(CrossDrains, SetsUnderARunTimeIfAndSyncAllsAreNotCounted) {
  KernelBuilder kb("guarded", 2);
  auto [cid, vid] = kb.launch();
  scope_c([&] {
    if_(cid == 0, [&] { set_cross_flag(Pipe::FIX, 3); });
    sync_all(Pipe::M);
  });
  scope_v([&] { sync_all(Pipe::S); });
  ir::Program p = kb.finish();
  EXPECT_TRUE(ir::equal(drained(p), p));
}

TEST(CrossDrains, OffByDefaultAndNamedInThePipeline) {
  auto p = primed(
      1, [](Ex) { return Ex(2); }, [](Ex) { return Ex(2); });
  passes::PassOptions o;
  EXPECT_FALSE(o.cross_drains);
  EXPECT_THROW(run(passes::run_passes(p, testing::a3(), o)), UserError);
  passes::switch_pass(o, "cross_drains", true);
  EXPECT_GT(run(passes::run_passes(p, testing::a3(), o)).cycles, 0);
}

}  // namespace
}  // namespace tilepipe
