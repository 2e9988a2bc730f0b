// Steady-state fast-forward (src/sim/steady.h): a run that jumps over steady loop
// iterations reports what the full simulation reports — the same instruction counts
// exactly, cycles and busy time within a small tolerance — and never jumps where the
// iterations are not alike or where every event is wanted.
#include <gtest/gtest.h>

#include "registry.h"
#include "test_util.h"
#include "tilepipe/driver.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/prof.h"
#include "tilepipe/sim.h"

namespace tilepipe {
namespace {

/// Small windows so that small shapes reach a jump; the defaults need ~20k instructions.
sim::FastForwardOptions eager() {
  sim::FastForwardOptions o;
  o.window_instructions = 0;
  o.min_window = 4;
  o.max_window = 8;
  o.trend_tolerance = 1e-2;
  return o;
}

/// The whole report: its lowered program owns the ops the result points to.
driver::RunReport fa(std::map<std::string, std::string> p, sim::FastForwardOptions ff,
                     sim::Mode mode = sim::Mode::Timing, sim::Observer* obs = nullptr,
                     const ChipConfig& chip = testing::a3(),
                     const std::string& variant = "expert") {
  const auto& k = kernels::find_kernel("fa");
  driver::RunRequest req;
  req.variant = variant;
  req.params = driver::resolve_params(k, p);
  req.mode = mode;
  req.fast_forward = ff;
  req.observer = obs;
  return driver::run_kernel(k, req, chip);
}

sim::FastForwardOptions off() {
  sim::FastForwardOptions o;
  o.enabled = false;
  return o;
}

void expect_same_run(const driver::RunReport& full, const driver::RunReport& fast, double tol) {
  const sim::SimResult &exact = full.sim, &ff = fast.sim;
  EXPECT_NEAR(ff.cycles, exact.cycles, tol * exact.cycles);
  // Every iteration does the same instructions: extrapolated counts are exact.
  EXPECT_EQ(ff.instructions, exact.instructions);
  ASSERT_EQ(ff.cores.size(), exact.cores.size());
  for (size_t c = 0; c < ff.cores.size(); ++c) {
    for (size_t p = 0; p < ff.cores[c].pipes.size(); ++p) {
      const auto &a = exact.cores[c].pipes[p], &b = ff.cores[c].pipes[p];
      EXPECT_EQ(b.instructions, a.instructions) << ff.cores[c].name << " pipe " << p;
      EXPECT_NEAR(b.busy_cycles, a.busy_cycles, tol * a.busy_cycles + 1) << ff.cores[c].name;
      EXPECT_NEAR(b.bytes, a.bytes, tol * a.bytes + 1) << ff.cores[c].name;
    }
  }
  // Waits per source site (one site can be several ops of the lowered program).
  auto per_site = [](const sim::SimResult& r) {
    std::map<std::string, int64_t> n;
    for (const auto& w : r.waits) n[w.op->loc.str() + " " + w.op->name] += w.count;
    return n;
  };
  EXPECT_EQ(per_site(ff), per_site(exact));
  EXPECT_NEAR(ff.gm_bytes_hbm + ff.gm_bytes_l2, exact.gm_bytes_hbm + exact.gm_bytes_l2,
              tol * (exact.gm_bytes_hbm + exact.gm_bytes_l2));
}

TEST(FastForward, OneAiCoreJumpsAndMatchesTheFullSimulation) {
  // 16 tasks of 16 KV tiles on one AI core.
  std::map<std::string, std::string> p{{"H", "1"}, {"S", "2048"}, {"block_num", "1"}};
  auto exact = fa(p, off());
  auto ff = fa(p, eager());
  EXPECT_EQ(exact.sim.fast_forward.jumps, 0);
  EXPECT_EQ(ff.sim.fast_forward.jumps, 1);
  EXPECT_GT(ff.sim.fast_forward.iterations, 0);
  expect_same_run(exact, ff, 5e-3);
}

TEST(FastForward, AiCoresSharingBandwidthJumpTogether) {
  // 4 AI cores, 16 tasks each, sharing HBM and L2.
  std::map<std::string, std::string> p{{"H", "2"}, {"S", "4096"}, {"block_num", "4"}};
  auto exact = fa(p, off());
  auto ff = fa(p, eager());
  ASSERT_EQ(ff.sim.fast_forward.jumps, 1);
  // Every running core (AIC + 2 AIV per AI core) skipped the same iterations.
  EXPECT_EQ(ff.sim.fast_forward.iterations % 12, 0);
  expect_same_run(exact, ff, 5e-3);
}

TEST(FastForward, JumpsLandOnTheSamePhaseOfABufferRing) {
  // Tile i uses UB slot i % 3 and flags i % 3: a jump of a non-multiple of 3 iterations
  // would pair the wrong flags (a deadlock); whole turns of the ring match exactly.
  const auto& k = kernels::find_kernel("elementwise");
  driver::RunRequest req;
  req.params = driver::resolve_params(
      k, {{"N", "2097152"}, {"tile", "8192"}, {"block_num", "1"}, {"buffers", "3"}});
  req.mode = sim::Mode::Timing;
  req.fast_forward = off();
  auto exact = driver::run_kernel(k, req, testing::a3());
  req.fast_forward = eager();
  auto ff = driver::run_kernel(k, req, testing::a3());
  ASSERT_EQ(ff.sim.fast_forward.jumps, 1);
  EXPECT_EQ(ff.sim.fast_forward.iterations % 3, 0);
  expect_same_run(exact, ff, 1e-3);
}

TEST(FastForward, JumpsInsideEachBlockOfACoreThatRunsSeveral) {
  // Two AI cores, two blocks each: a jump never crosses a block boundary, and every block's
  // loop jumps on its own.
  ChipConfig chip = testing::a3();
  chip.ai_cores = 2;
  const auto& k = kernels::find_kernel("elementwise");
  driver::RunRequest req;
  req.params = driver::resolve_params(
      k, {{"N", "2097152"}, {"tile", "8192"}, {"block_num", "4"}, {"buffers", "2"}});
  req.mode = sim::Mode::Timing;
  req.fast_forward = off();
  auto exact = driver::run_kernel(k, req, chip);
  req.fast_forward = eager();
  auto ff = driver::run_kernel(k, req, chip);
  EXPECT_GE(ff.sim.fast_forward.jumps, 2);
  expect_same_run(exact, ff, 1e-3);
}

TEST(FastForward, NeverJumpsOverTheIterationThatFillsTheL2) {
  // The baseline re-reads its Q block from GM for every KV tile: hits while the block is
  // L2-resident, misses once the L2 is full (nothing new becomes resident). The L2 here
  // fills half-way through the tasks; a jump stops short of the fill, so the slower regime
  // after it is simulated, not extrapolated from the faster one before it.
  ChipConfig chip = testing::a3();
  chip.l2_bytes = 6 << 20;
  std::map<std::string, std::string> p{{"H", "4"}, {"S", "4096"}, {"block_num", "4"}};
  auto exact = fa(p, off(), sim::Mode::Timing, nullptr, chip, "baseline");
  auto ff = fa(p, eager(), sim::Mode::Timing, nullptr, chip, "baseline");
  EXPECT_GE(ff.sim.fast_forward.jumps, 1);
  // Measured: cycles +0.6 %, AIC busy +1.3 % (a jump across the fill reads +8.7 %).
  expect_same_run(exact, ff, 2e-2);
}

TEST(FastForward, IsDeterministic) {
  std::map<std::string, std::string> p{{"H", "2"}, {"S", "4096"}, {"block_num", "4"}};
  auto a = fa(p, eager()), b = fa(p, eager());
  EXPECT_EQ(a.sim.cycles, b.sim.cycles);  // bit-identical
  EXPECT_EQ(a.sim.fast_forward.iterations, b.sim.fast_forward.iterations);
  EXPECT_GT(a.sim.fast_forward.iterations, 0);
}

TEST(FastForward, NeverJumpsWhenEveryEventIsWanted) {
  std::map<std::string, std::string> p{{"H", "1"}, {"S", "2048"}, {"block_num", "1"}};
  prof::Recorder rec;
  EXPECT_EQ(fa(p, eager(), sim::Mode::Timing, &rec).sim.fast_forward.jumps, 0);  // trace
  EXPECT_EQ(fa(p, eager(), sim::Mode::Functional).sim.fast_forward.jumps, 0);    // values
}

/// Counts the pipe instructions that overlap [from, to).
class WindowCount : public sim::Observer {
 public:
  WindowCount(double from, double to) : from_(from), to_(to) {}
  void on_instr(const sim::InstrEvent& e) override {
    if (e.end > from_ && e.start < to_) ++n;
  }
  int64_t n = 0;

