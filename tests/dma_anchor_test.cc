// The DMA model against the public on-board copy anchors (A2/A3, all cores reading a
// 12288 x 12288 fp16 matrix from GM): large contiguous blocks 215.82 us, 128-byte rows
// 564.84 us, ND -> NZ into L1 230.24 us (docs/fidelity.md, "Copies"; the kernel is
// kernels/gm_read.cc, the anchors configs/fidelity.json). Each must hold within +-10 % with
// the a3 config, for every kernel alike.
#include <gtest/gtest.h>

#include "registry.h"
#include "test_util.h"

namespace tilepipe {
namespace {

double simulated_us(const std::string& variant) {
  const auto& k = kernels::find_kernel("gm_read");
  driver::RunRequest req;
  req.variant = variant;
  req.params = driver::resolve_params(k, {{"N", "12288"}});
  req.mode = sim::Mode::Timing;
  req.fast_forward.enabled = false;
  return driver::run_kernel(k, req, testing::a3()).sim.cycles / testing::a3().clock_mhz;
}

TEST(DmaAnchors, LargeContiguousBlocks) {
  EXPECT_NEAR(simulated_us("blocks"), 215.82, 21.6);
}

TEST(DmaAnchors, RowsOf128Bytes) {
  EXPECT_NEAR(simulated_us("rows128"), 564.84, 56.5);
}

TEST(DmaAnchors, NdToNzIntoL1) {
  EXPECT_NEAR(simulated_us("nd2nz_l1"), 230.24, 23.0);
}

TEST(DmaAnchors, FastForwardAgreesWithTheExactRun) {
  for (const char* v : {"blocks", "rows128", "nd2nz_l1"}) {
    auto d = driver::run_differential(kernels::find_kernel("gm_read"), v, {{"N", "12288"}},
                                      testing::a3());
    EXPECT_LE(std::abs(d.cycles_err), 0.005) << v;
  }
}

// die.l2_warm_inputs: an input that fits in the L2 is resident at the start (its reads are
// L2 hits, no HBM bytes), one that does not fit is left out (the anchors' 288 MiB matrix
// reads exactly as with an empty L2).
TEST(DmaAnchors, WarmInputsAreL2HitsWhenTheyFit) {
  const auto& k = kernels::find_kernel("gm_read");
  auto run = [&](const std::string& n, int warm) {
    ChipConfig chip = testing::a3();
    chip.l2_warm_inputs = warm;
    driver::RunRequest req;
    req.variant = "blocks";
    req.params = driver::resolve_params(k, {{"N", n}});
    req.mode = sim::Mode::Timing;
    req.fast_forward.enabled = false;
    return driver::run_kernel(k, req, chip).sim;
  };
  auto cold = run("1024", 0), warm = run("1024", 1);
  EXPECT_GT(cold.gm_bytes_hbm, 0);
  EXPECT_EQ(warm.gm_bytes_hbm, 0);
  EXPECT_LT(warm.cycles, cold.cycles);
  auto big_cold = run("12288", 0), big_warm = run("12288", 1);
  EXPECT_EQ(big_warm.gm_bytes_hbm, big_cold.gm_bytes_hbm);
  EXPECT_EQ(big_warm.cycles, big_cold.cycles);
}

}  // namespace
}  // namespace tilepipe
