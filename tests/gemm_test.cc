// The GEMM ladder (kernels/gemm.cc): every step matches the reference with race detection
// on, at dividing and edge shapes; the steps' timing order; parameter checks.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "kernel_check.h"

namespace tilepipe {
namespace {

const std::vector<std::string> kSteps = {"naive", "l1_tiling", "double_buffer", "swizzle",
                                         "expert"};

struct Shape {
  std::string name;
  std::map<std::string, std::string> params;
};

const std::vector<Shape> kShapes = {
    // Base blocks and L1 blocks divide M, N and K.
    {"dividing", {{"M", "256"}, {"N", "512"}, {"K", "512"}}},
    // Edge tiles in M (80 of 128 rows), N (144 of 256 columns) and K (336 = one L1 block of
    // 256 + a tail block of 64 + 16).
    {"edges", {{"M", "208"}, {"N", "400"}, {"K", "336"}}},
    // One tile, fewer tiles than cores, K smaller than one L1 block.
    {"one_tile_short_k", {{"M", "64"}, {"N", "96"}, {"K", "96"}}},
    // K smaller than one base-K slice.
    {"k_below_base_k", {{"M", "128"}, {"N", "256"}, {"K", "48"}}},
    {"one_fractal", {{"M", "16"}, {"N", "16"}, {"K", "16"}}},
    // M > N: strips of 3 tile rows, the last one 2 rows; 3 K blocks, staggered.
    {"row_strips", {{"M", "640"}, {"N", "512"}, {"K", "768"}}},
    // N > M: strips of 3 tile columns, the last one 2 columns.
    {"column_strips", {{"M", "384"}, {"N", "1280"}, {"K", "256"}}},
    // Several tiles per core, and more cores launched than there are tiles.
    {"seven_cores", {{"M", "512"}, {"N", "768"}, {"K", "512"}, {"block_num", "7"}}},
    {"forty_cores", {{"M", "512"}, {"N", "512"}, {"K", "128"}, {"block_num", "40"}}},
};

struct Case {
  std::string variant;
  Shape shape;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const auto& v : kSteps)
    for (const auto& s : kShapes) out.push_back({v, s});
  return out;
}

/// Runs one step functionally with race and deadlock detection (a race throws) and checks
/// every element of C: |C - ref| <= 1e-3 + 1e-3 |ref|. fp32 results differ from the
/// reference only by summation order; the fp16 C of `expert` by its rounding (2^-11 |ref|).
void expect_matches(const std::string& variant, const std::map<std::string, std::string>& raw) {
  const auto& k = kernels::find_kernel("gemm");
  driver::RunRequest req;
  req.variant = variant;
  req.params = driver::resolve_params(k, raw);
  req.detect_races = true;
  auto rep = driver::run_kernel(k, req, testing::a3());
  ASSERT_TRUE(rep.checked);
  EXPECT_TRUE(rep.correct) << rep.mismatch;
  if (variant != "expert") {
    EXPECT_LT(rep.max_abs_err, k.tol.atol);
  }
}

class GemmStep : public ::testing::TestWithParam<Case> {};

TEST_P(GemmStep, MatchesReferenceWithoutRaces) {
  expect_matches(GetParam().variant, GetParam().shape.params);
}

INSTANTIATE_TEST_SUITE_P(Ladder, GemmStep, ::testing::ValuesIn(cases()), [](const auto& info) {
  return info.param.variant + "_" + info.param.shape.name;
});

driver::RunReport timing(const std::string& variant, int64_t n,
                         const ChipConfig& chip = testing::a3()) {
  const auto& k = kernels::find_kernel("gemm");
  driver::RunRequest req;
  req.variant = variant;
  req.params = driver::resolve_params(
      k, {{"M", std::to_string(n)}, {"N", std::to_string(n)}, {"K", std::to_string(n)}});
  req.mode = sim::Mode::Timing;
  req.fast_forward.enabled = false;  // exact: every iteration simulated
  return driver::run_kernel(k, req, chip);
}

/// Share of the Cube peak: M*N*K multiply-adds over 24 cores x 4096 per cycle.
double cube_pct(const driver::RunReport& r, int64_t n) {
  return 100.0 * static_cast<double>(n * n * n) / (24.0 * 4096.0) / r.sim.cycles;
}

TEST(GemmLadder, EachStepIsFasterThanThePreviousAt4096) {
  // At 4096^3 A and B (64 MiB) stay in the L2 whatever the walk order, so the swizzle has
  // nothing to win there and may cost up to 1 %; it pays from 6144^3 on (docs/fidelity.md).
  double prev = 0;
  for (const auto& v : kSteps) {
    double cycles = timing(v, 4096).sim.cycles;
    if (prev > 0) {
      if (std::string(v) == "swizzle")
        EXPECT_LT(cycles, 1.01 * prev) << v;
      else
        EXPECT_LT(cycles, prev) << v;
    }
    prev = cycles;
  }
}

TEST(GemmLadder, ExpertKeepsTheCubeBusyAndIsBoundByMte2) {
  auto r = timing("expert", 4096);
  EXPECT_GT(cube_pct(r, 4096), 70.0);
  // The whole L0C tile 128x256 needs (128 + 256) x 2 B of A and B per 128 x 256 / 16^2 / 16
  // cube cycles = 96 B/cycle against MTE2's 100 B/cycle from L2: MTE2 is the roof.
  double mte2 = 0, m = 0;
  for (const auto& c : r.sim.cores) {
    mte2 = std::max(mte2, c.pipes[static_cast<size_t>(ir::Pipe::MTE2)].busy_cycles);
    m = std::max(m, c.pipes[static_cast<size_t>(ir::Pipe::M)].busy_cycles);
  }
  EXPECT_GT(mte2, 0.9 * m);
}

TEST(GemmLadder, ExpertOverlapsEveryPipeWhenGmIsNotTheLimit) {
  // The kernel's own schedule, apart from the GM model and the launch: an L2 that holds
  // everything and misses at the L2 rate. 4096^3 is 512 tiles on 24 cores (22 rounds for 21.3
  // rounds of work: at most 97 %, less the ND -> NZ charge on MTE2, and less the Cube's fixed
  // part per mmad, cube.instr_cycles on each [64 x 64] x [64 x 256] of 256 fractals); the
  // L1 / L0 / L0C double buffers hide the rest.
  ChipConfig ideal = testing::a3();
  ideal.l2_bytes = 1ll << 31;
  ideal.mte2_bw_hbm = ideal.mte2_bw_l2;
  ideal.launch_us = 0;
  const double fractals = 4 * 16 * 4,
               ceiling = 97.0 * fractals / (fractals + ideal.cube_instr_cycles);
  EXPECT_GT(cube_pct(timing("expert", 4096, ideal), 4096), ceiling - 7);
}

TEST(GemmLadder, RunsThroughTheLadderDriverInOrder) {
  auto rep = driver::run_ladder(kernels::find_kernel("gemm"),
                                {{"M", "512"}, {"N", "512"}, {"K", "512"}}, testing::a3(), 2,
                                /*fast_forward=*/false);
  ASSERT_EQ(rep.steps.size(), kSteps.size());
  for (size_t i = 0; i < kSteps.size(); ++i) {
    EXPECT_EQ(rep.steps[i].name, kSteps[i]);
    EXPECT_GT(rep.steps[i].time_us, 0);
  }
  EXPECT_LT(rep.reference_us, 0);  // no published reference time for this kernel
}

TEST(GemmParams, BaseBlocksMustBeWholeFractals) {
  const auto& k = kernels::find_kernel("gemm");
  EXPECT_THROW(driver::resolve_params(k, {{"base_m", "48"}}), driver::ParamError);
  EXPECT_THROW(driver::resolve_params(k, {{"base_k", "40"}}), driver::ParamError);
  EXPECT_NO_THROW(driver::resolve_params(k, {{"base_m", "64"}, {"base_n", "128"}}));
}

TEST(GemmParams, AnL1BlockThatDoesNotFitIsACapacityErrorAtTheKernelLine) {
  // 16 slices of 64: A [2, 128, 1024] + B [2, 1024, 256] fp16 = 1.5 MiB of L1.
  testing::expect_user_error(
      [] {
        expect_matches("expert", {{"M", "256"}, {"N", "256"}, {"K", "1024"}, {"l1_k", "16"}});
      },
      {"L1 overflow", "gemm.cc:"});
}

TEST(GemmParams, SwizzleWithoutStaggerAndRowMajorStillMatch) {
  expect_matches("swizzle", {{"M", "640"}, {"N", "512"}, {"K", "768"}, {"stagger", "0"}});
  expect_matches("swizzle", {{"M", "640"}, {"N", "512"}, {"K", "768"}, {"strip", "0"}});
}

TEST(GemmParams, SmallerBaseBlocksStillMatch) {
  expect_matches("expert", {{"M", "272"},
                            {"N", "176"},
                            {"K", "208"},
                            {"base_m", "64"},
                            {"base_n", "64"},
                            {"base_k", "32"},
                            {"l1_k", "2"},
                            {"strip", "2"}});
}

}  // namespace
}  // namespace tilepipe
