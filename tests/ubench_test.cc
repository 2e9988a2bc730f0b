// The microbenchmarks of kernels/ubench.cc: each variant's slope over `ops` (cycles per
// repeated instruction) is the formula of docs/simulator.md for the parameter it isolates,
// read from the a3 config, so a board's slope for the same variant decides that parameter
// (docs/fidelity.md, "Microbenchmarks").
#include <gtest/gtest.h>

#include <cmath>

#include "registry.h"
#include "test_util.h"

namespace tilepipe {
namespace {

/// Cycles per measured instruction: the time at ops=128 less the time at ops=64, over 64.
double slope(const std::string& variant, std::map<std::string, std::string> params = {}) {
  const auto& k = kernels::find_kernel("ubench");
  auto cycles = [&](int ops) {
    auto p = params;
    p["ops"] = std::to_string(ops);
    driver::RunRequest req;
    req.variant = variant;
    req.params = driver::resolve_params(k, p);
    req.mode = sim::Mode::Timing;
    req.fast_forward.enabled = false;
    return driver::run_kernel(k, req, testing::a3()).sim.cycles;
  };
  return (cycles(128) - cycles(64)) / 64;
}

const ChipConfig& c() {
  return testing::a3();
}

/// The scalar unit's work per iteration of a loop of one vector compute op: its issue, the
/// count form's mask writes (issue.vector_mask_ops) and the loop's increment-and-branch.
double vector_issue() {
  return c().issue_cycles + c().vector_mask_ops * c().scalar_op_cycles + c().scalar_op_cycles;
}

TEST(Ubench, DependentSmallAddsPayOccupancyPlusStartupEach) {
  // 16 x 16 f32 = 4 repeats; each add reads the previous result.
  const double v = 4 * c().vector_simple_cycles_per_repeat + c().vector_startup_add;
  EXPECT_NEAR(slope("vec_chain"), std::max(v, vector_issue()), 0.01);
}

TEST(Ubench, IndependentSmallAddsAreBoundByTheScalarIssue) {
  ASSERT_GT(vector_issue(), 4 * c().vector_simple_cycles_per_repeat);
  EXPECT_NEAR(slope("vec_indep"), vector_issue(), 0.01);
  // 64 repeats an add: the V pipe's occupancy is the slope.
  EXPECT_NEAR(slope("vec_indep", {{"elems", "4096"}}), 64 * c().vector_simple_cycles_per_repeat,
              0.01);
}

TEST(Ubench, DependentExpsPayTheTranscendentalRateAndStartup) {
  const double per_rep = 64 / c().vector_transcendental_elems_per_cycle;  // f32 repeat
  EXPECT_NEAR(slope("vec_exp_chain"), 4 * per_rep + c().vector_startup_exp, 0.01);
}

TEST(Ubench, IndependentReducesPayTheReduceRate) {
  // A 256-element f32 sum: four repeated reduces (the cheaper lowering with the a3 values).
  EXPECT_NEAR(slope("reduce"), 4 * c().vector_reduce_cycles_per_repeat, 0.01);
}

TEST(Ubench, Mte2StreamsAtTheL2RateAndShortBurstsPayTheMinimumBurst) {
  // 32 bursts per copy, eight copies in flight; after the first eight the tiles are L2 hits.
  const double long_bursts = 32 * 512 / c().mte2_bw_l2;
  EXPECT_NEAR(slope("mte2", {{"rows", "32"}, {"bytes", "512"}, {"pitch", "512"}}), long_bursts,
              0.02 * long_bursts);
  const double short_bursts = 32 * c().dma_min_burst_bytes / c().mte2_bw_l2;
  EXPECT_NEAR(slope("mte2", {{"rows", "32"}, {"bytes", "128"}, {"pitch", "512"}}), short_bursts,
              0.02 * short_bursts);
}

TEST(Ubench, Mte3StreamsAtItsRate) {
  const double b = 32 * 512 / c().mte3_bw;
  EXPECT_NEAR(slope("mte3", {{"rows", "32"}, {"bytes", "512"}, {"pitch", "512"}}), b, 0.02 * b);
}

TEST(Ubench, AccumulatingMmadsPayTheirFractalsAndAFixedPartEach) {
  // [128 x 256] x [256 x 32]: 8 x 2 x 16 fractals and cube.instr_cycles per instruction, the
  // pipeline head paid once for the chain.
  ASSERT_GT(c().cube_instr_cycles, 0);
  const double fixed = c().cube_instr_cycles;
  EXPECT_NEAR(slope("cube"), 8 * 2 * 16 / c().cube_fractals_per_cycle + fixed, 0.01);
  EXPECT_NEAR(slope("cube", {{"n16", "8"}, {"k16", "8"}}),
              8 * 8 * 8 / c().cube_fractals_per_cycle + fixed, 0.01);
  // The narrow GEMM's small mmad (N = 32, K = 16): the fixed part outweighs the fractals.
  EXPECT_NEAR(slope("cube", {{"n16", "2"}, {"k16", "1"}}),
              8 * 2 * 1 / c().cube_fractals_per_cycle + fixed, 0.01);
}

TEST(Ubench, ReadersOfALineStillFillingWaitForTheFill) {
  // Every core reads the same fresh rows at once, each read on its core's chain: one core's
  // miss brings them from HBM and the others' hits wait for that fill, so sharing a line
  // makes its first read no cheaper than a miss, less the hitter's own transfer at the L2's
  // rate instead of the HBM's (its wait is capped at its own end + dma.mte2_latency). Had
  // the hits read at the L2's latency, the cores would take turns missing and the slope
  // would fall towards the mean of a miss and a hit.
  const double alone = slope("l2_shared", {{"cores", "1"}});
  EXPECT_GT(alone, c().mte2_latency);
  const double bytes = 4 * 512;  // a copy: rows 4 x bytes 512
  const double rate_gain = bytes / c().mte2_bw_hbm - bytes / c().mte2_bw_l2;
  for (const char* cores : {"4", "24"}) {
    const double shared = slope("l2_shared", {{"cores", cores}});
    EXPECT_LE(shared, alone + 0.01) << cores;
    // (plus a few cycles of the ledger's 256-cycle buckets)
    EXPECT_GE(shared, alone - 1.1 * rate_gain) << cores;
  }
}

TEST(Ubench, CrossCoreRoundTripIsTwoFlagLatencies) {
  const double s = slope("cross_flag");
  EXPECT_GE(s, 2 * c().cross_flag_latency);
  EXPECT_LE(s, 2 * c().cross_flag_latency + 4 * c().issue_cycles + 2 * c().scalar_op_cycles);
}

TEST(Ubench, DependentScalarGmReadsHitTheDataCache) {
  // 16 i32 per 64-byte line: one miss in sixteen reads; each read then moved into its
  // register and the loop branch.
  const double per_line = c().scalar_dcache_line / 4.0;
  const double read =
      ((per_line - 1) * c().scalar_dcache_hit_cycles + c().scalar_load_cycles) / per_line;
  EXPECT_NEAR(slope("scalar_gm"), read + 2 * c().scalar_op_cycles, 0.05 * read);
}

TEST(Ubench, BadParametersAreRefusedWithTheFix) {
  const auto& k = kernels::find_kernel("ubench");
  for (auto [key, value, needle] :
       {std::tuple{"elems", "100", "multiple of 64"}, std::tuple{"pitch", "64", ">= bytes"},
        std::tuple{"rows", "64", "fit the"}}) {
    std::map<std::string, std::string> p = {{key, value}};
    try {
      driver::resolve_params(k, p);
      ADD_FAILURE() << key << "=" << value << " was accepted";
    } catch (const driver::ParamError& e) {
      EXPECT_NE(e.message.find(needle), std::string::npos) << e.message;
    }
  }
}

}  // namespace
}  // namespace tilepipe
