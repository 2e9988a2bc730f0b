// Timing model against orderings and analytic bounds (multi-buffering, bandwidth sharing).
#include <gtest/gtest.h>

#include <algorithm>

#include "registry.h"
#include "test_util.h"
#include "tilepipe/driver.h"

namespace tilepipe {
namespace {

sim::SimResult timing(const std::string& kernel, std::map<std::string, std::string> params,
                      const std::string& variant = "") {
  const auto& k = kernels::find_kernel(kernel);
  driver::RunRequest req;
  req.variant = variant;
  req.params = driver::resolve_params(k, params);
  req.mode = sim::Mode::Timing;
  return driver::run_kernel(k, req, testing::a3()).sim;
}

/// The busiest pipe of the busiest core: no schedule can beat it.
double max_pipe_busy(const sim::SimResult& r) {
  double m = 0;
  for (const auto& c : r.cores)
    for (const auto& p : c.pipes) m = std::max(m, p.busy_cycles);
  return m;
}

TEST(Timing, TripleBufferedElementwiseRunsAtItsBusiestPipe) {
  // One AI core, a long stream of tiles large enough that a tile's transfer time exceeds
  // the DMA latency spread over the 3 slots: MTE2, V and MTE3 overlap, so the run takes the
  // busiest pipe's time plus one tile's fill/drain.
  auto r = timing("elementwise",
                  {{"N", "2097152"}, {"tile", "8192"}, {"block_num", "1"}, {"buffers", "3"}});
  const auto& c = testing::a3();
  double fill = c.mte2_latency + c.mte3_latency + 8192 * 2 / c.mte3_bw + 200;
  EXPECT_LE(r.cycles, 1.10 * max_pipe_busy(r) + fill);
  EXPECT_GE(r.cycles, max_pipe_busy(r));
}

TEST(Timing, SingleBufferedElementwiseSerialisesTheStages) {
  auto one = timing("elementwise", {{"N", "1048576"}, {"block_num", "1"}, {"buffers", "1"}});
  // Each tile pays the MTE2 latency again: far above the busiest pipe.
  EXPECT_GT(one.cycles, 1.5 * max_pipe_busy(one));
}

TEST(Timing, DoubleBufferedGemmBeatsSingleBuffered) {
  auto g1 = timing("gemm", {{"M", "512"}, {"N", "512"}, {"K", "2048"}}, "l1_tiling");
  auto g2 = timing("gemm", {{"M", "512"}, {"N", "512"}, {"K", "2048"}}, "double_buffer");
  EXPECT_LT(g2.cycles, 0.8 * g1.cycles);
}

TEST(Timing, CoresShareTheDieBandwidth) {
  // The same per-core work on 1 and on 24 AI cores: 48 AIV streams exceed the die's HBM
  // bandwidth (per-core rate x 48 > hbm_bw), so the per-core time grows.
  const auto& c = testing::a3();
  ASSERT_GT(48 * c.mte2_bw_hbm, c.hbm_bw);
  auto one = timing("elementwise", {{"N", "262144"}, {"block_num", "1"}});
  auto all = timing("elementwise", {{"N", std::to_string(262144 * 24)}, {"block_num", "24"}});
  EXPECT_GT(all.cycles, one.cycles);
  // ... but never slower than the die's bandwidth allows for the bytes moved.
  double bytes = 262144.0 * 24 * 2 * 2;  // X and Y, fp16, first touch from HBM
  EXPECT_GE(all.cycles, bytes / c.hbm_bw);
}

TEST(Timing, SecondReadOfTheSameDataHitsL2) {
  // gemm re-reads A and B tiles across tasks: after the first touch they come from L2.
  auto r = timing("gemm", {{"M", "1024"}, {"N", "1024"}, {"K", "256"}});
  EXPECT_GT(r.gm_bytes_l2, r.gm_bytes_hbm);
  EXPECT_DOUBLE_EQ(r.gm_bytes_hbm, (1024.0 * 256 * 2) * 2);  // A and B once each
}

TEST(Timing, ReportsCyclesPerCoreAndTotalIsTheLatestCore) {
  auto r = timing("softmax", {{"R", "512"}, {"C", "256"}});
  double latest = 0;
  for (const auto& c : r.cores) latest = std::max(latest, c.end_cycle);
  EXPECT_EQ(r.cycles, latest);
  EXPECT_EQ(r.cores.size(), 48u);  // softmax is vector-only: 24 x 2 AIV
}

}  // namespace
}  // namespace tilepipe
