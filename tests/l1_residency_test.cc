// L1 residency: an invariant GM -> L1 load leaves the loops that reuse it (golden IR),
// loads that change per iteration or share their buffer stay, and the FA auto kernel gives
// the same values with less GM traffic.
#include "passes/l1_residency.h"

#include <gtest/gtest.h>

#include "registry.h"
#include "test_util.h"
#include "tilepipe/driver.h"
#include "tilepipe/lang.h"

namespace tilepipe {
namespace {

using namespace lang;

/// for t: for j: q -> q_l1 (invariant in j, not in t), k_j -> k_l1; both into L0 and a gemm.
ir::Program reuse(bool q_depends_on_j) {
  KernelBuilder kb("reuse", 1);
  auto Q = kb.input("Q", {2, 4, 32, 32}, f16);
  auto K = kb.input("K", {4, 32, 32}, f16);
  auto Y = kb.output("Y", {32, 32}, f32);
  scope_c([&] {
    auto q_l1 = alloc_L1("q_l1", {32, 32}, f16);
    auto k_l1 = alloc_L1("k_l1", {32, 32}, f16);
    auto a = alloc_L0A("a", {32, 32}, f16);
    auto b = alloc_L0B("b", {32, 32}, f16);
    auto c = alloc_L0C("c", {32, 32}, f32);
    serial(2, [&](Ex t) {
      serial(4, [&](Ex j) {
        copy(Q(t, q_depends_on_j ? j : Ex(0), all, all), q_l1);
        copy(K(j, all, all), k_l1);
        copy(q_l1, a);
        copy(k_l1, b);
        gemm(a, b, c);
        copy(c, Y);
      });
    });
  });
  return kb.finish();
}

TEST(L1Residency, InvariantLoadLeavesTheInnerLoopOnly) {
  auto p = passes::l1_residency(reuse(false), testing::a3(), {});
  std::string ir = ir::print(p);
  EXPECT_NE(ir.find("for i in serial(0, 2) {\n      copy Q[i:+1, 0:+1, 0:+32, 0:+32] -> q_l1\n"
                    "      for j in serial(0, 4) {\n        copy K[j:+1"),
            std::string::npos)
      << ir;
}

TEST(L1Residency, LoadsThatChangeStay) {
  auto p = reuse(true);
  EXPECT_TRUE(ir::equal(passes::l1_residency(p, testing::a3(), {}), p));
}

TEST(L1Residency, FaAutoKeepsQResidentWithTheSameValuesAndLessTraffic) {
  const auto& k = kernels::find_kernel("fa");
  driver::RunRequest req;
  req.variant = "auto";
  req.params = driver::resolve_params(k, {{"S", "512"}, {"H", "1"}});
  req.detect_races = true;
  auto on = driver::run_kernel(k, req, testing::a3());
  req.pass_options.l1_residency = false;
  auto off = driver::run_kernel(k, req, testing::a3());
  EXPECT_TRUE(on.correct) << on.mismatch;
  EXPECT_EQ(on.outputs.at("O"), off.outputs.at("O"));
  // Q (32 KiB per task) is read once instead of once per KV tile (4 tiles, 4 tasks).
  double on_gm = on.sim.gm_bytes_hbm + on.sim.gm_bytes_l2;
  double off_gm = off.sim.gm_bytes_hbm + off.sim.gm_bytes_l2;
  EXPECT_NEAR(off_gm - on_gm, 3.0 * 32768 * 4, 1.0);
  // With many KV tiles per task the saved MTE2 traffic is time (at 4 tiles the resident Q's
  // load at each task start, no longer overlapped by multi-buffering, costs more).
  req.mode = sim::Mode::Timing;
  req.detect_races = false;
  req.params = driver::resolve_params(k, {{"S", "4096"}, {"H", "1"}});
  double off_cycles = driver::run_kernel(k, req, testing::a3()).sim.cycles;
  req.pass_options.l1_residency = true;
  EXPECT_LT(driver::run_kernel(k, req, testing::a3()).sim.cycles, off_cycles);
}

}  // namespace
}  // namespace tilepipe