 private:
  double from_, to_;
};

TEST(FastForward, AnObservedWindowIsSimulatedInFullAndTheRestJumps) {
  // 64 tasks of 32 KV tiles on one AI core; the observer wants the middle tenth.
  std::map<std::string, std::string> p{{"H", "2"}, {"S", "4096"}, {"block_num", "1"}};
  auto exact = fa(p, off());
  const double from = 0.45 * exact.sim.cycles, to = 0.55 * exact.sim.cycles;
  WindowCount all(from, to), part(from, to);
  sim::FastForwardOptions o = eager();
  o.enabled = false;
  fa(p, o, sim::Mode::Timing, &all);
  o = eager();
  o.observed_from = from;
  o.observed_to = to;
  auto ff = fa(p, o, sim::Mode::Timing, &part);
  // Jumps before and after the window, none across it: the window holds as many
  // instructions as in the full simulation (within the jitter of where it falls).
  EXPECT_GE(ff.sim.fast_forward.jumps, 2);
  EXPECT_GT(all.n, 1000);
  EXPECT_NEAR(static_cast<double>(part.n), static_cast<double>(all.n), 0.02 * all.n);
  expect_same_run(exact, ff, 5e-3);
  // The whole run observed: no jump.
  o.observed_from = 0;
  o.observed_to = std::numeric_limits<double>::infinity();
  EXPECT_EQ(fa(p, o, sim::Mode::Timing, &part).sim.fast_forward.jumps, 0);
}

TEST(FastForward, NeverJumpsWhenAddressesDependOnData) {
  // SFA's KV rows come from an index table read by scalar loads.
  const auto& k = kernels::find_kernel("sfa");
  driver::RunRequest req;
  req.params = driver::resolve_params(k, {});
  req.mode = sim::Mode::Timing;
  req.fast_forward = eager();
  EXPECT_EQ(driver::run_kernel(k, req, testing::a3()).sim.fast_forward.jumps, 0);
}

TEST(FastForward, DefaultWindowLeavesShortRunsExact) {
  // 16 short iterations never hold the default window's instructions: no jump.
  std::map<std::string, std::string> p{{"H", "1"}, {"S", "2048"}, {"block_num", "1"}};
  EXPECT_EQ(fa(p, sim::FastForwardOptions{}).sim.fast_forward.jumps, 0);
}

TEST(FastForward, IterationsThatGrowAreNeverSkipped) {
  // Iteration i of the outer loop runs i vector ops: no two iterations are alike.
  using namespace lang;
  KernelBuilder k("triangle", 1);
  auto X = k.input("X", {2, 64}, f32);
  auto Y = k.output("Y", {2, 64}, f32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto buf = alloc_ub("buf", {64}, f32);
    copy(X(vid, all), buf);
    set_flag(ir::Pipe::MTE2, ir::Pipe::V, 0);
    wait_flag(ir::Pipe::MTE2, ir::Pipe::V, 0);
    serial(40, [&](Ex i) { serial(i, [&](Ex) { tile::adds(buf, buf, 1.0); }); });
    set_flag(ir::Pipe::V, ir::Pipe::MTE3, 0);
    wait_flag(ir::Pipe::V, ir::Pipe::MTE3, 0);
    copy(buf, Y(vid, all));
  });
  ir::Program prog = k.finish();
  const ChipConfig& chip = testing::a3();
  verify_or_throw(prog, chip);
  auto low = lower::lower(prog, chip);
  sim::SimOptions on, exact;
  on.mode = exact.mode = sim::Mode::Timing;
  on.fast_forward = eager();
  exact.fast_forward = off();
  auto a = sim::simulate(low, chip, nullptr, on);
  auto b = sim::simulate(low, chip, nullptr, exact);
  EXPECT_EQ(a.fast_forward.jumps, 0);
  EXPECT_EQ(a.cycles, b.cycles);
}

}  // namespace
}  // namespace tilepipe
